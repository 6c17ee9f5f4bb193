/* layer.c: what all layers share: the kind -> ops table, weight declaration,
 * Glorot-uniform initialisation and the activation functions (whose
 * per-element math lives in runtime/elementwise.h). */
#include "layer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../runtime/elementwise.h"
#include "../runtime/rng.h"
#include "../runtime/hot.h"

const mr_layer_ops *mr_layer_ops_for(mr_layer_kind kind) {
    switch (kind) {
    case MR_LAYER_INPUT:
        return NULL;
    case MR_LAYER_FLATTEN:
        return &mr_flatten_ops;
    case MR_LAYER_DENSE:
        return &mr_dense_ops;
    case MR_LAYER_ACTIVATION:
        return &mr_activation_ops;
    case MR_LAYER_CONV2D:
        return &mr_conv2d_ops;
    case MR_LAYER_MAXPOOL:
        return &mr_maxpool_ops;
    case MR_LAYER_AVGPOOL:
        return &mr_avgpool_ops;
    case MR_LAYER_DROPOUT:
        return &mr_dropout_ops;
    case MR_LAYER_BATCHNORM:
        return &mr_batchnorm_ops;
    case MR_LAYER_KIND_COUNT:
        break;
    }
    return NULL;
}

void mr_layer_declare_weight(mr_layer *l, const char *name, int trainable, int rank, int d0, int d1,
                             int d2, int d3) {
    MR_ASSERT(l->n_weights < MR_MAX_WEIGHTS && rank >= 1 && rank <= 4);
    mr_weight *w = &l->w[l->n_weights++];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->trainable = trainable;
    w->rank = rank;
    int d[4] = {d0, d1, d2, d3};
    w->size = 1;
    for (int i = 0; i < rank; i++) {
        w->dims[i] = d[i];
        w->size *= d[i];
    }
}

void mr_layer_glorot_uniform(const mr_layer *l, int weight, uint64_t seed, int fan_in,
                             int fan_out) {
    const mr_weight *w = &l->w[weight];
    float limit = sqrtf(6.0f / (float)(fan_in + fan_out));
    mr_rng_uniform(seed, MR_RNG_STREAM_INIT, (uint32_t)l->index, (uint32_t)weight, -limit, limit,
                   w->data, w->size);
}

MR_HOT void mr_activation_forward(mr_activation act, float *y, int rows, int width) {
    int64_t n = (int64_t)rows * width;
    switch (act) {
    case MR_ACTIVATION_LINEAR:
        break;
    case MR_ACTIVATION_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = mr_relu(y[i]);
        break;
    case MR_ACTIVATION_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            y[i] = mr_sigmoid(y[i]);
        break;
    case MR_ACTIVATION_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = tanhf(y[i]);
        break;
    case MR_ACTIVATION_SOFTMAX:
        for (int r = 0; r < rows; r++) {
            float *row = y + (int64_t)r * width;
            float mx = row[0], sum = 0.0f;
            for (int j = 1; j < width; j++)
                mx = row[j] > mx ? row[j] : mx;
            for (int j = 0; j < width; j++) {
                row[j] = expf(row[j] - mx);
                sum += row[j];
            }
            float inv = 1.0f / sum;
            for (int j = 0; j < width; j++)
                row[j] *= inv;
        }
        break;
    }
}

MR_HOT void mr_activation_backward(mr_activation act, const float *y, float *dy, int rows,
                                   int width) {
    int64_t n = (int64_t)rows * width;
    switch (act) {
    case MR_ACTIVATION_LINEAR:
        break;
    case MR_ACTIVATION_RELU:
        for (int64_t i = 0; i < n; i++)
            dy[i] *= mr_relu_grad(y[i]);
        break;
    case MR_ACTIVATION_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            dy[i] *= mr_sigmoid_grad(y[i]);
        break;
    case MR_ACTIVATION_TANH:
        for (int64_t i = 0; i < n; i++)
            dy[i] *= mr_tanh_grad(y[i]);
        break;
    case MR_ACTIVATION_SOFTMAX:
        /* dx_j = y_j (dy_j - sum_k dy_k y_k) */
        for (int r = 0; r < rows; r++) {
            const float *yr = y + (int64_t)r * width;
            float *dr = dy + (int64_t)r * width;
            float dot = 0.0f;
            for (int j = 0; j < width; j++)
                dot += dr[j] * yr[j];
            for (int j = 0; j < width; j++)
                dr[j] = yr[j] * (dr[j] - dot);
        }
        break;
    }
}
