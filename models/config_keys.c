/* config_keys.c: the generic key table of the .cfg format ([net], [data],
 * [augment], the keys of every layer section and [input]'s shape), the
 * names of the enum values, and the list of sections: the three singletons
 * here, then one per layer kind, whose help line and own keys its
 * definition holds (mr_layer_ops, models/<kind>.c). */
#include "models/config_impl.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "models/layer.h"

const char *const mr_activation_names[] = {"linear",  "relu", "sigmoid",    "tanh",
                                           "softmax", "elu",  "leaky_relu", "gelu",
                                           "swish",   "silu", NULL};
static const char *const optimizer_names[] = {"sgd", "adam", "rmsprop", "adamw", NULL};
const char *const mr_loss_names[] = {"sparse_categorical_crossentropy",
                                     "categorical_crossentropy",
                                     "mse",
                                     "binary_crossentropy",
                                     "mae",
                                     "huber",
                                     NULL};
static const char *const scaling_names[] = {"linear", "none", NULL};
static const char *const schedule_names[] = {"constant", "cosine", "steps", NULL};
const char *const mr_padding_names[] = {"valid", "same", NULL};
const char *const mr_initializer_names[] = {"glorot_uniform", "glorot_normal", "he_uniform",
                                            "he_normal", NULL};
static const char *const on_nan_names[] = {"stop", "skip", NULL};
const char *const mr_monitor_names[] = {"none", "val_loss", "val_accuracy",
                                        "loss", "accuracy", NULL};

#define NET(f)  offsetof(mr_net_cfg, f)
#define DATA(f) offsetof(mr_data_cfg, f)
#define AUG(f)  offsetof(mr_augment_cfg, f)

static const mr_config_key keys[] = {
    {"net", "batch", NULL, 0, MR_KEY_INT, NET(batch), "32", 1, 1 << 20, 0, 0, NULL, 0,
     "examples per replica per step (the global batch is batch x replicas x accumulate)"},
    {"net", "global_batch", NULL, 0, MR_KEY_INT, NET(global_batch), "0", 0, 1 << 24, 0, 0, NULL, 0,
     "if > 0: the global batch on any replica count, split evenly over the replicas (must "
     "divide; --devices auto picks a count that does); overrides batch and lr_scaling"},
    {"net", "epochs", NULL, 0, MR_KEY_INT, NET(epochs), "1", 1, 100000, 0, 0, NULL, 0,
     "passes over the training split (--epochs overrides)"},
    {"net", "optimizer", NULL, 0, MR_KEY_ENUM, NET(optimizer), "adam", 0, 0, 0, 0, optimizer_names,
     0, "sgd, adam, rmsprop or adamw (Adam with weight_decay, 0.004 unless given, as Keras AdamW)"},
    {"net", "learning_rate", NULL, 0, MR_KEY_FLOAT, NET(learning_rate), "0.001", 0, 10, 1, 0, NULL,
     0, "learning rate for a batch of `batch` (with global_batch: for that global batch)"},
    {"net", "momentum", NULL, 0, MR_KEY_FLOAT, NET(momentum), "0", 0, 1, 0, 1, NULL, 0,
     "sgd, rmsprop: momentum"},
    {"net", "nesterov", NULL, 0, MR_KEY_BOOL, NET(nesterov), "0", 0, 1, 0, 0, NULL, 0,
     "sgd: Nesterov momentum"},
    {"net", "beta1", "beta_1", 0, MR_KEY_FLOAT, NET(beta1), "0.9", 0, 1, 0, 1, NULL, 0,
     "adam: beta_1"},
    {"net", "beta2", "beta_2", 0, MR_KEY_FLOAT, NET(beta2), "0.999", 0, 1, 0, 1, NULL, 0,
     "adam: beta_2"},
    {"net", "epsilon", NULL, 0, MR_KEY_FLOAT, NET(epsilon), "1e-7", 0, 1, 1, 0, NULL, 0,
     "adam, adamw, rmsprop: epsilon"},
    {"net", "rho", NULL, 0, MR_KEY_FLOAT, NET(rho), "0.9", 0, 1, 0, 1, NULL, 0,
     "rmsprop: decay of the moving mean square of the gradients (Keras rho)"},
    {"net", "weight_decay", NULL, 0, MR_KEY_FLOAT, NET(weight_decay), "0", 0, 1, 0, 1, NULL, 0,
     "decoupled weight decay, any optimizer: each update first does w -= w x weight_decay x "
     "learning rate (Keras weight_decay; AdamW, SGDW)"},
    {"net", "clipnorm", NULL, MR_PY_NONE, MR_KEY_FLOAT, NET(clipnorm), "0", 0, MR_KEY_BIG, 0, 0,
     NULL, 0,
     "if > 0: each weight's all-reduced gradient is scaled down to this L2 norm (Keras clipnorm)"},
    {"net", "global_clipnorm", NULL, MR_PY_NONE, MR_KEY_FLOAT, NET(global_clipnorm), "0", 0,
     MR_KEY_BIG, 0, 0, NULL, 0,
     "if > 0: all the all-reduced gradients together are scaled down to this L2 norm (Keras "
     "global_clipnorm)"},
    {"net", "clipvalue", NULL, MR_PY_NONE, MR_KEY_FLOAT, NET(clipvalue), "0", 0, MR_KEY_BIG, 0, 0,
     NULL, 0,
     "if > 0: each all-reduced gradient element is clipped to [-clipvalue, clipvalue] (Keras "
     "clipvalue)"},
    {"net", "loss", NULL, 0, MR_KEY_ENUM, NET(loss), "sparse_categorical_crossentropy", 0, 0, 0, 0,
     mr_loss_names, 0,
     "sparse_categorical_crossentropy, categorical_crossentropy (one-hot of the labels), "
     "binary_crossentropy (one sigmoid output, labels 0 and 1; or k sigmoid outputs, "
     "multi-hot labels (n, k)), or the regression losses mse, mae, huber (delta 1; also "
     "Keras's mean_squared_error, mean_absolute_error): float targets (n) or (n, k), or one-hot "
     "class ids on a softmax last layer"},
    {"net", "from_logits", NULL, 0, MR_KEY_BOOL, NET(from_logits), "0", 0, 1, 0, 0, NULL, 0,
     "cross-entropy: the last layer outputs logits, not probabilities (Keras from_logits); "
     "needed with a linear last layer, refused with a softmax one"},
    {"net", "label_smoothing", NULL, 0, MR_KEY_FLOAT, NET(label_smoothing), "0", 0, 1, 0, 0, NULL,
     0,
     "categorical_crossentropy: targets (1 - s) x one-hot + s / classes (Keras "
     "CategoricalCrossentropy; the sparse one has none); binary_crossentropy: (1 - s) y + s / 2"},
    {"net", "class_weight", NULL, 0, MR_KEY_FLOATS, NET(class_weight), "", 0, MR_KEY_BIG, 0, 0,
     NULL, MR_MAX_CLASS_WEIGHTS,
     "one weight per class (0.5, 2, ...): each training example's loss is multiplied by its "
     "class's weight, still divided by the batch size (Keras fit's class_weight); validation "
     "and test losses and the accuracy are not weighted"},
    {"net", "seed", NULL, 0, MR_KEY_INT64, NET(seed), "1", 0, (double)INT64_MAX, 0, 0, NULL, 0,
     "seed of weights, shuffling, dropout and augmentation (--seed overrides)"},
    {"net", "shuffle", NULL, 0, MR_KEY_BOOL, NET(shuffle), "1", 0, 1, 0, 0, NULL, 0,
     "reshuffle the training split every epoch"},
    {"net", "validation_split", NULL, 0, MR_KEY_FLOAT, NET(validation_split), "0", 0, 1, 0, 1, NULL,
     0, "last fraction of the training data held out for validation (as Keras)"},
    {"net", "lr_scaling", NULL, 0, MR_KEY_ENUM, NET(lr_scaling), "linear", 0, 0, 0, 0,
     scaling_names, 0,
     "with batch per replica: linear multiplies the rate by global batch / batch (Goyal et "
     "al. 2017), none leaves it; with global_batch the rate is never scaled"},
    {"net", "warmup_epochs", NULL, 0, MR_KEY_FLOAT, NET(warmup_epochs), "0", 0, 1000, 0, 0, NULL, 0,
     "epochs to ramp linearly from learning_rate to the scaled rate (batch per replica with "
     "lr_scaling = linear only: refused with global_batch or lr_scaling = none)"},
    {"net", "lr_schedule", NULL, 0, MR_KEY_ENUM, NET(lr_schedule), "constant", 0, 0, 0, 0,
     schedule_names, 0,
     "after the warmup: constant, cosine decay over the remaining epochs (Keras CosineDecay), "
     "or steps: piecewise constant (lr_boundaries, lr_factors)"},
    {"net", "lr_alpha", NULL, 0, MR_KEY_FLOAT, NET(lr_alpha), "0", 0, 1, 0, 0, NULL, 0,
     "cosine: the final learning rate as a fraction of the scaled one (Keras alpha)"},
    {"net", "lr_boundaries", NULL, 0, MR_KEY_FLOATS, NET(lr_boundaries), "", 0, 100000, 1, 0, NULL,
     MR_MAX_FLOATS,
     "steps: epochs, increasing, at which the rate changes (30, 60: from the first update of "
     "epoch 31 and of epoch 61)"},
    {"net", "lr_factors", NULL, 0, MR_KEY_FLOATS, NET(lr_factors), "", 0, 1000, 1, 0, NULL,
     MR_MAX_FLOATS,
     "steps: one per boundary, the scaled rate's factor from that boundary on (0.1, 0.01)"},
    {"net", "accumulate", NULL, 0, MR_KEY_INT, NET(accumulate), "1", 1, 1024, 0, 0, NULL, 0,
     "micro-batches per update (gradient accumulation)"},
    {"net", "checkpoint", NULL, 0, MR_KEY_PATH, NET(checkpoint), "", 0, 0, 0, 0, NULL, 0,
     "if set: write checkpoints DIR/NAME-step<N>.h5 of this path, or DIR/step<N>.h5 of a "
     "folder DIR/ (relative: to the .cfg's folder; folders made; --keep prunes them, --resume "
     "auto takes the newest)"},
    {"net", "checkpoint_every", NULL, 0, MR_KEY_EVERY, NET(checkpoint_every), "1 epochs", 1,
     1 << 30, 0, 0, NULL, 0, "how often: N epochs or N steps (updates)"},
    {"net", "on_nan", NULL, 0, MR_KEY_ENUM, NET(on_nan), "stop", 0, 0, 0, 0, on_nan_names, 0,
     "a step whose loss or gradients are NaN or infinite: stop ends the fit with exit 1 (Keras "
     "TerminateOnNaN), skip drops that step's update and goes on"},
    {"net", "nan_patience", NULL, 0, MR_KEY_INT, NET(nan_patience), "10", 1, 1000000, 0, 0, NULL, 0,
     "skip: stop after this many skipped steps in a row"},
    {"net", "cuda_graphs", NULL, 0, MR_KEY_BOOL, NET(cuda_graphs), "1", 0, 1, 0, 0, NULL, 0,
     "GPUs: capture the steady training step once per shape as a CUDA graph and replay it (the "
     "same weights bit for bit; 0: queue every call each step; CPU replicas ignore it)"},
    {"net", "early_stopping", NULL, 0, MR_KEY_ENUM, NET(early_stopping), "none", 0, 0, 0, 0,
     mr_monitor_names, 0,
     "stop training when this epoch metric stops improving (Keras EarlyStopping's monitor; "
     "losses fall, accuracies rise)"},
    {"net", "patience", NULL, 0, MR_KEY_INT, NET(patience), "0", 0, 1000000, 0, 0, NULL, 0,
     "early_stopping: epochs without improvement before stopping (Keras patience)"},
    {"net", "min_delta", NULL, 0, MR_KEY_FLOAT, NET(min_delta), "0", 0, MR_KEY_BIG, 0, 0, NULL, 0,
     "early_stopping: a change smaller than this is no improvement (Keras min_delta)"},
    {"net", "reduce_lr_on_plateau", NULL, 0, MR_KEY_ENUM, NET(reduce_lr_on_plateau), "none", 0, 0,
     0, 0, mr_monitor_names, 0,
     "cut the learning rate when this epoch metric stops improving (Keras ReduceLROnPlateau's "
     "monitor); needs lr_schedule = constant and no warmup"},
    {"net", "reduce_lr_factor", NULL, 0, MR_KEY_FLOAT, NET(reduce_lr_factor), "0.1", 0, 1, 1, 1,
     NULL, 0, "reduce_lr_on_plateau: the rate is multiplied by this (Keras factor)"},
    {"net", "reduce_lr_patience", NULL, 0, MR_KEY_INT, NET(reduce_lr_patience), "10", 0, 1000000, 0,
     0, NULL, 0, "reduce_lr_on_plateau: epochs without improvement before a cut (Keras patience)"},
    {"net", "reduce_lr_min_delta", NULL, 0, MR_KEY_FLOAT, NET(reduce_lr_min_delta), "0.0001", 0,
     MR_KEY_BIG, 0, 0, NULL, 0,
     "reduce_lr_on_plateau: a smaller change is no improvement (Keras min_delta)"},
    {"net", "reduce_lr_cooldown", NULL, 0, MR_KEY_INT, NET(reduce_lr_cooldown), "0", 0, 1000000, 0,
     0, NULL, 0, "reduce_lr_on_plateau: epochs after a cut before counting again (Keras cooldown)"},
    {"net", "min_lr", NULL, 0, MR_KEY_FLOAT, NET(min_lr), "0", 0, 10, 0, 0, NULL, 0,
     "reduce_lr_on_plateau: the rate never goes below this (Keras min_lr)"},
    {"net", "save_best_only", NULL, 0, MR_KEY_ENUM, NET(save_best_only), "none", 0, 0, 0, 0,
     mr_monitor_names, 0,
     "--save writes the model at each epoch end where this metric improved on every epoch "
     "before (Keras ModelCheckpoint(save_best_only=True, monitor)), not at the end: the file "
     "holds the best epoch's model"},
    {"net", "restore_best_weights", NULL, 0, MR_KEY_BOOL, NET(restore_best_weights), "0", 0, 1, 0,
     0, NULL, 0,
     "early_stopping: end training with the weights of the best epoch (Keras "
     "restore_best_weights)"},
    {"net", "top_k", NULL, 0, MR_KEY_INT, NET(top_k), "0", 0, 1 << 20, 0, 0, NULL, 0,
     "if > 0: also report the top-k accuracy on the validation and test sets, the fraction whose "
     "label is among the top_k largest outputs, ties at the boundary counted in (Keras "
     "SparseTopKCategoricalAccuracy(k=top_k)); below the number of classes"},
    {"net", "per_class", NULL, 0, MR_KEY_BOOL, NET(per_class), "0", 0, 1, 0, 0, NULL, 0,
     "also report each class's accuracy (correct / examples of the class) and example count on "
     "the validation set after each epoch and on the test set; needs one of them"},

    {"data", "train_images", NULL, 0, MR_KEY_PATH, DATA(train_images), NULL, 0, 0, 0, 0, NULL, 0,
     "training images: IDX (raw or .gz), .npy, file.h5:/dataset, or a folder of class folders of "
     "PNG/JPEG images (labelled by the folders, as Keras image_dataset_from_directory)"},
    {"data", "train_labels", NULL, 0, MR_KEY_PATH, DATA(train_labels), "", 0, 0, 0, 0, NULL, 0,
     "training labels: class ids (integers, or floats with integer values) or one-hot rows (n, "
     "classes), same formats; required unless train_images is a folder"},
    {"data", "val_images", NULL, 0, MR_KEY_PATH, DATA(val_images), "", 0, 0, 0, 0, NULL, 0,
     "validation images (optional; Keras validation_data), instead of validation_split"},
    {"data", "val_labels", NULL, 0, MR_KEY_PATH, DATA(val_labels), "", 0, 0, 0, 0, NULL, 0,
     "validation labels (required with val_images, unless it is a folder)"},
    {"data", "test_images", NULL, 0, MR_KEY_PATH, DATA(test_images), "", 0, 0, 0, 0, NULL, 0,
     "test images (optional)"},
    {"data", "test_labels", NULL, 0, MR_KEY_PATH, DATA(test_labels), "", 0, 0, 0, 0, NULL, 0,
     "test labels (required with test_images, unless it is a folder)"},
    {"data", "scale", NULL, 0, MR_KEY_FLOAT, DATA(scale), "1", 0, 1e6, 1, 0, NULL, 0,
     "multiply inputs by this (e.g. 1/255); a fraction a/b is accepted"},
    {"data", "standardize", NULL, 0, MR_KEY_BOOL, DATA(standardize), "0", 0, 1, 0, 0, NULL, 0,
     "subtract the per-feature mean and divide by the standard deviation of the training split"},

    {"augment", "flip", NULL, 0, MR_KEY_BOOL, AUG(flip), "0", 0, 1, 0, 0, NULL, 0,
     "random horizontal flip (training only)"},
    {"augment", "shift", NULL, 0, MR_KEY_INT, AUG(shift), "0", 0, 64, 0, 0, NULL, 0,
     "random shift up to this many pixels on each axis, zero fill (training only)"},
    {MR_CFG_ANY_LAYER, "name", NULL, 0, MR_KEY_NAME, MR_LAY(name), "", 0, 0, 0, 0, NULL, 0,
     "the layer's name (letters, digits, _), for `input =` and `from =` of later layers and "
     "the summary; default: Keras's automatic name (dense_1)"},
    {MR_CFG_ANY_LAYER, "input", NULL, 0, MR_KEY_REF, MR_LAY(input_ref), "", 0, 0, 0, 0, NULL, 0,
     "what the layer takes: the output of the layer named so, or -N, N sections back (default "
     "-1: the section just before); not in [input]"},

    {"input", "shape", NULL, 0, MR_KEY_INTS, MR_LAY(shape), NULL, 1, 1 << 24, 0, 0, NULL, 3,
     "shape of one example: H,W,C (images, channels last) or F (features)"},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

const mr_config_key *mr_cfg_generic_keys(size_t *n) {
    *n = N_KEYS;
    return keys;
}

/* The singleton sections, then [input]: their names and help lines. */
static const struct {
    const char *name;
    mr_sec_kind kind;
    const char *help;
} singletons[MR_CFG_SINGLETONS] = {
    {"net", MR_SEC_NET, "training settings (once)"},
    {"data", MR_SEC_DATA, "data files and preprocessing (once)"},
    {"augment", MR_SEC_AUGMENT, "data augmentation of the training split (optional, once)"},
};
static const char *const input_help = "first layer section: the shape of one example";

const char *mr_cfg_section_name(int s) {
    return s < MR_CFG_SINGLETONS ? singletons[s].name
                                 : mr_layer_kind_name((mr_layer_kind)(s - MR_CFG_SINGLETONS));
}

mr_sec_kind mr_cfg_section_kind(int s) {
    return s < MR_CFG_SINGLETONS ? singletons[s].kind : MR_SEC_LAYER;
}

int mr_cfg_section_layer_kind(int s) {
    return s < MR_CFG_SINGLETONS ? -1 : s - MR_CFG_SINGLETONS;
}

const char *mr_cfg_section_help(int s) {
    if (s < MR_CFG_SINGLETONS) return singletons[s].help;
    const mr_layer_ops *ops = mr_layer_ops_for((mr_layer_kind)(s - MR_CFG_SINGLETONS));
    return ops ? ops->section_help : input_help;
}

int mr_cfg_section_keys(int s, int own_only, const mr_config_key **out) {
    const char *name = mr_cfg_section_name(s);
    const int layer = mr_cfg_section_kind(s) == MR_SEC_LAYER;
    int n = 0;
    /* the generic table's rows: the section's own (a singleton's, [input]'s),
     * and in a layer section those of every layer section, which come
     * first in the table ([input] takes no input) */
    for (size_t i = 0; i < N_KEYS; i++) {
        const mr_config_key *k = &keys[i];
        int in = strcmp(k->section, name) == 0;
        if (!own_only && layer && strcmp(k->section, MR_CFG_ANY_LAYER) == 0)
            in = !(strcmp(name, "input") == 0 && k->offset == MR_LAY(input_ref));
        if (in) out[n++] = k;
    }
    const mr_layer_ops *ops =
        layer ? mr_layer_ops_for((mr_layer_kind)(s - MR_CFG_SINGLETONS)) : NULL;
    for (int i = 0; ops != NULL && i < ops->n_keys; i++)
        out[n++] = &ops->keys[i];
    MR_ASSERT(n <= MR_CFG_MAX_KEYS);
    return n;
}

int mr_layer_kind_merges(mr_layer_kind kind) {
    const mr_layer_ops *ops = mr_layer_ops_for(kind);
    return ops != NULL && ops->merges;
}

const char *mr_activation_name(mr_activation a) {
    return mr_activation_names[a];
}
const char *mr_optimizer_name(mr_optimizer_kind o) {
    return optimizer_names[o];
}
const char *mr_initializer_name(mr_initializer init) {
    return mr_initializer_names[init];
}
const char *mr_loss_name(mr_loss_kind l) {
    return mr_loss_names[l];
}

/* Levenshtein distance, for "did you mean" (short strings only). */
int mr_cfg_edit_distance(const char *a, const char *b) {
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

/* Keras's class name and automatic layer name of layer kind k ("Conv2D",
 * "conv2d"; NULL: none): those its ops table declares (layer.h), read here
 * the other way; the model input's are Keras's InputLayer's. */
void mr_cfg_keras_section_names(int k, const char *out[2]) {
    const mr_layer_ops *ops = mr_layer_ops_for((mr_layer_kind)k);
    out[0] = ops ? ops->class_name : k == MR_LAYER_INPUT ? "InputLayer" : NULL;
    out[1] = ops ? ops->keras_name : k == MR_LAYER_INPUT ? "input_layer" : NULL;
}

/* The index of the section named `name` (any case), ours or a layer
 * kind's Keras names; -1 none. */
int mr_cfg_section_index(const char *name) {
    for (size_t s = 0; s < MR_CFG_N_SECTIONS; s++) {
        const int k = mr_cfg_section_layer_kind((int)s);
        if (k < 0) continue;
        const char *kn[2];
        mr_cfg_keras_section_names(k, kn);
        for (int j = 0; j < 2; j++)
            if (kn[j] && strcasecmp(kn[j], name) == 0) name = mr_layer_kind_name((mr_layer_kind)k);
    }
    for (size_t i = 0; i < MR_CFG_N_SECTIONS; i++)
        if (strcasecmp(mr_cfg_section_name((int)i), name) == 0) return (int)i;
    return -1;
}

/* 1: a name at edit distance d from `name` is worth suggesting (a few
 * letters, or a quarter of a long Keras name: GlobalAvgPooling2D). */
static int near_enough(int d, const char *name) {
    return d <= 3 || 4 * d <= (int)strlen(name);
}

/* The known section name nearest to `name`, in either spelling (written
 * as it is known), or NULL where none is near enough. */
const char *mr_cfg_nearest_section(const char *name) {
    const char *best = NULL;
    int bd = 99;
    for (size_t i = 0; i < MR_CFG_N_SECTIONS; i++) {
        const char *cand[3] = {mr_cfg_section_name((int)i), NULL, NULL};
        int k = mr_cfg_section_layer_kind((int)i);
        if (k >= 0) mr_cfg_keras_section_names(k, cand + 1);
        for (int j = 0; j < 3; j++) {
            int d = cand[j] ? mr_cfg_edit_distance(name, cand[j]) : 99;
            if (d < bd) bd = d, best = cand[j];
        }
    }
    return near_enough(bd, name) ? best : NULL;
}
