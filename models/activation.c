/* activation.c: a stand-alone [activation] layer, (B, ...) -> (B, ...).
 * Softmax is over the last axis. */
#include "models/layer.h"
#include "models/keras.h"
#include "runtime/strbuf.h"

static mr_status act_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file, (void)err;
    l->out = l->in;
    return MR_OK;
}

/* Keras's Activation config key. */
static void act_keras_config(const mr_layer *l, mr_sb *b) {
    mr_sb_printf(b, ", \"activation\": \"%s\"", mr_keras_activation(l->cfg->activation));
}

const mr_layer_ops mr_activation_ops = {
    .class_name = "Activation",
    .keras_name = "activation",
    .keras_config = act_keras_config,
    .setup = act_setup,
    .has_activation = 1,
};
