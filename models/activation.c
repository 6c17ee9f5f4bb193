/* activation.c: a stand-alone [activation] layer, (B, ...) -> (B, ...).
 * Softmax is over the last axis. */
#include <string.h>

#include "layer.h"
#include "kernels_cpu.h"

static mr_status act_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file, (void)err;
    l->out = l->in;
    return MR_OK;
}

const mr_layer_ops mr_activation_ops = {
    .class_name = "Activation",
    .setup = act_setup,
};

/* ---- CPU kernels (to move to activation_cpu.c) ---- */

static int last_axis(mr_shape s) {
    return s.d[s.rank - 1];
}

static mr_status act_forward(mr_layer *l, mr_run *run, int batch, const mr_dfloat *x,
                             mr_dfloat *yd) {
    (void)run;
    float *y = mr_dfloat_ptr(yd);
    int64_t n = batch * mr_shape_size(l->in);
    memcpy(y, mr_dfloat_cptr(x), sizeof(float) * (size_t)n);
    mr_activation act = l->logits_out ? MR_ACTIVATION_LINEAR : l->cfg->activation;
    int width = last_axis(l->in);
    mr_cpu_activation_forward(act, y, (int)(n / width), width);
    return MR_OK;
}

static mr_status act_backward(mr_layer *l, mr_run *run, int batch, const mr_dfloat *x,
                              const mr_dfloat *y, mr_dfloat *dyd, mr_dfloat *dx) {
    (void)run, (void)x;
    if (dx == NULL) return MR_OK;
    float *dy = mr_dfloat_ptr(dyd);
    int64_t n = batch * mr_shape_size(l->in);
    mr_activation act = l->logits_out ? MR_ACTIVATION_LINEAR : l->cfg->activation;
    int width = last_axis(l->in);
    mr_cpu_activation_backward(act, mr_dfloat_cptr(y), dy, (int)(n / width), width);
    memcpy(mr_dfloat_ptr(dx), dy, sizeof(float) * (size_t)n);
    return MR_OK;
}

const mr_layer_kernels mr_activation_cpu = {
    .forward = act_forward,
    .backward = act_backward,
};
