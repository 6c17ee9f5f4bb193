/* flatten.c: Flatten, (B, H, W, C) -> (B, H*W*C). NHWC is already
 * row-major per example, so this is a copy with a new shape; the model
 * skips even the copy (.view, layer.h). */
#include <string.h>

#include "layer.h"
#include "kernels_cpu.h"

static mr_status flatten_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file, (void)err;
    l->out.rank = 1;
    l->out.d[0] = (int)mr_shape_size(l->in);
    return MR_OK;
}

const mr_layer_ops mr_flatten_ops = {
    .class_name = "Flatten",
    .setup = flatten_setup,
    .view = 1,
};

/* ---- CPU kernels (to move to flatten_cpu.c) ---- */

static mr_status flatten_forward(mr_layer *l, mr_run *run, int batch, const mr_dfloat *x,
                                 mr_dfloat *y) {
    (void)run;
    memcpy(mr_dfloat_ptr(y), mr_dfloat_cptr(x),
           sizeof(float) * (size_t)batch * (size_t)mr_shape_size(l->in));
    return MR_OK;
}

static mr_status flatten_backward(mr_layer *l, mr_run *run, int batch, const mr_dfloat *x,
                                  const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)run, (void)x, (void)y;
    if (dx)
        memcpy(mr_dfloat_ptr(dx), mr_dfloat_cptr(dy),
               sizeof(float) * (size_t)batch * (size_t)mr_shape_size(l->in));
    return MR_OK;
}

const mr_layer_kernels mr_flatten_cpu = {
    .forward = flatten_forward,
    .backward = flatten_backward,
};
