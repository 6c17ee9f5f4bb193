/* spatialdropout.c: Keras's SpatialDropout2D, (B, H, W, C) -> (B, H, W, C):
 * inverted dropout of whole channels, identity in inference. Channel c of
 * row i is kept or dropped at every pixel alike, by the word of element c
 * of Dropout's Philox counters (seed, dropout stream; step, sample_base + i,
 * layer, c / 4; dropout.c), runtime/elementwise.h's mr_spatial_dropout_keep:
 * it depends on the sample's place in the global batch, not on the
 * replica. The kernels are backends/cpu/spatialdropout_cpu.c and
 * backends/cuda/spatialdropout_cuda.cu. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/keras.h"
#include "runtime/strbuf.h"

static mr_status sdrop_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    if (l->in.rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [spatialdropout] needs an image input (H,W,C), got (%d)", file,
                            l->cfg->line, l->in.d[0]);
    l->out = l->in;
    return MR_OK;
}

/* Keras 3.15's SpatialDropout2D config, whole: its get_config is its own
 * (no "trainable", the dtype's name), and its constructor takes no more. */
static void sdrop_keras_config(const mr_layer *l, mr_sb *b) {
    mr_sb_printf(b, "\"rate\": ");
    mr_sb_float(b, l->cfg->rate);
    mr_sb_printf(b,
                 ", \"seed\": null, \"name\": \"%s\", \"dtype\": \"float32\", "
                 "\"data_format\": \"channels_last\"",
                 l->name);
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg spatialdropout_keras_args[] = {{"rate", MR_ARG_NUM, "rate"},
                                                         {"seed", MR_ARG_IGNORE, NULL},
                                                         MR_KERAS_CHANNELS_LAST,
                                                         MR_KERAS_ARGS_END};

/* [spatialdropout]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key spatialdropout_keys[] = {
    {"spatialdropout", "rate", NULL, 0, MR_KEY_FLOAT, MR_LAY(rate), NULL, 0, 1, 0, 1, NULL, 0,
     "fraction of channels zeroed in training, whole feature maps per example (inverted "
     "dropout)"},
};

const mr_layer_ops mr_spatialdropout_ops = {
    .class_name = "SpatialDropout2D",
    .keras_name = "spatial_dropout2d",
    .keras_args = spatialdropout_keras_args,
    .section_help = "dropout of whole channels per example, training only (SpatialDropout2D)",
    .keys = MR_KEYS(spatialdropout_keys),
    .keras_config = sdrop_keras_config,
    .keras_whole_config = 1,
    .setup = sdrop_setup,
};
