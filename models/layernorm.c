/* layernorm.c: LayerNormalization over the last axis (Keras 3.15's
 * layers.LayerNormalization(axis=-1)): what the layer is on every device.
 *   x, y: (B, ..., C): each row of C values (an example's features, or the
 *   channels of one pixel of an (H, W, C) example) is normalised on its own
 *   gamma, beta: (C), each present only with [layernorm] scale / center = 1
 * Per row, as keras.ops.layer_normalization computes it: mean and biased
 * variance of the row, inv = rsqrt(var + epsilon) * gamma,
 * y = x * inv + (beta - mean * inv). No batch statistics: training and
 * inference are the same, and rows never meet (any batch split is exact).
 * The per-row math is runtime/elementwise.h's (mr_layernorm_*); the CPU
 * kernels are backends/cpu/layernorm_cpu.c.
 * Relies on: layer.h (the layer contract), keras.h (initializer JSON). */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/keras.h"
#include "runtime/strbuf.h"

/* Weights in Keras's order: gamma (scale), then beta (center); Keras
 * builds neither when its flag is off, so neither do we. */
static mr_status ln_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch, (void)file, (void)err;
    const int C = l->in.d[l->in.rank - 1];
    l->out = l->in;
    if (l->cfg->scale) mr_layer_declare_weight(l, "gamma", 1, 1, C, 0, 0, 0);
    if (l->cfg->center) mr_layer_declare_weight(l, "beta", 1, 1, C, 0, 0, 0);
    return MR_OK;
}

/* gamma 1, beta 0 (Keras's Ones and Zeros) */
static void ln_init(const mr_layer *l, int weight, uint64_t seed, float *out) {
    (void)seed;
    const float v = l->w[weight].name[0] == 'g' ? 1.0f : 0.0f;
    for (int64_t c = 0; c < l->w[weight].size; c++)
        out[c] = v;
}

/* Keras's LayerNormalization config keys, in its order (axis is a list
 * in Keras 3's config). */
static void ln_keras_config(const mr_layer *l, mr_sb *b) {
    const mr_layer_cfg *c = l->cfg;
    mr_sb_printf(b, ", \"axis\": [-1], \"epsilon\": ");
    mr_sb_float(b, c->epsilon);
    mr_sb_printf(b,
                 ", \"center\": %s, \"scale\": %s, \"rms_scaling\": false, "
                 "\"beta_initializer\": %s, \"gamma_initializer\": %s, "
                 "\"beta_regularizer\": null, \"gamma_regularizer\": null, "
                 "\"beta_constraint\": null, \"gamma_constraint\": null",
                 c->center ? "true" : "false", c->scale ? "true" : "false",
                 mr_keras_initializer("Zeros"), mr_keras_initializer("Ones"));
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg ln_keras_args[] = {{"axis", MR_ARG_EQ, "-1"},
                                             {"epsilon", MR_ARG_NUM, "epsilon"},
                                             {"center", MR_ARG_BOOL, "center"},
                                             {"scale", MR_ARG_BOOL, "scale"},
                                             {"rms_scaling", MR_ARG_EQ, "false"},
                                             {"beta_initializer", MR_ARG_IGNORE, NULL},
                                             {"gamma_initializer", MR_ARG_IGNORE, NULL},
                                             {"beta_regularizer", MR_ARG_NULL, NULL},
                                             {"gamma_regularizer", MR_ARG_NULL, NULL},
                                             {"beta_constraint", MR_ARG_NULL, NULL},
                                             {"gamma_constraint", MR_ARG_NULL, NULL},
                                             MR_KERAS_ARGS_END};

/* [layernorm]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key layernorm_keys[] = {
    {"layernorm", "epsilon", NULL, 0, MR_KEY_FLOAT, MR_LAY(epsilon), "0.001", 0, 1, 1, 0, NULL, 0,
     "added to the variance (Keras default 0.001)"},
    {"layernorm", "center", NULL, 0, MR_KEY_BOOL, MR_LAY(center), "1", 0, 1, 0, 0, NULL, 0,
     "add a trainable offset beta (Keras center); 0: no beta weight"},
    {"layernorm", "scale", NULL, 0, MR_KEY_BOOL, MR_LAY(scale), "1", 0, 1, 0, 0, NULL, 0,
     "multiply by a trainable gamma (Keras scale); 0: no gamma weight"},
};

const mr_layer_ops mr_layernorm_ops = {
    .class_name = "LayerNormalization",
    .keras_name = "layer_normalization",
    .keras_args = ln_keras_args,
    .keras_has_weights = 1,
    .section_help = "normalisation of each example over the last axis (LayerNormalization)",
    .keys = MR_KEYS(layernorm_keys),
    .keras_config = ln_keras_config,
    .keras_build_config = 1,
    .setup = ln_setup,
    .init = ln_init,
};
