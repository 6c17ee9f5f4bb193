/* normalization.c: Normalization (Keras 3.15 layers.Normalization(axis=-1)
 * after adapt()), preprocessing in the model:
 *   x: (B, ..., C) -> y: (B, ..., C) = (x - mean[c]) / max(sqrt(variance[c]), 1e-7)
 *   dx = dy / max(sqrt(variance[c]), 1e-7)
 * The statistics are non-trainable state as Keras stores them: mean (C),
 * variance (C) and count () (an int64 in Keras's files, which Keras 3
 * keeps for older files and leaves 0), so checkpoints, .h5 and .keras
 * files carry them and Keras loads them. They come from the .cfg (mean,
 * variance), from a file (resume, --init-weights), or from the training
 * rows at the start of a fresh fit (mr_model_adapt). The kernels are
 * backends/cpu/normalization_cpu.c and backends/cuda/normalization_cuda.cu,
 * over elementwise.h's mr_normalize. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/model.h"
#include "runtime/dataset.h"
#include "runtime/elementwise.h"
#include "runtime/strbuf.h"

/* The channels: the last axis of one example. */
static int channels(mr_shape s) {
    return s.d[s.rank - 1];
}

static mr_status normalization_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    const int C = channels(l->in);
    const mr_floats *st[2] = {&l->cfg->mean, &l->cfg->variance};
    const char *key[2] = {"mean", "variance"};
    for (int k = 0; k < 2; k++)
        if (st[k]->n > 1 && st[k]->n != C)
            return mr_error_set(err, MR_ERR_CONFIG,
                                "%s:%d: [normalization] %s has %d numbers; the input has %d "
                                "channels (last axis): give one per channel, or one for all",
                                file, l->cfg->line, key[k], st[k]->n, C);
    l->out = l->in;
    mr_layer_declare_weight(l, "mean", 0, 1, C, 0, 0, 0);
    mr_layer_declare_weight(l, "variance", 0, 1, C, 0, 0, 0);
    mr_layer_declare_weight(l, "count", 0, 0, 0, 0, 0, 0);
    l->w[2].keras_int64 = 1;
    return MR_OK;
}

/* The .cfg's statistics (one value broadcast over the channels), or
 * Keras's initial ones (mean 0, variance 1) until adapted; count 0. */
static void normalization_init(const mr_layer *l, int weight, uint64_t seed, float *out) {
    (void)seed;
    const mr_weight *w = &l->w[weight];
    const mr_floats *f = weight == 0 ? &l->cfg->mean : weight == 1 ? &l->cfg->variance : NULL;
    for (int64_t i = 0; i < w->size; i++)
        out[i] = f && f->n ? f->v[f->n == 1 ? 0 : i] : weight == 1 ? 1.0f : 0.0f;
}

/* Keras's Normalization config keys after adapt(): the statistics are in
 * the weights, not the config. */
static void normalization_keras_config(const mr_layer *l, mr_sb *b) {
    (void)l;
    mr_sb_printf(b, ", \"axis\": [-1], \"invert\": false, \"mean\": null, \"variance\": null");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg normalization_keras_args[] = {{"axis", MR_ARG_EQ, "-1"},
                                                        {"mean", MR_ARG_NUMS, "mean"},
                                                        {"variance", MR_ARG_NUMS, "variance"},
                                                        {"invert", MR_ARG_EQ, "false"},
                                                        MR_KERAS_ARGS_END};

/* [normalization]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key normalization_keys[] = {
    {"normalization", "mean", NULL, MR_PY_NONE, MR_KEY_FLOATS, MR_LAY(mean), "", -MR_KEY_BIG,
     MR_KEY_BIG, 0, 0, NULL, MR_MAX_FLOATS,
     "the mean of each channel (last axis), or one for all; with variance; not given: adapted "
     "to the training data at the start of a fresh fit (Keras adapt)"},
    {"normalization", "variance", NULL, MR_PY_NONE, MR_KEY_FLOATS, MR_LAY(variance), "", 0,
     MR_KEY_BIG, 0, 0, NULL, MR_MAX_FLOATS,
     "the variance of each channel, or one for all; with mean"},
};

const mr_layer_ops mr_normalization_ops = {
    .class_name = "Normalization",
    .keras_name = "normalization",
    .keras_args = normalization_keras_args,
    .keras_has_weights = 1,
    .section_help =
        "(x - mean) / max(sqrt(variance), 1e-7) per channel (Normalization: preprocessing in the "
        "model)",
    .keys = MR_KEYS(normalization_keys),
    .keras_config = normalization_keras_config,
    .keras_build_config = 1,
    .setup = normalization_setup,
    .init = normalization_init,
};

/* Rows converted per pass of the adaptation. */
#define ADAPT_ROWS 256

mr_status mr_model_adapt(mr_model *m, const mr_dataset *ds, int64_t count, int *adapted,
                         mr_error *err) {
    *adapted = 0;
    for (int i = 0; i < m->n_layers; i++) {
        mr_layer *l = &m->layers[i];
        if (l->cfg->kind != MR_LAYER_NORMALIZATION || l->cfg->mean.n > 0) continue;
        /* the [rescaling] layers between the input and this one, input
         * first (config_check.c allows no other kind there) */
        const mr_layer_cfg *chain[MR_MAX_LAYERS];
        int n_chain = 0;
        for (int j = l->cfg->src[0]; j > 0; j = m->cfg->layers[j].src[0])
            chain[n_chain++] = &m->cfg->layers[j];
        const int64_t d = ds->row;
        if (count < 1 || d != m->in_size)
            return mr_error_set(err, MR_ERR_CONFIG,
                                "[normalization] adapts to %lld rows of %lld values; the model "
                                "takes %lld",
                                (long long)count, (long long)d, (long long)m->in_size);
        const int C = channels(l->in);
        float *x = malloc(sizeof(float) * (size_t)(ADAPT_ROWS * d));
        int64_t *rows = malloc(sizeof(int64_t) * ADAPT_ROWS);
        /* (ADAPT_ROWS, label width): multi-hot rows are k wide */
        int32_t *y = malloc(sizeof(int32_t) * ADAPT_ROWS *
                            (size_t)(ds->label_width > 1 ? ds->label_width : 1));
        double *sum = calloc((size_t)C, sizeof(double)), *sq = calloc((size_t)C, sizeof(double));
        if (!x || !rows || !y || !sum || !sq) {
            free(x), free(rows), free(y), free(sum), free(sq);
            return mr_error_set(err, MR_ERR_NOMEM, "out of memory for [normalization] statistics");
        }
        /* two passes in double, rows in order (mean, then squared
         * deviations): the same bits on every replica and process, and no
         * cancellation of a one-pass sq/n - mean^2 */
        for (int pass = 0; pass < 2; pass++)
            for (int64_t r0 = 0; r0 < count; r0 += ADAPT_ROWS) {
                const int n = (int)(count - r0 < ADAPT_ROWS ? count - r0 : ADAPT_ROWS);
                for (int k = 0; k < n; k++)
                    rows[k] = r0 + k;
                /* the model's input as training sees it (scale, standardize) */
                mr_dataset_fill(ds, rows, n, NULL, x, y);
                for (int64_t k = 0; k < (int64_t)n * d; k++) {
                    float v = x[k];
                    for (int c = n_chain - 1; c >= 0; c--)
                        v = mr_rescale(v, chain[c]->rescale, chain[c]->offset);
                    const int ch = (int)(k % C);
                    if (pass == 0)
                        sum[ch] += v;
                    else
                        sq[ch] += ((double)v - sum[ch]) * ((double)v - sum[ch]);
                }
                if (pass == 0 && r0 + n >= count)
                    for (int c = 0; c < C; c++)
                        sum[c] /= (double)(count * (d / C)); /* the mean */
            }
        /* host views of the state: mean, variance, count */
        mr_status st = MR_OK;
        for (int w = 0; w < 3 && st == MR_OK; w++) {
            float *h = mr_model_host_for(m, l->w[w].data);
            for (int c = 0; c < l->w[w].size; c++)
                h[c] = w == 0   ? (float)sum[c]
                       : w == 1 ? (float)(sq[c] / (double)(count * (d / C)))
                                : 0.0f;
            st = mr_model_write(m, l->w[w].data, h, (size_t)l->w[w].size, err);
        }
        free(x), free(rows), free(y), free(sum), free(sq);
        MR_CHECK(st);
        (*adapted)++;
    }
    return MR_OK;
}
