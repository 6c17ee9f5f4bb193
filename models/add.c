/* add.c: Add, the element-wise sum of two outputs of the same shape (a
 * residual connection, He et al. 2015): y = x + x2, dx = dx2 = dy.
 *   x: (B, S) the layer's input, x2: (B, S) the output its `from =` names
 *   -> y: (B, S), S any shape (H, W, C) or (F)
 * The model gives the second input (layer.h, in2, x2, dx2; model.c). The
 * CPU kernels are backends/cpu/add_cpu.c. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "models/model.h" /* mr_shape_format */

static mr_status add_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    int same = l->in.rank == l->in2.rank;
    for (int i = 0; same && i < l->in.rank; i++)
        same = l->in.d[i] == l->in2.d[i];
    if (!same) {
        char a[64], b[64];
        mr_shape_format(l->in, a, sizeof a);
        mr_shape_format(l->in2, b, sizeof b);
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [add] cannot add from = %s, of shape %s, to its input, of "
                            "shape %s: the shapes must be equal",
                            file, l->cfg->line, l->cfg->from_ref, b, a);
    }
    l->out = l->in;
    return MR_OK;
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg merge_keras_args[] = {MR_KERAS_ARGS_END};

/* [add]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key add_keys[] = {
    {"add", "from", NULL, 0, MR_KEY_REF, MR_LAY(from_ref), NULL, 0, 0, 0, 0, NULL, 0,
     "the earlier layer (NAME or -N) whose output is added to the input (a residual "
     "connection); the shapes must be equal"},
};

const mr_layer_ops mr_add_ops = {
    .class_name = "Add",
    .keras_name = "add",
    .keras_args = merge_keras_args,
    .section_help = "element-wise sum of the input and an earlier layer's output (Keras Add)",
    .keys = MR_KEYS(add_keys),
    .merges = 1,
    .setup = add_setup,
};
