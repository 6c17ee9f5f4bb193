/* depthwise.c: DepthwiseConv2D, NHWC: what the layer is on every device.
 *   x: (B, H, W, C)   kernel: (kh, kw, C, M)   bias: (C * M)   y: (B, OH, OW, C * M)
 * Each input channel c is convolved with its own M filters (M the depth
 * multiplier); output channel c * M + m is kernel[.., .., c, m]'s, as
 * Keras orders them. Shapes (Keras/TF output size and padding,
 * conv_geometry.h), the weights and their Glorot-uniform init (Keras:
 * fan_in kh*kw*C, fan_out kh*kw*M). */
#include <string.h>

#include "models/conv_geometry.h"
#include "models/keras.h"
#include "runtime/strbuf.h"
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"

static mr_status depthwise_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    const mr_layer_cfg *c = l->cfg;
    if (l->in.rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [depthwise] needs an image input (H,W,C), got (%d)", file,
                            c->line, l->in.d[0]);
    mr_window g = mr_window_make(l->in.d[0], l->in.d[1], c);
    if (c->padding == MR_PADDING_VALID && (c->size[0] > g.in_h || c->size[1] > g.in_w))
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [depthwise] kernel %dx%d is larger than its %dx%d input with "
                            "valid padding",
                            file, c->line, c->size[0], c->size[1], g.in_h, g.in_w);
    if (g.out_h < 1 || g.out_w < 1 || l->in.d[2] < 1)
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [depthwise] would output an empty shape",
                            file, c->line);
    const int out_c = l->in.d[2] * c->depth_multiplier;
    l->out = (mr_shape){3, {g.out_h, g.out_w, out_c}};
    mr_layer_declare_weight(l, "kernel", 1, 4, g.k_h, g.k_w, l->in.d[2], c->depth_multiplier);
    if (c->use_bias) mr_layer_declare_weight(l, "bias", 1, 1, out_c, 0, 0, 0);
    return MR_OK;
}

static void depthwise_init(const mr_layer *l, int weight, uint64_t seed, float *out) {
    const mr_layer_cfg *c = l->cfg;
    const int area = c->size[0] * c->size[1];
    if (weight == 0)
        mr_layer_init_kernel(l, 0, seed, area * l->in.d[2], area * c->depth_multiplier, out);
    else
        memset(out, 0, sizeof(float) * (size_t)l->w[1].size);
}

/* Keras's DepthwiseConv2D config keys, in its order. */
static void depthwise_keras_config(const mr_layer *l, mr_sb *b) {
    const mr_layer_cfg *c = l->cfg;
    mr_sb_printf(b,
                 ", \"depth_multiplier\": %d, \"kernel_size\": [%d, %d], \"strides\": [%d, %d], "
                 "\"padding\": \"%s\", \"data_format\": \"channels_last\", "
                 "\"dilation_rate\": [1, 1], \"activation\": \"%s\", \"use_bias\": %s, "
                 "\"depthwise_initializer\": %s, \"bias_initializer\": %s, ",
                 c->depth_multiplier, c->size[0], c->size[1], c->stride[0], c->stride[1],
                 mr_keras_padding(c->padding), mr_keras_activation(c->activation),
                 c->use_bias ? "true" : "false",
                 mr_keras_initializer(mr_keras_initializer_class(c->kernel_initializer)),
                 mr_keras_initializer("Zeros"));
    mr_keras_regularizer(b, "depthwise_regularizer", c->kernel_l2);
    mr_sb_printf(b, ", \"bias_regularizer\": null, \"activity_regularizer\": null, "
                    "\"depthwise_constraint\": null, \"bias_constraint\": null");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg depthwise_keras_args[] = {
    {"kernel_size", MR_ARG_INTS, "size"},
    {"strides", MR_ARG_INTS, "stride"},
    {"padding", MR_ARG_PADDING, "padding"},
    MR_KERAS_CHANNELS_LAST,
    {"dilation_rate", MR_ARG_EQ, "[1, 1]"},
    {"depth_multiplier", MR_ARG_INT, "depth_multiplier"},
    {"activation", MR_ARG_ACT, "activation"},
    {"use_bias", MR_ARG_BOOL, "use_bias"},
    {"depthwise_initializer", MR_ARG_INIT, "kernel_initializer"},
    {"bias_initializer", MR_ARG_IGNORE, NULL},
    {"depthwise_regularizer", MR_ARG_L2, "kernel_l2"},
    {"bias_regularizer", MR_ARG_NULL, NULL},
    {"activity_regularizer", MR_ARG_NULL, NULL},
    {"depthwise_constraint", MR_ARG_NULL, NULL},
    {"bias_constraint", MR_ARG_NULL, NULL},
    MR_KERAS_ARGS_END};

/* [depthwise]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key depthwise_keys[] = {
    {"depthwise", "size", "kernel_size", 0, MR_KEY_INTS, MR_LAY(size), NULL, 1, 1024, 0, 0, NULL, 2,
     "kernel size: k or kh,kw"},
    {"depthwise", "stride", "strides", 0, MR_KEY_INTS, MR_LAY(stride), "1", 1, 1024, 0, 0, NULL, 2,
     "stride: s or sh,sw"},
    {"depthwise", "padding", NULL, 0, MR_KEY_ENUM, MR_LAY(padding), "valid", 0, 0, 0, 0,
     mr_padding_names, 0, "valid or same (as Keras)"},
    {"depthwise", "depth_multiplier", NULL, 0, MR_KEY_INT, MR_LAY(depth_multiplier), "1", 1,
     1 << 12, 0, 0, NULL, 0, "output channels per input channel"},
    {"depthwise", "dilation", "dilation_rate", 0, MR_KEY_INTS, MR_LAY(dilation), "1", 1, 1, 0, 0,
     NULL, 2, "1 only (Keras's default; dilated windows are not supported)"},
    {"depthwise", "activation", NULL, MR_PY_NONE, MR_KEY_ENUM, MR_LAY(activation), "linear", 0, 0,
     0, 0, mr_activation_names, 0,
     "linear, relu, sigmoid, tanh, softmax, elu (alpha 1), leaky_relu (slope 0.2), gelu (exact) "
     "or swish/silu, as Keras"},
    {"depthwise", "use_bias", NULL, 0, MR_KEY_BOOL, MR_LAY(use_bias), "1", 0, 1, 0, 0, NULL, 0,
     "add a bias"},
    {"depthwise", "kernel_initializer", "depthwise_initializer", 0, MR_KEY_ENUM,
     MR_LAY(kernel_initializer), "glorot_uniform", 0, 0, 0, 0, mr_initializer_names, 0,
     "the kernel's initial values (Keras's names)"},
    {"depthwise", "kernel_l2", "depthwise_regularizer", MR_PY_NONE | MR_PY_L2, MR_KEY_FLOAT,
     MR_LAY(kernel_l2), "0", 0, 1, 0, 1, NULL, 0,
     "L2 penalty x * sum(kernel^2) in the loss (Keras depthwise_regularizer=L2(x)), as "
     "[conv2d]'s"},
};

const mr_layer_ops mr_depthwise_ops = {
    .class_name = "DepthwiseConv2D",
    .keras_name = "depthwise_conv2d",
    .keras_args = depthwise_keras_args,
    .keras_has_weights = 1,
    .section_help =
        "depthwise 2-D convolution, NHWC: each channel with its own depth_multiplier filters "
        "(DepthwiseConv2D); kernel (kh, kw, in, depth_multiplier), bias (in x depth_multiplier)",
    .keys = MR_KEYS(depthwise_keys),
    .keras_config = depthwise_keras_config,
    .keras_build_config = 1,
    .setup = depthwise_setup,
    .init = depthwise_init,
    .has_activation = 1,
};
