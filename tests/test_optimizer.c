/* test_optimizer.c: unit tests of models/optimizer.c: ten updates of Adam and
 * of SGD (plain, momentum, Nesterov) against straightforward double-precision
 * re-implementations of Keras 3's formulas, slot counts, the settings
 * taken from a [net] section, and the check for NaN and Inf. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    const mr_optimizer opts[4] = {
        {.kind = MR_OPTIMIZER_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-7f},
        {.kind = MR_OPTIMIZER_SGD},
        {.kind = MR_OPTIMIZER_SGD, .momentum = 0.9f},
        {.kind = MR_OPTIMIZER_SGD, .momentum = 0.9f, .nesterov = 1}};
    const float bads[3] = {NAN, INFINITY, -INFINITY};
    const int at[3] = {0, N / 2, N - 1};
    for (int o = 0; o < 4; o++) {
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
    tc = tcase_create("sgd");
    tcase_add_test(tc, test_sgd_plain);
    tcase_add_test(tc, test_sgd_momentum);
    tcase_add_test(tc, test_sgd_nesterov);
    tcase_add_test(tc, test_sgd_nesterov_zero_momentum);
    tcase_add_test(tc, test_sgd_variants_differ);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_test(tc, test_slot_counts);
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
