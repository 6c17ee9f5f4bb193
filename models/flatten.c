/* flatten.c: Flatten, (B, H, W, C) -> (B, H*W*C). NHWC is already
 * row-major per example, so this is a copy with a new shape; the model
 * skips even the copy (.view, layer.h). */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/keras.h"
#include "runtime/strbuf.h"

static mr_status flatten_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file, (void)err;
    l->out.rank = 1;
    l->out.d[0] = (int)mr_shape_size(l->in);
    return MR_OK;
}

/* Keras's Flatten config keys. */
static void flatten_keras_config(const mr_layer *l, mr_sb *b) {
    (void)l;
    mr_sb_printf(b, ", \"data_format\": \"channels_last\"");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg flatten_keras_args[] = {MR_KERAS_CHANNELS_LAST, MR_KERAS_ARGS_END};

const mr_layer_ops mr_flatten_ops = {
    .class_name = "Flatten",
    .keras_name = "flatten",
    .keras_args = flatten_keras_args,
    .section_help = "reshape to one feature vector (no keys)",
    .keras_config = flatten_keras_config,
    .keras_build_config = 1,
    .setup = flatten_setup,
    .view = 1,
};
