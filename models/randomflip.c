/* randomflip.c: Keras's RandomFlip, (B, H, W, C) -> (B, H, W, C): in
 * training each example is flipped left-right, up-down, or both, each axis
 * the mode allows with probability one half (models/randomflip.h: the draw,
 * keyed by the example's place in the global batch as Dropout's masks
 * are, so R replicas x B and 1 x RB flip the same examples); in evaluate
 * and predict it is the identity, as Keras's. No weights. The gradient is
 * the same flip of dy. The kernels are backends/cpu/randomflip_cpu.c and
 * backends/cuda/randomflip_cuda.cu. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/keras.h"
#include "models/randomflip.h"
#include "runtime/strbuf.h"

/* The mode's values, in MR_RANDOMFLIP_*'s order. */
static const char *const randomflip_modes[] = {"horizontal", "vertical", "horizontal_and_vertical",
                                               NULL};

static mr_status randomflip_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    if (l->in.rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [randomflip] needs an image input (H,W,C), got (%d)", file,
                            l->cfg->line, l->in.d[0]);
    l->out = l->in;
    return MR_OK;
}

/* Keras 3's RandomFlip config keys after name, trainable and dtype. The
 * seed is not kept: the job's seed draws the flips (as Dropout's). */
static void randomflip_keras_config(const mr_layer *l, mr_sb *b) {
    mr_sb_printf(b, ", \"seed\": null, \"mode\": \"%s\", \"data_format\": \"channels_last\"",
                 randomflip_modes[l->cfg->flip_mode]);
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h):
 * mode as the .cfg's (whose parser checks the name), the seed of no effect
 * (the job's seed draws the flips). */
static const mr_keras_arg randomflip_keras_args[] = {
    {"mode", MR_ARG_STRING, "mode"},
    {"seed", MR_ARG_IGNORE, NULL},
    MR_KERAS_CHANNELS_LAST,
    MR_KERAS_ARGS_END,
};

/* [randomflip]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key randomflip_keys[] = {
    {"randomflip", "mode", NULL, 0, MR_KEY_ENUM, MR_LAY(flip_mode), "horizontal_and_vertical", 0, 0,
     0, 0, randomflip_modes, 0,
     "horizontal (left-right), vertical (up-down) or horizontal_and_vertical: in training each "
     "axis is flipped with probability 1/2 per example (Keras RandomFlip's mode)"},
};

const mr_layer_ops mr_randomflip_ops = {
    .class_name = "RandomFlip",
    .keras_name = "random_flip",
    .keras_args = randomflip_keras_args,
    .section_help = "random flips of each image, training only; the identity in evaluate and "
                    "predict (RandomFlip)",
    .keys = MR_KEYS(randomflip_keys),
    .keras_config = randomflip_keras_config,
    .setup = randomflip_setup,
};
