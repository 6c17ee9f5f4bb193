/* elementwise.h: the per-element math, single source for every backend.
 *
 * Compiled as plain C for the CPU loops and, under nvcc, as host+device
 * functions for the CUDA kernels, so the CPU tests exercise the very
 * formulas the GPU runs. Only static inline functions of scalars here. */
#ifndef MR_ELEMENTWISE_H
#define MR_ELEMENTWISE_H

#include <math.h>

#ifdef __CUDACC__
#define MR_HD __host__ __device__
#else
#define MR_HD
#endif

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

/* Adam as Keras 3 writes it: alpha = lr * sqrt(1 - b2^t) / (1 - b1^t) is
 * computed once per step; epsilon is added outside the square root. */
MR_HD static inline void mr_adam_update(float *w, float g, float *m, float *v, float alpha,
                                        float beta1, float beta2, float epsilon) {
    *m += (g - *m) * (1.0f - beta1);
    *v += (g * g - *v) * (1.0f - beta2);
    *w -= (*m * alpha) / (sqrtf(*v) + epsilon);
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

#endif
