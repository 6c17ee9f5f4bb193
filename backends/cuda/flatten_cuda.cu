/* flatten_cuda.cu: Flatten on a GPU: a device-to-device copy on the
 * compute stream (flatten_cpu.c is the reference; the model skips even
 * that, flatten.c's .view: these serve callers with separate buffers).
 * Relies on: kernels_cuda.h (the context's stream, MR_CUDA_TRY). */
#include "backends/cuda/kernels_cuda.h"

/* dst = src, n floats of device memory, queued on the compute stream
 * (nothing when they are one buffer: cudaMemcpyAsync wants no overlap) */
static mr_status copy_floats(mr_backend *be, mr_dfloat *dst, const mr_dfloat *src, size_t n,
                             mr_error *err) {
    if (n == 0 || mr_dfloat_ptr(dst) == mr_dfloat_cptr(src)) return MR_OK;
    MR_CUDA_TRY(be, err,
                cudaMemcpyAsync(mr_dfloat_ptr(dst), mr_dfloat_cptr(src), sizeof(float) * n,
                                cudaMemcpyDeviceToDevice, mr_cuda(be)->stream));
    return MR_OK;
}

static mr_status flatten_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                 mr_dfloat *y) {
    /* x (batch, H, W, C) -> y (batch, H*W*C): the same floats */
    return copy_floats(run->be, y, x, (size_t)batch * (size_t)mr_shape_size(l->in), run->err);
}

static mr_status flatten_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                  const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    if (dx == NULL) return MR_OK;
    return copy_floats(run->be, dx, dy, (size_t)batch * (size_t)mr_shape_size(l->in), run->err);
}

const mr_layer_kernels mr_flatten_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,        .forward = flatten_forward, .backward = flatten_backward,
    .destroy = NULL,      .describe = NULL,           .fuses_relu = 0,
    .device_order = NULL,
};
