/* activation.c: a stand-alone [activation] layer, (B, ...) -> (B, ...).
 * Softmax is over the last axis. */
#include <string.h>

#include "layer.h"

static int last_axis(mr_shape s) {
    return s.d[s.rank - 1];
}

static mr_status act_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file, (void)err;
    l->out = l->in;
    return MR_OK;
}

static void act_forward(mr_layer *l, mr_run *run, int batch, const float *x, float *y) {
    (void)run;
    int64_t n = batch * mr_shape_size(l->in);
    memcpy(y, x, sizeof(float) * (size_t)n);
    mr_activation act = l->logits_out ? MR_ACTIVATION_LINEAR : l->cfg->activation;
    int width = last_axis(l->in);
    mr_activation_forward(act, y, (int)(n / width), width);
}

static void act_backward(mr_layer *l, mr_run *run, int batch, const float *x, const float *y,
                         float *dy, float *dx) {
    (void)run, (void)x;
    if (dx == NULL) return;
    int64_t n = batch * mr_shape_size(l->in);
    mr_activation act = l->logits_out ? MR_ACTIVATION_LINEAR : l->cfg->activation;
    int width = last_axis(l->in);
    mr_activation_backward(act, y, dy, (int)(n / width), width);
    memcpy(dx, dy, sizeof(float) * (size_t)n);
}

const mr_layer_ops mr_activation_ops = {
    .class_name = "Activation",
    .setup = act_setup,
    .forward = act_forward,
    .backward = act_backward,
};
