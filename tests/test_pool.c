/* test_pool.c: MaxPooling2D and AveragePooling2D against direct loops
 * (forward, and backward with ties: the first maximum of a window takes the
 * gradient), gradient checks (valid and same, stride != size), setup errors,
 * and conv_geometry.h's window cells, which the CPU and CUDA kernels share,
 * against a walk over every cell.
 *
 * Gradient bound 2e-3 (see test_conv2d.c and gradcheck.h: the
 * finite-difference noise here is below 1e-4, while a misrouted gradient is
 * off by a whole dy, O(0.1..1)); max-pool ties are kinks, which gradcheck
 * skips, so ties are tested directly in backward_matches_direct. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "models/conv_geometry.h"
#include "tests/gradcheck.h"
#include "tests/testutil.h"

static mr_layer_cfg pool_cfg(mr_layer_kind kind, int k, int s, mr_padding pad) {
    mr_layer_cfg c = gc_layer_cfg(kind);
    c.size[0] = c.size[1] = k;
    c.stride[0] = c.stride[1] = s;
    c.padding = pad;
    return c;
}

START_TEST(gradients) {
    mr_shape in = {3, {7, 6, 2}};
    for (int kind = MR_LAYER_MAXPOOL; kind <= MR_LAYER_AVGPOOL; kind++)
        for (int pad = 0; pad < 2; pad++) {
            int ks[4][2] = {{2, 2}, {3, 2}, {2, 1}, {2, 3}}; /* {size, stride} */
            for (int i = 0; i < 4; i++) {
                mr_layer_cfg c = pool_cfg((mr_layer_kind)kind, ks[i][0], ks[i][1], (mr_padding)pad);
                gc_layer_result r;
                mr_error err = {0};
                ck_assert_int_eq(gc_check_layer(&c, in, 2, 3, &r, &err), MR_OK);
                ck_assert_msg(r.err_input < 2e-3, "kind %d pad %d k %d s %d: %g", kind, pad,
                              ks[i][0], ks[i][1], r.err_input);
                ck_assert_int_le(r.skipped, r.checked / 20);
            }
        }
    /* a rectangular window */
    mr_layer_cfg c = pool_cfg(MR_LAYER_MAXPOOL, 2, 2, MR_PADDING_SAME);
    c.size[1] = 3, c.stride[0] = 1;
    gc_layer_result r;
    mr_error err = {0};
    ck_assert_int_eq(gc_check_layer(&c, in, 2, 4, &r, &err), MR_OK);
    ck_assert_double_lt(r.err_input, 2e-3);
}
END_TEST

typedef struct pool_case {
    mr_layer_cfg c;
    mr_layer l;
    int H, W, C, OH, OW, pt, pl;
} pool_case;

static void case_init(pool_case *t, mr_layer_cfg c, mr_shape in, int max_batch) {
    memset(t, 0, sizeof *t);
    t->c = c;
    t->l.ops = mr_layer_ops_for(c.kind);
    t->l.cfg = &t->c;
    t->l.in = in;
    mr_error err = {0};
    ck_assert_msg(gc_setup(&t->l, max_batch, "test.cfg", &err) == MR_OK, "%s", err.msg);
    t->H = in.d[0], t->W = in.d[1], t->C = in.d[2];
    t->OH = t->l.out.d[0], t->OW = t->l.out.d[1];
    ck_assert_int_eq(t->l.out.d[2], t->C);
    /* Keras/TF: valid out = (in - k) / s + 1; same out = ceil(in / s), padding
     * total max((out - 1) * s + k - in, 0), the smaller half first */
    int want_h = c.padding == MR_PADDING_SAME ? (t->H + c.stride[0] - 1) / c.stride[0]
                                              : (t->H - c.size[0]) / c.stride[0] + 1;
    int want_w = c.padding == MR_PADDING_SAME ? (t->W + c.stride[1] - 1) / c.stride[1]
                                              : (t->W - c.size[1]) / c.stride[1] + 1;
    ck_assert_int_eq(t->OH, want_h);
    ck_assert_int_eq(t->OW, want_w);
    int ph = (t->OH - 1) * c.stride[0] + c.size[0] - t->H,
        pw = (t->OW - 1) * c.stride[1] + c.size[1] - t->W;
    t->pt = c.padding == MR_PADDING_SAME && ph > 0 ? ph / 2 : 0;
    t->pl = c.padding == MR_PADDING_SAME && pw > 0 ? pw / 2 : 0;
}

/* Forward and backward of one case against the loops. Inputs are drawn
 * from {0, 1, 2} when `ties`, so windows often hold several maxima. */
static void check_case(mr_layer_kind kind, int kh, int kw, int sh, int sw, mr_padding pad,
                       mr_shape in, int batch, int ties) {
    mr_layer_cfg c = pool_cfg(kind, kh, sh, pad);
    c.size[1] = kw, c.stride[1] = sw;
    pool_case t;
    case_init(&t, c, in, batch);
    const int H = t.H, W = t.W, C = t.C, OH = t.OH, OW = t.OW;
    int64_t nx = (int64_t)batch * H * W * C, ny = (int64_t)batch * OH * OW * C;
    float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
    float *dy = malloc(sizeof(float) * ny), *dx = malloc(sizeof(float) * nx);
    double *rdx = calloc(nx, sizeof(double));
    mr_rng_uniform(2, 2, 0, 0, ties ? 0.0f : -1.0f, ties ? 3.0f : 1.0f, x, nx);
    if (ties)
        for (int64_t i = 0; i < nx; i++)
            x[i] = floorf(x[i]);
    mr_rng_uniform(2, 2, 1, 0, -1, 1, dy, ny);
    for (int64_t i = 0; i < nx; i++)
        dx[i] = NAN; /* backward must write every element */
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1};
    gc_forward(&t.l, &run, batch, x, y);
    gc_backward(&t.l, &run, batch, x, y, dy, dx);
    for (int n = 0; n < batch; n++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                for (int ch = 0; ch < C; ch++) {
                    double mx = -DBL_MAX, sum = 0;
                    int cnt = 0, arg = -1;
                    for (int ky = 0; ky < kh; ky++) /* window cells in row-major order */
                        for (int kx = 0; kx < kw; kx++) {
                            int iy = oy * sh - t.pt + ky, ix = ox * sw - t.pl + kx;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            int xi = ((n * H + iy) * W + ix) * C + ch;
                            if (x[xi] > mx) mx = x[xi], arg = xi; /* strict: first max */
                            sum += x[xi];
                            cnt++;
                        }
                    int yi = ((n * OH + oy) * OW + ox) * C + ch;
                    double want = kind == MR_LAYER_MAXPOOL ? mx : sum / cnt;
                    ck_assert_double_eq_tol(y[yi], want, 1e-6);
                    if (kind == MR_LAYER_MAXPOOL) {
                        rdx[arg] += dy[yi];
                        continue;
                    }
                    for (int ky = 0; ky < kh; ky++)
                        for (int kx = 0; kx < kw; kx++) {
                            int iy = oy * sh - t.pt + ky, ix = ox * sw - t.pl + kx;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            rdx[((n * H + iy) * W + ix) * C + ch] += dy[yi] / cnt;
                        }
                }
    for (int64_t i = 0; i < nx; i++)
        ck_assert_msg(fabs(dx[i] - rdx[i]) < 1e-6,
                      "kind %d k %dx%d s %dx%d pad %d: dx[%ld] %g vs %g", kind, kh, kw, sh, sw, pad,
                      (long)i, dx[i], rdx[i]);
    mr_layer_destroy(&t.l);
    free(x), free(y), free(dy), free(dx), free(rdx);
}

START_TEST(forward_matches_direct) {
    mr_shape in = {3, {7, 5, 3}};
    for (int kind = MR_LAYER_MAXPOOL; kind <= MR_LAYER_AVGPOOL; kind++) {
        check_case((mr_layer_kind)kind, 2, 2, 2, 2, MR_PADDING_VALID, in, 2, 0);
        check_case((mr_layer_kind)kind, 2, 2, 2, 2, MR_PADDING_SAME, in, 2, 0);
        check_case((mr_layer_kind)kind, 3, 3, 2, 2, MR_PADDING_SAME, in, 2, 0);
        check_case((mr_layer_kind)kind, 2, 2, 1, 1, MR_PADDING_SAME, in, 2, 0);
        check_case((mr_layer_kind)kind, 3, 3, 3, 3, MR_PADDING_VALID, in, 2, 0);
        check_case((mr_layer_kind)kind, 2, 3, 1, 2, MR_PADDING_SAME, in, 2, 0);
        check_case((mr_layer_kind)kind, 3, 2, 3, 1, MR_PADDING_VALID, in, 2, 0);
        /* windows larger than the input under same padding */
        check_case((mr_layer_kind)kind, 4, 4, 1, 1, MR_PADDING_SAME, (mr_shape){3, {3, 2, 4}}, 2,
                   0);
    }
}
END_TEST

/* Ties: max backward gives dy to the first maximum of the window (row
 * major), on the 2x2 tiling fast path and on the general one. */
START_TEST(backward_matches_direct) {
    mr_shape even = {3, {8, 6, 33}}, odd = {3, {7, 5, 3}};
    for (int kind = MR_LAYER_MAXPOOL; kind <= MR_LAYER_AVGPOOL; kind++) {
        check_case((mr_layer_kind)kind, 2, 2, 2, 2, MR_PADDING_VALID, even, 3, 1); /* tiles */
        check_case((mr_layer_kind)kind, 2, 2, 2, 2, MR_PADDING_VALID, odd, 3, 1);  /* gaps */
        check_case((mr_layer_kind)kind, 2, 2, 2, 2, MR_PADDING_SAME, odd, 3, 1);   /* clipped */
        check_case((mr_layer_kind)kind, 3, 3, 2, 2, MR_PADDING_SAME, odd, 3, 1);   /* overlap */
        check_case((mr_layer_kind)kind, 2, 2, 1, 1, MR_PADDING_VALID, odd, 3, 1);
        check_case((mr_layer_kind)kind, 3, 3, 3, 3, MR_PADDING_SAME, odd, 3, 1);
        check_case((mr_layer_kind)kind, 2, 3, 2, 3, MR_PADDING_VALID, even, 2, 1);
    }
}
END_TEST

static void expect_error(mr_layer_kind kind, int k, mr_shape in, const char *what) {
    mr_layer_cfg c = pool_cfg(kind, k, k, MR_PADDING_VALID);
    c.line = 4;
    mr_layer l = {0};
    l.ops = mr_layer_ops_for(kind);
    l.cfg = &c;
    l.in = in;
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&l, 1, "test.cfg", &err), MR_ERR_CONFIG);
    char want[64];
    snprintf(want, sizeof want, "test.cfg:4: [%s]", mr_layer_kind_name(kind));
    ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, what), "%s", err.msg);
    mr_layer_destroy(&l);
}

START_TEST(shape_errors) {
    for (int kind = MR_LAYER_MAXPOOL; kind <= MR_LAYER_AVGPOOL; kind++) {
        expect_error((mr_layer_kind)kind, 5, (mr_shape){3, {3, 3, 2}}, "larger");
        expect_error((mr_layer_kind)kind, 4, (mr_shape){3, {9, 3, 2}},
                     "4x4 is larger than its 9x3 input");
        expect_error((mr_layer_kind)kind, 2, (mr_shape){1, {9, 0, 0}},
                     "needs an image input (H,W,C), got (9)");
    }
    ck_assert_str_eq(mr_maxpool_ops.class_name, "MaxPooling2D");
    ck_assert_str_eq(mr_avgpool_ops.class_name, "AveragePooling2D");
}
END_TEST

/* For windows of every size, stride and padding on small inputs:
 * mr_window_clip is the unclipped window's cells inside the input,
 * mr_window_covering the outputs whose window holds a cell, and Keras's
 * padding before and after adds up to its total. */
START_TEST(window_cells) {
    for (int pad = 0; pad < 2; pad++)
        for (int k = 1; k <= 4; k++)
            for (int s = 1; s <= 3; s++)
                for (int h = 1; h <= 7; h++) {
                    const int w = h + 1;
                    mr_layer_cfg c = pool_cfg(MR_LAYER_MAXPOOL, k, s, (mr_padding)pad);
                    c.size[1] = k + 1 > w ? w : k + 1; /* a window that is not square */
                    const mr_window g = mr_window_make(h, w, &c);
                    if (g.out_h < 1 || g.out_w < 1) continue;
                    int pb, pr;
                    mr_window_pad_after(&g, &pb, &pr);
                    ck_assert_int_eq(g.pad_t + pb, mr_pad_total(h, g.k_h, g.s_h, g.out_h));
                    ck_assert_int_eq(g.pad_l + pr, mr_pad_total(w, g.k_w, g.s_w, g.out_w));
                    ck_assert(pb == g.pad_t || pb == g.pad_t + 1);
                    for (int oy = 0; oy < g.out_h; oy++)
                        for (int ox = 0; ox < g.out_w; ox++) {
                            const mr_rect r = mr_window_clip(&g, oy, ox);
                            int cells = 0;
                            for (int iy = 0; iy < h; iy++)
                                for (int ix = 0; ix < w; ix++) {
                                    const int in = iy >= oy * g.s_h - g.pad_t &&
                                                   iy < oy * g.s_h - g.pad_t + g.k_h &&
                                                   ix >= ox * g.s_w - g.pad_l &&
                                                   ix < ox * g.s_w - g.pad_l + g.k_w;
                                    const int clipped =
                                        iy >= r.y0 && iy < r.y1 && ix >= r.x0 && ix < r.x1;
                                    ck_assert_int_eq(in, clipped);
                                    const mr_rect cv = mr_window_covering(&g, iy, ix);
                                    const int covered =
                                        oy >= cv.y0 && oy < cv.y1 && ox >= cv.x0 && ox < cv.x1;
                                    ck_assert_int_eq(in, covered);
                                    cells += in;
                                }
                            ck_assert_int_gt(cells, 0);
                            ck_assert_float_eq(mr_rect_inv_area(r), 1.0f / (float)cells);
                        }
                }
}
END_TEST

int main(void) {
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, forward_matches_direct);
    tcase_add_test(tc, backward_matches_direct);
    tcase_add_test(tc, shape_errors);
    tcase_add_test(tc, window_cells);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
