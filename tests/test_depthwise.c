/* test_depthwise.c: DepthwiseConv2D (models/depthwise.c, the CPU kernels of
 * backends/cpu/depthwise_cpu.c) against a direct loop in double (forward,
 * dx, dW, db), finite-difference gradients, its shape errors and its
 * Glorot init's bounds as Keras's. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/layer.h"
#include "runtime/rng.h"
#include "tests/gradcheck.h"
#include "tests/testutil.h"

static mr_layer_cfg dw_cfg(int k, int s, int m, mr_padding pad, int bias) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_DEPTHWISE);
    c.size[0] = k, c.size[1] = k > 1 ? k - 1 : 1; /* a non-square window */
    c.stride[0] = c.stride[1] = s;
    c.depth_multiplier = m;
    c.padding = pad;
    c.use_bias = bias;
    return c;
}

START_TEST(gradients) {
    mr_shape in = {3, {5, 6, 3}};
    const struct {
        int k, s, m;
        mr_padding pad;
        int bias;
    } cases[] = {{3, 1, 1, MR_PADDING_SAME, 1},  {3, 2, 2, MR_PADDING_SAME, 1},
                 {3, 1, 3, MR_PADDING_VALID, 0}, {2, 2, 1, MR_PADDING_VALID, 1},
                 {4, 3, 2, MR_PADDING_SAME, 0},  {1, 1, 2, MR_PADDING_VALID, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mr_layer_cfg c = dw_cfg(cases[i].k, cases[i].s, cases[i].m, cases[i].pad, cases[i].bias);
        gc_layer_result r;
        mr_error err = {0};
        ck_assert_msg(gc_check_layer(&c, in, 2, 20 + i, &r, &err) == MR_OK, "%s", err.msg);
        ck_assert_msg(r.err_input < 2e-3 && r.err_weights < 2e-3, "case %zu: %g %g", i, r.err_input,
                      r.err_weights);
        ck_assert_int_gt(r.checked, 0);
    }
    mr_activation acts[] = {MR_ACTIVATION_RELU, MR_ACTIVATION_TANH, MR_ACTIVATION_GELU,
                            MR_ACTIVATION_SWISH, MR_ACTIVATION_SOFTMAX};
    for (int i = 0; i < 5; i++) {
        mr_layer_cfg c = dw_cfg(3, 1, 2, MR_PADDING_SAME, 1);
        c.activation = acts[i];
        gc_layer_result r;
        mr_error err = {0};
        ck_assert_msg(gc_check_layer(&c, in, 2, 40 + (uint64_t)i, &r, &err) == MR_OK, "%s",
                      err.msg);
        ck_assert_msg(r.err_input < 2e-3 && r.err_weights < 2e-3, "%s: %g %g",
                      mr_activation_name(acts[i]), r.err_input, r.err_weights);
    }
}
END_TEST

/* z (B, OH, OW, C*M), dx, dW and db of dz by the definition, in double:
 * out channel c*M+m of pixel (oy, ox) sums x[oy*s - pt + ky][ox*s - pl + kx][c]
 * * k[ky][kx][c][m] over the taps inside the image. */
typedef struct ref {
    double *z, *dx, *dk, *db;
} ref;

static void reference(const mr_layer *l, int B, const float *x, const float *k, const float *b,
                      const float *dz, ref *r) {
    const mr_layer_cfg *c = l->cfg;
    const int H = l->in.d[0], W = l->in.d[1], C = l->in.d[2], M = c->depth_multiplier;
    const int OH = l->out.d[0], OW = l->out.d[1], CM = C * M;
    const int kh = c->size[0], kw = c->size[1], sh = c->stride[0], sw = c->stride[1];
    int ph = (OH - 1) * sh + kh - H, pw = (OW - 1) * sw + kw - W;
    const int pt = c->padding == MR_PADDING_SAME && ph > 0 ? ph / 2 : 0;
    const int pl = c->padding == MR_PADDING_SAME && pw > 0 ? pw / 2 : 0;
    for (int n = 0; n < B; n++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                for (int o = 0; o < CM; o++) {
                    const int64_t at = ((int64_t)(n * OH + oy) * OW + ox) * CM + o;
                    double s = b != NULL ? b[o] : 0.0;
                    if (b != NULL) r->db[o] += dz[at];
                    for (int ky = 0; ky < kh; ky++)
                        for (int kx = 0; kx < kw; kx++) {
                            const int iy = oy * sh - pt + ky, ix = ox * sw - pl + kx;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            const int64_t xi = ((int64_t)(n * H + iy) * W + ix) * C + o / M;
                            const int64_t ki = (int64_t)(ky * kw + kx) * CM + o;
                            s += (double)x[xi] * k[ki];
                            r->dx[xi] += (double)dz[at] * k[ki];
                            r->dk[ki] += (double)dz[at] * x[xi];
                        }
                    r->z[at] = s;
                }
}

static double max_diff(const float *a, const double *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

/* The kernels match the definition, linear activation (y = z, dz = dy). */
START_TEST(matches_direct) {
    const struct {
        int h, w, c, k, s, m;
        mr_padding pad;
        int bias;
    } cases[] = {{8, 8, 16, 3, 1, 1, MR_PADDING_SAME, 1},
                 {9, 7, 5, 3, 2, 2, MR_PADDING_SAME, 1},
                 {7, 9, 4, 5, 2, 3, MR_PADDING_VALID, 0},
                 {6, 6, 8, 3, 2, 1, MR_PADDING_SAME, 0},
                 {4, 5, 3, 2, 1, 4, MR_PADDING_VALID, 1}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        mr_layer_cfg c = dw_cfg(cases[t].k, cases[t].s, cases[t].m, cases[t].pad, cases[t].bias);
        c.size[1] = cases[t].k;
        mr_layer l = {0};
        l.ops = &mr_depthwise_ops, l.cfg = &c, l.index = 1;
        l.in = (mr_shape){3, {cases[t].h, cases[t].w, cases[t].c}};
        mr_error err = {0};
        const int B = 3;
        ck_assert_msg(gc_setup(&l, B, "t.cfg", &err) == MR_OK, "%s", err.msg);
        const int64_t nx = B * mr_shape_size(l.in), ny = B * mr_shape_size(l.out);
        const int64_t nk = l.w[0].size, CM = l.out.d[2];
        float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
        float *dy = malloc(sizeof(float) * ny), *dz = malloc(sizeof(float) * ny);
        float *dx = malloc(sizeof(float) * nx), *k = malloc(sizeof(float) * nk);
        float *dk = calloc(nk, sizeof(float)), *b = malloc(sizeof(float) * CM);
        float *db = calloc(CM, sizeof(float));
        float *scratch = malloc(sizeof(float) * (l.scratch_floats + 1));
        mr_rng_uniform(3, 1, 1, t, -1, 1, x, nx);
        mr_rng_uniform(3, 1, 2, t, -1, 1, k, nk);
        mr_rng_uniform(3, 1, 3, t, -1, 1, b, CM);
        mr_rng_uniform(3, 1, 4, t, -1, 1, dy, ny);
        memcpy(dz, dy, sizeof(float) * ny);
        gc_weight(&l, 0, k, dk);
        if (l.n_weights > 1) gc_weight(&l, 1, b, db);
        mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1, .scratch = gc_dev(scratch)};
        ck_assert_int_eq(gc_forward(&l, &run, B, x, y), MR_OK);
        ck_assert_int_eq(gc_backward(&l, &run, B, x, y, dy, dx), MR_OK);
        ref r = {calloc(ny, sizeof(double)), calloc(nx, sizeof(double)), calloc(nk, sizeof(double)),
                 calloc(CM, sizeof(double))};
        reference(&l, B, x, k, l.n_weights > 1 ? b : NULL, dz, &r);
        ck_assert_msg(max_diff(y, r.z, ny) < 1e-4, "case %zu forward %g", t, max_diff(y, r.z, ny));
        ck_assert_msg(max_diff(dx, r.dx, nx) < 1e-4, "case %zu dx", t);
        ck_assert_msg(max_diff(dk, r.dk, nk) < 1e-3, "case %zu dW %g", t, max_diff(dk, r.dk, nk));
        if (l.n_weights > 1) ck_assert_msg(max_diff(db, r.db, CM) < 1e-4, "case %zu db", t);
        free(r.z), free(r.dx), free(r.dk), free(r.db);
        free(x), free(y), free(dy), free(dz), free(dx), free(k), free(dk), free(b), free(db);
        free(scratch);
        mr_layer_destroy(&l);
    }
}
END_TEST

/* Shapes: out channels C*M, the kernel (kh, kw, C, M), a bias of C*M; a
 * flat input and a valid window larger than the image are refused with
 * the line. */
START_TEST(shapes_and_errors) {
    mr_layer_cfg c = dw_cfg(3, 2, 4, MR_PADDING_SAME, 1);
    c.size[1] = 3;
    c.line = 7;
    mr_layer l = {0};
    l.ops = &mr_depthwise_ops, l.cfg = &c, l.index = 1;
    l.in = (mr_shape){3, {9, 8, 5}};
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&l, 2, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(l.out.d[0], 5);
    ck_assert_int_eq(l.out.d[1], 4);
    ck_assert_int_eq(l.out.d[2], 20);
    ck_assert_int_eq(l.n_weights, 2);
    ck_assert_int_eq(l.w[0].rank, 4);
    ck_assert_int_eq(l.w[0].dims[2], 5);
    ck_assert_int_eq(l.w[0].dims[3], 4);
    ck_assert_int_eq(l.w[1].size, 20);
    /* Glorot-uniform as Keras: limit sqrt(6 / (9*5 + 9*4)) */
    float *k = malloc(sizeof(float) * l.w[0].size);
    l.ops->init(&l, 0, 5, k);
    const float lim = sqrtf(6.0f / (45.0f + 36.0f));
    float mx = 0.0f;
    for (int64_t i = 0; i < l.w[0].size; i++)
        mx = fmaxf(mx, fabsf(k[i]));
    ck_assert_msg(mx <= lim && mx > 0.8f * lim, "%g vs %g", mx, lim);
    free(k);
    mr_layer_destroy(&l);

    mr_layer f = {0};
    f.ops = &mr_depthwise_ops, f.cfg = &c, f.index = 1;
    f.in = (mr_shape){1, {12, 0, 0}};
    ck_assert_int_ne(gc_setup(&f, 2, "t.cfg", &err), MR_OK);
    ck_assert_msg(strstr(err.msg, "t.cfg:7: [depthwise] needs an image input"), "%s", err.msg);
    mr_layer_destroy(&f);

    c.padding = MR_PADDING_VALID, c.size[0] = 4;
    mr_layer v = {0};
    v.ops = &mr_depthwise_ops, v.cfg = &c, v.index = 1;
    v.in = (mr_shape){3, {3, 3, 2}};
    err = (mr_error){0};
    ck_assert_int_ne(gc_setup(&v, 2, "t.cfg", &err), MR_OK);
    ck_assert_msg(strstr(err.msg, "t.cfg:7: [depthwise] kernel 4x3 is larger"), "%s", err.msg);
    mr_layer_destroy(&v);
}
END_TEST

/* The .cfg section in Keras's names: DepthwiseConv2D's arguments, and a
 * dilation_rate other than 1 refused with its line. */
START_TEST(config_keras_names) {
    const char *head = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=8,8,3\n";
    char text[512];
    snprintf(text, sizeof text,
             "%s[DepthwiseConv2D]\nkernel_size=(3, 3)\nstrides=2\npadding=\"same\"\n"
             "depth_multiplier=2\ndepthwise_regularizer=L2(0.01)\nuse_bias=False\n"
             "depthwise_initializer=\"he_normal\"\ndilation_rate=(1, 1)\n",
             head);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    const mr_layer_cfg *c = &cfg.layers[1];
    ck_assert_int_eq(c->kind, MR_LAYER_DEPTHWISE);
    ck_assert_int_eq(c->size[0], 3);
    ck_assert_int_eq(c->stride[1], 2);
    ck_assert_int_eq(c->depth_multiplier, 2);
    ck_assert_int_eq(c->padding, MR_PADDING_SAME);
    ck_assert_int_eq(c->use_bias, 0);
    ck_assert_int_eq(c->kernel_initializer, MR_INIT_HE_NORMAL);
    ck_assert_float_eq_tol(c->kernel_l2, 0.01f, 1e-9f);
    mr_config_free(&cfg);
    snprintf(text, sizeof text, "%s[depthwise]\nsize=3\ndilation_rate=2\n", head);
    ck_assert_int_ne(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_msg(strstr(err.msg, "t.cfg:9:") && strstr(err.msg, "dilation"), "%s", err.msg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("depthwise");
    TCase *tc = tcase_create("depthwise");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, matches_direct);
    tcase_add_test(tc, shapes_and_errors);
    tcase_add_test(tc, config_keras_names);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
