/* activation.c: a stand-alone [activation] layer, (B, ...) -> (B, ...).
 * Softmax is over the last axis. */
#include "models/layer.h"

static mr_status act_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file, (void)err;
    l->out = l->in;
    return MR_OK;
}

const mr_layer_ops mr_activation_ops = {
    .class_name = "Activation",
    .setup = act_setup,
};
