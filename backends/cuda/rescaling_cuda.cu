/* rescaling_cuda.cu: Rescaling on a GPU (models/rescaling.c says what the
 * layer is; rescaling_cpu.c is the reference).
 *   x: (B, n) -> y: (B, n) = x * scale + offset;  dx = dy * scale
 * One thread per element, over elementwise.h's mr_rescale (unfused
 * __fmul_rn/__fadd_rn): the CPU's bits. With offset 0 and scale s the
 * backward is the same kernel.
 * Relies on: kernels_cuda.h (the context's stream, the launch). */
#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"

/* out (total) = in * scale + offset */
__global__ static void rescaling_kernel(size_t total, float scale, float offset,
                                        const float *__restrict__ in, float *__restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = mr_rescale(in[i], scale, offset);
}

static mr_status rescaling_pass(mr_exec_ctx *run, size_t total, float scale, float offset,
                                const mr_dfloat *in, mr_dfloat *out) {
    if (total == 0) return MR_OK;
    MR_CUDA_LAUNCH(rescaling_kernel, mr_cuda_blocks(total), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, total, scale, offset, mr_dfloat_cptr(in),
                   mr_dfloat_ptr(out));
    mr_cuda_launched(run->be, run->err, "rescaling_kernel");
    return MR_OK;
}

static mr_status rescaling_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                   mr_dfloat *y) {
    const size_t total = (size_t)batch * (size_t)mr_shape_size(l->in);
    return rescaling_pass(run, total, l->cfg->rescale, l->cfg->offset, x, y);
}

static mr_status rescaling_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                    const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    if (dx == NULL) return MR_OK;
    /* dy * scale + 0, as the CPU's loop (a -0 product becomes +0) */
    const size_t total = (size_t)batch * (size_t)mr_shape_size(l->in);
    return rescaling_pass(run, total, l->cfg->rescale, 0.0f, dy, dx);
}

const mr_layer_kernels mr_rescaling_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,
    .forward = rescaling_forward,
    .backward = rescaling_backward,
    .destroy = NULL,
    .describe = NULL,
    .fuses_relu = 0,
    .device_order = NULL,
};
