/* reshape.c: Keras's Reshape, (B, in...) -> (B, target_shape...): the same
 * row-major values under a new shape of one example (H,W,C or F), one of
 * whose sizes may be -1, what the others leave. A view as Flatten
 * (layer.h): the model hands the buffers on; the kernels (Flatten's) copy
 * for callers with separate buffers. */
#include "models/layer.h"
#include "models/config_keys.h"
#include "models/keras_args.h"
#include "runtime/strbuf.h"

static mr_status reshape_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    const mr_layer_cfg *c = l->cfg;
    const int n = c->target_rank;
    const int64_t size = mr_shape_size(l->in);
    if (n != 1 && n != 3)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [reshape] target_shape has %d values: give H,W,C or F", file,
                            c->line, n);
    int64_t known = 1;
    int free_axis = -1;
    for (int i = 0; i < n; i++) {
        const int d = c->target_shape[i];
        if (d == 0 || (d == -1 && free_axis >= 0))
            return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [reshape] target_shape: %s", file,
                                c->line, d == 0 ? "a size of 0" : "more than one -1");
        if (d == -1)
            free_axis = i;
        else
            known *= d;
    }
    l->out.rank = n;
    for (int i = 0; i < n; i++)
        l->out.d[i] = c->target_shape[i];
    if (free_axis >= 0 && size % known == 0) l->out.d[free_axis] = (int)(size / known);
    if (mr_shape_size(l->out) != size || (free_axis >= 0 && size % known != 0))
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [reshape] target_shape does not hold the input's %lld values",
                            file, c->line, (long long)size);
    return MR_OK;
}

/* Keras's Reshape config key: the target shape as given, -1 and all. */
static void reshape_keras_config(const mr_layer *l, mr_sb *b) {
    mr_sb_printf(b, ", \"target_shape\": [");
    for (int i = 0; i < l->cfg->target_rank; i++)
        mr_sb_printf(b, "%s%d", i ? ", " : "", l->cfg->target_shape[i]);
    mr_sb_printf(b, "]");
}

/* Its Keras class's config arguments, for the importer (models/keras_args.h). */
static const mr_keras_arg reshape_keras_args[] = {{"target_shape", MR_ARG_SHAPE, "target_shape"},
                                                  MR_KERAS_ARGS_END};

/* [reshape]'s own .cfg keys (models/config_keys.h). */
static const mr_config_key reshape_keys[] = {
    {"reshape", "target_shape", NULL, 0, MR_KEY_INTS, MR_LAY(target_shape), NULL, -1, 1 << 24, 0, 0,
     NULL, 3,
     "one example's new shape, H,W,C or F, of as many values as the input; one of them may be "
     "-1: what the others leave"},
};

const mr_layer_ops mr_reshape_ops = {
    .class_name = "Reshape",
    .keras_name = "reshape",
    .keras_args = reshape_keras_args,
    .section_help = "the same values in a new shape (Reshape)",
    .keys = MR_KEYS(reshape_keys),
    .keras_config = reshape_keras_config,
    .setup = reshape_setup,
    .view = 1,
};
