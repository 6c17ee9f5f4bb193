/* copy_layout.h: where the layers that only copy put each element, for
 * their kernels on every device (the copies give the same bits anywhere;
 * the layout must be the same): an image inside a zero border
 * (ZeroPadding2D, zeropad.c; and a convolution that pads its input itself,
 * conv2d_cuda.cu), and the rows of two inputs side by side (Concatenate,
 * concatenate.c). Images are NHWC: a pixel is C consecutive floats. */
#ifndef MR_COPY_LAYOUT_H
#define MR_COPY_LAYOUT_H

#include <stdint.h>

#include "runtime/hd.h"
#include "models/layer.h"

/* An image of (in_h, in_w) pixels inside a zero border, (out_h, out_w)
 * pixels in all, its pixel (iy, ix) at (iy + top, ix + left). */
typedef struct mr_pad2d {
    int in_h, in_w;
    int out_h, out_w;
    int top, left;
} mr_pad2d;

/* [zeropad]'s: the layer's shapes (zeropad.c: padding = top,bottom,left,right),
 * so the image sits at (top, left). */
static inline mr_pad2d mr_zeropad_layout(const mr_layer *l) {
    const mr_pad2d p = {l->in.d[0],  l->in.d[1],     l->out.d[0],
                        l->out.d[1], l->cfg->pad[0], l->cfg->pad[2]};
    return p;
}

/* The bordered image's pixel (its index in out_h x out_w) of image pixel (iy, ix). */
MR_HD static inline int64_t mr_pad2d_outer(const mr_pad2d *p, int iy, int ix) {
    return (int64_t)(iy + p->top) * p->out_w + (ix + p->left);
}

/* The image's pixel (its index in in_h x in_w) at pixel (oy, ox) of the
 * bordered image, or -1 where that is the border (a zero). */
MR_HD static inline int64_t mr_pad2d_inner(const mr_pad2d *p, int oy, int ox) {
    const int iy = oy - p->top, ix = ox - p->left;
    return iy >= 0 && iy < p->in_h && ix >= 0 && ix < p->in_w ? (int64_t)iy * p->in_w + ix : -1;
}

/* Concatenate along the last axis: y (rows, c1 + c2) holds in each row
 * x's row (c1 floats), then x2's (c2 floats). */
typedef struct mr_concat {
    int64_t rows; /* batch x the axes before the last (B x H x W for images) */
    int c1, c2;   /* the last axis of x and of x2 */
} mr_concat;

/* The layout of [concatenate] l at batch size `batch`. */
static inline mr_concat mr_concat_layout(const mr_layer *l, int batch) {
    const int r = l->out.rank;
    mr_concat g = {0, l->in.d[r - 1], l->in2.d[r - 1]};
    g.rows = (int64_t)batch * (mr_shape_size(l->out) / (g.c1 + g.c2));
    return g;
}

#endif
