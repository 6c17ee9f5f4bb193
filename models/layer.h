/* layer.h: the layer interface and what every layer shares.
 *
 * Tensors are float32, NHWC (channels last, as Keras); a layer sees a batch
 * as a row-major (batch, per-example size) block. Weights use Keras's shapes:
 * Dense kernel (in, out), Conv2D kernel (kh, kw, in_ch, out_ch), bias (out).
 * A layer does not own its weights: the model puts every trainable weight of
 * a replica in one flat buffer (and its gradient in a twin buffer) and hands
 * each layer views into them.
 *
 * A layer kind has two tables. mr_layer_ops (models/<kind>.c) is what the
 * layer is on every device: shape inference, its weights and their initial
 * values. mr_layer_kernels is how one device kind computes it: its private
 * state and buffers, forward and backward, in models/<kind>_cpu.c for the
 * CPU (a CUDA build adds .cu siblings); mr_layer_setup picks the table of
 * the context's device kind (models/kernels.h). Tensors and weights are
 * device memory (mr_dfloat *, runtime/dmem.h): only the kernels read them.
 * Callers use the mr_layer_* wrappers, never the tables directly. */
#ifndef MR_LAYER_H
#define MR_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/backend.h"
#include "runtime/error.h"
#include "runtime/hd.h"
#include "runtime/dmem.h"
#include "models/config.h"

MR_C_BEGIN

struct mr_sb;         /* runtime/strbuf.h */
struct mr_config_key; /* models/config_keys.h */
struct mr_keras_arg;  /* models/keras_args.h */

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
    int dims[4];     /* Keras shape */
    int64_t size;    /* product of dims */
    int trainable;   /* 1: in the parameter buffer with a gradient; 0: in the state buffer */
    int keras_int64; /* 1: an int64 in Keras's files (Normalization's count); a float here */
    int64_t offset;  /* where it starts in its buffer (params or state), in floats */
    mr_dfloat *data; /* view set by the model (device memory) */
    mr_dfloat *grad; /* view set by the model; NULL when not trainable */
} mr_weight;

/* The execution context of a forward/backward call: what it may use
 * besides its tensors (the replica's device, training or inference, the
 * random streams' counters, scratch, the SyncBN sum). One per replica. */
typedef struct mr_exec_ctx {
    mr_backend *be;      /* the replica's backend context */
    int training;        /* 1: training (dropout on, batch statistics); 0: inference */
    uint64_t seed;       /* the job's seed (dropout masks) */
    int64_t step;        /* optimizer step, from 0 (dropout masks) */
    int64_t sample_base; /* position of this shard's row 0 in the global batch (dropout masks) */
    mr_dfloat *scratch;  /* layer scratch, at least the model's max scratch_floats (device) */
    /* Sum n floats of device memory over all replicas in place
     * (SyncBatchNormalization); NULL with one replica. Returns MR_OK or a
     * failure (its message already in the caller's error) that the layer
     * returns. */
    mr_status (*sync_sum)(void *sync_ctx, mr_dfloat *buf, size_t n);
    void *sync_ctx;
    mr_error *err; /* where a failing kernel writes its message (may be NULL) */
} mr_exec_ctx;

typedef struct mr_layer mr_layer;

/* What a layer kind is, on every device. */
typedef struct mr_layer_ops {
    /* Keras class name for the summary and checkpoints: "Dense", "Conv2D";
     * a .cfg section of the kind may be named so too (config_keys.c). */
    const char *class_name;
    /* Keras's automatic name for such a layer: "dense", then "dense_1",
     * ... ("max_pooling2d" for MaxPooling2D); a .cfg section name too. */
    const char *keras_name;
    /* Its .cfg section's line in the reference (--help-config). */
    const char *section_help;
    /* Its section's own .cfg keys (models/config_keys.h; MR_KEYS(table)),
     * in the order the reference lists them; NULL, 0: none (the keys of
     * every layer section only). The parser, its checks and the reference
     * read them here. */
    const struct mr_config_key *keys;
    int n_keys;
    /* The arguments of its Keras class's config, each mapped to a .cfg key,
     * held to one value or of no effect here (models/keras_args.h), ending
     * with MR_KERAS_ARGS_END; the importer reads them. NULL: the class is
     * not imported. */
    const struct mr_keras_arg *keras_args;
    /* 1: the Keras class has weights: trainable = false is refused (every
     * weight is trained here). */
    int keras_has_weights;
    /* Appends the Keras config keys of the class that follow "name",
     * "trainable" and "dtype", in the order Keras 3.15 writes them
     * (", \"units\": 4, ..."; models/keras.h has the shared pieces). NULL:
     * none. */
    void (*keras_config)(const mr_layer *l, struct mr_sb *b);
    /* 1: a .keras archive carries this layer's build_config (its input
     * shape), as Keras writes it for layers that build weights, and Flatten. */
    int keras_build_config;
    /* 1: keras_config writes every key of the config object itself, from
     * the first (a class whose get_config is its own: SpatialDropout2D),
     * instead of those after "name", "trainable" and "dtype". */
    int keras_whole_config;
    /* From l->in and l->cfg: set l->out and declare l->w[] (name, rank,
     * dims, trainable). A shape the layer cannot take is an MR_ERR_CONFIG
     * naming the .cfg line ("FILE:LINE: [conv2d] ..."); `file` is the .cfg
     * path for that message. */
    mr_status (*setup)(mr_layer *l, int max_batch, const char *file, mr_error *err);
    /* Writes the initial value of weight `weight` into host memory `out`
     * (l->w[weight].size floats). Trainable kernels: Glorot-uniform from
     * mr_rng_uniform(seed, MR_RNG_STREAM_INIT, l->index, weight index, ...);
     * biases zero; BN gamma 1, moving variance 1. NULL: no weights. */
    void (*init)(const mr_layer *l, int weight, uint64_t seed, float *out);
    /* 1: y is x under a new shape (Flatten). The model then hands x's buffer
     * on as y and dy on as dx, and calls neither forward nor backward (they
     * still copy, for callers that pass separate buffers): for the usual
     * CNN that is two passes of (B, 5408) floats per step less, and a
     * smaller working set per replica (docs/performance.md, "Weak scaling"). */
    int view;
    /* 1: training needs the whole batch in one pass (batch statistics); the
     * model then never splits a batch into passes (model.h, pass_rows). */
    int whole_batch;
    /* 1: a merge: the layer takes a second input, its section's `from =`
     * (Add, Concatenate; mr_layer_kind_merges), which the parser resolves,
     * the plan shapes (in2) and the model hands it (x2, dx2). */
    int merges;
    /* 1: the layer applies its section's `activation` to its output (Dense,
     * Conv2D, Activation). On the last layer, that activation (softmax,
     * sigmoid, linear) decides what the loss takes: probabilities or
     * logits (model_plan.c, output_activation). */
    int has_activation;
} mr_layer_ops;

/* How one device kind computes a layer kind. Tensors are device memory. */
typedef struct mr_layer_kernels {
    /* After ops->setup: the kernels' state in l->priv, its buffers from be
     * (the device's memory), and l->scratch_floats, the scratch forward +
     * backward need at max_batch. May be NULL (no state). */
    mr_status (*setup)(mr_layer *l, mr_backend *be, int max_batch, mr_error *err);
    /* x: (batch, in) -> y: (batch, out). A failure (a device error, a
     * collective) is returned with its message in run->err. */
    mr_status (*forward)(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                         mr_dfloat *y);
    /* Given dy (batch, out) and the forward's x and y: ADDS this batch's weight
     * gradients into w[i].grad (so micro-batches accumulate; the caller zeroes
     * them per update) and writes dx (batch, in) unless dx is NULL (first layer).
     * dy may be overwritten (it is scratch of the model). */
    mr_status (*backward)(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                          const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx);
    /* Frees what setup made. May be NULL. */
    void (*destroy)(mr_layer *l, mr_backend *be);
    /* What the kernels chose that a user should know, after setup ("fwd
     * IMPLICIT_PRECOMP_GEMM, bwd data ALGO_1, bwd filter ALGO_1": the cuDNN
     * algorithms of a GPU convolution) into buf (n bytes); returns 1 where
     * the choice is deterministic (the same bits run after run), 0 where it
     * is not. May be NULL: nothing to say (deterministic). */
    int (*describe)(const mr_layer *l, char *buf, size_t n);
    /* 1: forward and backward honour mr_layer.relu_fused (the model may
     * then fuse a following ReLU [activation] into this layer); 0: they
     * ignore it and the model never sets it. */
    int fuses_relu;
    /* Where weight w lives on this device in another order than Keras's
     * (a GPU convolution keeps its kernel as cuDNN's KRSC, so no step
     * transposes it): returns 1 and, unless src is NULL, writes the
     * weight's w->size floats of src (host memory) into dst in the
     * device's order (to_device 1) or back in Keras's (0); returns 0 for
     * a weight in Keras's order. Its gradient and optimizer slots share
     * the order (the update is elementwise). Host code that crosses the
     * weights to or from the host converts through it (mr_model_read,
     * mr_model_write, mr_layer_init). May be NULL: every weight in
     * Keras's order. */
    int (*device_order)(const mr_layer *l, int w, int to_device, const float *src, float *dst);
} mr_layer_kernels;

struct mr_layer {
    const mr_layer_ops *ops;
    const mr_layer_kernels *kern; /* its device's compute (set by mr_layer_setup) */
    mr_backend *be;               /* the context it was set up on */
    const mr_layer_cfg *cfg;      /* its .cfg section */
    int index;                    /* position in the model: 1 = first layer after [input] */
    char name[32];                /* Keras-style: "dense", "dense_1", ... */
    mr_shape in, out;
    /* A merge layer's ([add], [concatenate]) second input: its shape, set by the model
     * before setup; its tensor x2 (batch, in2) before each forward and
     * backward, and dx2, where backward writes its gradient as dx (NULL:
     * not wanted, the model's input). Unused by the other layers. */
    mr_shape in2;
    const mr_dfloat *x2;
    mr_dfloat *dx2;
    int n_weights;
    mr_weight w[MR_MAX_WEIGHTS];
    size_t scratch_floats; /* scratch needed by forward + backward at max batch */
    /* Set by the model on the last layer when its softmax is fused with a
     * cross-entropy loss: the layer then outputs logits (skips the softmax). */
    int logits_out;
    /* Set by the model where a ReLU [activation] is fused into the layer
     * before it (model.c, fuse_relus; only where that layer's kernels say
     * fuses_relu): relu_fused on that layer, whose forward then writes
     * relu(y) and whose backward first masks dy by y > 0, as the
     * activation would; fused on the activation, which then runs nothing:
     * its output and gradient buffers are that layer's. */
    int relu_fused;
    int fused;
    void *priv; /* the kernels' state */
};

/* The activation l's kernels apply to its output: the .cfg's, or none
 * (linear) where the model fuses the last layer's softmax or sigmoid into
 * the loss (logits_out). Every device kind's kernels ask this one rule. */
static inline mr_activation mr_layer_activation(const mr_layer *l) {
    return l->logits_out ? MR_ACTIVATION_LINEAR : l->cfg->activation;
}

/* What l's kernels chose (mr_layer_kernels.describe) into buf: 1
 * deterministic, 0 not, -1 nothing to say (buf ""). */
int mr_layer_describe(const mr_layer *l, char *buf, size_t n);

/* mr_layer_kernels.device_order of l's kernels: 0 where they have none. */
int mr_layer_device_order(const mr_layer *l, int w, int to_device, const float *src, float *dst);

/* The ops table of a layer kind; NULL for MR_LAYER_INPUT. */
const mr_layer_ops *mr_layer_ops_for(mr_layer_kind kind);

/* Sets up l (ops, cfg, index, in already set) on context be: shape
 * inference and weights (ops->setup), then the kernels of be's device kind
 * (MR_ERR_UNSUPPORTED where this build has none) and their state. Call
 * mr_layer_destroy afterwards, whatever it returned. */
mr_status mr_layer_setup(mr_layer *l, mr_backend *be, int max_batch, const char *file,
                         mr_error *err);
/* The second half of mr_layer_setup, for a layer whose ops->setup has run
 * (a model's plan, model_plan.h): the kernels of be's device kind
 * (MR_ERR_UNSUPPORTED where this build has none, naming `file` and the
 * layer's line) and their state. Call mr_layer_destroy afterwards,
 * whatever it returned. */
mr_status mr_layer_setup_kernels(mr_layer *l, mr_backend *be, int max_batch, const char *file,
                                 mr_error *err);
mr_status mr_layer_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                           mr_dfloat *y);
mr_status mr_layer_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                            const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx);
void mr_layer_destroy(mr_layer *l);

/* Initialises l's weights (w[i].data set) from the seed: each is made on
 * the host (ops->init) and copied to the device, or made in place where
 * the context's memory is host memory. `staging` is host memory for the
 * largest weight (may be NULL then). */
mr_status mr_layer_init(mr_layer *l, uint64_t seed, float *staging, mr_error *err);

/* Declares weight i of l (helper for setup). */
void mr_layer_declare_weight(mr_layer *l, const char *name, int trainable, int rank, int d0, int d1,
                             int d2, int d3);

/* The initial values of kernel `weight` of l into host memory out, by its
 * [dense]/[conv2d] kernel_initializer, keyed by (seed, layer, weight), as
 * Keras's variance-scaling initializers: glorot_uniform limit
 * sqrt(6 / (fan_in + fan_out)), he_uniform sqrt(6 / fan_in); the normal
 * ones truncated at 2 stddev, stddev sqrt(2 / (fan_in + fan_out)) (glorot)
 * or sqrt(2 / fan_in) (he), divided by 0.87962566103423978 (the stddev of
 * a unit normal truncated there) as Keras does. */
void mr_layer_init_kernel(const mr_layer *l, int weight, uint64_t seed, int fan_in, int fan_out,
                          float *out);

/* The layer kinds' definitions, mr_<section>_ops of each line of
 * models/layer_kinds.def, each in its own file of models/. */
#define MR_LAYER_KIND(ENUM, section, kernels) extern const mr_layer_ops mr_##section##_ops;
#include "models/layer_kinds.def"
#undef MR_LAYER_KIND

MR_C_END

#endif
