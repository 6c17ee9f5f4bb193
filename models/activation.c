/* activation.c: a stand-alone [activation] layer, (B, ...) -> (B, ...).
 * Softmax is over the last axis. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
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

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg activation_keras_args[] = {{"activation", MR_ARG_ACT, "activation"},
                                                     MR_KERAS_ARGS_END};

/* [activation]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key activation_keys[] = {
    {"activation", "activation", NULL, 0, MR_KEY_ENUM, MR_LAY(activation), NULL, 0, 0, 0, 0,
     mr_activation_names, 0,
     "linear, relu, sigmoid, tanh, softmax, elu (alpha 1), leaky_relu (slope 0.2), gelu (exact) "
     "or swish/silu, as Keras"},
};

const mr_layer_ops mr_activation_ops = {
    .class_name = "Activation",
    .keras_name = "activation",
    .keras_args = activation_keras_args,
    .section_help = "element-wise activation",
    .keys = MR_KEYS(activation_keys),
    .keras_config = act_keras_config,
    .setup = act_setup,
    .has_activation = 1,
};
