/* winograd_cpu.h: a 3x3 stride-1 convolution by Winograd's minimal
 * filtering F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2015), NHWC, for conv2d_cpu.c: its
 * forward pass and, with the turned kernel, its dx.
 *
 * Each 2x2 block of output pixels (a tile) is read from the 4x4 input
 * patch under it, transformed per channel (V = B^T d B, 16 values), and
 * the kernel is transformed once per call (U = G g G^T, 16 values per
 * (c, f)). The 16 positions of a tile are then 16 independent GEMMs over
 * the channels, M_xi (tiles, F) = V_xi (tiles, C) U_xi (C, F), and each
 * tile's 2x2 outputs come back as Y = A^T M A. That is 16 multiplies per
 * 2x2 outputs and (c, f) where the im2col GEMM does 36: 2.25 times fewer
 * flops, at the price of the two transforms (additions only, per tile
 * and channel). The sums run in another order than the direct
 * convolution's, so the results differ from it by float rounding
 * (tests/test_winograd.c bounds the difference at 1e-5 of the largest
 * value). Any channel counts work; multiples of 8 run fastest (the
 * transforms go 8 channels at a time, a shorter tail through a copy).
 *
 * Tiles are numbered across the batch (example, tile row, tile column)
 * and go through in chunks whose V and M (tiles x 16 x (C + F) floats)
 * stay within an L2 cache. The kernel's gradient goes through the same
 * transforms (mr_wino_filter_grad): 2.25 times fewer flops for dW too. */
#ifndef MR_WINOGRAD_CPU_H
#define MR_WINOGRAD_CPU_H

#include <stddef.h>
#include <stdint.h>

typedef struct mr_wino {
    int in_h, in_w, C;    /* x (n, in_h, in_w, C) */
    int out_h, out_w, F;  /* y (n, out_h, out_w, F) */
    int pad_t, pad_l;     /* input rows / columns before the first (zeros) */
    int tiles_h, tiles_w; /* 2x2 output tiles: ceil(out / 2) */
    int chunk;            /* tiles per GEMM */
} mr_wino;

/* The plan of a 3x3 stride-1 convolution from x (in_h, in_w, C) to y
 * (out_h, out_w, F) with the given padding before (the input pixel under
 * output (oy, ox) and kernel tap (ky, kx) is (oy - pad_t + ky, ox - pad_l + kx),
 * zero outside the input); out_h, out_w > 0. */
mr_wino mr_wino_plan(int in_h, int in_w, int C, int out_h, int out_w, int F, int pad_t, int pad_l);

/* Floats of the kernel transform u, (16, C, F). */
size_t mr_wino_filter_floats(const mr_wino *p);

/* Floats of the work area mr_wino_conv and mr_wino_filter_grad need: one
 * chunk's V and M, a row of zeros and a row for the outputs past the edge. */
size_t mr_wino_work_floats(const mr_wino *p);

/* u (16, C, F) = G g G^T of the kernel w (3, 3, C, F) (Keras's layout),
 * for every (c, f). */
void mr_wino_filter(const mr_wino *p, const float *w, float *u);

/* y (n, out_h, out_w, F) = the convolution of x (n, in_h, in_w, C) with the
 * kernel whose transform is u, plus bias (F) when bias is not NULL; y is
 * written, not added to. work: mr_wino_work_floats(p) floats. */
void mr_wino_conv(const mr_wino *p, const float *x, int n, const float *u, const float *bias,
                  float *y, float *work);

/* The kernel's gradient through the same transforms: with dM = A dY A^T
 * of each tile's 2x2 output gradient (zero past the edge), du (16, C, F)
 * = sum over the tiles of V_xi^T dM_xi, 16 GEMMs over the tiles, for x
 * (n, in_h, in_w, C) and dy (n, out_h, out_w, F); du is written, not added
 * to (with n = 0, zeros). work: mr_wino_work_floats(p) floats. */
void mr_wino_filter_grad(const mr_wino *p, const float *x, const float *dy, int n, float *du,
                         float *work);

/* dw (3, 3, C, F) += G^T du G for every (c, f): du back to the kernel's
 * taps (the transpose of mr_wino_filter). */
void mr_wino_filter_grad_add(const mr_wino *p, const float *du, float *dw);

#endif
