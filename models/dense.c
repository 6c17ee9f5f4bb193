/* dense.c: Dense, y = act(x W + b).
 *   x: (B, in)   W "kernel": (in, units)   b "bias": (units)   y: (B, units)
 * Forward and both backward products are single SGEMM calls. */
#include <string.h>

#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/keras.h"
#include "runtime/strbuf.h"

static mr_status dense_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    if (l->in.rank != 1)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [dense] needs a flat input (features); got shape (%d,%d,%d): "
                            "add a [flatten] section before it",
                            file, l->cfg->line, l->in.d[0], l->in.d[1], l->in.d[2]);
    l->out.rank = 1;
    l->out.d[0] = l->cfg->units;
    /* gelu, swish: backward recomputes z = x W + b (B, units) into scratch,
     * their gradient being a function of z, not of the output */
    if (mr_activation_needs_input(l->cfg->activation))
        l->scratch_floats = (size_t)max_batch * (size_t)l->cfg->units;
    mr_layer_declare_weight(l, "kernel", 1, 2, l->in.d[0], l->cfg->units, 0, 0);
    if (l->cfg->use_bias) mr_layer_declare_weight(l, "bias", 1, 1, l->cfg->units, 0, 0, 0);
    return MR_OK;
}

static void dense_init(const mr_layer *l, int weight, uint64_t seed, float *out) {
    if (weight == 0)
        mr_layer_init_kernel(l, 0, seed, l->in.d[0], l->out.d[0], out);
    else
        memset(out, 0, sizeof(float) * (size_t)l->w[weight].size);
}

/* Keras's Dense config keys, in its order. */
static void dense_keras_config(const mr_layer *l, mr_sb *b) {
    const mr_layer_cfg *c = l->cfg;
    mr_sb_printf(b,
                 ", \"units\": %d, \"activation\": \"%s\", \"use_bias\": %s, "
                 "\"kernel_initializer\": %s, \"bias_initializer\": %s, ",
                 c->units, mr_keras_activation(c->activation), c->use_bias ? "true" : "false",
                 mr_keras_initializer(mr_keras_initializer_class(c->kernel_initializer)),
                 mr_keras_initializer("Zeros"));
    mr_keras_kernel_regularizer(b, c->kernel_l2);
    mr_sb_printf(b, ", \"bias_regularizer\": null, \"kernel_constraint\": null, "
                    "\"bias_constraint\": null, \"quantization_config\": null");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg dense_keras_args[] = {
    {"units", MR_ARG_INT, "units"}, MR_KERAS_KERNEL_ARGS, MR_KERAS_ARGS_END};

/* [dense]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key dense_keys[] = {
    {"dense", "units", NULL, 0, MR_KEY_INT, MR_LAY(units), NULL, 1, 1 << 20, 0, 0, NULL, 0,
     "output features"},
    {"dense", "activation", NULL, MR_PY_NONE, MR_KEY_ENUM, MR_LAY(activation), "linear", 0, 0, 0, 0,
     mr_activation_names, 0,
     "linear, relu, sigmoid, tanh, softmax, elu (alpha 1), leaky_relu (slope 0.2), gelu (exact) "
     "or swish/silu, as Keras"},
    {"dense", "use_bias", NULL, 0, MR_KEY_BOOL, MR_LAY(use_bias), "1", 0, 1, 0, 0, NULL, 0,
     "add a bias"},
    {"dense", "kernel_initializer", NULL, 0, MR_KEY_ENUM, MR_LAY(kernel_initializer),
     "glorot_uniform", 0, 0, 0, 0, mr_initializer_names, 0,
     "the kernel's initial values (Keras's names; he_normal for ReLU networks, He et al. 2015)"},
    {"dense", "kernel_l2", "kernel_regularizer", MR_PY_NONE | MR_PY_L2, MR_KEY_FLOAT,
     MR_LAY(kernel_l2), "0", 0, 1, 0, 1, NULL, 0,
     "L2 penalty x * sum(kernel^2) in the loss (Keras kernel_regularizer=L2(x)): gradient 2x * "
     "kernel; in the reported losses too, as Keras reports them"},
};

const mr_layer_ops mr_dense_ops = {
    .class_name = "Dense",
    .keras_name = "dense",
    .keras_args = dense_keras_args,
    .keras_has_weights = 1,
    .section_help = "fully connected layer; kernel (in, units), bias (units)",
    .keys = MR_KEYS(dense_keys),
    .keras_config = dense_keras_config,
    .keras_build_config = 1,
    .setup = dense_setup,
    .init = dense_init,
    .has_activation = 1,
};
