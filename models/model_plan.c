/* model_plan.c: a model's plan from its .cfg (see model_plan.h): shape
 * inference through each layer kind's ops, Keras's automatic names, the
 * rules that tie the last layer to the loss, the weight layout. No backend,
 * no data. */
#include "models/model_plan.h"

#include <stdio.h>
#include <string.h>

#include "models/loss.h"
#include "runtime/file_kind.h"

/* Layer l's name: its name = if given, else Keras's automatic one, the
 * c-th of its kind ("dense", "dense_1", ...); as Keras, a name given does
 * not use up an automatic one. counts: automatic names taken, by kind. */
static void name_layer(mr_layer *l, int *counts) {
    if (l->cfg->name[0]) {
        snprintf(l->name, sizeof l->name, "%s", l->cfg->name);
        return;
    }
    const int c = counts[l->cfg->kind]++;
    if (c == 0)
        snprintf(l->name, sizeof l->name, "%s", l->ops->keras_name);
    else
        snprintf(l->name, sizeof l->name, "%s_%d", l->ops->keras_name, c);
}

/* Plans layer i of the .cfg (i >= 1: after [input]) as the next layer of
 * p: its inputs' shapes, name, output shape and weights. */
static mr_status plan_layer(mr_model_plan *p, int i, int *counts, mr_error *err) {
    const mr_config *cfg = p->cfg;
    const int j = p->n_layers++; /* .cfg section i is layer i - 1; [input] is -1 */
    mr_layer *l = &p->layers[j];
    l->cfg = &cfg->layers[i];
    l->ops = mr_layer_ops_for(l->cfg->kind);
    l->index = i;
    l->in = j > 0 ? p->layers[j - 1].out : p->in_shape;
    if (p->graph) {
        int *src = p->src[j];
        src[0] = l->cfg->src[0] - 1;
        src[1] = l->cfg->src[1] >= 0 ? l->cfg->src[1] - 1 : -1;
        l->in = src[0] < 0 ? p->in_shape : p->layers[src[0]].out;
        if (mr_layer_kind_merges(l->cfg->kind))
            l->in2 = src[1] < 0 ? p->in_shape : p->layers[src[1]].out;
    }
    name_layer(l, counts);
    /* one row: the only thing max_batch sizes here is scratch (model_plan.h) */
    MR_CHECK(l->ops->setup(l, 1, cfg->path, err));
    if (mr_shape_size(l->out) <= 0)
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [%s] would output an empty shape",
                            cfg->path, l->cfg->line, mr_layer_kind_name(l->cfg->kind));
    return MR_OK;
}

/* Names given with name = may not take an automatic one (Keras refuses two
 * layers of one name, and checkpoints store weights by name). */
static mr_status check_names(const mr_model_plan *p, mr_error *err) {
    for (int i = 0; i < p->n_layers; i++)
        for (int j = 0; j < p->n_layers; j++)
            if (j != i && p->layers[i].cfg->name[0] &&
                strcmp(p->layers[i].name, p->layers[j].name) == 0)
                return mr_error_set(err, MR_ERR_CONFIG,
                                    "%s:%d: name = %s is the automatic name of the [%s] of line "
                                    "%d; choose another",
                                    p->cfg->path, p->layers[i].cfg->line, p->layers[i].name,
                                    mr_layer_kind_name(p->layers[j].cfg->kind),
                                    p->layers[j].cfg->line);
    return MR_OK;
}

/* The activation the last layer l applies to its outputs, which is what the
 * loss rules read: its section's `activation` where its kind has one
 * (mr_layer_ops.has_activation), else -1 (a [flatten], an [add], ...: its
 * outputs are taken as they come, neither probabilities nor logits). */
static int output_activation(const mr_layer *l) {
    return l->ops->has_activation ? (int)l->cfg->activation : -1;
}

/* The loss rules that the last layer's activation `act` decides: softmax
 * probabilities are not logits (Keras would take them for logits, a
 * softmax applied twice), a linear layer read as probabilities trains
 * nowhere; binary_crossentropy's one output is the probability of class 1
 * (a sigmoid) or its logit (a softmax over one output is always 1, a
 * sigmoid's output is no logit), and its k > 1 outputs are multi-label, k
 * independent sigmoids and multi-hot labels (batch, k), for which Keras has
 * no class_weight (a class per output, not per example). */
static mr_status check_loss(const mr_model_plan *p, int act, mr_error *err) {
    const mr_net_cfg *net = &p->cfg->net;
    const char *path = p->cfg->path;
    const int line = p->layers[p->n_layers - 1].cfg->line;
    const int bce = net->loss == MR_LOSS_BINARY_CROSSENTROPY;
    const int ce = mr_loss_fuses_softmax(net->loss) || bce;
    const int softmax = act == MR_ACTIVATION_SOFTMAX, sigmoid = act == MR_ACTIVATION_SIGMOID;
    const int multi_weighted = p->out_size > 1 && net->class_weight.n > 0;
    if (bce && (softmax || (net->from_logits && sigmoid) || multi_weighted)) {
        const char *why = softmax          ? "needs activation = sigmoid on the last layer, not "
                                             "softmax"
                          : multi_weighted ? "with more than one output (multi-label) takes no "
                                             "class_weight"
                                           : "with from_logits = 1 needs a linear last layer, not "
                                             "a sigmoid (drop from_logits)";
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [net] loss = binary_crossentropy %s", path,
                            line, why);
    }
    if (!ce && (net->from_logits || net->label_smoothing > 0.0f))
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: [net] %s applies to the cross-entropy losses, not to loss = %s",
                            path, net->from_logits ? "from_logits" : "label_smoothing",
                            mr_loss_name(net->loss));
    if (net->label_smoothing > 0.0f && net->loss == MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: [net] label_smoothing needs loss = categorical_crossentropy "
                            "(Keras's SparseCategoricalCrossentropy has no label smoothing)",
                            path);
    if (ce && net->from_logits && softmax)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [net] from_logits = 1, but the last layer is a softmax: its "
                            "outputs are probabilities (drop from_logits, or make it linear)",
                            path, line);
    if (ce && !net->from_logits && act == MR_ACTIVATION_LINEAR)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: the last layer is linear and the loss a cross-entropy: set "
                            "[net] from_logits = 1 (its outputs are logits) or activation = %s",
                            path, line, bce ? "sigmoid" : "softmax");
    return MR_OK;
}

/* The [net] keys counted in classes: top_k below them (a label is always
 * among k or more of k classes), one class_weight per class (Keras raises
 * on a class without one). */
static mr_status check_classes(const mr_model_plan *p, mr_error *err) {
    const mr_net_cfg *net = &p->cfg->net;
    const int line = p->layers[p->n_layers - 1].cfg->line;
    if (net->top_k >= (int)p->out_size)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [net] top_k = %d must be below the %d classes the last layer "
                            "outputs",
                            p->cfg->path, line, net->top_k, (int)p->out_size);
    if (net->class_weight.n > 0 && net->class_weight.n != p->classes)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [net] class_weight has %d weights, but the last layer outputs "
                            "%d classes: give one weight per class",
                            p->cfg->path, line, net->class_weight.n, p->classes);
    return MR_OK;
}

static int watches_accuracy(mr_monitor m) {
    return m == MR_MONITOR_ACCURACY || m == MR_MONITOR_VAL_ACCURACY;
}

/* Regression (float targets) has no classes: nothing to rank, weigh or
 * tabulate, and no accuracy for a callback to watch (its metric is mae). */
static mr_status check_regression(const mr_model_plan *p, mr_error *err) {
    const mr_net_cfg *net = &p->cfg->net;
    const int line = p->layers[p->n_layers - 1].cfg->line;
    const char *key = net->top_k > 0            ? "top_k"
                      : net->class_weight.n > 0 ? "class_weight"
                      : net->per_class          ? "per_class"
                                                : NULL;
    if (key != NULL)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [net] %s needs classes, but loss = %s on this last layer (not "
                            "a softmax) is a regression on float targets",
                            p->cfg->path, line, key, mr_loss_name(net->loss));
    const mr_monitor m = watches_accuracy(net->early_stopping)   ? net->early_stopping
                         : watches_accuracy(net->save_best_only) ? net->save_best_only
                                                                 : net->reduce_lr_on_plateau;
    key = watches_accuracy(net->early_stopping)   ? "early_stopping"
          : watches_accuracy(net->save_best_only) ? "save_best_only"
          : watches_accuracy(m)                   ? "reduce_lr_on_plateau"
                                                  : NULL;
    if (key == NULL) return MR_OK;
    return mr_error_set(err, MR_ERR_CONFIG,
                        "%s:%d: [net] %s = %s watches an accuracy, but loss = %s on this last "
                        "layer is a regression, whose metric is mae: watch val_loss or loss",
                        p->cfg->path, line, key,
                        m == MR_MONITOR_ACCURACY ? "accuracy" : "val_accuracy",
                        mr_loss_name(net->loss));
}

/* The outputs and the loss's reading of them: the classes and labels per
 * example, then the rules above; a softmax (cross-entropies) or a sigmoid
 * (binary_crossentropy) on the last layer is fused with the loss, which
 * computes it from the logits (stable; for the sigmoid, Keras 3 too
 * computes the loss from its input, loss_row.h), and from_logits says the
 * outputs are logits already. */
static mr_status plan_loss(mr_model_plan *p, mr_error *err) {
    const mr_net_cfg *net = &p->cfg->net;
    mr_layer *last = &p->layers[p->n_layers - 1];
    p->out_size = mr_shape_size(last->out);
    if (last->out.rank != 1)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: the last layer must output class scores (a flat vector); "
                            "add [flatten] and a [dense] layer",
                            p->cfg->path, last->cfg->line);
    const int bce = net->loss == MR_LOSS_BINARY_CROSSENTROPY;
    const int act = output_activation(last);
    p->regression = mr_loss_is_regression(net->loss) && act != MR_ACTIVATION_SOFTMAX;
    p->classes = bce && p->out_size == 1 ? 2 : (int)p->out_size; /* labels 0 and 1 */
    p->label_width = (bce || p->regression) && p->out_size > 1 ? (int)p->out_size : 1;
    MR_CHECK(check_loss(p, act, err));
    MR_CHECK(p->regression ? check_regression(p, err) : check_classes(p, err));
    const int ce = mr_loss_fuses_softmax(net->loss) || bce;
    if (ce && (act == MR_ACTIVATION_SOFTMAX || net->from_logits)) {
        last->logits_out = act == MR_ACTIVATION_SOFTMAX;
        p->fused_softmax = 1;
    }
    if (bce && act == MR_ACTIVATION_SIGMOID) {
        last->logits_out = 1;
        p->fused_softmax = 1;
    }
    return MR_OK;
}

/* The weights' places: trainable ones in reverse layer order into params,
 * the rest into state; and the sizes the model's buffers are made from. */
static void plan_layout(mr_model_plan *p) {
    int64_t np = 0, ns = 0;
    for (int i = p->n_layers - 1; i >= 0; i--) {
        p->param_offset[i] = np;
        for (int w = 0; w < p->layers[i].n_weights; w++) {
            mr_weight *wt = &p->layers[i].w[w];
            wt->offset = wt->trainable ? np : ns;
            if (wt->trainable)
                np += wt->size;
            else
                ns += wt->size;
            if (wt->size > p->largest_weight) p->largest_weight = wt->size;
        }
    }
    p->n_params = np;
    p->n_state = ns;
    p->widest = p->in_size;
    for (int i = 0; i < p->n_layers; i++) {
        const int64_t o = mr_shape_size(p->layers[i].out);
        if (o > p->widest) p->widest = o;
        p->whole_batch |= p->layers[i].ops->whole_batch;
    }
}

/* A model read from a Keras file has no line its user wrote (the
 * importer generated its .cfg text): a refusal "FILE:LINE: rest" names the
 * layer of that line, "FILE: layer 'NAME' (Class): rest", as the
 * importer's own refusals do; a line of no layer (the compile settings'
 * [net]) is left out, "FILE: rest". */
static mr_status name_keras_layer(const mr_config *cfg, mr_status st, mr_error *err) {
    const size_t n = strlen(cfg->path);
    const int keras = (n > 6 && strcmp(cfg->path + n - 6, ".keras") == 0) ||
                      (n > 3 && strcmp(cfg->path + n - 3, ".h5") == 0) ||
                      mr_file_kind_of(cfg->path) == MR_FILE_KIND_KERAS;
    int line, used = 0;
    if (!keras || strncmp(err->msg, cfg->path, n) != 0 ||
        sscanf(err->msg + n, ":%d: %n", &line, &used) != 1 || used == 0)
        return st;
    char rest[sizeof err->msg];
    snprintf(rest, sizeof rest, "%s", err->msg + n + used);
    mr_error_clear(err); /* the same refusal, in other words */
    for (int i = 1; i < cfg->n_layers; i++) {
        const mr_layer_cfg *l = &cfg->layers[i];
        if (l->line == line && l->name[0])
            return mr_error_set(err, st, "%s: layer '%s' (%s): %.600s", cfg->path, l->name,
                                mr_layer_ops_for(l->kind)->class_name, rest);
    }
    return mr_error_set(err, st, "%s: %.600s", cfg->path, rest);
}

static mr_status plan_make(mr_model_plan *p, const mr_config *cfg, mr_error *err) {
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    p->graph = cfg->graph;
    const mr_layer_cfg *in = &cfg->layers[0];
    MR_ASSERT(in->kind == MR_LAYER_INPUT);
    p->in_shape.rank = in->shape_rank;
    for (int i = 0; i < in->shape_rank; i++)
        p->in_shape.d[i] = in->shape[i];
    p->in_size = mr_shape_size(p->in_shape);
    int counts[MR_LAYER_KIND_COUNT] = {0};
    for (int i = 1; i < cfg->n_layers; i++)
        MR_CHECK(plan_layer(p, i, counts, err));
    MR_CHECK(check_names(p, err));
    MR_CHECK(plan_loss(p, err));
    plan_layout(p);
    return MR_OK;
}

mr_status mr_model_plan_make(mr_model_plan *p, const mr_config *cfg, mr_error *err) {
    const mr_status st = plan_make(p, cfg, err);
    return st == MR_OK ? MR_OK : name_keras_layer(cfg, st, err);
}
