/* config.h: the model .cfg file, parsed with inih, validated by the key tables.
 *
 * A .cfg is INI: [net], [data], an optional [augment], then layer sections in
 * order, starting with [input]. The key tables (models/config_keys.h: the
 * generic one in config_keys.c, each layer kind's own in its definition,
 * mr_layer_ops.keys) hold every key with its type, default, allowed range
 * and help text; they drive parsing, validation, the error messages,
 * docs/usage.md's table and the --help reference. Layer sections also
 * answer to the Keras names of their kind (mr_layer_ops), keys to a Keras
 * argument name the table gives, and values may be spelled as Python
 * writes them. The layer kinds are models/layer_kinds.def's. */
#ifndef MR_CONFIG_H
#define MR_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "runtime/error.h"
#include "runtime/hd.h"

MR_C_BEGIN

/* ResNet-50 as Keras counts its layers (each convolution, batch
 * normalisation, activation and add is one) is 176 after the input. */
#define MR_MAX_LAYERS 256
#define MR_NAME_MAX   32
#define MR_PATH_MAX   1024

typedef enum mr_activation {
    MR_ACTIVATION_LINEAR,
    MR_ACTIVATION_RELU,
    MR_ACTIVATION_SIGMOID,
    MR_ACTIVATION_TANH,
    MR_ACTIVATION_SOFTMAX,
    MR_ACTIVATION_ELU,        /* Keras elu, alpha 1 */
    MR_ACTIVATION_LEAKY_RELU, /* Keras 3 leaky_relu, negative_slope 0.2 */
    /* their gradients need the input: [activation] layers only (config.c) */
    MR_ACTIVATION_GELU,  /* Keras gelu, approximate=False: x Phi(x) */
    MR_ACTIVATION_SWISH, /* x sigmoid(x) */
    MR_ACTIVATION_SILU,  /* the same function under Keras 3's other name */
} mr_activation;

/* 1 for the activations whose gradient needs the input, not only the output. */
static inline int mr_activation_needs_input(mr_activation a) {
    return a == MR_ACTIVATION_GELU || a == MR_ACTIVATION_SWISH || a == MR_ACTIVATION_SILU;
}

/* The layer kinds, in the order of models/layer_kinds.def (the one list of
 * them); MR_LAYER_INPUT, the model's input, first. */
typedef enum mr_layer_kind {
    MR_LAYER_INPUT,
#define MR_LAYER_KIND(ENUM, section, kernels) MR_LAYER_##ENUM,
#include "models/layer_kinds.def"
#undef MR_LAYER_KIND
    MR_LAYER_KIND_COUNT,
} mr_layer_kind;

typedef enum mr_padding { MR_PADDING_VALID, MR_PADDING_SAME } mr_padding;
/* How a [dense] or [conv2d] kernel starts (Keras's variance-scaling
 * initializers; biases start at 0). */
typedef enum mr_initializer {
    MR_INIT_GLOROT_UNIFORM, /* Keras's default */
    MR_INIT_GLOROT_NORMAL,
    MR_INIT_HE_UNIFORM,
    MR_INIT_HE_NORMAL, /* He et al. 2015, for ReLU networks (ResNets) */
} mr_initializer;
/* AdamW is Adam with decoupled weight decay (Keras AdamW: its own class,
 * default weight_decay 0.004); any optimizer takes weight_decay. */
typedef enum mr_optimizer_kind {
    MR_OPTIMIZER_SGD,
    MR_OPTIMIZER_ADAM,
    MR_OPTIMIZER_RMSPROP,
    MR_OPTIMIZER_ADAMW,
} mr_optimizer_kind;
#define MR_ADAMW_WEIGHT_DECAY 0.004f /* Keras AdamW's default */
typedef enum mr_loss_kind {
    MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
    MR_LOSS_CATEGORICAL_CROSSENTROPY,
    MR_LOSS_MSE,
    MR_LOSS_BINARY_CROSSENTROPY,
    MR_LOSS_MAE,   /* mean absolute error */
    MR_LOSS_HUBER, /* Keras Huber, delta MR_HUBER_DELTA */
} mr_loss_kind;
#define MR_HUBER_DELTA 1.0f /* Keras Huber's default delta */
typedef enum mr_lr_scaling { MR_LR_SCALING_LINEAR, MR_LR_SCALING_NONE } mr_lr_scaling;
typedef enum mr_lr_schedule {
    MR_LR_SCHEDULE_CONSTANT,
    MR_LR_SCHEDULE_COSINE,
    MR_LR_SCHEDULE_STEPS, /* piecewise constant: lr_boundaries, lr_factors */
} mr_lr_schedule;
/* A list of numbers of a .cfg key (lr_boundaries, lr_factors, a
 * [normalization]'s statistics). Small: a layer section holds two. */
#define MR_MAX_FLOATS 8
typedef struct mr_floats {
    int n;
    float v[MR_MAX_FLOATS];
} mr_floats;
/* class_weight: one weight per class, so as many as a model has classes.
 * The layout of mr_floats with more room (the parser fills both alike);
 * only [net] has one, so a config stays small (it lives on the stack). */
#define MR_MAX_CLASS_WEIGHTS 1024
typedef struct mr_class_weights {
    int n;
    float v[MR_MAX_CLASS_WEIGHTS];
} mr_class_weights;
/* What a step whose loss or gradients are NaN or infinite does: stop the
 * fit (Keras TerminateOnNaN), or drop its update and go on. */
typedef enum mr_on_nan { MR_ON_NAN_STOP, MR_ON_NAN_SKIP } mr_on_nan;
/* The epoch metric early stopping watches (Keras EarlyStopping's monitor);
 * the losses are minimised, the accuracies maximised (Keras's mode auto). */
typedef enum mr_monitor {
    MR_MONITOR_NONE,
    MR_MONITOR_VAL_LOSS,
    MR_MONITOR_VAL_ACCURACY,
    MR_MONITOR_LOSS,
    MR_MONITOR_ACCURACY,
} mr_monitor;

/* One layer section. Fields a kind does not use keep their defaults. */
typedef struct mr_layer_cfg {
    mr_layer_kind kind;
    int line;       /* line of the [section] header */
    int shape[3];   /* [input] shape=H,W,C or shape=F */
    int shape_rank; /* how many numbers shape had (1..3) */
    int units;      /* [dense] */
    mr_activation activation;
    int filters;   /* [conv2d] */
    int size[2];   /* kernel or pool size (h, w) */
    int stride[2]; /* stride (h, w); 0 = same as size for pools, 1 for conv */
    mr_padding padding;
    int use_bias;
    mr_initializer kernel_initializer; /* [dense], [conv2d] */
    float kernel_l2; /* [dense], [conv2d]: Keras kernel_regularizer=L2(kernel_l2); 0 none */
    float rate;      /* the dropouts' */
    float momentum;  /* [batchnorm] */
    float epsilon;   /* [batchnorm], [layernorm] */
    int sync;        /* [batchnorm] global batch statistics across replicas */
    int pad[4];      /* [zeropad] rows added above, below; columns left, right */
    int center;      /* [layernorm]: a trainable beta (Keras center) */
    int scale;       /* [layernorm]: a trainable gamma (Keras scale) */
    float rescale;   /* [rescaling] y = x * rescale + offset */
    float offset;    /* [rescaling] */
    /* [normalization]: the statistics, one per channel (the last axis) or
     * one for all; n 0: adapted to the training data at a fresh start */
    mr_floats mean, variance;
    /* [depthwise]: output channels per input channel; dilation_rate (1
     * only); kernel_initializer and kernel_l2 are Keras's
     * depthwise_initializer and depthwise_regularizer there */
    int depth_multiplier;
    int dilation[2];
    /* [relu]: y = min(x, max_value) above threshold (max_value < 0: none,
     * Keras's None), negative_slope * (x - threshold) below it */
    float max_value, negative_slope, threshold;
    int axis;            /* [softmax]: -1 only; [batchnorm]: -1 or the last axis's index */
    int keepdims;        /* [globalmaxpool]: (1, 1, C) instead of (C) */
    int target_shape[3]; /* [reshape]: one example's new shape, one -1 allowed */
    int target_rank;     /* how many numbers target_shape had (1 or 3) */
    int flip_mode;       /* [randomflip]: models/randomflip.h's MR_RANDOMFLIP_* */
    /* Any layer: `name = NAME` (NAME "" when not given) and what it takes:
     * `input = NAME or -N` (its input; -1, the section just before, by
     * default) and, for [add] and [concatenate], `from = NAME or -N` (the
     * output added to the input, or joined after it). The text is kept for
     * messages; cross-checking resolves it into src[]: the index in
     * mr_config.layers of the section whose output is taken (0 = [input],
     * the model's input), -1 where none. */
    char name[MR_NAME_MAX];
    char input_ref[MR_NAME_MAX];
    char from_ref[MR_NAME_MAX];
    int src[2]; /* src[0]: the input; src[1]: [add]'s or [concatenate]'s from */
} mr_layer_cfg;

/* "every N epochs" or "every N steps" */
typedef struct mr_every {
    int64_t n;
    int steps; /* 1: n counts updates; 0: epochs */
} mr_every;

typedef struct mr_net_cfg {
    int batch;        /* per replica */
    int global_batch; /* 0 = batch x replicas */
    int epochs;
    mr_optimizer_kind optimizer;
    float learning_rate;
    float momentum;
    int nesterov;
    float beta1, beta2, epsilon;
    float rho;          /* rmsprop: decay of the mean square */
    float weight_decay; /* decoupled, every optimizer: w -= w * weight_decay * lr; 0 none */
    /* gradient clipping, at most one (Keras): each weight's gradient to
     * norm clipnorm, all of them to global norm global_clipnorm, or each
     * element to [-clipvalue, clipvalue]; 0 none */
    float clipnorm, global_clipnorm, clipvalue;
    mr_loss_kind loss;
    int from_logits;       /* cross-entropy: the last layer's outputs are logits */
    float label_smoothing; /* cross-entropy: targets (1 - s) onehot + s / classes */
    /* the training loss's weight of each class (n 0: none; Keras fit's class_weight) */
    mr_class_weights class_weight;
    int64_t seed;
    int shuffle;
    float validation_split;
    mr_lr_scaling lr_scaling;
    float warmup_epochs;
    mr_lr_schedule lr_schedule; /* after the warmup */
    float lr_alpha;             /* cosine: final rate as a fraction of the peak */
    mr_floats lr_boundaries;    /* steps: epochs (increasing) where the rate changes */
    mr_floats lr_factors;       /* steps: the rate's factor from each boundary on */
    int accumulate;
    char checkpoint[MR_PATH_MAX]; /* "" = none; resolved against the .cfg file's folder */
    mr_every checkpoint_every;
    mr_on_nan on_nan; /* a step with a non-finite loss or gradient */
    int nan_patience; /* skip: stop after this many skipped steps in a row */
    int cuda_graphs;  /* GPUs: replay the steady step as a CUDA graph (strategies/fit_graph.c) */
    /* Keras EarlyStopping: stop after `patience` epochs in which `early_stopping`
     * did not improve by more than min_delta; restore_best_weights ends with
     * the best epoch's weights */
    mr_monitor early_stopping;
    int patience;
    float min_delta;
    mr_monitor save_best_only; /* --save holds the epoch best by this (Keras ModelCheckpoint) */
    int restore_best_weights;
    /* Keras ReduceLROnPlateau: after reduce_lr_patience epochs in which the
     * metric did not improve by more than reduce_lr_min_delta, the rate
     * becomes max(rate x reduce_lr_factor, min_lr), then reduce_lr_cooldown
     * epochs without counting */
    mr_monitor reduce_lr_on_plateau;
    float reduce_lr_factor;
    int reduce_lr_patience;
    float reduce_lr_min_delta;
    int reduce_lr_cooldown;
    float min_lr;
    int top_k;     /* > 0: validation and test report the top-k accuracy (Keras's) */
    int per_class; /* validation and test report each class's accuracy and count */
} mr_net_cfg;

typedef struct mr_data_cfg {
    char train_images[MR_PATH_MAX]; /* resolved against the .cfg file's folder */
    char train_labels[MR_PATH_MAX];
    char val_images[MR_PATH_MAX]; /* "" : none (validation_split, or no validation) */
    char val_labels[MR_PATH_MAX];
    char test_images[MR_PATH_MAX];
    char test_labels[MR_PATH_MAX];
    float scale;
    int standardize;
} mr_data_cfg;

typedef struct mr_augment_cfg {
    int present; /* 1 if the file had an [augment] section */
    int line;    /* its [augment] header */
    int flip;    /* random horizontal flip */
    int shift;   /* random shift, pixels, each axis, zero fill */
} mr_augment_cfg;

typedef struct mr_config {
    char path[MR_PATH_MAX]; /* the .cfg file as given ("<string>" for parsed text) */
    char *text;             /* the whole file, kept for checkpoints */
    mr_net_cfg net;
    mr_data_cfg data;
    mr_augment_cfg augment;
    int n_layers; /* including [input] at index 0 */
    mr_layer_cfg layers[MR_MAX_LAYERS];
    /* 1: not a chain: some layer takes another output than the one of the
     * section just before it (`input =`), or merges two ([add]). */
    int graph;
} mr_config;

/* Parses and validates a .cfg file. Errors: "PATH:LINE: what" (MR_ERR_CONFIG),
 * or "PATH: cannot open: reason" (MR_ERR_IO). Free with mr_config_free. */
mr_status mr_config_load(const char *path, mr_config *cfg, mr_error *err);

/* The same for text in memory; `name` stands in for the path in messages and
 * relative data paths resolve against `base_dir` (NULL: the current folder). */
mr_status mr_config_parse(const char *text, const char *name, const char *base_dir, mr_config *cfg,
                          mr_error *err);

void mr_config_free(mr_config *cfg);

/* Section name of a layer kind ("dense"; models/layer_kinds.c). */
const char *mr_layer_kind_name(mr_layer_kind kind);
/* 1 for the kinds that merge a second input, `from =` ([add],
 * [concatenate]), 0 for the others. */
int mr_layer_kind_merges(mr_layer_kind kind);
const char *mr_activation_name(mr_activation act);
const char *mr_optimizer_name(mr_optimizer_kind opt);
const char *mr_loss_name(mr_loss_kind loss);
const char *mr_initializer_name(mr_initializer init);

/* Writes the reference of every section and key, then their Keras
 * spellings: Markdown tables when markdown is nonzero (docs/usage.md's),
 * plain text otherwise (--help-config). */
void mr_config_write_reference(FILE *out, int markdown);

MR_C_END

#endif
