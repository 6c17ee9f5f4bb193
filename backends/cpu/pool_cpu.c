/* pool_cpu.c: MaxPooling2D and AveragePooling2D on the CPU, NHWC (pool.c
 * says what the layers are).
 *   x: (B, H, W, C) -> y: (B, OH, OW, C)
 * Max backward routes dy to the first cell of the window that equals the
 * output (x == y), found again from x and y rather than stored: the forward
 * pass stays a pure max that vectorises, and no index array has to stream
 * through memory. 2x2 windows (the usual MaxPooling2D) take a one-pass path
 * both ways.
 * Relies on: layer.h (the layer contract), conv_geometry.h (the window and
 * the cells it reads, mr_window_clip, shared with pool_cuda.cu). */
#include <stdlib.h>
#include <string.h>

#include "runtime/target_clones.h"
#include "models/conv_geometry.h"
#include "backends/cpu/cpu_impl.h"

/* gcc would turn the per-window copy of C floats into a memcpy call, which
 * costs more than the copy itself; keep it a (vectorised) loop. */
#define MR_NO_MEMCPY __attribute__((optimize("no-tree-loop-distribute-patterns")))

typedef struct pool_priv {
    mr_window g;
    int C;
    float *done; /* (C) max backward: channels already routed in this window (context memory) */
    int tiles;   /* the windows partition the input: backward writes dx once, no zeroing */
} pool_priv;

static mr_status pool_cpu_setup(mr_layer *l, mr_backend *be, int max_batch, mr_error *err) {
    (void)max_batch;
    const mr_layer_cfg *c = l->cfg;
    mr_window g = mr_window_make(l->in.d[0], l->in.d[1], c);
    pool_priv *p = calloc(1, sizeof *p);
    if (p == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    l->priv = p;
    p->g = g;
    p->C = l->in.d[2];
    mr_dfloat *done = mr_backend_alloc_floats(be, (size_t)p->C);
    if (done == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    p->done = mr_dfloat_ptr(done);
    p->tiles = g.s_h == g.k_h && g.s_w == g.k_w &&
               (c->padding == MR_PADDING_SAME || (g.in_h % g.k_h == 0 && g.in_w % g.k_w == 0));
    return MR_OK;
}

static inline void max_into(float *restrict o, const float *restrict v, int C) {
    for (int c = 0; c < C; c++)
        o[c] = v[c] > o[c] ? v[c] : o[c];
}

static inline void add_into(float *restrict o, const float *restrict v, int C) {
    for (int c = 0; c < C; c++)
        o[c] += v[c];
}

/* o (C) = max of the four cells of a 2x2 window (rows r0 and r1 of the
 * input, adjacent pixels C floats apart): the common case, in one pass. */
static inline void max2x2(float *restrict o, const float *restrict r0, const float *restrict r1,
                          int C) {
    for (int c = 0; c < C; c++) {
        /* strict >: on ties the earlier cell is kept, as in max_into */
        float a = r0[C + c] > r0[c] ? r0[C + c] : r0[c];
        float b = r1[C + c] > r1[c] ? r1[C + c] : r1[c];
        o[c] = b > a ? b : a;
    }
}

MR_AVX2_CLONES MR_NO_MEMCPY static mr_status pool_forward(mr_layer *l, mr_exec_ctx *run, int batch,
                                                          const mr_dfloat *xd, mr_dfloat *yd) {
    (void)run;
    const float *x = mr_dfloat_cptr(xd);
    float *y = mr_dfloat_ptr(yd);
    pool_priv *p = l->priv;
    const mr_window *g = &p->g;
    const int C = p->C, is_max = l->cfg->kind == MR_LAYER_MAXPOOL;
    const int64_t in_per = (int64_t)g->in_h * g->in_w * C,
                  out_per = (int64_t)g->out_h * g->out_w * C, row = (int64_t)g->in_w * C;
    for (int b = 0; b < batch; b++) {
        const float *xb = x + b * in_per;
        float *yb = y + b * out_per;
        for (int oy = 0; oy < g->out_h; oy++)
            for (int ox = 0; ox < g->out_w; ox++) {
                const mr_rect w = mr_window_clip(g, oy, ox);
                const int y0 = w.y0, y1 = w.y1, x0 = w.x0, x1 = w.x1;
                float *restrict o = yb + ((int64_t)oy * g->out_w + ox) * C;
                const float *restrict first = xb + ((int64_t)y0 * g->in_w + x0) * C;
                if (is_max && y1 - y0 == 2 && x1 - x0 == 2) {
                    max2x2(o, first, first + row, C);
                    continue;
                }
                /* start from the first cell of the window */
                for (int c = 0; c < C; c++)
                    o[c] = first[c];
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = (iy == y0 ? x0 + 1 : x0); ix < x1; ix++) {
                        const float *v = xb + ((int64_t)iy * g->in_w + ix) * C;
                        if (is_max)
                            max_into(o, v, C);
                        else
                            add_into(o, v, C);
                    }
                if (!is_max) {
                    const float inv = mr_rect_inv_area(w);
                    for (int c = 0; c < C; c++)
                        o[c] *= inv;
                }
            }
    }
    return MR_OK;
}

/* dx of a 2x2 window that is its own (the windows tile the input): dy goes
 * to the first of the four cells equal to the max, 0 to the others. Written
 * as compare-and-select on floats, which vectorises with the baseline SSE2
 * of a portable build (integer mask logic did not, and its branches cost
 * 3x in backward): `left` is what is still to route, dy until a cell takes
 * it, then dy - dy = +0, so every cell gets exactly dy or +0 (for finite dy). */
static inline void route2x2(float *restrict d0, float *restrict d1, const float *restrict r0,
                            const float *restrict r1, const float *restrict o,
                            const float *restrict d, int C) {
    for (int c = 0; c < C; c++) {
        const float m = o[c];
        float left = d[c];
        const float a0 = r0[c] == m ? left : 0.0f;
        left -= a0;
        const float a1 = r0[C + c] == m ? left : 0.0f;
        left -= a1;
        const float a2 = r1[c] == m ? left : 0.0f;
        left -= a2;
        d0[c] = a0;
        d0[C + c] = a1;
        d1[c] = a2;
        d1[C + c] = r1[C + c] == m ? left : 0.0f;
    }
}

/* dx (+)= dy where x == y and this channel is not yet routed (first max
 * wins); `assign` when the windows tile the input (each dx cell once). */
static inline void route_max(float *restrict dx, const float *restrict v, const float *restrict o,
                             const float *restrict d, float *restrict done, int C, int assign) {
    if (assign)
        for (int c = 0; c < C; c++) {
            float hit = (v[c] == o[c] && done[c] == 0.0f) ? 1.0f : 0.0f;
            dx[c] = hit * d[c];
            done[c] += hit;
        }
    else
        for (int c = 0; c < C; c++) {
            float hit = (v[c] == o[c] && done[c] == 0.0f) ? 1.0f : 0.0f;
            dx[c] += hit * d[c];
            done[c] += hit;
        }
}

MR_AVX2_CLONES static mr_status pool_backward(mr_layer *l, mr_exec_ctx *run, int batch,
                                              const mr_dfloat *xd, const mr_dfloat *yd,
                                              mr_dfloat *dyd, mr_dfloat *dxd) {
    (void)run;
    if (dxd == NULL) return MR_OK;
    const float *x = mr_dfloat_cptr(xd), *y = mr_dfloat_cptr(yd), *dy = mr_dfloat_cptr(dyd);
    float *dx = mr_dfloat_ptr(dxd);
    pool_priv *p = l->priv;
    const mr_window *g = &p->g;
    const int C = p->C, is_max = l->cfg->kind == MR_LAYER_MAXPOOL;
    const int64_t in_per = (int64_t)g->in_h * g->in_w * C,
                  out_per = (int64_t)g->out_h * g->out_w * C, row = (int64_t)g->in_w * C;
    if (!p->tiles) memset(dx, 0, sizeof(float) * (size_t)(batch * in_per));
    for (int b = 0; b < batch; b++) {
        const float *xb = x + b * in_per;
        float *dxb = dx + b * in_per;
        const float *yb = y + b * out_per, *dyb = dy + b * out_per;
        for (int oy = 0; oy < g->out_h; oy++)
            for (int ox = 0; ox < g->out_w; ox++) {
                const mr_rect w = mr_window_clip(g, oy, ox);
                const int y0 = w.y0, y1 = w.y1, x0 = w.x0, x1 = w.x1;
                int64_t o = ((int64_t)oy * g->out_w + ox) * C;
                if (is_max && p->tiles && y1 - y0 == 2 && x1 - x0 == 2) {
                    int64_t i = ((int64_t)y0 * g->in_w + x0) * C;
                    route2x2(dxb + i, dxb + i + row, xb + i, xb + i + row, yb + o, dyb + o, C);
                    continue;
                }
                if (is_max) {
                    memset(p->done, 0, sizeof(float) * (size_t)C);
                    for (int iy = y0; iy < y1; iy++)
                        for (int ix = x0; ix < x1; ix++) {
                            int64_t i = ((int64_t)iy * g->in_w + ix) * C;
                            route_max(dxb + i, xb + i, yb + o, dyb + o, p->done, C, p->tiles);
                        }
                    continue;
                }
                const float inv = mr_rect_inv_area(w);
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++) {
                        float *t = dxb + ((int64_t)iy * g->in_w + ix) * C;
                        if (p->tiles)
                            for (int c = 0; c < C; c++)
                                t[c] = dyb[o + c] * inv;
                        else
                            for (int c = 0; c < C; c++)
                                t[c] += dyb[o + c] * inv;
                    }
            }
    }
    return MR_OK;
}

static void pool_cpu_destroy(mr_layer *l, mr_backend *be) {
    pool_priv *p = l->priv;
    if (p) mr_backend_free(be, p->done);
    free(p);
    l->priv = NULL;
}

const mr_layer_kernels mr_pool_cpu = {
    .setup = pool_cpu_setup,
    .forward = pool_forward,
    .backward = pool_backward,
    .destroy = pool_cpu_destroy,
};
