/* layernorm_cuda.cu: LayerNormalization on a GPU (models/layernorm.c says
 * what the layer computes; layernorm_cpu.c is the reference, whose order
 * of operations this repeats).
 *   x, y, dy, dx: (M, C) rows of C values, M = batch * H * W (or batch)
 *   gamma, beta: (C), either absent ([layernorm] scale / center 0)
 * One thread per row for the statistics, y and dx: the per-row math is
 * runtime/elementwise.h's (mr_layernorm_*), the CPU loop's code. One
 * thread per channel for the weight gradients, summing the rows in row
 * order (adjacent threads read adjacent channels: coalesced), then adding
 * to the gradient: deterministic, no atomics, no shared memory. The rows
 * of a LayerNormalization are short (its features or channels), so a
 * thread per row leaves nothing large serial.
 * Relies on: kernels_cuda.h (the context's stream, the launch),
 * layernorm_weights.h. */
#include <stdlib.h>

#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"
#include "models/layernorm_weights.h"

typedef struct ln_priv {
    int C;
    int64_t max_rows;
    float *mean, *rstd; /* (max_rows) statistics of the last forward, for backward */
} ln_priv;

/* one thread per row r: mean[r], rstd[r] and y's row */
__global__ static void ln_forward_kernel(const float *__restrict__ x, int64_t M, int C,
                                         float epsilon, const float *__restrict__ gamma,
                                         const float *__restrict__ beta, float *__restrict__ mean,
                                         float *__restrict__ rstd, float *__restrict__ y) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < M;
         r += (int64_t)gridDim.x * blockDim.x) {
        mr_layernorm_stats(x + r * C, C, epsilon, &mean[r], &rstd[r]);
        mr_layernorm_row(x + r * C, C, mean[r], rstd[r], gamma, beta, y + r * C);
    }
}

/* one thread per channel c: dgamma[c] += sum_r dy * xhat, dbeta[c] +=
 * sum_r dy (either NULL: absent), the rows in order from 0 as on the CPU */
__global__ static void ln_weight_grad_kernel(const float *__restrict__ x,
                                             const float *__restrict__ dy, int64_t M, int C,
                                             const float *__restrict__ mean,
                                             const float *__restrict__ rstd, float *dgamma,
                                             float *dbeta) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        float dg = 0.0f, db = 0.0f;
        for (int64_t r = 0; r < M; r++)
            mr_layernorm_grad_add(dy[r * C + c], x[r * C + c], mean[r], rstd[r], &dg, &db);
        if (dgamma) dgamma[c] += dg;
        if (dbeta) dbeta[c] += db;
    }
}

/* one thread per row r: dx's row */
__global__ static void ln_dx_kernel(const float *__restrict__ x, const float *__restrict__ dy,
                                    int64_t M, int C, const float *__restrict__ mean,
                                    const float *__restrict__ rstd, const float *__restrict__ gamma,
                                    float *__restrict__ dx) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < M;
         r += (int64_t)gridDim.x * blockDim.x)
        mr_layernorm_dx_row(x + r * C, dy + r * C, C, mean[r], rstd[r], gamma, dx + r * C);
}

/* gamma's (beta = 0) or beta's values or gradient, or NULL where absent */
static float *ln_weight(const mr_layer *l, int beta, int grad) {
    const mr_weight *w = beta ? mr_layernorm_beta(l) : mr_layernorm_gamma(l);
    if (w == NULL) return NULL;
    return mr_dfloat_ptr(grad ? w->grad : w->data);
}

static mr_status ln_cuda_setup(mr_layer *l, mr_backend *be, int max_batch, mr_error *err) {
    const int C = l->in.d[l->in.rank - 1];
    ln_priv *p = (ln_priv *)calloc(1, sizeof *p);
    l->priv = p;
    if (p == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    p->C = C;
    p->max_rows = (int64_t)(max_batch < 1 ? 1 : max_batch) * (mr_shape_size(l->in) / C);
    p->mean = (float *)mr_backend_alloc(be, sizeof(float) * (size_t)(2 * p->max_rows));
    if (p->mean == NULL)
        return mr_error_set(err, MR_ERR_NOMEM,
                            "gpu:%d: out of memory for [layernorm] %s's statistics", be->ordinal,
                            l->name);
    p->rstd = p->mean + p->max_rows;
    return MR_OK;
}

static mr_status ln_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                            mr_dfloat *y) {
    ln_priv *p = (ln_priv *)l->priv;
    const int64_t M = batch * (mr_shape_size(l->in) / p->C);
    if (M == 0) return MR_OK;
    MR_CUDA_LAUNCH(ln_forward_kernel, mr_cuda_blocks((size_t)M), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, mr_dfloat_cptr(x), M, p->C, l->cfg->epsilon,
                   (const float *)ln_weight(l, 0, 0), (const float *)ln_weight(l, 1, 0), p->mean,
                   p->rstd, mr_dfloat_ptr(y));
    mr_cuda_launched(run->be, run->err, "ln_forward_kernel");
    return MR_OK;
}

static mr_status ln_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                             const mr_dfloat *y, mr_dfloat *dyd, mr_dfloat *dx) {
    (void)y;
    ln_priv *p = (ln_priv *)l->priv;
    const int C = p->C;
    const int64_t M = batch * (mr_shape_size(l->in) / C);
    cudaStream_t s = mr_cuda(run->be)->stream;
    const float *x = mr_dfloat_cptr(xd), *dy = mr_dfloat_cptr(dyd);
    if (l->n_weights > 0) {
        MR_CUDA_LAUNCH(ln_weight_grad_kernel, mr_cuda_blocks((size_t)C), MR_CUDA_THREADS, s, x, dy,
                       M, C, p->mean, p->rstd, ln_weight(l, 0, 1), ln_weight(l, 1, 1));
        mr_cuda_launched(run->be, run->err, "ln_weight_grad_kernel");
    }
    if (dx == NULL || M == 0) return MR_OK;
    MR_CUDA_LAUNCH(ln_dx_kernel, mr_cuda_blocks((size_t)M), MR_CUDA_THREADS, s, x, dy, M, C,
                   p->mean, p->rstd, (const float *)ln_weight(l, 0, 0), mr_dfloat_ptr(dx));
    mr_cuda_launched(run->be, run->err, "ln_dx_kernel");
    return MR_OK;
}

static void ln_cuda_destroy(mr_layer *l, mr_backend *be) {
    ln_priv *p = (ln_priv *)l->priv;
    if (p) mr_backend_free(be, p->mean);
    free(p);
    l->priv = NULL;
}

const mr_layer_kernels mr_layernorm_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = ln_cuda_setup,     .forward = ln_forward, .backward = ln_backward,
    .destroy = ln_cuda_destroy, .describe = NULL,      .fuses_relu = 0,
    .device_order = NULL,
};
