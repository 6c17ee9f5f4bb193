/* relu_cuda.cu: Keras's ReLU layer on a GPU (models/relu.c; relu_cpu.c is
 * the reference). One thread per element over runtime/elementwise.h's
 * mr_relu_layer and its derivative, the CPU loop's very functions (their
 * products and sums rounded one by one): the same bits.
 * Relies on: kernels_cuda.h (the context's stream, the launch). */
#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"

__global__ static void relu_forward_kernel(size_t n, float mx, float ns, float t,
                                           const float *__restrict__ x, float *__restrict__ y) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = mr_relu_layer(x[i], mx, ns, t);
}

__global__ static void relu_backward_kernel(size_t n, float mx, float ns, float t,
                                            const float *__restrict__ x,
                                            const float *__restrict__ dy, float *__restrict__ dx) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dx[i] = mr_fmul(dy[i], mr_relu_layer_grad(x[i], mx, ns, t));
}

static mr_status relu_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                              mr_dfloat *y) {
    const size_t n = (size_t)batch * (size_t)mr_shape_size(l->in);
    if (n == 0) return MR_OK;
    const mr_layer_cfg *c = l->cfg;
    MR_CUDA_LAUNCH(relu_forward_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, n, c->max_value, c->negative_slope, c->threshold,
                   mr_dfloat_cptr(x), mr_dfloat_ptr(y));
    mr_cuda_launched(run->be, run->err, "relu_forward_kernel");
    return MR_OK;
}

static mr_status relu_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                               const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)y;
    const size_t n = (size_t)batch * (size_t)mr_shape_size(l->in);
    if (dx == NULL || n == 0) return MR_OK;
    const mr_layer_cfg *c = l->cfg;
    MR_CUDA_LAUNCH(relu_backward_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, n, c->max_value, c->negative_slope, c->threshold,
                   mr_dfloat_cptr(x), mr_dfloat_cptr(dy), mr_dfloat_ptr(dx));
    mr_cuda_launched(run->be, run->err, "relu_backward_kernel");
    return MR_OK;
}

const mr_layer_kernels mr_relu_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,    .forward = relu_forward, .backward = relu_backward, .destroy = NULL,
    .describe = NULL, .fuses_relu = 0,         .device_order = NULL,
};
