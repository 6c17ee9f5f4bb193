/* elementwise.h: the per-element math, single source for every backend.
 *
 * Compiled as plain C for the CPU loops and, under nvcc, as host+device
 * functions for the CUDA kernels, so the CPU tests exercise the very
 * formulas the GPU runs. Only static inline functions of scalars here
 * (MR_HD: hd.h). */
#ifndef MR_ELEMENTWISE_H
#define MR_ELEMENTWISE_H

#include <math.h>
#include <stdint.h>

#include "runtime/hd.h"
#include "runtime/rng.h"

/* One rounding per operation, as the CPU's C expressions have (the C
 * build does not contract a * b + c into a fused multiply-add): under
 * nvcc the __*_rn intrinsics, which it never contracts either. For the
 * functions whose every product and sum must round as the CPU's do. */
MR_HD static inline float mr_fadd(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
MR_HD static inline float mr_fsub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
MR_HD static inline float mr_fmul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
MR_HD static inline double mr_dmul(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}

/* Activations: forward of x, derivative expressed through the output y
 * (cheaper: no need to keep x). */
MR_HD static inline float mr_relu(float x) {
    return x > 0.0f ? x : 0.0f;
}
MR_HD static inline float mr_relu_grad(float y) {
    return y > 0.0f ? 1.0f : 0.0f;
}
MR_HD static inline float mr_sigmoid(float x) {
    /* split on sign so expf never overflows */
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
MR_HD static inline float mr_sigmoid_grad(float y) {
    return y * (1.0f - y);
}
MR_HD static inline float mr_tanh_grad(float y) {
    return 1.0f - y * y;
}
/* Keras's elu (alpha 1): x, or exp(x) - 1 below 0; the slope below 0 is
 * exp(x) = y + 1 */
MR_HD static inline float mr_elu(float x) {
    return x > 0.0f ? x : expm1f(x);
}
MR_HD static inline float mr_elu_grad(float y) {
    return y > 0.0f ? 1.0f : y + 1.0f;
}
/* Keras's gelu (approximate=False): x Phi(x), Phi the normal CDF; its
 * derivative Phi(x) + x phi(x) needs x */
MR_HD static inline float mr_gelu(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678f));
}
MR_HD static inline float mr_gelu_grad_x(float x) {
    return 0.5f * (1.0f + erff(x * 0.70710678f)) + x * 0.39894228f * expf(-0.5f * x * x);
}
/* swish/silu: x sigmoid(x); derivative s + x s (1 - s), s = sigmoid(x) */
MR_HD static inline float mr_swish(float x) {
    return x * mr_sigmoid(x);
}
MR_HD static inline float mr_swish_grad_x(float x) {
    float s = mr_sigmoid(x);
    return s + x * s * (1.0f - s);
}
/* Keras 3's leaky_relu (negative_slope 0.2): the sign of y is x's */
#define MR_LEAKY_SLOPE 0.2f
MR_HD static inline float mr_leaky_relu(float x) {
    return x > 0.0f ? x : MR_LEAKY_SLOPE * x;
}
MR_HD static inline float mr_leaky_relu_grad(float y) {
    return y > 0.0f ? 1.0f : MR_LEAKY_SLOPE;
}

/* Keras's ReLU layer (models/relu.c) as keras.activations.relu computes
 * it: x above the threshold t (else 0), clipped to [0, mx] where mx >= 0
 * (mx < 0: no maximum), less ns * max(t - x, 0). */
MR_HD static inline float mr_relu_layer(float x, float mx, float ns, float t) {
    float y = x > t ? x : 0.0f;
    if (mx >= 0.0f) y = y < mx ? y : mx;
    if (ns != 0.0f) y = mr_fsub(y, mr_fmul(ns, x < t ? mr_fsub(t, x) : 0.0f));
    return y;
}
/* Its derivative in x as TensorFlow's gradients of Keras's ops give it: 1
 * between t and mx (both excluded, as Relu6's at 6), ns below t, 0 at t,
 * except ns at 0 where Keras takes leaky_relu (no mx, t 0). */
MR_HD static inline float mr_relu_layer_grad(float x, float mx, float ns, float t) {
    if (x > t) return mx >= 0.0f && x >= mx ? 0.0f : 1.0f;
    return x < t || (mx < 0.0f && t == 0.0f) ? ns : 0.0f;
}

/* Softmax of one row (width floats) in place, the max subtracted first so
 * expf never overflows; one pass per step in index order (the CPU loop
 * and a GPU thread per row sum alike). */
MR_HD static inline void mr_softmax_row(float *row, int width) {
    float mx = row[0], sum = 0.0f;
    for (int j = 1; j < width; j++)
        mx = row[j] > mx ? row[j] : mx;
    for (int j = 0; j < width; j++) {
        row[j] = expf(row[j] - mx);
        sum += row[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < width; j++)
        row[j] *= inv;
}

/* dy (one row) becomes dL/dx through the softmax whose output is y:
 * dx_j = y_j (dy_j - sum_k dy_k y_k). */
MR_HD static inline void mr_softmax_grad_row(const float *y, float *dy, int width) {
    float dot = 0.0f;
    for (int j = 0; j < width; j++)
        dot += dy[j] * y[j];
    for (int j = 0; j < width; j++)
        dy[j] = y[j] * (dy[j] - dot);
}

/* LayerNormalization of one row x (C values; models/layernorm.c), as
 * keras.ops.layer_normalization computes it in float32: mean and biased
 * variance in two passes (tf.nn.moments: the mean of (x - mean)^2; the
 * sums in double, in index order, so that a GPU thread per row adds as
 * the CPU loop does), rstd = rsqrt(var + epsilon). */
MR_HD static inline void mr_layernorm_stats(const float *x, int C, float epsilon, float *mean,
                                            float *rstd) {
    double s = 0.0;
    for (int j = 0; j < C; j++)
        s += x[j];
    const float m = (float)(s / C);
    double v = 0.0;
    for (int j = 0; j < C; j++) {
        const float d = x[j] - m;
        v += (double)d * d;
    }
    *mean = m;
    *rstd = 1.0f / sqrtf((float)(v / C) + epsilon);
}
/* y (one row) from x and the row's mean and rstd, in Keras's order:
 * inv = rstd * gamma, y = x * inv + (beta - mean * inv); gamma or beta
 * NULL: absent ([layernorm] scale or center 0). */
MR_HD static inline void mr_layernorm_row(const float *x, int C, float mean, float rstd,
                                          const float *gamma, const float *beta, float *y) {
    for (int j = 0; j < C; j++) {
        const float inv = gamma ? rstd * gamma[j] : rstd;
        const float res = beta ? beta[j] - mean * inv : -mean * inv;
        y[j] = x[j] * inv + res;
    }
}
/* One element's terms of the weight gradients: *dg += dy * xhat, *db += dy,
 * xhat = (x - mean) * rstd; both devices add the rows in order from row 0,
 * in float, per channel. */
MR_HD static inline void mr_layernorm_grad_add(float dy, float x, float mean, float rstd, float *dg,
                                               float *db) {
    *dg += dy * ((x - mean) * rstd);
    *db += dy;
}
/* dx (one row) of y = xhat * gamma + beta, xhat = (x - mean) * rstd, given
 * dy: with g = dy * gamma, dx = rstd * (g - mean(g) - xhat * mean(g xhat))
 * (the means over the row; gamma NULL: 1). */
MR_HD static inline void mr_layernorm_dx_row(const float *x, const float *dy, int C, float mean,
                                             float rstd, const float *gamma, float *dx) {
    double s1 = 0.0, s2 = 0.0;
    for (int j = 0; j < C; j++) {
        const float g = gamma ? dy[j] * gamma[j] : dy[j];
        s1 += g;
        s2 += (double)g * ((x[j] - mean) * rstd);
    }
    const float m1 = (float)(s1 / C), m2 = (float)(s2 / C);
    for (int j = 0; j < C; j++) {
        const float g = gamma ? dy[j] * gamma[j] : dy[j];
        dx[j] = rstd * (g - m1 - (x[j] - mean) * rstd * m2);
    }
}

/* Adam as Keras 3 writes it: alpha = lr * sqrt(1 - b2^t) / (1 - b1^t) is
 * computed once per step; epsilon is added outside the square root. */
MR_HD static inline void mr_adam_update(float *w, float g, float *m, float *v, float alpha,
                                        float beta1, float beta2, float epsilon) {
    *m += (g - *m) * (1.0f - beta1);
    *v += (g * g - *v) * (1.0f - beta2);
    *w -= (*m * alpha) / (sqrtf(*v) + epsilon);
}

/* RMSprop as Keras 3 writes it (plain momentum, not centered):
 * ms = rho ms + (1 - rho) g^2;  inc = lr g / sqrt(ms + eps)
 * (epsilon inside the root); w -= inc, or with momentum:
 * mom = momentum mom + inc; w -= mom. */
MR_HD static inline void mr_rmsprop_update(float *w, float g, float *ms, float *mom, float lr,
                                           float rho, float momentum, float epsilon) {
    *ms = rho * *ms + (1.0f - rho) * (g * g);
    const float inc = lr * g / sqrtf(*ms + epsilon);
    if (momentum > 0.0f) {
        *mom = momentum * *mom + inc;
        *w -= *mom;
    } else {
        *w -= inc;
    }
}

/* A gradient clipped to [-c, c] (Keras clipvalue); c 0: unchanged. NaN
 * stays NaN (the comparisons are false), as in Keras. */
MR_HD static inline float mr_clip_value(float g, float c) {
    if (c <= 0.0f) return g;
    return g > c ? c : (g < -c ? -c : g);
}

/* Decoupled weight decay (Keras 3's weight_decay, AdamW), before the
 * update: w -= w * wd * lr. wd 0: unchanged. */
MR_HD static inline void mr_decay_weight(float *w, float wd, float lr) {
    if (wd != 0.0f) *w -= *w * wd * lr;
}

/* NaN or +-Inf: what the step's check looks for in the gradients and the
 * checkpoint's in the weights (one compare: |x| <= FLT_MAX is false for
 * both, so the CPU loop vectorises). */
MR_HD static inline int mr_nonfinite(float x) {
    return !(fabsf(x) <= 3.40282347e+38f);
}

/* SGD with momentum as Keras: v = momentum * v - lr * g; w += v
 * (Nesterov: w += momentum * v - lr * g). momentum 0 is plain SGD. */
MR_HD static inline void mr_sgd_update(float *w, float g, float *vel, float lr, float momentum,
                                       int nesterov) {
    if (momentum == 0.0f) {
        *w -= lr * g;
        return;
    }
    *vel = momentum * *vel - lr * g;
    *w += nesterov ? momentum * *vel - lr * g : *vel;
}

/* Inverted dropout, per element. Element j of the row of global sample
 * `sample` in layer `layer` at optimizer step `step` draws its keep bit from
 * word j % 4 of Philox (rng.h) keyed by (seed, MR_RNG_STREAM_DROPOUT) at
 * counter (step, sample, layer | sample's high bits << 16, j / 4): a pure
 * function of where the element is, so every device (and any replica
 * count) drops the same elements. mr_dropout_words gives the four words of
 * elements 4*j4 .. 4*j4+3; key from mr_rng_key. */
MR_HD static inline void mr_dropout_words(const uint32_t key[2], int64_t step, uint64_t sample,
                                          int layer, int64_t j4, uint32_t w[4]) {
    mr_philox4x32(key[0], key[1], (uint32_t)step, (uint32_t)sample,
                  (uint32_t)layer | (uint32_t)(sample >> 32) << 16, (uint32_t)j4, w);
}
/* x kept and scaled by 1 / (1 - rate), or dropped (+0), from its word. */
MR_HD static inline float mr_dropout_apply(float x, uint32_t word, float rate, float scale) {
    return mr_rng_u01(word) >= rate ? x * scale : 0.0f;
}
/* The scale of a kept element: 1 / (1 - rate). */
MR_HD static inline float mr_dropout_scale(float rate) {
    return 1.0f / (1.0f - rate);
}
/* Elements 4*j4 .. 4*j4+3 of a row of n (those below n), from one Philox
 * call: dst = src kept and scaled, or dropped; dst may be src. */
MR_HD static inline void mr_dropout_group(const uint32_t key[2], int64_t step, uint64_t sample,
                                          int layer, int64_t j4, int64_t n, float rate, float scale,
                                          const float *src, float *dst) {
    uint32_t w[4];
    mr_dropout_words(key, step, sample, layer, j4, w);
    const int64_t j = 4 * j4;
    for (int k = 0; k < 4 && j + k < n; k++)
        dst[j + k] = mr_dropout_apply(src[j + k], w[k], rate, scale);
}

/* SpatialDropout2D: one keep draw per (example, channel), for every pixel
 * of that channel: channel c's is word c % 4 of group c / 4 of
 * mr_dropout_words (the counter of element c of a row of C). 1: kept. */
MR_HD static inline int mr_spatial_dropout_keep(const uint32_t key[2], int64_t step,
                                                uint64_t sample, int layer, int c, float rate) {
    uint32_t w[4];
    mr_dropout_words(key, step, sample, layer, c / 4, w);
    return mr_rng_u01(w[c % 4]) >= rate;
}

/* Rescaling: x * scale + offset, rounded after the product and after the
 * sum as Keras's two float32 ops are (nvcc would fuse them into one
 * multiply-add, which rounds once: __fmul_rn/__fadd_rn keep the CPU's
 * bits). */
MR_HD static inline float mr_rescale(float x, float scale, float offset) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(__fmul_rn(x, scale), offset);
#else
    return x * scale + offset;
#endif
}

/* Normalization (Keras 3.15's preprocessing Normalization call):
 * y = (x - mean) / max(sqrt(variance), epsilon) with Keras's backend
 * epsilon 1e-7, each op rounded as Keras's float32 ops are (sqrtf is
 * correctly rounded on both sides; __fsub_rn/__fdiv_rn keep nvcc from
 * other forms). mr_normalize_std gives the divisor of a channel. */
MR_HD static inline float mr_normalize_std(float variance) {
    return fmaxf(sqrtf(variance), 1e-7f);
}
MR_HD static inline float mr_normalize(float x, float mean, float std) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(__fsub_rn(x, mean), std);
#else
    return (x - mean) / std;
#endif
}
/* dx = dy / std */
MR_HD static inline float mr_normalize_grad(float dy, float std) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(dy, std);
#else
    return dy / std;
#endif
}

#endif
