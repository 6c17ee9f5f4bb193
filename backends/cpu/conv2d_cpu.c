/* conv2d_cpu.c: Conv2D on the CPU, SGEMM through im2col, NHWC (conv2d.c
 * says what the layer is).
 *   x: (B, H, W, C)   kernel: (kh, kw, C, F)   bias: (F)   y: (B, OH, OW, F)
 * An im2col row of one output pixel lists its window as (ky, kx, c), which
 * is exactly the kernel's (kh, kw, C, F) layout read as a (kh*kw*C, F)
 * matrix: forward is one GEMM col (rows, K) x W (K, F) with no transposes,
 * dW += col^T dy and dcol = dy W^T; dx is col2im(dcol). At stride 1, dx is
 * instead the forward convolution of dy with the kernel turned by 180 degrees
 * (C and F swapped): im2col of dy and one GEMM writing dx, as fast as the
 * forward, where dcol = dy W^T (inner dimension F) and col2im's scatter-add
 * cost more; when x and y have the same size (same padding), dy's col
 * matrix also gives dW (dycol^T x), so x's col matrix is not built again
 * either. Where the col matrix is too large to keep for backward and an
 * example has 196 output pixels or more (conv_priv.split), the GEMMs go
 * per example and kernel row over a matrix of the window's rows only, kh
 * times fewer floats to copy than the col matrix, at inner dimension kw*C.
 * Examples go through in chunks so the GEMMs are large while the col
 * buffer stays bounded.
 * A 3x3 stride-1 convolution whose channels in and out are multiples of 8
 * (most of a ResNet's) goes none of these ways: its forward, dx and dW run by
 * Winograd's F(2x2, 3x3) (winograd_cpu.h), 2.25 times fewer flops.
 * One input channel (the first layer of an image model) builds the col
 * matrix transposed instead, colT (K, rows): each of its K rows is a strip
 * of shifted input pixels, copied contiguously rather than one float at a
 * time, and the GEMMs read it with trans_a (forward) or as is (dW) at the
 * same SGEMM speed. The col matrices kept from forward to backward are
 * memory of the layer's context (backend.h); the chunk's col and dcol are
 * its scratch.
 * Relies on: layer.h (the layer contract), conv_geometry.h (Keras/TF
 * output size and padding), runtime/backend.h (mr_cpu_gemm, row-major),
 * winograd_cpu.h. */
#include <stdlib.h>
#include <string.h>

#include "runtime/target_clones.h"
#include "models/conv_geometry.h"
#include "backends/cpu/cpu_impl.h"
#include "backends/cpu/winograd_cpu.h"

/* Working set per chunk (col + output, in floats): about 512 KiB, an L2
 * cache, so bias, activation and the next chunk's GEMM find their data in
 * cache instead of streaming the whole batch's output through memory
 * several times. At least one example per chunk. */
#define CHUNK_BUDGET (128 << 10)
/* Largest col matrix kept from forward to backward, in floats (256 KiB:
 * while it stays in cache). Reading a larger one back from memory costs
 * more than the backward's rebuild paths (dy's col matrix, the split
 * GEMMs): a limit of 8 MiB, which keeps ResNet-20's 14x14 stage's col
 * matrices at 32 examples a replica, trains it slower than this one
 * (docs/performance.md, "ResNet-20 and ResNet-50 on synthetic data"). */
#define COLS_CACHE_MAX (1 << 16)
/* Largest col matrix of a chunk that MIN_ROWS may ask for, in floats (8 MiB). */
#define CHUNK_COLS_MAX (2 << 20)
/* Rows of a GEMM at least, when the kernel (K x F) alone is larger than
 * CHUNK_BUDGET: OpenBLAS packs the whole kernel on every call (and dW's GEMM
 * reads and writes all of dW), from memory when it does not fit the cache,
 * so a chunk of one 7x7 image (49 rows against a 4608 x 512 kernel: 98
 * flops per packed float) is mostly packing; ResNet-50's 7x7 stage runs
 * faster with 9 to 11 images a GEMM (bench_layers resnet50.cfg 16, one core).
 * The col matrix of such a chunk stays within CHUNK_COLS_MAX (or one
 * example). */
#define MIN_ROWS 512
/* Output pixels of an example at least for the split GEMMs (conv_priv.split):
 * ResNet-20's 7x7 images (49 rows a call) gained nothing from the split. */
#define SPLIT_ROWS 196

/* Winograd's F(2x2, 3x3) (winograd_cpu.h) runs a 3x3 stride-1
 * convolution whose channels in and out are multiples of this: its
 * transforms go 8 channels at a time and copy a shorter tail through the
 * stack. In bench_layers at batch 64 on 28x28 images, 8 -> 8 channels
 * took 1.3 / 2.4 ms (forward / backward) against im2col's 2.6 / 3.4, but
 * 8 -> 12 took 3.0-3.3 / 5.5-6.0 against 2.7 / 4.4. */
#define WINO_CHANNELS 8

/* gcc would turn the short copy loops below into memcpy calls, whose call
 * overhead exceeds a copy of 3..32 floats; keep them as (vectorised) loops. */
#define MR_NO_MEMCPY __attribute__((optimize("no-tree-loop-distribute-patterns")))

typedef struct conv_priv {
    mr_window g;
    int C, F, K; /* input channels, filters, K = kh*kw*C */
    int chunk;   /* examples per GEMM */
    int direct;  /* 1x1, stride 1, no padding: x is its own col matrix */
    int strips;  /* one input channel: the col matrix is built transposed, (K, rows) */
    /* stride 1 (not direct, not strips): dx is the convolution of dy
     * (n, OH, OW, F) over the window gt (in OHxOW, out HxW, padding
     * kh-1-pad_t, kw-1-pad_l) with the turned kernel (kh*kw*F, C) */
    int tconv;
    mr_window gt;
    /* tconv, same size in and out, no col matrices kept: dW from dy's col
     * matrix, dWt (kh*kw*F, C) = dycol^T x, turned into dW after the batch */
    int tdw;
    /* tconv, no col matrices kept, k_h > 1, at least SPLIT_ROWS output
     * pixels an example: the GEMMs go per example and kernel row ky over
     * the row matrix of g1 (the window's rows only: (OH + kh - 1) * OW rows
     * of kw*C, kh times fewer floats to copy than the col matrix), whose
     * rows from ky * OW on are the col matrix's ky-th kw*C columns. The
     * short inner dimension (48 for 16 channels) also suits OpenBLAS better
     * (its small-matrix kernels on SkylakeX/Cooperlake, no packing):
     * ResNet-20's 3x3 convolutions of 16 channels at 28x28 went from 60%
     * to 85-90% of SGEMM (forward) and 97-100% (backward) */
    int split;
    mr_window g1, gt1; /* g and gt with a window of one row */
    /* 3x3, stride 1, channels in and out multiples of WINO_CHANNELS: forward, dx and
     * dW by Winograd's F(2x2, 3x3) (wf: x to y, and dW; wt: dy to dx with
     * the turned kernel), none of the paths above. Their kernel transforms
     * and work area are the scratch from wino_at on. */
    int wino;
    mr_wino wf, wt;
    size_t wino_at;
    /* The forward's col matrices kept for backward (chunk at example b0: its
     * n * OH * OW * K floats at b0 * OH * OW * K), or NULL: rebuilt;
     * allocated from the context */
    float *cols;
    /* gelu, swish: z (max_batch * OH * OW, F) before the activation, kept
     * from forward for backward (their gradient is a function of z);
     * otherwise NULL */
    float *pre;
} conv_priv;

static conv_priv *priv(mr_layer *l) {
    return (conv_priv *)l->priv;
}

/* The im2col plan of a layer that conv_setup accepted. */
static mr_status conv_cpu_setup(mr_layer *l, mr_backend *be, int max_batch, mr_error *err) {
    const mr_layer_cfg *c = l->cfg;
    mr_window g = mr_window_make(l->in.d[0], l->in.d[1], c);
    conv_priv *p = calloc(1, sizeof *p);
    if (p == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    l->priv = p;
    p->g = g;
    p->C = l->in.d[2];
    p->F = c->filters;
    p->K = g.k_h * g.k_w * p->C;
    /* a 1x1 window at stride 1 pads nothing, valid or same */
    p->direct = g.k_h == 1 && g.k_w == 1 && g.s_h == 1 && g.s_w == 1;
    p->strips = !p->direct && p->C == 1;
    p->tconv = !p->direct && !p->strips && g.s_h == 1 && g.s_w == 1 && g.out_h > 0 && g.out_w > 0;
    if (p->tconv) {
        /* dy (OH, OW) in, dx (H, W) out, the padding on the other sides */
        p->gt = g;
        p->gt.in_h = g.out_h, p->gt.in_w = g.out_w;
        p->gt.out_h = g.in_h, p->gt.out_w = g.in_w;
        p->gt.pad_t = g.k_h - 1 - g.pad_t, p->gt.pad_l = g.k_w - 1 - g.pad_l;
    }
    int64_t per_example = (int64_t)g.out_h * g.out_w * p->K;
    /* the backward's second buffer: dcol (OH*OW, K) per example, or with
     * tconv dy's col matrix (H*W, kh*kw*F) */
    int64_t per_example_b =
        p->tconv ? (int64_t)g.in_h * g.in_w * g.k_h * g.k_w * p->F : per_example;
    int64_t per_chunk = per_example + (int64_t)g.out_h * g.out_w * p->F;
    int64_t chunk = CHUNK_BUDGET / per_chunk;
    if (max_batch < 1) max_batch = 1;
    if (chunk < 1) chunk = 1;
    const int64_t P = (int64_t)g.out_h * g.out_w;
    if ((int64_t)p->K * p->F > CHUNK_BUDGET && P > 0 && chunk * P < MIN_ROWS) {
        int64_t want = (MIN_ROWS + P - 1) / P;
        /* direct: no col matrix; otherwise col and the backward's second
         * buffer, as large as it */
        int64_t cap = p->direct ? want
                                : CHUNK_COLS_MAX /
                                      (per_example > per_example_b ? per_example : per_example_b);
        chunk = want < cap ? want : (cap > chunk ? cap : chunk);
    }
    p->chunk = (int)(chunk > max_batch ? max_batch : chunk);
    /* scratch: col (chunk rows x K), dcol or dy's col, and with tconv the
     * turned kernel and dWt (K * F floats each); the direct path needs none
     * (x is col, dx is dcol) */
    l->scratch_floats = p->direct ? 0
                                  : (size_t)((int64_t)p->chunk * (per_example + per_example_b) +
                                             (p->tconv ? 2 * (int64_t)p->K * p->F : 0));
    p->wino = p->tconv && g.k_h == 3 && g.k_w == 3 && p->C % WINO_CHANNELS == 0 &&
              p->F % WINO_CHANNELS == 0;
    if (p->wino) {
        /* scratch: the turned kernel (K x F), then from wino_at the kernel
         * transforms of dx (or the forward) and of dW, then the work area */
        p->wf = mr_wino_plan(g.in_h, g.in_w, p->C, g.out_h, g.out_w, p->F, g.pad_t, g.pad_l);
        p->wt =
            mr_wino_plan(g.out_h, g.out_w, p->F, g.in_h, g.in_w, p->C, p->gt.pad_t, p->gt.pad_l);
        size_t wf = mr_wino_work_floats(&p->wf), wt = mr_wino_work_floats(&p->wt);
        p->wino_at = (size_t)p->K * (size_t)p->F;
        l->scratch_floats = p->wino_at + 2 * mr_wino_filter_floats(&p->wf) + (wf > wt ? wf : wt);
    }
    /* Keep the forward's col matrix for backward when it is small enough to
     * stay in cache (COLS_CACHE_MAX), instead of building it again; larger
     * ones are rebuilt chunk by chunk (or not built: dy's col matrix). */
    if (!p->direct && !p->wino && (int64_t)max_batch * per_example <= COLS_CACHE_MAX) {
        mr_dfloat *cols = mr_backend_alloc_floats(be, (size_t)max_batch * (size_t)per_example);
        if (cols == NULL)
            return mr_error_set(err, MR_ERR_NOMEM, "out of memory for [conv2d]'s col matrices");
        p->cols = mr_dfloat_ptr(cols);
    }
    p->tdw = p->tconv && p->cols == NULL && g.out_h == g.in_h && g.out_w == g.in_w;
    p->split = p->tconv && p->cols == NULL && g.k_h > 1 && P >= SPLIT_ROWS;
    if (p->split) {
        p->g1 = g, p->g1.k_h = 1, p->g1.out_h = g.out_h + g.k_h - 1;
        p->gt1 = p->gt, p->gt1.k_h = 1, p->gt1.out_h = p->gt.out_h + g.k_h - 1;
    }
    if (mr_activation_needs_input(c->activation)) {
        mr_dfloat *pre = mr_backend_alloc_floats(be, (size_t)max_batch * (size_t)g.out_h *
                                                         (size_t)g.out_w * (size_t)p->F);
        if (pre == NULL)
            return mr_error_set(err, MR_ERR_NOMEM, "out of memory for [conv2d]'s pre-activations");
        p->pre = mr_dfloat_ptr(pre);
    }
    return MR_OK;
}

/* colT (K, n * OH * OW) from x (n, H, W, 1): row (ky, kx) of colT is the
 * input shifted by (ky, kx), so for each output row it is one run of
 * input pixels (contiguous at stride 1) between zeros where the window
 * hangs over the padding. */
MR_AVX2_CLONES MR_NO_MEMCPY static void im2col_strips(const conv_priv *p, const float *x, int n,
                                                      float *colT) {
    const mr_window *g = &p->g;
    const int H = g->in_h, W = g->in_w, OH = g->out_h, OW = g->out_w, sw = g->s_w;
    const int64_t ld = (int64_t)n * OH * OW;
    for (int kx = 0; kx < g->k_w; kx++) {
        /* output columns [lo, hi) read input column ox * sw - pad_l + kx inside [0, W) */
        int lo = 0, hi = OW;
        while (lo < OW && lo * sw - g->pad_l + kx < 0)
            lo++;
        while (hi > lo && (hi - 1) * sw - g->pad_l + kx >= W)
            hi--;
        for (int ky = 0; ky < g->k_h; ky++) {
            float *strip = colT + (int64_t)(ky * g->k_w + kx) * ld;
            for (int b = 0; b < n; b++)
                for (int oy = 0; oy < OH; oy++) {
                    float *restrict dst = strip + ((int64_t)b * OH + oy) * OW;
                    int iy = oy * g->s_h - g->pad_t + ky;
                    if (iy < 0 || iy >= H || lo == hi) {
                        for (int ox = 0; ox < OW; ox++)
                            dst[ox] = 0.0f;
                        continue;
                    }
                    const float *restrict src =
                        x + ((int64_t)b * H + iy) * W + (lo * sw - g->pad_l + kx);
                    for (int ox = 0; ox < lo; ox++)
                        dst[ox] = 0.0f;
                    if (sw == 1)
                        for (int i = 0; i < hi - lo; i++)
                            dst[lo + i] = src[i];
                    else
                        for (int i = 0; i < hi - lo; i++)
                            dst[lo + i] = src[(int64_t)i * sw];
                    for (int ox = hi; ox < OW; ox++)
                        dst[ox] = 0.0f;
                }
        }
    }
}

/* col (n * OH * OW, K) from x (n, H, W, C), K = kh * kw * C, C > 1, over
 * the window g (the layer's, or the backward's gt with dy as x and F as C):
 * per output pixel and kernel row, the window's row is kw * C contiguous
 * floats of x (NHWC), one copy when the window is inside the input; short
 * copies (few channels) stay inline loops. */
MR_AVX2_CLONES MR_NO_MEMCPY static void im2col(const mr_window *g, int C, const float *x, int n,
                                               float *col) {
    const int K = g->k_h * g->k_w * C;
    const size_t rowc = (size_t)g->k_w * C;
    for (int b = 0; b < n; b++) {
        const float *xb = x + (int64_t)b * g->in_h * g->in_w * C;
        for (int oy = 0; oy < g->out_h; oy++)
            for (int ox = 0; ox < g->out_w; ox++) {
                float *row = col + (((int64_t)b * g->out_h + oy) * g->out_w + ox) * K;
                int x0 = ox * g->s_w - g->pad_l;
                int inside_x = x0 >= 0 && x0 + g->k_w <= g->in_w;
                for (int ky = 0; ky < g->k_h; ky++) {
                    float *dst = row + (size_t)ky * rowc;
                    int iy = oy * g->s_h - g->pad_t + ky;
                    if (iy < 0 || iy >= g->in_h) {
                        memset(dst, 0, sizeof(float) * rowc);
                        continue;
                    }
                    const float *src = xb + ((int64_t)iy * g->in_w) * C;
                    if (inside_x) { /* the window's row is contiguous in NHWC */
                        if (rowc < 64) {
                            const float *s = src + (int64_t)x0 * C;
                            for (size_t j = 0; j < rowc; j++)
                                dst[j] = s[j];
                        } else
                            memcpy(dst, src + (int64_t)x0 * C, sizeof(float) * rowc);
                        continue;
                    }
                    for (int kx = 0; kx < g->k_w; kx++) {
                        int ix = x0 + kx;
                        if (ix < 0 || ix >= g->in_w)
                            memset(dst + (size_t)kx * C, 0, sizeof(float) * (size_t)C);
                        else
                            memcpy(dst + (size_t)kx * C, src + (int64_t)ix * C,
                                   sizeof(float) * (size_t)C);
                    }
                }
            }
    }
}

/* dx (n, H, W, C) = scatter-add of dcol (n * OH * OW, K); dx is zeroed first. */
MR_AVX2_CLONES static void col2im(const conv_priv *p, const float *dcol, int n, float *dx) {
    const mr_window *g = &p->g;
    const int C = p->C, K = p->K;
    memset(dx, 0, sizeof(float) * (size_t)n * g->in_h * g->in_w * C);
    for (int b = 0; b < n; b++) {
        float *xb = dx + (int64_t)b * g->in_h * g->in_w * C;
        for (int oy = 0; oy < g->out_h; oy++)
            for (int ox = 0; ox < g->out_w; ox++) {
                const float *row = dcol + (((int64_t)b * g->out_h + oy) * g->out_w + ox) * K;
                for (int ky = 0; ky < g->k_h; ky++) {
                    int iy = oy * g->s_h - g->pad_t + ky;
                    if (iy < 0 || iy >= g->in_h) continue;
                    for (int kx = 0; kx < g->k_w; kx++) {
                        int ix = ox * g->s_w - g->pad_l + kx;
                        if (ix < 0 || ix >= g->in_w) continue;
                        float *restrict d = xb + ((int64_t)iy * g->in_w + ix) * C;
                        const float *restrict s = row + ((size_t)ky * g->k_w + kx) * C;
                        for (int c = 0; c < C; c++)
                            d[c] += s[c];
                    }
                }
            }
    }
}

/* wt (kh*kw*F, C) from w (kh, kw, C, F): the kernel turned by 180 degrees
 * with its input and output channels swapped, wt[(ky, kx, f), c] =
 * w[kh-1-ky, kw-1-kx, c, f], the kernel of dx as a convolution of dy. */
static void turn_kernel(const conv_priv *p, const float *restrict w, float *restrict wt) {
    const int C = p->C, F = p->F, kh = p->g.k_h, kw = p->g.k_w;
    for (int ky = 0; ky < kh; ky++)
        for (int kx = 0; kx < kw; kx++) {
            const float *restrict src = w + ((int64_t)(kh - 1 - ky) * kw + (kw - 1 - kx)) * C * F;
            float *restrict dst = wt + ((int64_t)ky * kw + kx) * F * C;
            for (int c = 0; c < C; c++)
                for (int f = 0; f < F; f++)
                    dst[(int64_t)f * C + c] = src[(int64_t)c * F + f];
        }
}

/* dw (kh, kw, C, F) += dWt turned back: dWt (kh*kw*F, C) is dW's sums as
 * the convolution of dy sees them, dWt[(ky, kx, f), c] = dW[kh-1-ky,
 * kw-1-kx, c, f] (turn_kernel's mapping). */
static void add_turned_back(const conv_priv *p, const float *restrict dwt, float *restrict dw) {
    const int C = p->C, F = p->F, kh = p->g.k_h, kw = p->g.k_w;
    for (int ky = 0; ky < kh; ky++)
        for (int kx = 0; kx < kw; kx++) {
            const float *restrict src = dwt + ((int64_t)(kh - 1 - ky) * kw + (kw - 1 - kx)) * F * C;
            float *restrict dst = dw + ((int64_t)ky * kw + kx) * C * F;
            for (int c = 0; c < C; c++)
                for (int f = 0; f < F; f++)
                    dst[(int64_t)c * F + f] += src[(int64_t)f * C + c];
        }
}

/* y (rows, F) = bias in every row: the GEMM then accumulates onto it
 * (beta 1), which costs less than OpenBLAS's own pass for beta 0. */
MR_AVX2_CLONES MR_NO_MEMCPY static void fill_rows(float *restrict y, const float *restrict bias,
                                                  int64_t rows, int F) {
    for (int64_t r = 0; r < rows; r++)
        for (int f = 0; f < F; f++)
            y[r * F + f] = bias[f];
}

/* dy (rows, F) becomes dL/dz through the activation (expressed through y),
 * and db (F) += its column sums when db is not NULL. ReLU and linear do
 * both in one pass over dy, four rows at a time so db is loaded and stored
 * once per four rows; the others go through the shared code first. */
MR_AVX2_CLONES static void act_backward_sum(mr_activation act, const float *restrict y,
                                            float *restrict dy, float *restrict db, int64_t rows,
                                            int F) {
    int relu = act == MR_ACTIVATION_RELU;
    if (!relu && act != MR_ACTIVATION_LINEAR) {
        mr_cpu_activation_backward(act, y, dy, dy, (int)rows, F);
        act = MR_ACTIVATION_LINEAR;
    }
    if (relu && db == NULL) {
        mr_cpu_activation_backward(act, y, dy, dy, (int)rows, F);
        return;
    }
    if (db == NULL) return; /* linear, no bias: nothing to do */
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        float *restrict d = dy + r * F;
        const float *restrict v = y + r * F;
        for (int f = 0; f < F; f++) {
            float a = d[f], b = d[F + f], c = d[2 * F + f], e = d[3 * F + f];
            if (relu) {
                a = v[f] > 0.0f ? a : 0.0f;
                b = v[F + f] > 0.0f ? b : 0.0f;
                c = v[2 * F + f] > 0.0f ? c : 0.0f;
                e = v[3 * F + f] > 0.0f ? e : 0.0f;
                d[f] = a, d[F + f] = b, d[2 * F + f] = c, d[3 * F + f] = e;
            }
            db[f] += (a + b) + (c + e);
        }
    }
    for (; r < rows; r++)
        for (int f = 0; f < F; f++) {
            float a = dy[r * F + f];
            if (relu) dy[r * F + f] = a = y[r * F + f] > 0.0f ? a : 0.0f;
            db[f] += a;
        }
}

MR_AVX2_CLONES static mr_status conv_forward(mr_layer *l, mr_exec_ctx *run, int batch,
                                             const mr_dfloat *xd, mr_dfloat *yd) {
    const float *x = mr_dfloat_cptr(xd), *w = mr_dfloat_cptr(l->w[0].data);
    float *y = mr_dfloat_ptr(yd), *scratch = mr_dfloat_ptr(run->scratch);
    conv_priv *p = priv(l);
    const int P = p->g.out_h * p->g.out_w, F = p->F, K = p->K;
    const int64_t in_per = (int64_t)p->g.in_h * p->g.in_w * p->C;
    if (p->wino) { /* y = x * W + bias by Winograd, then the activation */
        float *u = scratch + p->wino_at;
        mr_wino_filter(&p->wf, w, u);
        mr_wino_conv(&p->wf, x, batch, u, l->n_weights > 1 ? mr_dfloat_cptr(l->w[1].data) : NULL, y,
                     u + mr_wino_filter_floats(&p->wf));
        const int64_t rows = (int64_t)batch * P;
        if (p->pre != NULL && mr_activation_needs_input(mr_layer_activation(l)))
            memcpy(p->pre, y, sizeof(float) * (size_t)rows * (size_t)F);
        mr_cpu_activation_forward(mr_layer_activation(l), y, y, (int)rows, F);
        return MR_OK;
    }
    for (int b0 = 0; b0 < batch; b0 += p->chunk) {
        int n = batch - b0 < p->chunk ? batch - b0 : p->chunk;
        int rows = n * P;
        float *yc = y + (int64_t)b0 * P * F; /* (rows, F) */
        const float *col = x + b0 * in_per;  /* direct: x (rows, C) is col */
        float beta = 0.0f;
        if (l->n_weights > 1) { /* y = bias, then y += col W */
            fill_rows(yc, mr_dfloat_cptr(l->w[1].data), rows, F);
            beta = 1.0f;
        }
        if (p->split) {
            /* R (n, OH + kh - 1, OW, kw*C); y_b (P, F) = sum over ky of
             * R_b from row ky * OW (P, kw*C) times W's rows ky*kw*C.. (kw*C, F) */
            const int kwC = p->g.k_w * p->C, Rper = p->g1.out_h * p->g.out_w;
            im2col(&p->g1, p->C, x + b0 * in_per, n, scratch);
            for (int b = 0; b < n; b++)
                for (int ky = 0; ky < p->g.k_h; ky++)
                    mr_cpu_gemm(0, 0, P, F, kwC, 1.0f,
                                scratch + ((int64_t)b * Rper + (int64_t)ky * p->g.out_w) * kwC, kwC,
                                w + (int64_t)ky * kwC * F, F, ky == 0 ? beta : 1.0f,
                                yc + (int64_t)b * P * F, F);
        }
        if (!p->direct && !p->split) {
            float *dst = p->cols ? p->cols + (int64_t)b0 * P * K : scratch;
            if (p->strips)
                im2col_strips(p, x + b0 * in_per, n, dst);
            else
                im2col(&p->g, p->C, x + b0 * in_per, n, dst);
            col = dst;
        }
        if (p->strips) /* y (rows, F) += colT^T (rows, K) W (K, F) */
            mr_cpu_gemm(1, 0, rows, F, K, 1.0f, col, rows, w, F, beta, yc, F);
        else if (!p->split) /* y (rows, F) += col (rows, K) W (K, F) */
            mr_cpu_gemm(0, 0, rows, F, K, 1.0f, col, K, w, F, beta, yc, F);
        if (p->pre != NULL && mr_activation_needs_input(mr_layer_activation(l)))
            memcpy(p->pre + (int64_t)b0 * P * F, yc, sizeof(float) * (size_t)rows * (size_t)F);
        mr_cpu_activation_forward(mr_layer_activation(l), yc, yc, rows, F);
    }
    return MR_OK;
}

/* Rows [b0 * P, b0 * P + rows) of dy become dL/dz through the activation;
 * db += their column sums (gelu, swish: through the forward's z). */
static void dz_and_db(const mr_layer *l, const conv_priv *p, const float *y, float *dy, float *db,
                      int b0, int rows) {
    const int64_t at = (int64_t)b0 * p->g.out_h * p->g.out_w * p->F;
    if (p->pre != NULL && mr_activation_needs_input(mr_layer_activation(l))) {
        mr_cpu_activation_backward_x(mr_layer_activation(l), p->pre + at, dy + at, dy + at,
                                     (int64_t)rows * p->F);
        act_backward_sum(MR_ACTIVATION_LINEAR, y + at, dy + at, db, rows, p->F);
    } else {
        act_backward_sum(mr_layer_activation(l), y + at, dy + at, db, rows, p->F);
    }
}

MR_AVX2_CLONES static mr_status conv_backward(mr_layer *l, mr_exec_ctx *run, int batch,
                                              const mr_dfloat *xd, const mr_dfloat *yd,
                                              mr_dfloat *dyd, mr_dfloat *dxd) {
    const float *x = mr_dfloat_cptr(xd), *y = mr_dfloat_cptr(yd), *w = mr_dfloat_cptr(l->w[0].data);
    float *dy = mr_dfloat_ptr(dyd), *dx = mr_dfloat_ptr(dxd), *dw = mr_dfloat_ptr(l->w[0].grad);
    conv_priv *p = priv(l);
    const int P = p->g.out_h * p->g.out_w, F = p->F, K = p->K;
    const int64_t in_per = (int64_t)p->g.in_h * p->g.in_w * p->C;
    float *col_buf = mr_dfloat_ptr(run->scratch), *dcol = col_buf + (size_t)p->chunk * P * K;
    float *db = l->n_weights > 1 ? mr_dfloat_ptr(l->w[1].grad) : NULL;
    /* tconv: dcol holds dy's col matrix (chunk * H * W, kh*kw*F), then the
     * turned kernel wt (kh*kw*F, C), then dWt (kh*kw*F, C) */
    const int Kt = p->g.k_h * p->g.k_w * F;
    const int64_t in_rows = (int64_t)p->g.in_h * p->g.in_w; /* per example */
    float *wt = p->wino ? col_buf : p->tconv ? dcol + (size_t)p->chunk * in_rows * Kt : NULL;
    float *dwt = p->tconv && !p->wino ? wt + (size_t)K * F : NULL;
    if (p->tconv && dx != NULL) turn_kernel(p, w, wt);
    if (p->wino) {
        /* dy through the activation, then dx as the convolution of it with
         * the turned kernel and dW, both by Winograd (scratch from wino_at:
         * the kernel's transform, dW's, the work area) */
        dz_and_db(l, p, y, dy, db, 0, batch * P);
        const size_t uf = mr_wino_filter_floats(&p->wf);
        float *u = mr_dfloat_ptr(run->scratch) + p->wino_at, *du = u + uf, *work = du + uf;
        if (dx != NULL) {
            mr_wino_filter(&p->wt, wt, u);
            mr_wino_conv(&p->wt, dy, batch, u, NULL, dx, work);
        }
        if (batch > 0) {
            mr_wino_filter_grad(&p->wf, x, dy, batch, du, work);
            mr_wino_filter_grad_add(&p->wf, du, dw);
        }
        return MR_OK;
    }
    for (int b0 = 0; b0 < batch; b0 += p->chunk) {
        int n = batch - b0 < p->chunk ? batch - b0 : p->chunk;
        int rows = n * P;
        float *dyc = dy + (int64_t)b0 * P * F; /* (rows, F) */
        dz_and_db(l, p, y, dy, db, b0, rows);
        if (p->tdw && p->split) {
            /* dyR (n, H + kh - 1, W, kw*F), the row matrix of gt1; per
             * example b and kernel row ky, dyR_b from row ky * W (H*W, kw*F)
             * is dycol's ky-th kw*F columns: dWt's rows ky*kw*F.. (kw*F, C)
             * (+)= its transpose times x_b (H*W, C), dx_b (H*W, C) (+)= it
             * times wt's rows ky*kw*F.. (kw*F, C) */
            const int kwF = p->g.k_w * F, W = p->g.in_w;
            const int64_t Rper = (int64_t)p->gt1.out_h * W;
            im2col(&p->gt1, F, dyc, n, dcol);
            for (int b = 0; b < n; b++)
                for (int ky = 0; ky < p->g.k_h; ky++) {
                    const float *r = dcol + (b * Rper + (int64_t)ky * W) * kwF;
                    mr_cpu_gemm(1, 0, kwF, p->C, (int)in_rows, 1.0f, r, kwF, x + (b0 + b) * in_per,
                                p->C, b0 + b == 0 ? 0.0f : 1.0f, dwt + (int64_t)ky * kwF * p->C,
                                p->C);
                    if (dx != NULL)
                        mr_cpu_gemm(0, 0, (int)in_rows, p->C, kwF, 1.0f, r, kwF,
                                    wt + (int64_t)ky * kwF * p->C, p->C, ky == 0 ? 0.0f : 1.0f,
                                    dx + (b0 + b) * in_per, p->C);
                }
            continue;
        }
        if (p->tdw) {
            /* dycol (n * H * W, Kt); dWt (Kt, C) (+)= dycol^T x (n * H * W, C),
             * the first chunk writing it */
            im2col(&p->gt, F, dyc, n, dcol);
            mr_cpu_gemm(1, 0, Kt, p->C, (int)(n * in_rows), 1.0f, dcol, Kt, x + b0 * in_per, p->C,
                        b0 == 0 ? 0.0f : 1.0f, dwt, p->C);
            if (dx == NULL) continue;
            /* dx (n * H * W, C) = dycol (n * H * W, Kt) wt (Kt, C) */
            mr_cpu_gemm(0, 0, (int)(n * in_rows), p->C, Kt, 1.0f, dcol, Kt, wt, p->C, 0.0f,
                        dx + b0 * in_per, p->C);
            continue;
        }
        const float *col = x + b0 * in_per;
        if (p->cols != NULL) { /* built by the forward pass on this x */
            col = p->cols + (int64_t)b0 * P * K;
        } else if (!p->direct) {
            if (p->strips)
                im2col_strips(p, x + b0 * in_per, n, col_buf);
            else
                im2col(&p->g, p->C, x + b0 * in_per, n, col_buf);
            col = col_buf;
        }
        if (p->strips) /* dW (K, F) += colT (K, rows) dy (rows, F) */
            mr_cpu_gemm(0, 0, K, F, rows, 1.0f, col, rows, dyc, F, 1.0f, dw, F);
        else /* dW (K, F) += col^T (K, rows) dy (rows, F) */
            mr_cpu_gemm(1, 0, K, F, rows, 1.0f, col, K, dyc, F, 1.0f, dw, F);
        if (dx == NULL) continue;
        float *dxc = dx + b0 * in_per;
        if (p->direct) { /* dx (rows, C) = dy (rows, F) W^T (F, C) */
            mr_cpu_gemm(0, 1, rows, K, F, 1.0f, dyc, F, w, F, 0.0f, dxc, K);
            continue;
        }
        if (p->tconv) { /* dx (n * H * W, C) = dycol (n * H * W, Kt) wt (Kt, C) */
            im2col(&p->gt, F, dyc, n, dcol);
            mr_cpu_gemm(0, 0, n * p->g.in_h * p->g.in_w, p->C, Kt, 1.0f, dcol, Kt, wt, p->C, 0.0f,
                        dxc, p->C);
            continue;
        }
        /* dcol (rows, K) = dy (rows, F) W^T (F, K), then scatter back */
        mr_cpu_gemm(0, 1, rows, K, F, 1.0f, dyc, F, w, F, 0.0f, dcol, K);
        col2im(p, dcol, n, dxc);
    }
    if (p->tdw && batch > 0) add_turned_back(p, dwt, dw);
    return MR_OK;
}

static void conv_cpu_destroy(mr_layer *l, mr_backend *be) {
    if (l->priv) mr_backend_free(be, priv(l)->cols);
    if (l->priv) mr_backend_free(be, priv(l)->pre);
    free(l->priv);
    l->priv = NULL;
}

const mr_layer_kernels mr_conv2d_cpu = {
    .setup = conv_cpu_setup,
    .forward = conv_forward,
    .backward = conv_backward,
    .destroy = conv_cpu_destroy,
};
