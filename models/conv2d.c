/* conv2d.c: Conv2D on SGEMM through im2col, NHWC.
 *   x: (B, H, W, C)   kernel: (kh, kw, C, F)   bias: (F)   y: (B, OH, OW, F)
 * An im2col row of one output pixel lists its window as (ky, kx, c), which
 * is exactly the kernel's (kh, kw, C, F) layout read as a (kh*kw*C, F)
 * matrix: forward is one GEMM col (rows, K) x W (K, F) with no transposes,
 * dW += col^T dy and dcol = dy W^T; dx is col2im(dcol). Examples go through
 * in chunks so the GEMMs are large while the col buffer stays bounded. */
#include <stdlib.h>
#include <string.h>

#include "conv_geometry.h"
#include "layer.h"

/* Working set per chunk (col + output, in floats): about 512 KiB, an L2
 * cache, so bias, activation and the next chunk's GEMM find their data in
 * cache instead of streaming the whole batch's output through memory
 * several times. At least one example per chunk. */
#define CHUNK_BUDGET (128 << 10)
/* Largest col matrix kept from forward to backward, in floats (8 MiB). */
#define COLS_CACHE_MAX (2 << 20)

typedef struct conv_priv {
    mr_window g;
    int C, F, K; /* input channels, filters, K = kh*kw*C */
    int chunk;   /* examples per GEMM */
    int direct;  /* 1x1, stride 1, valid: x is its own col matrix */
    float *cols; /* (max_batch * OH * OW, K): the forward im2col kept for backward, or NULL */
} conv_priv;

static conv_priv *priv(mr_layer *l) {
    return (conv_priv *)l->priv;
}

static mr_status conv_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    const mr_layer_cfg *c = l->cfg;
    if (l->in.rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [conv2d] needs an image input (H,W,C), got (%d)", file, c->line,
                            l->in.d[0]);
    mr_window g = mr_window_make(l->in.d[0], l->in.d[1], c);
    if (c->padding == MR_PADDING_VALID && (c->size[0] > g.in_h || c->size[1] > g.in_w))
        return mr_error_set(
            err, MR_ERR_CONFIG,
            "%s:%d: [conv2d] kernel %dx%d is larger than its %dx%d input with valid "
            "padding",
            file, c->line, c->size[0], c->size[1], g.in_h, g.in_w);
    if (g.out_h < 1 || g.out_w < 1)
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [conv2d] would output an empty shape", file,
                            c->line);
    conv_priv *p = calloc(1, sizeof *p);
    if (p == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    l->priv = p;
    p->g = g;
    p->C = l->in.d[2];
    p->F = c->filters;
    p->K = g.k_h * g.k_w * p->C;
    p->direct =
        g.k_h == 1 && g.k_w == 1 && g.s_h == 1 && g.s_w == 1 && c->padding == MR_PADDING_VALID;
    int64_t per_example = (int64_t)g.out_h * g.out_w * p->K;
    int64_t per_chunk = per_example + (int64_t)g.out_h * g.out_w * p->F;
    int64_t chunk = CHUNK_BUDGET / per_chunk;
    p->chunk = (int)(chunk < 1 ? 1 : (chunk > max_batch ? max_batch : chunk));
    /* scratch: col (chunk rows x K) and dcol of the same size */
    l->scratch_floats = p->direct ? 0 : (size_t)(2 * (int64_t)p->chunk * per_example);
    /* Keep the forward's col matrix for backward when it is small (the first
     * layers: a 3x3x1 window makes 9 floats per pixel), instead of building it
     * again; large ones (5x5x32 = 800 per pixel) are rebuilt chunk by chunk. */
    if (!p->direct && (int64_t)max_batch * per_example <= COLS_CACHE_MAX) {
        p->cols = malloc(sizeof(float) * (size_t)max_batch * (size_t)per_example);
        if (p->cols == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    l->out = (mr_shape){3, {g.out_h, g.out_w, p->F}};
    mr_layer_declare_weight(l, "kernel", 1, 4, g.k_h, g.k_w, p->C, p->F);
    if (c->use_bias) mr_layer_declare_weight(l, "bias", 1, 1, p->F, 0, 0, 0);
    return MR_OK;
}

static void conv_init(mr_layer *l, uint64_t seed) {
    conv_priv *p = priv(l);
    int area = p->g.k_h * p->g.k_w;
    mr_layer_glorot_uniform(l, 0, seed, area * p->C, area * p->F);
    if (l->n_weights > 1) memset(l->w[1].data, 0, sizeof(float) * (size_t)p->F);
}

/* col (n * OH * OW, K) from x (n, H, W, C).
 * For few channels (the first layer has C = 1) a memcpy call per 3 floats
 * costs more than the copy, so short rows are copied inline, and gcc is told
 * not to turn that loop back into the call. */
/* im2col for one channel (the first layer of an image model): loop over the
 * window cells outside and the output columns inside, one float per store,
 * instead of a 3-float copy per pixel whose loop overhead dominates. */
static void im2col_c1(const conv_priv *p, const float *x, int n, float *col) {
    const mr_window *g = &p->g;
    const int K = p->K, OW = g->out_w;
    for (int b = 0; b < n; b++) {
        const float *xb = x + (int64_t)b * g->in_h * g->in_w;
        for (int oy = 0; oy < g->out_h; oy++) {
            float *rows = col + ((int64_t)b * g->out_h + oy) * OW * K; /* (OW, K) */
            for (int ky = 0; ky < g->k_h; ky++) {
                int iy = oy * g->s_h - g->pad_t + ky;
                const float *src = (iy >= 0 && iy < g->in_h) ? xb + (int64_t)iy * g->in_w : NULL;
                for (int kx = 0; kx < g->k_w; kx++) {
                    float *dst = rows + ky * g->k_w + kx;
                    for (int ox = 0; ox < OW; ox++) {
                        int ix = ox * g->s_w - g->pad_l + kx;
                        dst[(int64_t)ox * K] = (src && ix >= 0 && ix < g->in_w) ? src[ix] : 0.0f;
                    }
                }
            }
        }
    }
}

__attribute__((optimize("no-tree-loop-distribute-patterns"))) static void
im2col(const conv_priv *p, const float *x, int n, float *col) {
    if (p->C == 1) {
        im2col_c1(p, x, n, col);
        return;
    }
    const mr_window *g = &p->g;
    const int C = p->C, K = p->K;
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
static void col2im(const conv_priv *p, const float *dcol, int n, float *dx) {
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
                        float *d = xb + ((int64_t)iy * g->in_w + ix) * C;
                        const float *s = row + ((size_t)ky * g->k_w + kx) * C;
                        for (int c = 0; c < C; c++)
                            d[c] += s[c];
                    }
                }
            }
    }
}

static mr_activation conv_act(const mr_layer *l) {
    return l->logits_out ? MR_ACTIVATION_LINEAR : l->cfg->activation;
}

static void conv_forward(mr_layer *l, mr_run *run, int batch, const float *x, float *y) {
    conv_priv *p = priv(l);
    const int P = p->g.out_h * p->g.out_w, F = p->F, K = p->K;
    const int64_t in_per = (int64_t)p->g.in_h * p->g.in_w * p->C;
    for (int b0 = 0; b0 < batch; b0 += p->chunk) {
        int n = batch - b0 < p->chunk ? batch - b0 : p->chunk;
        int rows = n * P;
        float *yc = y + (int64_t)b0 * P * F;
        const float *col = x + b0 * in_per;
        if (!p->direct) {
            float *dst = p->cols ? p->cols + (int64_t)b0 * P * K : run->scratch;
            im2col(p, x + b0 * in_per, n, dst);
            col = dst;
        }
        float beta = 0.0f;
        if (l->n_weights > 1) { /* y = bias, then y += col W */
            const float *bias = l->w[1].data;
            for (int r = 0; r < rows; r++)
                memcpy(yc + (int64_t)r * F, bias, sizeof(float) * (size_t)F);
            beta = 1.0f;
        }
        mr_gemm(run->be, 0, 0, rows, F, K, 1.0f, col, K, l->w[0].data, F, beta, yc, F);
        mr_activation_forward(conv_act(l), yc, rows, F);
    }
}

static void conv_backward(mr_layer *l, mr_run *run, int batch, const float *x, const float *y,
                          float *dy, float *dx) {
    conv_priv *p = priv(l);
    const int P = p->g.out_h * p->g.out_w, F = p->F, K = p->K;
    const int64_t in_per = (int64_t)p->g.in_h * p->g.in_w * p->C;
    float *col_buf = run->scratch, *dcol = run->scratch + (size_t)p->chunk * P * K;
    for (int b0 = 0; b0 < batch; b0 += p->chunk) {
        int n = batch - b0 < p->chunk ? batch - b0 : p->chunk;
        int rows = n * P;
        float *dyc = dy + (int64_t)b0 * P * F;
        /* dy (rows, F) becomes dL/dz through the activation, chunk by chunk */
        mr_activation_backward(conv_act(l), y + (int64_t)b0 * P * F, dyc, rows, F);
        if (l->n_weights > 1) {
            float *db = l->w[1].grad;
            for (int64_t r = 0; r < rows; r++)
                for (int f = 0; f < F; f++)
                    db[f] += dyc[r * F + f];
        }
        const float *col = x + b0 * in_per;
        if (p->cols != NULL) { /* built by the forward pass on this x */
            col = p->cols + (int64_t)b0 * P * K;
        } else if (!p->direct) {
            im2col(p, x + b0 * in_per, n, col_buf);
            col = col_buf;
        }
        /* dW (K, F) += col^T (K, rows) dy (rows, F) */
        mr_gemm(run->be, 1, 0, K, F, rows, 1.0f, col, K, dyc, F, 1.0f, l->w[0].grad, F);
        if (dx == NULL) continue;
        float *dxc = dx + b0 * in_per;
        if (p->direct) { /* dx = dy W^T directly */
            mr_gemm(run->be, 0, 1, rows, K, F, 1.0f, dyc, F, l->w[0].data, F, 0.0f, dxc, K);
            continue;
        }
        /* dcol (rows, K) = dy (rows, F) W^T (F, K), then scatter back */
        mr_gemm(run->be, 0, 1, rows, K, F, 1.0f, dyc, F, l->w[0].data, F, 0.0f, dcol, K);
        col2im(p, dcol, n, dxc);
    }
}

static void conv_destroy(mr_layer *l) {
    if (l->priv) free(priv(l)->cols);
    free(l->priv);
    l->priv = NULL;
}

const mr_layer_ops mr_conv2d_ops = {
    .class_name = "Conv2D",
    .setup = conv_setup,
    .init = conv_init,
    .forward = conv_forward,
    .backward = conv_backward,
    .destroy = conv_destroy,
};
