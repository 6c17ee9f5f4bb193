/* test_layers.c: Dense, Activation, Flatten, GlobalAveragePooling2D,
 * ZeroPadding2D, Add, Rescaling, Normalization, Concatenate: gradient checks
 * and values, and copy_layout.h's layouts, which the CPU and CUDA kernels share.
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
#include "models/copy_layout.h"
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

START_TEST(globalavgpool_gradients) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_GLOBALAVGPOOL);
    gc_layer_result r;
    mr_error err = {0};
    mr_shape img = {3, {3, 4, 5}};
    ck_assert_int_eq(gc_check_layer(&c, img, 3, 7, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < 2e-3, "%g", r.err_input);
    ck_assert_int_ge(r.checked, 3 * 60);
}
END_TEST

START_TEST(zeropad_gradients) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_ZEROPAD);
    gc_layer_result r;
    mr_error err = {0};
    mr_shape img = {3, {3, 2, 2}};
    int pads[][4] = {{1, 1, 1, 1}, {0, 0, 2, 2}, {3, 3, 0, 0}, {0, 1, 0, 1}, {2, 0, 1, 3}};
    for (int i = 0; i < 5; i++) {
        memcpy(c.pad, pads[i], sizeof c.pad);
        ck_assert_int_eq(gc_check_layer(&c, img, 2, 8 + (uint64_t)i, &r, &err), MR_OK);
        ck_assert_msg(r.err_input < 2e-3, "pad %d,%d,%d,%d: %g", c.pad[0], c.pad[1], c.pad[2],
                      c.pad[3], r.err_input);
    }
}
END_TEST

/* Rescaling: y = x * scale + offset exactly (two roundings), dx = dy *
 * scale, checked by finite differences too. */
START_TEST(rescaling_values_and_gradients) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_RESCALING);
    c.scale = 1.0f / 255.0f, c.offset = -0.5f;
    gc_layer_result r;
    mr_error err = {0};
    ck_assert_int_eq(gc_check_layer(&c, (mr_shape){3, {3, 2, 2}}, 2, 9, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < 2e-3, "%g", r.err_input);
    ck_assert_int_ge(r.checked, 2 * 12);
    float x[6] = {0.0f, 1.0f, 128.0f, 255.0f, -3.0f, 7.5f}, y[6], dy[6], dx[6];
    mr_layer l = {0};
    l.ops = &mr_rescaling_ops;
    l.cfg = &c;
    l.in = (mr_shape){1, {3, 0, 0}};
    ck_assert_int_eq(gc_setup(&l, 2, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(l.n_weights, 0);
    ck_assert_int_eq(l.out.rank, 1);
    ck_assert_int_eq(l.out.d[0], 3);
    mr_exec_ctx run = {.be = tu_cpu_backend()};
    ck_assert_int_eq(gc_forward(&l, &run, 2, x, y), MR_OK);
    for (int i = 0; i < 6; i++) {
        volatile float p = x[i] * c.scale; /* rounded, not fused into the sum */
        ck_assert_msg(y[i] == p + c.offset, "y[%d] %.9g", i, y[i]);
        dy[i] = (float)(i + 1) * 0.25f;
    }
    ck_assert_int_eq(gc_backward(&l, &run, 2, x, y, dy, dx), MR_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(dx[i] == dy[i] * c.scale, "dx[%d] %.9g", i, dx[i]);
    mr_layer_destroy(&l);
}
END_TEST

/* Normalization: its state as Keras keeps it (mean (C), variance (C), count
 * ()), initialised from the .cfg (one value for all channels, or one each);
 * y = (x - mean) / max(sqrt(variance), 1e-7) per channel (the last axis),
 * dx = dy / that, and finite differences agree. */
START_TEST(normalization_values_and_gradients) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_NORMALIZATION);
    c.mean.n = 2, c.mean.v[0] = 0.5f, c.mean.v[1] = -2.0f;
    c.variance.n = 2, c.variance.v[0] = 4.0f, c.variance.v[1] = 1e-20f; /* under the floor */
    mr_layer l = {0};
    l.ops = &mr_normalization_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {1, 2, 2}};
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&l, 2, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(l.n_weights, 3);
    ck_assert_str_eq(l.w[0].name, "mean");
    ck_assert_str_eq(l.w[1].name, "variance");
    ck_assert_str_eq(l.w[2].name, "count");
    ck_assert_int_eq(l.w[0].size, 2);
    ck_assert_int_eq(l.w[2].rank, 0);
    ck_assert_int_eq(l.w[2].size, 1);
    ck_assert(!l.w[0].trainable && !l.w[1].trainable && !l.w[2].trainable);
    float st[3][2];
    for (int i = 0; i < 3; i++)
        gc_weight(&l, i, st[i], NULL);
    ck_assert_int_eq(gc_init(&l, 1), MR_OK);
    ck_assert(st[0][0] == 0.5f && st[0][1] == -2.0f && st[1][0] == 4.0f && st[2][0] == 0.0f);
    float x[8] = {1.5f, 3.0f, -0.5f, -2.0f, 0.5f, 1e-6f, 2.0f, -7.0f}, y[8], dy[8], dx[8];
    mr_exec_ctx run = {.be = tu_cpu_backend()};
    ck_assert_int_eq(gc_forward(&l, &run, 2, x, y), MR_OK);
    for (int i = 0; i < 8; i++) {
        const float sd = i % 2 ? 1e-7f : 2.0f, m = i % 2 ? -2.0f : 0.5f;
        ck_assert_msg(y[i] == (x[i] - m) / sd, "y[%d] %.9g", i, y[i]);
        dy[i] = 0.5f * (float)i - 1.0f;
    }
    ck_assert_int_eq(gc_backward(&l, &run, 2, x, y, dy, dx), MR_OK);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(dx[i] == dy[i] / (i % 2 ? 1e-7f : 2.0f), "dx[%d] %.9g", i, dx[i]);
    mr_layer_destroy(&l);
    /* one value for all channels; then finite differences, on a flat input */
    c.mean.n = 1, c.variance.n = 1, c.variance.v[0] = 0.25f;
    gc_layer_result r;
    ck_assert_int_eq(gc_check_layer(&c, (mr_shape){1, {5, 0, 0}}, 3, 4, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < 2e-3, "%g", r.err_input);
    ck_assert_int_ge(r.checked, 15);
    ck_assert_int_eq(gc_check_layer(&c, (mr_shape){3, {2, 2, 3}}, 2, 5, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < 2e-3, "%g", r.err_input);
    /* a list of neither 1 nor C numbers: one line naming the .cfg line */
    c.mean.n = 2;
    l = (mr_layer){0};
    l.ops = &mr_normalization_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {4, 4, 3}};
    c.line = 17;
    ck_assert_int_eq(gc_setup(&l, 2, "m.cfg", &err), MR_ERR_CONFIG);
    mr_layer_destroy(&l);
    ck_assert_msg(strstr(err.msg, "m.cfg:17: [normalization] mean has 2 numbers; the input has 3 "
                                  "channels"),
                  "%s", err.msg);
}
END_TEST

/* GlobalAveragePooling2D and ZeroPadding2D forward against direct loops. */
START_TEST(globalavgpool_zeropad_values) {
    const int B = 2, H = 3, W = 4, C = 2;
    float x[2 * 3 * 4 * 2], y[2 * 5 * 8 * 2], g[2 * 2];
    mr_rng_uniform(3, 1, 0, 0, -1.0f, 1.0f, x, B * H * W * C);
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_ZEROPAD);
    c.pad[0] = 1, c.pad[1] = 1, c.pad[2] = 2, c.pad[3] = 2;
    mr_layer l = {0};
    l.ops = &mr_zeropad_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {H, W, C}};
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&l, B, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(l.out.d[0], 5);
    ck_assert_int_eq(l.out.d[1], 8);
    mr_exec_ctx run = {.be = tu_cpu_backend()};
    ck_assert_int_eq(gc_forward(&l, &run, B, x, y), MR_OK);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < 5; h++)
            for (int w = 0; w < 8; w++)
                for (int k = 0; k < C; k++) {
                    int ih = h - 1, iw = w - 2;
                    float want = ih >= 0 && ih < H && iw >= 0 && iw < W
                                     ? x[((b * H + ih) * W + iw) * C + k]
                                     : 0.0f;
                    ck_assert_float_eq(y[((b * 5 + h) * 8 + w) * C + k], want);
                }
    mr_layer_destroy(&l);
    mr_layer_cfg gc = gc_layer_cfg(MR_LAYER_GLOBALAVGPOOL);
    mr_layer p = {0};
    p.ops = &mr_globalavgpool_ops;
    p.cfg = &gc;
    p.in = (mr_shape){3, {H, W, C}};
    ck_assert_int_eq(gc_setup(&p, B, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(p.out.rank, 1);
    ck_assert_int_eq(p.out.d[0], C);
    ck_assert_int_eq(gc_forward(&p, &run, B, x, g), MR_OK);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < C; k++) {
            double s = 0.0;
            for (int i = 0; i < H * W; i++)
                s += x[(b * H * W + i) * C + k];
            ck_assert_double_eq_tol(g[b * C + k], s / (H * W), 1e-6);
        }
    mr_layer_destroy(&p);
    /* a flat input is refused with the .cfg line */
    p.in = (mr_shape){1, {12, 0, 0}};
    gc.line = 9;
    ck_assert_int_eq(gc_setup(&p, B, "m.cfg", &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "m.cfg:9: [globalavgpool]"), "%s", err.msg);
    mr_layer_destroy(&p);
}
END_TEST

/* Add: y = x + x2 exactly; backward hands dy to both inputs (the sum is
 * linear, so this is its exact gradient; the model's finite-difference
 * checks of residual models, test_model.c, cover it in context); unequal
 * shapes are refused at setup with the .cfg line. */
START_TEST(add_values_and_gradients) {
    const int B = 2, n = 3 * 2 * 2;
    float x[24], x2[24], y[24], dy[24], dx[24], dx2[24];
    mr_rng_uniform(4, 1, 0, 0, -1.0f, 1.0f, x, B * n);
    mr_rng_uniform(4, 2, 0, 0, -1.0f, 1.0f, x2, B * n);
    mr_rng_uniform(4, 3, 0, 0, -1.0f, 1.0f, dy, B * n);
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_ADD);
    mr_layer l = {0};
    l.ops = &mr_add_ops;
    l.cfg = &c;
    l.in = l.in2 = (mr_shape){3, {3, 2, 2}};
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&l, B, "t.cfg", &err), MR_OK);
    mr_exec_ctx run = {.be = tu_cpu_backend()};
    l.x2 = gc_dev(x2);
    l.dx2 = gc_dev(dx2);
    ck_assert_int_eq(gc_forward(&l, &run, B, x, y), MR_OK);
    ck_assert_int_eq(gc_backward(&l, &run, B, x, y, dy, dx), MR_OK);
    for (int i = 0; i < B * n; i++) {
        ck_assert_float_eq(y[i], x[i] + x2[i]);
        ck_assert_float_eq(dx[i], dy[i]);
        ck_assert_float_eq(dx2[i], dy[i]);
    }
    mr_layer_destroy(&l);
    l.in2 = (mr_shape){3, {3, 2, 4}};
    c.line = 21;
    snprintf(c.from_ref, sizeof c.from_ref, "stem");
    ck_assert_int_eq(gc_setup(&l, B, "m.cfg", &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "m.cfg:21: [add] cannot add from = stem, of shape (None, 3, 2, "
                                  "4), to its input, of shape (None, 3, 2, 2)"),
                  "%s", err.msg);
    mr_layer_destroy(&l);
}
END_TEST

/* Concatenate: each row of y is x's row then x2's (channels of an image
 * here: rows = batch x H x W); backward splits dy the same way, and NULL
 * gradients are skipped; unequal leading axes are refused at setup. */
START_TEST(concatenate_values_and_gradients) {
    const int B = 2, rows = B * 3 * 2, c1 = 2, c2 = 3;
    float x[12 * 2], x2[12 * 3], y[12 * 5], dy[12 * 5], dx[12 * 2], dx2[12 * 3];
    mr_rng_uniform(5, 1, 0, 0, -1.0f, 1.0f, x, rows * c1);
    mr_rng_uniform(5, 2, 0, 0, -1.0f, 1.0f, x2, rows * c2);
    mr_rng_uniform(5, 3, 0, 0, -1.0f, 1.0f, dy, rows * (c1 + c2));
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_CONCATENATE);
    mr_layer l = {0};
    l.ops = &mr_concatenate_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {3, 2, c1}};
    l.in2 = (mr_shape){3, {3, 2, c2}};
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&l, B, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(l.out.rank, 3);
    ck_assert_int_eq(l.out.d[0], 3);
    ck_assert_int_eq(l.out.d[1], 2);
    ck_assert_int_eq(l.out.d[2], c1 + c2);
    /* the layout both devices' kernels take (copy_layout.h) */
    const mr_concat g = mr_concat_layout(&l, B);
    ck_assert_int_eq(g.rows, rows);
    ck_assert_int_eq(g.c1, c1);
    ck_assert_int_eq(g.c2, c2);
    mr_exec_ctx run = {.be = tu_cpu_backend()};
    l.x2 = gc_dev(x2);
    l.dx2 = gc_dev(dx2);
    ck_assert_int_eq(gc_forward(&l, &run, B, x, y), MR_OK);
    ck_assert_int_eq(gc_backward(&l, &run, B, x, y, dy, dx), MR_OK);
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < c1; k++) {
            ck_assert_float_eq(y[r * 5 + k], x[r * c1 + k]);
            ck_assert_float_eq(dx[r * c1 + k], dy[r * 5 + k]);
        }
        for (int k = 0; k < c2; k++) {
            ck_assert_float_eq(y[r * 5 + c1 + k], x2[r * c2 + k]);
            ck_assert_float_eq(dx2[r * c2 + k], dy[r * 5 + c1 + k]);
        }
    }
    /* the model's input as the second input: no dx2, dx still written */
    memset(dx, 0, sizeof dx);
    l.dx2 = NULL;
    ck_assert_int_eq(gc_backward(&l, &run, B, x, y, dy, dx), MR_OK);
    ck_assert_float_eq(dx[c1 + 1], dy[5 + 1]);
    mr_layer_destroy(&l);
    l.in2 = (mr_shape){3, {3, 3, c2}};
    c.line = 9;
    snprintf(c.from_ref, sizeof c.from_ref, "stem");
    ck_assert_int_eq(gc_setup(&l, B, "m.cfg", &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "m.cfg:9: [concatenate] cannot join from = stem, of shape "
                                  "(None, 3, 3, 3), to its input, of shape (None, 3, 2, 2): all "
                                  "axes but the last must be equal"),
                  "%s", err.msg);
    mr_layer_destroy(&l);
    l.in = (mr_shape){1, {4, 0, 0}};
    l.in2 = (mr_shape){3, {1, 1, 4}};
    ck_assert_int_eq(gc_setup(&l, B, "m.cfg", &err), MR_ERR_CONFIG);
    mr_layer_destroy(&l);
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

/* [zeropad]'s layout: every image pixel has one place in the bordered
 * image and back (mr_pad2d_outer, mr_pad2d_inner), every other pixel of
 * it is border, and the layer's output is the image at (top, left), of
 * uneven borders too. */
START_TEST(zeropad_layout) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_ZEROPAD);
    c.pad[0] = 2, c.pad[1] = 0, c.pad[2] = 1, c.pad[3] = 3;
    mr_layer l = {0};
    l.ops = &mr_zeropad_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {3, 4, 2}};
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&l, 1, "t.cfg", &err), MR_OK);
    const mr_pad2d p = mr_zeropad_layout(&l);
    ck_assert_int_eq(p.out_h, 5);
    ck_assert_int_eq(p.out_w, 8);
    ck_assert_int_eq(p.top, 2);
    ck_assert_int_eq(p.left, 1);
    int inside = 0;
    for (int oy = 0; oy < p.out_h; oy++)
        for (int ox = 0; ox < p.out_w; ox++) {
            const int64_t i = mr_pad2d_inner(&p, oy, ox);
            if (i < 0) continue;
            inside++;
            ck_assert_int_eq(mr_pad2d_outer(&p, (int)(i / p.in_w), (int)(i % p.in_w)),
                             (int64_t)oy * p.out_w + ox);
        }
    ck_assert_int_eq(inside, p.in_h * p.in_w);
    ck_assert_int_eq(mr_pad2d_outer(&p, 0, 0), 2 * 8 + 1);
    mr_layer_destroy(&l);
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
    tcase_add_test(tc, globalavgpool_gradients);
    tcase_add_test(tc, zeropad_gradients);
    tcase_add_test(tc, globalavgpool_zeropad_values);
    tcase_add_test(tc, rescaling_values_and_gradients);
    tcase_add_test(tc, normalization_values_and_gradients);
    tcase_add_test(tc, add_values_and_gradients);
    tcase_add_test(tc, concatenate_values_and_gradients);
    tcase_add_test(tc, zeropad_layout);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
