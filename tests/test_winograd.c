/* test_winograd.c: backends/cpu/winograd_cpu.c, F(2x2, 3x3), against a
 * direct 3x3 convolution in double: the forward (with and without bias),
 * the kernel's gradient (written, then added into dW), across padding
 * (same, valid, full), odd output sizes (tiles past the edge), channel
 * counts that are not a multiple of 8 (the vector tails) and chunks of a
 * few tiles (a batch over many GEMMs); and the plan's sizes.
 *
 * Bound: the largest |winograd - direct| over the largest |direct| below
 * 1e-5. F(2x2, 3x3) adds rounding of a few float ulps per sum (the
 * transforms' additions and halvings); a wrong transform entry, a tile
 * off by one or a lost chunk moves results by O(1) of that scale. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "backends/cpu/winograd_cpu.h"
#include "tests/testutil.h"

#define BOUND 1e-5

typedef struct geom {
    int H, W, C, OH, OW, F, pt, pl;
} geom;

/* the input pixel under output (oy, ox) and tap (ky, kx), or -1: padding */
static int64_t at(const geom *g, int b, int oy, int ox, int ky, int kx) {
    int iy = oy - g->pt + ky, ix = ox - g->pl + kx;
    if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W) return -1;
    return (((int64_t)b * g->H + iy) * g->W + ix) * g->C;
}

/* y (n, OH, OW, F) and dW (3, 3, C, F) = sum x dy, in double */
static void direct(const geom *g, int n, const float *x, const float *w, const float *bias,
                   const float *dy, double *y, double *dw) {
    memset(dw, 0, sizeof(double) * 9 * (size_t)g->C * (size_t)g->F);
    for (int b = 0; b < n; b++)
        for (int oy = 0; oy < g->OH; oy++)
            for (int ox = 0; ox < g->OW; ox++)
                for (int f = 0; f < g->F; f++) {
                    const int64_t o = (((int64_t)b * g->OH + oy) * g->OW + ox) * g->F + f;
                    double s = bias ? bias[f] : 0.0;
                    for (int k = 0; k < 9; k++) {
                        int64_t i = at(g, b, oy, ox, k / 3, k % 3);
                        if (i < 0) continue;
                        for (int c = 0; c < g->C; c++) {
                            s += (double)x[i + c] * w[((int64_t)k * g->C + c) * g->F + f];
                            dw[((int64_t)k * g->C + c) * g->F + f] += (double)x[i + c] * dy[o];
                        }
                    }
                    y[o] = s;
                }
}

static double max_err(const float *a, const double *ref, int64_t n) {
    double e = 0.0, m = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs(a[i] - ref[i]));
        m = fmax(m, fabs(ref[i]));
    }
    return e / m;
}

/* Forward and kernel gradient of one geometry at batch n; chunk > 0 sets
 * the tiles per GEMM. */
static void check(geom g, int n, int chunk, int with_bias) {
    mr_wino p = mr_wino_plan(g.H, g.W, g.C, g.OH, g.OW, g.F, g.pt, g.pl);
    ck_assert_int_eq(p.tiles_h, (g.OH + 1) / 2);
    ck_assert_int_eq(p.tiles_w, (g.OW + 1) / 2);
    ck_assert_int_ge(p.chunk, 8);
    if (chunk > 0) p.chunk = chunk;
    const int64_t nx = (int64_t)n * g.H * g.W * g.C, ny = (int64_t)n * g.OH * g.OW * g.F,
                  nw = 9 * (int64_t)g.C * g.F;
    ck_assert_uint_eq(mr_wino_filter_floats(&p), (size_t)(16 * nw / 9));
    float *x = malloc(sizeof(float) * (size_t)(nx + 1)), *w = malloc(sizeof(float) * (size_t)nw),
          *bias = malloc(sizeof(float) * (size_t)g.F), *dy = malloc(sizeof(float) * (size_t)ny),
          *y = malloc(sizeof(float) * (size_t)ny), *u = malloc(sizeof(float) * 16 * (size_t)nw),
          *du = malloc(sizeof(float) * 16 * (size_t)nw), *dw = malloc(sizeof(float) * (size_t)nw);
    /* the work area with a guard float past its end */
    const size_t nwork = mr_wino_work_floats(&p);
    float *work = malloc(sizeof(float) * (nwork + 1));
    work[nwork] = 12345.0f;
    double *ry = malloc(sizeof(double) * (size_t)ny), *rdw = malloc(sizeof(double) * (size_t)nw);
    mr_rng_uniform(3, 1, 1, 0, -1, 1, x, nx);
    mr_rng_uniform(3, 1, 2, 0, -1, 1, w, nw);
    mr_rng_uniform(3, 1, 3, 0, -1, 1, bias, g.F);
    mr_rng_uniform(3, 1, 4, 0, -1, 1, dy, ny);
    direct(&g, n, x, w, with_bias ? bias : NULL, dy, ry, rdw);

    mr_wino_filter(&p, w, u);
    for (int64_t i = 0; i < ny; i++)
        y[i] = NAN; /* every output written */
    mr_wino_conv(&p, x, n, u, with_bias ? bias : NULL, y, work);
    double ey = max_err(y, ry, ny);
    ck_assert_msg(ey < BOUND, "forward %dx%dx%d -> %dx%dx%d pad %d,%d n %d chunk %d: %g", g.H, g.W,
                  g.C, g.OH, g.OW, g.F, g.pt, g.pl, n, p.chunk, ey);

    /* du is written (not added to), dw is added to: start dw at 1 */
    for (int64_t i = 0; i < 16 * nw / 9; i++)
        du[i] = NAN;
    for (int64_t i = 0; i < nw; i++)
        dw[i] = 1.0f;
    mr_wino_filter_grad(&p, x, dy, n, du, work);
    mr_wino_filter_grad_add(&p, du, dw);
    for (int64_t i = 0; i < nw; i++)
        rdw[i] += 1.0;
    double ew = max_err(dw, rdw, nw);
    ck_assert_msg(ew < BOUND, "dW %dx%dx%d -> %dx%dx%d pad %d,%d n %d chunk %d: %g", g.H, g.W, g.C,
                  g.OH, g.OW, g.F, g.pt, g.pl, n, p.chunk, ew);
    ck_assert_msg(work[nwork] == 12345.0f, "the work area overflowed");
    free(x), free(w), free(bias), free(dy), free(y), free(u), free(du), free(dw), free(work);
    free(ry), free(rdw);
}

START_TEST(same_padding) {
    check((geom){8, 8, 16, 8, 8, 16, 1, 1}, 2, 0, 0);
    check((geom){8, 8, 16, 8, 8, 16, 1, 1}, 3, 0, 1);
    check((geom){14, 14, 32, 14, 14, 32, 1, 1}, 2, 0, 1);
}
END_TEST

/* 7x7 and 5x3 outputs: the last tile row and column hang past the edge */
START_TEST(odd_sizes) {
    check((geom){7, 7, 8, 7, 7, 8, 1, 1}, 3, 0, 1);
    check((geom){7, 7, 8, 7, 7, 16, 1, 1}, 2, 0, 1);
    check((geom){5, 3, 16, 5, 3, 24, 1, 1}, 2, 0, 0);
}
END_TEST

/* valid (no padding, out = in - 2) and full (padding 2, out = in + 2, the
 * shape of dx as the convolution of dy) */
START_TEST(valid_and_full) {
    check((geom){9, 8, 8, 7, 6, 16, 0, 0}, 2, 0, 1);
    check((geom){6, 5, 16, 8, 7, 8, 2, 2}, 2, 0, 1);
}
END_TEST

/* channels not a multiple of 8 in, out or both: the vector tails */
START_TEST(channel_tails) {
    check((geom){6, 6, 3, 6, 6, 5, 1, 1}, 2, 0, 1);
    check((geom){6, 6, 12, 6, 6, 9, 1, 1}, 2, 0, 1);
    check((geom){6, 6, 8, 6, 6, 13, 1, 1}, 2, 0, 0);
}
END_TEST

/* chunks of 8 tiles: many GEMMs, a chunk across examples, a last chunk
 * shorter than the others (3 x 16 tiles = 48; 2 x 9 = 18) */
START_TEST(chunks) {
    check((geom){8, 8, 16, 8, 8, 16, 1, 1}, 3, 8, 1);
    check((geom){5, 5, 16, 5, 5, 16, 1, 1}, 2, 8, 1);
}
END_TEST

/* no examples: du is zeros, dW unchanged */
START_TEST(empty_batch) {
    mr_wino p = mr_wino_plan(4, 4, 8, 4, 4, 8, 1, 1);
    float *du = malloc(sizeof(float) * mr_wino_filter_floats(&p));
    float *work = malloc(sizeof(float) * mr_wino_work_floats(&p));
    float dw[9 * 8 * 8];
    for (size_t i = 0; i < mr_wino_filter_floats(&p); i++)
        du[i] = NAN;
    for (int i = 0; i < 9 * 8 * 8; i++)
        dw[i] = (float)i;
    mr_wino_filter_grad(&p, NULL, NULL, 0, du, work);
    mr_wino_filter_grad_add(&p, du, dw);
    for (int i = 0; i < 9 * 8 * 8; i++)
        ck_assert_float_eq(dw[i], (float)i);
    free(du), free(work);
}
END_TEST

int main(void) {
    Suite *s = suite_create("winograd");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, same_padding);
    tcase_add_test(tc, odd_sizes);
    tcase_add_test(tc, valid_and_full);
    tcase_add_test(tc, channel_tails);
    tcase_add_test(tc, chunks);
    tcase_add_test(tc, empty_batch);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
