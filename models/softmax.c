/* softmax.c: Keras's Softmax layer over the last axis, (B, ..., N) ->
 * (B, ..., N): exactly an [activation] of softmax (the parser sets its
 * activation to softmax, so the loss rules and the fusion of a last
 * softmax into a cross-entropy read it alike), under Keras's class name.
 * Its kernels are the activation's (activation_cpu.c, activation_cuda.cu). */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "runtime/strbuf.h"

static mr_status softmax_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file, (void)err;
    l->out = l->in;
    return MR_OK;
}

/* Keras's Softmax config key. */
static void softmax_keras_config(const mr_layer *l, mr_sb *b) {
    mr_sb_printf(b, ", \"axis\": %d", l->cfg->axis);
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg softmax_keras_args[] = {{"axis", MR_ARG_EQ, "-1"}, MR_KERAS_ARGS_END};

/* [softmax]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key softmax_keys[] = {
    {"softmax", "axis", NULL, 0, MR_KEY_INT, MR_LAY(axis), "-1", -1, -1, 0, 0, NULL, 0,
     "the axis the softmax normalises: -1 (the last) only"},
};

const mr_layer_ops mr_softmax_ops = {
    .class_name = "Softmax",
    .keras_name = "softmax",
    .keras_args = softmax_keras_args,
    .section_help = "softmax over the last axis (Softmax; as [activation] softmax)",
    .keys = MR_KEYS(softmax_keys),
    .keras_config = softmax_keras_config,
    .setup = softmax_setup,
    .has_activation = 1,
};
