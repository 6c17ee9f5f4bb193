/* optimizer_cpu.c: the fused update loops on the CPU (optimizer.h), one
 * pass over the flat buffers with elementwise.h's per-element math, the
 * checks of a buffer (NaN and Inf for on_nan and checkpoints, the sum of
 * squares for norm clipping and L2 penalties) and y += a x (L2
 * gradients). */
#include "runtime/elementwise.h"
#include "runtime/target_clones.h"
#include "backends/cpu/cpu_impl.h"

/* Each loop ORs mr_nonfinite over the gradients it reads anyway
 * (branch-free: it still vectorises), the check of on_nan = stop at no
 * extra pass. The plain form (no clipvalue, no weight decay, the common
 * case) is a loop of its own so that it vectorises as tightly as before
 * those options existed. */
#define UPDATE_LOOPS(STEP)                                                                         \
    do {                                                                                           \
        const float cv = opt->clipvalue, dec = opt->weight_decay, lr = r->lr;                      \
        int any = 0;                                                                               \
        if (cv == 0.0f && dec == 0.0f) {                                                           \
            for (size_t i = 0; i < n; i++) {                                                       \
                const float gi = g[i];                                                             \
                any |= mr_nonfinite(gi);                                                           \
                STEP;                                                                              \
            }                                                                                      \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++) {                                                       \
                any |= mr_nonfinite(g[i]);                                                         \
                const float gi = mr_clip_value(g[i], cv);                                          \
                mr_decay_weight(&w[i], dec, lr);                                                   \
                STEP;                                                                              \
            }                                                                                      \
        }                                                                                          \
        if (bad != NULL) *bad = any;                                                               \
    } while (0)

MR_AVX2_CLONES static mr_status cpu_adam(mr_backend *be, const mr_optimizer *opt,
                                         const mr_step_rates *r, mr_dfloat *wd, const mr_dfloat *gd,
                                         mr_dfloat *md, mr_dfloat *vd, size_t n, int *bad,
                                         mr_error *err) {
    (void)be, (void)err;
    float *restrict w = mr_dfloat_ptr(wd), *restrict m = mr_dfloat_ptr(md),
                    *restrict v = mr_dfloat_ptr(vd);
    const float *restrict g = mr_dfloat_cptr(gd);
    const float alpha = r->alpha, b1 = opt->beta1, b2 = opt->beta2, eps = opt->epsilon;
    UPDATE_LOOPS(mr_adam_update(&w[i], gi, &m[i], &v[i], alpha, b1, b2, eps));
    return MR_OK;
}

/* momentum 0: plain SGD, no velocity (optimizer.h) */
MR_AVX2_CLONES static mr_status cpu_sgd(mr_backend *be, const mr_optimizer *opt,
                                        const mr_step_rates *r, mr_dfloat *wd, const mr_dfloat *gd,
                                        mr_dfloat *veld, mr_dfloat *unused, size_t n, int *bad,
                                        mr_error *err) {
    (void)be, (void)err, (void)unused;
    float *restrict w = mr_dfloat_ptr(wd), *restrict vel = mr_dfloat_ptr(veld);
    const float *restrict g = mr_dfloat_cptr(gd);
    const float momentum = opt->momentum;
    const int nesterov = opt->nesterov;
    if (momentum != 0.0f)
        UPDATE_LOOPS(mr_sgd_update(&w[i], gi, &vel[i], lr, momentum, nesterov));
    else
        UPDATE_LOOPS(mr_sgd_update(&w[i], gi, NULL, lr, 0.0f, 0));
    return MR_OK;
}

/* without momentum, mom is NULL: mr_rmsprop_update does not touch it */
MR_AVX2_CLONES static mr_status cpu_rmsprop(mr_backend *be, const mr_optimizer *opt,
                                            const mr_step_rates *r, mr_dfloat *wd,
                                            const mr_dfloat *gd, mr_dfloat *msd, mr_dfloat *momd,
                                            size_t n, int *bad, mr_error *err) {
    (void)be, (void)err;
    float *restrict w = mr_dfloat_ptr(wd), *restrict ms = mr_dfloat_ptr(msd);
    const float *restrict g = mr_dfloat_cptr(gd);
    const float rho = opt->rho, eps = opt->epsilon;
    if (opt->momentum > 0.0f) {
        float *restrict mom = mr_dfloat_ptr(momd);
        const float momentum = opt->momentum;
        UPDATE_LOOPS(mr_rmsprop_update(&w[i], gi, &ms[i], &mom[i], lr, rho, momentum, eps));
    } else {
        float unused = 0.0f;
        UPDATE_LOOPS(mr_rmsprop_update(&w[i], gi, &ms[i], &unused, lr, rho, 0.0f, eps));
    }
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

/* optimizer.h's order: MR_SUMSQ_PARTS partial sums in double (exact
 * products of floats, so a fused multiply-add gives the same bits), then
 * those in order: the bits of the CUDA kernel's sum. */
MR_AVX2_CLONES static mr_status cpu_sumsq(mr_backend *be, const mr_dfloat *xd, size_t n,
                                          double *sum, mr_error *err) {
    (void)be, (void)err;
    const float *x = mr_dfloat_cptr(xd);
    double part[MR_SUMSQ_PARTS] = {0};
    for (size_t base = 0; base < n; base += MR_SUMSQ_PARTS) {
        const size_t k = n - base < MR_SUMSQ_PARTS ? n - base : MR_SUMSQ_PARTS;
        for (size_t t = 0; t < k; t++)
            part[t] += (double)x[base + t] * (double)x[base + t];
    }
    double s = 0.0;
    for (int t = 0; t < MR_SUMSQ_PARTS; t++)
        s += part[t];
    *sum = s;
    return MR_OK;
}

MR_AVX2_CLONES static mr_status cpu_axpy(mr_backend *be, mr_dfloat *yd, const mr_dfloat *xd,
                                         size_t n, float a, mr_error *err) {
    (void)be, (void)err;
    float *restrict y = mr_dfloat_ptr(yd);
    const float *restrict x = mr_dfloat_cptr(xd);
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
    return MR_OK;
}

const mr_optimizer_kernels mr_optimizer_cpu = {.adam = cpu_adam,
                                               .sgd = cpu_sgd,
                                               .rmsprop = cpu_rmsprop,
                                               .nonfinite = cpu_nonfinite,
                                               .sumsq = cpu_sumsq,
                                               .axpy = cpu_axpy};
