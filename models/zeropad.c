/* zeropad.c: ZeroPadding2D, zeros around each image (before ResNet-50's
 * 7x7 stem convolution and its max pooling):
 *   x: (B, H, W, C) -> y: (B, top + H + bottom, left + W + right, C),
 * [zeropad] padding = top,bottom,left,right (config_values.c spreads p and ph,pw to the four)
 * The CPU kernels are backends/cpu/zeropad_cpu.c. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "runtime/strbuf.h"

static mr_status zeropad_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    if (l->in.rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [zeropad] needs an image input (H,W,C), got (%d)", file,
                            l->cfg->line, l->in.d[0]);
    const int *p = l->cfg->pad;
    l->out = (mr_shape){3, {p[0] + l->in.d[0] + p[1], p[2] + l->in.d[1] + p[3], l->in.d[2]}};
    return MR_OK;
}

/* Keras's ZeroPadding2D config keys: padding ((top, bottom), (left, right)). */
static void zeropad_keras_config(const mr_layer *l, mr_sb *b) {
    const int *p = l->cfg->pad;
    mr_sb_printf(b, ", \"padding\": [[%d, %d], [%d, %d]], \"data_format\": \"channels_last\"", p[0],
                 p[1], p[2], p[3]);
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg zeropad_keras_args[] = {
    {"padding", MR_ARG_PADS, "padding"}, MR_KERAS_CHANNELS_LAST, MR_KERAS_ARGS_END};

/* [zeropad]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key zeropad_keys[] = {
    {"zeropad", "padding", NULL, MR_PY_PAIRS, MR_KEY_INTS, MR_LAY(pad), "1", 0, 1024, 0, 0, NULL, 4,
     "zero rows above and below, zero columns left and right: p, ph,pw (Keras padding=(ph, pw)) "
     "or top,bottom,left,right (Keras padding=((top, bottom), (left, right)))"},
};

const mr_layer_ops mr_zeropad_ops = {
    .class_name = "ZeroPadding2D",
    .keras_name = "zero_padding2d",
    .keras_args = zeropad_keras_args,
    .section_help = "zero padding of height and width (ZeroPadding2D)",
    .keys = MR_KEYS(zeropad_keys),
    .keras_config = zeropad_keras_config,
    .setup = zeropad_setup,
};
