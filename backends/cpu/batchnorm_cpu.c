/* batchnorm_cpu.c: BatchNormalization on the CPU (batchnorm.c says what the
 * layer computes).
 *
 * Sums are taken around a per-channel shift s (sums of x - s and of
 * (x - s)^2; mr_bn_shift_is_moving_mean says which). The per-element
 * math is float, vectorised over the channels; sums go through float
 * partials of MR_BN_ROW_BLOCK rows, double group sums of MR_BN_FAN_IN
 * partials, and the levels above (batchnorm_stats.h's tree), one value
 * after another. Every formula and the tree are batchnorm_stats.h's,
 * which the CUDA kernels share. The per-channel buffers are memory of the layer's
 * backend context; SyncBN's buffer is scratch.
 * Relies on: layer.h (the layer contract, mr_exec_ctx.sync_sum),
 * batchnorm_stats.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/elementwise.h"
#include "runtime/target_clones.h"
#include "models/batchnorm_stats.h"
#include "backends/cpu/cpu_impl.h"

typedef struct bn_priv {
    int C;
    float *mean, *inv_std; /* (C) statistics of the last training forward, for backward */
    float *shift;          /* (C) the shift of the sums */
    float *f1, *f2;        /* (C) float partial sums of a block of rows */
    double *s1, *s2;       /* (C) per-channel sums */
    double *tree;          /* (mr_bn_tree_slots(groups), 2, C) the sums' tree at max_batch */
} bn_priv;

/* f1, f2 (C) += one row's terms (mr_bn_sum_terms). */
static inline void sum_row(float *restrict f1, float *restrict f2, const float *restrict u,
                           const float *restrict ua, const float *restrict v,
                           const float *restrict vb, const float *restrict vs, int C) {
    for (int c = 0; c < C; c++)
        mr_bn_sum_terms(u[c], ua[c], v[c], vb[c], vs[c], &f1[c], &f2[c]);
}

/* sum_row with u masked as a fused ReLU's backward masks its dy:
 * u * relu'(m), m the ReLU's output (the activation kernel's math), and
 * ua = 0. */
static inline void sum_row_masked(float *restrict f1, float *restrict f2, const float *restrict u,
                                  const float *restrict m, const float *restrict v,
                                  const float *restrict vb, const float *restrict vs, int C) {
    for (int c = 0; c < C; c++)
        mr_bn_sum_terms(u[c] * mr_relu_grad(m[c]), 0.0f, v[c], vb[c], vs[c], &f1[c], &f2[c]);
}

/* s1 = sum of a, s2 = sum of a * b over `rows` rows of C, where
 * a = u - ua and b = (v - vb) * vs per element (ua, vb, vs per channel):
 * forward: u = v = x, ua = vb = shift, vs = 1 (sums of x - s and (x - s)^2);
 * backward: u = dy, ua = 0, v = x, vb = mean, vs = inv_std (dy, dy * xhat).
 * mask: NULL, or a fused ReLU's output (backward), by whose mask u goes
 * (ua then unused). */
MR_AVX2_CLONES static void channel_sums(bn_priv *p, const float *u, const float *ua,
                                        const float *mask, const float *v, const float *vb,
                                        const float *vs, int64_t rows) {
    const int C = p->C;
    const int64_t nb = mr_bn_blocks(rows), groups = mr_bn_groups(rows);
    for (int64_t g = 0; g < groups; g++) {
        /* level 1: group g's sums (2, C) of its blocks' float partials */
        double *restrict g1 = p->tree + g * 2 * C, *restrict g2 = g1 + C;
        for (int c = 0; c < C; c++)
            g1[c] = g2[c] = 0.0;
        const int64_t j1 = (g + 1) * MR_BN_FAN_IN < nb ? (g + 1) * MR_BN_FAN_IN : nb;
        for (int64_t j = g * MR_BN_FAN_IN; j < j1; j++) {
            int64_t r0, r1;
            mr_bn_block(j, rows, &r0, &r1);
            for (int c = 0; c < C; c++)
                p->f1[c] = p->f2[c] = 0.0f;
            if (mask != NULL)
                for (int64_t r = r0; r < r1; r++)
                    sum_row_masked(p->f1, p->f2, u + r * C, mask + r * C, v + r * C, vb, vs, C);
            else
                for (int64_t r = r0; r < r1; r++)
                    sum_row(p->f1, p->f2, u + r * C, ua, v + r * C, vb, vs, C);
            for (int c = 0; c < C; c++) {
                g1[c] += p->f1[c];
                g2[c] += p->f2[c];
            }
        }
    }
    /* the levels above, per channel and sum (stride 2C between values) */
    for (int c = 0; c < C; c++) {
        p->s1[c] = mr_bn_tree_total(p->tree + c, 2 * (int64_t)C, groups);
        p->s2[c] = mr_bn_tree_total(p->tree + C + c, 2 * (int64_t)C, groups);
    }
}

static mr_status bn_cpu_setup(mr_layer *l, mr_backend *be, int max_batch, mr_error *err) {
    int C = l->in.d[l->in.rank - 1];
    bn_priv *p = calloc(1, sizeof *p);
    l->priv = p;
    if (p == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    p->C = C;
    /* mean, inv_std, shift, f1, f2 (floats); s1, s2 (doubles): zeroed */
    p->mean = mr_backend_alloc(be, sizeof(float) * (size_t)C * 5);
    p->s1 = mr_backend_alloc(be, sizeof(double) * (size_t)C * 2);
    /* the tree of max_batch's rows: 2C doubles per value of every level */
    const int64_t rows = (int64_t)(max_batch < 1 ? 1 : max_batch) * mr_shape_size(l->in) / C;
    const int64_t slots = mr_bn_tree_slots(mr_bn_groups(rows));
    p->tree =
        mr_backend_alloc(be, sizeof(double) * (size_t)C * 2 * (size_t)(slots > 0 ? slots : 1));
    if (!p->mean || !p->s1 || !p->tree)
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory for [batchnorm]'s statistics");
    p->inv_std = p->mean + C;
    p->shift = p->mean + 2 * C;
    p->f1 = p->mean + 3 * C;
    p->f2 = p->mean + 4 * C;
    p->s2 = p->s1 + C;
    /* the sync buffer (2C sums and a count); per-channel factors in inference */
    l->scratch_floats = (size_t)mr_bn_sync_floats(C);
    return MR_OK;
}

static int use_sync(const mr_layer *l, const mr_exec_ctx *run) {
    return l->cfg->sync && run->sync_sum != NULL;
}

/* Adds p->s1, p->s2 (C each) and *count over the replicas: one sync_sum of
 * mr_bn_sync_floats (2C+1) in run->scratch; the collective's failure is
 * returned. */
static mr_status sync_sums(bn_priv *p, mr_exec_ctx *run, double *count) {
    const int C = p->C;
    float *buf = mr_dfloat_ptr(run->scratch);
    for (int c = 0; c < C; c++) {
        buf[c] = (float)p->s1[c];
        buf[C + c] = (float)p->s2[c];
    }
    buf[2 * C] = (float)*count;
    MR_CHECK(run->sync_sum(run->sync_ctx, run->scratch, (size_t)mr_bn_sync_floats(C)));
    for (int c = 0; c < C; c++) {
        p->s1[c] = buf[c];
        p->s2[c] = buf[C + c];
    }
    *count = buf[2 * C];
    return MR_OK;
}

MR_AVX2_CLONES static mr_status bn_forward(mr_layer *l, mr_exec_ctx *run, int batch,
                                           const mr_dfloat *xd, mr_dfloat *yd) {
    const float *x = mr_dfloat_cptr(xd);
    float *y = mr_dfloat_ptr(yd);
    bn_priv *p = l->priv;
    const int C = p->C;
    const int64_t M = batch * mr_shape_size(l->in) / C; /* rows of C values */
    const float *gamma = mr_dfloat_cptr(l->w[MR_BN_GAMMA].data),
                *beta = mr_dfloat_cptr(l->w[MR_BN_BETA].data);
    float *mm = mr_dfloat_ptr(l->w[MR_BN_MOVING_MEAN].data),
          *mv = mr_dfloat_ptr(l->w[MR_BN_MOVING_VARIANCE].data);
    const float eps = l->cfg->epsilon, mom = l->cfg->momentum;
    if (!run->training) {
        /* y = (x - moving_mean) * gamma / sqrt(moving_var + eps) + beta */
        float *scale = mr_dfloat_ptr(run->scratch); /* (C) */
        for (int c = 0; c < C; c++)
            scale[c] = mr_bn_infer_scale(gamma[c], mv[c], eps);
        for (int64_t r = 0; r < M; r++) {
            const float *restrict xr = x + r * C;
            float *restrict yr = y + r * C;
            for (int c = 0; c < C; c++)
                yr[c] = mr_bn_normalize(xr[c], mm[c], scale[c], beta[c]);
            if (l->relu_fused)
                for (int c = 0; c < C; c++)
                    yr[c] = mr_relu(yr[c]);
        }
        return MR_OK;
    }
    /* shifted sums: s1 = sum (x - s), s2 = sum (x - s)^2 per channel */
    const int sync = use_sync(l, run);
    const int around_mm = mr_bn_shift_is_moving_mean(sync, M);
    for (int c = 0; c < C; c++)
        p->shift[c] = around_mm ? mm[c] : x[c];
    for (int c = 0; c < C; c++)
        p->inv_std[c] = 1.0f; /* the sums' vs; the real inv_std follows */
    channel_sums(p, x, p->shift, NULL, x, p->shift, p->inv_std, M);
    double count = (double)M;
    if (sync) MR_CHECK(sync_sums(p, run, &count));
    if (count <= 0.0) {
        /* an empty shard (and no global statistics): nothing to normalise,
         * and the moving averages must not learn 0/0 */
        return MR_OK;
    }
    float *restrict scale = p->f1; /* (C) gamma * inv_std */
    for (int c = 0; c < C; c++)
        mr_bn_stats(p->s1[c], p->s2[c], count, p->shift[c], gamma[c], eps, mom, &p->mean[c],
                    &p->inv_std[c], &scale[c], &mm[c], &mv[c]);
    const float *restrict mean = p->mean;
    if (l->relu_fused) /* the ReLU [activation] after it, in this pass */
        for (int64_t r = 0; r < M; r++) {
            const float *restrict xr = x + r * C;
            float *restrict yr = y + r * C;
            for (int c = 0; c < C; c++)
                yr[c] = mr_relu(mr_bn_normalize(xr[c], mean[c], scale[c], beta[c]));
        }
    else
        for (int64_t r = 0; r < M; r++) {
            const float *restrict xr = x + r * C;
            float *restrict yr = y + r * C;
            for (int c = 0; c < C; c++)
                yr[c] = mr_bn_normalize(xr[c], mean[c], scale[c], beta[c]);
        }
    return MR_OK;
}

/* Training-mode backward with the statistics of the forward:
 *   xhat = (x - mean) * inv_std,  dgamma += sum dy * xhat,  dbeta += sum dy,
 *   dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)),
 * the means over the N values of the channel (of the global batch with sync). */
MR_AVX2_CLONES static mr_status bn_backward(mr_layer *l, mr_exec_ctx *run, int batch,
                                            const mr_dfloat *xd, const mr_dfloat *yd,
                                            mr_dfloat *dyd, mr_dfloat *dxd) {
    const float *x = mr_dfloat_cptr(xd), *dy = mr_dfloat_cptr(dyd);
    /* a fused ReLU: dy is its output's gradient, masked here by y > 0 */
    const float *mask = l->relu_fused ? mr_dfloat_cptr(yd) : NULL;
    float *dx = mr_dfloat_ptr(dxd);
    bn_priv *p = l->priv;
    const int C = p->C;
    const int64_t M = batch * mr_shape_size(l->in) / C;
    const float *gamma = mr_dfloat_cptr(l->w[MR_BN_GAMMA].data);
    float *dgamma = mr_dfloat_ptr(l->w[MR_BN_GAMMA].grad),
          *dbeta = mr_dfloat_ptr(l->w[MR_BN_BETA].grad);
    /* s1 = sum dy, s2 = sum dy * xhat per channel; shift holds zeros here */
    memset(p->shift, 0, sizeof(float) * (size_t)C);
    channel_sums(p, dy, p->shift, mask, x, p->mean, p->inv_std, M);
    /* the weight gradients are this replica's: the strategy sums them */
    for (int c = 0; c < C; c++) {
        dgamma[c] += (float)p->s2[c];
        dbeta[c] += (float)p->s1[c];
    }
    if (dx == NULL) return MR_OK;
    double count = (double)M;
    if (use_sync(l, run)) MR_CHECK(sync_sums(p, run, &count));
    if (count <= 0.0) return MR_OK; /* no rows anywhere */
    /* dx = fa * (dy - fm) - fb * (x - mean) (mr_bn_dx): per-channel
     * factors in f1, f2, shift */
    float *restrict fa = p->f1, *restrict fb = p->f2, *restrict fm = p->shift;
    for (int c = 0; c < C; c++)
        mr_bn_factors(p->s1[c], p->s2[c], count, gamma[c], p->inv_std[c], &fa[c], &fb[c], &fm[c]);
    const float *restrict mean = p->mean;
    if (mask != NULL)
        for (int64_t r = 0; r < M; r++) {
            const float *restrict xr = x + r * C, *restrict dr = dy + r * C,
                                  *restrict yr = mask + r * C;
            float *restrict out = dx + r * C;
            for (int c = 0; c < C; c++)
                out[c] = mr_bn_dx(dr[c] * mr_relu_grad(yr[c]), xr[c], mean[c], fa[c], fb[c], fm[c]);
        }
    else
        for (int64_t r = 0; r < M; r++) {
            const float *restrict xr = x + r * C, *restrict dr = dy + r * C;
            float *restrict out = dx + r * C;
            for (int c = 0; c < C; c++)
                out[c] = mr_bn_dx(dr[c], xr[c], mean[c], fa[c], fb[c], fm[c]);
        }
    return MR_OK;
}

static void bn_cpu_destroy(mr_layer *l, mr_backend *be) {
    bn_priv *p = l->priv;
    if (p) mr_backend_free(be, p->mean), mr_backend_free(be, p->s1), mr_backend_free(be, p->tree);
    free(p);
    l->priv = NULL;
}

const mr_layer_kernels mr_batchnorm_cpu = {
    .setup = bn_cpu_setup,
    .forward = bn_forward,
    .backward = bn_backward,
    .destroy = bn_cpu_destroy,
    .fuses_relu = 1,
};
