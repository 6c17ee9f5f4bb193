/* optimizer_cuda.cu: the fused updates on a GPU (optimizer.h): one
 * grid-stride pass over the flat buffers with elementwise.h's per-element
 * math, the very functions the CPU loops of optimizer_cpu.c run; and the
 * check of a buffer for NaN and Inf (on_nan, checkpoints). */
#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"

/* flag (or NULL): set to 1 where a gradient read is NaN or Inf; every
 * writer writes the same value, so the race between threads is benign */
__global__ static void adam_kernel(float *__restrict__ w, const float *__restrict__ g,
                                   float *__restrict__ m, float *__restrict__ v, size_t n,
                                   float alpha, float b1, float b2, float eps, double *flag) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (flag != NULL && mr_nonfinite(g[i])) flag[0] = 1.0;
        mr_adam_update(&w[i], g[i], &m[i], &v[i], alpha, b1, b2, eps);
    }
}

__global__ static void sgd_kernel(float *__restrict__ w, const float *__restrict__ g,
                                  float *__restrict__ vel, size_t n, float lr, float momentum,
                                  int nesterov, double *flag) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (flag != NULL && mr_nonfinite(g[i])) flag[0] = 1.0;
        if (vel != NULL)
            mr_sgd_update(&w[i], g[i], &vel[i], lr, momentum, nesterov);
        else
            w[i] -= lr * g[i];
    }
}

/* With `bad`: a zeroed device flag for the update kernel to set (NULL:
 * none), and after the kernel, its value on the host (a wait for the
 * stream, as the separate check made). */
static mr_status flag_begin(mr_backend *be, int *bad, double **flag, double **host, mr_error *err) {
    *flag = *host = NULL;
    if (bad == NULL) return MR_OK;
    MR_CHECK(mr_cuda_rows(be, 1, flag, host, err));
    MR_CUDA_TRY(be, err, cudaMemsetAsync(*flag, 0, sizeof(double), mr_cuda(be)->stream));
    return MR_OK;
}

static mr_status flag_end(mr_backend *be, int *bad, double *flag, double *host, mr_error *err) {
    if (bad == NULL) return MR_OK;
    MR_CUDA_TRY(
        be, err,
        cudaMemcpyAsync(host, flag, sizeof(double), cudaMemcpyDeviceToHost, mr_cuda(be)->stream));
    MR_CHECK(mr_cuda_wait(be, "the check for NaN and Inf", err));
    *bad = host[0] != 0.0;
    return MR_OK;
}

static mr_status cuda_adam(mr_backend *be, mr_dfloat *w, const mr_dfloat *g, mr_dfloat *m,
                           mr_dfloat *v, size_t n, float alpha, float b1, float b2, float eps,
                           int *bad, mr_error *err) {
    if (bad != NULL) *bad = 0;
    if (n == 0) return MR_OK;
    double *flag, *host;
    MR_CHECK(flag_begin(be, bad, &flag, &host, err));
    MR_CUDA_LAUNCH(adam_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_ptr(w), mr_dfloat_cptr(g), mr_dfloat_ptr(m), mr_dfloat_ptr(v), n,
                   alpha, b1, b2, eps, flag);
    mr_cuda_launched(be, err, "adam_kernel");
    return flag_end(be, bad, flag, host, err);
}

static mr_status cuda_sgd(mr_backend *be, mr_dfloat *w, const mr_dfloat *g, mr_dfloat *vel,
                          size_t n, float lr, float momentum, int nesterov, int *bad,
                          mr_error *err) {
    if (bad != NULL) *bad = 0;
    if (n == 0) return MR_OK;
    double *flag, *host;
    MR_CHECK(flag_begin(be, bad, &flag, &host, err));
    /* momentum 0: plain SGD, no velocity (optimizer.h) */
    MR_CUDA_LAUNCH(sgd_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_ptr(w), mr_dfloat_cptr(g),
                   momentum != 0.0f ? mr_dfloat_ptr(vel) : NULL, n, lr, momentum, nesterov, flag);
    mr_cuda_launched(be, err, "sgd_kernel");
    return flag_end(be, bad, flag, host, err);
}

/* flag[0] = 1 if one of x's n floats is NaN or Inf; every writer writes
 * the same value, so the race between threads is benign */
__global__ static void nonfinite_kernel(const float *__restrict__ x, size_t n, double *flag) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (mr_nonfinite(x[i])) flag[0] = 1.0;
}

static mr_status cuda_nonfinite(mr_backend *be, const mr_dfloat *x, size_t n, int *any,
                                mr_error *err) {
    *any = 0;
    if (n == 0) return MR_OK;
    cudaStream_t s = mr_cuda(be)->stream;
    double *flag, *host;
    MR_CHECK(mr_cuda_rows(be, 1, &flag, &host, err));
    MR_CUDA_TRY(be, err, cudaMemsetAsync(flag, 0, sizeof(double), s));
    MR_CUDA_LAUNCH(nonfinite_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, s, mr_dfloat_cptr(x), n,
                   flag);
    mr_cuda_launched(be, err, "nonfinite_kernel");
    MR_CUDA_TRY(be, err, cudaMemcpyAsync(host, flag, sizeof(double), cudaMemcpyDeviceToHost, s));
    MR_CHECK(mr_cuda_wait(be, "the check for NaN and Inf", err));
    *any = host[0] != 0.0;
    return MR_OK;
}

const mr_optimizer_kernels mr_optimizer_cuda = {
    .adam = cuda_adam, .sgd = cuda_sgd, .nonfinite = cuda_nonfinite};
