/* conv_geometry.h: output size and padding of a 2-D window (convolution or
 * pooling) as Keras/TensorFlow define them. Shared by conv2d.c and pool.c. */
#ifndef MR_CONV_GEOMETRY_H
#define MR_CONV_GEOMETRY_H

#include "models/config.h"

typedef struct mr_window {
    int in_h, in_w;   /* input spatial size */
    int k_h, k_w;     /* window */
    int s_h, s_w;     /* stride */
    int out_h, out_w; /* output spatial size */
    int pad_t, pad_l; /* padding before the first row / column (same padding) */
} mr_window;

/* valid: out = (in - k) / s + 1 (0 when k > in); same: out = ceil(in / s),
 * padding total max((out - 1) * s + k - in, 0), the smaller half first. */
static inline mr_window mr_window_make(int in_h, int in_w, const mr_layer_cfg *c) {
    mr_window w = {in_h, in_w, c->size[0], c->size[1], c->stride[0], c->stride[1], 0, 0, 0, 0};
    if (c->padding == MR_PADDING_SAME) {
        w.out_h = (in_h + w.s_h - 1) / w.s_h;
        w.out_w = (in_w + w.s_w - 1) / w.s_w;
        int ph = (w.out_h - 1) * w.s_h + w.k_h - in_h, pw = (w.out_w - 1) * w.s_w + w.k_w - in_w;
        w.pad_t = ph > 0 ? ph / 2 : 0;
        w.pad_l = pw > 0 ? pw / 2 : 0;
    } else {
        w.out_h = in_h >= w.k_h ? (in_h - w.k_h) / w.s_h + 1 : 0;
        w.out_w = in_w >= w.k_w ? (in_w - w.k_w) / w.s_w + 1 : 0;
    }
    return w;
}

#endif
