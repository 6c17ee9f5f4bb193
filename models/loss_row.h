/* loss_row.h: one example's loss, hit and gradient, single source for
 * every device (MR_HD: loss_cpu.c loops over the rows, loss_cuda.cu runs
 * a thread per row), so the CPU tests exercise the GPU's formulas.
 *
 * z: (k) the example's model outputs (logits when `fused_softmax`), y its
 * class, inv = 1 / the global batch size, ls the cross-entropies' label
 * smoothing: target t_j = (1 - ls) [j == y] + ls / k (Keras
 * CategoricalCrossentropy); ls = 0 is the plain one-hot, computed as before. Keras clips
 * probabilities to [eps, 1 - eps] before the log when the cross-entropy gets probabilities rather
 * than logits. */
#ifndef MR_LOSS_ROW_H
#define MR_LOSS_ROW_H

#include <math.h>
#include <stdint.h>

#include "runtime/hd.h"
#include "models/config.h"

#define MR_LOSS_CLIP_EPS 1e-7f

/* Index of the largest output; the first one on ties. */
MR_HD static inline int mr_argmax_row(const float *z, int k) {
    int best = 0;
    for (int j = 1; j < k; j++)
        if (z[j] > z[best]) best = j;
    return best;
}

/* 1 when label y is among the top_k largest of z (k): fewer than top_k
 * outputs are strictly greater than z[y], so outputs tied with z[y] at the
 * boundary all count (TensorFlow's in_top_k, which Keras 3's
 * SparseTopKCategoricalAccuracy calls); a row with a NaN or infinite output
 * is a miss, as there. */
MR_HD static inline int mr_in_top_k_row(const float *z, int y, int k, int top_k) {
    int above = 0;
    for (int j = 0; j < k; j++) {
        if (!isfinite(z[j])) return 0;
        above += z[j] > z[y];
    }
    return above < top_k;
}

/* 1 when the example counts as right: the argmax is y, or for
 * binary_crossentropy (one output, y 0 or 1) Keras's binary_accuracy,
 * (p > 0.5) == y, which is z > 0 for a logit (fused: sigmoid(z) > 0.5). */
MR_HD static inline int mr_hit_row(mr_loss_kind kind, int fused, const float *z, int y, int k) {
    if (kind == MR_LOSS_BINARY_CROSSENTROPY) return (z[0] > (fused ? 0.0f : 0.5f)) == (y != 0);
    return mr_argmax_row(z, k) == y;
}

/* The weight of an example of class y: its class_weight (loss.h), 1
 * without (cw NULL). The caller multiplies the row's loss by it and passes
 * inv x it to mr_loss_row, so that dy carries it too. */
MR_HD static inline float mr_class_weight(const float *cw, int y) {
    return cw ? cw[y] : 1.0f;
}

/* One output's regression loss for the error e = z - t, and its derivative in *g: mse e^2
 * (2e), mae |e| (sign e, 0 at 0 as TensorFlow's abs), huber (Keras, delta 1) e^2 / 2 where
 * |e| <= delta, else delta |e| - delta^2 / 2 (e clipped to [-delta, delta]). */
MR_HD static inline double mr_regression_term(mr_loss_kind kind, float e, float *g) {
    const float a = fabsf(e), s = e > 0.0f ? 1.0f : (e < 0.0f ? -1.0f : 0.0f);
    if (kind == MR_LOSS_MAE) {
        *g = s;
        return a;
    }
    if (kind == MR_LOSS_HUBER) {
        const float dl = MR_HUBER_DELTA;
        *g = a <= dl ? e : dl * s;
        return a <= dl ? 0.5 * (double)e * e : (double)dl * a - 0.5 * (double)dl * dl;
    }
    *g = 2.0f * e;
    return (double)e * e;
}

/* The example's loss (double, summed by the caller in row order); when d
 * is not NULL, d (k) = d (loss / global batch) / d z. */
MR_HD static inline double mr_loss_row(mr_loss_kind kind, int fused_softmax, float ls,
                                       const float *z, int y, int k, float inv, float *d) {
    if (kind == MR_LOSS_MSE || kind == MR_LOSS_MAE || kind == MR_LOSS_HUBER) {
        /* class ids: mean over the k outputs of the loss of out - onehot, as Keras on one-hot
         * targets (mr_regression_term) */
        double s = 0.0;
        for (int j = 0; j < k; j++) {
            float g;
            s += mr_regression_term(kind, z[j] - (j == y ? 1.0f : 0.0f), &g);
            if (d) d[j] = g / (float)k * inv;
        }
        return s / k;
    }
    if (kind == MR_LOSS_BINARY_CROSSENTROPY) {
        /* one output (k = 1), y 0 or 1, smoothed target t = (1 - ls) y + ls / 2 (Keras
         * BinaryCrossentropy). Fused (a final sigmoid, or from_logits): z is the logit and
         * loss = max(z, 0) - z t + log(1 + exp(-|z|)), TensorFlow's
         * sigmoid_cross_entropy_with_logits, which Keras 3 runs on a sigmoid's input too (its
         * sigmoid keeps _keras_logits), so the probabilities are never clipped there;
         * dz = sigmoid(z) - t. Otherwise z is p: -(t log pc + (1 - t) log(1 - pc)), pc p
         * clipped to [eps, 1 - eps], no gradient where clipped. */
        const float t = (y ? 1.0f : 0.0f) * (1.0f - ls) + 0.5f * ls;
        const float x = z[0];
        if (fused_softmax) {
            if (d) {
                /* sigmoid through exp(-|x|), which cannot overflow */
                const float e = expf(-fabsf(x));
                const float s = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
                d[0] = (s - t) * inv;
            }
            return (double)(x > 0.0f ? x : 0.0f) - (double)x * t + log1p(exp(-fabs((double)x)));
        }
        const float pc = x < MR_LOSS_CLIP_EPS
                             ? MR_LOSS_CLIP_EPS
                             : (x > 1.0f - MR_LOSS_CLIP_EPS ? 1.0f - MR_LOSS_CLIP_EPS : x);
        if (d) d[0] = x == pc ? (-t / x + (1.0f - t) / (1.0f - x)) * inv : 0.0f;
        return -((double)t * log((double)pc) + (1.0 - (double)t) * log(1.0 - (double)pc));
    }
    if (fused_softmax) {
        /* loss = logsumexp(z) - z_y; dz = softmax(z) - onehot */
        float mx = z[0];
        for (int j = 1; j < k; j++)
            mx = z[j] > mx ? z[j] : mx;
        float sum = 0.0f;
        for (int j = 0; j < k; j++)
            sum += expf(z[j] - mx);
        float lse = mx + logf(sum);
        if (ls > 0.0f) {
            /* loss = lse - sum_j t_j z_j; dz = softmax(z) - t */
            const float off = ls / (float)k, on = 1.0f - ls + off;
            double tz = 0.0;
            for (int j = 0; j < k; j++)
                tz += (double)(j == y ? on : off) * z[j];
            if (d) {
                float is = 1.0f / sum;
                for (int j = 0; j < k; j++)
                    d[j] = (expf(z[j] - mx) * is - (j == y ? on : off)) * inv;
            }
            return (double)lse - tz;
        }
        if (d) {
            float is = 1.0f / sum;
            for (int j = 0; j < k; j++)
                d[j] = (expf(z[j] - mx) * is - (j == y)) * inv;
        }
        return (double)(lse - z[y]);
    }
    if (ls > 0.0f) {
        /* probabilities in: -sum_j t_j log(clip(p_j)); no gradient where clipped */
        const float off = ls / (float)k, on = 1.0f - ls + off;
        double s = 0.0;
        for (int j = 0; j < k; j++) {
            float pj = z[j], t = j == y ? on : off;
            float pc = pj < MR_LOSS_CLIP_EPS
                           ? MR_LOSS_CLIP_EPS
                           : (pj > 1.0f - MR_LOSS_CLIP_EPS ? 1.0f - MR_LOSS_CLIP_EPS : pj);
            s -= (double)t * log((double)pc);
            if (d) d[j] = pj == pc ? -t / pj * inv : 0.0f;
        }
        return s;
    }
    /* probabilities in: -log(clip(p_y)) */
    float p = z[y];
    float pc = p < MR_LOSS_CLIP_EPS ? MR_LOSS_CLIP_EPS
                                    : (p > 1.0f - MR_LOSS_CLIP_EPS ? 1.0f - MR_LOSS_CLIP_EPS : p);
    if (d) {
        for (int j = 0; j < k; j++)
            d[j] = 0.0f;
        if (p == pc) d[y] = -1.0f / p * inv;
    }
    return -log((double)pc);
}

/* Multi-label binary_crossentropy: k sigmoid outputs, t (k) the example's 0/1 targets (a
 * multi-hot row). The example's loss is the MEAN over the k outputs of the one-output loss above
 * (Keras BinaryCrossentropy averages the last axis before the batch), so each output's gradient
 * carries 1 / k: d (k) = d (loss / global batch) / d z, inv = 1 / the global batch size. */
MR_HD static inline double mr_bce_multi_row(int fused, float ls, const float *z, const int32_t *t,
                                            int k, float inv, float *d) {
    double s = 0.0;
    for (int j = 0; j < k; j++)
        s += mr_loss_row(MR_LOSS_BINARY_CROSSENTROPY, fused, ls, z + j, t[j], 1, inv / (float)k,
                         d ? d + j : NULL);
    return s / k;
}

/* Multi-label binary_accuracy's numerator: how many of the k outputs match their 0/1 target
 * (p > 0.5, or z > 0 when fused), an integer, so sums of it are exact under all-reduce; the
 * accuracy divides by examples x k. */
MR_HD static inline int mr_bce_multi_hits(int fused, const float *z, const int32_t *t, int k) {
    int hits = 0;
    for (int j = 0; j < k; j++)
        hits += mr_hit_row(MR_LOSS_BINARY_CROSSENTROPY, fused, z + j, t[j], 1);
    return hits;
}

/* 1: multi-label binary_crossentropy (k > 1 sigmoid outputs): labels are (batch, k) multi-hot
 * rows and hits count matched outputs; otherwise labels are (batch), one class an example. */
MR_HD static inline int mr_loss_multi_label(mr_loss_kind kind, int k) {
    return kind == MR_LOSS_BINARY_CROSSENTROPY && k > 1;
}

/* A float target carried in a label word: the regression losses' labels are float32 bit
 * patterns in the int32 label buffers (runtime/dataset.h), read back here. */
MR_HD static inline float mr_label_float(int32_t w) {
    union {
        int32_t i;
        float f;
    } u;
    u.i = w;
    return u.f;
}

/* 1: the loss takes float targets (labels (batch, k) of mr_label_float) when `fused` says so:
 * mse, mae and huber on any last layer but a softmax (loss.h). */
MR_HD static inline int mr_loss_float_targets(mr_loss_kind kind, int fused) {
    return fused && (kind == MR_LOSS_MSE || kind == MR_LOSS_MAE || kind == MR_LOSS_HUBER);
}

/* A regression example: out z (k), float targets t (k, label words); its loss is the MEAN over
 * the k outputs (Keras reduces the last axis first), so each output's gradient carries 1 / k:
 * d (k) = d (loss / global batch) / d z, inv = 1 / the global batch size. */
MR_HD static inline double mr_regression_row(mr_loss_kind kind, const float *z, const int32_t *t,
                                             int k, float inv, float *d) {
    double s = 0.0;
    for (int j = 0; j < k; j++) {
        float g;
        s += mr_regression_term(kind, z[j] - mr_label_float(t[j]), &g);
        if (d) d[j] = g / (float)k * inv;
    }
    return s / k;
}

/* What a loss kernel computes for example i of out (batch, k), on every device (loss_cpu.c's
 * loop, loss_cuda.cu's thread per row): returns its loss, weighted by its class's cw (k, or NULL:
 * none); *hit its hits (0 or 1; multi-label: its matched outputs, 0..k); *top 1 where top_k > 0
 * and its label is among the top_k outputs, else 0 (multi-label, regression: 0); and, dy not NULL,
 * its row of dy (batch, k). labels as mr_loss_float_targets and mr_loss_multi_label say, inv = 1 /
 * the global batch size. The caller adds the losses in row order. */
MR_HD static inline double mr_loss_example(mr_loss_kind kind, int fused, float ls, const float *out,
                                           const int32_t *labels, const float *cw, int i, int k,
                                           float inv, int top_k, float *dy, int *hit, int *top) {
    const float *z = out + (int64_t)i * k;
    float *d = dy ? dy + (int64_t)i * k : NULL;
    if (mr_loss_float_targets(kind, fused)) {
        *hit = *top = 0; /* no accuracy for regression */
        return mr_regression_row(kind, z, labels + (int64_t)i * k, k, inv, d);
    }
    if (mr_loss_multi_label(kind, k)) {
        const int32_t *t = labels + (int64_t)i * k;
        *hit = mr_bce_multi_hits(fused, z, t, k);
        *top = 0;
        return mr_bce_multi_row(fused, ls, z, t, k, inv, d);
    }
    const int y = labels[i];
    *hit = mr_hit_row(kind, fused, z, y, k);
    *top = top_k > 0 ? mr_in_top_k_row(z, y, k, top_k) : 0;
    const float w = mr_class_weight(cw, y);
    const double l = mr_loss_row(kind, fused, ls, z, y, k, inv * w, d);
    return cw ? w * l : l;
}

#endif
