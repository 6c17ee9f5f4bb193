/* test_conv2d.c: Conv2D against a direct 7-loop convolution (forward, and
 * backward: dW, db, dx), gradient checks (stride 1 and 2, valid and same,
 * with and without bias, odd kernels, fused activations), and setup errors.
 *
 * The paths under test: im2col rows (C > 1), the transposed strips (C == 1),
 * the direct 1x1 path, several chunks per batch, the col matrix kept
 * from forward (small) or rebuilt in backward (large max_batch), at
 * stride 1 dx (and dW) through dy's col matrix, split per kernel row, and
 * 3x3 stride-1 layers of 8 channels or more by Winograd's F(2x2, 3x3)
 * (forward, dx and dW; backends/cpu/winograd_cpu.c).
 *
 * Gradient bound 2e-3 on max|numeric - analytic| / max(1, max|analytic|):
 * gradcheck.h puts the finite-difference noise of these sizes near 1e-4
 * (measured 4e-5 .. 3e-4), so 2e-3 has margin; a real bug (a missing tap, a
 * padding off by one, a lost chunk) moves some gradient element by O(0.1..1)
 * and fails it, and `bound_detects_wrong_gradients` shows that even a 1%
 * error on the largest element or one zeroed border pixel fails it. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "tests/gradcheck.h"
#include "tests/testutil.h"

#define GRAD_BOUND 2e-3

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
    ck_assert_msg(r.err_input < GRAD_BOUND && r.err_weights < GRAD_BOUND,
                  "k %dx%d s %dx%d pad %d bias %d act %d: in %g w %g", c.size[0], c.size[1],
                  c.stride[0], c.stride[1], c.padding, c.use_bias, c.activation, r.err_input,
                  r.err_weights);
    ck_assert_int_le(r.skipped, r.checked / 20);
}

START_TEST(gradients) {
    mr_shape in = {3, {7, 6, 3}};
    for (int pad = 0; pad < 2; pad++)
        for (int s = 1; s <= 2; s++)
            for (int bias = 0; bias < 2; bias++)
                check_grad(conv_cfg(2, 3, 3, s, s, (mr_padding)pad, bias), in);
    check_grad(conv_cfg(3, 3, 5, 1, 1, MR_PADDING_VALID, 1), in); /* odd kernel, 3x5 on 7x6x3 */
    check_grad(conv_cfg(3, 3, 5, 1, 2, MR_PADDING_SAME, 1), in);  /* odd kernel, mixed stride */
    check_grad(conv_cfg(2, 5, 4, 2, 3, MR_PADDING_SAME, 0), in);  /* even kernel, odd padding */
    check_grad(conv_cfg(2, 1, 1, 1, 1, MR_PADDING_VALID, 1), in); /* the direct 1x1 path */
    mr_shape gray = {3, {6, 7, 1}};                               /* one channel: strips */
    check_grad(conv_cfg(3, 3, 3, 1, 1, MR_PADDING_VALID, 1), gray);
    check_grad(conv_cfg(3, 3, 3, 2, 2, MR_PADDING_SAME, 1), gray);
    check_grad(conv_cfg(2, 3, 5, 1, 2, MR_PADDING_SAME, 0), gray);
    mr_activation acts[] = {MR_ACTIVATION_RELU, MR_ACTIVATION_TANH,       MR_ACTIVATION_SOFTMAX,
                            MR_ACTIVATION_ELU,  MR_ACTIVATION_LEAKY_RELU, MR_ACTIVATION_GELU,
                            MR_ACTIVATION_SWISH};
    for (int i = 0; i < 7; i++) {
        mr_layer_cfg c = conv_cfg(3, 3, 3, 1, 1, MR_PADDING_SAME, 1);
        c.activation = acts[i];
        check_grad(c, in);
        check_grad(c, gray);
    }
}
END_TEST

/* A conv layer with random weights and bias, set up for max_batch. */
typedef struct conv_case {
    mr_layer_cfg c;
    mr_layer l;
    float *k, *b, *dk, *db, *scratch;
} conv_case;

static void case_init(conv_case *t, mr_layer_cfg c, mr_shape in, int max_batch) {
    memset(t, 0, sizeof *t);
    t->c = c;
    t->l.ops = &mr_conv2d_ops;
    t->l.cfg = &t->c;
    t->l.index = 1;
    t->l.in = in;
    mr_error err = {0};
    ck_assert_msg(gc_setup(&t->l, max_batch, "test.cfg", &err) == MR_OK, "%s", err.msg);
    int F = t->l.out.d[2];
    t->k = malloc(sizeof(float) * t->l.w[0].size);
    t->dk = calloc(t->l.w[0].size, sizeof(float));
    t->b = malloc(sizeof(float) * F);
    t->db = calloc(F, sizeof(float));
    t->scratch = malloc(sizeof(float) * (t->l.scratch_floats + 1));
    mr_rng_uniform(1, 1, 1, 0, -1, 1, t->k, t->l.w[0].size);
    mr_rng_uniform(1, 1, 2, 0, -1, 1, t->b, F);
    gc_weight(&t->l, 0, t->k, t->dk);
    if (t->l.n_weights > 1) gc_weight(&t->l, 1, t->b, t->db);
}

static void case_free(conv_case *t) {
    mr_layer_destroy(&t->l);
    free(t->k), free(t->b), free(t->dk), free(t->db), free(t->scratch);
}

/* The (top, left) padding as Keras/TF: out = ceil(in / s), total =
 * max((out - 1) * s + k - in, 0), the smaller half on top / left. */
static void ref_pad(const mr_layer_cfg *c, int H, int W, int OH, int OW, int *pt, int *pl) {
    int ph = (OH - 1) * c->stride[0] + c->size[0] - H,
        pw = (OW - 1) * c->stride[1] + c->size[1] - W;
    *pt = c->padding == MR_PADDING_SAME && ph > 0 ? ph / 2 : 0;
    *pl = c->padding == MR_PADDING_SAME && pw > 0 ? pw / 2 : 0;
}

/* z (before the activation) by a 7-loop convolution in double. */
static void ref_forward(const conv_case *t, int batch, const float *x, double *z) {
    const mr_layer_cfg *c = &t->c;
    int H = t->l.in.d[0], W = t->l.in.d[1], C = t->l.in.d[2];
    int OH = t->l.out.d[0], OW = t->l.out.d[1], F = t->l.out.d[2], pt, pl;
    ref_pad(c, H, W, OH, OW, &pt, &pl);
    for (int n = 0; n < batch; n++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                for (int f = 0; f < F; f++) {
                    double s = t->l.n_weights > 1 ? t->b[f] : 0.0;
                    for (int ky = 0; ky < c->size[0]; ky++)
                        for (int kx = 0; kx < c->size[1]; kx++)
                            for (int ch = 0; ch < C; ch++) {
                                int iy = oy * c->stride[0] - pt + ky,
                                    ix = ox * c->stride[1] - pl + kx;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                s += (double)x[((n * H + iy) * W + ix) * C + ch] *
                                     t->k[((ky * c->size[1] + kx) * C + ch) * F + f];
                            }
                    z[((n * OH + oy) * OW + ox) * F + f] = s;
                }
}

/* dW, db, dx of dz by the same loops: each product of the forward, transposed. */
static void ref_backward(const conv_case *t, int batch, const float *x, const double *dz,
                         double *dk, double *db, double *dx) {
    const mr_layer_cfg *c = &t->c;
    int H = t->l.in.d[0], W = t->l.in.d[1], C = t->l.in.d[2];
    int OH = t->l.out.d[0], OW = t->l.out.d[1], F = t->l.out.d[2], pt, pl;
    ref_pad(c, H, W, OH, OW, &pt, &pl);
    memset(dk, 0, sizeof(double) * t->l.w[0].size);
    memset(db, 0, sizeof(double) * F);
    memset(dx, 0, sizeof(double) * batch * H * W * C);
    for (int n = 0; n < batch; n++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                for (int f = 0; f < F; f++) {
                    double d = dz[((n * OH + oy) * OW + ox) * F + f];
                    db[f] += d;
                    for (int ky = 0; ky < c->size[0]; ky++)
                        for (int kx = 0; kx < c->size[1]; kx++)
                            for (int ch = 0; ch < C; ch++) {
                                int iy = oy * c->stride[0] - pt + ky,
                                    ix = ox * c->stride[1] - pl + kx;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                int xi = ((n * H + iy) * W + ix) * C + ch,
                                    ki = ((ky * c->size[1] + kx) * C + ch) * F + f;
                                dk[ki] += x[xi] * d;
                                dx[xi] += t->k[ki] * d;
                            }
                }
}

/* max |a - b| / max(1, max |b|) */
static double norm_err(const float *a, const double *b, int64_t n) {
    double m = 1.0, d = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(b[i]) > m) m = fabs(b[i]);
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
    }
    return d / m;
}

/* Forward and backward of `batch` examples (the layer set up for
 * max_batch) against the direct loops. Float sums of up to a few thousand
 * terms against double: 1e-5 relative is float rounding, not an error. */
static void check_against_direct(mr_layer_cfg c, mr_shape in, int batch, int max_batch) {
    conv_case t;
    case_init(&t, c, in, max_batch);
    int64_t nx = batch * mr_shape_size(t.l.in), ny = batch * mr_shape_size(t.l.out);
    int F = t.l.out.d[2];
    float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
    float *dy = malloc(sizeof(float) * ny), *dx = malloc(sizeof(float) * nx);
    double *z = malloc(sizeof(double) * ny), *dz = malloc(sizeof(double) * ny);
    double *rdk = malloc(sizeof(double) * t.l.w[0].size), *rdb = malloc(sizeof(double) * F);
    double *rdx = malloc(sizeof(double) * nx), *ry = malloc(sizeof(double) * ny);
    mr_rng_uniform(2, 1, 0, 0, -1, 1, x, nx);
    mr_rng_uniform(2, 1, 1, 0, -1, 1, dy, ny);
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1, .scratch = gc_dev(t.scratch)};
    gc_forward(&t.l, &run, batch, x, y);
    ref_forward(&t, batch, x, z);
    /* the activation (ReLU or linear here) on the reference, and its dz */
    int relu = c.activation == MR_ACTIVATION_RELU;
    for (int64_t i = 0; i < ny; i++) {
        ry[i] = relu && z[i] < 0.0 ? 0.0 : z[i];
        dz[i] = relu && !(y[i] > 0.0f) ? 0.0 : dy[i];
    }
    double e = norm_err(y, ry, ny);
    ck_assert_msg(e < 1e-5, "forward k %dx%d s %dx%d pad %d C %d: %g", c.size[0], c.size[1],
                  c.stride[0], c.stride[1], c.padding, in.d[2], e);
    gc_backward(&t.l, &run, batch, x, y, dy, dx);
    ref_backward(&t, batch, x, dz, rdk, rdb, rdx);
    double ek = norm_err(t.dk, rdk, t.l.w[0].size), ex = norm_err(dx, rdx, nx);
    double eb = t.l.n_weights > 1 ? norm_err(t.db, rdb, F) : 0.0;
    ck_assert_msg(ek < 1e-5 && eb < 1e-5 && ex < 1e-5,
                  "backward k %dx%d s %dx%d pad %d C %d batch %d: dW %g db %g dx %g", c.size[0],
                  c.size[1], c.stride[0], c.stride[1], c.padding, in.d[2], batch, ek, eb, ex);
    case_free(&t);
    free(x), free(y), free(dy), free(dx), free(z), free(dz), free(rdk), free(rdb), free(rdx),
        free(ry);
}

START_TEST(forward_matches_direct) {
    mr_shape in = {3, {9, 8, 3}};
    check_against_direct(conv_cfg(4, 3, 3, 1, 1, MR_PADDING_VALID, 1), in, 3, 3);
    check_against_direct(conv_cfg(4, 3, 3, 2, 2, MR_PADDING_SAME, 1), in, 3, 3);
    check_against_direct(conv_cfg(5, 5, 5, 1, 1, MR_PADDING_SAME, 0), in, 2, 2);
    check_against_direct(conv_cfg(2, 2, 3, 3, 2, MR_PADDING_SAME, 1), in, 2, 2);
    check_against_direct(conv_cfg(3, 1, 1, 1, 1, MR_PADDING_VALID, 1), in, 2, 2);
    check_against_direct(conv_cfg(3, 1, 1, 2, 2, MR_PADDING_VALID, 1), in, 2, 2); /* 1x1, s 2 */
    /* a kernel larger than the input under same padding: it hangs over both sides */
    check_against_direct(conv_cfg(3, 5, 5, 1, 1, MR_PADDING_SAME, 1), (mr_shape){3, {4, 3, 2}}, 2,
                         2);
    /* one input channel: the strips */
    mr_shape gray = {3, {9, 8, 1}};
    check_against_direct(conv_cfg(4, 3, 3, 1, 1, MR_PADDING_VALID, 1), gray, 3, 3);
    check_against_direct(conv_cfg(4, 3, 5, 2, 1, MR_PADDING_SAME, 1), gray, 2, 2);
    check_against_direct(conv_cfg(2, 5, 5, 1, 1, MR_PADDING_SAME, 0), gray, 2, 2);
    check_against_direct(conv_cfg(2, 4, 3, 3, 3, MR_PADDING_SAME, 1), gray, 2, 2);
    check_against_direct(conv_cfg(3, 5, 5, 1, 1, MR_PADDING_SAME, 1), (mr_shape){3, {3, 4, 1}}, 2,
                         2);
}
END_TEST

/* Batches that take several GEMM chunks (the chunk holds about 128 Ki
 * floats of col + output), the col matrix rebuilt in backward (it is kept
 * from forward only up to 64 Ki floats, one chunk's worth: the small
 * cases here and in forward_matches_direct); and a fused ReLU. */
START_TEST(chunks_match_direct) {
    /* im2col rows: 144 pixels x (72 + 4) floats per example -> 11 per chunk */
    mr_shape in = {3, {12, 12, 8}};
    mr_layer_cfg c = conv_cfg(4, 3, 3, 1, 1, MR_PADDING_SAME, 1);
    check_against_direct(c, in, 25, 25);  /* 3 chunks, dW from dy's col matrix */
    check_against_direct(c, in, 25, 256); /* the same, a larger max_batch */
    check_against_direct(c, in, 6, 6);    /* 6 x 144 x 72: kept, one chunk */
    c.activation = MR_ACTIVATION_RELU;
    check_against_direct(c, in, 25, 25);
    /* strips: 170 pixels x (15 + 6) per example -> 36 per chunk */
    mr_layer_cfg g = conv_cfg(6, 3, 5, 2, 1, MR_PADDING_SAME, 1);
    g.activation = MR_ACTIVATION_RELU;
    check_against_direct(g, (mr_shape){3, {20, 17, 1}}, 40, 40);   /* rebuilt, 2 chunks */
    check_against_direct(g, (mr_shape){3, {20, 17, 1}}, 20, 20);   /* kept: 20 x 170 x 15 */
    check_against_direct(g, (mr_shape){3, {20, 17, 1}}, 40, 1000); /* rebuilt */
    check_against_direct(conv_cfg(3, 5, 5, 2, 2, MR_PADDING_VALID, 0), (mr_shape){3, {30, 30, 1}},
                         50, 50);
    /* direct 1x1: 81 pixels x (20 + 7) -> 59 per chunk */
    check_against_direct(conv_cfg(7, 1, 1, 1, 1, MR_PADDING_VALID, 1), (mr_shape){3, {9, 9, 20}},
                         64, 64);
    /* fewer rows than max_batch, and a batch of one */
    check_against_direct(conv_cfg(4, 3, 3, 2, 2, MR_PADDING_SAME, 1), in, 1, 25);
}
END_TEST

/* The stride-1 paths of conv2d_cpu.c when the col matrix is not kept (a
 * large max_batch): dx as the convolution of dy with the turned kernel, dW
 * from dy's col matrix (same size in and out), the GEMMs split per kernel
 * row (196 output pixels an example or more), and a kernel over 512 KiB
 * run with at least 512 rows a GEMM; 1x1 under same padding is direct. */
START_TEST(stride1_paths_match_direct) {
    mr_shape in = {3, {16, 16, 8}}; /* 256 pixels x 72: past the cache cap at max_batch 200 */
    check_against_direct(conv_cfg(6, 3, 3, 1, 1, MR_PADDING_SAME, 1), in, 5,
                         200); /* split, dW from dy */
    check_against_direct(conv_cfg(6, 3, 3, 1, 1, MR_PADDING_VALID, 1), in, 5,
                         200); /* split, 14x14 out */
    check_against_direct(conv_cfg(5, 5, 3, 1, 1, MR_PADDING_SAME, 0), (mr_shape){3, {16, 15, 4}}, 3,
                         300); /* odd kernel */
    check_against_direct(conv_cfg(4, 3, 3, 1, 1, MR_PADDING_SAME, 1), (mr_shape){3, {9, 8, 3}}, 3,
                         2000); /* under 196 pixels: dW from dy, unsplit */
    mr_layer_cfg r = conv_cfg(6, 3, 3, 1, 1, MR_PADDING_SAME, 1);
    r.activation = MR_ACTIVATION_RELU;
    check_against_direct(r, in, 4, 200);
    /* 3x3x64 -> 256: 147 Ki floats of kernel, 49 pixels an example: chunks of 11 */
    check_against_direct(conv_cfg(256, 3, 3, 1, 1, MR_PADDING_SAME, 1), (mr_shape){3, {7, 7, 64}},
                         12, 12);
    check_against_direct(conv_cfg(3, 1, 1, 1, 1, MR_PADDING_SAME, 1), (mr_shape){3, {9, 9, 20}}, 4,
                         4); /* 1x1, same: direct */
    /* even kernels under same padding: Keras pads one more below and to the
     * right, so the turned kernel's padding differs on the two sides */
    check_against_direct(conv_cfg(3, 4, 2, 1, 1, MR_PADDING_SAME, 1), (mr_shape){3, {9, 8, 3}}, 3,
                         3);                                                       /* col kept */
    check_against_direct(conv_cfg(3, 4, 2, 1, 1, MR_PADDING_SAME, 1), in, 3, 200); /* split */
    check_against_direct(conv_cfg(3, 2, 2, 1, 1, MR_PADDING_SAME, 0), (mr_shape){3, {9, 8, 3}}, 3,
                         3000); /* dW from dy */
}
END_TEST

/* L = sum r * y over a conv layer; central differences of L in x (as
 * gradcheck.c does: double sums, h = 1e-3) against the layer's dx, and the
 * same comparison after planting a bug in dx. */
static double dx_err(mr_layer *l, mr_exec_ctx *run, int batch, float *x, const float *r,
                     const float *dx, int64_t nx, int64_t ny, float *y) {
    double *num = malloc(sizeof(double) * nx);
    for (int64_t i = 0; i < nx; i++) {
        float keep = x[i];
        double lp = 0.0, lm = 0.0;
        x[i] = keep + 1e-3f;
        double hp = (double)x[i] - keep;
        gc_forward(l, run, batch, x, y);
        for (int64_t j = 0; j < ny; j++)
            lp += (double)r[j] * y[j];
        x[i] = keep - 1e-3f;
        double hm = keep - (double)x[i];
        gc_forward(l, run, batch, x, y);
        for (int64_t j = 0; j < ny; j++)
            lm += (double)r[j] * y[j];
        x[i] = keep;
        num[i] = (lp - lm) / (hp + hm);
    }
    double e = norm_err(dx, num, nx);
    free(num);
    return e;
}

/* 3x3, stride 1, channels in and out multiples of 8: the Winograd path,
 * same and valid padding (dx then a full convolution of dy), odd sizes,
 * 24 channels in to 16 out, a fused ReLU, a batch below max_batch, and
 * gradient checks through it (one with gelu, whose backward reads z).
 * (test_winograd.c covers the channel counts that are not multiples of
 * 8, which conv2d_cpu.c does not give it.) */
START_TEST(winograd_matches_direct) {
    mr_layer_cfg c = conv_cfg(16, 3, 3, 1, 1, MR_PADDING_SAME, 1);
    check_against_direct(c, (mr_shape){3, {8, 8, 16}}, 3, 3);
    check_against_direct(c, (mr_shape){3, {7, 7, 8}}, 2, 5);
    check_against_direct(conv_cfg(8, 3, 3, 1, 1, MR_PADDING_VALID, 1), (mr_shape){3, {9, 8, 8}}, 2,
                         2);
    check_against_direct(conv_cfg(16, 3, 3, 1, 1, MR_PADDING_SAME, 0), (mr_shape){3, {6, 5, 24}}, 2,
                         2);
    c.activation = MR_ACTIVATION_RELU;
    check_against_direct(c, (mr_shape){3, {8, 8, 16}}, 3, 3);
    check_grad(conv_cfg(8, 3, 3, 1, 1, MR_PADDING_SAME, 1), (mr_shape){3, {5, 5, 8}});
    check_grad(conv_cfg(8, 3, 3, 1, 1, MR_PADDING_VALID, 0), (mr_shape){3, {6, 5, 8}});
    mr_layer_cfg gelu = conv_cfg(8, 3, 3, 1, 1, MR_PADDING_SAME, 1);
    gelu.activation = MR_ACTIVATION_GELU; /* dy through the kept z */
    check_grad(gelu, (mr_shape){3, {5, 5, 8}});
}
END_TEST

START_TEST(bound_detects_wrong_gradients) {
    conv_case t;
    mr_shape in = {3, {7, 6, 3}};
    case_init(&t, conv_cfg(2, 3, 3, 1, 1, MR_PADDING_SAME, 1), in, 2);
    int64_t nx = 2 * mr_shape_size(t.l.in), ny = 2 * mr_shape_size(t.l.out);
    float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
    float *r = malloc(sizeof(float) * ny), *dy = malloc(sizeof(float) * ny);
    float *dx = malloc(sizeof(float) * nx), *bad = malloc(sizeof(float) * nx);
    mr_rng_uniform(3, 1, 0, 0, -1, 1, x, nx);
    mr_rng_uniform(3, 1, 1, 0, -1, 1, r, ny);
    memcpy(dy, r, sizeof(float) * ny);
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1, .scratch = gc_dev(t.scratch)};
    gc_forward(&t.l, &run, 2, x, y);
    gc_backward(&t.l, &run, 2, x, y, dy, dx);
    ck_assert_double_lt(dx_err(&t.l, &run, 2, x, r, dx, nx, ny, y), GRAD_BOUND);
    /* 1% off on the largest element */
    int64_t imax = 0;
    for (int64_t i = 1; i < nx; i++)
        if (fabsf(dx[i]) > fabsf(dx[imax])) imax = i;
    memcpy(bad, dx, sizeof(float) * nx);
    bad[imax] *= 1.01f;
    ck_assert_double_gt(dx_err(&t.l, &run, 2, x, r, bad, nx, ny, y), GRAD_BOUND);
    /* a border pixel's gradient lost (what a padding bug in col2im does) */
    memcpy(bad, dx, sizeof(float) * nx);
    for (int ch = 0; ch < 3; ch++)
        bad[ch] = 0.0f;
    ck_assert_double_gt(dx_err(&t.l, &run, 2, x, r, bad, nx, ny, y), GRAD_BOUND);
    case_free(&t);
    free(x), free(y), free(r), free(dy), free(dx), free(bad);
}
END_TEST

static void expect_error(mr_layer_cfg c, mr_shape in, const char *what) {
    mr_layer l = {0};
    l.ops = &mr_conv2d_ops;
    l.cfg = &c;
    l.in = in;
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&l, 4, "test.cfg", &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "test.cfg:9: [conv2d]") && strstr(err.msg, what), "%s", err.msg);
    mr_layer_destroy(&l);
}

START_TEST(shape_errors) {
    mr_layer_cfg c = conv_cfg(2, 5, 5, 1, 1, MR_PADDING_VALID, 1);
    c.line = 9;
    expect_error(c, (mr_shape){3, {4, 4, 1}}, "larger");
    expect_error(c, (mr_shape){3, {9, 4, 3}}, "5x5 is larger than its 9x4 input");
    expect_error(c, (mr_shape){1, {784, 0, 0}}, "needs an image input (H,W,C), got (784)");
    mr_layer_cfg z = c;
    z.stride[0] = 0; /* the .cfg parser refuses it; setup does too */
    expect_error(z, (mr_shape){3, {8, 8, 1}}, ">= 1");
    /* same padding accepts a kernel larger than the input: out = ceil(in / s) */
    mr_layer l = {0};
    mr_error err = {0};
    c.padding = MR_PADDING_SAME;
    c.stride[0] = 3;
    l.ops = &mr_conv2d_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {4, 4, 1}};
    ck_assert_int_eq(gc_setup(&l, 1, "test.cfg", &err), MR_OK);
    ck_assert_int_eq(l.out.rank, 3);
    ck_assert_int_eq(l.out.d[0], 2);
    ck_assert_int_eq(l.out.d[1], 4);
    ck_assert_int_eq(l.out.d[2], 2);
    ck_assert_str_eq(l.w[0].name, "kernel");
    ck_assert_int_eq(l.w[0].dims[0], 5);
    ck_assert_int_eq(l.w[0].dims[2], 1);
    ck_assert_int_eq(l.w[0].dims[3], 2);
    ck_assert_str_eq(l.w[1].name, "bias");
    mr_layer_destroy(&l);
}
END_TEST

/* Glorot-uniform kernel with Keras's fans, zero bias. */
START_TEST(init_as_keras) {
    conv_case t;
    case_init(&t, conv_cfg(16, 3, 3, 1, 1, MR_PADDING_SAME, 1), (mr_shape){3, {8, 8, 8}}, 1);
    gc_init(&t.l, 5);
    double limit = sqrt(6.0 / (9 * 8 + 9 * 16)), mx = 0.0;
    for (int64_t i = 0; i < t.l.w[0].size; i++)
        mx = fmax(mx, fabs(t.k[i]));
    ck_assert_double_le(mx, limit);
    ck_assert_double_gt(mx, 0.9 * limit);
    for (int f = 0; f < 16; f++)
        ck_assert_float_eq(t.b[f], 0.0f);
    case_free(&t);
}
END_TEST

int main(void) {
    Suite *s = suite_create("conv2d");
    TCase *tc = tcase_create("conv2d");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, forward_matches_direct);
    tcase_add_test(tc, chunks_match_direct);
    tcase_add_test(tc, stride1_paths_match_direct);
    tcase_add_test(tc, winograd_matches_direct);
    tcase_add_test(tc, bound_detects_wrong_gradients);
    tcase_add_test(tc, shape_errors);
    tcase_add_test(tc, init_as_keras);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
