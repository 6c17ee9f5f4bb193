/* globalavgpool.c: GlobalAveragePooling2D, the mean over height and width
 * of each channel (the head of a ResNet):
 *   x: (B, H, W, C) -> y: (B, C)
 * The CPU kernels are backends/cpu/globalavgpool_cpu.c. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "runtime/strbuf.h"

static mr_status gap_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    if (l->in.rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [globalavgpool] needs an image input (H,W,C), got (%d)", file,
                            l->cfg->line, l->in.d[0]);
    l->out = (mr_shape){1, {l->in.d[2], 0, 0}};
    return MR_OK;
}

/* Keras's GlobalAveragePooling2D config keys, in its order. */
static void gap_keras_config(const mr_layer *l, mr_sb *b) {
    (void)l;
    mr_sb_printf(b, ", \"data_format\": \"channels_last\", \"keepdims\": false");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg gap_keras_args[] = {
    MR_KERAS_CHANNELS_LAST, {"keepdims", MR_ARG_EQ, "false"}, MR_KERAS_ARGS_END};

const mr_layer_ops mr_globalavgpool_ops = {
    .class_name = "GlobalAveragePooling2D",
    .keras_name = "global_average_pooling2d",
    .keras_args = gap_keras_args,
    .section_help =
        "mean over height and width, (H, W, C) -> (C) (GlobalAveragePooling2D; no keys)",
    .keras_config = gap_keras_config,
    .setup = gap_setup,
};
