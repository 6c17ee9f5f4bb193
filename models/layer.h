/* layer.h: the layer interface (a small vtable) and what every layer shares.
 *
 * Tensors are float32, NHWC (channels last, as Keras); a layer sees a batch
 * as a row-major (batch, per-example size) block. Weights use Keras's shapes:
 * Dense kernel (in, out), Conv2D kernel (kh, kw, in_ch, out_ch), bias (out).
 * A layer does not own its weights: the model puts every trainable weight of
 * a replica in one flat buffer (and its gradient in a twin buffer) and hands
 * each layer views into them. */
#ifndef MR_LAYER_H
#define MR_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "../runtime/backend.h"
#include "../runtime/error.h"
#include "config.h"

/* Shape of one example (no batch axis): rank 3 is (H, W, C), rank 1 is (F). */
typedef struct mr_shape {
    int rank;
    int d[3];
} mr_shape;

static inline int64_t mr_shape_size(mr_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.rank; i++)
        n *= s.d[i];
    return n;
}

#define MR_MAX_WEIGHTS 4

/* One named weight of a layer ("kernel", "bias", "gamma", "moving_mean", ...). */
typedef struct mr_weight {
    char name[24];
    int rank;
    int dims[4];   /* Keras shape */
    int64_t size;  /* product of dims */
    int trainable; /* 1: in the parameter buffer with a gradient; 0: in the state buffer */
    float *data;   /* view set by the model */
    float *grad;   /* view set by the model; NULL when not trainable */
} mr_weight;

/* What a forward/backward call may use besides its tensors: one per replica. */
typedef struct mr_run {
    mr_backend *be;
    int training;        /* 1: training (dropout on, batch statistics); 0: inference */
    uint64_t seed;       /* the job's seed (dropout masks) */
    int64_t step;        /* optimizer step, from 0 (dropout masks) */
    int64_t sample_base; /* position of this shard's row 0 in the global batch (dropout masks) */
    float *scratch;      /* layer scratch, at least the model's max scratch_floats */
    /* Sum n floats over all replicas in place (SyncBatchNormalization); NULL
     * with one replica. Returns MR_OK or a failure that the layer reports. */
    mr_status (*sync_sum)(void *sync_ctx, float *buf, size_t n);
    void *sync_ctx;
    mr_status status; /* a layer that fails (a collective) sets this */
} mr_run;

typedef struct mr_layer mr_layer;

typedef struct mr_layer_ops {
    /* Keras class name for the summary and checkpoints: "Dense", "Conv2D". */
    const char *class_name;
    /* From l->in and l->cfg: set l->out, declare l->w[] (name, rank, dims,
     * trainable) and l->scratch_floats for batches up to max_batch. A shape
     * the layer cannot take is an MR_ERR_CONFIG naming the .cfg line
     * ("FILE:LINE: [conv2d] ..."); `file` is the .cfg path for that message. */
    mr_status (*setup)(mr_layer *l, int max_batch, const char *file, mr_error *err);
    /* Initialises the weights (data already points into the buffers). Trainable
     * kernels: Glorot-uniform from mr_rng_uniform(seed, MR_RNG_STREAM_INIT,
     * l->index, weight index, ...); biases zero; BN gamma 1, moving variance 1.
     * May be NULL (no weights). */
    void (*init)(mr_layer *l, uint64_t seed);
    /* x: (batch, in) -> y: (batch, out). */
    void (*forward)(mr_layer *l, mr_run *run, int batch, const float *x, float *y);
    /* Given dy (batch, out) and the forward's x and y: ADDS this batch's weight
     * gradients into w[i].grad (so micro-batches accumulate; the caller zeroes
     * them per update) and writes dx (batch, in) unless dx is NULL (first layer).
     * dy may be overwritten (it is scratch of the model). */
    void (*backward)(mr_layer *l, mr_run *run, int batch, const float *x, const float *y, float *dy,
                     float *dx);
    /* Frees l->priv. May be NULL. */
    void (*destroy)(mr_layer *l);
    /* 1: y is x under a new shape (Flatten). The model then hands x's buffer
     * on as y and dy on as dx, and calls neither forward nor backward (they
     * still copy, for callers that pass separate buffers): for the usual
     * CNN that is two passes of (B, 5408) floats per step less, and a
     * smaller working set per replica (README, "Weak scaling"). */
    int view;
    /* 1: training needs the whole batch in one pass (batch statistics); the
     * model then never splits a batch into passes (model.h, chunk). */
    int whole_batch;
} mr_layer_ops;

struct mr_layer {
    const mr_layer_ops *ops;
    const mr_layer_cfg *cfg; /* its .cfg section */
    int index;               /* position in the model: 1 = first layer after [input] */
    char name[32];           /* Keras-style: "dense", "dense_1", ... */
    mr_shape in, out;
    int n_weights;
    mr_weight w[MR_MAX_WEIGHTS];
    size_t scratch_floats; /* scratch needed by forward + backward at max batch */
    /* Set by the model on the last layer when its softmax is fused with a
     * cross-entropy loss: the layer then outputs logits (skips the softmax). */
    int logits_out;
    void *priv; /* layer-private state */
};

/* The ops table of a layer kind; NULL for MR_LAYER_INPUT. */
const mr_layer_ops *mr_layer_ops_for(mr_layer_kind kind);

/* Declares weight i of l (helper for setup). */
void mr_layer_declare_weight(mr_layer *l, const char *name, int trainable, int rank, int d0, int d1,
                             int d2, int d3);

/* Glorot-uniform fill: limit sqrt(6 / (fan_in + fan_out)), keyed by (seed, layer, weight). */
void mr_layer_glorot_uniform(const mr_layer *l, int weight, uint64_t seed, int fan_in, int fan_out);

/* Applies an activation in place over n floats of each of `rows` rows of
 * width `width` (softmax is per row; the others ignore the rows). */
void mr_activation_forward(mr_activation act, float *y, int rows, int width);
/* dy (rows, width) *= d act / d x, expressed through the output y. */
void mr_activation_backward(mr_activation act, const float *y, float *dy, int rows, int width);

/* Layer ops tables, one per file in models/. */
extern const mr_layer_ops mr_flatten_ops;    /* flatten.c */
extern const mr_layer_ops mr_dense_ops;      /* dense.c */
extern const mr_layer_ops mr_activation_ops; /* activation.c */
extern const mr_layer_ops mr_conv2d_ops;     /* conv2d.c */
extern const mr_layer_ops mr_maxpool_ops;    /* pool.c */
extern const mr_layer_ops mr_avgpool_ops;    /* pool.c */
extern const mr_layer_ops mr_dropout_ops;    /* dropout.c */
extern const mr_layer_ops mr_batchnorm_ops;  /* batchnorm.c */

#endif
