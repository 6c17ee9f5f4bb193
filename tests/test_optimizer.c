/* test_optimizer.c: unit tests of models/optimizer.c: ten updates of Adam,
 * SGD (plain, momentum, Nesterov) and RMSprop against straightforward
 * double-precision re-implementations of Keras 3's formulas; weight decay
 * and clipping as Keras orders them; slot counts and names, the settings
 * taken from a [net] section, and the check for NaN and Inf. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/kernels.h"
#include "models/optimizer.h"
#include "runtime/rng.h"
#include "runtime/dmem_impl.h"
#include "tests/testutil.h"

enum { N = 64, STEPS = 10 };

/* mr_optimizer_step through the CPU context's kernels, on host arrays (CPU
 * device memory is host memory). */
static void step(const mr_optimizer *opt, float lr, int64_t t, float *w, const float *g,
                 float *slot0, float *slot1, size_t n) {
    ck_assert_int_eq(mr_optimizer_step(opt, tu_cpu_backend(), lr, t, mr_dfloat_of(w),
                                       mr_dfloat_cof(g), mr_dfloat_of(slot0), mr_dfloat_of(slot1),
                                       n, NULL, NULL),
                     MR_OK);
}

/* Gradient of step t (1-based) for element i: uniform [-1, 1) scaled per
 * element over five decades (1e-4 .. 1), some exactly zero, so epsilon and
 * the square root both matter somewhere. */
static void make_grad(int t, float *g) {
    mr_rng_uniform(31, MR_RNG_STREAM_INIT, (uint32_t)t, 0, -1.0f, 1.0f, g, N);
    for (int i = 0; i < N; i++) {
        g[i] *= powf(10.0f, -(float)(i % 5));
        if (i % 13 == 0) g[i] = 0.0f;
    }
}

static void make_weights(float *w) {
    mr_rng_uniform(31, MR_RNG_STREAM_INIT, 999, 0, -0.1f, 0.1f, w, N);
}

/* Largest |a - b| / max|b - w0|: the error relative to how far the reference
 * weights moved, so a slow optimizer cannot hide behind the weights' size. */
static double delta_error(const float *w, const double *ref, const float *w0) {
    double maxd = 0.0, maxmove = 0.0;
    for (int i = 0; i < N; i++) {
        double d = fabs((double)w[i] - ref[i]);
        double move = fabs(ref[i] - (double)w0[i]);
        if (d > maxd) maxd = d;
        if (move > maxmove) maxmove = move;
    }
    return maxd / (maxmove > 1e-30 ? maxmove : 1e-30);
}

static double slot_error(const float *s, const double *ref) {
    double maxd = 0.0, maxr = 0.0;
    for (int i = 0; i < N; i++) {
        if (fabs((double)s[i] - ref[i]) > maxd) maxd = fabs((double)s[i] - ref[i]);
        if (fabs(ref[i]) > maxr) maxr = fabs(ref[i]);
    }
    return maxd / (maxr > 1e-30 ? maxr : 1e-30);
}

/* ---- Adam ------------------------------------------------------------------ */

/* Keras 3 (keras/src/optimizers/adam.py), in double:
 *   alpha = lr * sqrt(1 - b2^t) / (1 - b1^t)
 *   m += (g - m) (1 - b1);  v += (g^2 - v) (1 - b2)
 *   w -= m alpha / (sqrt(v) + eps)
 * Float against double over ten steps: each step's update is computed to a
 * few ulps relative, so the accumulated weights differ by ~1e-6 of the
 * distance travelled; the bound 1e-4 leaves room, while a wrong bias
 * correction, epsilon inside the root or a missing (1 - b) factor moves the
 * result by 1e-2 or more of the distance. */
static void check_adam(float lr, float b1, float b2, float eps) {
    mr_optimizer opt = {.kind = MR_OPTIMIZER_ADAM, .beta1 = b1, .beta2 = b2, .epsilon = eps};
    ck_assert_int_eq(mr_optimizer_slot_count(&opt), 2);
    float w[N], w0[N], g[N], m[N] = {0}, v[N] = {0};
    double rw[N], rm[N] = {0}, rv[N] = {0};
    make_weights(w);
    memcpy(w0, w, sizeof w);
    for (int i = 0; i < N; i++)
        rw[i] = w[i];
    for (int t = 1; t <= STEPS; t++) {
        make_grad(t, g);
        step(&opt, lr, t, w, g, m, v, N);
        double alpha = (double)lr * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t));
        for (int i = 0; i < N; i++) {
            double gi = g[i];
            rm[i] += (gi - rm[i]) * (1.0 - b1);
            rv[i] += (gi * gi - rv[i]) * (1.0 - b2);
            rw[i] -= rm[i] * alpha / (sqrt(rv[i]) + eps);
        }
        double e = delta_error(w, rw, w0);
        ck_assert_msg(e < 1e-4, "adam lr=%g b1=%g b2=%g eps=%g step %d: weight error %g", lr, b1,
                      b2, eps, t, e);
        ck_assert_msg(slot_error(m, rm) < 1e-5, "step %d: m error %g", t, slot_error(m, rm));
        ck_assert_msg(slot_error(v, rv) < 1e-5, "step %d: v error %g", t, slot_error(v, rv));
    }
}

START_TEST(test_adam_keras_defaults) {
    check_adam(1e-3f, 0.9f, 0.999f, 1e-7f);
}
END_TEST

/* Large epsilon: its placement (outside the root) matters at every element. */
START_TEST(test_adam_large_epsilon) {
    check_adam(0.05f, 0.8f, 0.99f, 0.1f);
}
END_TEST

/* The first step of Adam moves every weight with a nonzero gradient by lr
 * (m / sqrt(v) = sign(g) after bias correction), up to epsilon. */
START_TEST(test_adam_first_step) {
    mr_optimizer opt = {
        .kind = MR_OPTIMIZER_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-7f};
    float w[3] = {1.0f, 1.0f, 1.0f}, g[3] = {0.5f, -2.0f, 0.0f}, m[3] = {0}, v[3] = {0};
    step(&opt, 0.01f, 1, w, g, m, v, 3);
    ck_assert(fabsf(w[0] - 0.99f) < 1e-6f);
    ck_assert(fabsf(w[1] - 1.01f) < 1e-6f);
    ck_assert_float_eq(w[2], 1.0f);
}
END_TEST

/* ---- SGD ------------------------------------------------------------------------ */

/* Keras 3 (keras/src/optimizers/sgd.py), in double:
 *   plain:     w -= lr g
 *   momentum:  v = mom v - lr g;  w += v
 *   Nesterov:  v = mom v - lr g;  w += mom v - lr g
 * Same error reasoning as Adam; the bound is 1e-5 of the distance. */
static void check_sgd(float lr, float mom, int nesterov) {
    mr_optimizer opt = {.kind = MR_OPTIMIZER_SGD, .momentum = mom, .nesterov = nesterov};
    ck_assert_int_eq(mr_optimizer_slot_count(&opt), (mom != 0.0f ? 1 : 0));
    float w[N], w0[N], g[N], vel[N] = {0};
    double rw[N], rv[N] = {0};
    make_weights(w);
    memcpy(w0, w, sizeof w);
    for (int i = 0; i < N; i++)
        rw[i] = w[i];
    for (int t = 1; t <= STEPS; t++) {
        make_grad(t, g);
        step(&opt, lr, t, w, g, mom != 0.0f ? vel : NULL, NULL, N);
        for (int i = 0; i < N; i++) {
            double gi = g[i];
            if (mom == 0.0f) {
                rw[i] -= (double)lr * gi;
                continue;
            }
            rv[i] = (double)mom * rv[i] - (double)lr * gi;
            rw[i] += nesterov ? (double)mom * rv[i] - (double)lr * gi : rv[i];
        }
        double e = delta_error(w, rw, w0);
        ck_assert_msg(e < 1e-5, "sgd lr=%g momentum=%g nesterov=%d step %d: weight error %g", lr,
                      mom, nesterov, t, e);
        if (mom != 0.0f)
            ck_assert_msg(slot_error(vel, rv) < 1e-5, "step %d: velocity error %g", t,
                          slot_error(vel, rv));
    }
}

START_TEST(test_sgd_plain) {
    check_sgd(0.1f, 0.0f, 0);
}
END_TEST

START_TEST(test_sgd_momentum) {
    check_sgd(0.05f, 0.9f, 0);
}
END_TEST

START_TEST(test_sgd_nesterov) {
    check_sgd(0.05f, 0.9f, 1);
}
END_TEST

/* Nesterov without momentum is plain SGD (Keras ignores the flag then). */
START_TEST(test_sgd_nesterov_zero_momentum) {
    check_sgd(0.1f, 0.0f, 1);
}
END_TEST

/* The three SGD variants really differ after a few steps (so the checks
 * above could not pass with one formula standing in for another). */
START_TEST(test_sgd_variants_differ) {
    float w[3][N], g[N], vel[2][N];
    memset(vel, 0, sizeof vel);
    for (int k = 0; k < 3; k++)
        make_weights(w[k]);
    mr_optimizer plain = {.kind = MR_OPTIMIZER_SGD};
    mr_optimizer mom = {.kind = MR_OPTIMIZER_SGD, .momentum = 0.9f};
    mr_optimizer nest = {.kind = MR_OPTIMIZER_SGD, .momentum = 0.9f, .nesterov = 1};
    for (int t = 1; t <= 3; t++) {
        make_grad(t, g);
        step(&plain, 0.1f, t, w[0], g, NULL, NULL, N);
        step(&mom, 0.1f, t, w[1], g, vel[0], NULL, N);
        step(&nest, 0.1f, t, w[2], g, vel[1], NULL, N);
    }
    ck_assert(tu_rel_diff(w[0], w[1], N) > 1e-3);
    ck_assert(tu_rel_diff(w[1], w[2], N) > 1e-3);
    ck_assert(tu_rel_diff(w[0], w[2], N) > 1e-3);
}
END_TEST

/* The update's own check (on_nan = stop): for every optimizer, a step that
 * reports leaves the same bits as one that does not, says 0 on finite
 * gradients, and 1 with a NaN, +Inf or -Inf anywhere (first, middle, last
 * element). */
START_TEST(test_step_reports_nonfinite) {
    const mr_optimizer opts[6] = {
        {.kind = MR_OPTIMIZER_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-7f},
        {.kind = MR_OPTIMIZER_SGD},
        {.kind = MR_OPTIMIZER_SGD, .momentum = 0.9f},
        {.kind = MR_OPTIMIZER_SGD, .momentum = 0.9f, .nesterov = 1},
        {.kind = MR_OPTIMIZER_RMSPROP, .rho = 0.9f, .momentum = 0.5f, .epsilon = 1e-7f},
        {.kind = MR_OPTIMIZER_ADAMW,
         .beta1 = 0.9f,
         .beta2 = 0.999f,
         .epsilon = 1e-7f,
         .weight_decay = 0.004f,
         .clipvalue = 0.5f}};
    const float bads[3] = {NAN, INFINITY, -INFINITY};
    const int at[3] = {0, N / 2, N - 1};
    for (int o = 0; o < 6; o++) {
        float w[2][N], g[N], s[2][2][N];
        memset(s, 0, sizeof s);
        make_weights(w[0]), make_weights(w[1]);
        make_grad(1, g);
        int bad = -1;
        step(&opts[o], 0.1f, 1, w[0], g, s[0][0], s[0][1], N);
        ck_assert_int_eq(mr_optimizer_step(&opts[o], tu_cpu_backend(), 0.1f, 1, mr_dfloat_of(w[1]),
                                           mr_dfloat_cof(g), mr_dfloat_of(s[1][0]),
                                           mr_dfloat_of(s[1][1]), N, &bad, NULL),
                         MR_OK);
        ck_assert_int_eq(bad, 0);
        ck_assert_mem_eq(w[0], w[1], sizeof w[0]);
        for (int b = 0; b < 3; b++)
            for (int a = 0; a < 3; a++) {
                make_grad(2, g);
                g[at[a]] = bads[b];
                bad = -1;
                ck_assert_int_eq(mr_optimizer_step(&opts[o], tu_cpu_backend(), 0.1f, 2,
                                                   mr_dfloat_of(w[1]), mr_dfloat_cof(g),
                                                   mr_dfloat_of(s[1][0]), mr_dfloat_of(s[1][1]), N,
                                                   &bad, NULL),
                                 MR_OK);
                ck_assert_msg(bad == 1, "optimizer %d, %g at %d: %d", o, (double)bads[b], at[a],
                              bad);
            }
    }
}
END_TEST

/* ---- RMSprop ------------------------------------------------------------------ */

/* Keras 3's RMSprop (update_step, centered = False), in double:
 *   ms = rho ms + (1 - rho) g^2;  inc = lr g / sqrt(ms + eps)
 *   w -= inc, or mom = momentum mom + inc; w -= mom
 * Same error reasoning as Adam. */
static void check_rmsprop(float lr, float rho, float mom, float eps) {
    mr_optimizer opt = {.kind = MR_OPTIMIZER_RMSPROP, .rho = rho, .momentum = mom, .epsilon = eps};
    ck_assert_int_eq(mr_optimizer_slot_count(&opt), mom > 0.0f ? 2 : 1);
    float w[N], w0[N], g[N], ms[N] = {0}, mo[N] = {0};
    double rw[N], rms[N] = {0}, rmo[N] = {0};
    make_weights(w);
    memcpy(w0, w, sizeof w);
    for (int i = 0; i < N; i++)
        rw[i] = w[i];
    for (int t = 1; t <= STEPS; t++) {
        make_grad(t, g);
        step(&opt, lr, t, w, g, ms, mom > 0.0f ? mo : NULL, N);
        for (int i = 0; i < N; i++) {
            double gi = g[i];
            rms[i] = rho * rms[i] + (1.0 - rho) * gi * gi;
            double inc = lr * gi / sqrt(rms[i] + eps);
            if (mom > 0.0f) {
                rmo[i] = mom * rmo[i] + inc;
                rw[i] -= rmo[i];
            } else {
                rw[i] -= inc;
            }
        }
        double e = delta_error(w, rw, w0);
        ck_assert_msg(e < 1e-4, "rmsprop lr=%g rho=%g momentum=%g step %d: weight error %g", lr,
                      rho, mom, t, e);
        ck_assert_msg(slot_error(ms, rms) < 1e-5, "step %d: mean square error %g", t,
                      slot_error(ms, rms));
        if (mom > 0.0f)
            ck_assert_msg(slot_error(mo, rmo) < 1e-5, "step %d: momentum error %g", t,
                          slot_error(mo, rmo));
    }
}

START_TEST(test_rmsprop_keras_defaults) {
    check_rmsprop(1e-3f, 0.9f, 0.0f, 1e-7f);
}
END_TEST

/* epsilon large enough to matter inside the root; momentum on */
START_TEST(test_rmsprop_momentum) {
    check_rmsprop(0.01f, 0.8f, 0.9f, 1e-2f);
}
END_TEST

/* ---- weight decay and clipping ------------------------------------------------- */

static const mr_optimizer every_kind[5] = {
    {.kind = MR_OPTIMIZER_SGD},
    {.kind = MR_OPTIMIZER_SGD, .momentum = 0.9f, .nesterov = 1},
    {.kind = MR_OPTIMIZER_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-7f},
    {.kind = MR_OPTIMIZER_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-7f},
    {.kind = MR_OPTIMIZER_RMSPROP, .rho = 0.9f, .momentum = 0.5f, .epsilon = 1e-7f},
};

/* Keras's order (base_optimizer.apply): clip the gradients, then
 * w -= w * weight_decay * lr with the step's rate (not Adam's alpha), then
 * the update. For every optimizer, three steps with weight decay and
 * clipvalue give the bits of the same optimizer without them run on
 * weights decayed and gradients clipped by hand; and they differ from the
 * plain run (the options act). */
START_TEST(test_decay_and_clipvalue_order) {
    const float lr = 0.05f, wd = 0.1f, cv = 0.3f;
    for (int o = 0; o < 5; o++) {
        mr_optimizer with = every_kind[o], without = every_kind[o];
        with.weight_decay = wd;
        with.clipvalue = cv;
        float w[2][N], g[N], gc[N], s[2][2][N], plain[N], ps[2][N];
        memset(s, 0, sizeof s);
        memset(ps, 0, sizeof ps);
        make_weights(w[0]), make_weights(w[1]), make_weights(plain);
        for (int t = 1; t <= 3; t++) {
            make_grad(t, g);
            for (int i = 0; i < N; i++) {
                gc[i] = g[i] > cv ? cv : (g[i] < -cv ? -cv : g[i]);
                w[1][i] -= w[1][i] * wd * lr;
            }
            step(&with, lr, t, w[0], g, s[0][0], s[0][1], N);
            step(&without, lr, t, w[1], gc, s[1][0], s[1][1], N);
            step(&without, lr, t, plain, g, ps[0], ps[1], N);
            ck_assert_msg(memcmp(w[0], w[1], sizeof w[0]) == 0, "optimizer %d step %d", o, t);
            ck_assert(memcmp(s[0], s[1], sizeof s[0]) == 0);
        }
        ck_assert_msg(tu_rel_diff(w[0], plain, N) > 1e-4, "optimizer %d: options had no effect", o);
    }
}
END_TEST

/* A NaN gradient is reported with clipvalue on (the clip does not hide
 * it), and a clipped update stays finite for huge finite gradients. */
START_TEST(test_clipvalue_keeps_nan) {
    for (int o = 0; o < 5; o++) {
        mr_optimizer opt = every_kind[o];
        opt.clipvalue = 1.0f;
        float w[N], g[N], s[2][N];
        memset(s, 0, sizeof s);
        make_weights(w);
        make_grad(1, g);
        g[3] = NAN;
        int bad = -1;
        ck_assert_int_eq(mr_optimizer_step(&opt, tu_cpu_backend(), 0.1f, 1, mr_dfloat_of(w),
                                           mr_dfloat_cof(g), mr_dfloat_of(s[0]), mr_dfloat_of(s[1]),
                                           N, &bad, NULL),
                         MR_OK);
        ck_assert_int_eq(bad, 1);
        ck_assert(isnan(w[3]));
        make_weights(w);
        memset(s, 0, sizeof s);
        for (int i = 0; i < N; i++)
            g[i] = i % 2 ? 1e30f : -1e30f;
        step(&opt, 0.1f, 1, w, g, s[0], s[1], N);
        for (int i = 0; i < N; i++)
            ck_assert_msg(isfinite(w[i]) && fabsf(w[i]) < 2.0f, "optimizer %d: w[%d] = %g", o, i,
                          (double)w[i]);
    }
}
END_TEST

/* mr_optimizer_clip_norm: a vector of norm 5 (3, 4) to norm 1 gives
 * (0.6, 0.8); one within the bound, or zero, keeps its bits; a NaN or Inf
 * makes every element NaN (Keras's scale is NaN then). */
START_TEST(test_clip_norm) {
    mr_backend *be = tu_cpu_backend();
    float g[4] = {3.0f, 0.0f, -4.0f, 0.0f};
    ck_assert_int_eq(mr_optimizer_clip_norm(be, mr_dfloat_of(g), 4, 1.0f, NULL), MR_OK);
    ck_assert(fabsf(g[0] - 0.6f) < 1e-7f && fabsf(g[2] + 0.8f) < 1e-7f && g[1] == 0.0f);
    float keep[4] = {3.0f, 0.0f, -4.0f, 0.0f}, k0[4];
    memcpy(k0, keep, sizeof k0);
    ck_assert_int_eq(mr_optimizer_clip_norm(be, mr_dfloat_of(keep), 4, 5.0f, NULL), MR_OK);
    ck_assert_mem_eq(keep, k0, sizeof k0);
    float zero[4] = {0};
    ck_assert_int_eq(mr_optimizer_clip_norm(be, mr_dfloat_of(zero), 4, 1.0f, NULL), MR_OK);
    ck_assert(zero[0] == 0.0f && zero[3] == 0.0f);
    const float bad[2] = {NAN, INFINITY};
    for (int b = 0; b < 2; b++) {
        float x[4] = {1.0f, bad[b], 2.0f, 3.0f};
        ck_assert_int_eq(mr_optimizer_clip_norm(be, mr_dfloat_of(x), 4, 1.0f, NULL), MR_OK);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(isnan(x[i]), "%g: x[%d] = %g", (double)bad[b], i, (double)x[i]);
    }
}
END_TEST

/* The CPU's sum of squares is optimizer.h's order exactly (partial sums
 * by index modulo MR_SUMSQ_PARTS, then those in order), which is what
 * makes it repeat on every device; and close to a plain double sum. */
START_TEST(test_sumsq_order) {
    enum { M = 3 * MR_SUMSQ_PARTS + 17 };
    static float x[M];
    mr_rng_uniform(31, MR_RNG_STREAM_INIT, 77, 0, -1.0f, 1.0f, x, M);
    for (int i = 0; i < M; i++)
        x[i] *= powf(10.0f, (float)(i % 7) - 3.0f);
    double part[MR_SUMSQ_PARTS] = {0}, want = 0.0, plain = 0.0;
    for (int i = 0; i < M; i++) {
        part[i % MR_SUMSQ_PARTS] += (double)x[i] * (double)x[i];
        plain += (double)x[i] * (double)x[i];
    }
    for (int t = 0; t < MR_SUMSQ_PARTS; t++)
        want += part[t];
    double got = -1.0;
    const mr_kernels *k = mr_kernels_for(tu_cpu_backend());
    ck_assert_int_eq(k->optimizer->sumsq(tu_cpu_backend(), mr_dfloat_cof(x), M, &got, NULL), MR_OK);
    ck_assert_mem_eq(&got, &want, sizeof got);
    ck_assert(fabs(got - plain) <= 1e-12 * plain);
}
END_TEST

/* mr_optimizer_l2 (Keras's L2 regularizer): the penalty l2 sum(w^2) in
 * double, and g += 2 l2 w with the bits of that expression; g NULL: the
 * penalty alone, nothing written. */
START_TEST(test_l2) {
    float w[N], g[N], want[N];
    make_weights(w);
    make_grad(1, g);
    const float l2 = 0.003f;
    double sum = 0.0;
    for (int i = 0; i < N; i++) {
        sum += (double)w[i] * (double)w[i];
        want[i] = g[i] + (2.0f * l2) * w[i];
    }
    double p = -1.0;
    ck_assert_int_eq(
        mr_optimizer_l2(tu_cpu_backend(), mr_dfloat_cof(w), mr_dfloat_of(g), N, l2, &p, NULL),
        MR_OK);
    ck_assert(fabs(p - (double)l2 * sum) <= 1e-12 * p);
    ck_assert_mem_eq(g, want, sizeof g);
    float g0[N];
    memcpy(g0, g, sizeof g);
    ck_assert_int_eq(mr_optimizer_l2(tu_cpu_backend(), mr_dfloat_cof(w), NULL, N, l2, &p, NULL),
                     MR_OK);
    ck_assert_mem_eq(g, g0, sizeof g);
}
END_TEST

/* ---- slots and configuration ------------------------------------------------------ */

START_TEST(test_slot_counts) {
    mr_optimizer o = {.kind = MR_OPTIMIZER_ADAM};
    ck_assert_int_eq(mr_optimizer_slot_count(&o), 2);
    o.momentum = 0.9f; /* irrelevant to Adam */
    ck_assert_int_eq(mr_optimizer_slot_count(&o), 2);
    o = (mr_optimizer){.kind = MR_OPTIMIZER_SGD};
    ck_assert_int_eq(mr_optimizer_slot_count(&o), 0);
    o.nesterov = 1;
    ck_assert_int_eq(mr_optimizer_slot_count(&o), 0);
    o.momentum = 0.5f;
    ck_assert_int_eq(mr_optimizer_slot_count(&o), 1);
    o.nesterov = 0;
    ck_assert_int_eq(mr_optimizer_slot_count(&o), 1);
    o = (mr_optimizer){.kind = MR_OPTIMIZER_ADAMW};
    ck_assert_int_eq(mr_optimizer_slot_count(&o), 2);
    o = (mr_optimizer){.kind = MR_OPTIMIZER_RMSPROP};
    ck_assert_int_eq(mr_optimizer_slot_count(&o), 1);
    o.momentum = 0.5f;
    ck_assert_int_eq(mr_optimizer_slot_count(&o), 2);
}
END_TEST

/* Keras's names: classes, instance names, slot names, and the order it
 * creates slots in (RMSprop slot by slot, the others weight by weight). */
START_TEST(test_keras_names) {
    const struct {
        mr_optimizer_kind kind;
        const char *cls, *name, *slot0, *slot1;
        int by_slot;
    } want[] = {
        {MR_OPTIMIZER_SGD, "SGD", "sgd", "momentum", NULL, 0},
        {MR_OPTIMIZER_ADAM, "Adam", "adam", "momentum", "velocity", 0},
        {MR_OPTIMIZER_ADAMW, "AdamW", "adamw", "momentum", "velocity", 0},
        {MR_OPTIMIZER_RMSPROP, "RMSprop", "rmsprop", "velocity", "momentum", 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        mr_optimizer o = {.kind = want[i].kind, .momentum = 0.9f};
        ck_assert_str_eq(mr_optimizer_keras_class(&o), want[i].cls);
        ck_assert_str_eq(mr_optimizer_keras_name(&o), want[i].name);
        ck_assert_str_eq(mr_optimizer_slot_name(&o, 0), want[i].slot0);
        if (want[i].slot1) ck_assert_str_eq(mr_optimizer_slot_name(&o, 1), want[i].slot1);
        ck_assert_int_eq(mr_optimizer_slots_by_slot(&o), want[i].by_slot);
    }
}
END_TEST

START_TEST(test_from_config) {
    mr_net_cfg net;
    memset(&net, 0, sizeof net);
    net.optimizer = MR_OPTIMIZER_SGD;
    net.learning_rate = 0.125f;
    net.momentum = 0.875f;
    net.nesterov = 1;
    net.beta1 = 0.5f;
    net.beta2 = 0.75f;
    net.epsilon = 3e-5f;
    mr_optimizer o = mr_optimizer_from_config(&net);
    ck_assert_int_eq(o.kind, MR_OPTIMIZER_SGD);
    ck_assert_float_eq(o.momentum, 0.875f);
    ck_assert_int_eq(o.nesterov, 1);
    ck_assert_float_eq(o.beta1, 0.5f);
    ck_assert_float_eq(o.beta2, 0.75f);
    ck_assert_float_eq(o.epsilon, 3e-5f);
    net.optimizer = MR_OPTIMIZER_ADAM;
    net.momentum = 0.0f;
    net.nesterov = 0;
    net.beta1 = 0.9f;
    net.beta2 = 0.999f;
    net.epsilon = 1e-7f;
    o = mr_optimizer_from_config(&net);
    ck_assert_int_eq(o.kind, MR_OPTIMIZER_ADAM);
    ck_assert_float_eq(o.momentum, 0.0f);
    ck_assert_int_eq(o.nesterov, 0);
    ck_assert_float_eq(o.beta1, 0.9f);
    ck_assert_float_eq(o.beta2, 0.999f);
    ck_assert_float_eq(o.epsilon, 1e-7f);
    net.optimizer = MR_OPTIMIZER_RMSPROP;
    net.rho = 0.75f;
    net.weight_decay = 0.25f;
    net.clipnorm = 1.5f;
    net.global_clipnorm = 2.5f;
    net.clipvalue = 3.5f;
    o = mr_optimizer_from_config(&net);
    ck_assert_int_eq(o.kind, MR_OPTIMIZER_RMSPROP);
    ck_assert_float_eq(o.rho, 0.75f);
    ck_assert_float_eq(o.weight_decay, 0.25f);
    ck_assert_float_eq(o.clipnorm, 1.5f);
    ck_assert_float_eq(o.global_clipnorm, 2.5f);
    ck_assert_float_eq(o.clipvalue, 3.5f);
}
END_TEST

START_TEST(test_empty_step) {
    mr_optimizer a = {.kind = MR_OPTIMIZER_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-7f};
    float w = 1.0f, g = 1.0f, m = 0.0f, v = 0.0f;
    step(&a, 0.1f, 1, &w, &g, &m, &v, 0);
    ck_assert_float_eq(w, 1.0f);
    ck_assert_float_eq(m, 0.0f);
}
END_TEST

/* mr_optimizer_nonfinite: 0 for finite values up to +-FLT_MAX, 1 for a
 * NaN, +Inf or -Inf wherever it is (vector body or tail), 0 for n = 0. */
START_TEST(test_nonfinite) {
    float x[N + 3];
    mr_backend *be = tu_cpu_backend();
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int c = -1; c < 3 * (N + 3); c++) {
        for (int i = 0; i < N + 3; i++)
            x[i] = i % 2 ? FLT_MAX : -FLT_MAX / (float)(i + 1);
        if (c >= 0) x[c % (N + 3)] = bad[c / (N + 3)];
        int any = -1;
        ck_assert_int_eq(mr_optimizer_nonfinite(be, mr_dfloat_cof(x), N + 3, &any, NULL), MR_OK);
        ck_assert_msg(any == (c >= 0), "case %d: %d", c, any);
    }
    int any = -1;
    x[0] = NAN;
    ck_assert_int_eq(mr_optimizer_nonfinite(be, mr_dfloat_cof(x), 0, &any, NULL), MR_OK);
    ck_assert_int_eq(any, 0);
}
END_TEST

static Suite *optimizer_suite(void) {
    Suite *s = suite_create("optimizer");
    TCase *tc = tcase_create("adam");
    tcase_add_test(tc, test_adam_keras_defaults);
    tcase_add_test(tc, test_adam_large_epsilon);
    tcase_add_test(tc, test_adam_first_step);
    suite_add_tcase(s, tc);
    tc = tcase_create("rmsprop");
    tcase_add_test(tc, test_rmsprop_keras_defaults);
    tcase_add_test(tc, test_rmsprop_momentum);
    suite_add_tcase(s, tc);
    tc = tcase_create("decay_and_clipping");
    tcase_add_test(tc, test_decay_and_clipvalue_order);
    tcase_add_test(tc, test_clipvalue_keeps_nan);
    tcase_add_test(tc, test_clip_norm);
    tcase_add_test(tc, test_sumsq_order);
    tcase_add_test(tc, test_l2);
    suite_add_tcase(s, tc);
    tc = tcase_create("sgd");
    tcase_add_test(tc, test_sgd_plain);
    tcase_add_test(tc, test_sgd_momentum);
    tcase_add_test(tc, test_sgd_nesterov);
    tcase_add_test(tc, test_sgd_nesterov_zero_momentum);
    tcase_add_test(tc, test_sgd_variants_differ);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_test(tc, test_slot_counts);
    tcase_add_test(tc, test_keras_names);
    tcase_add_test(tc, test_from_config);
    tcase_add_test(tc, test_empty_step);
    tcase_add_test(tc, test_nonfinite);
    tcase_add_test(tc, test_step_reports_nonfinite);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(optimizer_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
