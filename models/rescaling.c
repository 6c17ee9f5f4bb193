/* rescaling.c: Rescaling, preprocessing in the model (raw pixels in, the
 * scaled values out), no weights:
 *   x: (B, ...) -> y: (B, ...) = x * scale + offset, in float32 as Keras
 *   (one rounding for the product, one for the sum: no fused multiply-add)
 *   dx = dy * scale
 * The kernels are backends/cpu/rescaling_cpu.c and
 * backends/cuda/rescaling_cuda.cu, over elementwise.h's mr_rescale. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "runtime/strbuf.h"

static mr_status rescaling_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file, (void)err;
    l->out = l->in;
    return MR_OK;
}

/* Keras's Rescaling config keys, in its order: scale, offset. */
static void rescaling_keras_config(const mr_layer *l, mr_sb *b) {
    mr_sb_printf(b, ", \"scale\": ");
    mr_sb_float(b, l->cfg->rescale);
    mr_sb_printf(b, ", \"offset\": ");
    mr_sb_float(b, l->cfg->offset);
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg rescaling_keras_args[] = {
    {"scale", MR_ARG_NUM, "scale"}, {"offset", MR_ARG_NUM, "offset"}, MR_KERAS_ARGS_END};

/* [rescaling]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key rescaling_keys[] = {
    {"rescaling", "scale", NULL, 0, MR_KEY_FLOAT, MR_LAY(rescale), "1", -MR_KEY_BIG, MR_KEY_BIG, 0,
     0, NULL, 0,
     "y = x * scale + offset (Keras Rescaling; 0.00392156862745098 = 1/255 takes raw pixels "
     "to [0, 1])"},
    {"rescaling", "offset", NULL, 0, MR_KEY_FLOAT, MR_LAY(offset), "0", -MR_KEY_BIG, MR_KEY_BIG, 0,
     0, NULL, 0, "added after the scale"},
};

const mr_layer_ops mr_rescaling_ops = {
    .class_name = "Rescaling",
    .keras_name = "rescaling",
    .keras_args = rescaling_keras_args,
    .section_help = "x * scale + offset, no weights (Rescaling: preprocessing in the model)",
    .keys = MR_KEYS(rescaling_keys),
    .keras_config = rescaling_keras_config,
    /* Keras 3.15's .keras archive carries Rescaling's build_config */
    .keras_build_config = 1,
    .setup = rescaling_setup,
};
