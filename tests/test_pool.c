/* test_pool.c: max and average pooling against direct loops, gradient
 * checks (valid and same, stride != size), shape errors.
 * Gradient bound 2e-3 (gradcheck.h); max-pool ties are kinks and skipped. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/rng.h"
#include "gradcheck.h"
#include "testutil.h"

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
            int ks[3][2] = {{2, 2}, {3, 2}, {2, 1}};
            for (int i = 0; i < 3; i++) {
                mr_layer_cfg c = pool_cfg((mr_layer_kind)kind, ks[i][0], ks[i][1], (mr_padding)pad);
                gc_layer_result r;
                mr_error err = {0};
                ck_assert_int_eq(gc_check_layer(&c, in, 2, 3, &r, &err), MR_OK);
                ck_assert_msg(r.err_input < 2e-3, "kind %d pad %d k %d s %d: %g", kind, pad,
                              ks[i][0], ks[i][1], r.err_input);
                ck_assert_int_le(r.skipped, r.checked / 20);
            }
        }
}
END_TEST

static void check_forward(mr_layer_kind kind, int k, int s, mr_padding pad) {
    mr_layer_cfg c = pool_cfg(kind, k, s, pad);
    mr_layer l = {0};
    l.ops = mr_layer_ops_for(kind);
    l.cfg = &c;
    l.in = (mr_shape){3, {7, 5, 3}};
    mr_error err = {0};
    ck_assert_int_eq(l.ops->setup(&l, 2, "t.cfg", &err), MR_OK);
    int H = 7, W = 5, C = 3, OH = l.out.d[0], OW = l.out.d[1];
    if (pad == MR_PADDING_SAME) {
        ck_assert_int_eq(OH, (H + s - 1) / s);
    } else {
        ck_assert_int_eq(OH, (H - k) / s + 1);
    }
    float x[2 * 7 * 5 * 3], y[2 * 7 * 5 * 3];
    mr_rng_uniform(2, 2, 0, 0, -1, 1, x, 2 * H * W * C);
    mr_run run = {.be = mr_backend_cpu(), .training = 1};
    l.ops->forward(&l, &run, 2, x, y);
    int ph = (OH - 1) * s + k - H, pw = (OW - 1) * s + k - W;
    int pt = pad == MR_PADDING_SAME && ph > 0 ? ph / 2 : 0,
        pl = pad == MR_PADDING_SAME && pw > 0 ? pw / 2 : 0;
    for (int n = 0; n < 2; n++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                for (int ch = 0; ch < C; ch++) {
                    double mx = -DBL_MAX, sum = 0;
                    int cnt = 0;
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) {
                            int iy = oy * s - pt + ky, ix = ox * s - pl + kx;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            double v = x[((n * H + iy) * W + ix) * C + ch];
                            mx = v > mx ? v : mx;
                            sum += v;
                            cnt++;
                        }
                    double want = kind == MR_LAYER_MAXPOOL ? mx : sum / cnt;
                    ck_assert_double_eq_tol(y[((n * OH + oy) * OW + ox) * C + ch], want, 1e-6);
                }
    l.ops->destroy(&l);
}

START_TEST(forward_matches_direct) {
    for (int kind = MR_LAYER_MAXPOOL; kind <= MR_LAYER_AVGPOOL; kind++) {
        check_forward((mr_layer_kind)kind, 2, 2, MR_PADDING_VALID);
        check_forward((mr_layer_kind)kind, 3, 2, MR_PADDING_SAME);
        check_forward((mr_layer_kind)kind, 2, 1, MR_PADDING_SAME);
        check_forward((mr_layer_kind)kind, 3, 3, MR_PADDING_VALID);
    }
}
END_TEST

START_TEST(shape_errors) {
    mr_layer_cfg c = pool_cfg(MR_LAYER_MAXPOOL, 5, 5, MR_PADDING_VALID);
    c.line = 4;
    mr_layer l = {0};
    l.ops = &mr_maxpool_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {3, 3, 2}};
    mr_error err = {0};
    ck_assert_int_eq(l.ops->setup(&l, 1, "t.cfg", &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "t.cfg:4:") && strstr(err.msg, "[maxpool]") &&
                      strstr(err.msg, "larger"),
                  "%s", err.msg);
    mr_error_clear(&err);
    c.kind = MR_LAYER_AVGPOOL;
    l.ops = &mr_avgpool_ops;
    l.in = (mr_shape){1, {9, 0, 0}};
    ck_assert_int_eq(l.ops->setup(&l, 1, "t.cfg", &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "[avgpool]") && strstr(err.msg, "image input"), "%s", err.msg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, forward_matches_direct);
    tcase_add_test(tc, shape_errors);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
