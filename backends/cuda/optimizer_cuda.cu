/* optimizer_cuda.cu: the fused updates on a GPU (optimizer.h): one
 * grid-stride pass over the flat buffers with elementwise.h's per-element
 * math, the very functions the CPU loops of optimizer_cpu.c run. */
#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"

__global__ static void adam_kernel(float *__restrict__ w, const float *__restrict__ g,
                                   float *__restrict__ m, float *__restrict__ v, size_t n,
                                   float alpha, float b1, float b2, float eps) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        mr_adam_update(&w[i], g[i], &m[i], &v[i], alpha, b1, b2, eps);
}

__global__ static void sgd_kernel(float *__restrict__ w, const float *__restrict__ g,
                                  float *__restrict__ vel, size_t n, float lr, float momentum,
                                  int nesterov) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (vel != NULL)
            mr_sgd_update(&w[i], g[i], &vel[i], lr, momentum, nesterov);
        else
            w[i] -= lr * g[i];
    }
}

static mr_status cuda_adam(mr_backend *be, mr_dfloat *w, const mr_dfloat *g, mr_dfloat *m,
                           mr_dfloat *v, size_t n, float alpha, float b1, float b2, float eps,
                           mr_error *err) {
    if (n == 0) return MR_OK;
    MR_CUDA_LAUNCH(adam_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_ptr(w), mr_dfloat_cptr(g), mr_dfloat_ptr(m), mr_dfloat_ptr(v), n,
                   alpha, b1, b2, eps);
    mr_cuda_launched(be, err, "adam_kernel");
    return MR_OK;
}

static mr_status cuda_sgd(mr_backend *be, mr_dfloat *w, const mr_dfloat *g, mr_dfloat *vel,
                          size_t n, float lr, float momentum, int nesterov, mr_error *err) {
    if (n == 0) return MR_OK;
    /* momentum 0: plain SGD, no velocity (optimizer.h) */
    MR_CUDA_LAUNCH(sgd_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_ptr(w), mr_dfloat_cptr(g),
                   momentum != 0.0f ? mr_dfloat_ptr(vel) : NULL, n, lr, momentum, nesterov);
    mr_cuda_launched(be, err, "sgd_kernel");
    return MR_OK;
}

const mr_optimizer_kernels mr_optimizer_cuda = {.adam = cuda_adam, .sgd = cuda_sgd};
