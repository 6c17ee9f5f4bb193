/* batchnorm_stats.h: BatchNormalization's sums, statistics and per-element
 * formulas (batchnorm.c says what the layer computes), single source for
 * every device: batchnorm_cpu.c's loops and batchnorm_cuda.cu's kernels
 * call these MR_HD functions (runtime/hd.h), so the CPU tests exercise the
 * GPU's math, and both round each product and sum once (elementwise.h's
 * mr_fadd, mr_fmul, mr_dmul), which keeps their results bitwise equal.
 *   x, y, dy, dx: (M, C) rows of C channels, M = batch * H * W (or batch)
 *
 * Per-channel sums over the rows are a fixed tree (mr_bn_tree_total):
 *   level 0: blocks of MR_BN_ROW_BLOCK rows, each block's terms added in
 *            row order into float partials (from 0);
 *   level 1: runs of MR_BN_FAN_IN consecutive partials (a group of 2048
 *            rows) added in order into a double (from 0);
 *   level 2, 3, ...: runs of MR_BN_FAN_IN consecutive values of the level
 *            below added in order (from 0), until one value remains.
 * No sum has more than 64 terms in sequence, so a GPU takes the levels in
 * parallel (a block per group, then a level per step), and the CPU walks
 * the same tree one value after another: the same sums bit for bit. */
#ifndef MR_BATCHNORM_STATS_H
#define MR_BATCHNORM_STATS_H

#include <math.h>
#include <stdint.h>

#include "runtime/elementwise.h"
#include "runtime/hd.h"

/* The weights, in the order batchnorm.c declares them, each (C). */
enum {
    MR_BN_GAMMA,
    MR_BN_BETA,
    MR_BN_MOVING_MEAN,
    MR_BN_MOVING_VARIANCE,
};

/* Rows summed in float before the partial sums join the double totals. */
#define MR_BN_ROW_BLOCK 32

/* The row blocks of `rows` rows. */
MR_HD static inline int64_t mr_bn_blocks(int64_t rows) {
    return (rows + MR_BN_ROW_BLOCK - 1) / MR_BN_ROW_BLOCK;
}

/* Block j's rows: [*r0, *r1). */
MR_HD static inline void mr_bn_block(int64_t j, int64_t rows, int64_t *r0, int64_t *r1) {
    *r0 = j * MR_BN_ROW_BLOCK;
    *r1 = *r0 + MR_BN_ROW_BLOCK < rows ? *r0 + MR_BN_ROW_BLOCK : rows;
}

/* Values summed in order into one value of the level above. */
#define MR_BN_FAN_IN 64

/* Rows of a level-1 group: a run of MR_BN_FAN_IN row blocks. */
#define MR_BN_GROUP_ROWS (MR_BN_ROW_BLOCK * MR_BN_FAN_IN)

/* The values of the level above n values: ceil(n / MR_BN_FAN_IN). */
MR_HD static inline int64_t mr_bn_runs(int64_t n) {
    return (n + MR_BN_FAN_IN - 1) / MR_BN_FAN_IN;
}

/* The level-1 groups of `rows` rows (0 for no rows). */
MR_HD static inline int64_t mr_bn_groups(int64_t rows) {
    return mr_bn_runs(mr_bn_blocks(rows));
}

/* Run r of the n values v[i * stride]: its (at most MR_BN_FAN_IN) values
 * added in order, from 0. volatile: a GPU reads values other blocks wrote
 * (batchnorm_cuda.cu's last block). */
MR_HD static inline double mr_bn_run_sum(const volatile double *v, int64_t stride, int64_t n,
                                         int64_t r) {
    const int64_t i0 = r * MR_BN_FAN_IN;
    const int64_t i1 = i0 + MR_BN_FAN_IN < n ? i0 + MR_BN_FAN_IN : n;
    double s = 0.0;
    for (int64_t i = i0; i < i1; i++)
        s += v[i * stride];
    return s;
}

/* The slots of a tree over n level-1 values, every level: the n values,
 * then each level above, up to the one value at the top (0 for n = 0). */
MR_HD static inline int64_t mr_bn_tree_slots(int64_t n) {
    int64_t t = n;
    while (n > 1) {
        n = mr_bn_runs(n);
        t += n;
    }
    return t;
}

/* The tree's total over the n level-1 values t[i * stride]: level after
 * level, each level's runs (mr_bn_run_sum) written after the level below,
 * at t[(n + r) * stride] ...; 0 for n = 0. The GPU computes the runs of a
 * level in parallel, in the same slots (batchnorm_cuda.cu). */
MR_HD static inline double mr_bn_tree_total(volatile double *t, int64_t stride, int64_t n) {
    if (n == 0) return 0.0;
    while (n > 1) {
        const int64_t m = mr_bn_runs(n);
        for (int64_t r = 0; r < m; r++)
            t[(n + r) * stride] = mr_bn_run_sum(t, stride, n, r);
        t += n * stride;
        n = m;
    }
    return t[0];
}

/* One element's terms of the channel sums: *f1 += a, *f2 += a * b, where
 * a = u - ua and b = (v - vb) * vs:
 *   forward:  u = v = x, ua = vb = the shift, vs = 1 (sums of x - s and (x - s)^2)
 *   backward: u = dy, ua = 0, v = x, vb = mean, vs = inv_std (sums of dy and dy * xhat) */
MR_HD static inline void mr_bn_sum_terms(float u, float ua, float v, float vb, float vs, float *f1,
                                         float *f2) {
    const float a = u - ua, b = mr_fmul(v - vb, vs);
    *f1 = mr_fadd(*f1, a);
    *f2 = mr_fadd(*f2, mr_fmul(a, b));
}

/* 1: the forward's sums go around the moving mean (with sync, which every
 * replica holds bit for bit, so their shifted sums can be added; or no
 * rows); 0: around the batch's first row (a sample of the channel, near
 * its mean). Either way the variance E[(x-s)^2] - E[x-s]^2 does not
 * cancel catastrophically. */
MR_HD static inline int mr_bn_shift_is_moving_mean(int sync, int64_t rows) {
    return sync || rows == 0;
}

/* The floats that sync_sum adds over the replicas: the C sums s1, the C
 * sums s2, then the count of rows. */
MR_HD static inline int64_t mr_bn_sync_floats(int C) {
    return 2 * (int64_t)C + 1;
}

/* One channel's training statistics from its shifted sums s1 = sum (x - s),
 * s2 = sum (x - s)^2 over count rows: the mean, 1 / sqrt(biased var + eps),
 * scale = gamma * inv_std, and the moving averages updated as Keras's
 * (moving = moving * momentum + batch * (1 - momentum)). */
MR_HD static inline void mr_bn_stats(double s1, double s2, double count, float shift, float gamma,
                                     float eps, float mom, float *mean, float *inv_std,
                                     float *scale, float *mm, float *mv) {
    const double m1 = s1 / count;
    double var = s2 / count - mr_dmul(m1, m1);
    if (var < 0.0) var = 0.0; /* rounding */
    const float mu = (float)((double)shift + m1);
    *mean = mu;
    *inv_std = (float)(1.0 / sqrt(var + (double)eps));
    *scale = mr_fmul(gamma, *inv_std);
    *mm = mr_fadd(mr_fmul(*mm, mom), mr_fmul(mu, 1.0f - mom));
    *mv = mr_fadd(mr_fmul(*mv, mom), mr_fmul((float)var, 1.0f - mom));
}

/* Inference's scale of a channel: gamma / sqrt(moving_var + eps). */
MR_HD static inline float mr_bn_infer_scale(float gamma, float mv, float eps) {
    return gamma / sqrtf(mv + eps);
}

/* y = (x - mean) * scale + beta (training: the batch's mean; inference:
 * the moving mean). */
MR_HD static inline float mr_bn_normalize(float x, float mean, float scale, float beta) {
    return mr_fadd(mr_fmul(x - mean, scale), beta);
}

/* Backward's factors of a channel from s1 = sum dy and s2 = sum dy * xhat
 * over count rows: fa = gamma * inv_std, fm = mean(dy),
 * fb = fa * inv_std * mean(dy * xhat), for mr_bn_dx. */
MR_HD static inline void mr_bn_factors(double s1, double s2, double count, float gamma,
                                       float inv_std, float *fa, float *fb, float *fm) {
    const double a = mr_dmul((double)gamma, (double)inv_std);
    *fa = (float)a;
    *fm = (float)(s1 / count);
    *fb = (float)mr_dmul(mr_dmul(a, (double)inv_std), s2 / count);
}

/* dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat))
 *    = fa * (dy - fm) - fb * (x - mean). */
MR_HD static inline float mr_bn_dx(float dy, float x, float mean, float fa, float fb, float fm) {
    return mr_fsub(mr_fmul(fa, dy - fm), mr_fmul(fb, x - mean));
}

#endif
