/* config.c: .cfg parsing with inih, driven by one table of keys.
 *
 * inih reports key=value pairs but not section headers (Debian builds it
 * without INI_CALL_HANDLER_ON_NEW_SECTION), and layer sections repeat
 * ([dense] twice) and may be empty ([flatten]). So we feed inih through
 * ini_parse_stream with our own line reader: the reader sees every raw line,
 * counts lines (for error messages) and opens a new section record whenever a
 * header goes by; the key handler then fills the most recent section.
 *
 * Keras's spellings read as ours: a layer section's Keras class and
 * automatic names come from its kind's ops table (layer.h), a key's Keras
 * argument name from the key table, and py_value turns a value written as
 * Python (quotes, tuples, None, l2(x)) into the text the parsers take. */
#include "models/config.h"
#include "runtime/file_kind.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "models/layer.h"

/* ---- the key table ---------------------------------------------------- */

typedef enum key_type {
    KEY_INT,
    KEY_INT64,
    KEY_FLOAT,
    KEY_BOOL,
    KEY_ENUM,
    KEY_PATH,
    KEY_INTS,
    KEY_FLOATS, /* comma-separated numbers into an mr_floats (or mr_class_weights), n_ints of
                   them at most */
    KEY_EVERY,  /* "N", "N epochs" or "N steps" into an mr_every */
    KEY_NAME,   /* a layer's name: letters, digits, '_', at most MR_NAME_MAX - 1 */
    KEY_REF     /* an earlier layer: its name, or -N (N sections back) */
} key_type;

/* The section of the keys that every layer section takes (name, input). */
#define ANY_LAYER "any layer"

/* Which struct a section's keys live in. */
typedef enum sec_kind { SEC_NET, SEC_DATA, SEC_AUGMENT, SEC_LAYER } sec_kind;

/* What a value spelled as Python (Keras's arguments) may also be, beyond
 * the quoted strings, True/False and tuples or lists every key takes. */
enum {
    PY_NONE = 1,  /* None: the key's default (Keras's None means the same here) */
    PY_L2 = 2,    /* l2(x), L2(x), L2(l2=x), "l2" (x 0.01): Keras's L2 regularizer, as x */
    PY_PAIRS = 4, /* ((t, b), (l, r)): Keras's ZeroPadding2D padding */
};

typedef struct key_def {
    const char *section;
    const char *key;
    const char *keras; /* Keras's argument name where it differs ("kernel_size"), or NULL */
    unsigned py;       /* PY_* : the Python spellings the key also takes */
    key_type type;
    size_t offset;            /* into mr_net_cfg, mr_data_cfg, mr_augment_cfg or mr_layer_cfg */
    const char *def;          /* default as text; NULL = required */
    double min, max;          /* allowed range (numbers, and counts for KEY_INTS) */
    int open_min;             /* 1: min itself is not allowed */
    int open_max;             /* 1: max itself is not allowed */
    const char *const *names; /* KEY_ENUM: allowed values, NULL-terminated */
    int n_ints;               /* KEY_INTS, KEY_FLOATS: how many numbers at most */
    const char *help;
} key_def;

static const char *const activation_names[] = {"linear",  "relu", "sigmoid",    "tanh",
                                               "softmax", "elu",  "leaky_relu", "gelu",
                                               "swish",   "silu", NULL};
static const char *const optimizer_names[] = {"sgd", "adam", "rmsprop", "adamw", NULL};
static const char *const loss_names[] = {"sparse_categorical_crossentropy",
                                         "categorical_crossentropy",
                                         "mse",
                                         "binary_crossentropy",
                                         "mae",
                                         "huber",
                                         NULL};
static const char *const scaling_names[] = {"linear", "none", NULL};
static const char *const schedule_names[] = {"constant", "cosine", "steps", NULL};
static const char *const padding_names[] = {"valid", "same", NULL};
static const char *const initializer_names[] = {"glorot_uniform", "glorot_normal", "he_uniform",
                                                "he_normal", NULL};
static const char *const on_nan_names[] = {"stop", "skip", NULL};
static const char *const monitor_names[] = {"none", "val_loss", "val_accuracy",
                                            "loss", "accuracy", NULL};

#define NET(f)  offsetof(mr_net_cfg, f)
#define DATA(f) offsetof(mr_data_cfg, f)
#define AUG(f)  offsetof(mr_augment_cfg, f)
#define LAY(f)  offsetof(mr_layer_cfg, f)
#define BIG     1e30

static const key_def keys[] = {
    {"net", "batch", NULL, 0, KEY_INT, NET(batch), "32", 1, 1 << 20, 0, 0, NULL, 0,
     "examples per replica per step (the global batch is batch x replicas x accumulate)"},
    {"net", "global_batch", NULL, 0, KEY_INT, NET(global_batch), "0", 0, 1 << 24, 0, 0, NULL, 0,
     "if > 0: the global batch on any replica count, split evenly over the replicas (must "
     "divide; --devices auto picks a count that does); overrides batch and lr_scaling"},
    {"net", "epochs", NULL, 0, KEY_INT, NET(epochs), "1", 1, 100000, 0, 0, NULL, 0,
     "passes over the training split (--epochs overrides)"},
    {"net", "optimizer", NULL, 0, KEY_ENUM, NET(optimizer), "adam", 0, 0, 0, 0, optimizer_names, 0,
     "sgd, adam, rmsprop or adamw (Adam with weight_decay, 0.004 unless given, as Keras AdamW)"},
    {"net", "learning_rate", NULL, 0, KEY_FLOAT, NET(learning_rate), "0.001", 0, 10, 1, 0, NULL, 0,
     "learning rate for a batch of `batch` (with global_batch: for that global batch)"},
    {"net", "momentum", NULL, 0, KEY_FLOAT, NET(momentum), "0", 0, 1, 0, 1, NULL, 0,
     "sgd, rmsprop: momentum"},
    {"net", "nesterov", NULL, 0, KEY_BOOL, NET(nesterov), "0", 0, 1, 0, 0, NULL, 0,
     "sgd: Nesterov momentum"},
    {"net", "beta1", "beta_1", 0, KEY_FLOAT, NET(beta1), "0.9", 0, 1, 0, 1, NULL, 0,
     "adam: beta_1"},
    {"net", "beta2", "beta_2", 0, KEY_FLOAT, NET(beta2), "0.999", 0, 1, 0, 1, NULL, 0,
     "adam: beta_2"},
    {"net", "epsilon", NULL, 0, KEY_FLOAT, NET(epsilon), "1e-7", 0, 1, 1, 0, NULL, 0,
     "adam, adamw, rmsprop: epsilon"},
    {"net", "rho", NULL, 0, KEY_FLOAT, NET(rho), "0.9", 0, 1, 0, 1, NULL, 0,
     "rmsprop: decay of the moving mean square of the gradients (Keras rho)"},
    {"net", "weight_decay", NULL, 0, KEY_FLOAT, NET(weight_decay), "0", 0, 1, 0, 1, NULL, 0,
     "decoupled weight decay, any optimizer: each update first does w -= w x weight_decay x "
     "learning rate (Keras weight_decay; AdamW, SGDW)"},
    {"net", "clipnorm", NULL, PY_NONE, KEY_FLOAT, NET(clipnorm), "0", 0, BIG, 0, 0, NULL, 0,
     "if > 0: each weight's all-reduced gradient is scaled down to this L2 norm (Keras clipnorm)"},
    {"net", "global_clipnorm", NULL, PY_NONE, KEY_FLOAT, NET(global_clipnorm), "0", 0, BIG, 0, 0,
     NULL, 0,
     "if > 0: all the all-reduced gradients together are scaled down to this L2 norm (Keras "
     "global_clipnorm)"},
    {"net", "clipvalue", NULL, PY_NONE, KEY_FLOAT, NET(clipvalue), "0", 0, BIG, 0, 0, NULL, 0,
     "if > 0: each all-reduced gradient element is clipped to [-clipvalue, clipvalue] (Keras "
     "clipvalue)"},
    {"net", "loss", NULL, 0, KEY_ENUM, NET(loss), "sparse_categorical_crossentropy", 0, 0, 0, 0,
     loss_names, 0,
     "sparse_categorical_crossentropy, categorical_crossentropy (one-hot of the labels), "
     "binary_crossentropy (one sigmoid output, labels 0 and 1; or k sigmoid outputs, "
     "multi-hot labels (n, k)), or the regression losses mse, mae, huber (delta 1; also "
     "Keras's mean_squared_error, mean_absolute_error): float targets (n) or (n, k), or one-hot "
     "class ids on a softmax last layer"},
    {"net", "from_logits", NULL, 0, KEY_BOOL, NET(from_logits), "0", 0, 1, 0, 0, NULL, 0,
     "cross-entropy: the last layer outputs logits, not probabilities (Keras from_logits); "
     "needed with a linear last layer, refused with a softmax one"},
    {"net", "label_smoothing", NULL, 0, KEY_FLOAT, NET(label_smoothing), "0", 0, 1, 0, 0, NULL, 0,
     "categorical_crossentropy: targets (1 - s) x one-hot + s / classes (Keras "
     "CategoricalCrossentropy; the sparse one has none); binary_crossentropy: (1 - s) y + s / 2"},
    {"net", "class_weight", NULL, 0, KEY_FLOATS, NET(class_weight), "", 0, BIG, 0, 0, NULL,
     MR_MAX_CLASS_WEIGHTS,
     "one weight per class (0.5, 2, ...): each training example's loss is multiplied by its "
     "class's weight, still divided by the batch size (Keras fit's class_weight); validation "
     "and test losses and the accuracy are not weighted"},
    {"net", "seed", NULL, 0, KEY_INT64, NET(seed), "1", 0, (double)INT64_MAX, 0, 0, NULL, 0,
     "seed of weights, shuffling, dropout and augmentation (--seed overrides)"},
    {"net", "shuffle", NULL, 0, KEY_BOOL, NET(shuffle), "1", 0, 1, 0, 0, NULL, 0,
     "reshuffle the training split every epoch"},
    {"net", "validation_split", NULL, 0, KEY_FLOAT, NET(validation_split), "0", 0, 1, 0, 1, NULL, 0,
     "last fraction of the training data held out for validation (as Keras)"},
    {"net", "lr_scaling", NULL, 0, KEY_ENUM, NET(lr_scaling), "linear", 0, 0, 0, 0, scaling_names,
     0,
     "with batch per replica: linear multiplies the rate by global batch / batch (Goyal et "
     "al. 2017), none leaves it; with global_batch the rate is never scaled"},
    {"net", "warmup_epochs", NULL, 0, KEY_FLOAT, NET(warmup_epochs), "0", 0, 1000, 0, 0, NULL, 0,
     "epochs to ramp linearly from learning_rate to the scaled rate (batch per replica with "
     "lr_scaling = linear only: refused with global_batch or lr_scaling = none)"},
    {"net", "lr_schedule", NULL, 0, KEY_ENUM, NET(lr_schedule), "constant", 0, 0, 0, 0,
     schedule_names, 0,
     "after the warmup: constant, cosine decay over the remaining epochs (Keras CosineDecay), "
     "or steps: piecewise constant (lr_boundaries, lr_factors)"},
    {"net", "lr_alpha", NULL, 0, KEY_FLOAT, NET(lr_alpha), "0", 0, 1, 0, 0, NULL, 0,
     "cosine: the final learning rate as a fraction of the scaled one (Keras alpha)"},
    {"net", "lr_boundaries", NULL, 0, KEY_FLOATS, NET(lr_boundaries), "", 0, 100000, 1, 0, NULL,
     MR_MAX_FLOATS,
     "steps: epochs, increasing, at which the rate changes (30, 60: from the first update of "
     "epoch 31 and of epoch 61)"},
    {"net", "lr_factors", NULL, 0, KEY_FLOATS, NET(lr_factors), "", 0, 1000, 1, 0, NULL,
     MR_MAX_FLOATS,
     "steps: one per boundary, the scaled rate's factor from that boundary on (0.1, 0.01)"},
    {"net", "accumulate", NULL, 0, KEY_INT, NET(accumulate), "1", 1, 1024, 0, 0, NULL, 0,
     "micro-batches per update (gradient accumulation)"},
    {"net", "checkpoint", NULL, 0, KEY_PATH, NET(checkpoint), "", 0, 0, 0, 0, NULL, 0,
     "if set: write checkpoints DIR/NAME-step<N>.h5 of this path, or DIR/step<N>.h5 of a "
     "folder DIR/ (relative: to the .cfg's folder; folders made; --keep prunes them, --resume "
     "auto takes the newest)"},
    {"net", "checkpoint_every", NULL, 0, KEY_EVERY, NET(checkpoint_every), "1 epochs", 1, 1 << 30,
     0, 0, NULL, 0, "how often: N epochs or N steps (updates)"},
    {"net", "on_nan", NULL, 0, KEY_ENUM, NET(on_nan), "stop", 0, 0, 0, 0, on_nan_names, 0,
     "a step whose loss or gradients are NaN or infinite: stop ends the fit with exit 1 (Keras "
     "TerminateOnNaN), skip drops that step's update and goes on"},
    {"net", "nan_patience", NULL, 0, KEY_INT, NET(nan_patience), "10", 1, 1000000, 0, 0, NULL, 0,
     "skip: stop after this many skipped steps in a row"},
    {"net", "early_stopping", NULL, 0, KEY_ENUM, NET(early_stopping), "none", 0, 0, 0, 0,
     monitor_names, 0,
     "stop training when this epoch metric stops improving (Keras EarlyStopping's monitor; "
     "losses fall, accuracies rise)"},
    {"net", "patience", NULL, 0, KEY_INT, NET(patience), "0", 0, 1000000, 0, 0, NULL, 0,
     "early_stopping: epochs without improvement before stopping (Keras patience)"},
    {"net", "min_delta", NULL, 0, KEY_FLOAT, NET(min_delta), "0", 0, BIG, 0, 0, NULL, 0,
     "early_stopping: a change smaller than this is no improvement (Keras min_delta)"},
    {"net", "reduce_lr_on_plateau", NULL, 0, KEY_ENUM, NET(reduce_lr_on_plateau), "none", 0, 0, 0,
     0, monitor_names, 0,
     "cut the learning rate when this epoch metric stops improving (Keras ReduceLROnPlateau's "
     "monitor); needs lr_schedule = constant and no warmup"},
    {"net", "reduce_lr_factor", NULL, 0, KEY_FLOAT, NET(reduce_lr_factor), "0.1", 0, 1, 1, 1, NULL,
     0, "reduce_lr_on_plateau: the rate is multiplied by this (Keras factor)"},
    {"net", "reduce_lr_patience", NULL, 0, KEY_INT, NET(reduce_lr_patience), "10", 0, 1000000, 0, 0,
     NULL, 0, "reduce_lr_on_plateau: epochs without improvement before a cut (Keras patience)"},
    {"net", "reduce_lr_min_delta", NULL, 0, KEY_FLOAT, NET(reduce_lr_min_delta), "0.0001", 0, BIG,
     0, 0, NULL, 0, "reduce_lr_on_plateau: a smaller change is no improvement (Keras min_delta)"},
    {"net", "reduce_lr_cooldown", NULL, 0, KEY_INT, NET(reduce_lr_cooldown), "0", 0, 1000000, 0, 0,
     NULL, 0, "reduce_lr_on_plateau: epochs after a cut before counting again (Keras cooldown)"},
    {"net", "min_lr", NULL, 0, KEY_FLOAT, NET(min_lr), "0", 0, 10, 0, 0, NULL, 0,
     "reduce_lr_on_plateau: the rate never goes below this (Keras min_lr)"},
    {"net", "save_best_only", NULL, 0, KEY_ENUM, NET(save_best_only), "none", 0, 0, 0, 0,
     monitor_names, 0,
     "--save writes the model at each epoch end where this metric improved on every epoch "
     "before (Keras ModelCheckpoint(save_best_only=True, monitor)), not at the end: the file "
     "holds the best epoch's model"},
    {"net", "restore_best_weights", NULL, 0, KEY_BOOL, NET(restore_best_weights), "0", 0, 1, 0, 0,
     NULL, 0,
     "early_stopping: end training with the weights of the best epoch (Keras "
     "restore_best_weights)"},
    {"net", "top_k", NULL, 0, KEY_INT, NET(top_k), "0", 0, 1 << 20, 0, 0, NULL, 0,
     "if > 0: also report the top-k accuracy on the validation and test sets, the fraction whose "
     "label is among the top_k largest outputs, ties at the boundary counted in (Keras "
     "SparseTopKCategoricalAccuracy(k=top_k)); below the number of classes"},
    {"net", "per_class", NULL, 0, KEY_BOOL, NET(per_class), "0", 0, 1, 0, 0, NULL, 0,
     "also report each class's accuracy (correct / examples of the class) and example count on "
     "the validation set after each epoch and on the test set; needs one of them"},

    {"data", "train_images", NULL, 0, KEY_PATH, DATA(train_images), NULL, 0, 0, 0, 0, NULL, 0,
     "training images: IDX (raw or .gz), .npy, file.h5:/dataset, or a folder of class folders of "
     "PNG/JPEG images (labelled by the folders, as Keras image_dataset_from_directory)"},
    {"data", "train_labels", NULL, 0, KEY_PATH, DATA(train_labels), "", 0, 0, 0, 0, NULL, 0,
     "training labels: class ids (integers, or floats with integer values) or one-hot rows (n, "
     "classes), same formats; required unless train_images is a folder"},
    {"data", "val_images", NULL, 0, KEY_PATH, DATA(val_images), "", 0, 0, 0, 0, NULL, 0,
     "validation images (optional; Keras validation_data), instead of validation_split"},
    {"data", "val_labels", NULL, 0, KEY_PATH, DATA(val_labels), "", 0, 0, 0, 0, NULL, 0,
     "validation labels (required with val_images, unless it is a folder)"},
    {"data", "test_images", NULL, 0, KEY_PATH, DATA(test_images), "", 0, 0, 0, 0, NULL, 0,
     "test images (optional)"},
    {"data", "test_labels", NULL, 0, KEY_PATH, DATA(test_labels), "", 0, 0, 0, 0, NULL, 0,
     "test labels (required with test_images, unless it is a folder)"},
    {"data", "scale", NULL, 0, KEY_FLOAT, DATA(scale), "1", 0, 1e6, 1, 0, NULL, 0,
     "multiply inputs by this (e.g. 1/255); a fraction a/b is accepted"},
    {"data", "standardize", NULL, 0, KEY_BOOL, DATA(standardize), "0", 0, 1, 0, 0, NULL, 0,
     "subtract the per-feature mean and divide by the standard deviation of the training split"},

    {"augment", "flip", NULL, 0, KEY_BOOL, AUG(flip), "0", 0, 1, 0, 0, NULL, 0,
     "random horizontal flip (training only)"},
    {"augment", "shift", NULL, 0, KEY_INT, AUG(shift), "0", 0, 64, 0, 0, NULL, 0,
     "random shift up to this many pixels on each axis, zero fill (training only)"},

    {ANY_LAYER, "name", NULL, 0, KEY_NAME, LAY(name), "", 0, 0, 0, 0, NULL, 0,
     "the layer's name (letters, digits, _), for `input =` and `from =` of later layers and "
     "the summary; default: Keras's automatic name (dense_1)"},
    {ANY_LAYER, "input", NULL, 0, KEY_REF, LAY(input_ref), "", 0, 0, 0, 0, NULL, 0,
     "what the layer takes: the output of the layer named so, or -N, N sections back (default "
     "-1: the section just before); not in [input]"},

    {"input", "shape", NULL, 0, KEY_INTS, LAY(shape), NULL, 1, 1 << 24, 0, 0, NULL, 3,
     "shape of one example: H,W,C (images, channels last) or F (features)"},

    {"dense", "units", NULL, 0, KEY_INT, LAY(units), NULL, 1, 1 << 20, 0, 0, NULL, 0,
     "output features"},
    {"dense", "activation", NULL, PY_NONE, KEY_ENUM, LAY(activation), "linear", 0, 0, 0, 0,
     activation_names, 0,
     "linear, relu, sigmoid, tanh, softmax, elu (alpha 1), leaky_relu (slope 0.2), gelu (exact) "
     "or swish/silu, as Keras"},
    {"dense", "use_bias", NULL, 0, KEY_BOOL, LAY(use_bias), "1", 0, 1, 0, 0, NULL, 0, "add a bias"},
    {"dense", "kernel_initializer", NULL, 0, KEY_ENUM, LAY(kernel_initializer), "glorot_uniform", 0,
     0, 0, 0, initializer_names, 0,
     "the kernel's initial values (Keras's names; he_normal for ReLU networks, He et al. 2015)"},
    {"dense", "kernel_l2", "kernel_regularizer", PY_NONE | PY_L2, KEY_FLOAT, LAY(kernel_l2), "0", 0,
     1, 0, 1, NULL, 0,
     "L2 penalty x * sum(kernel^2) in the loss (Keras kernel_regularizer=L2(x)): gradient 2x * "
     "kernel; in the reported losses too, as Keras reports them"},

    {"activation", "activation", NULL, 0, KEY_ENUM, LAY(activation), NULL, 0, 0, 0, 0,
     activation_names, 0,
     "linear, relu, sigmoid, tanh, softmax, elu (alpha 1), leaky_relu (slope 0.2), gelu (exact) "
     "or swish/silu, as Keras"},

    {"conv2d", "filters", NULL, 0, KEY_INT, LAY(filters), NULL, 1, 1 << 16, 0, 0, NULL, 0,
     "output channels"},
    {"conv2d", "size", "kernel_size", 0, KEY_INTS, LAY(size), NULL, 1, 1024, 0, 0, NULL, 2,
     "kernel size: k or kh,kw"},
    {"conv2d", "stride", "strides", 0, KEY_INTS, LAY(stride), "1", 1, 1024, 0, 0, NULL, 2,
     "stride: s or sh,sw"},
    {"conv2d", "padding", NULL, 0, KEY_ENUM, LAY(padding), "valid", 0, 0, 0, 0, padding_names, 0,
     "valid or same (as Keras)"},
    {"conv2d", "activation", NULL, PY_NONE, KEY_ENUM, LAY(activation), "linear", 0, 0, 0, 0,
     activation_names, 0,
     "linear, relu, sigmoid, tanh, softmax, elu (alpha 1), leaky_relu (slope 0.2), gelu (exact) "
     "or swish/silu, as Keras"},
    {"conv2d", "use_bias", NULL, 0, KEY_BOOL, LAY(use_bias), "1", 0, 1, 0, 0, NULL, 0,
     "add a bias"},
    {"conv2d", "kernel_initializer", NULL, 0, KEY_ENUM, LAY(kernel_initializer), "glorot_uniform",
     0, 0, 0, 0, initializer_names, 0,
     "the kernel's initial values (Keras's names; he_normal for ReLU networks, He et al. 2015)"},
    {"conv2d", "kernel_l2", "kernel_regularizer", PY_NONE | PY_L2, KEY_FLOAT, LAY(kernel_l2), "0",
     0, 1, 0, 1, NULL, 0,
     "L2 penalty x * sum(kernel^2) in the loss (Keras kernel_regularizer=L2(x)): gradient 2x * "
     "kernel; in the reported losses too, as Keras reports them"},

    {"depthwise", "size", "kernel_size", 0, KEY_INTS, LAY(size), NULL, 1, 1024, 0, 0, NULL, 2,
     "kernel size: k or kh,kw"},
    {"depthwise", "stride", "strides", 0, KEY_INTS, LAY(stride), "1", 1, 1024, 0, 0, NULL, 2,
     "stride: s or sh,sw"},
    {"depthwise", "padding", NULL, 0, KEY_ENUM, LAY(padding), "valid", 0, 0, 0, 0, padding_names, 0,
     "valid or same (as Keras)"},
    {"depthwise", "depth_multiplier", NULL, 0, KEY_INT, LAY(depth_multiplier), "1", 1, 1 << 12, 0,
     0, NULL, 0, "output channels per input channel"},
    {"depthwise", "dilation", "dilation_rate", 0, KEY_INTS, LAY(dilation), "1", 1, 1, 0, 0, NULL, 2,
     "1 only (Keras's default; dilated windows are not supported)"},
    {"depthwise", "activation", NULL, PY_NONE, KEY_ENUM, LAY(activation), "linear", 0, 0, 0, 0,
     activation_names, 0,
     "linear, relu, sigmoid, tanh, softmax, elu (alpha 1), leaky_relu (slope 0.2), gelu (exact) "
     "or swish/silu, as Keras"},
    {"depthwise", "use_bias", NULL, 0, KEY_BOOL, LAY(use_bias), "1", 0, 1, 0, 0, NULL, 0,
     "add a bias"},
    {"depthwise", "kernel_initializer", "depthwise_initializer", 0, KEY_ENUM,
     LAY(kernel_initializer), "glorot_uniform", 0, 0, 0, 0, initializer_names, 0,
     "the kernel's initial values (Keras's names)"},
    {"depthwise", "kernel_l2", "depthwise_regularizer", PY_NONE | PY_L2, KEY_FLOAT, LAY(kernel_l2),
     "0", 0, 1, 0, 1, NULL, 0,
     "L2 penalty x * sum(kernel^2) in the loss (Keras depthwise_regularizer=L2(x)), as "
     "[conv2d]'s"},

    {"maxpool", "size", "pool_size", 0, KEY_INTS, LAY(size), "2", 1, 1024, 0, 0, NULL, 2,
     "pool size: p or ph,pw"},
    {"maxpool", "stride", "strides", PY_NONE, KEY_INTS, LAY(stride), "0", 0, 1024, 0, 0, NULL, 2,
     "stride: s or sh,sw (0: the pool size, as Keras)"},
    {"maxpool", "padding", NULL, 0, KEY_ENUM, LAY(padding), "valid", 0, 0, 0, 0, padding_names, 0,
     "valid or same"},
    {"avgpool", "size", "pool_size", 0, KEY_INTS, LAY(size), "2", 1, 1024, 0, 0, NULL, 2,
     "pool size: p or ph,pw"},
    {"avgpool", "stride", "strides", PY_NONE, KEY_INTS, LAY(stride), "0", 0, 1024, 0, 0, NULL, 2,
     "stride: s or sh,sw (0: the pool size, as Keras)"},
    {"avgpool", "padding", NULL, 0, KEY_ENUM, LAY(padding), "valid", 0, 0, 0, 0, padding_names, 0,
     "valid or same (same: averages over the valid cells only, as Keras)"},

    {"dropout", "rate", NULL, 0, KEY_FLOAT, LAY(rate), NULL, 0, 1, 0, 1, NULL, 0,
     "fraction of inputs zeroed in training (inverted dropout)"},

    {"batchnorm", "momentum", NULL, 0, KEY_FLOAT, LAY(momentum), "0.99", 0, 1, 0, 1, NULL, 0,
     "moving average momentum (Keras default 0.99)"},
    {"batchnorm", "epsilon", NULL, 0, KEY_FLOAT, LAY(epsilon), "0.001", 0, 1, 1, 0, NULL, 0,
     "added to the variance (Keras default 0.001)"},
    {"batchnorm", "axis", NULL, 0, KEY_INT, LAY(axis), "-1", -1, 3, 0, 0, NULL, 0,
     "the normalised axis, the last (channels): -1, or its index counting the batch axis "
     "(Keras's axis=3 of images, 1 of feature vectors)"},
    {"batchnorm", "sync", "synchronized", 0, KEY_BOOL, LAY(sync), "0", 0, 1, 0, 0, NULL, 0,
     "batch statistics over the global batch (SyncBatchNormalization)"},

    {"add", "from", NULL, 0, KEY_REF, LAY(from_ref), NULL, 0, 0, 0, 0, NULL, 0,
     "the earlier layer (NAME or -N) whose output is added to the input (a residual "
     "connection); the shapes must be equal"},

    {"concatenate", "from", NULL, 0, KEY_REF, LAY(from_ref), NULL, 0, 0, 0, 0, NULL, 0,
     "the earlier layer (NAME or -N) whose output is joined after the input along the last axis "
     "(channels, or features); the other axes must be equal"},

    {"zeropad", "padding", NULL, PY_PAIRS, KEY_INTS, LAY(pad), "1", 0, 1024, 0, 0, NULL, 4,
     "zero rows above and below, zero columns left and right: p, ph,pw (Keras padding=(ph, pw)) "
     "or top,bottom,left,right (Keras padding=((top, bottom), (left, right)))"},

    {"layernorm", "epsilon", NULL, 0, KEY_FLOAT, LAY(epsilon), "0.001", 0, 1, 1, 0, NULL, 0,
     "added to the variance (Keras default 0.001)"},
    {"layernorm", "center", NULL, 0, KEY_BOOL, LAY(center), "1", 0, 1, 0, 0, NULL, 0,
     "add a trainable offset beta (Keras center); 0: no beta weight"},
    {"layernorm", "scale", NULL, 0, KEY_BOOL, LAY(scale), "1", 0, 1, 0, 0, NULL, 0,
     "multiply by a trainable gamma (Keras scale); 0: no gamma weight"},
    {"rescaling", "scale", NULL, 0, KEY_FLOAT, LAY(rescale), "1", -BIG, BIG, 0, 0, NULL, 0,
     "y = x * scale + offset (Keras Rescaling; 0.00392156862745098 = 1/255 takes raw pixels "
     "to [0, 1])"},
    {"rescaling", "offset", NULL, 0, KEY_FLOAT, LAY(offset), "0", -BIG, BIG, 0, 0, NULL, 0,
     "added after the scale"},

    {"normalization", "mean", NULL, PY_NONE, KEY_FLOATS, LAY(mean), "", -BIG, BIG, 0, 0, NULL,
     MR_MAX_FLOATS,
     "the mean of each channel (last axis), or one for all; with variance; not given: adapted "
     "to the training data at the start of a fresh fit (Keras adapt)"},
    {"normalization", "variance", NULL, PY_NONE, KEY_FLOATS, LAY(variance), "", 0, BIG, 0, 0, NULL,
     MR_MAX_FLOATS, "the variance of each channel, or one for all; with mean"},

    {"relu", "max_value", NULL, PY_NONE, KEY_FLOAT, LAY(max_value), "-1", -1, BIG, 0, 0, NULL, 0,
     "the output's maximum, at least 0 (6: ReLU6, MobileNet's); -1 or None: none"},
    {"relu", "negative_slope", NULL, 0, KEY_FLOAT, LAY(negative_slope), "0", 0, BIG, 0, 0, NULL, 0,
     "the slope below the threshold: y = negative_slope * (x - threshold)"},
    {"relu", "threshold", NULL, 0, KEY_FLOAT, LAY(threshold), "0", 0, BIG, 0, 0, NULL, 0,
     "x is passed above it (y = x for x > threshold), else 0 or the slope's line"},

    {"softmax", "axis", NULL, 0, KEY_INT, LAY(axis), "-1", -1, -1, 0, 0, NULL, 0,
     "the axis the softmax normalises: -1 (the last) only"},

    {"globalmaxpool", "keepdims", NULL, 0, KEY_BOOL, LAY(keepdims), "0", 0, 1, 0, 0, NULL, 0,
     "1: the output keeps height and width as 1, (1, 1, C)"},

    {"reshape", "target_shape", NULL, 0, KEY_INTS, LAY(target_shape), NULL, -1, 1 << 24, 0, 0, NULL,
     3,
     "one example's new shape, H,W,C or F, of as many values as the input; one of them may be "
     "-1: what the others leave"},

    {"spatialdropout", "rate", NULL, 0, KEY_FLOAT, LAY(rate), NULL, 0, 1, 0, 1, NULL, 0,
     "fraction of channels zeroed in training, whole feature maps per example (inverted "
     "dropout)"},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

/* Sections in the order the reference lists them; layer kinds match mr_layer_kind. */
static const struct {
    const char *name;
    sec_kind kind;
    const char *help;
} sections[] = {
    {"net", SEC_NET, "training settings (once)"},
    {"data", SEC_DATA, "data files and preprocessing (once)"},
    {"augment", SEC_AUGMENT, "data augmentation of the training split (optional, once)"},
    {"input", SEC_LAYER, "first layer section: the shape of one example"},
    {"flatten", SEC_LAYER, "reshape to one feature vector (no keys)"},
    {"dense", SEC_LAYER, "fully connected layer; kernel (in, units), bias (units)"},
    {"activation", SEC_LAYER, "element-wise activation"},
    {"conv2d", SEC_LAYER, "2-D convolution, NHWC; kernel (kh, kw, in, filters), bias (filters)"},
    {"maxpool", SEC_LAYER, "2-D max pooling"},
    {"avgpool", SEC_LAYER, "2-D average pooling"},
    {"dropout", SEC_LAYER, "inverted dropout, training only"},
    {"batchnorm", SEC_LAYER, "batch normalisation over the channels (last axis)"},
    {"add", SEC_LAYER, "element-wise sum of the input and an earlier layer's output (Keras Add)"},
    {"concatenate", SEC_LAYER,
     "the input and an earlier layer's output joined along the last axis (Keras Concatenate)"},
    {"depthwise", SEC_LAYER,
     "depthwise 2-D convolution, NHWC: each channel with its own depth_multiplier filters "
     "(DepthwiseConv2D); kernel (kh, kw, in, depth_multiplier), bias (in x depth_multiplier)"},
    {"globalavgpool", SEC_LAYER,
     "mean over height and width, (H, W, C) -> (C) (GlobalAveragePooling2D; no keys)"},
    {"zeropad", SEC_LAYER, "zero padding of height and width (ZeroPadding2D)"},
    {"layernorm", SEC_LAYER,
     "normalisation of each example over the last axis (LayerNormalization)"},
    {"rescaling", SEC_LAYER,
     "x * scale + offset, no weights (Rescaling: preprocessing in the model)"},
    {"normalization", SEC_LAYER,
     "(x - mean) / max(sqrt(variance), 1e-7) per channel (Normalization: preprocessing in the "
     "model)"},
    {"relu", SEC_LAYER, "rectified linear unit with a maximum, slope and threshold (ReLU)"},
    {"softmax", SEC_LAYER, "softmax over the last axis (Softmax; as [activation] softmax)"},
    {"globalmaxpool", SEC_LAYER,
     "maximum over height and width, (H, W, C) -> (C) (GlobalMaxPooling2D)"},
    {"reshape", SEC_LAYER, "the same values in a new shape (Reshape)"},
    {"spatialdropout", SEC_LAYER,
     "dropout of whole channels per example, training only (SpatialDropout2D)"},
};
#define N_SECTIONS (sizeof sections / sizeof sections[0])

/* Keras's names for something that differs here: refused, with the key to use. */
static const struct {
    const char *section, *name, *hint;
} key_hints[] = {
    {"net", "lr",
     "did you mean 'learning_rate'? (the rate for a batch of `batch`, scaled with the replica "
     "count by lr_scaling; with global_batch: the rate of that global batch)"},
    {"net", "batch_size",
     "did you mean 'global_batch' (Keras's batch_size under MirroredStrategy: the global batch) "
     "or 'batch' (per replica)?"},
};

/* The [section] name of each layer kind, by mr_layer_kind: a kind without
 * one fails the static assertion below (when it is the last kind) and
 * tests/test_kinds.c (wherever it is). Each is also a SEC_LAYER line of
 * `sections`, with its help. */
static const char *const layer_sections[] = {
    [MR_LAYER_INPUT] = "input",
    [MR_LAYER_FLATTEN] = "flatten",
    [MR_LAYER_DENSE] = "dense",
    [MR_LAYER_ACTIVATION] = "activation",
    [MR_LAYER_CONV2D] = "conv2d",
    [MR_LAYER_MAXPOOL] = "maxpool",
    [MR_LAYER_AVGPOOL] = "avgpool",
    [MR_LAYER_DROPOUT] = "dropout",
    [MR_LAYER_BATCHNORM] = "batchnorm",
    [MR_LAYER_ADD] = "add",
    [MR_LAYER_GLOBALAVGPOOL] = "globalavgpool",
    [MR_LAYER_ZEROPAD] = "zeropad",
    [MR_LAYER_LAYERNORM] = "layernorm",
    [MR_LAYER_RESCALING] = "rescaling",
    [MR_LAYER_NORMALIZATION] = "normalization",
    [MR_LAYER_CONCATENATE] = "concatenate",
    [MR_LAYER_DEPTHWISE] = "depthwise",
    [MR_LAYER_RELU] = "relu",
    [MR_LAYER_SOFTMAX] = "softmax",
    [MR_LAYER_GLOBALMAXPOOL] = "globalmaxpool",
    [MR_LAYER_RESHAPE] = "reshape",
    [MR_LAYER_SPATIALDROPOUT] = "spatialdropout",
};
_Static_assert(sizeof layer_sections / sizeof layer_sections[0] == MR_LAYER_KIND_COUNT,
               "layer_sections: one name per mr_layer_kind");

/* mr_layer_kind value of a layer section name, -1 otherwise */
static int layer_kind_of(const char *name) {
    for (int k = 0; k < MR_LAYER_KIND_COUNT; k++)
        if (strcmp(layer_sections[k], name) == 0) return k;
    return -1;
}

int mr_layer_kind_merges(mr_layer_kind kind) {
    return kind == MR_LAYER_ADD || kind == MR_LAYER_CONCATENATE;
}

const char *mr_layer_kind_name(mr_layer_kind kind) {
    return (kind >= 0 && kind < MR_LAYER_KIND_COUNT) ? layer_sections[kind] : "?";
}
const char *mr_activation_name(mr_activation a) {
    return activation_names[a];
}
const char *mr_optimizer_name(mr_optimizer_kind o) {
    return optimizer_names[o];
}
const char *mr_initializer_name(mr_initializer init) {
    return initializer_names[init];
}
const char *mr_loss_name(mr_loss_kind l) {
    return loss_names[l];
}

/* 1: key k belongs in section sec (its own keys, and the keys of every
 * layer section in a layer section; [input] takes no input). */
static int key_in(const key_def *k, size_t sec) {
    if (strcmp(k->section, sections[sec].name) == 0) return 1;
    return strcmp(k->section, ANY_LAYER) == 0 && sections[sec].kind == SEC_LAYER &&
           !(strcmp(sections[sec].name, "input") == 0 && k->offset == LAY(input_ref));
}

/* ---- parsing state ----------------------------------------------------- */

typedef struct parse_state {
    mr_config *cfg;
    mr_error *err;
    const char *name;     /* file name for messages */
    const char *base_dir; /* relative data paths resolve against it */
    const char *text;     /* remaining input for the reader */
    int line;             /* line the reader returned last */
    int failed;
    int sec; /* index into sections[] of the current section, -1 none */
    int sec_line;
    int seen[N_SECTIONS];           /* singleton sections seen */
    unsigned char keys_set[N_KEYS]; /* keys given in the current section */
} parse_state;

/* Levenshtein distance, for "did you mean" (short strings only). */
static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] +
                    (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = c < del ? (c < ins ? c : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

static int fail(parse_state *ps, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(parse_state *ps, int line, const char *fmt, ...) {
    if (ps->failed) return 0;
    char what[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    mr_error_set(ps->err, MR_ERR_CONFIG, "%s:%d: %s", ps->name, line, what);
    ps->failed = 1;
    return 0;
}

static void *section_base(parse_state *ps) {
    switch (sections[ps->sec].kind) {
    case SEC_NET:
        return &ps->cfg->net;
    case SEC_DATA:
        return &ps->cfg->data;
    case SEC_AUGMENT:
        return &ps->cfg->augment;
    case SEC_LAYER:
        return &ps->cfg->layers[ps->cfg->n_layers - 1];
    }
    return NULL;
}

static int is_blank(const char *s) {
    while (isspace((unsigned char)*s))
        s++;
    return *s == '\0';
}

/* The value parsers, one per key type: each parses val for key k into dst
 * and returns 1, or 0 with *why filled. */

/* KEY_INT (an int) and KEY_INT64 (an int64_t). */
static int parse_int(const key_def *k, const char *val, void *dst, char *why, size_t why_n) {
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (end == val || !is_blank(end) || errno) {
        snprintf(why, why_n, "'%s' is not an integer%s", val, errno == ERANGE ? " of 64 bits" : "");
        return 0;
    }
    /* seed's max, (double)INT64_MAX, is 2^63: every int64 passes */
    if ((double)v < k->min || (double)v > k->max) {
        snprintf(why, why_n, "%lld is out of range [%.15g, %.15g]", v, k->min, k->max);
        return 0;
    }
    if (k->type == KEY_INT)
        *(int *)dst = (int)v;
    else
        *(int64_t *)dst = (int64_t)v;
    return 1;
}

/* KEY_FLOATS: an mr_floats or an mr_class_weights, a count, then room for
 * k->n_ints floats (config.h). */
static int parse_floats(const key_def *k, const char *val, void *dst, char *why, size_t why_n) {
    _Static_assert(offsetof(mr_floats, v) == offsetof(mr_class_weights, v),
                   "KEY_FLOATS destinations share a layout");
    int *count = dst;
    float *list = (float *)((char *)dst + offsetof(mr_floats, v));
    *count = 0;
    const char *p = val;
    char *end;
    while (*p != '\0' && isspace((unsigned char)*p))
        p++;
    while (*p != '\0') {
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v)) {
            snprintf(why, why_n, "'%s' is not a comma-separated list of numbers", val);
            return 0;
        }
        if (*count == k->n_ints) {
            snprintf(why, why_n, "'%s' has more than %d numbers", val, k->n_ints);
            return 0;
        }
        int lo_bad = k->open_min ? v <= k->min : v < k->min;
        if (lo_bad || v > k->max) {
            snprintf(why, why_n, "%g is out of range %c%g, %g]", v, k->open_min ? '(' : '[', k->min,
                     k->max);
            return 0;
        }
        list[(*count)++] = (float)v;
        while (isspace((unsigned char)*end))
            end++;
        if (*end == '\0') break;
        if (*end != ',') {
            snprintf(why, why_n, "'%s' is not a comma-separated list of numbers", val);
            return 0;
        }
        p = end + 1;
    }
    return 1;
}

/* KEY_FLOAT: a number, or a fraction such as 1/255. */
static int parse_float(const key_def *k, const char *val, void *dst, char *why, size_t why_n) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (end != val && *end == '/') {
        const char *den_s = end + 1;
        double den = strtod(den_s, &end);
        if (end == den_s || den == 0.0) {
            snprintf(why, why_n, "'%s' is not a number", val);
            return 0;
        }
        v /= den;
    }
    if (end == val || !is_blank(end) || errno || !isfinite(v)) {
        snprintf(why, why_n, "'%s' is not a number", val);
        return 0;
    }
    int lo_bad = k->open_min ? v <= k->min : v < k->min;
    int hi_bad = k->open_max ? v >= k->max : v > k->max;
    if (lo_bad || hi_bad) {
        snprintf(why, why_n, "%g is out of range %c%g, %g%c", v, k->open_min ? '(' : '[', k->min,
                 k->max, k->open_max ? ')' : ']');
        return 0;
    }
    *(float *)dst = (float)v;
    return 1;
}

static int parse_bool(const char *val, void *dst, char *why, size_t why_n) {
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(val, yes[i]) == 0) return *(int *)dst = 1, 1;
        if (strcasecmp(val, no[i]) == 0) return *(int *)dst = 0, 1;
    }
    snprintf(why, why_n, "'%s' is not a boolean (use 1/0, true/false, yes/no)", val);
    return 0;
}

/* Other spellings of KEY_ENUM values: Keras's long loss names for the short ones. */
static const struct {
    const char *const *names; /* the key's value list */
    const char *alias;
    int index; /* the value it names */
} enum_aliases[] = {
    {loss_names, "mean_squared_error", MR_LOSS_MSE},
    {loss_names, "mean_absolute_error", MR_LOSS_MAE},
};

/* KEY_ENUM: one of k->names or of their enum_aliases, any case, into an int (its index). */
static int parse_enum(const key_def *k, const char *val, void *dst, char *why, size_t why_n) {
    for (int i = 0; k->names[i]; i++)
        if (strcasecmp(val, k->names[i]) == 0) return *(int *)dst = i, 1;
    for (size_t i = 0; i < sizeof enum_aliases / sizeof enum_aliases[0]; i++)
        if (enum_aliases[i].names == k->names && strcasecmp(val, enum_aliases[i].alias) == 0)
            return *(int *)dst = enum_aliases[i].index, 1;
    char list[256] = "";
    for (int i = 0; k->names[i]; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, k->names[i], sizeof list - strlen(list) - 1);
    }
    snprintf(why, why_n, "'%s' is not one of: %s", val, list);
    return 0;
}

/* KEY_PATH: relative to base_dir (if any), into MR_PATH_MAX chars. */
static int parse_path(const char *val, char *out, const char *base_dir, char *why, size_t why_n) {
    if (val[0] == '\0' || val[0] == '/' || base_dir == NULL || base_dir[0] == '\0')
        snprintf(out, MR_PATH_MAX, "%s", val);
    else
        snprintf(out, MR_PATH_MAX, "%s/%s", base_dir, val);
    if (strlen(val) + (base_dir ? strlen(base_dir) : 0) + 2 > MR_PATH_MAX) {
        snprintf(why, why_n, "path too long");
        return 0;
    }
    return 1;
}

/* KEY_EVERY: "N", "N epochs" or "N steps" into an mr_every. */
static int parse_every(const key_def *k, const char *val, mr_every *out, char *why, size_t why_n) {
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    int steps = -1;
    if (*end == '\0' || strcasecmp(end, "epochs") == 0 || strcasecmp(end, "epoch") == 0)
        steps = 0;
    else if (strcasecmp(end, "steps") == 0 || strcasecmp(end, "step") == 0)
        steps = 1;
    if (end == val || errno || steps < 0) {
        snprintf(why, why_n, "'%s' is not N epochs or N steps", val);
        return 0;
    }
    if ((double)v < k->min || (double)v > k->max) {
        snprintf(why, why_n, "%lld is out of range [%.15g, %.15g]", v, k->min, k->max);
        return 0;
    }
    out->n = (int64_t)v;
    out->steps = steps;
    return 1;
}

/* KEY_NAME and KEY_REF: a name, or (a reference only) -N, N sections back. */
static int parse_name(const key_def *k, const char *val, char *dst, char *why, size_t why_n) {
    size_t n = strlen(val);
    if (k->type == KEY_REF && val[0] == '-') {
        char *end;
        errno = 0;
        long v = strtol(val + 1, &end, 10);
        if (end == val + 1 || !is_blank(end) || errno || v < 1 || v > MR_MAX_LAYERS) {
            snprintf(why, why_n, "'%s' is not a layer name or -N (N from 1 to %d)", val,
                     MR_MAX_LAYERS);
            return 0;
        }
    } else {
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)val[i]) && val[i] != '_') {
                snprintf(why, why_n, "'%s' is not a name (letters, digits and _)%s", val,
                         k->type == KEY_REF ? " or -N" : "");
                return 0;
            }
        if (n >= MR_NAME_MAX) {
            snprintf(why, why_n, "'%s' is longer than %d characters", val, MR_NAME_MAX - 1);
            return 0;
        }
    }
    snprintf(dst, MR_NAME_MAX, "%s", val);
    return 1;
}

/* KEY_INTS: integers separated by ',' or 'x', k->n_ints at most; one for a
 * pair means both (size=3 -> 3x3); a layer's shape records its rank. */
/* [zeropad] padding's n numbers in out as top,bottom,left,right: p on every side, ph,pw above
 * and below, left and right, or the four. */
static int pads_of(int n, int out[4], const char *val, char *why, size_t why_n) {
    if (n == 3) {
        snprintf(why, why_n, "'%s' is not p, ph,pw or top,bottom,left,right", val);
        return 0;
    }
    if (n == 1) out[1] = out[2] = out[3] = out[0];
    if (n == 2) out[3] = out[2] = out[1], out[1] = out[0];
    return 1;
}

static int parse_ints(const key_def *k, const char *val, int *out, char *why, size_t why_n) {
    int n = 0;
    const char *p = val;
    char *end;
    while (1) {
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno) {
            snprintf(why, why_n, "'%s' is not a list of integers", val);
            return 0;
        }
        if (n == k->n_ints) {
            snprintf(why, why_n, "'%s' has more than %d numbers", val, k->n_ints);
            return 0;
        }
        if (v < k->min || v > k->max) {
            snprintf(why, why_n, "%ld is out of range [%g, %g]", v, k->min, k->max);
            return 0;
        }
        out[n++] = (int)v;
        while (isspace((unsigned char)*end))
            end++;
        if (*end == '\0') break;
        if (*end != ',' && *end != 'x') {
            snprintf(why, why_n, "'%s' is not a comma-separated list of integers", val);
            return 0;
        }
        p = end + 1;
    }
    if (k->n_ints == 2 && n == 1) out[1] = out[0];
    if (k->offset == LAY(pad) && !pads_of(n, out, val, why, why_n)) return 0;
    if (k->offset == LAY(target_shape)) /* remember its rank */
        ((mr_layer_cfg *)((char *)out - LAY(target_shape)))->target_rank = n;
    if (k->offset == LAY(shape)) {
        /* remember how many numbers the shape had */
        mr_layer_cfg *l = (mr_layer_cfg *)((char *)out - LAY(shape));
        l->shape_rank = n;
        if (n == 2) {
            snprintf(why, why_n, "shape '%s' must be H,W,C or F", val);
            return 0;
        }
    }
    return 1;
}

/* Parses one value of key k into dst. Returns 1, or 0 with *why filled. */
static int parse_value(const key_def *k, const char *val, void *dst, const char *base_dir,
                       char *why, size_t why_n) {
    switch (k->type) {
    case KEY_INT:
    case KEY_INT64:
        return parse_int(k, val, dst, why, why_n);
    case KEY_FLOATS:
        return parse_floats(k, val, dst, why, why_n);
    case KEY_FLOAT:
        return parse_float(k, val, dst, why, why_n);
    case KEY_BOOL:
        return parse_bool(val, dst, why, why_n);
    case KEY_ENUM:
        return parse_enum(k, val, dst, why, why_n);
    case KEY_PATH:
        return parse_path(val, dst, base_dir, why, why_n);
    case KEY_EVERY:
        return parse_every(k, val, dst, why, why_n);
    case KEY_NAME:
    case KEY_REF:
        return parse_name(k, val, dst, why, why_n);
    case KEY_INTS:
        return parse_ints(k, val, dst, why, why_n);
    }
    return 0;
}

/* ---- values spelled as Python ------------------------------------------ */

/* Longest value text (a line holds no more). */
#define PY_VALUE_MAX 16384

/* s without blanks at either end (in place). */
static char *trim(char *s) {
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* s without one pair of matching outer brackets, "(...)" or "[...]", and
 * the trailing comma of Python's one-tuple "(784,)"; s itself without. */
static char *strip_brackets(char *s) {
    size_t n = strlen(s);
    if (n < 2 || !((s[0] == '(' && s[n - 1] == ')') || (s[0] == '[' && s[n - 1] == ']'))) return s;
    s[n - 1] = '\0';
    s = trim(s + 1);
    n = strlen(s);
    if (n > 0 && s[n - 1] == ',') s[n - 1] = '\0';
    return trim(s);
}

/* PY_PAIRS: "(t, b), (l, r)" (outer brackets gone) into "t,b,l,r" in s: Keras's
 * ZeroPadding2D padding=((t, b), (l, r)). */
static int py_pairs(char *s, char *why, size_t why_n) {
    int v[4], n = 0;
    for (char *p = s; *p && n >= 0;) {
        if (strchr("()[], \t", *p)) {
            p++;
            continue;
        }
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || n == 4 || x < INT_MIN || x > INT_MAX)
            n = -1;
        else
            v[n++] = (int)x, p = end;
    }
    if (n != 4) {
        snprintf(why, why_n, "'%s' is not p, (ph, pw) or ((top, bottom), (left, right))", s);
        return 0;
    }
    snprintf(s, strlen(s) + 1, "%d,%d,%d,%d", v[0], v[1], v[2], v[3]);
    return 1;
}

/* PY_L2: the text of the number x of Keras's regularizer l2(x), L2(x),
 * L2(l2=x) (keras.regularizers. before it or not) or "l2" (Keras's
 * default x 0.01), from s; a number is itself. NULL with *why filled for
 * another regularizer. */
static const char *py_l2(char *s, char *why, size_t why_n) {
    char *open = strchr(s, '(');
    if (open == NULL) {
        if (!isalpha((unsigned char)s[0])) return s; /* a number, or not: parse_float says */
        if (strcasecmp(s, "l2") == 0) return "0.01";
        snprintf(why, why_n, "'%s': the only regularizer here is L2: l2(x)", s);
        return NULL;
    }
    const char *fn = open;
    while (fn > s && (isalnum((unsigned char)fn[-1]) || fn[-1] == '_'))
        fn--;
    size_t n = strlen(s);
    if (s[n - 1] != ')' || fn == open || (fn > s && fn[-1] != '.')) {
        snprintf(why, why_n, "'%s' is not a number or l2(x)", s);
        return NULL;
    }
    if (open - fn != 2 || strncasecmp(fn, "l2", 2) != 0) {
        snprintf(why, why_n, "'%s': the only regularizer here is L2: l2(x)", s);
        return NULL;
    }
    s[n - 1] = '\0';
    char *arg = trim(open + 1);
    if (strncasecmp(arg, "l2", 2) == 0 && strchr(arg, '=')) arg = trim(strchr(arg, '=') + 1);
    return arg[0] ? arg : "0.01";
}

/* The text the parsers above take for value `val` of key k, which may be
 * spelled as a Keras argument in Python: quotes ('same', "relu") off,
 * tuples and lists ((3, 3), [3, 3], (784,)) as numbers with commas, None
 * as the key's default (PY_NONE), and what k->py allows besides. In buf
 * (PY_VALUE_MAX bytes); NULL with *why filled where it cannot be. */
static const char *py_value(const key_def *k, const char *val, char *buf, char *why, size_t why_n) {
    if (strlen(val) >= PY_VALUE_MAX) {
        snprintf(why, why_n, "the value is longer than %d characters", PY_VALUE_MAX - 1);
        return NULL;
    }
    char *s = trim(strcpy(buf, val));
    if ((k->py & PY_NONE) && strcmp(s, "None") == 0) return k->def;
    size_t n = strlen(s);
    if (n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0] &&
        strchr(s + 1, s[0]) == s + n - 1) {
        s[n - 1] = '\0';
        s++;
    }
    if (k->type == KEY_INTS || k->type == KEY_FLOATS) s = strip_brackets(s);
    if ((k->py & PY_PAIRS) && strpbrk(s, "([") && !py_pairs(s, why, why_n)) return NULL;
    return (k->py & PY_L2) ? py_l2(s, why, why_n) : s;
}

/* Fills the current section's struct with the table's defaults. */
static void apply_defaults(parse_state *ps) {
    void *base = section_base(ps);
    for (size_t i = 0; i < N_KEYS; i++) {
        if (!key_in(&keys[i], (size_t)ps->sec) || keys[i].def == NULL) continue;
        char why[256];
        if (!parse_value(&keys[i], keys[i].def, (char *)base + keys[i].offset, NULL, why,
                         sizeof why))
            MR_ASSERT(!"bad default in the key table");
    }
}

/* Checks the keys required in the section that just ended. */
static int close_section(parse_state *ps) {
    if (ps->sec < 0 || ps->failed) return !ps->failed;
    for (size_t i = 0; i < N_KEYS; i++) {
        if (!key_in(&keys[i], (size_t)ps->sec)) continue;
        if (keys[i].def == NULL && !ps->keys_set[i])
            return fail(ps, ps->sec_line, "[%s] is missing the required key '%s' (%s)",
                        sections[ps->sec].name, keys[i].key, keys[i].help);
    }
    /* Keras AdamW's own default weight decay, where the file gives none */
    mr_net_cfg *net = &ps->cfg->net;
    if (ps->sec == 0 && net->optimizer == MR_OPTIMIZER_ADAMW) {
        for (size_t i = 0; i < N_KEYS; i++)
            if (key_in(&keys[i], 0) && strcmp(keys[i].key, "weight_decay") == 0 && !ps->keys_set[i])
                net->weight_decay = MR_ADAMW_WEIGHT_DECAY;
    }
    return 1;
}

/* Keras's class name and automatic layer name of layer kind k ("Conv2D",
 * "conv2d"; NULL: none): those its ops table declares (layer.h), read here
 * the other way; the model input's are Keras's InputLayer's. */
static void keras_section_names(int k, const char *out[2]) {
    const mr_layer_ops *ops = mr_layer_ops_for((mr_layer_kind)k);
    out[0] = ops ? ops->class_name : k == MR_LAYER_INPUT ? "InputLayer" : NULL;
    out[1] = ops ? ops->keras_name : k == MR_LAYER_INPUT ? "input_layer" : NULL;
}

/* sections[] index of the section named `name` (any case), ours or a layer
 * kind's Keras names; -1 none. */
static int section_index(const char *name) {
    for (size_t s = 0; s < N_SECTIONS; s++) {
        const int k = layer_kind_of(sections[s].name);
        if (k < 0) continue;
        const char *kn[2];
        keras_section_names(k, kn);
        for (int j = 0; j < 2; j++)
            if (kn[j] && strcasecmp(kn[j], name) == 0) name = layer_sections[k];
    }
    for (size_t i = 0; i < N_SECTIONS; i++)
        if (strcasecmp(sections[i].name, name) == 0) return (int)i;
    return -1;
}

/* 1: a name at edit distance d from `name` is worth suggesting (a few
 * letters, or a quarter of a long Keras name: GlobalAvgPooling2D). */
static int near_enough(int d, const char *name) {
    return d <= 3 || 4 * d <= (int)strlen(name);
}

/* The known section name nearest to `name`, in either spelling (written
 * as it is known), or NULL where none is near enough. */
static const char *nearest_section(const char *name) {
    const char *best = NULL;
    int bd = 99;
    for (size_t i = 0; i < N_SECTIONS; i++) {
        const char *cand[3] = {sections[i].name, NULL, NULL};
        int k = layer_kind_of(sections[i].name);
        if (k >= 0) keras_section_names(k, cand + 1);
        for (int j = 0; j < 3; j++) {
            int d = cand[j] ? edit_distance(name, cand[j]) : 99;
            if (d < bd) bd = d, best = cand[j];
        }
    }
    return near_enough(bd, name) ? best : NULL;
}

static int open_section(parse_state *ps, const char *name, int line) {
    if (!close_section(ps)) return 0;
    int s = section_index(name);
    if (s < 0) {
        const char *best = nearest_section(name);
        if (best) return fail(ps, line, "unknown section [%s]; did you mean [%s]?", name, best);
        return fail(ps, line, "unknown section [%s]", name);
    }
    ps->sec = s;
    ps->sec_line = line;
    memset(ps->keys_set, 0, sizeof ps->keys_set);
    mr_config *cfg = ps->cfg;
    if (sections[s].kind != SEC_LAYER) {
        if (ps->seen[s]) return fail(ps, line, "section [%s] appears twice", sections[s].name);
        ps->seen[s] = 1;
        if (sections[s].kind == SEC_AUGMENT) cfg->augment.present = 1, cfg->augment.line = line;
    } else {
        int kind = layer_kind_of(sections[s].name);
        if (cfg->n_layers == 0 && kind != MR_LAYER_INPUT)
            return fail(ps, line,
                        "[%s] comes before [input]: the first layer section must be [input]",
                        sections[s].name);
        if (cfg->n_layers > 0 && kind == MR_LAYER_INPUT)
            return fail(ps, line, "a second [input] section: only the first layer may be [input]");
        if (cfg->n_layers == MR_MAX_LAYERS)
            return fail(ps, line, "too many layers (at most %d)", MR_MAX_LAYERS);
        mr_layer_cfg *l = &cfg->layers[cfg->n_layers++];
        memset(l, 0, sizeof *l);
        l->kind = (mr_layer_kind)kind;
        l->line = line;
    }
    apply_defaults(ps);
    /* [softmax] is an activation layer of softmax: the loss rules read it so */
    if (sections[s].kind == SEC_LAYER && layer_kind_of(sections[s].name) == MR_LAYER_SOFTMAX)
        cfg->layers[cfg->n_layers - 1].activation = MR_ACTIVATION_SOFTMAX;
    return 1;
}

/* Cuts a comment off a header or key line: ';' or '#' after a blank starts
 * one, for every key (inih alone would cut ';' only, and only after the
 * value); without a blank before it the character is part of the value
 * (a path "run#2.h5"). The newline stays, so inih counts the line. */
static void strip_comment(char *line) {
    for (char *c = line + 1; *c; c++)
        if ((*c == ';' || *c == '#') && (c[-1] == ' ' || c[-1] == '\t')) {
            c[0] = '\n', c[1] = '\0';
            return;
        }
}

/* inih reader: returns the next line, and opens a section when the line is a header. */
static char *reader(char *str, int num, void *stream) {
    parse_state *ps = stream;
    /* a UTF-8 byte order mark before the first line (inih would skip it, but
     * it never sees it: this reader finds the headers) */
    if (ps->line == 0 && strncmp(ps->text, "\xEF\xBB\xBF", 3) == 0) ps->text += 3;
    if (*ps->text == '\0') return NULL;
    const char *nl = strchr(ps->text, '\n');
    size_t len = nl ? (size_t)(nl - ps->text) + 1 : strlen(ps->text);
    ps->line++;
    if (len >= (size_t)num) {
        fail(ps, ps->line, "line longer than %d characters", num - 2);
        /* hand inih an empty line and skip the rest */
        ps->text += len;
        str[0] = '\n', str[1] = '\0';
        return str;
    }
    memcpy(str, ps->text, len);
    str[len] = '\0';
    ps->text += len;
    const char *p = str;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == ';' || *p == '#') return str; /* a comment line */
    strip_comment(str);
    /* a section header: [name] with optional blanks and a trailing comment */
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (close == NULL) {
            char *e = str + strlen(str);
            while (e > p && isspace((unsigned char)e[-1]))
                *--e = '\0';
            fail(ps, ps->line, "section header '%s' has no closing ']'", p);
        } else {
            char name[64];
            size_t n = (size_t)(close - p - 1);
            if (n >= sizeof name) n = sizeof name - 1;
            memcpy(name, p + 1, n);
            name[n] = '\0';
            /* trim */
            char *s = name;
            while (isspace((unsigned char)*s))
                s++;
            char *e = s + strlen(s);
            while (e > s && isspace((unsigned char)e[-1]))
                *--e = '\0';
            if (!ps->failed) open_section(ps, s, ps->line);
        }
    }
    return str;
}

/* keys[] index of the key named `name` (any case, ours or Keras's) in
 * the current section; -1 none. */
static int key_index(const parse_state *ps, const char *name) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (key_in(&keys[i], (size_t)ps->sec) &&
            (strcasecmp(keys[i].key, name) == 0 ||
             (keys[i].keras && strcasecmp(keys[i].keras, name) == 0)))
            return (int)i;
    return -1;
}

/* Fails on key `name`, unknown in the current section: a hint where Keras
 * means another thing by it, else the nearest key in either spelling. */
static int unknown_key(parse_state *ps, int line, const char *name) {
    const char *sname = sections[ps->sec].name;
    for (size_t h = 0; h < sizeof key_hints / sizeof key_hints[0]; h++)
        if (strcmp(key_hints[h].section, sname) == 0 && strcasecmp(key_hints[h].name, name) == 0)
            return fail(ps, line, "unknown key '%s' in [%s]; %s", name, sname, key_hints[h].hint);
    const char *best = NULL;
    int bd = 99, any = 0;
    for (size_t i = 0; i < N_KEYS; i++) {
        if (!key_in(&keys[i], (size_t)ps->sec)) continue;
        any |= strcmp(keys[i].section, sname) == 0; /* a key of its own */
        const char *cand[2] = {keys[i].key, keys[i].keras};
        for (int j = 0; j < 2; j++) {
            int d = cand[j] ? edit_distance(name, cand[j]) : 99;
            if (d < bd) bd = d, best = cand[j];
        }
    }
    if (!any && bd > 2)
        return fail(ps, line,
                    "[%s] takes no keys of its own (only name and input, as every layer), "
                    "but has '%s'",
                    sname, name);
    if (bd <= 3 || (best && strlen(name) > 3 && strstr(best, name)))
        return fail(ps, line, "unknown key '%s' in [%s]; did you mean '%s'?", name, sname, best);
    return fail(ps, line, "unknown key '%s' in [%s]", name, sname);
}

static int handler(void *user, const char *section, const char *name, const char *value) {
    parse_state *ps = user;
    (void)section;
    if (ps->failed) return 1; /* first error already recorded; keep inih quiet */
    int line = ps->line;
    if (ps->sec < 0) return fail(ps, line, "'%s' before any [section]", name);
    const char *sname = sections[ps->sec].name;
    int found = key_index(ps, name);
    if (found < 0) return unknown_key(ps, line, name);
    const key_def *k = &keys[found];
    int alias = strcasecmp(k->key, name) != 0; /* written as Keras's name */
    if (ps->keys_set[found])
        return fail(ps, line, "key '%s' given twice in [%s]%s%s%s", k->key, sname,
                    alias ? " (as '" : "", alias ? name : "", alias ? "')" : "");
    ps->keys_set[found] = 1;
    char why[400], text[PY_VALUE_MAX];
    const char *v = py_value(k, value, text, why, sizeof why);
    void *dst = (char *)section_base(ps) + k->offset;
    if (v == NULL || !parse_value(k, v, dst, ps->base_dir, why, sizeof why))
        return fail(ps, line, "[%s] %s: %s", sname, name, why);
    return 1;
}

/* The section a reference (`input =` or `from =` of section i, text ref,
 * "" for -1) names, or -1 after failing. Only an earlier section may be
 * named: the layers run in the file's order, so the graph has no cycle. */
static int resolve_ref(parse_state *ps, int i, const char *key, const char *ref) {
    mr_config *cfg = ps->cfg;
    const mr_layer_cfg *l = &cfg->layers[i];
    const char *sec = mr_layer_kind_name(l->kind);
    if (ref[0] == '\0') return i - 1;
    if (ref[0] == '-') {
        int n = atoi(ref + 1);
        if (n > i) {
            fail(ps, l->line, "[%s] %s = %s: only %d section%s before this one", sec, key, ref, i,
                 i == 1 ? " comes" : "s come");
            return -1;
        }
        return i - n;
    }
    for (int j = 0; j < cfg->n_layers; j++) {
        if (strcmp(cfg->layers[j].name, ref) != 0) continue;
        if (j < i) return j;
        fail(ps, l->line,
             "[%s] %s = %s: %s (line %d); a layer takes only outputs of the layers before it, so "
             "the graph has no cycle",
             sec, key, ref, j == i ? "that is this layer" : "that layer comes later",
             cfg->layers[j].line);
        return -1;
    }
    fail(ps, l->line, "[%s] %s = %s: no layer has that name (name = %s)", sec, key, ref, ref);
    return -1;
}

/* Names are unique; references resolve into src[] (config.h). */
static int resolve_refs(parse_state *ps) {
    mr_config *cfg = ps->cfg;
    cfg->graph = 0;
    for (int i = 0; i < cfg->n_layers; i++) {
        mr_layer_cfg *l = &cfg->layers[i];
        for (int j = 0; j < i && l->name[0]; j++)
            if (strcmp(cfg->layers[j].name, l->name) == 0)
                return fail(ps, l->line, "[%s] name = %s: the layer of line %d has that name",
                            mr_layer_kind_name(l->kind), l->name, cfg->layers[j].line);
        l->src[0] = l->src[1] = -1;
        if (i == 0) continue;
        l->src[0] = resolve_ref(ps, i, "input", l->input_ref);
        if (l->src[0] < 0) return 0;
        if (mr_layer_kind_merges(l->kind)) {
            l->src[1] = resolve_ref(ps, i, "from", l->from_ref);
            if (l->src[1] < 0) return 0;
        }
        if (l->src[0] != i - 1 || l->src[1] >= 0) cfg->graph = 1;
    }
    /* a branch that ends before the last layer would be computed for nothing */
    for (int j = 1; j < cfg->n_layers - 1; j++) {
        int used = 0;
        for (int i = j + 1; i < cfg->n_layers && !used; i++)
            used = cfg->layers[i].src[0] == j || cfg->layers[i].src[1] == j;
        if (!used)
            return fail(ps, cfg->layers[j].line,
                        "[%s]: no later layer takes its output (input = or from =), and only the "
                        "last layer is the model's output",
                        mr_layer_kind_name(cfg->layers[j].kind));
    }
    return 1;
}

/* The sections a model needs: [net], [input] and a layer after it. [data] may be
 * left out, as a Keras model file has none: the data then come from the command
 * line or the caller's arrays (mirrored.h). */
static int check_sections(parse_state *ps) {
    const mr_config *cfg = ps->cfg;
    if (!ps->seen[0]) return fail(ps, 1, "missing section [net]");
    if (cfg->n_layers == 0) return fail(ps, 1, "missing section [input] (and the layers after it)");
    if (cfg->n_layers == 1) return fail(ps, cfg->layers[0].line, "no layers after [input]");
    return 1;
}

/* The [net] keys that watch the validation set, and what it reports on. */
static int check_validation(parse_state *ps) {
    const mr_config *cfg = ps->cfg;
    /* images without labels: a folder of class folders, or a missing key,
     * which the loader tells apart (the folder need not exist here) */
    if (cfg->data.test_images[0] == '\0' && cfg->data.test_labels[0] != '\0')
        return fail(ps, 1, "[data] test_labels without test_images: give both or neither");
    if (cfg->data.val_images[0] == '\0' && cfg->data.val_labels[0] != '\0')
        return fail(ps, 1, "[data] val_labels without val_images: give both or neither");
    const int has_val = cfg->data.val_images[0] != '\0' || cfg->net.validation_split != 0.0f;
    const struct {
        const char *key;
        mr_monitor mon;
    } watchers[] = {{"early_stopping", cfg->net.early_stopping},
                    {"save_best_only", cfg->net.save_best_only},
                    {"reduce_lr_on_plateau", cfg->net.reduce_lr_on_plateau}};
    for (size_t i = 0; i < sizeof watchers / sizeof watchers[0]; i++) {
        const mr_monitor mon = watchers[i].mon;
        if ((mon == MR_MONITOR_VAL_LOSS || mon == MR_MONITOR_VAL_ACCURACY) && !has_val)
            return fail(ps, 1,
                        "[net] %s = %s needs a validation set: set validation_split or [data] "
                        "val_images",
                        watchers[i].key, monitor_names[mon]);
    }
    if (cfg->net.per_class && !has_val && cfg->data.test_images[0] == '\0')
        return fail(ps, 1,
                    "[net] per_class = 1 has nothing to report on: set validation_split, [data] "
                    "val_images or [data] test_images");
    return 1;
}

/* lr_schedule = steps and its lists. */
static int check_lr_steps(parse_state *ps) {
    const mr_net_cfg *net = &ps->cfg->net;
    if (net->lr_schedule != MR_LR_SCHEDULE_STEPS) {
        if (net->lr_boundaries.n || net->lr_factors.n)
            return fail(ps, 1, "[net] lr_boundaries and lr_factors go with lr_schedule = steps");
        return 1;
    }
    const mr_floats *b = &net->lr_boundaries, *f = &net->lr_factors;
    if (b->n == 0 || f->n != b->n)
        return fail(ps, 1,
                    "[net] lr_schedule = steps needs lr_boundaries (epochs) and as many "
                    "lr_factors (%d and %d given)",
                    b->n, f->n);
    for (int i = 1; i < b->n; i++)
        if (!(b->v[i] > b->v[i - 1]))
            return fail(ps, 1, "[net] lr_boundaries must increase: %g after %g", (double)b->v[i],
                        (double)b->v[i - 1]);
    return 1;
}

/* The [net] keys that exclude or need each other. */
static int check_net(parse_state *ps) {
    const mr_config *cfg = ps->cfg;
    const mr_net_cfg *net = &cfg->net;
    /* one sigmoid output: no classes to rank or to tabulate */
    if (net->loss == MR_LOSS_BINARY_CROSSENTROPY && (net->top_k > 0 || net->per_class))
        return fail(ps, 1, "[net] %s does not apply to loss = binary_crossentropy",
                    net->top_k > 0 ? "top_k" : "per_class");
    if (net->reduce_lr_on_plateau != MR_MONITOR_NONE &&
        (net->lr_schedule != MR_LR_SCHEDULE_CONSTANT || net->warmup_epochs > 0.0f))
        return fail(ps, 1,
                    "[net] reduce_lr_on_plateau sets the rate itself: it needs lr_schedule = "
                    "constant and no warmup_epochs (as Keras's needs a float learning rate)");
    if (!check_lr_steps(ps)) return 0;
    if (net->class_weight.n > 0) {
        int any = 0;
        for (int i = 0; i < net->class_weight.n; i++)
            any |= net->class_weight.v[i] > 0.0f;
        if (!any) return fail(ps, 1, "[net] class_weight: every weight is 0 (nothing would train)");
    }
    if ((net->clipnorm > 0.0f) + (net->global_clipnorm > 0.0f) + (net->clipvalue > 0.0f) > 1)
        return fail(ps, 1,
                    "[net] clipnorm, global_clipnorm and clipvalue: give one of them at most (as "
                    "Keras allows)");
    if (cfg->data.val_images[0] != '\0' && net->validation_split > 0.0f)
        return fail(ps, 1,
                    "[net] validation_split and [data] val_images both name a validation set: "
                    "give one");
    return 1;
}

/* [maxpool] and [avgpool] without a stride step by their size. */
static void default_pool_strides(mr_config *cfg) {
    for (int i = 1; i < cfg->n_layers; i++) {
        mr_layer_cfg *l = &cfg->layers[i];
        if ((l->kind == MR_LAYER_MAXPOOL || l->kind == MR_LAYER_AVGPOOL)) {
            if (l->stride[0] == 0) l->stride[0] = l->size[0];
            if (l->stride[1] == 0) l->stride[1] = l->size[1];
        }
    }
}

/* [normalization]: its statistics given, or adapted to the model input. */
static int check_normalization(parse_state *ps) {
    const mr_config *cfg = ps->cfg;
    for (int i = 1; i < cfg->n_layers; i++) {
        const mr_layer_cfg *l = &cfg->layers[i];
        if (l->kind != MR_LAYER_NORMALIZATION) continue;
        if ((l->mean.n > 0) != (l->variance.n > 0))
            return fail(ps, l->line,
                        "[normalization] mean and variance go together: give both, or neither "
                        "to adapt them to the training data");
        if (l->mean.n > 0) continue;
        /* adapted statistics are those of the model's input (after [data]
         * scale), computed before training: only [rescaling] may come
         * between, which the adaptation applies too */
        for (int j = l->src[0]; j > 0; j = cfg->layers[j].src[0])
            if (cfg->layers[j].kind != MR_LAYER_RESCALING)
                return fail(ps, l->line,
                            "[normalization] without mean and variance adapts to the training "
                            "data: it must take the model input, directly after [input] or "
                            "[rescaling] layers only (not [%s] of line %d)",
                            mr_layer_kind_name(cfg->layers[j].kind), cfg->layers[j].line);
    }
    return 1;
}

/* Checks between keys, after the whole file is read (the first failure
 * is the message). */
static int cross_check(parse_state *ps) {
    if (!check_sections(ps) || !check_validation(ps) || !check_net(ps)) return 0;
    default_pool_strides(ps->cfg);
    return resolve_refs(ps) && check_normalization(ps);
}

mr_status mr_config_parse(const char *text, const char *name, const char *base_dir, mr_config *cfg,
                          mr_error *err) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->path, sizeof cfg->path, "%s", name);
    cfg->text = strdup(text);
    if (cfg->text == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", name);
    parse_state ps = {
        .cfg = cfg, .err = err, .name = name, .base_dir = base_dir, .text = text, .sec = -1};
    /* defaults of the singleton sections, so a file without [augment] has them */
    for (int s = 0; s < 3; s++) {
        ps.sec = s;
        apply_defaults(&ps);
    }
    ps.sec = -1;
    int rc = ini_parse_stream(reader, &ps, handler, &ps);
    if (!ps.failed && rc > 0)
        fail(&ps, rc, "cannot parse this line (expected [section] or key = value)");
    if (!ps.failed) close_section(&ps);
    if (!ps.failed) cross_check(&ps);
    if (ps.failed) {
        mr_config_free(cfg);
        return MR_ERR_CONFIG;
    }
    return MR_OK;
}

mr_status mr_config_load(const char *path, mr_config *cfg, mr_error *err) {
    memset(cfg, 0, sizeof *cfg);
    MR_CHECK(mr_file_check(path, MR_FILE_WANT_CFG, err)); /* a .keras, a SavedModel, a .h5 */
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    /* fopen opens a folder, and ftell then gives a huge size */
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return mr_error_set(err, MR_ERR_IO, "%s: is a directory, not a model .cfg", path);
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return mr_error_set(err, MR_ERR_IO, "%s: cannot read (is it a directory?)", path);
    }
    long size = ftell(f);
    if (size < 0 || size > (1 << 20)) {
        fclose(f);
        return mr_error_set(err, MR_ERR_IO, "%s: %s", path,
                            size < 0 ? "cannot read (is it a directory?)"
                                     : "larger than 1 MiB: not a model .cfg");
    }
    rewind(f);
    char *text = malloc((size_t)size + 1);
    if (text == NULL) {
        fclose(f);
        return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(text, 1, (size_t)size, f);
    fclose(f);
    text[got] = '\0';
    if (strlen(text) != got) {
        free(text);
        return mr_error_set(err, MR_ERR_CONFIG, "%s: contains a NUL byte: not a text .cfg file",
                            path);
    }
    /* relative data paths resolve against the .cfg file's folder */
    char dir[MR_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        dir[0] = '\0';
    mr_status st = mr_config_parse(text, path, slash ? dir : NULL, cfg, err);
    free(text);
    return st;
}

void mr_config_free(mr_config *cfg) {
    free(cfg->text);
    cfg->text = NULL;
}

static void format_range(const key_def *k, char *out, size_t n) {
    switch (k->type) {
    case KEY_INT:
    case KEY_INT64:
        if (k->max >= (double)INT64_MAX) /* %.0f would print 2^63 */
            snprintf(out, n, "%.0f .. %lld", k->min, (long long)INT64_MAX);
        else
            snprintf(out, n, "%.0f .. %.0f", k->min, k->max);
        break;
    case KEY_FLOAT:
        snprintf(out, n, "%c%g, %g%c", k->open_min ? '(' : '[', k->min, k->max,
                 k->open_max ? ')' : ']');
        break;
    case KEY_BOOL:
        snprintf(out, n, "0 or 1");
        break;
    case KEY_ENUM: {
        out[0] = '\0';
        for (int i = 0; k->names[i]; i++) {
            strncat(out, i ? ", " : "", n - strlen(out) - 1);
            strncat(out, k->names[i], n - strlen(out) - 1);
        }
        break;
    }
    case KEY_PATH:
        snprintf(out, n, "path");
        break;
    case KEY_INTS:
        snprintf(out, n, "%d number%s, each %.0f .. %.0f", k->n_ints,
                 k->n_ints > 1 ? "s at most" : "", k->min, k->max);
        break;
    case KEY_FLOATS:
        snprintf(out, n, "up to %d numbers, each %c%g, %g]", k->n_ints, k->open_min ? '(' : '[',
                 k->min, k->max);
        break;
    case KEY_EVERY:
        snprintf(out, n, "N epochs or N steps, N %.0f .. %.0f", k->min, k->max);
        break;
    case KEY_NAME:
        snprintf(out, n, "letters, digits, _");
        break;
    case KEY_REF:
        snprintf(out, n, "a layer's name, or -N");
        break;
    }
}

static void write_key(FILE *out, int markdown, const char *section, const key_def *k) {
    char range[256];
    format_range(k, range, sizeof range);
    const char *def = k->def == NULL ? "(required)" : k->def[0] ? k->def : "(none)";
    if (markdown)
        fprintf(out, "| `[%s]` | `%s` | %s | %s | %s |\n", section, k->key, def, range, k->help);
    else
        fprintf(out, "    %-17s default %-12s %s; allowed: %s\n", k->key, def, k->help, range);
}

/* Python spellings key k takes beyond quotes, tuples and True/False, as
 * text for the reference ("" none). */
static void py_notes(const key_def *k, char *out, size_t n) {
    out[0] = '\0';
    if (k->py & PY_L2)
        snprintf(out, n, "l2(x), L2(x), L2(l2=x), 'l2' (x 0.01)");
    else if (k->py & PY_PAIRS)
        snprintf(out, n, "((top, bottom), (left, right))");
    if (k->py & PY_NONE) {
        size_t o = strlen(out);
        snprintf(out + o, n - o, "%sNone: %s", o ? "; " : "", k->def[0] ? k->def : "not given");
    }
}

/* The Keras spellings of the sections and keys: a layer kind's Keras class
 * and automatic names (its ops'), a key's Keras argument name and the
 * Python values it also takes. */
static void write_keras_names(FILE *out, int markdown) {
    if (markdown)
        fprintf(out, "\nTheir Keras spellings, taken as the names above (any case):\n\n"
                     "| .cfg | Keras | Python values |\n|---|---|---|\n");
    else
        fprintf(out, "[Keras names]  taken as the names above (any case)\n");
    for (size_t s = 0; s < N_SECTIONS; s++) {
        const int k = layer_kind_of(sections[s].name);
        if (k < 0) continue;
        const char *kn[2];
        keras_section_names(k, kn);
        char names[96];
        snprintf(names, sizeof names, markdown ? "`[%s]`" : "[%s]", kn[0]);
        if (strcasecmp(kn[1], kn[0]) != 0 && strcasecmp(kn[1], layer_sections[k]) != 0)
            snprintf(names + strlen(names), sizeof names - strlen(names),
                     markdown ? ", `[%s]`" : ", [%s]", kn[1]);
        if (markdown)
            fprintf(out, "| `[%s]` | %s | |\n", layer_sections[k], names);
        else
            fprintf(out, "    [%s]%*s %s\n", layer_sections[k], 26 - (int)strlen(layer_sections[k]),
                    "", names);
    }
    for (size_t i = 0; i < N_KEYS; i++) {
        const key_def *k = &keys[i];
        if (k->keras == NULL && k->py == 0) continue;
        char ours[64], notes[128];
        snprintf(ours, sizeof ours, "[%s] %s", k->section, k->key);
        py_notes(k, notes, sizeof notes);
        const char *keras = k->keras ? k->keras : k->key;
        if (markdown)
            fprintf(out, "| `%s` | `%s` | %s |\n", ours, keras, notes);
        else
            fprintf(out, "    %-28s %s%s%s\n", ours, keras, notes[0] ? "; " : "", notes);
    }
}

void mr_config_write_reference(FILE *out, int markdown) {
    if (markdown) {
        fprintf(out, "| section | key | default | allowed | meaning |\n|---|---|---|---|---|\n");
    }
    for (size_t s = 0; s < N_SECTIONS; s++) {
        int any = 0;
        if (!markdown) fprintf(out, "[%s]  %s\n", sections[s].name, sections[s].help);
        for (size_t i = 0; i < N_KEYS; i++) {
            if (strcmp(keys[i].section, sections[s].name) != 0) continue;
            any = 1;
            write_key(out, markdown, sections[s].name, &keys[i]);
        }
        if (markdown && !any)
            fprintf(out, "| `[%s]` | | | | %s |\n", sections[s].name, sections[s].help);
    }
    /* the keys every layer section takes, once */
    if (!markdown) fprintf(out, "[any layer]  keys of every layer section, [input] included\n");
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].section, ANY_LAYER) == 0) write_key(out, markdown, ANY_LAYER, &keys[i]);
    write_keras_names(out, markdown);
}
