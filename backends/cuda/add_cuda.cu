/* add_cuda.cu: Add on a GPU (models/add.c says what the layer is;
 * add_cpu.c is the reference).
 *   x, x2: (B, S) -> y: (B, S); dx = dx2 = dy
 * y may be x (in place): the model sums gradients with it (model.c). The
 * sum goes through __fadd_rn, the CPU's bits.
 * Relies on: kernels_cuda.h (the context's stream, the launch). */
#include "backends/cuda/kernels_cuda.h"

/* y (n) = a + b, elementwise; y may be a */
__global__ static void add_kernel(size_t n, const float *a, const float *b, float *y) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __fadd_rn(a[i], b[i]);
}

static mr_status add_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                             mr_dfloat *y) {
    const size_t n = (size_t)batch * (size_t)mr_shape_size(l->out);
    if (n == 0) return MR_OK;
    MR_CUDA_LAUNCH(add_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(run->be)->stream, n,
                   mr_dfloat_cptr(x), mr_dfloat_cptr(l->x2), mr_dfloat_ptr(y));
    mr_cuda_launched(run->be, run->err, "add_kernel");
    return MR_OK;
}

/* dst = src, n floats, on the compute stream */
static mr_status copy_floats(mr_backend *be, mr_dfloat *dst, const mr_dfloat *src, size_t n,
                             mr_error *err) {
    if (n == 0 || dst == NULL || mr_dfloat_ptr(dst) == mr_dfloat_cptr(src)) return MR_OK;
    MR_CUDA_TRY(be, err,
                cudaMemcpyAsync(mr_dfloat_ptr(dst), mr_dfloat_cptr(src), sizeof(float) * n,
                                cudaMemcpyDeviceToDevice, mr_cuda(be)->stream));
    return MR_OK;
}

static mr_status add_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                              const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    const size_t n = (size_t)batch * (size_t)mr_shape_size(l->out);
    MR_CHECK(copy_floats(run->be, dx, dy, n, run->err));
    return copy_floats(run->be, l->dx2, dy, n, run->err);
}

const mr_layer_kernels mr_add_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,   .forward = add_forward, .backward = add_backward,
    .destroy = NULL, .describe = NULL,
    .fuses_relu = 0,
};
