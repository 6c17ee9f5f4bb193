/* test_conv2d.c: Conv2D against a direct convolution, gradient checks
 * (stride 1 and 2, valid and same, with and without bias), shape errors.
 * Gradient bound 2e-3: see test_layers.c and gradcheck.h. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/rng.h"
#include "gradcheck.h"
#include "testutil.h"

static mr_layer_cfg conv_cfg(int f, int kh, int kw, int sh, int sw, mr_padding pad, int bias) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_CONV2D);
    c.filters = f;
    c.size[0] = kh, c.size[1] = kw;
    c.stride[0] = sh, c.stride[1] = sw;
    c.padding = pad;
    c.use_bias = bias;
    return c;
}

static void check_grad(mr_layer_cfg c, mr_shape in) {
    gc_layer_result r;
    mr_error err = {0};
    ck_assert_msg(gc_check_layer(&c, in, 2, 7, &r, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(r.err_input < 2e-3 && r.err_weights < 2e-3,
                  "k %dx%d s %d pad %d bias %d: in %g w %g", c.size[0], c.size[1], c.stride[0],
                  c.padding, c.use_bias, r.err_input, r.err_weights);
    ck_assert_int_le(r.skipped, r.checked / 20);
}

START_TEST(gradients) {
    mr_shape in = {3, {7, 6, 3}};
    for (int pad = 0; pad < 2; pad++)
        for (int s = 1; s <= 2; s++)
            for (int bias = 0; bias < 2; bias++)
                check_grad(conv_cfg(2, 3, 3, s, s, (mr_padding)pad, bias), in);
    check_grad(conv_cfg(3, 3, 5, 1, 2, MR_PADDING_SAME, 1), in);  /* odd kernel, mixed stride */
    check_grad(conv_cfg(2, 1, 1, 1, 1, MR_PADDING_VALID, 1), in); /* the direct 1x1 path */
    mr_shape gray = {3, {6, 7, 1}};                               /* one channel: its own im2col */
    check_grad(conv_cfg(3, 3, 3, 1, 1, MR_PADDING_VALID, 1), gray);
    check_grad(conv_cfg(3, 3, 3, 2, 2, MR_PADDING_SAME, 1), gray);
    mr_layer_cfg relu = conv_cfg(2, 3, 3, 1, 1, MR_PADDING_SAME, 1);
    relu.activation = MR_ACTIVATION_RELU;
    check_grad(relu, in);
}
END_TEST

/* y against a 7-loop convolution in double. */
static void check_forward(mr_layer_cfg c, mr_shape in, int batch) {
    mr_layer l = {0};
    l.ops = &mr_conv2d_ops;
    l.cfg = &c;
    l.index = 1;
    l.in = in;
    mr_error err = {0};
    ck_assert_int_eq(l.ops->setup(&l, batch, "t.cfg", &err), MR_OK);
    int H = in.d[0], W = in.d[1], C = in.d[2], OH = l.out.d[0], OW = l.out.d[1], F = l.out.d[2];
    int64_t nx = (int64_t)batch * H * W * C, ny = (int64_t)batch * OH * OW * F;
    float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
    float *k = malloc(sizeof(float) * l.w[0].size), b[64];
    float *scratch = malloc(sizeof(float) * (l.scratch_floats + 1));
    mr_rng_uniform(1, 1, 0, 0, -1, 1, x, nx);
    mr_rng_uniform(1, 1, 1, 0, -1, 1, k, l.w[0].size);
    mr_rng_uniform(1, 1, 2, 0, -1, 1, b, F);
    l.w[0].data = k;
    if (l.n_weights > 1) l.w[1].data = b;
    mr_run run = {.be = mr_backend_cpu(), .training = 1, .scratch = scratch};
    l.ops->forward(&l, &run, batch, x, y);
    /* Keras/TF same padding: pad_top = floor(total / 2) */
    int ph = ((OH - 1) * c.stride[0] + c.size[0] - H),
        pw = ((OW - 1) * c.stride[1] + c.size[1] - W);
    int pt = c.padding == MR_PADDING_SAME && ph > 0 ? ph / 2 : 0,
        pl = c.padding == MR_PADDING_SAME && pw > 0 ? pw / 2 : 0;
    for (int n = 0; n < batch; n++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                for (int f = 0; f < F; f++) {
                    double s = l.n_weights > 1 ? b[f] : 0.0;
                    for (int ky = 0; ky < c.size[0]; ky++)
                        for (int kx = 0; kx < c.size[1]; kx++)
                            for (int ch = 0; ch < C; ch++) {
                                int iy = oy * c.stride[0] - pt + ky,
                                    ix = ox * c.stride[1] - pl + kx;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                s += (double)x[((n * H + iy) * W + ix) * C + ch] *
                                     k[((ky * c.size[1] + kx) * C + ch) * F + f];
                            }
                    float got = y[((n * OH + oy) * OW + ox) * F + f];
                    ck_assert_msg(fabs(got - s) < 1e-4, "(%d,%d,%d,%d): %g vs %g", n, oy, ox, f,
                                  got, s);
                }
    l.ops->destroy(&l);
    free(x), free(y), free(k), free(scratch);
}

START_TEST(forward_matches_direct) {
    mr_shape in = {3, {9, 8, 3}};
    check_forward(conv_cfg(4, 3, 3, 1, 1, MR_PADDING_VALID, 1), in, 3);
    check_forward(conv_cfg(4, 3, 3, 2, 2, MR_PADDING_SAME, 1), in, 3);
    check_forward(conv_cfg(5, 5, 5, 1, 1, MR_PADDING_SAME, 0), in, 2);
    check_forward(conv_cfg(2, 2, 3, 3, 2, MR_PADDING_SAME, 1), in, 2);
    check_forward(conv_cfg(3, 1, 1, 1, 1, MR_PADDING_VALID, 1), in, 2);
    /* one input channel: its own im2col */
    mr_shape gray = {3, {9, 8, 1}};
    check_forward(conv_cfg(4, 3, 3, 1, 1, MR_PADDING_VALID, 1), gray, 3);
    check_forward(conv_cfg(4, 3, 5, 2, 1, MR_PADDING_SAME, 1), gray, 2);
    check_forward(conv_cfg(2, 5, 5, 1, 1, MR_PADDING_SAME, 0), gray, 2);
}
END_TEST

START_TEST(shape_errors) {
    mr_error err = {0};
    mr_layer l = {0};
    mr_layer_cfg c = conv_cfg(2, 5, 5, 1, 1, MR_PADDING_VALID, 1);
    c.line = 9;
    l.ops = &mr_conv2d_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {4, 4, 1}};
    ck_assert_int_eq(l.ops->setup(&l, 1, "t.cfg", &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "t.cfg:9:") && strstr(err.msg, "[conv2d]") &&
                      strstr(err.msg, "larger"),
                  "%s", err.msg);
    mr_error_clear(&err);
    l.in = (mr_shape){1, {784, 0, 0}};
    ck_assert_int_eq(l.ops->setup(&l, 1, "t.cfg", &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "image input"), "%s", err.msg);
    /* same padding accepts a kernel larger than the input */
    mr_error_clear(&err);
    c.padding = MR_PADDING_SAME;
    l.in = (mr_shape){3, {4, 4, 1}};
    ck_assert_int_eq(l.ops->setup(&l, 1, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(l.out.d[0], 4);
    l.ops->destroy(&l);
}
END_TEST

int main(void) {
    Suite *s = suite_create("conv2d");
    TCase *tc = tcase_create("conv2d");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, forward_matches_direct);
    tcase_add_test(tc, shape_errors);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
