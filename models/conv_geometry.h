/* conv_geometry.h: output size and padding of a 2-D window (convolution or
 * pooling) as Keras/TensorFlow define them, and which input cells a pooling
 * window reads. Shared by conv2d.c and pool.c, and by the CPU and CUDA
 * kernels of both: the MR_HD functions (runtime/hd.h) run in the CPU loops
 * and in the CUDA kernels alike, so the two visit the same cells. */
#ifndef MR_CONV_GEOMETRY_H
#define MR_CONV_GEOMETRY_H

#include "runtime/hd.h"
#include "models/config.h"

typedef struct mr_window {
    int in_h, in_w;   /* input spatial size */
    int k_h, k_w;     /* window */
    int s_h, s_w;     /* stride */
    int out_h, out_w; /* output spatial size */
    int pad_t, pad_l; /* padding before the first row / column (same padding) */
} mr_window;

/* Keras's total padding of one axis: how far `out` windows of k cells at
 * stride s reach past `in` cells, 0 when they stay inside (always so with
 * valid padding). The smaller half goes before the first cell
 * (mr_window.pad_t, pad_l), the rest after the last (mr_window_pad_after). */
static inline int mr_pad_total(int in, int k, int s, int out) {
    const int p = (out - 1) * s + k - in;
    return p > 0 ? p : 0;
}

/* valid: out = (in - k) / s + 1 (0 when k > in); same: out = ceil(in / s),
 * padding total mr_pad_total, the smaller half first. */
static inline mr_window mr_window_make(int in_h, int in_w, const mr_layer_cfg *c) {
    mr_window w = {in_h, in_w, c->size[0], c->size[1], c->stride[0], c->stride[1], 0, 0, 0, 0};
    if (c->padding == MR_PADDING_SAME) {
        w.out_h = (in_h + w.s_h - 1) / w.s_h;
        w.out_w = (in_w + w.s_w - 1) / w.s_w;
        w.pad_t = mr_pad_total(in_h, w.k_h, w.s_h, w.out_h) / 2;
        w.pad_l = mr_pad_total(in_w, w.k_w, w.s_w, w.out_w) / 2;
    } else {
        w.out_h = in_h >= w.k_h ? (in_h - w.k_h) / w.s_h + 1 : 0;
        w.out_w = in_w >= w.k_w ? (in_w - w.k_w) / w.s_w + 1 : 0;
    }
    return w;
}

/* Keras's padding after the last row (*pad_b) and column (*pad_r): what of
 * the total is not before. Larger than pad_t / pad_l by one where the total
 * is odd (cuDNN pads symmetrically, conv2d_cuda.cu). */
static inline void mr_window_pad_after(const mr_window *g, int *pad_b, int *pad_r) {
    *pad_b = mr_pad_total(g->in_h, g->k_h, g->s_h, g->out_h) - g->pad_t;
    *pad_r = mr_pad_total(g->in_w, g->k_w, g->s_w, g->out_w) - g->pad_l;
}

/* Rows [y0, y1) and columns [x0, x1) of a 2-D grid. */
typedef struct mr_rect {
    int y0, y1, x0, x1;
} mr_rect;

/* The input cells of output (oy, ox)'s window: the window clipped to the
 * input. Pooling visits only these, in row-major order: Keras's padding
 * cells are neither maxima nor counted in an average. */
MR_HD static inline mr_rect mr_window_clip(const mr_window *g, int oy, int ox) {
    mr_rect r;
    r.y0 = oy * g->s_h - g->pad_t;
    r.x0 = ox * g->s_w - g->pad_l;
    r.y1 = r.y0 + g->k_h;
    r.x1 = r.x0 + g->k_w;
    if (r.y0 < 0) r.y0 = 0;
    if (r.x0 < 0) r.x0 = 0;
    if (r.y1 > g->in_h) r.y1 = g->in_h;
    if (r.x1 > g->in_w) r.x1 = g->in_w;
    return r;
}

/* An average pool's factor for a clipped window r: 1 / its cells. The
 * mean is the sum times this, and dy times this goes to each cell. */
MR_HD static inline float mr_rect_inv_area(mr_rect r) {
    return 1.0f / (float)((r.y1 - r.y0) * (r.x1 - r.x0));
}

/* The outputs whose window holds input cell (iy, ix): output rows
 * [y0, y1) and columns [x0, x1) (empty where none does), those whose
 * unclipped window [o * s - pad, o * s - pad + k) contains the cell. */
MR_HD static inline mr_rect mr_window_covering(const mr_window *g, int iy, int ix) {
    const int ny = iy + g->pad_t - g->k_h + 1, nx = ix + g->pad_l - g->k_w + 1;
    mr_rect r;
    r.y0 = ny <= 0 ? 0 : (ny + g->s_h - 1) / g->s_h;
    r.x0 = nx <= 0 ? 0 : (nx + g->s_w - 1) / g->s_w;
    r.y1 = (iy + g->pad_t) / g->s_h + 1;
    r.x1 = (ix + g->pad_l) / g->s_w + 1;
    if (r.y1 > g->out_h) r.y1 = g->out_h;
    if (r.x1 > g->out_w) r.x1 = g->out_w;
    return r;
}

#endif
