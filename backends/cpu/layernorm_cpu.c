/* layernorm_cpu.c: LayerNormalization on the CPU (models/layernorm.c says
 * what the layer computes).
 *   x, y, dy, dx: (M, C) rows of C values, M = batch * H * W (or batch)
 *   gamma, beta: (C), either absent ([layernorm] scale / center 0)
 * Forward: per row, mean and rstd (runtime/elementwise.h, the same
 * functions the CUDA kernels call), kept for backward in (max_rows)
 * buffers of the layer's context. Backward: dx per row; the weight
 * gradients per channel, summed over the rows in row order from 0 in
 * float (mr_layernorm_grad_add), then ADDED to the gradients (the GPU's
 * order too).
 * Relies on: layer.h (the layer contract), elementwise.h,
 * layernorm_weights.h. */
#include <stdlib.h>

#include "runtime/elementwise.h"
#include "models/layernorm_weights.h"
#include "backends/cpu/cpu_impl.h"

typedef struct ln_priv {
    int C;
    int64_t max_rows;
    float *mean, *rstd; /* (max_rows) statistics of the last forward, for backward */
    float *dg, *db;     /* (C) this batch's sums of dy * xhat and dy */
} ln_priv;

/* w's values, or NULL where the weight is absent */
static const float *ln_data(const mr_weight *w) {
    return w ? mr_dfloat_cptr(w->data) : NULL;
}

/* g (C) += the batch's sums s (C), where the weight is present */
static void ln_add_grad(const mr_weight *w, const float *s, int C) {
    if (w == NULL) return;
    float *g = mr_dfloat_ptr(w->grad);
    for (int c = 0; c < C; c++)
        g[c] += s[c];
}

static mr_status ln_cpu_setup(mr_layer *l, mr_backend *be, int max_batch, mr_error *err) {
    const int C = l->in.d[l->in.rank - 1];
    ln_priv *p = calloc(1, sizeof *p);
    l->priv = p;
    if (p == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    p->C = C;
    p->max_rows = (int64_t)(max_batch < 1 ? 1 : max_batch) * (mr_shape_size(l->in) / C);
    p->mean = mr_backend_alloc(be, sizeof(float) * (size_t)(2 * p->max_rows + 2 * C));
    if (p->mean == NULL)
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory for [layernorm] %s's statistics",
                            l->name);
    p->rstd = p->mean + p->max_rows;
    p->dg = p->rstd + p->max_rows;
    p->db = p->dg + C;
    return MR_OK;
}

static mr_status ln_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                            mr_dfloat *yd) {
    (void)run;
    ln_priv *p = l->priv;
    const int C = p->C;
    const int64_t M = batch * (mr_shape_size(l->in) / C);
    const float *x = mr_dfloat_cptr(xd), *gamma = ln_data(mr_layernorm_gamma(l)),
                *beta = ln_data(mr_layernorm_beta(l));
    float *y = mr_dfloat_ptr(yd);
    for (int64_t r = 0; r < M; r++) {
        mr_layernorm_stats(x + r * C, C, l->cfg->epsilon, &p->mean[r], &p->rstd[r]);
        mr_layernorm_row(x + r * C, C, p->mean[r], p->rstd[r], gamma, beta, y + r * C);
    }
    return MR_OK;
}

static mr_status ln_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                             const mr_dfloat *yd, mr_dfloat *dyd, mr_dfloat *dxd) {
    (void)run, (void)yd;
    ln_priv *p = l->priv;
    const int C = p->C;
    const int64_t M = batch * (mr_shape_size(l->in) / C);
    const float *x = mr_dfloat_cptr(xd), *dy = mr_dfloat_cptr(dyd),
                *gamma = ln_data(mr_layernorm_gamma(l));
    /* weight gradients: (C) sums over the rows, vectorised over the channels */
    for (int c = 0; c < C; c++)
        p->dg[c] = p->db[c] = 0.0f;
    for (int64_t r = 0; r < M; r++) {
        const float *xr = x + r * C, *dr = dy + r * C, m = p->mean[r], s = p->rstd[r];
        for (int c = 0; c < C; c++)
            mr_layernorm_grad_add(dr[c], xr[c], m, s, &p->dg[c], &p->db[c]);
    }
    ln_add_grad(mr_layernorm_gamma(l), p->dg, C);
    ln_add_grad(mr_layernorm_beta(l), p->db, C);
    if (dxd == NULL) return MR_OK;
    float *dx = mr_dfloat_ptr(dxd);
    for (int64_t r = 0; r < M; r++)
        mr_layernorm_dx_row(x + r * C, dy + r * C, C, p->mean[r], p->rstd[r], gamma, dx + r * C);
    return MR_OK;
}

static void ln_cpu_destroy(mr_layer *l, mr_backend *be) {
    ln_priv *p = l->priv;
    if (p) mr_backend_free(be, p->mean);
    free(p);
    l->priv = NULL;
}

const mr_layer_kernels mr_layernorm_cpu = {
    .setup = ln_cpu_setup,
    .forward = ln_forward,
    .backward = ln_backward,
    .destroy = ln_cpu_destroy,
};
