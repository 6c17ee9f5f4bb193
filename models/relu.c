/* relu.c: Keras's ReLU layer, (B, ...) -> (B, ...), element by element
 * (runtime/elementwise.h, mr_relu_layer, has the formula both devices run):
 *   y = min(x, max_value)                 x > threshold
 *   y = negative_slope * (x - threshold)  otherwise
 * max_value < 0 is Keras's None (no maximum); ReLU(max_value=6) is
 * MobileNet's ReLU6. The kernels are backends/cpu/relu_cpu.c and
 * backends/cuda/relu_cuda.cu. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/keras.h"
#include "runtime/strbuf.h"

static mr_status relu_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    const float mx = l->cfg->max_value;
    if (mx < 0.0f && mx != -1.0f)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [relu] max_value %g: give one of at least 0, or -1 (None) for "
                            "none",
                            file, l->cfg->line, (double)mx);
    l->out = l->in;
    return MR_OK;
}

/* Keras's ReLU config keys, in its order. */
static void relu_keras_config(const mr_layer *l, mr_sb *b) {
    mr_sb_printf(b, ", \"max_value\": ");
    if (l->cfg->max_value < 0.0f)
        mr_sb_printf(b, "null");
    else
        mr_sb_float(b, l->cfg->max_value);
    mr_sb_printf(b, ", \"negative_slope\": ");
    mr_sb_float(b, l->cfg->negative_slope);
    mr_sb_printf(b, ", \"threshold\": ");
    mr_sb_float(b, l->cfg->threshold);
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg relu_keras_args[] = {{"max_value", MR_ARG_OPTNUM, "max_value"},
                                               {"negative_slope", MR_ARG_NUM, "negative_slope"},
                                               {"threshold", MR_ARG_NUM, "threshold"},
                                               MR_KERAS_ARGS_END};

/* [relu]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key relu_keys[] = {
    {"relu", "max_value", NULL, MR_PY_NONE, MR_KEY_FLOAT, MR_LAY(max_value), "-1", -1, MR_KEY_BIG,
     0, 0, NULL, 0, "the output's maximum, at least 0 (6: ReLU6, MobileNet's); -1 or None: none"},
    {"relu", "negative_slope", NULL, 0, MR_KEY_FLOAT, MR_LAY(negative_slope), "0", 0, MR_KEY_BIG, 0,
     0, NULL, 0, "the slope below the threshold: y = negative_slope * (x - threshold)"},
    {"relu", "threshold", NULL, 0, MR_KEY_FLOAT, MR_LAY(threshold), "0", 0, MR_KEY_BIG, 0, 0, NULL,
     0, "x is passed above it (y = x for x > threshold), else 0 or the slope's line"},
};

const mr_layer_ops mr_relu_ops = {
    .class_name = "ReLU",
    .keras_name = "re_lu",
    .keras_args = relu_keras_args,
    .section_help = "rectified linear unit with a maximum, slope and threshold (ReLU)",
    .keys = MR_KEYS(relu_keys),
    .keras_config = relu_keras_config,
    .setup = relu_setup,
};
