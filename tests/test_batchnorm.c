/* test_batchnorm.c: batch normalisation: gradient checks in training mode
 * (rank 3 and rank 1), normalised output, moving averages, inference.
 * Bound 2e-3: gradcheck.h; BN is smooth, so nothing is skipped. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/rng.h"
#include "gradcheck.h"
#include "testutil.h"

START_TEST(gradients) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_BATCHNORM);
    gc_layer_result r;
    mr_error err = {0};
    mr_shape img = {3, {3, 2, 4}}, flat = {1, {5, 0, 0}};
    ck_assert_int_eq(gc_check_layer(&c, img, 3, 2, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < 2e-3 && r.err_weights < 2e-3, "img: %g %g", r.err_input,
                  r.err_weights);
    ck_assert_int_eq(gc_check_layer(&c, flat, 6, 3, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < 2e-3 && r.err_weights < 2e-3, "flat: %g %g", r.err_input,
                  r.err_weights);
}
END_TEST

START_TEST(statistics_and_inference) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_BATCHNORM);
    c.momentum = 0.9f;
    mr_layer l = {0};
    l.ops = &mr_batchnorm_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {2, 2, 3}};
    mr_error err = {0};
    ck_assert_int_eq(l.ops->setup(&l, 4, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(l.n_weights, 4);
    ck_assert_str_eq(l.w[2].name, "moving_mean");
    ck_assert_int_eq(l.w[2].trainable, 0);
    float w[4][3], x[48], y[48];
    for (int i = 0; i < 4; i++)
        l.w[i].data = w[i];
    l.ops->init(&l, 1);
    ck_assert_float_eq(w[0][1], 1.0f);
    ck_assert_float_eq(w[3][2], 1.0f);
    mr_rng_uniform(3, 3, 0, 0, 0.0f, 4.0f, x, 48);
    float scratch[16];
    mr_run run = {.be = mr_backend_cpu(), .training = 1, .scratch = scratch};
    l.ops->forward(&l, &run, 4, x, y);
    for (int ch = 0; ch < 3; ch++) {
        double m = 0, v = 0, ym = 0, yv = 0;
        for (int r = 0; r < 16; r++)
            m += x[r * 3 + ch], ym += y[r * 3 + ch];
        m /= 16, ym /= 16;
        for (int r = 0; r < 16; r++) {
            v += (x[r * 3 + ch] - m) * (x[r * 3 + ch] - m);
            yv += (y[r * 3 + ch] - ym) * (y[r * 3 + ch] - ym);
        }
        v /= 16, yv /= 16; /* biased, as Keras */
        ck_assert_double_eq_tol(ym, 0.0, 1e-5);
        ck_assert_double_eq_tol(yv, v / (v + 1e-3), 1e-4);
        ck_assert_double_eq_tol(w[2][ch], 0.1 * m, 1e-5);       /* 0.9 * 0 + 0.1 * mean */
        ck_assert_double_eq_tol(w[3][ch], 0.9 + 0.1 * v, 1e-5); /* 0.9 * 1 + 0.1 * var */
    }
    /* inference: the moving statistics */
    run.training = 0;
    l.ops->forward(&l, &run, 4, x, y);
    for (int i = 0; i < 48; i++) {
        int ch = i % 3;
        ck_assert_double_eq_tol(y[i], (x[i] - w[2][ch]) / sqrt(w[3][ch] + 1e-3), 1e-5);
    }
    l.ops->destroy(&l);
}
END_TEST

int main(void) {
    Suite *s = suite_create("batchnorm");
    TCase *tc = tcase_create("batchnorm");
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, statistics_and_inference);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
