/* conv2d.c: Conv2D, NHWC: what the layer is on every device.
 *   x: (B, H, W, C)   kernel: (kh, kw, C, F)   bias: (F)   y: (B, OH, OW, F)
 * Shapes (Keras/TF output size and padding, conv_geometry.h), the weights
 * and their Glorot-uniform init. The CPU computes it through im2col and
 * SGEMM (conv2d_cpu.c). */
#include <string.h>

#include "models/conv_geometry.h"
#include "models/keras.h"
#include "runtime/strbuf.h"
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"

static mr_status conv_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    const mr_layer_cfg *c = l->cfg;
    if (l->in.rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [conv2d] needs an image input (H,W,C), got (%d)", file, c->line,
                            l->in.d[0]);
    if (c->filters < 1 || c->size[0] < 1 || c->size[1] < 1 || c->stride[0] < 1 || c->stride[1] < 1)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [conv2d] filters, size and stride must be >= 1", file, c->line);
    mr_window g = mr_window_make(l->in.d[0], l->in.d[1], c);
    if (c->padding == MR_PADDING_VALID && (c->size[0] > g.in_h || c->size[1] > g.in_w))
        return mr_error_set(
            err, MR_ERR_CONFIG,
            "%s:%d: [conv2d] kernel %dx%d is larger than its %dx%d input with valid "
            "padding",
            file, c->line, c->size[0], c->size[1], g.in_h, g.in_w);
    if (g.out_h < 1 || g.out_w < 1 || l->in.d[2] < 1)
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [conv2d] would output an empty shape", file,
                            c->line);
    l->out = (mr_shape){3, {g.out_h, g.out_w, c->filters}};
    mr_layer_declare_weight(l, "kernel", 1, 4, g.k_h, g.k_w, l->in.d[2], c->filters);
    if (c->use_bias) mr_layer_declare_weight(l, "bias", 1, 1, c->filters, 0, 0, 0);
    return MR_OK;
}

static void conv_init(const mr_layer *l, int weight, uint64_t seed, float *out) {
    const mr_layer_cfg *c = l->cfg;
    /* Keras: fan_in = kh*kw*in, fan_out = kh*kw*out */
    int area = c->size[0] * c->size[1];
    if (weight == 0)
        mr_layer_init_kernel(l, 0, seed, area * l->in.d[2], area * c->filters, out);
    else
        memset(out, 0, sizeof(float) * (size_t)c->filters);
}

/* Keras's Conv2D config keys, in its order. */
static void conv_keras_config(const mr_layer *l, mr_sb *b) {
    const mr_layer_cfg *c = l->cfg;
    mr_sb_printf(b,
                 ", \"filters\": %d, \"kernel_size\": [%d, %d], \"strides\": [%d, %d], "
                 "\"padding\": \"%s\", \"data_format\": \"channels_last\", "
                 "\"dilation_rate\": [1, 1], \"groups\": 1, \"activation\": \"%s\", "
                 "\"use_bias\": %s, \"kernel_initializer\": %s, \"bias_initializer\": %s, ",
                 c->filters, c->size[0], c->size[1], c->stride[0], c->stride[1],
                 mr_keras_padding(c->padding), mr_keras_activation(c->activation),
                 c->use_bias ? "true" : "false",
                 mr_keras_initializer(mr_keras_initializer_class(c->kernel_initializer)),
                 mr_keras_initializer("Zeros"));
    mr_keras_kernel_regularizer(b, c->kernel_l2);
    mr_sb_printf(b, ", \"bias_regularizer\": null, \"activity_regularizer\": null, "
                    "\"kernel_constraint\": null, \"bias_constraint\": null");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg conv_keras_args[] = {{"filters", MR_ARG_INT, "filters"},
                                               {"kernel_size", MR_ARG_INTS, "size"},
                                               {"strides", MR_ARG_INTS, "stride"},
                                               {"padding", MR_ARG_PADDING, "padding"},
                                               MR_KERAS_CHANNELS_LAST,
                                               {"dilation_rate", MR_ARG_EQ, "[1, 1]"},
                                               {"groups", MR_ARG_EQ, "1"},
                                               MR_KERAS_KERNEL_ARGS,
                                               MR_KERAS_ARGS_END};

/* [conv2d]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key conv2d_keys[] = {
    {"conv2d", "filters", NULL, 0, MR_KEY_INT, MR_LAY(filters), NULL, 1, 1 << 16, 0, 0, NULL, 0,
     "output channels"},
    {"conv2d", "size", "kernel_size", 0, MR_KEY_INTS, MR_LAY(size), NULL, 1, 1024, 0, 0, NULL, 2,
     "kernel size: k or kh,kw"},
    {"conv2d", "stride", "strides", 0, MR_KEY_INTS, MR_LAY(stride), "1", 1, 1024, 0, 0, NULL, 2,
     "stride: s or sh,sw"},
    {"conv2d", "padding", NULL, 0, MR_KEY_ENUM, MR_LAY(padding), "valid", 0, 0, 0, 0,
     mr_padding_names, 0, "valid or same (as Keras)"},
    {"conv2d", "activation", NULL, MR_PY_NONE, MR_KEY_ENUM, MR_LAY(activation), "linear", 0, 0, 0,
     0, mr_activation_names, 0,
     "linear, relu, sigmoid, tanh, softmax, elu (alpha 1), leaky_relu (slope 0.2), gelu (exact) "
     "or swish/silu, as Keras"},
    {"conv2d", "use_bias", NULL, 0, MR_KEY_BOOL, MR_LAY(use_bias), "1", 0, 1, 0, 0, NULL, 0,
     "add a bias"},
    {"conv2d", "kernel_initializer", NULL, 0, MR_KEY_ENUM, MR_LAY(kernel_initializer),
     "glorot_uniform", 0, 0, 0, 0, mr_initializer_names, 0,
     "the kernel's initial values (Keras's names; he_normal for ReLU networks, He et al. 2015)"},
    {"conv2d", "kernel_l2", "kernel_regularizer", MR_PY_NONE | MR_PY_L2, MR_KEY_FLOAT,
     MR_LAY(kernel_l2), "0", 0, 1, 0, 1, NULL, 0,
     "L2 penalty x * sum(kernel^2) in the loss (Keras kernel_regularizer=L2(x)): gradient 2x * "
     "kernel; in the reported losses too, as Keras reports them"},
};

const mr_layer_ops mr_conv2d_ops = {
    .class_name = "Conv2D",
    .keras_name = "conv2d",
    .keras_args = conv_keras_args,
    .keras_has_weights = 1,
    .section_help = "2-D convolution, NHWC; kernel (kh, kw, in, filters), bias (filters)",
    .keys = MR_KEYS(conv2d_keys),
    .keras_config = conv_keras_config,
    .keras_build_config = 1,
    .setup = conv_setup,
    .init = conv_init,
    .has_activation = 1,
};
