/* pool.c: MaxPooling2D and AveragePooling2D, NHWC.
 *   x: (B, H, W, C) -> y: (B, OH, OW, C)
 * Same padding as Keras: the max ignores padded cells; the average divides
 * by the number of real cells in the window. Max records where each maximum
 * came from (first on ties) so backward routes dy there. */
#include <stdlib.h>
#include <string.h>

#include "conv_geometry.h"
#include "layer.h"

typedef struct pool_priv {
    mr_window g;
    int C;
    int32_t *argmax; /* (max_batch, OH, OW, C): offset of the max within the example */
} pool_priv;

static mr_status pool_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    const mr_layer_cfg *c = l->cfg;
    const char *sec = mr_layer_kind_name(c->kind);
    if (l->in.rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [%s] needs an image input (H,W,C), got (%d)", file, c->line,
                            sec, l->in.d[0]);
    mr_window g = mr_window_make(l->in.d[0], l->in.d[1], c);
    if (c->padding == MR_PADDING_VALID && (c->size[0] > g.in_h || c->size[1] > g.in_w))
        return mr_error_set(
            err, MR_ERR_CONFIG,
            "%s:%d: [%s] pool %dx%d is larger than its %dx%d input with valid padding", file,
            c->line, sec, c->size[0], c->size[1], g.in_h, g.in_w);
    if (g.out_h < 1 || g.out_w < 1 || c->stride[0] < 1 || c->stride[1] < 1)
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [%s] would output an empty shape", file,
                            c->line, sec);
    pool_priv *p = calloc(1, sizeof *p);
    if (p == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    p->g = g;
    p->C = l->in.d[2];
    l->priv = p;
    l->out = (mr_shape){3, {g.out_h, g.out_w, p->C}};
    if (c->kind == MR_LAYER_MAXPOOL) {
        p->argmax = malloc(sizeof(int32_t) * (size_t)max_batch * g.out_h * g.out_w * p->C);
        if (p->argmax == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    return MR_OK;
}

/* o, a (C) = max of o and v and where it came from (strict >: the first
 * maximum wins ties). Branch-free with restrict so it vectorises. */
static inline void max_cell(float *restrict o, int32_t *restrict a, const float *restrict v,
                            int32_t off, int C) {
    for (int c = 0; c < C; c++) {
        int gt = v[c] > o[c];
        o[c] = gt ? v[c] : o[c];
        a[c] = gt ? off + c : a[c];
    }
}

/* The window of output (oy, ox) clipped to the input: rows [y0, y1), cols [x0, x1). */
static void window(const mr_window *g, int oy, int ox, int *y0, int *y1, int *x0, int *x1) {
    *y0 = oy * g->s_h - g->pad_t;
    *x0 = ox * g->s_w - g->pad_l;
    *y1 = *y0 + g->k_h;
    *x1 = *x0 + g->k_w;
    if (*y0 < 0) *y0 = 0;
    if (*x0 < 0) *x0 = 0;
    if (*y1 > g->in_h) *y1 = g->in_h;
    if (*x1 > g->in_w) *x1 = g->in_w;
}

static void pool_forward(mr_layer *l, mr_run *run, int batch, const float *x, float *y) {
    (void)run;
    pool_priv *p = l->priv;
    const mr_window *g = &p->g;
    const int C = p->C, is_max = l->cfg->kind == MR_LAYER_MAXPOOL;
    const int64_t in_per = (int64_t)g->in_h * g->in_w * C,
                  out_per = (int64_t)g->out_h * g->out_w * C;
    for (int b = 0; b < batch; b++) {
        const float *xb = x + b * in_per;
        float *yb = y + b * out_per;
        int32_t *ab = is_max ? p->argmax + b * out_per : NULL;
        for (int oy = 0; oy < g->out_h; oy++)
            for (int ox = 0; ox < g->out_w; ox++) {
                int y0, y1, x0, x1;
                window(g, oy, ox, &y0, &y1, &x0, &x1);
                float *o = yb + ((int64_t)oy * g->out_w + ox) * C;
                if (is_max) {
                    /* start from the window's first cell, then branch-free
                     * compare-and-select so the channel loop vectorises;
                     * strict > keeps the first maximum on ties */
                    int32_t *a = ab + ((int64_t)oy * g->out_w + ox) * C;
                    int32_t off0 = (int32_t)(((int64_t)y0 * g->in_w + x0) * C);
                    for (int c = 0; c < C; c++) {
                        o[c] = xb[off0 + c];
                        a[c] = off0 + c;
                    }
                    for (int iy = y0; iy < y1; iy++)
                        for (int ix = x0; ix < x1; ix++) {
                            int32_t off = (int32_t)(((int64_t)iy * g->in_w + ix) * C);
                            max_cell(o, a, xb + off, off, C);
                        }
                } else {
                    for (int c = 0; c < C; c++)
                        o[c] = 0.0f;
                    for (int iy = y0; iy < y1; iy++)
                        for (int ix = x0; ix < x1; ix++) {
                            const float *v = xb + ((int64_t)iy * g->in_w + ix) * C;
                            for (int c = 0; c < C; c++)
                                o[c] += v[c];
                        }
                    float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
                    for (int c = 0; c < C; c++)
                        o[c] *= inv;
                }
            }
    }
}

static void pool_backward(mr_layer *l, mr_run *run, int batch, const float *x, const float *y,
                          float *dy, float *dx) {
    (void)run, (void)x, (void)y;
    if (dx == NULL) return;
    pool_priv *p = l->priv;
    const mr_window *g = &p->g;
    const int C = p->C, is_max = l->cfg->kind == MR_LAYER_MAXPOOL;
    const int64_t in_per = (int64_t)g->in_h * g->in_w * C,
                  out_per = (int64_t)g->out_h * g->out_w * C;
    memset(dx, 0, sizeof(float) * (size_t)(batch * in_per));
    for (int b = 0; b < batch; b++) {
        float *dxb = dx + b * in_per;
        const float *dyb = dy + b * out_per;
        if (is_max) {
            const int32_t *ab = p->argmax + b * out_per;
            for (int64_t i = 0; i < out_per; i++)
                dxb[ab[i]] += dyb[i];
            continue;
        }
        for (int oy = 0; oy < g->out_h; oy++)
            for (int ox = 0; ox < g->out_w; ox++) {
                int y0, y1, x0, x1;
                window(g, oy, ox, &y0, &y1, &x0, &x1);
                const float *d = dyb + ((int64_t)oy * g->out_w + ox) * C;
                float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++) {
                        float *t = dxb + ((int64_t)iy * g->in_w + ix) * C;
                        for (int c = 0; c < C; c++)
                            t[c] += d[c] * inv;
                    }
            }
    }
}

static void pool_destroy(mr_layer *l) {
    pool_priv *p = l->priv;
    if (p) free(p->argmax);
    free(p);
    l->priv = NULL;
}

const mr_layer_ops mr_maxpool_ops = {
    .class_name = "MaxPooling2D",
    .setup = pool_setup,
    .forward = pool_forward,
    .backward = pool_backward,
    .destroy = pool_destroy,
};

const mr_layer_ops mr_avgpool_ops = {
    .class_name = "AveragePooling2D",
    .setup = pool_setup,
    .forward = pool_forward,
    .backward = pool_backward,
    .destroy = pool_destroy,
};
