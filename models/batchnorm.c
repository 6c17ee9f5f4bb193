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

const mr_layer_ops mr_batchnorm_ops = {
    .class_name = "BatchNormalization",
    .keras_name = "batch_normalization",
    .keras_config = bn_keras_config,
    .keras_build_config = 1,
    .setup = bn_setup,
    .init = bn_init,
    .whole_batch = 1,
};
