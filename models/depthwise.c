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

const mr_layer_ops mr_depthwise_ops = {
    .class_name = "DepthwiseConv2D",
    .keras_name = "depthwise_conv2d",
    .keras_config = depthwise_keras_config,
    .keras_build_config = 1,
    .setup = depthwise_setup,
    .init = depthwise_init,
    .has_activation = 1,
};
