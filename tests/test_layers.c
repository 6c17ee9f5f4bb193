/* test_layers.c: Dense, Activation, Flatten: gradient checks and values.
 *
 * Bound: errors are normalised by max(1, max|grad|); gradcheck.h puts the
 * finite-difference noise near 1e-4 here, so 2e-3 leaves margin yet fails on
 * any wrong term (a wrong term in one gradient is O(0.1..1)). Elements on a
 * ReLU kink are skipped by gradcheck; we also require that few are. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "runtime/dmem_impl.h"
#include "tests/gradcheck.h"
#include "backends/backends.h"
#include "tests/testutil.h"

static void check_dense(mr_activation act, int use_bias, double bound) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_DENSE);
    c.units = 5;
    c.activation = act;
    c.use_bias = use_bias;
    mr_shape in = {1, {7, 0, 0}};
    gc_layer_result r;
    mr_error err = {0};
    ck_assert_int_eq(gc_check_layer(&c, in, 4, 11, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < bound && r.err_weights < bound,
                  "act %d bias %d: input %g weights %g", act, use_bias, r.err_input, r.err_weights);
    ck_assert_int_ge(r.checked, 7 * 4 + 7 * 5);
    ck_assert_int_le(r.skipped, r.checked / 20);
}

START_TEST(dense_gradients) {
    check_dense(MR_ACTIVATION_LINEAR, 1, 2e-3);
    check_dense(MR_ACTIVATION_LINEAR, 0, 2e-3);
    check_dense(MR_ACTIVATION_SIGMOID, 1, 2e-3);
    check_dense(MR_ACTIVATION_TANH, 1, 2e-3);
    check_dense(MR_ACTIVATION_SOFTMAX, 1, 2e-3);
    check_dense(MR_ACTIVATION_RELU, 1, 2e-3);
    check_dense(MR_ACTIVATION_ELU, 1, 2e-3);
    check_dense(MR_ACTIVATION_LEAKY_RELU, 1, 2e-3);
    check_dense(MR_ACTIVATION_LEAKY_RELU, 0, 2e-3);
    check_dense(MR_ACTIVATION_GELU, 1, 2e-3);
    check_dense(MR_ACTIVATION_SWISH, 1, 2e-3);
    check_dense(MR_ACTIVATION_SILU, 0, 2e-3);
}
END_TEST

static void check_activation(mr_activation act, mr_shape in, double bound) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_ACTIVATION);
    c.activation = act;
    gc_layer_result r;
    mr_error err = {0};
    for (uint64_t seed = 1; seed <= 3; seed++) {
        ck_assert_int_eq(gc_check_layer(&c, in, 3, seed, &r, &err), MR_OK);
        ck_assert_msg(r.err_input < bound, "activation %d: %g", act, r.err_input);
        ck_assert_int_le(r.skipped, r.checked / 20);
    }
}

START_TEST(activation_gradients) {
    mr_shape flat = {1, {6, 0, 0}}, img = {3, {2, 3, 4}};
    check_activation(MR_ACTIVATION_LINEAR, flat, 2e-3);
    check_activation(MR_ACTIVATION_SIGMOID, flat, 2e-3);
    check_activation(MR_ACTIVATION_TANH, img, 2e-3);
    check_activation(MR_ACTIVATION_SOFTMAX, flat, 2e-3);
    check_activation(MR_ACTIVATION_SOFTMAX, img, 2e-3); /* over channels */
    check_activation(MR_ACTIVATION_RELU, img, 2e-3);
    check_activation(MR_ACTIVATION_ELU, img, 2e-3);
    check_activation(MR_ACTIVATION_LEAKY_RELU, flat, 2e-3);
    check_activation(MR_ACTIVATION_GELU, img, 2e-3);
    check_activation(MR_ACTIVATION_SWISH, flat, 2e-3);
    check_activation(MR_ACTIVATION_SILU, img, 2e-3);
}
END_TEST

START_TEST(flatten_gradients) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_FLATTEN);
    mr_shape img = {3, {3, 2, 2}};
    gc_layer_result r;
    mr_error err = {0};
    ck_assert_int_eq(gc_check_layer(&c, img, 2, 5, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < 1e-3, "%g", r.err_input);
}
END_TEST

/* Dense forward against a direct double-precision computation. */
START_TEST(dense_values) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_DENSE);
    c.units = 3;
    c.activation = MR_ACTIVATION_RELU;
    mr_layer l = {0};
    l.ops = &mr_dense_ops;
    l.cfg = &c;
    l.index = 1;
    l.in = (mr_shape){1, {4, 0, 0}};
    mr_error err = {0};
    ck_assert_int_eq(mr_layer_setup(&l, tu_cpu_backend(), 2, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(l.out.d[0], 3);
    ck_assert_int_eq(l.n_weights, 2);
    ck_assert_int_eq(l.w[0].dims[0], 4); /* Keras kernel shape (in, units) */
    ck_assert_int_eq(l.w[0].dims[1], 3);
    float w[12], b[3] = {0.1f, -0.2f, 0.3f}, x[8], y[6];
    for (int i = 0; i < 12; i++)
        w[i] = (float)(i - 6) / 10.0f;
    for (int i = 0; i < 8; i++)
        x[i] = (float)(i % 5) - 1.5f;
    l.w[0].data = mr_dfloat_of(w);
    l.w[1].data = mr_dfloat_of(b);
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1};
    ck_assert_int_eq(mr_layer_forward(&l, &run, 2, mr_dfloat_cof(x), mr_dfloat_of(y)), MR_OK);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            double z = b[j];
            for (int k = 0; k < 4; k++)
                z += (double)x[i * 4 + k] * w[k * 3 + j];
            ck_assert_double_eq_tol(y[i * 3 + j], z > 0 ? z : 0, 1e-6);
        }
    mr_layer_destroy(&l);
}
END_TEST

/* Glorot-uniform init: within the limit, deterministic, different per layer index. */
START_TEST(glorot_init) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_DENSE);
    c.units = 50;
    mr_layer a = {0}, b = {0};
    a.ops = b.ops = &mr_dense_ops;
    a.cfg = b.cfg = &c;
    a.index = 1;
    b.index = 2;
    a.in = b.in = (mr_shape){1, {100, 0, 0}};
    mr_error err = {0};
    ck_assert_int_eq(mr_layer_setup(&a, tu_cpu_backend(), 1, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(mr_layer_setup(&b, tu_cpu_backend(), 1, "t.cfg", &err), MR_OK);
    float *wa = malloc(sizeof(float) * 5000), *wb = malloc(sizeof(float) * 5000), ba[50], bb[50];
    float *wa2 = malloc(sizeof(float) * 5000);
    for (int i = 0; i < 50; i++)
        ba[i] = bb[i] = 1.0f; /* the init must write the biases */
    a.w[0].data = mr_dfloat_of(wa), a.w[1].data = mr_dfloat_of(ba);
    b.w[0].data = mr_dfloat_of(wb), b.w[1].data = mr_dfloat_of(bb);
    ck_assert_int_eq(mr_layer_init(&a, 7, NULL, NULL), MR_OK);
    ck_assert_int_eq(mr_layer_init(&b, 7, NULL, NULL), MR_OK);
    float limit = sqrtf(6.0f / 150.0f);
    double mean = 0.0;
    for (int i = 0; i < 5000; i++) {
        ck_assert(fabsf(wa[i]) <= limit);
        mean += wa[i];
    }
    /* mean of 5000 uniforms on [-l, l]: sd l/sqrt(3*5000) ~ 0.0016 */
    ck_assert_double_lt(fabs(mean / 5000), 0.01);
    for (int i = 0; i < 50; i++)
        ck_assert_float_eq(ba[i], 0.0f);
    ck_assert(memcmp(wa, wb, sizeof(float) * 5000) != 0);
    a.w[0].data = mr_dfloat_of(wa2);
    ck_assert_int_eq(mr_layer_init(&a, 7, NULL, NULL), MR_OK);
    ck_assert(memcmp(wa, wa2, sizeof(float) * 5000) == 0);
    /* through host staging (a context whose memory is not host memory):
     * made on the host, then copied, the same bits */
    mr_backend *staged = NULL;
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, &staged, NULL), MR_OK);
    staged->host_memory = 0;
    a.be = staged;
    float *stage = malloc(sizeof(float) * 5000);
    memset(wa2, 0, sizeof(float) * 5000);
    ck_assert_int_eq(mr_layer_init(&a, 7, stage, NULL), MR_OK);
    ck_assert(memcmp(wa, wa2, sizeof(float) * 5000) == 0);
    a.be = tu_cpu_backend();
    mr_backend_destroy(staged);
    mr_layer_destroy(&a);
    mr_layer_destroy(&b);
    free(wa), free(wb), free(wa2), free(stage);
}
END_TEST

START_TEST(dense_needs_flat_input) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_DENSE);
    c.line = 12;
    mr_layer l = {0};
    l.ops = &mr_dense_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {28, 28, 1}};
    mr_error err = {0};
    ck_assert_int_eq(mr_layer_setup(&l, tu_cpu_backend(), 1, "m.cfg", &err), MR_ERR_CONFIG);
    mr_layer_destroy(&l);
    ck_assert_msg(strstr(err.msg, "m.cfg:12:") && strstr(err.msg, "[flatten]"), "%s", err.msg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("layers");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dense_gradients);
    tcase_add_test(tc, activation_gradients);
    tcase_add_test(tc, flatten_gradients);
    tcase_add_test(tc, dense_values);
    tcase_add_test(tc, glorot_init);
    tcase_add_test(tc, dense_needs_flat_input);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
