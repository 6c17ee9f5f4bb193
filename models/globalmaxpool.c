/* globalmaxpool.c: GlobalMaxPooling2D, the maximum over height and width
 * of each channel:
 *   x: (B, H, W, C) -> y: (B, C), or (B, 1, 1, C) with keepdims
 * Its gradient goes to the pixels equal to the maximum, shared equally
 * among ties (TensorFlow's reduce_max gradient). The kernels are
 * backends/cpu/globalmaxpool_cpu.c and backends/cuda/globalmaxpool_cuda.cu. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "runtime/strbuf.h"

static mr_status gmp_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    if (l->in.rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [globalmaxpool] needs an image input (H,W,C), got (%d)", file,
                            l->cfg->line, l->in.d[0]);
    const int C = l->in.d[2];
    l->out = l->cfg->keepdims ? (mr_shape){3, {1, 1, C}} : (mr_shape){1, {C, 0, 0}};
    return MR_OK;
}

/* Keras's GlobalMaxPooling2D config keys, in its order. */
static void gmp_keras_config(const mr_layer *l, mr_sb *b) {
    mr_sb_printf(b, ", \"data_format\": \"channels_last\", \"keepdims\": %s",
                 l->cfg->keepdims ? "true" : "false");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg gmp_keras_args[] = {
    MR_KERAS_CHANNELS_LAST, {"keepdims", MR_ARG_BOOL, "keepdims"}, MR_KERAS_ARGS_END};

/* [globalmaxpool]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key globalmaxpool_keys[] = {
    {"globalmaxpool", "keepdims", NULL, 0, MR_KEY_BOOL, MR_LAY(keepdims), "0", 0, 1, 0, 0, NULL, 0,
     "1: the output keeps height and width as 1, (1, 1, C)"},
};

const mr_layer_ops mr_globalmaxpool_ops = {
    .class_name = "GlobalMaxPooling2D",
    .keras_name = "global_max_pooling2d",
    .keras_args = gmp_keras_args,
    .section_help = "maximum over height and width, (H, W, C) -> (C) (GlobalMaxPooling2D)",
    .keys = MR_KEYS(globalmaxpool_keys),
    .keras_config = gmp_keras_config,
    .setup = gmp_setup,
};
