/* optimizer_cuda.cu: the fused updates on a GPU (optimizer.h): one
 * grid-stride pass over the flat buffers with elementwise.h's per-element
 * math, the very functions the CPU loops of optimizer_cpu.c run; the check
 * of a buffer for NaN and Inf (on_nan, checkpoints); the sum of squares
 * of norm clipping and L2 penalties, and y += a x (L2 gradients). */
#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"

/* The scalars every update kernel takes: clipvalue, weight decay, rate. */
struct upd {
    float cv, wd, lr;
};

/* A kernel recorded into a graph reads the rate and step size of each
 * replay from the device (live, mr_cuda_live); NULL: the values given. */
__device__ static inline void take_live(const mr_step_scalars *live, struct upd *u, float *alpha) {
    if (live == NULL) return;
    u->lr = live->lr;
    if (alpha != NULL) *alpha = live->alpha;
}

/* One element: the flag (or NULL) set to 1 where a gradient read is NaN or
 * Inf (every writer writes the same value, so the race between threads is
 * benign), the gradient clipped, the weight decayed. */
__device__ static inline float prepare(float *w, float g, struct upd u, double *flag) {
    if (flag != NULL && mr_nonfinite(g)) flag[0] = 1.0;
    mr_decay_weight(w, u.wd, u.lr);
    return mr_clip_value(g, u.cv);
}

#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

__global__ static void adam_kernel(float *__restrict__ w, const float *__restrict__ g,
                                   float *__restrict__ m, float *__restrict__ v, size_t n,
                                   struct upd u, float alpha, float b1, float b2, float eps,
                                   double *flag, const mr_step_scalars *live) {
    take_live(live, &u, &alpha);
    GRID_STRIDE(i, n) {
        const float gi = prepare(&w[i], g[i], u, flag);
        mr_adam_update(&w[i], gi, &m[i], &v[i], alpha, b1, b2, eps);
    }
}

/* vel NULL: momentum 0, plain SGD (mr_sgd_update then leaves it alone) */
__global__ static void sgd_kernel(float *__restrict__ w, const float *__restrict__ g,
                                  float *__restrict__ vel, size_t n, struct upd u, float momentum,
                                  int nesterov, double *flag, const mr_step_scalars *live) {
    take_live(live, &u, NULL);
    GRID_STRIDE(i, n) {
        const float gi = prepare(&w[i], g[i], u, flag);
        mr_sgd_update(&w[i], gi, vel != NULL ? &vel[i] : NULL, u.lr, momentum, nesterov);
    }
}

/* mom NULL: no momentum */
__global__ static void rmsprop_kernel(float *__restrict__ w, const float *__restrict__ g,
                                      float *__restrict__ ms, float *__restrict__ mom, size_t n,
                                      struct upd u, float rho, float momentum, float eps,
                                      double *flag, const mr_step_scalars *live) {
    take_live(live, &u, NULL);
    GRID_STRIDE(i, n) {
        const float gi = prepare(&w[i], g[i], u, flag);
        float none = 0.0f;
        mr_rmsprop_update(&w[i], gi, &ms[i], mom != NULL ? &mom[i] : &none, u.lr, rho,
                          mom != NULL ? momentum : 0.0f, eps);
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

static struct upd upd_of(const mr_optimizer *opt, const mr_step_rates *r) {
    struct upd u = {opt->clipvalue, opt->weight_decay, r->lr};
    return u;
}

static mr_status cuda_adam(mr_backend *be, const mr_optimizer *opt, const mr_step_rates *r,
                           mr_dfloat *w, const mr_dfloat *g, mr_dfloat *m, mr_dfloat *v, size_t n,
                           int *bad, mr_error *err) {
    if (bad != NULL) *bad = 0;
    if (n == 0) return MR_OK;
    double *flag, *host;
    MR_CHECK(flag_begin(be, bad, &flag, &host, err));
    MR_CUDA_LAUNCH(adam_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_ptr(w), mr_dfloat_cptr(g), mr_dfloat_ptr(m), mr_dfloat_ptr(v), n,
                   upd_of(opt, r), r->alpha, opt->beta1, opt->beta2, opt->epsilon, flag,
                   mr_cuda_live(be));
    mr_cuda_launched(be, err, "adam_kernel");
    return flag_end(be, bad, flag, host, err);
}

static mr_status cuda_sgd(mr_backend *be, const mr_optimizer *opt, const mr_step_rates *r,
                          mr_dfloat *w, const mr_dfloat *g, mr_dfloat *vel, mr_dfloat *unused,
                          size_t n, int *bad, mr_error *err) {
    (void)unused;
    if (bad != NULL) *bad = 0;
    if (n == 0) return MR_OK;
    double *flag, *host;
    MR_CHECK(flag_begin(be, bad, &flag, &host, err));
    /* momentum 0: plain SGD, no velocity (optimizer.h) */
    MR_CUDA_LAUNCH(sgd_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_ptr(w), mr_dfloat_cptr(g),
                   opt->momentum != 0.0f ? mr_dfloat_ptr(vel) : NULL, n, upd_of(opt, r),
                   opt->momentum, opt->nesterov, flag, mr_cuda_live(be));
    mr_cuda_launched(be, err, "sgd_kernel");
    return flag_end(be, bad, flag, host, err);
}

static mr_status cuda_rmsprop(mr_backend *be, const mr_optimizer *opt, const mr_step_rates *r,
                              mr_dfloat *w, const mr_dfloat *g, mr_dfloat *ms, mr_dfloat *mom,
                              size_t n, int *bad, mr_error *err) {
    if (bad != NULL) *bad = 0;
    if (n == 0) return MR_OK;
    double *flag, *host;
    MR_CHECK(flag_begin(be, bad, &flag, &host, err));
    MR_CUDA_LAUNCH(rmsprop_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_ptr(w), mr_dfloat_cptr(g), mr_dfloat_ptr(ms),
                   opt->momentum > 0.0f ? mr_dfloat_ptr(mom) : NULL, n, upd_of(opt, r), opt->rho,
                   opt->momentum, opt->epsilon, flag, mr_cuda_live(be));
    mr_cuda_launched(be, err, "rmsprop_kernel");
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

/* flag[0] = 1.0 if one of x's n floats is NaN or Inf, else 0.0: each block
 * writes whether its floats hold one into part[block], and the last block
 * to finish (a counter after __threadfence: CUDA's "last block" pattern)
 * reads those and writes the flag, so nothing zeroes the flag before the
 * launch. done: blocks finished, 0 between launches (the last block puts
 * it back). Races on `any` are benign: every writer writes 1. */
__global__ static void nonfinite_flag_kernel(const float *__restrict__ x, size_t n, int *part,
                                             unsigned *done, double *flag) {
    __shared__ int any, last;
    if (threadIdx.x == 0) any = 0;
    __syncthreads();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (mr_nonfinite(x[i])) any = 1;
    __syncthreads();
    if (threadIdx.x == 0) part[blockIdx.x] = any;
    __threadfence(); /* this block's part reaches the last block before the count */
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    if (threadIdx.x == 0) any = 0;
    __syncthreads();
    const volatile int *v = part; /* other blocks' parts */
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x)
        if (v[b]) any = 1;
    __syncthreads();
    if (threadIdx.x != 0) return;
    flag[0] = any ? 1.0 : 0.0;
    *done = 0; /* for the next launch */
}

/* The check queued, no wait: its flag's copy lands in pinned memory that
 * the host reads once it has next waited for the stream (optimizer.h).
 * c->flag: the flag (a double), the kernel's counter, then a part per
 * block (at most 65536, mr_cuda_blocks). */
static mr_status cuda_nonfinite_begin(mr_backend *be, const mr_dfloat *x, size_t n,
                                      const double **host, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    cudaStream_t s = c->stream;
    if (c->flag == NULL) {
        c->flag = (double *)mr_backend_alloc(be, 2 * sizeof(double) + sizeof(int) * 65536);
        c->flag_host = (double *)mr_backend_alloc_host(be, sizeof(double));
        if (c->flag == NULL || c->flag_host == NULL)
            return mr_error_set(err, MR_ERR_NOMEM, "gpu:%d: out of memory for a flag", be->ordinal);
    }
    /* n = 0: one block of no floats writes 0 */
    MR_CUDA_LAUNCH(nonfinite_flag_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, s, mr_dfloat_cptr(x),
                   n, (int *)(c->flag + 2), (unsigned *)(c->flag + 1), c->flag);
    mr_cuda_launched(be, err, "nonfinite_flag_kernel");
    MR_CUDA_TRY(be, err,
                cudaMemcpyAsync(c->flag_host, c->flag, sizeof(double), cudaMemcpyDeviceToHost, s));
    *host = c->flag_host;
    return MR_OK;
}

/* The sum of squares: MR_SUMSQ_PARTS threads each sum a fixed stride of x
 * in double, and the host adds their partial sums in order (as the loss's
 * rows, mr_cuda_rows): optimizer.h's order, the CPU's too. No shared memory, so the emulated GPUs
 * run it as it is. One block is little of a GPU, but this runs once per step, and only with
 * clipnorm or global_clipnorm. */
__global__ static void sumsq_kernel(const float *__restrict__ x, size_t n, double *part) {
    const unsigned t = threadIdx.x;
    double s = 0.0;
    for (size_t i = t; i < n; i += MR_SUMSQ_PARTS)
        s += (double)x[i] * (double)x[i];
    part[t] = s;
}

static mr_status cuda_sumsq(mr_backend *be, const mr_dfloat *x, size_t n, double *sum,
                            mr_error *err) {
    *sum = 0.0;
    if (n == 0) return MR_OK;
    cudaStream_t s = mr_cuda(be)->stream;
    double *part, *host;
    MR_CHECK(mr_cuda_rows(be, MR_SUMSQ_PARTS, &part, &host, err));
    MR_CUDA_LAUNCH(sumsq_kernel, 1, MR_SUMSQ_PARTS, s, mr_dfloat_cptr(x), n, part);
    mr_cuda_launched(be, err, "sumsq_kernel");
    MR_CUDA_TRY(
        be, err,
        cudaMemcpyAsync(host, part, MR_SUMSQ_PARTS * sizeof(double), cudaMemcpyDeviceToHost, s));
    MR_CHECK(mr_cuda_wait(be, "the gradient norm", err));
    double total = 0.0;
    for (int i = 0; i < MR_SUMSQ_PARTS; i++)
        total += host[i];
    *sum = total;
    return MR_OK;
}

__global__ static void axpy_kernel(float *__restrict__ y, const float *__restrict__ x, size_t n,
                                   float a) {
    GRID_STRIDE(i, n)
    y[i] += a * x[i];
}

static mr_status cuda_axpy(mr_backend *be, mr_dfloat *y, const mr_dfloat *x, size_t n, float a,
                           mr_error *err) {
    if (n == 0) return MR_OK;
    MR_CUDA_LAUNCH(axpy_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_ptr(y), mr_dfloat_cptr(x), n, a);
    mr_cuda_launched(be, err, "axpy_kernel");
    return MR_OK;
}

const mr_optimizer_kernels mr_optimizer_cuda = {.adam = cuda_adam,
                                                .sgd = cuda_sgd,
                                                .rmsprop = cuda_rmsprop,
                                                .nonfinite = cuda_nonfinite,
                                                .nonfinite_begin = cuda_nonfinite_begin,
                                                .sumsq = cuda_sumsq,
                                                .axpy = cuda_axpy};
