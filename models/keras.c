/* keras.c: Keras's legacy .h5 layout and the parts of a .keras archive
 * (keras.h). The JSON keys and their order follow what Keras 3.15 writes
 * for these layer classes; load_model needs far fewer, but h5py users and
 * other tools read the file as Keras would have written it. */
#include "models/keras.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "runtime/isolate.h"
#include "runtime/strbuf.h"
#include "runtime/temp_files.h"
#include "runtime/zip_read.h"

#define MODEL_NAME "sequential"

static const char *dtype_policy =
    "{\"module\": \"keras\", \"class_name\": \"DTypePolicy\", \"config\": {\"name\": "
    "\"float32\"}, \"registered_name\": null}";

void mr_keras_kernel_regularizer(mr_sb *b, float l2) {
    mr_keras_regularizer(b, "kernel_regularizer", l2);
}

void mr_keras_regularizer(mr_sb *b, const char *key, float l2) {
    mr_sb_printf(b, "\"%s\": ", key);
    if (l2 <= 0.0f) {
        mr_sb_printf(b, "null");
        return;
    }
    mr_sb_printf(b, "{\"module\": \"keras.regularizers\", \"class_name\": \"L2\", \"config\": "
                    "{\"l2\": ");
    mr_sb_float(b, l2);
    mr_sb_printf(b, "}, \"registered_name\": null}");
}

const char *mr_keras_initializer_class(mr_initializer init) {
    static const char *const cls[] = {
        [MR_INIT_GLOROT_UNIFORM] = "GlorotUniform",
        [MR_INIT_GLOROT_NORMAL] = "GlorotNormal",
        [MR_INIT_HE_UNIFORM] = "HeUniform",
        [MR_INIT_HE_NORMAL] = "HeNormal",
    };
    return cls[init];
}

const char *mr_keras_initializer(const char *cls) {
    /* the variance-scaling ones share their config (Keras 3.15) */
#define VARIANCE_SCALING(name)                                                                     \
    if (strcmp(cls, name) == 0)                                                                    \
        return "{\"module\": \"keras.initializers\", \"class_name\": \"" name "\", "               \
               "\"config\": {\"seed\": null, \"input_axes\": null, \"output_axes\": null}, "       \
               "\"registered_name\": null}";
    VARIANCE_SCALING("GlorotUniform")
    VARIANCE_SCALING("GlorotNormal")
    VARIANCE_SCALING("HeUniform")
    VARIANCE_SCALING("HeNormal")
#undef VARIANCE_SCALING
    if (strcmp(cls, "Ones") == 0)
        return "{\"module\": \"keras.initializers\", \"class_name\": \"Ones\", \"config\": {}, "
               "\"registered_name\": null}";
    return "{\"module\": \"keras.initializers\", \"class_name\": \"Zeros\", \"config\": {}, "
           "\"registered_name\": null}";
}

const char *mr_keras_activation(mr_activation a) {
    return a == MR_ACTIVATION_LINEAR ? "linear" : mr_activation_name(a);
}

const char *mr_keras_padding(mr_padding p) {
    return p == MR_PADDING_SAME ? "same" : "valid";
}

/* [null, H, W, C] or [null, F] */
static void batch_shape(mr_sb *b, mr_shape s) {
    mr_sb_printf(b, "[null");
    for (int i = 0; i < s.rank; i++)
        mr_sb_printf(b, ", %d", s.d[i]);
    mr_sb_printf(b, "]");
}

/* Depth-first from layer i towards the input, its inputs in order ([add]:
 * input, then from), numbering each layer where it is first reached. */
static void walk_from(const mr_model *m, int i, int *index, int *next) {
    if (i < 0 || index[i] >= 0) return;
    index[i] = (*next)++;
    walk_from(m, m->src[i][0], index, next);
    if (mr_layer_kind_merges(m->layers[i].cfg->kind)) walk_from(m, m->src[i][1], index, next);
}

/* The order of Keras's layers (model.layers) into order[]: model layer
 * indices. Keras 3 orders a Functional's layers by depth, the longest path
 * to the output, deepest first, and layers of one depth in the order a
 * depth-first walk from the output reaches them (map_graph and _build_map
 * of the keras.src.ops.function module); the InputLayer, deepest of all, comes
 * before them all. It is not the file's order where a shortcut's layers
 * sit beside a block's (a projection convolution and the block's second
 * one have one depth), and Keras pairs a legacy .h5's weights, and names
 * the groups of a weights file, in its order. A chain's is the file's. */
static void keras_order(const mr_model *m, int *order) {
    const int n = m->n_layers;
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (!m->graph) return;
    int depth[MR_MAX_LAYERS] = {0}, index[MR_MAX_LAYERS], next = 0;
    /* layers only take earlier outputs: from the last, each depth is final
     * before its inputs are reached */
    for (int i = n - 1; i >= 0; i--)
        for (int k = 0; k < (mr_layer_kind_merges(m->layers[i].cfg->kind) ? 2 : 1); k++) {
            const int s = m->src[i][k];
            if (s >= 0 && depth[s] < depth[i] + 1) depth[s] = depth[i] + 1;
        }
    for (int i = 0; i < n; i++)
        index[i] = -1;
    walk_from(m, n - 1, index, &next);
    /* insertion sort: deeper first, then walk order (n is small) */
    for (int a = 1; a < n; a++) {
        const int v = order[a];
        int b = a;
        for (; b > 0; b--) {
            const int u = order[b - 1];
            if (depth[u] > depth[v] || (depth[u] == depth[v] && index[u] < index[v])) break;
            order[b] = u;
        }
        order[b] = v;
    }
}

void mr_keras_layer_order(const mr_model *m, int *order) {
    keras_order(m, order);
}

/* The config object of one layer (the keys Keras writes, in its order). */
static void layer_config(mr_sb *b, const mr_layer *l) {
    if (l->ops->keras_whole_config) {
        mr_sb_printf(b, "{");
        l->ops->keras_config(l, b);
        mr_sb_printf(b, "}");
        return;
    }
    mr_sb_printf(b, "{\"name\": \"%s\", \"trainable\": true, \"dtype\": %s", l->name, dtype_policy);
    if (l->ops->keras_config != NULL) l->ops->keras_config(l, b);
    mr_sb_printf(b, "}");
}

/* Keras's name of the loss (compile(loss="...")): its long names for mse and mae. */
static const char *loss_name(mr_loss_kind k) {
    return k == MR_LOSS_MSE   ? "mean_squared_error"
           : k == MR_LOSS_MAE ? "mean_absolute_error"
                              : mr_loss_name(k);
}

/* `, "key": v`; with or_null, null where v is 0 ("not set", Keras's None). */
static void key_float(mr_sb *b, const char *key, float v, int or_null) {
    mr_sb_printf(b, ", \"%s\": ", key);
    if (or_null && v <= 0.0f)
        mr_sb_printf(b, "null");
    else
        mr_sb_float(b, v);
}

/* {"class_name": "Adam", "config": {...}} (archive: with module keys), the
 * keys in the order Keras 3.15's get_config writes them */
static void optimizer_config(mr_sb *b, const mr_model *m, float lr, int archive) {
    const mr_optimizer *o = &m->opt;
    const int adam = o->kind == MR_OPTIMIZER_ADAM || o->kind == MR_OPTIMIZER_ADAMW;
    mr_sb_printf(b, "{%s\"class_name\": \"%s\", \"config\": {\"name\": \"%s\"",
                 archive ? "\"module\": \"keras.optimizers\", " : "", mr_optimizer_keras_class(o),
                 mr_optimizer_keras_name(o));
    key_float(b, "learning_rate", lr, 0);
    key_float(b, "weight_decay", o->weight_decay, 1);
    key_float(b, "clipnorm", o->clipnorm, 1);
    key_float(b, "global_clipnorm", o->global_clipnorm, 1);
    key_float(b, "clipvalue", o->clipvalue, 1);
    mr_sb_printf(b, ", \"use_ema\": false, \"ema_momentum\": 0.99, "
                    "\"ema_overwrite_frequency\": null, \"loss_scale_factor\": null, "
                    "\"gradient_accumulation_steps\": null");
    if (adam) {
        key_float(b, "beta_1", o->beta1, 0);
        key_float(b, "beta_2", o->beta2, 0);
        key_float(b, "epsilon", o->epsilon, 0);
        mr_sb_printf(b, ", \"amsgrad\": false}");
    } else if (o->kind == MR_OPTIMIZER_RMSPROP) {
        key_float(b, "rho", o->rho, 0);
        key_float(b, "momentum", o->momentum, 0);
        key_float(b, "epsilon", o->epsilon, 0);
        mr_sb_printf(b, ", \"centered\": false}");
    } else {
        key_float(b, "momentum", o->momentum, 0);
        mr_sb_printf(b, ", \"nesterov\": %s}", o->nesterov ? "true" : "false");
    }
    mr_sb_printf(b, "%s}", archive ? ", \"registered_name\": null" : "");
}

/* "loss": ..., through "jit_compile" (shared by both forms). from_logits
 * and label smoothing need the loss object, as keras.losses.serialize
 * writes it (Keras 3: SparseCategoricalCrossentropy has no label_smoothing,
 * which model.c refuses). */
static void compile_keys(mr_sb *b, const mr_model *m, int archive) {
    const mr_net_cfg *n = &m->cfg->net;
    if (n->from_logits || n->label_smoothing > 0.0f) {
        const int sparse = n->loss == MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
        mr_sb_printf(b,
                     "\"loss\": {%s\"class_name\": \"%s\", \"config\": {\"name\": \"%s\", "
                     "\"reduction\": \"sum_over_batch_size\", \"from_logits\": %s",
                     archive ? "\"module\": \"keras.losses\", " : "",
                     sparse                                   ? "SparseCategoricalCrossentropy"
                     : n->loss == MR_LOSS_BINARY_CROSSENTROPY ? "BinaryCrossentropy"
                                                              : "CategoricalCrossentropy",
                     loss_name(n->loss), n->from_logits ? "true" : "false");
        if (sparse) {
            mr_sb_printf(b, ", \"ignore_class\": null}");
        } else {
            mr_sb_printf(b, ", \"label_smoothing\": ");
            mr_sb_float(b, n->label_smoothing);
            mr_sb_printf(b, ", \"axis\": -1}");
        }
        mr_sb_printf(b, "%s}, ", archive ? ", \"registered_name\": null" : "");
    } else {
        mr_sb_printf(b, "\"loss\": \"%s\", ", loss_name(n->loss));
    }
    /* multi-label: Keras's "accuracy" on k > 1 outputs is the argmax's (categorical_accuracy);
     * ours is binary_accuracy over every output, which Keras must be told by name; a regression
     * reports mae */
    mr_sb_printf(b,
                 "\"loss_weights\": null, \"metrics\": [\"%s\"], "
                 "\"weighted_metrics\": null, \"run_eagerly\": false, \"steps_per_execution\": "
                 "1, \"jit_compile\": false",
                 mr_model_regression(m)        ? "mae"
                 : mr_model_label_width(m) > 1 ? "binary_accuracy"
                                               : "accuracy");
}

/* The name of a graph's InputLayer: the [input] section's name =, else
 * Keras's automatic "input_layer". */
static const char *input_name(const mr_model *m) {
    return m->cfg->layers[0].name[0] ? m->cfg->layers[0].name : "input_layer";
}

/* The name of the layer whose output is model layer src's (-1: the input). */
static const char *source_name(const mr_model *m, int src) {
    return src < 0 ? input_name(m) : m->layers[src].name;
}

/* MR_KERAS_ARCHIVE_SCALED: the .cfg's [data] scale goes into the archive
 * as a Rescaling layer right after the input (named DATA_SCALE_NAME,
 * archive group "rescaling"), so the saved model takes the raw inputs the
 * .cfg's data were and evaluates as it did, in Keras and reloaded here
 * (the importer makes it a [rescaling] layer, [data] scale 1). 1 where the
 * file has that layer. */
#define DATA_SCALE_NAME "data_scale"
static int data_scaled(const mr_model *m, mr_keras_form form) {
    return form == MR_KERAS_ARCHIVE_SCALED && m->cfg->data.scale != 1.0f;
}

/* One input of a node as Keras 3.15 writes it: the tensor's batch shape
 * and the layer that made it, [name, node 0, tensor 0]. */
static void tensor_of(mr_sb *b, mr_shape shape, const char *name) {
    mr_sb_printf(b, "{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": ");
    batch_shape(b, shape);
    mr_sb_printf(b, ", \"dtype\": \"float32\", \"keras_history\": [\"%s\", 0, 0]}}", name);
}

/* The tensor of model layer src (-1: the input, or the data scale's
 * Rescaling after it) */
static void keras_tensor(mr_sb *b, const mr_model *m, int src, int scaled) {
    const char *name = src < 0 && scaled ? DATA_SCALE_NAME : source_name(m, src);
    tensor_of(b, src < 0 ? m->in_shape : m->layers[src].out, name);
}

/* ", {the data scale's Rescaling}" after the InputLayer (data_scaled) */
static void data_scale_layer(mr_sb *b, const mr_model *m) {
    mr_sb_printf(b,
                 ", {\"module\": \"keras.layers\", \"class_name\": \"Rescaling\", \"config\": "
                 "{\"name\": \"" DATA_SCALE_NAME "\", \"trainable\": true, \"dtype\": %s, "
                 "\"scale\": ",
                 dtype_policy);
    mr_sb_float(b, m->cfg->data.scale);
    mr_sb_printf(b, ", \"offset\": ");
    mr_sb_float(b, 0.0f);
    mr_sb_printf(b, "}, \"registered_name\": null, \"build_config\": {\"input_shape\": ");
    batch_shape(b, m->in_shape);
    mr_sb_printf(b, "}");
    if (m->graph) {
        mr_sb_printf(b, ", \"name\": \"" DATA_SCALE_NAME "\", \"inbound_nodes\": [{\"args\": [");
        tensor_of(b, m->in_shape, input_name(m));
        mr_sb_printf(b, "], \"kwargs\": {}}]");
    }
    mr_sb_printf(b, "}");
}

/* The InputLayer entry of both configs; a graph's (Functional) also has
 * its name and no inbound nodes. */
static void input_layer(mr_sb *b, const mr_model *m, int archive) {
    const char *name = m->graph ? input_name(m) : "input_layer";
    mr_sb_printf(b, "{%s\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": ",
                 archive ? "\"module\": \"keras.layers\", " : "");
    batch_shape(b, m->in_shape);
    mr_sb_printf(b,
                 ", \"dtype\": \"float32\", \"sparse\": false, \"ragged\": false, \"name\": "
                 "\"%s\", \"optional\": false}%s",
                 name, archive ? ", \"registered_name\": null" : "");
    if (m->graph) mr_sb_printf(b, ", \"name\": \"%s\", \"inbound_nodes\": []", name);
    mr_sb_printf(b, "}");
}

/* A graph's model as Keras 3.15 writes a Functional (observed from its own
 * model.save of a small residual network, in both forms): no dtype key,
 * every layer with its name and inbound_nodes (one node: the tensor it
 * takes, or [add]'s list of two), input_layers and output_layers as
 * [name, 0, 0]; the archive's module is the Functional class's module and
 * an [add]'s build_config holds its two input shapes. */
static char *functional_config(const mr_model *m, int archive, int scaled, float lr) {
    mr_sb b;
    mr_sb_init(&b);
    mr_sb_printf(&b,
                 "{%s\"class_name\": \"Functional\", \"config\": {\"name\": \"functional\", "
                 "\"trainable\": true, \"layers\": [",
                 archive ? "\"module\": \"keras.src.models.functional\", " : "");
    input_layer(&b, m, archive);
    if (scaled) data_scale_layer(&b, m);
    int order[MR_MAX_LAYERS];
    keras_order(m, order);
    for (int k = 0; k < m->n_layers; k++) {
        const int i = order[k];
        const mr_layer *l = &m->layers[i];
        const int add = mr_layer_kind_merges(l->cfg->kind); /* two inputs */
        mr_sb_printf(&b, ", {%s\"class_name\": \"%s\", \"config\": ",
                     archive ? "\"module\": \"keras.layers\", " : "", l->ops->class_name);
        layer_config(&b, l);
        if (archive) {
            mr_sb_printf(&b, ", \"registered_name\": null");
            if (l->ops->keras_build_config || add) {
                mr_sb_printf(&b, ", \"build_config\": {\"input_shape\": %s", add ? "[" : "");
                batch_shape(&b, l->in);
                if (add) {
                    mr_sb_printf(&b, ", ");
                    batch_shape(&b, l->in2);
                }
                mr_sb_printf(&b, "%s}", add ? "]" : "");
            }
        }
        mr_sb_printf(&b, ", \"name\": \"%s\", \"inbound_nodes\": [{\"args\": [%s", l->name,
                     add ? "[" : "");
        keras_tensor(&b, m, m->src[i][0], scaled);
        if (add) {
            mr_sb_printf(&b, ", ");
            keras_tensor(&b, m, m->src[i][1], scaled);
        }
        mr_sb_printf(&b, "%s], \"kwargs\": {}}]}", add ? "]" : "");
    }
    mr_sb_printf(&b, "], \"input_layers\": [\"%s\", 0, 0], \"output_layers\": [\"%s\", 0, 0]}",
                 input_name(m), m->layers[m->n_layers - 1].name);
    if (archive) {
        mr_sb_printf(&b, ", \"registered_name\": \"Functional\", \"build_config\": "
                         "{\"input_shape\": null}, \"compile_config\": {\"optimizer\": ");
        optimizer_config(&b, m, lr, 1);
        mr_sb_printf(&b, ", ");
        compile_keys(&b, m, 1);
        mr_sb_printf(&b, "}");
    }
    mr_sb_printf(&b, "}");
    return mr_sb_take(&b);
}

char *mr_keras_model_config(const mr_model *m, mr_keras_form form, float lr) {
    const int archive = form != MR_KERAS_LEGACY_H5, scaled = data_scaled(m, form);
    if (m->graph) return functional_config(m, archive, scaled, lr);
    mr_sb b;
    mr_sb_init(&b);
    mr_sb_printf(&b,
                 "{%s\"class_name\": \"Sequential\", \"config\": {\"name\": \"" MODEL_NAME
                 "\", \"trainable\": true, \"dtype\": %s, \"layers\": [",
                 archive ? "\"module\": \"keras\", " : "", dtype_policy);
    input_layer(&b, m, archive);
    if (scaled) data_scale_layer(&b, m);
    for (int i = 0; i < m->n_layers; i++) {
        const mr_layer *l = &m->layers[i];
        mr_sb_printf(&b, ", {%s\"class_name\": \"%s\", \"config\": ",
                     archive ? "\"module\": \"keras.layers\", " : "", l->ops->class_name);
        layer_config(&b, l);
        if (archive) {
            mr_sb_printf(&b, ", \"registered_name\": null");
            if (l->ops->keras_build_config) {
                mr_sb_printf(&b, ", \"build_config\": {\"input_shape\": ");
                batch_shape(&b, l->in);
                mr_sb_printf(&b, "}");
            }
        }
        mr_sb_printf(&b, "}");
    }
    mr_sb_printf(&b, "], \"build_input_shape\": ");
    batch_shape(&b, m->in_shape);
    mr_sb_printf(&b, "}");
    if (archive) {
        mr_sb_printf(&b, ", \"registered_name\": null, \"build_config\": {\"input_shape\": ");
        batch_shape(&b, m->in_shape);
        mr_sb_printf(&b, "}, \"compile_config\": {\"optimizer\": ");
        optimizer_config(&b, m, lr, 1);
        mr_sb_printf(&b, ", ");
        compile_keys(&b, m, 1);
        mr_sb_printf(&b, "}");
    }
    mr_sb_printf(&b, "}");
    return mr_sb_take(&b);
}

char *mr_keras_training_config(const mr_model *m, float lr) {
    mr_sb b;
    mr_sb_init(&b);
    mr_sb_printf(&b, "{");
    compile_keys(&b, m, 0);
    mr_sb_printf(&b, ", \"optimizer_config\": ");
    optimizer_config(&b, m, lr, 0);
    mr_sb_printf(&b, "}");
    return mr_sb_take(&b);
}

/* ---- weights ------------------------------------------------------------ */

/* A weight's Keras shape as dims. */
static int weight_dims(const mr_weight *w, int64_t *dims) {
    for (int d = 0; d < w->rank; d++)
        dims[d] = w->dims[d];
    return w->rank;
}

/* The optimizer's variables in Keras's order: weight by weight with each
 * weight's slots together (Adam), or slot by slot (RMSprop: all
 * velocities, then all momentums); mr_optimizer_slots_by_slot. */
typedef struct slot_var {
    const mr_layer *layer;
    const mr_weight *w;
    int slot;
} slot_var;

/* The n = trainable weights x slots variables in that order (malloc'd;
 * *out NULL and n 0 without slots); -1 when out of memory. */
static int slot_vars(const mr_model *m, slot_var **out) {
    const int ns = mr_optimizer_slot_count(&m->opt);
    int nw = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int w = 0; w < m->layers[i].n_weights; w++)
            nw += m->layers[i].w[w].trainable;
    *out = NULL;
    if (ns * nw == 0) return 0;
    slot_var *v = calloc((size_t)(ns * nw), sizeof *v);
    if (v == NULL) return -1;
    const int by_slot = mr_optimizer_slots_by_slot(&m->opt);
    int k = 0, order[MR_MAX_LAYERS];
    keras_order(m, order); /* Keras's trainable_variables: its layers' order */
    for (int outer = 0; outer < (by_slot ? ns : 1); outer++)
        for (int j = 0; j < m->n_layers; j++)
            for (int w = 0, i = order[j]; w < m->layers[i].n_weights; w++) {
                if (!m->layers[i].w[w].trainable) continue;
                for (int s = by_slot ? outer : 0; s < (by_slot ? outer + 1 : ns); s++)
                    v[k++] = (slot_var){&m->layers[i], &m->layers[i].w[w], s};
            }
    *out = v;
    return k;
}

static const char *optimizer_name(const mr_model *m) {
    return mr_optimizer_keras_name(&m->opt);
}

/* The path of weight w's slot s in /optimizer_weights: Keras prefixes the
 * variable with the model's name in a Sequential ("adam/sequential_dense_
 * kernel_momentum"), not in a Functional ("adam/dense_kernel_momentum"). */
static void slot_path(const mr_model *m, const mr_layer *l, const mr_weight *w, int slot,
                      int functional, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s%s_%s_%s", optimizer_name(m), functional ? "" : MODEL_NAME "_", l->name,
             w->name, mr_optimizer_slot_name(&m->opt, slot));
}

/* Where weight w's slot s lives: slot buffers have the params' layout. */
static mr_dfloat *slot_of(const mr_model *m, const mr_weight *w, int s) {
    return mr_dfloat_at(m->slots[s], w->offset);
}

/* Writes n floats of the model's device memory p as dataset `path` of g
 * (read through the model: in place on the CPU, copied from a GPU). */
static mr_status write_floats(mr_h5 *h, hid_t g, const char *path, int rank, const int64_t *dims,
                              const mr_model *m, const mr_dfloat *p, int64_t n, mr_error *err) {
    const float *host;
    MR_CHECK(mr_model_read(m, p, (size_t)n, &host, err));
    return mr_h5_write(h, g, path, MR_H5_F32, rank, dims, host, err);
}

/* Reads dataset `path` of g into n floats of the model's device memory p. */
static mr_status read_floats(mr_h5 *h, hid_t g, const char *path, int rank, const int64_t *dims,
                             const mr_model *m, mr_dfloat *p, int64_t n, mr_error *err) {
    float *host = mr_model_host_for(m, p);
    MR_CHECK(mr_h5_read(h, g, path, MR_H5_F32, rank, dims, host, err));
    return mr_model_write(m, p, host, (size_t)n, err);
}

/* Writes weight w of the model as dataset `path` of g: floats, or the
 * int64 scalar Keras keeps (Normalization's count). Read back through
 * read_floats: HDF5 converts the integer. */
static mr_status write_weight(mr_h5 *h, hid_t g, const char *path, const mr_model *m,
                              const mr_weight *w, mr_error *err) {
    int64_t dims[4];
    int rank = weight_dims(w, dims);
    if (!w->keras_int64) return write_floats(h, g, path, rank, dims, m, w->data, w->size, err);
    const float *host;
    MR_CHECK(mr_model_read(m, w->data, 1, &host, err));
    const int64_t v = (int64_t)host[0];
    return mr_h5_write(h, g, path, MR_H5_I64, rank, dims, &v, err);
}

mr_status mr_keras_write_h5(mr_h5 *h, const mr_model *m, int64_t step, float lr, mr_error *err) {
    char *config = mr_keras_model_config(m, MR_KERAS_LEGACY_H5, lr);
    char *training = mr_keras_training_config(m, lr);
    mr_status st = config && training ? MR_OK : mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    hid_t root = h->file;
    /* backend: the layout is TensorFlow's (channels_last kernels), which is
     * what the attribute tells Keras's loader */
    if (st == MR_OK) st = mr_h5_attr_str(h, root, "backend", "tensorflow", 1, err);
    if (st == MR_OK) st = mr_h5_attr_str(h, root, "keras_version", MR_KERAS_VERSION, 1, err);
    if (st == MR_OK) st = mr_h5_attr_str(h, root, "model_config", config, 0, err);
    if (st == MR_OK) st = mr_h5_attr_str(h, root, "training_config", training, 0, err);
    free(config);
    free(training);
    MR_CHECK(st);

    hid_t mw;
    MR_CHECK(mr_h5_group(h, root, "model_weights", &mw, err));
    /* a Functional lists its InputLayer too, a group without weights */
    const char *names[MR_MAX_LAYERS + 1];
    const int g0 = m->graph;
    int order[MR_MAX_LAYERS];
    keras_order(m, order);
    names[0] = input_name(m);
    for (int k = 0; k < m->n_layers; k++)
        names[g0 + k] = m->layers[order[k]].name;
    st = mr_h5_attr_str(h, mw, "backend", "tensorflow", 0, err);
    if (st == MR_OK) st = mr_h5_attr_str(h, mw, "keras_version", MR_KERAS_VERSION, 0, err);
    if (st == MR_OK) st = mr_h5_attr_strs(h, mw, "layer_names", names, g0 + m->n_layers, err);
    if (st == MR_OK && g0) {
        hid_t g;
        st = mr_h5_group(h, mw, names[0], &g, err);
        if (st == MR_OK) {
            st = mr_h5_attr_strs(h, g, "weight_names", NULL, 0, err);
            H5Gclose(g);
        }
    }
    for (int i = 0; st == MR_OK && i < m->n_layers; i++) {
        const mr_layer *l = &m->layers[i];
        hid_t g;
        st = mr_h5_group(h, mw, l->name, &g, err);
        if (st != MR_OK) break;
        char paths[MR_MAX_WEIGHTS][96];
        const char *wn[MR_MAX_WEIGHTS];
        for (int w = 0; w < l->n_weights; w++) {
            /* a Functional's weights are <layer>/<weight>, without the model's name */
            snprintf(paths[w], sizeof paths[w], "%s%s/%s", m->graph ? "" : MODEL_NAME "/", l->name,
                     l->w[w].name);
            wn[w] = paths[w];
        }
        st = mr_h5_attr_strs(h, g, "weight_names", wn, l->n_weights, err);
        for (int w = 0; st == MR_OK && w < l->n_weights; w++)
            st = write_weight(h, g, paths[w], m, &l->w[w], err);
        H5Gclose(g);
    }
    if (st == MR_OK) { /* Keras writes it for every model, empty for a Sequential */
        hid_t g;
        st = mr_h5_group(h, mw, "top_level_model_weights", &g, err);
        if (st == MR_OK) {
            st = mr_h5_attr_strs(h, g, "weight_names", NULL, 0, err);
            H5Gclose(g);
        }
    }
    H5Gclose(mw);
    MR_CHECK(st);

    /* /optimizer_weights: iteration, learning_rate, then the slots in
     * Keras's order (slot_vars) and with its names */
    slot_var *sv;
    const int nv = slot_vars(m, &sv);
    const char *opt = optimizer_name(m);
    const int n = 2 + (nv > 0 ? nv : 0);
    char(*paths)[128] = calloc((size_t)n, sizeof *paths);
    const char **wn = calloc((size_t)n, sizeof *wn);
    if (nv < 0 || paths == NULL || wn == NULL) {
        free(sv), free(paths), free(wn);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    hid_t ow;
    st = mr_h5_group(h, root, "optimizer_weights", &ow, err);
    if (st == MR_OK) {
        snprintf(paths[0], sizeof paths[0], "%s/iteration", opt);
        snprintf(paths[1], sizeof paths[1], "%s/learning_rate", opt);
        st = mr_h5_write(h, ow, paths[0], MR_H5_I64, 0, NULL, &step, err);
        if (st == MR_OK) st = mr_h5_write(h, ow, paths[1], MR_H5_F32, 0, NULL, &lr, err);
        for (int k = 0; st == MR_OK && k < nv; k++) {
            const mr_weight *wt = sv[k].w;
            char *path = paths[2 + k];
            slot_path(m, sv[k].layer, wt, sv[k].slot, m->graph, path, sizeof paths[0]);
            int64_t dims[4];
            int rank = weight_dims(wt, dims);
            st =
                write_floats(h, ow, path, rank, dims, m, slot_of(m, wt, sv[k].slot), wt->size, err);
        }
        for (int i = 0; i < n; i++)
            wn[i] = paths[i];
        if (st == MR_OK) st = mr_h5_attr_strs(h, ow, "weight_names", wn, n, err);
        H5Gclose(ow);
    }
    free(sv);
    free(paths);
    free(wn);
    return st;
}

/* "dense_3" -> "dense": a Keras default name's class part. */
static void name_base(const char *name, char *base, size_t n) {
    snprintf(base, n, "%s", name);
    char *u = strrchr(base, '_');
    if (u != NULL && u[1] != '\0' && strspn(u + 1, "0123456789") == strlen(u + 1)) *u = '\0';
}

/* The class part of our layer's name ("conv2d"). */
static int is_default_base(const char *base) {
    const char *known[] = {
        "dense",   "conv2d",  "batch_normalization", "max_pooling2d",      "average_pooling2d",
        "flatten", "dropout", "activation",          "layer_normalization"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(base, known[i]) == 0) return 1;
    return 0;
}

/* 1 if the layer's weights are its config's, which Keras 3 keeps out of the file: a
 * Normalization(mean=..., variance=...) saves an empty vars group, its statistics being config
 * arguments; the imported .cfg has them and the layer's init put them in its weights. */
static int weights_in_config(const mr_layer *l) {
    return strcmp(l->ops->class_name, "Normalization") == 0 && l->cfg->mean.n > 0 &&
           l->cfg->variance.n > 0;
}

/* 1 if the legacy file's group of this layer (by its name) is there and lists no weights. */
static int group_without_weights(mr_h5 *h, hid_t mw, const char *layer) {
    if (!mr_h5_exists(h, mw, layer)) return 0;
    hid_t g;
    mr_error err = {0};
    if (mr_h5_open_group(h, mw, layer, &g, &err) != MR_OK) return 0;
    char **wn = NULL;
    int nw = 0,
        none = H5Aexists(g, "weight_names") == 0 ||
               (mr_h5_read_attr_strs(h, g, "weight_names", &wn, &nw, &err) == MR_OK && nw == 0);
    mr_h5_free_strs(wn, nw);
    H5Gclose(g);
    return none;
}

mr_status mr_keras_read_weights(mr_h5 *h, mr_model *m, int same_layers, mr_error *err) {
    hid_t mw;
    MR_CHECK(mr_h5_open_group(h, h->file, "model_weights", &mw, err));
    char **names = NULL;
    int n = 0, order[MR_MAX_LAYERS];
    keras_order(m, order); /* a Keras file's order, and ours */
    mr_status st = mr_h5_read_attr_strs(h, mw, "layer_names", &names, &n, err);
    if (st == MR_OK && same_layers) {
        /* a graph's list starts with its InputLayer (not in checkpoints
         * written before the Functional layout) */
        const int skip = m->graph && n == m->n_layers + 1 && strcmp(names[0], input_name(m)) == 0;
        int same = n - skip == m->n_layers;
        for (int i = 0; same && i < m->n_layers; i++)
            same = strcmp(names[skip + i], m->layers[skip ? order[i] : i].name) == 0;
        if (!skip) /* in the file's order */
            for (int i = 0; i < m->n_layers; i++)
                order[i] = i;
        if (!same) {
            char file_list[512] = "", model_list[512] = "";
            for (int i = 0; i < n; i++)
                snprintf(file_list + strlen(file_list), sizeof file_list - strlen(file_list),
                         "%s%s", i ? ", " : "", names[i]);
            for (int i = 0; i < m->n_layers; i++)
                snprintf(model_list + strlen(model_list), sizeof model_list - strlen(model_list),
                         "%s%s", i ? ", " : "", m->layers[i].name);
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: a checkpoint of another model: its layers are (%s), the .cfg's "
                              "are (%s)",
                              h->path, file_list, model_list);
        }
    }
    /* pair the file's layers that have weights with the model's, in order */
    int next = 0; /* next file layer to look at */
    for (int k = 0; st == MR_OK && k < m->n_layers; k++) {
        mr_layer *l = &m->layers[order[k]];
        if (l->n_weights == 0) continue;
        if (weights_in_config(l) && group_without_weights(h, mw, l->name)) continue;
        char **wn = NULL;
        int nw = 0;
        hid_t g = -1;
        while (st == MR_OK && next < n) {
            st = mr_h5_open_group(h, mw, names[next], &g, err);
            if (st == MR_OK) st = mr_h5_read_attr_strs(h, g, "weight_names", &wn, &nw, err);
            if (st != MR_OK) {
                /* Keras may leave weight_names out of a layer without weights */
                if (g >= 0 && H5Aexists(g, "weight_names") <= 0) {
                    mr_error_clear(err);
                    st = MR_OK;
                    nw = 0;
                } else {
                    break;
                }
            }
            next++;
            if (nw > 0) break;
            H5Gclose(g);
            g = -1;
            mr_h5_free_strs(wn, nw);
            wn = NULL;
        }
        if (st != MR_OK) {
            /* a layer group whose weight_names could not be read */
            if (g >= 0) H5Gclose(g);
            break;
        }
        if (nw == 0) {
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: has fewer layers with weights than the model: nothing for "
                              "layer %s (%s)",
                              h->path, l->name, l->ops->class_name);
            break;
        }
        const char *fname = names[next - 1];
        /* the class, not the name: a layer named with name = pairs with
         * Keras's automatic name of its class */
        char base[64];
        name_base(fname, base, sizeof base);
        if (is_default_base(base) && strcmp(base, l->ops->keras_name) != 0)
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: layer %s of the file is where the model has %s (%s): the "
                              "layers differ",
                              h->path, fname, l->name, l->ops->class_name);
        else if (nw != l->n_weights)
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: /model_weights/%s has %d weights, the model's layer %s (%s) has "
                              "%d",
                              h->path, fname, nw, l->name, l->ops->class_name, l->n_weights);
        for (int w = 0; st == MR_OK && w < nw; w++) {
            int64_t dims[4];
            int rank = weight_dims(&l->w[w], dims);
            st = read_floats(h, g, wn[w], rank, dims, m, l->w[w].data, l->w[w].size, err);
        }
        mr_h5_free_strs(wn, nw);
        H5Gclose(g);
    }
    /* weights left over in the file: another model */
    for (; st == MR_OK && next < n; next++) {
        hid_t g;
        char **wn = NULL;
        int nw = 0;
        if (mr_h5_open_group(h, mw, names[next], &g, err) != MR_OK) {
            st = err->status;
            break;
        }
        if (H5Aexists(g, "weight_names") > 0)
            st = mr_h5_read_attr_strs(h, g, "weight_names", &wn, &nw, err);
        H5Gclose(g);
        mr_h5_free_strs(wn, nw);
        if (st == MR_OK && nw > 0)
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: has more layers with weights than the model (%s is left over)",
                              h->path, names[next]);
    }
    mr_h5_free_strs(names, n);
    H5Gclose(mw);
    return st;
}

mr_status mr_keras_read_optimizer(mr_h5 *h, mr_model *m, int64_t *step, mr_error *err) {
    slot_var *sv;
    const int nv = slot_vars(m, &sv);
    if (nv < 0) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    hid_t ow;
    mr_status st = mr_h5_open_group(h, h->file, "optimizer_weights", &ow, err);
    if (st != MR_OK) {
        free(sv);
        return st;
    }
    const char *opt = optimizer_name(m);
    char path[160];
    snprintf(path, sizeof path, "%s/iteration", opt);
    st = mr_h5_read(h, ow, path, MR_H5_I64, 0, NULL, step, err);
    for (int k = 0; st == MR_OK && k < nv; k++) {
        const mr_weight *wt = sv[k].w;
        /* a graph's checkpoint written before its Functional layout has the
         * Sequential's names */
        slot_path(m, sv[k].layer, wt, sv[k].slot, m->graph, path, sizeof path);
        if (m->graph && !mr_h5_exists(h, ow, path))
            slot_path(m, sv[k].layer, wt, sv[k].slot, 0, path, sizeof path);
        int64_t dims[4];
        int rank = weight_dims(wt, dims);
        st = read_floats(h, ow, path, rank, dims, m, slot_of(m, wt, sv[k].slot), wt->size, err);
    }
    H5Gclose(ow);
    free(sv);
    return st;
}

/* Layer i's group in a Keras 3 weights file: its class's snake_case name
 * and a counter over the model's layers of that class, whatever the
 * layers' names ("conv2d_2" for the third Conv2D, even one named c3);
 * the automatic names (model.c) where no layer has name =. */
static void archive_group(const mr_model *m, int i, int scaled, char *buf, size_t n) {
    const char *cls = m->layers[i].ops->keras_name;
    /* the data scale's Rescaling (data_scaled) comes before them all */
    int c = scaled && strcmp(cls, "rescaling") == 0, order[MR_MAX_LAYERS];
    keras_order(m, order); /* counted in Keras's order of the layers */
    for (int k = 0; order[k] != i; k++)
        c += strcmp(m->layers[order[k]].ops->keras_name, cls) == 0;
    if (c == 0)
        snprintf(buf, n, "%s", cls);
    else
        snprintf(buf, n, "%s_%d", cls, c);
}

mr_status mr_keras_write_archive_weights(mr_h5 *h, const mr_model *m, int64_t step, float lr,
                                         mr_error *err) {
    return mr_keras_write_archive_weights_as(h, m, MR_KERAS_ARCHIVE, step, lr, err);
}

mr_status mr_keras_write_archive_weights_as(mr_h5 *h, const mr_model *m, mr_keras_form form,
                                            int64_t step, float lr, mr_error *err) {
    const int scaled = data_scaled(m, form);
    mr_status st = MR_OK;
    char path[160], group[64];
    if (m->graph) { /* a Functional's InputLayer has its (empty) group */
        hid_t g;
        st = mr_h5_group(h, h->file, "layers/input_layer/vars", &g, err);
        if (st == MR_OK) {
            st = mr_h5_attr_str(h, g, "name", input_name(m), 1, err);
            H5Gclose(g);
        }
    }
    if (st == MR_OK && scaled) { /* its (empty) group */
        hid_t g;
        st = mr_h5_group(h, h->file, "layers/rescaling/vars", &g, err);
        if (st == MR_OK) {
            st = mr_h5_attr_str(h, g, "name", DATA_SCALE_NAME, 1, err);
            H5Gclose(g);
        }
    }
    for (int i = 0; st == MR_OK && i < m->n_layers; i++) {
        const mr_layer *l = &m->layers[i];
        hid_t g;
        archive_group(m, i, scaled, group, sizeof group);
        snprintf(path, sizeof path, "layers/%s/vars", group);
        st = mr_h5_group(h, h->file, path, &g, err);
        if (st != MR_OK) break;
        st = mr_h5_attr_str(h, g, "name", l->name, 1, err);
        for (int w = 0; st == MR_OK && w < l->n_weights; w++) {
            snprintf(path, sizeof path, "%d", w);
            st = write_weight(h, g, path, m, &l->w[w], err);
        }
        H5Gclose(g);
    }
    hid_t g;
    slot_var *sv = NULL;
    const int nv = st == MR_OK ? slot_vars(m, &sv) : 0;
    if (nv < 0) st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    if (st == MR_OK) st = mr_h5_group(h, h->file, "optimizer/vars", &g, err);
    if (st == MR_OK) {
        /* 0: iterations, 1: learning_rate, then the slots in Keras's order */
        st = mr_h5_attr_str(h, g, "name", optimizer_name(m), 1, err);
        if (st == MR_OK) st = mr_h5_write(h, g, "0", MR_H5_I64, 0, NULL, &step, err);
        if (st == MR_OK) st = mr_h5_write(h, g, "1", MR_H5_F32, 0, NULL, &lr, err);
        for (int k = 0; st == MR_OK && k < nv; k++) {
            int64_t dims[4];
            int rank = weight_dims(sv[k].w, dims);
            snprintf(path, sizeof path, "%d", 2 + k);
            st = write_floats(h, g, path, rank, dims, m, slot_of(m, sv[k].w, sv[k].slot),
                              sv[k].w->size, err);
        }
        H5Gclose(g);
    }
    free(sv);
    if (st == MR_OK) st = mr_h5_group(h, h->file, "vars", &g, err);
    if (st == MR_OK) {
        st = mr_h5_attr_str(h, g, "name", m->graph ? "functional" : MODEL_NAME, 1, err);
        H5Gclose(g);
    }
    return st;
}

mr_status mr_keras_read_archive_weights(mr_h5 *h, mr_model *m, mr_error *err) {
    hid_t layers;
    MR_CHECK(mr_h5_open_group(h, h->file, "layers", &layers, err));
    mr_status st = MR_OK;
    char path[160], group[64];
    for (int i = 0; st == MR_OK && i < m->n_layers; i++) {
        mr_layer *l = &m->layers[i];
        /* Keras names the group by class and a per-class counter, whatever
         * name the layer had (archive_group) */
        archive_group(m, i, 0, group, sizeof group);
        snprintf(path, sizeof path, "%s/vars", group);
        if (!mr_h5_exists(h, layers, path)) {
            if (l->n_weights > 0)
                st = mr_error_set(err, MR_ERR_DATA,
                                  "%s: no /layers/%s/vars for the model's layer %s (%s): the "
                                  "file is of another model",
                                  h->path, path, l->name, l->ops->class_name);
            continue;
        }
        hid_t g;
        if ((st = mr_h5_open_group(h, layers, path, &g, err)) != MR_OK) break;
        H5G_info_t info;
        if (H5Gget_info(g, &info) < 0)
            st = mr_error_set(err, MR_ERR_DATA, "%s: /layers/%s cannot be read", h->path, path);
        else if (info.nlinks == 0 && weights_in_config(l)) {
            H5Gclose(g);
            continue;
        } else if (info.nlinks != (hsize_t)l->n_weights)
            st = mr_error_set(
                err, MR_ERR_DATA, "%s: /layers/%s has %d weights, the model's layer %s (%s) has %d",
                h->path, path, (int)info.nlinks, l->name, l->ops->class_name, l->n_weights);
        for (int w = 0; st == MR_OK && w < l->n_weights; w++) {
            int64_t dims[4];
            int rank = weight_dims(&l->w[w], dims);
            snprintf(path, sizeof path, "%d", w);
            st = read_floats(h, g, path, rank, dims, m, l->w[w].data, l->w[w].size, err);
        }
        H5Gclose(g);
    }
    /* a layer group with weights that no layer of the model took */
    H5G_info_t info = {0};
    if (st == MR_OK && H5Gget_info(layers, &info) < 0)
        st = mr_error_set(err, MR_ERR_DATA, "%s: /layers cannot be read", h->path);
    for (hsize_t k = 0; st == MR_OK && k < info.nlinks; k++) {
        char name[128];
        if (H5Lget_name_by_idx(layers, ".", H5_INDEX_NAME, H5_ITER_INC, k, name, sizeof name,
                               H5P_DEFAULT) < 0) {
            st = mr_error_set(err, MR_ERR_DATA, "%s: /layers cannot be read", h->path);
            break;
        }
        int ours = 0;
        for (int i = 0; !ours && i < m->n_layers; i++) {
            archive_group(m, i, 0, group, sizeof group);
            ours = strcmp(name, group) == 0;
        }
        snprintf(path, sizeof path, "%s/vars/0", name);
        if (!ours && mr_h5_exists(h, layers, path))
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: has more layers with weights than the model (/layers/%s is "
                              "left over)",
                              h->path, name);
    }
    H5Gclose(layers);
    return st;
}

typedef struct load_args {
    const char *path;
    mr_model *m;
    int same_layers;
    int64_t *step;
    mr_error *err;
} load_args;

static mr_status load_now(void *arg) {
    load_args *a = arg;
    mr_h5 h;
    MR_CHECK(mr_h5_open(&h, a->path, a->err));
    mr_status st;
    if (mr_h5_exists(&h, h.file, "model_weights")) {
        st = mr_keras_read_weights(&h, a->m, a->same_layers, a->err);
        if (st == MR_OK && a->step != NULL) st = mr_keras_read_optimizer(&h, a->m, a->step, a->err);
    } else if (mr_h5_exists(&h, h.file, "layers") && a->step == NULL) {
        st = mr_keras_read_archive_weights(&h, a->m, a->err);
    } else if (mr_h5_exists(&h, h.file, "layers")) {
        st = mr_error_set(a->err, MR_ERR_DATA,
                          "%s: a Keras 3 weights file holds no training state to resume from",
                          a->path);
    } else {
        st = mr_error_set(a->err, MR_ERR_DATA,
                          "%s: neither a Keras .h5 model (/model_weights) nor a Keras 3 weights "
                          "file (/layers): mirrored reads those, its checkpoints, and .keras "
                          "archives",
                          a->path);
    }
    mr_h5_close(&h);
    return st;
}

static mr_status load_h5(const char *path, mr_model *m, int same_layers, int64_t *step,
                         mr_error *err);

/* "PK\3\4": a zip archive (a .keras file), not HDF5. */
static int is_zip(const char *path) {
    unsigned char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    size_t got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    return got == 4 && memcmp(magic, "PK\3\4", 4) == 0;
}

/* The most bytes a model's model.weights.h5 may unpack to: its weights
 * and two optimizer slots as float64, HDF5's own structure on top. A
 * 2 MB archive of a small model unpacked to 2.1 GB before. */
static uint64_t weights_limit(const mr_model *m) {
    return ((uint64_t)64 << 20) + 32 * (uint64_t)(m->n_params > 0 ? m->n_params : 0);
}

/* Copies the archive's model.weights.h5 into fd, within weights_limit. */
static mr_status unzip_weights(const char *path, const mr_model *m, int fd, mr_error *err) {
    int zerr = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY, &zerr);
    if (za == NULL) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        mr_error_set(err, MR_ERR_DATA, "%s: not a readable .keras archive: %s", path,
                     zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return err->status;
    }
    mr_status st = mr_zip_check_names(za, path, err);
    const zip_int64_t i = st == MR_OK ? zip_name_locate(za, "model.weights.h5", 0) : -1;
    if (st == MR_OK && i < 0)
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s: a zip archive without model.weights.h5: not a "
                          "Keras 3 .keras file",
                          path);
    char name[MR_PATH_MAX + 32];
    snprintf(name, sizeof name, "%s:model.weights.h5", path);
    if (st == MR_OK) st = mr_zip_copy_member(za, i, name, weights_limit(m), fd, err);
    zip_discard(za);
    return st;
}

/* A .keras archive: its model.weights.h5, unpacked into a temporary file
 * (HDF5 reads files by a path it can resolve, which a memory file's
 * /proc/self/fd link is not), within weights_limit, read as a Keras 3
 * weights file; messages name the archive. */
static mr_status load_archive(const char *path, mr_model *m, int64_t *step, mr_error *err) {
    if (step != NULL)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: a .keras archive holds no training state to resume from", path);
    const char *dir = getenv("TMPDIR");
    char tmp[MR_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/mirrored-XXXXXX.weights.h5", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemps(tmp, (int)strlen(".weights.h5"));
    if (fd < 0) return mr_error_set(err, MR_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    const int tracked = mr_temp_track(tmp); /* a SIGTERM meanwhile removes it too */
    mr_status st = unzip_weights(path, m, fd, err);
    if (close(fd) != 0 && st == MR_OK)
        st = mr_error_set(err, MR_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    /* as HDF5 only: an archive inside the archive (a zip quine) would
     * unpack forever */
    if (st == MR_OK) st = load_h5(tmp, m, 0, NULL, err);
    unlink(tmp);
    mr_temp_untrack(tracked);
    if (st != MR_OK) { /* name the archive, not the temporary file */
        char named[sizeof err->msg], *at = strstr(err->msg, tmp);
        if (at != NULL) {
            snprintf(named, sizeof named, "%.*s%s:model.weights.h5%s", (int)(at - err->msg),
                     err->msg, path, at + strlen(tmp));
            snprintf(err->msg, sizeof err->msg, "%s", named);
        }
    }
    return st;
}

mr_status mr_keras_load(const char *path, mr_model *m, int same_layers, int64_t *step,
                        mr_error *err) {
    if (is_zip(path)) return load_archive(path, m, step, err);
    return load_h5(path, m, same_layers, step, err);
}

/* A Keras .h5, a Keras 3 weights file or a checkpoint. */
static mr_status load_h5(const char *path, mr_model *m, int same_layers, int64_t *step,
                         mr_error *err) {
    int sealed;
    MR_CHECK(mr_h5_verify(path, &sealed, err));
    load_args a = {.path = path, .m = m, .same_layers = same_layers, .step = step, .err = err};
    /* the child's error, if any, is the parent's to say again */
    if (!sealed) {
        mr_error scratch = {0};
        load_args trial = a;
        trial.err = &scratch;
        MR_CHECK(mr_isolate(path, "the HDF5 library", load_now, &trial, err));
    }
    return load_now(&a);
}
