/* concatenate.c: Concatenate, two outputs joined along the last axis
 * (Keras Concatenate(axis=-1): DenseNet's and Inception's merge):
 *   x: (B, S, C1) the layer's input, x2: (B, S, C2) the output its
 *   `from =` names -> y: (B, S, C1 + C2), y[..., :C1] = x, y[..., C1:] = x2;
 *   S the other axes ((H, W) of an image, none for features), equal on
 *   both sides. dx = dy[..., :C1], dx2 = dy[..., C1:].
 * The model gives the second input (layer.h, in2, x2, dx2; model.c). The
 * kernels are backends/cpu/concatenate_cpu.c and
 * backends/cuda/concatenate_cuda.cu. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/model.h" /* mr_shape_format */
#include "runtime/strbuf.h"

static mr_status concatenate_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    const int r = l->in.rank;
    int same = r == l->in2.rank;
    for (int i = 0; same && i < r - 1; i++)
        same = l->in.d[i] == l->in2.d[i];
    if (!same) {
        char a[64], b[64];
        mr_shape_format(l->in, a, sizeof a);
        mr_shape_format(l->in2, b, sizeof b);
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [concatenate] cannot join from = %s, of shape %s, to its "
                            "input, of shape %s: all axes but the last must be equal",
                            file, l->cfg->line, l->cfg->from_ref, b, a);
    }
    l->out = l->in;
    l->out.d[r - 1] += l->in2.d[r - 1];
    return MR_OK;
}

static void concatenate_keras_config(const mr_layer *l, mr_sb *b) {
    (void)l;
    mr_sb_printf(b, ", \"axis\": -1");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg concat_keras_args[] = {{"axis", MR_ARG_EQ, "-1"}, MR_KERAS_ARGS_END};

/* [concatenate]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key concatenate_keys[] = {
    {"concatenate", "from", NULL, 0, MR_KEY_REF, MR_LAY(from_ref), NULL, 0, 0, 0, 0, NULL, 0,
     "the earlier layer (NAME or -N) whose output is joined after the input along the last axis "
     "(channels, or features); the other axes must be equal"},
};

const mr_layer_ops mr_concatenate_ops = {
    .class_name = "Concatenate",
    .keras_name = "concatenate",
    .keras_args = concat_keras_args,
    .section_help =
        "the input and an earlier layer's output joined along the last axis (Keras Concatenate)",
    .keys = MR_KEYS(concatenate_keys),
    .merges = 1,
    .setup = concatenate_setup,
    .keras_config = concatenate_keras_config,
};
