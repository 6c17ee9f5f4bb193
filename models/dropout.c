/* dropout.c: inverted Dropout, (B, ...) -> (B, ...), identity in inference.
 * The keep mask of element j of row i comes from Philox keyed by
 * (seed, dropout stream) at counter (step, sample_base + i, layer, j / 4):
 * it depends on the sample's position in the GLOBAL batch, never on which
 * replica holds it, so R replicas x B and 1 x RB drop the same elements.
 * Backward recomputes the mask instead of storing it. The kernels are
 * dropout_cpu.c. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/keras.h"
#include "runtime/strbuf.h"

static mr_status dropout_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file, (void)err;
    l->out = l->in;
    return MR_OK;
}

/* Keras's Dropout config keys, in its order. */
static void dropout_keras_config(const mr_layer *l, mr_sb *b) {
    mr_sb_printf(b, ", \"rate\": ");
    mr_sb_float(b, l->cfg->rate);
    mr_sb_printf(b, ", \"seed\": null, \"noise_shape\": null");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg dropout_keras_args[] = {{"rate", MR_ARG_NUM, "rate"},
                                                  {"seed", MR_ARG_IGNORE, NULL},
                                                  {"noise_shape", MR_ARG_NULL, NULL},
                                                  MR_KERAS_ARGS_END};

/* [dropout]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key dropout_keys[] = {
    {"dropout", "rate", NULL, 0, MR_KEY_FLOAT, MR_LAY(rate), NULL, 0, 1, 0, 1, NULL, 0,
     "fraction of inputs zeroed in training (inverted dropout)"},
};

const mr_layer_ops mr_dropout_ops = {
    .class_name = "Dropout",
    .keras_name = "dropout",
    .keras_args = dropout_keras_args,
    .section_help = "inverted dropout, training only",
    .keys = MR_KEYS(dropout_keys),
    .keras_config = dropout_keras_config,
    .setup = dropout_setup,
};
