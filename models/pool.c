/* pool.c: MaxPooling2D and AveragePooling2D, NHWC: what the layers are on
 * every device.
 *   x: (B, H, W, C) -> y: (B, OH, OW, C)
 * Same padding as Keras: the max ignores padded cells; the average divides
 * by the number of real cells in the window. The CPU kernels are
 * pool_cpu.c.
 * Relies on: layer.h (the layer contract), conv_geometry.h (Keras/TF
 * output size and padding). */
#include "models/conv_geometry.h"
#include "models/keras.h"
#include "runtime/strbuf.h"
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"

static mr_status pool_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    const mr_layer_cfg *c = l->cfg;
    const char *sec = mr_layer_kind_name(c->kind);
    if (l->in.rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [%s] needs an image input (H,W,C), got (%d)", file, c->line,
                            sec, l->in.d[0]);
    if (c->size[0] < 1 || c->size[1] < 1 || c->stride[0] < 1 || c->stride[1] < 1)
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [%s] size and stride must be >= 1", file,
                            c->line, sec);
    mr_window g = mr_window_make(l->in.d[0], l->in.d[1], c);
    if (c->padding == MR_PADDING_VALID && (c->size[0] > g.in_h || c->size[1] > g.in_w))
        return mr_error_set(
            err, MR_ERR_CONFIG,
            "%s:%d: [%s] pool %dx%d is larger than its %dx%d input with valid padding", file,
            c->line, sec, c->size[0], c->size[1], g.in_h, g.in_w);
    if (g.out_h < 1 || g.out_w < 1 || l->in.d[2] < 1)
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [%s] would output an empty shape", file,
                            c->line, sec);
    l->out = (mr_shape){3, {g.out_h, g.out_w, l->in.d[2]}};
    return MR_OK;
}

/* Keras's MaxPooling2D / AveragePooling2D config keys, in its order. */
static void pool_keras_config(const mr_layer *l, mr_sb *b) {
    const mr_layer_cfg *c = l->cfg;
    mr_sb_printf(b,
                 ", \"pool_size\": [%d, %d], \"padding\": \"%s\", \"strides\": [%d, %d], "
                 "\"data_format\": \"channels_last\"",
                 c->size[0], c->size[1], mr_keras_padding(c->padding), c->stride[0], c->stride[1]);
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg pool_keras_args[] = {{"pool_size", MR_ARG_INTS, "size"},
                                               {"strides", MR_ARG_STRIDES, "stride"},
                                               {"padding", MR_ARG_PADDING, "padding"},
                                               MR_KERAS_CHANNELS_LAST,
                                               MR_KERAS_ARGS_END};

/* [maxpool]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key maxpool_keys[] = {
    {"maxpool", "size", "pool_size", 0, MR_KEY_INTS, MR_LAY(size), "2", 1, 1024, 0, 0, NULL, 2,
     "pool size: p or ph,pw"},
    {"maxpool", "stride", "strides", MR_PY_NONE, MR_KEY_INTS, MR_LAY(stride), "0", 0, 1024, 0, 0,
     NULL, 2, "stride: s or sh,sw (0: the pool size, as Keras)"},
    {"maxpool", "padding", NULL, 0, MR_KEY_ENUM, MR_LAY(padding), "valid", 0, 0, 0, 0,
     mr_padding_names, 0, "valid or same"},
};

const mr_layer_ops mr_maxpool_ops = {
    .class_name = "MaxPooling2D",
    .keras_name = "max_pooling2d",
    .keras_args = pool_keras_args,
    .section_help = "2-D max pooling",
    .keys = MR_KEYS(maxpool_keys),
    .keras_config = pool_keras_config,
    .setup = pool_setup,
};

/* [avgpool]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key avgpool_keys[] = {
    {"avgpool", "size", "pool_size", 0, MR_KEY_INTS, MR_LAY(size), "2", 1, 1024, 0, 0, NULL, 2,
     "pool size: p or ph,pw"},
    {"avgpool", "stride", "strides", MR_PY_NONE, MR_KEY_INTS, MR_LAY(stride), "0", 0, 1024, 0, 0,
     NULL, 2, "stride: s or sh,sw (0: the pool size, as Keras)"},
    {"avgpool", "padding", NULL, 0, MR_KEY_ENUM, MR_LAY(padding), "valid", 0, 0, 0, 0,
     mr_padding_names, 0, "valid or same (same: averages over the valid cells only, as Keras)"},
};

const mr_layer_ops mr_avgpool_ops = {
    .class_name = "AveragePooling2D",
    .keras_name = "average_pooling2d",
    .keras_args = pool_keras_args,
    .section_help = "2-D average pooling",
    .keys = MR_KEYS(avgpool_keys),
    .keras_config = pool_keras_config,
    .setup = pool_setup,
};
