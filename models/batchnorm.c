/* batchnorm.c: BatchNormalization over the last axis (channels, NHWC).
 *   x, y: (B, ..., C)   gamma, beta, moving_mean, moving_variance: (C)
 * Training: statistics of this replica's batch (M = B * H * W values per
 * channel, biased variance, as Keras), moving averages updated with
 * `momentum`; with sync=1 and several replicas the sums go through
 * run->sync_sum so the statistics are those of the global batch
 * (SyncBatchNormalization). Inference: the moving averages. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

typedef struct bn_priv {
    int C;
    float *mean, *inv_std; /* (C) of the last training forward */
    double *s1, *s2;       /* (C) per-channel sums */
} bn_priv;

static mr_status bn_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file;
    int C = l->in.d[l->in.rank - 1];
    bn_priv *p = calloc(1, sizeof *p);
    if (p) {
        p->C = C;
        p->mean = malloc(sizeof(float) * (size_t)C);
        p->inv_std = malloc(sizeof(float) * (size_t)C);
        p->s1 = malloc(sizeof(double) * (size_t)C);
        p->s2 = malloc(sizeof(double) * (size_t)C);
    }
    l->priv = p;
    if (!p || !p->mean || !p->inv_std || !p->s1 || !p->s2)
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    l->out = l->in;
    l->scratch_floats = (size_t)(2 * C + 1); /* the sync buffer: 2C sums and a count */
    mr_layer_declare_weight(l, "gamma", 1, 1, C, 0, 0, 0);
    mr_layer_declare_weight(l, "beta", 1, 1, C, 0, 0, 0);
    mr_layer_declare_weight(l, "moving_mean", 0, 1, C, 0, 0, 0);
    mr_layer_declare_weight(l, "moving_variance", 0, 1, C, 0, 0, 0);
    return MR_OK;
}

static void bn_init(mr_layer *l, uint64_t seed) {
    (void)seed;
    int C = ((bn_priv *)l->priv)->C;
    for (int c = 0; c < C; c++) {
        l->w[0].data[c] = 1.0f;
        l->w[1].data[c] = 0.0f;
        l->w[2].data[c] = 0.0f;
        l->w[3].data[c] = 1.0f;
    }
}

static int use_sync(const mr_layer *l, const mr_run *run) {
    return l->cfg->sync && run->sync_sum != NULL;
}

/* Sums n doubles over the replicas through a float buffer. */
static int sync_doubles(mr_layer *l, mr_run *run, double *v, int n, double *count) {
    float *buf = run->scratch;
    for (int i = 0; i < n; i++)
        buf[i] = (float)v[i];
    buf[n] = (float)*count;
    mr_status st = run->sync_sum(run->sync_ctx, buf, (size_t)n + 1);
    if (st != MR_OK) {
        run->status = st;
        return 0;
    }
    for (int i = 0; i < n; i++)
        v[i] = buf[i];
    *count = buf[n];
    (void)l;
    return 1;
}

static void bn_forward(mr_layer *l, mr_run *run, int batch, const float *x, float *y) {
    bn_priv *p = l->priv;
    const int C = p->C;
    const int64_t M = batch * mr_shape_size(l->in) / C;
    const float *gamma = l->w[0].data, *beta = l->w[1].data;
    float *mm = l->w[2].data, *mv = l->w[3].data;
    const float eps = l->cfg->epsilon, mom = l->cfg->momentum;
    if (!run->training) {
        for (int c = 0; c < C; c++)
            p->inv_std[c] = 1.0f / sqrtf(mv[c] + eps);
        for (int64_t r = 0; r < M; r++) {
            const float *xr = x + r * C;
            float *yr = y + r * C;
            for (int c = 0; c < C; c++)
                yr[c] = gamma[c] * (xr[c] - mm[c]) * p->inv_std[c] + beta[c];
        }
        return;
    }
    double count = (double)M;
    memset(p->s1, 0, sizeof(double) * (size_t)C);
    for (int64_t r = 0; r < M; r++)
        for (int c = 0; c < C; c++)
            p->s1[c] += x[r * C + c];
    if (use_sync(l, run)) {
        /* global mean first, then global squared deviations: two rounds, stable */
        if (!sync_doubles(l, run, p->s1, C, &count)) return;
    }
    for (int c = 0; c < C; c++)
        p->mean[c] = (float)(p->s1[c] / count);
    memset(p->s2, 0, sizeof(double) * (size_t)C);
    for (int64_t r = 0; r < M; r++)
        for (int c = 0; c < C; c++) {
            double e = (double)x[r * C + c] - p->mean[c];
            p->s2[c] += e * e;
        }
    if (use_sync(l, run)) {
        double n2 = (double)M;
        if (!sync_doubles(l, run, p->s2, C, &n2)) return;
    }
    for (int c = 0; c < C; c++) {
        float var = (float)(p->s2[c] / count);
        p->inv_std[c] = 1.0f / sqrtf(var + eps);
        mm[c] = mm[c] * mom + p->mean[c] * (1.0f - mom);
        mv[c] = mv[c] * mom + var * (1.0f - mom);
    }
    for (int64_t r = 0; r < M; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        for (int c = 0; c < C; c++)
            yr[c] = gamma[c] * (xr[c] - p->mean[c]) * p->inv_std[c] + beta[c];
    }
}

static void bn_backward(mr_layer *l, mr_run *run, int batch, const float *x, const float *y,
                        float *dy, float *dx) {
    (void)y;
    bn_priv *p = l->priv;
    const int C = p->C;
    const int64_t M = batch * mr_shape_size(l->in) / C;
    const float *gamma = l->w[0].data;
    float *dgamma = l->w[0].grad, *dbeta = l->w[1].grad;
    /* s1 = sum dy, s2 = sum dy * xhat, per channel (this replica) */
    memset(p->s1, 0, sizeof(double) * (size_t)C);
    memset(p->s2, 0, sizeof(double) * (size_t)C);
    for (int64_t r = 0; r < M; r++)
        for (int c = 0; c < C; c++) {
            double d = dy[r * C + c], xh = ((double)x[r * C + c] - p->mean[c]) * p->inv_std[c];
            p->s1[c] += d;
            p->s2[c] += d * xh;
        }
    for (int c = 0; c < C; c++) {
        dgamma[c] += (float)p->s2[c];
        dbeta[c] += (float)p->s1[c];
    }
    if (dx == NULL) return;
    double count = (double)M;
    if (use_sync(l, run)) {
        /* dx needs the sums over the global batch */
        double both[2 * 512];
        if (C <= 512) {
            memcpy(both, p->s1, sizeof(double) * (size_t)C);
            memcpy(both + C, p->s2, sizeof(double) * (size_t)C);
            if (!sync_doubles(l, run, both, 2 * C, &count)) return;
            memcpy(p->s1, both, sizeof(double) * (size_t)C);
            memcpy(p->s2, both + C, sizeof(double) * (size_t)C);
        } else {
            double n2 = count;
            if (!sync_doubles(l, run, p->s1, C, &count) || !sync_doubles(l, run, p->s2, C, &n2))
                return;
        }
    }
    /* dx = gamma * inv_std / N * (N dy - sum dy - xhat * sum(dy xhat)) */
    for (int64_t r = 0; r < M; r++)
        for (int c = 0; c < C; c++) {
            double xh = ((double)x[r * C + c] - p->mean[c]) * p->inv_std[c];
            double v = (double)gamma[c] * p->inv_std[c] / count *
                       (count * dy[r * C + c] - p->s1[c] - xh * p->s2[c]);
            dx[r * C + c] = (float)v;
        }
}

static void bn_destroy(mr_layer *l) {
    bn_priv *p = l->priv;
    if (p) free(p->mean), free(p->inv_std), free(p->s1), free(p->s2);
    free(p);
    l->priv = NULL;
}

const mr_layer_ops mr_batchnorm_ops = {
    .class_name = "BatchNormalization",
    .setup = bn_setup,
    .init = bn_init,
    .forward = bn_forward,
    .backward = bn_backward,
    .destroy = bn_destroy,
};
