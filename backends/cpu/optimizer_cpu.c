/* optimizer_cpu.c: the fused update loops on the CPU (optimizer.h), one
 * pass over the flat buffers with elementwise.h's per-element math, and
 * the check of a buffer for NaN and Inf (on_nan, checkpoints). */
#include "runtime/elementwise.h"
#include "runtime/target_clones.h"
#include "backends/cpu/cpu_impl.h"

/* With `bad`, the loop also ORs mr_nonfinite over the gradients it reads
 * anyway (branch-free: it still vectorises), the check of on_nan = stop
 * at no extra pass. */
MR_AVX2_CLONES static mr_status cpu_adam(mr_backend *be, mr_dfloat *wd, const mr_dfloat *gd,
                                         mr_dfloat *md, mr_dfloat *vd, size_t n, float alpha,
                                         float b1, float b2, float eps, int *bad, mr_error *err) {
    (void)be, (void)err;
    float *restrict w = mr_dfloat_ptr(wd), *restrict m = mr_dfloat_ptr(md),
                    *restrict v = mr_dfloat_ptr(vd);
    const float *restrict g = mr_dfloat_cptr(gd);
    if (bad == NULL) {
        for (size_t i = 0; i < n; i++)
            mr_adam_update(&w[i], g[i], &m[i], &v[i], alpha, b1, b2, eps);
        return MR_OK;
    }
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        any |= mr_nonfinite(g[i]);
        mr_adam_update(&w[i], g[i], &m[i], &v[i], alpha, b1, b2, eps);
    }
    *bad = any;
    return MR_OK;
}

MR_AVX2_CLONES static mr_status cpu_sgd(mr_backend *be, mr_dfloat *wd, const mr_dfloat *gd,
                                        mr_dfloat *veld, size_t n, float lr, float momentum,
                                        int nesterov, int *bad, mr_error *err) {
    (void)be, (void)err;
    float *restrict w = mr_dfloat_ptr(wd), *restrict vel = mr_dfloat_ptr(veld);
    const float *restrict g = mr_dfloat_cptr(gd);
    int any = 0;
    if (momentum != 0.0f && bad == NULL) {
        for (size_t i = 0; i < n; i++)
            mr_sgd_update(&w[i], g[i], &vel[i], lr, momentum, nesterov);
    } else if (momentum != 0.0f) {
        for (size_t i = 0; i < n; i++) {
            any |= mr_nonfinite(g[i]);
            mr_sgd_update(&w[i], g[i], &vel[i], lr, momentum, nesterov);
        }
    } else if (bad == NULL) {
        for (size_t i = 0; i < n; i++)
            w[i] -= lr * g[i];
    } else {
        for (size_t i = 0; i < n; i++) {
            any |= mr_nonfinite(g[i]);
            w[i] -= lr * g[i];
        }
    }
    if (bad != NULL) *bad = any;
    return MR_OK;
}

/* An OR over the whole buffer, no early exit: branch-free, so it
 * vectorises (a buffer is finite in the common case anyway). */
MR_AVX2_CLONES static mr_status cpu_nonfinite(mr_backend *be, const mr_dfloat *xd, size_t n,
                                              int *any, mr_error *err) {
    (void)be, (void)err;
    const float *restrict x = mr_dfloat_cptr(xd);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= mr_nonfinite(x[i]);
    *any = bad;
    return MR_OK;
}

const mr_optimizer_kernels mr_optimizer_cpu = {
    .adam = cpu_adam, .sgd = cpu_sgd, .nonfinite = cpu_nonfinite};
