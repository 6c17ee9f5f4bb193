/* batchnorm.c: BatchNormalization over the last axis (channels, NHWC): what
 * the layer is on every device.
 *   x, y: (B, ..., C)   gamma, beta, moving_mean, moving_variance: (C)
 * Training: statistics of this replica's batch (N = B * H * W values per
 * channel; biased variance, as Keras 3 uses for both the normalisation and
 * the moving average), moving averages updated as Keras does,
 * moving = moving * momentum + batch * (1 - momentum). With sync=1 and
 * several replicas (run->sync_sum set) the statistics are those of the
 * global batch (SyncBatchNormalization): one sync_sum of 2C+1 floats in
 * forward (sums of x and x^2, and the count) and one in backward (sums of
 * dy and dy * xhat, and the count). Inference: the moving averages. The
 * CPU kernels are batchnorm_cpu.c.
 * Relies on: layer.h (the layer contract, mr_exec_ctx.sync_sum). */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/keras.h"
#include "runtime/strbuf.h"

static mr_status bn_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    /* axis counts the batch axis: the last of (B, ..., C) is in.rank */
    if (l->cfg->axis != -1 && l->cfg->axis != l->in.rank)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [batchnorm] axis = %d is not the input's last axis (-1 or "
                            "%d): only the channels are normalised",
                            file, l->cfg->line, l->cfg->axis, l->in.rank);
    int C = l->in.d[l->in.rank - 1];
    l->out = l->in;
    mr_layer_declare_weight(l, "gamma", 1, 1, C, 0, 0, 0);
    mr_layer_declare_weight(l, "beta", 1, 1, C, 0, 0, 0);
    mr_layer_declare_weight(l, "moving_mean", 0, 1, C, 0, 0, 0);
    mr_layer_declare_weight(l, "moving_variance", 0, 1, C, 0, 0, 0);
    return MR_OK;
}

/* gamma 1, beta 0, moving mean 0, moving variance 1 */
static void bn_init(const mr_layer *l, int weight, uint64_t seed, float *out) {
    (void)seed;
    const float v = weight == 0 || weight == 3 ? 1.0f : 0.0f;
    for (int64_t c = 0; c < l->w[weight].size; c++)
        out[c] = v;
}

/* Keras's BatchNormalization config keys, in its order (synchronized:
 * SyncBatchNormalization, [batchnorm] sync). */
static void bn_keras_config(const mr_layer *l, mr_sb *b) {
    const mr_layer_cfg *c = l->cfg;
    mr_sb_printf(b, ", \"axis\": -1, \"momentum\": ");
    mr_sb_float(b, c->momentum);
    mr_sb_printf(b, ", \"epsilon\": ");
    mr_sb_float(b, c->epsilon);
    mr_sb_printf(b,
                 ", \"center\": true, \"scale\": true, \"beta_initializer\": %s, "
                 "\"gamma_initializer\": %s, \"moving_mean_initializer\": %s, "
                 "\"moving_variance_initializer\": %s, \"beta_regularizer\": null, "
                 "\"gamma_regularizer\": null, \"beta_constraint\": null, "
                 "\"gamma_constraint\": null, \"synchronized\": %s, \"renorm\": false, "
                 "\"renorm_clipping\": null, \"renorm_momentum\": 0.99",
                 mr_keras_initializer("Zeros"), mr_keras_initializer("Ones"),
                 mr_keras_initializer("Zeros"), mr_keras_initializer("Ones"),
                 c->sync ? "true" : "false");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg bn_keras_args[] = {
    {"axis", MR_ARG_INT, "axis"},
    {"momentum", MR_ARG_NUM, "momentum"},
    {"epsilon", MR_ARG_NUM, "epsilon"},
    {"center", MR_ARG_EQ, "true"},
    {"scale", MR_ARG_EQ, "true"},
    {"beta_initializer", MR_ARG_IGNORE, NULL},
    {"gamma_initializer", MR_ARG_IGNORE, NULL},
    {"moving_mean_initializer", MR_ARG_IGNORE, NULL},
    {"moving_variance_initializer", MR_ARG_IGNORE, NULL},
    {"beta_regularizer", MR_ARG_NULL, NULL},
    {"gamma_regularizer", MR_ARG_NULL, NULL},
    {"beta_constraint", MR_ARG_NULL, NULL},
    {"gamma_constraint", MR_ARG_NULL, NULL},
    {"synchronized", MR_ARG_BOOL, "sync"},
    {"renorm", MR_ARG_EQ, "false"},
    {"renorm_clipping", MR_ARG_NULL, NULL},
    {"renorm_momentum", MR_ARG_IGNORE, NULL}, /* no effect: renorm off */
    MR_KERAS_ARGS_END};

/* [batchnorm]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key batchnorm_keys[] = {
    {"batchnorm", "momentum", NULL, 0, MR_KEY_FLOAT, MR_LAY(momentum), "0.99", 0, 1, 0, 1, NULL, 0,
     "moving average momentum (Keras default 0.99)"},
    {"batchnorm", "epsilon", NULL, 0, MR_KEY_FLOAT, MR_LAY(epsilon), "0.001", 0, 1, 1, 0, NULL, 0,
     "added to the variance (Keras default 0.001)"},
    {"batchnorm", "axis", NULL, 0, MR_KEY_INT, MR_LAY(axis), "-1", -1, 3, 0, 0, NULL, 0,
     "the normalised axis, the last (channels): -1, or its index counting the batch axis "
     "(Keras's axis=3 of images, 1 of feature vectors)"},
    {"batchnorm", "sync", "synchronized", 0, MR_KEY_BOOL, MR_LAY(sync), "0", 0, 1, 0, 0, NULL, 0,
     "batch statistics over the global batch (SyncBatchNormalization)"},
};

const mr_layer_ops mr_batchnorm_ops = {
    .class_name = "BatchNormalization",
    .keras_name = "batch_normalization",
    .keras_args = bn_keras_args,
    .keras_has_weights = 1,
    .section_help = "batch normalisation over the channels (last axis)",
    .keys = MR_KEYS(batchnorm_keys),
    .keras_config = bn_keras_config,
    .keras_build_config = 1,
    .setup = bn_setup,
    .init = bn_init,
    .whole_batch = 1,
};
