/* config_check.c: the checks between keys once a whole .cfg is read:
 * sections a model needs, [net] keys that exclude or need each other, the
 * validation set's watchers, layer names and references (`input =`,
 * `from =`) resolved into the graph, and defaults that depend on other
 * keys. */
#include "models/config_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parse's one failure is recorded here, where most of them are found
 * (config.c's reading calls it too, one way: this file calls none of it). */
int mr_cfg_fail(mr_cfg_parse *ps, int line, const char *fmt, ...) {
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

/* The section a reference (`input =` or `from =` of section i, text ref,
 * "" for -1) names, or -1 after failing. Only an earlier section may be
 * named: the layers run in the file's order, so the graph has no cycle. */
static int resolve_ref(mr_cfg_parse *ps, int i, const char *key, const char *ref) {
    mr_config *cfg = ps->cfg;
    const mr_layer_cfg *l = &cfg->layers[i];
    const char *sec = mr_layer_kind_name(l->kind);
    if (ref[0] == '\0') return i - 1;
    if (ref[0] == '-') {
        int n = atoi(ref + 1);
        if (n > i) {
            mr_cfg_fail(ps, l->line, "[%s] %s = %s: only %d section%s before this one", sec, key,
                        ref, i, i == 1 ? " comes" : "s come");
            return -1;
        }
        return i - n;
    }
    for (int j = 0; j < cfg->n_layers; j++) {
        if (strcmp(cfg->layers[j].name, ref) != 0) continue;
        if (j < i) return j;
        mr_cfg_fail(
            ps, l->line,
            "[%s] %s = %s: %s (line %d); a layer takes only outputs of the layers before it, so "
            "the graph has no cycle",
            sec, key, ref, j == i ? "that is this layer" : "that layer comes later",
            cfg->layers[j].line);
        return -1;
    }
    mr_cfg_fail(ps, l->line, "[%s] %s = %s: no layer has that name (name = %s)", sec, key, ref,
                ref);
    return -1;
}

/* Names are unique; references resolve into src[] (config.h). */
static int resolve_refs(mr_cfg_parse *ps) {
    mr_config *cfg = ps->cfg;
    cfg->graph = 0;
    for (int i = 0; i < cfg->n_layers; i++) {
        mr_layer_cfg *l = &cfg->layers[i];
        for (int j = 0; j < i && l->name[0]; j++)
            if (strcmp(cfg->layers[j].name, l->name) == 0)
                return mr_cfg_fail(ps, l->line,
                                   "[%s] name = %s: the layer of line %d has that name",
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
            return mr_cfg_fail(
                ps, cfg->layers[j].line,
                "[%s]: no later layer takes its output (input = or from =), and only the "
                "last layer is the model's output",
                mr_layer_kind_name(cfg->layers[j].kind));
    }
    return 1;
}

/* The sections a model needs: [net], [input] and a layer after it. [data] may be
 * left out, as a Keras model file has none: the data then come from the command
 * line or the caller's arrays (mirrored.h). */
static int check_sections(mr_cfg_parse *ps) {
    const mr_config *cfg = ps->cfg;
    if (!ps->seen[0]) return mr_cfg_fail(ps, 1, "missing section [net]");
    if (cfg->n_layers == 0)
        return mr_cfg_fail(ps, 1, "missing section [input] (and the layers after it)");
    if (cfg->n_layers == 1) return mr_cfg_fail(ps, cfg->layers[0].line, "no layers after [input]");
    return 1;
}

/* The [net] keys that watch the validation set, and what it reports on. */
static int check_validation(mr_cfg_parse *ps) {
    const mr_config *cfg = ps->cfg;
    /* images without labels: a folder of class folders, or a missing key,
     * which the loader tells apart (the folder need not exist here) */
    if (cfg->data.test_images[0] == '\0' && cfg->data.test_labels[0] != '\0')
        return mr_cfg_fail(ps, 1, "[data] test_labels without test_images: give both or neither");
    if (cfg->data.val_images[0] == '\0' && cfg->data.val_labels[0] != '\0')
        return mr_cfg_fail(ps, 1, "[data] val_labels without val_images: give both or neither");
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
            return mr_cfg_fail(
                ps, 1,
                "[net] %s = %s needs a validation set: set validation_split or [data] "
                "val_images",
                watchers[i].key, mr_monitor_names[mon]);
    }
    if (cfg->net.per_class && !has_val && cfg->data.test_images[0] == '\0')
        return mr_cfg_fail(
            ps, 1,
            "[net] per_class = 1 has nothing to report on: set validation_split, [data] "
            "val_images or [data] test_images");
    return 1;
}

/* lr_schedule = steps and its lists. */
static int check_lr_steps(mr_cfg_parse *ps) {
    const mr_net_cfg *net = &ps->cfg->net;
    if (net->lr_schedule != MR_LR_SCHEDULE_STEPS) {
        if (net->lr_boundaries.n || net->lr_factors.n)
            return mr_cfg_fail(ps, 1,
                               "[net] lr_boundaries and lr_factors go with lr_schedule = steps");
        return 1;
    }
    const mr_floats *b = &net->lr_boundaries, *f = &net->lr_factors;
    if (b->n == 0 || f->n != b->n)
        return mr_cfg_fail(ps, 1,
                           "[net] lr_schedule = steps needs lr_boundaries (epochs) and as many "
                           "lr_factors (%d and %d given)",
                           b->n, f->n);
    for (int i = 1; i < b->n; i++)
        if (!(b->v[i] > b->v[i - 1]))
            return mr_cfg_fail(ps, 1, "[net] lr_boundaries must increase: %g after %g",
                               (double)b->v[i], (double)b->v[i - 1]);
    return 1;
}

/* The [net] keys that exclude or need each other. */
static int check_net(mr_cfg_parse *ps) {
    const mr_config *cfg = ps->cfg;
    const mr_net_cfg *net = &cfg->net;
    /* one sigmoid output: no classes to rank or to tabulate */
    if (net->loss == MR_LOSS_BINARY_CROSSENTROPY && (net->top_k > 0 || net->per_class))
        return mr_cfg_fail(ps, 1, "[net] %s does not apply to loss = binary_crossentropy",
                           net->top_k > 0 ? "top_k" : "per_class");
    if (net->reduce_lr_on_plateau != MR_MONITOR_NONE &&
        (net->lr_schedule != MR_LR_SCHEDULE_CONSTANT || net->warmup_epochs > 0.0f))
        return mr_cfg_fail(
            ps, 1,
            "[net] reduce_lr_on_plateau sets the rate itself: it needs lr_schedule = "
            "constant and no warmup_epochs (as Keras's needs a float learning rate)");
    if (!check_lr_steps(ps)) return 0;
    if (net->class_weight.n > 0) {
        int any = 0;
        for (int i = 0; i < net->class_weight.n; i++)
            any |= net->class_weight.v[i] > 0.0f;
        if (!any)
            return mr_cfg_fail(ps, 1,
                               "[net] class_weight: every weight is 0 (nothing would train)");
    }
    if ((net->clipnorm > 0.0f) + (net->global_clipnorm > 0.0f) + (net->clipvalue > 0.0f) > 1)
        return mr_cfg_fail(
            ps, 1,
            "[net] clipnorm, global_clipnorm and clipvalue: give one of them at most (as "
            "Keras allows)");
    if (cfg->data.val_images[0] != '\0' && net->validation_split > 0.0f)
        return mr_cfg_fail(
            ps, 1,
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
static int check_normalization(mr_cfg_parse *ps) {
    const mr_config *cfg = ps->cfg;
    for (int i = 1; i < cfg->n_layers; i++) {
        const mr_layer_cfg *l = &cfg->layers[i];
        if (l->kind != MR_LAYER_NORMALIZATION) continue;
        if ((l->mean.n > 0) != (l->variance.n > 0))
            return mr_cfg_fail(
                ps, l->line,
                "[normalization] mean and variance go together: give both, or neither "
                "to adapt them to the training data");
        if (l->mean.n > 0) continue;
        /* adapted statistics are those of the model's input (after [data]
         * scale), computed before training: only [rescaling] may come
         * between, which the adaptation applies too */
        for (int j = l->src[0]; j > 0; j = cfg->layers[j].src[0])
            if (cfg->layers[j].kind != MR_LAYER_RESCALING)
                return mr_cfg_fail(
                    ps, l->line,
                    "[normalization] without mean and variance adapts to the training "
                    "data: it must take the model input, directly after [input] or "
                    "[rescaling] layers only (not [%s] of line %d)",
                    mr_layer_kind_name(cfg->layers[j].kind), cfg->layers[j].line);
    }
    return 1;
}

int mr_cfg_cross_check(mr_cfg_parse *ps) {
    if (!check_sections(ps) || !check_validation(ps) || !check_net(ps)) return 0;
    default_pool_strides(ps->cfg);
    return resolve_refs(ps) && check_normalization(ps);
}
