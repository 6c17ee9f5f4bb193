/* keras_import.c: a Keras-saved model's JSON as .cfg text (keras_import.h).
 *
 * Each Keras class taken has a table of its config arguments, in its layer kind's definition
 * (mr_layer_ops.keras_args, models/keras_args.h): each one maps to a .cfg key, is held to the
 * one value we compute (data_format "channels_last", dilation_rate (1, 1), a constraint null),
 * or has no effect here (a seed, the initializers of weights the file holds). An argument outside
 * its class's table, a value off its rule, an unknown class or compile setting is refused by name:
 * nothing is approximated. The text is then parsed by mr_config_parse, whose messages name the
 * layer the failing line belongs to. */
#include "models/keras_import.h"

#include <hdf5.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "runtime/file_kind.h"
#include "runtime/h5file.h"
#include "runtime/isolate.h"
#include "runtime/strbuf.h"
#include "runtime/zip_read.h"
#include "models/keras_args.h"
#include "models/layer.h"

/* ---- the classes and their arguments --------------------------------- */

/* A class of the compile config (an optimizer, a loss): the [net] value it is and its
 * arguments (has_weights: unused there). */
typedef struct keras_class {
    const char *cls;
    const char *section;
    int has_weights;
    const mr_keras_arg *args;
} keras_class;
#define END MR_KERAS_ARGS_END

/* The layer kind whose Keras class is cls (its definition's class_name, with an argument
 * table), or -1. */
static int kind_of_class(const char *cls) {
    for (int k = MR_LAYER_INPUT + 1; cls && k < MR_LAYER_KIND_COUNT; k++) {
        const mr_layer_ops *ops = mr_layer_ops_for((mr_layer_kind)k);
        if (ops->keras_args != NULL && strcmp(ops->class_name, cls) == 0) return k;
    }
    return -1;
}

const char *mr_keras_import_classes(void) {
    /* each thread its own copy: the text is the same, the writes are not shared */
    static _Thread_local char text[1024];
    mr_sb b;
    mr_sb_init(&b);
    mr_sb_printf(&b, "InputLayer");
    for (int k = MR_LAYER_INPUT + 1; k < MR_LAYER_KIND_COUNT; k++) {
        const mr_layer_ops *ops = mr_layer_ops_for((mr_layer_kind)k);
        if (ops->keras_args != NULL) mr_sb_printf(&b, ", %s", ops->class_name);
    }
    snprintf(text, sizeof text, "%s", b.s && !b.failed ? b.s : "InputLayer");
    mr_sb_free(&b);
    return text;
}

/* Keras's activation names that are ours too, in mr_activation's order. */
static const char *const activations[] = {"linear", "relu",       "sigmoid", "tanh",  "softmax",
                                          "elu",    "leaky_relu", "gelu",    "swish", "silu"};
static const struct {
    const char *keras, *ours;
} initializers[] = {{"GlorotUniform", "glorot_uniform"},
                    {"GlorotNormal", "glorot_normal"},
                    {"HeUniform", "he_uniform"},
                    {"HeNormal", "he_normal"}};

/* ---- the translation --------------------------------------------------- */

typedef struct importer {
    const char *file; /* for messages */
    mr_sb b;          /* the .cfg text */
    mr_error *err;
    int n_layers; /* sections written */
    char layer_name[MR_MAX_LAYERS][MR_NAME_MAX];
    const char *cur_name, *cur_cls; /* the layer being written, for messages */
} importer;

static mr_status refuse(importer *im, mr_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mr_status refuse(importer *im, mr_status st, const char *fmt, ...) {
    char what[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (im->cur_name != NULL)
        return mr_error_set(im->err, st, "%s: layer '%s' (%s): %s", im->file, im->cur_name,
                            im->cur_cls, what);
    return mr_error_set(im->err, st, "%s: %s", im->file, what);
}

static void line(importer *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(importer *im, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    mr_sb_printf(&im->b, "%s\n", text);
}

/* A JSON number as the .cfg reads it back to the same float (Keras saves float32 values as
 * the doubles they are). */
static void num_text(double v, char out[40]) {
    snprintf(out, 40, "%.17g", v);
}

/* "a,b,c" of an integer or a list of integers (at most max); 0 where it is neither. */
static int ints_text(const json_t *v, int max, char *out, size_t n) {
    if (json_is_integer(v)) {
        snprintf(out, n, "%lld", (long long)json_integer_value(v));
        return 1;
    }
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > (size_t)max) return 0;
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_integer(e)) return 0;
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%lld", i ? "," : "", (long long)json_integer_value(e));
    }
    return 1;
}

/* The same for numbers. */
static int nums_text(const json_t *v, int max, char *out, size_t n) {
    char one[40];
    if (json_is_number(v)) {
        num_text(json_number_value(v), one);
        snprintf(out, n, "%s", one);
        return 1;
    }
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > (size_t)max) return 0;
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_number(e)) return 0;
        num_text(json_number_value(e), one);
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%s", i ? "," : "", one);
    }
    return 1;
}

/* Short JSON of v for messages. */
static void json_brief(const json_t *v, char out[96]) {
    char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(out, 96, "%s", s ? s : "?");
    if (s && strlen(s) > 90) snprintf(out + 87, 9, "...");
    free(s);
}

static mr_status bad_value(importer *im, const char *arg, const json_t *v, const char *want) {
    char shown[96];
    json_brief(v, shown);
    return refuse(im, MR_ERR_CONFIG, "%s = %s is not supported by mirrored (%s)", arg, shown, want);
}

static int activation_of(const char *name) {
    for (int i = 0; i < (int)(sizeof activations / sizeof activations[0]); i++)
        if (strcmp(activations[i], name) == 0) return i;
    return -1;
}

static mr_status put_activation(importer *im, const mr_keras_arg *a, const json_t *v, int own) {
    int act = json_is_null(v) ? 0 : json_is_string(v) ? activation_of(json_string_value(v)) : -1;
    if (act < 0)
        return bad_value(im, a->keras, v,
                         "linear, relu, sigmoid, tanh, softmax, elu, leaky_relu, gelu, swish, "
                         "silu");
    if (!own && mr_activation_needs_input((mr_activation)act))
        return bad_value(im, a->keras, v,
                         "gelu, swish and silu as a separate Activation layer only");
    line(im, "%s = %s", a->key, activations[act]);
    return MR_OK;
}

/* kernel_initializer: ours where we have the class; another one made the file's weights,
 * which are the ones the model starts from, so it is only not written down. */
static mr_status put_initializer(importer *im, const mr_keras_arg *a, const json_t *v) {
    const char *cls = json_string_value(json_object_get(v, "class_name"));
    if (cls == NULL) cls = json_string_value(v);
    for (size_t i = 0; cls && i < sizeof initializers / sizeof initializers[0]; i++)
        if (strcmp(cls, initializers[i].keras) == 0 || strcmp(cls, initializers[i].ours) == 0)
            line(im, "%s = %s", a->key, initializers[i].ours);
    return MR_OK;
}

static mr_status put_l2(importer *im, const mr_keras_arg *a, const json_t *v) {
    if (json_is_null(v)) return MR_OK;
    const char *cls = json_string_value(json_object_get(v, "class_name"));
    const json_t *cfg = json_object_get(v, "config");
    const json_t *l2 = json_object_get(cfg, "l2");
    if (cls == NULL || strcmp(cls, "L2") != 0 || !json_is_number(l2) || json_object_size(cfg) != 1)
        return bad_value(im, a->keras, v, "null or L2(l2)");
    char t[40];
    num_text(json_number_value(l2), t);
    line(im, "%s = %s", a->key, t);
    return MR_OK;
}

/* ZeroPadding2D's padding: p, (ph, pw) or ((t, b), (l, r)), as the .cfg's p, ph,pw or
 * t,b,l,r. */
static mr_status put_pads(importer *im, const mr_keras_arg *a, const json_t *v) {
    char t[64];
    if (ints_text(v, 2, t, sizeof t)) {
        line(im, "%s = %s", a->key, t);
        return MR_OK;
    }
    if (json_is_array(v) && json_array_size(v) == 2) {
        long long p[2][2];
        int ok = 1;
        for (int i = 0; i < 2; i++) {
            const json_t *pair = json_array_get(v, (size_t)i);
            ok = ok && json_is_array(pair) && json_array_size(pair) == 2 &&
                 json_is_integer(json_array_get(pair, 0)) &&
                 json_is_integer(json_array_get(pair, 1));
            for (int j = 0; ok && j < 2; j++)
                p[i][j] = json_integer_value(json_array_get(pair, (size_t)j));
        }
        if (ok) {
            line(im, "%s = %lld,%lld,%lld,%lld", a->key, p[0][0], p[0][1], p[1][0], p[1][1]);
            return MR_OK;
        }
    }
    return bad_value(im, a->keras, v, "p, (ph, pw) or ((top, bottom), (left, right))");
}

/* One argument of a layer's config by its rule. */
static mr_status put_arg(importer *im, const mr_keras_arg *a, const json_t *v, int own_activation) {
    char t[256];
    switch (a->rule) {
    case MR_ARG_IGNORE:
        return MR_OK;
    case MR_ARG_STRING:
        if (!json_is_string(v)) return bad_value(im, a->keras, v, "a string");
        line(im, "%s = %s", a->key, json_string_value(v));
        return MR_OK;
    case MR_ARG_INT:
        if (!json_is_integer(v)) return bad_value(im, a->keras, v, "an integer");
        line(im, "%s = %lld", a->key, (long long)json_integer_value(v));
        return MR_OK;
    case MR_ARG_NUM:
        if (!json_is_number(v)) return bad_value(im, a->keras, v, "a number");
        num_text(json_number_value(v), t);
        line(im, "%s = %s", a->key, t);
        return MR_OK;
    case MR_ARG_BOOL:
        if (!json_is_boolean(v)) return bad_value(im, a->keras, v, "true or false");
        line(im, "%s = %d", a->key, json_is_true(v));
        return MR_OK;
    case MR_ARG_INTS:
    case MR_ARG_STRIDES:
        if (a->rule == MR_ARG_STRIDES && json_is_null(v)) return MR_OK;
        if (!ints_text(v, 2, t, sizeof t)) return bad_value(im, a->keras, v, "one or two integers");
        line(im, "%s = %s", a->key, t);
        return MR_OK;
    case MR_ARG_OPTNUM:
        if (json_is_null(v)) return MR_OK;
        if (!json_is_number(v)) return bad_value(im, a->keras, v, "null or a number");
        num_text(json_number_value(v), t);
        line(im, "%s = %s", a->key, t);
        return MR_OK;
    case MR_ARG_NUMS:
        if (json_is_null(v)) return MR_OK;
        if (!nums_text(v, MR_MAX_FLOATS, t, sizeof t))
            return bad_value(im, a->keras, v, "null, or at most 8 numbers");
        line(im, "%s = %s", a->key, t);
        return MR_OK;
    case MR_ARG_PADDING: {
        const char *p = json_string_value(v);
        if (p == NULL || (strcmp(p, "valid") != 0 && strcmp(p, "same") != 0))
            return bad_value(im, a->keras, v, "valid or same");
        line(im, "%s = %s", a->key, p);
        return MR_OK;
    }
    case MR_ARG_PADS:
        return put_pads(im, a, v);
    case MR_ARG_SHAPE:
        if (!ints_text(v, 3, t, sizeof t)) return bad_value(im, a->keras, v, "1 to 3 integers");
        line(im, "%s = %s", a->key, t);
        return MR_OK;
    case MR_ARG_ACT:
        return put_activation(im, a, v, own_activation);
    case MR_ARG_INIT:
        return put_initializer(im, a, v);
    case MR_ARG_L2:
        return put_l2(im, a, v);
    case MR_ARG_NULL:
        return json_is_null(v) ? MR_OK : bad_value(im, a->keras, v, "only null");
    case MR_ARG_EQ: {
        json_t *want = json_loads(a->key, JSON_DECODE_ANY, NULL);
        int same = want != NULL && json_equal((json_t *)v, want);
        /* Keras 3 writes LayerNormalization's and Normalization's axis -1 as the list [-1] */
        if (!same && want != NULL && strcmp(a->keras, "axis") == 0 && json_is_array(v) &&
            json_array_size(v) == 1)
            same = json_equal(json_array_get(v, 0), want);
        json_decref(want);
        return same ? MR_OK : bad_value(im, a->keras, v, a->key);
    }
    }
    return MR_OK;
}

/* dtype: "float32" or a DTypePolicy of float32 (mixed precision is not ours). */
static int is_float32(const json_t *dtype) {
    if (dtype == NULL || json_is_null(dtype)) return 1;
    if (json_is_string(dtype)) return strcmp(json_string_value(dtype), "float32") == 0;
    const char *name = json_string_value(json_object_get(json_object_get(dtype, "config"), "name"));
    return name != NULL && strcmp(name, "float32") == 0;
}

/* A layer name the .cfg takes: letters, digits, '_', not starting with a digit. */
static int name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= MR_NAME_MAX || (s[0] >= '0' && s[0] <= '9')) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return 0;
    }
    return 1;
}

/* Starts a section for a layer: the header, its name, and a record of where it starts. */
static mr_status begin_layer(importer *im, const char *section, const char *name, const char *cls) {
    im->cur_name = name;
    im->cur_cls = cls;
    if (!name_ok(name))
        return refuse(im, MR_ERR_CONFIG,
                      "the name is not supported by mirrored (letters, digits and _, at most %d "
                      "characters)",
                      MR_NAME_MAX - 1);
    if (im->n_layers >= MR_MAX_LAYERS)
        return refuse(im, MR_ERR_CONFIG, "more than %d layers", MR_MAX_LAYERS);
    for (int i = 0; i < im->n_layers; i++)
        if (strcmp(im->layer_name[i], name) == 0)
            return refuse(im, MR_ERR_CONFIG, "a second layer of this name");
    line(im, "%s", "");
    snprintf(im->layer_name[im->n_layers], MR_NAME_MAX, "%s", name);
    im->n_layers++;
    line(im, "[%s]", section);
    line(im, "name = %s", name);
    return MR_OK;
}

/* The InputLayer: batch_shape (None, H, W, C) or (None, F). */
static mr_status put_input(importer *im, const json_t *layer) {
    const json_t *c = json_object_get(layer, "config");
    const char *name = json_string_value(json_object_get(c, "name"));
    MR_CHECK(begin_layer(im, "input", name ? name : "", "InputLayer"));
    const json_t *shape = json_object_get(c, "batch_shape");
    if (shape == NULL) shape = json_object_get(c, "batch_input_shape");
    size_t rank = json_array_size(shape);
    char t[64];
    if ((rank != 2 && rank != 4) || !json_is_null(json_array_get(shape, 0)))
        return bad_value(im, "batch_shape", shape, "(None, F) or (None, H, W, C)");
    json_t *rest = json_array();
    for (size_t i = 1; i < rank; i++)
        json_array_append(rest, json_array_get(shape, i));
    int ok = ints_text(rest, 3, t, sizeof t);
    json_decref(rest);
    if (!ok) return bad_value(im, "batch_shape", shape, "known sizes after the batch axis");
    line(im, "shape = %s", t);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)c, key, v) {
        if (strcmp(key, "name") == 0 || strcmp(key, "batch_shape") == 0 ||
            strcmp(key, "batch_input_shape") == 0)
            continue;
        int fine = strcmp(key, "dtype") == 0 ? is_float32(v)
                   : strcmp(key, "sparse") == 0 || strcmp(key, "ragged") == 0 ||
                           strcmp(key, "optional") == 0
                       ? json_is_false(v)
                       : 0;
        if (!fine) return bad_value(im, key, v, "float32 dense input");
    }
    return MR_OK;
}

/* A layer's config arguments: every one in its class's table, by its rule. */
static mr_status put_args(importer *im, const char *cls, int has_weights, const mr_keras_arg *args,
                          const json_t *c) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)c, key, v) {
        if (strcmp(key, "name") == 0) continue;
        if (strcmp(key, "dtype") == 0) {
            if (!is_float32(v)) return bad_value(im, key, v, "float32");
            continue;
        }
        if (strcmp(key, "trainable") == 0) {
            if (has_weights && !json_is_true(v))
                return bad_value(im, key, v, "every weight is trained");
            continue;
        }
        const mr_keras_arg *a = args;
        while (a->keras && strcmp(a->keras, key) != 0)
            a++;
        if (a->keras == NULL)
            return refuse(im, MR_ERR_CONFIG, "argument '%s' is not supported by mirrored", key);
        MR_CHECK(put_arg(im, a, v, strcmp(cls, "Activation") == 0));
    }
    return MR_OK;
}

/* A call's keyword arguments that change nothing: mask null (Keras writes
 * BatchNormalization's mask = None), and training null, true or false (the value a layer was
 * built with, SpatialDropout2D's training = False: fit and predict call the model with
 * training set, which Keras passes to every layer in its place). */
static int kwargs_default(const json_t *kwargs) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)kwargs, key, v) {
        int fine = strcmp(key, "mask") == 0       ? json_is_null(v)
                   : strcmp(key, "training") == 0 ? json_is_null(v) || json_is_boolean(v)
                                                  : 0;
        if (!fine) return 0;
    }
    return 1;
}

/* The layer's inputs in a Functional: the names of inbound_nodes[0]'s tensors (one, or a list
 * of two for Add and Concatenate). */
static mr_status inbound_names(importer *im, const json_t *layer, const char *names[2], int *n) {
    const json_t *nodes = json_object_get(layer, "inbound_nodes");
    if (json_array_size(nodes) != 1)
        return refuse(im, MR_ERR_CONFIG,
                      "called %zu times: a layer called once is supported by mirrored",
                      json_array_size(nodes));
    const json_t *node = json_array_get(nodes, 0);
    const json_t *args = json_object_get(node, "args");
    const json_t *kwargs = json_object_get(node, "kwargs");
    if (!kwargs_default(kwargs))
        return refuse(im, MR_ERR_CONFIG, "call arguments are not supported by mirrored");
    if (json_array_size(args) != 1)
        return refuse(im, MR_ERR_DATA, "inbound node without one input");
    const json_t *in = json_array_get(args, 0);
    size_t count = json_is_array(in) ? json_array_size(in) : 1;
    if (count < 1 || count > 2)
        return refuse(im, MR_ERR_CONFIG, "%zu inputs are not supported by mirrored", count);
    *n = (int)count;
    for (size_t i = 0; i < count; i++) {
        const json_t *t = json_is_array(in) ? json_array_get(in, i) : in;
        const json_t *h = json_object_get(json_object_get(t, "config"), "keras_history");
        names[i] = json_string_value(json_array_get(h, 0));
        if (names[i] == NULL || json_integer_value(json_array_get(h, 1)) != 0 ||
            json_integer_value(json_array_get(h, 2)) != 0)
            return refuse(im, MR_ERR_CONFIG,
                          "an input that is not a layer's first output is not supported by "
                          "mirrored");
    }
    return MR_OK;
}

static int layer_index(const importer *im, const char *name) {
    for (int i = 0; i < im->n_layers; i++)
        if (strcmp(im->layer_name[i], name) == 0) return i;
    return -1;
}

/* A layer after the input: its section, `input =` and `from =` in a Functional, its args. */
static mr_status put_layer(importer *im, const json_t *layer, int functional) {
    const char *cls = json_string_value(json_object_get(layer, "class_name"));
    const json_t *c = json_object_get(layer, "config");
    const char *name = json_string_value(json_object_get(c, "name"));
    im->cur_name = name ? name : "?";
    im->cur_cls = cls ? cls : "?";
    const int kind = kind_of_class(cls);
    if (kind < 0)
        return refuse(im, MR_ERR_CONFIG, "not supported by mirrored (supported: %s)",
                      mr_keras_import_classes());
    if (!json_is_object(c)) return refuse(im, MR_ERR_DATA, "no config object");
    const mr_layer_ops *k = mr_layer_ops_for((mr_layer_kind)kind);
    const int merges = mr_layer_kind_merges((mr_layer_kind)kind);
    const char *in[2] = {NULL, NULL};
    int n_in = 1;
    if (functional) MR_CHECK(inbound_names(im, layer, in, &n_in));
    if (functional && n_in != (merges ? 2 : 1))
        return refuse(im, MR_ERR_CONFIG, "%d input%s: mirrored takes %s here", n_in,
                      n_in == 1 ? "" : "s", merges ? "exactly two" : "one");
    if (!functional && merges)
        return refuse(im, MR_ERR_DATA, "a merge layer in a Sequential model");
    for (int i = 0; i < n_in && in[i]; i++)
        if (layer_index(im, in[i]) < 0)
            return refuse(im, MR_ERR_CONFIG, "input '%s' is not a layer before it", in[i]);
    MR_CHECK(begin_layer(im, mr_layer_kind_name((mr_layer_kind)kind), im->cur_name, im->cur_cls));
    if (functional) line(im, "input = %s", in[0]);
    if (functional && merges) line(im, "from = %s", in[1]);
    return put_args(im, k->class_name, k->keras_has_weights, k->keras_args, c);
}

/* Functional: one input (the first layer, an InputLayer) and one output (the last layer). */
static mr_status check_ends(importer *im, const json_t *c, const json_t *layers) {
    const json_t *ends[2] = {json_object_get(c, "input_layers"),
                             json_object_get(c, "output_layers")};
    const json_t *want[2] = {json_array_get(layers, 0),
                             json_array_get(layers, json_array_size(layers) - 1)};
    for (int e = 0; e < 2; e++) {
        const json_t *t = ends[e];
        if (json_is_array(json_array_get(t, 0))) {
            if (json_array_size(t) != 1)
                return refuse(im, MR_ERR_CONFIG,
                              "%zu model %ss: mirrored takes one input and one output",
                              json_array_size(t), e ? "output" : "input");
            t = json_array_get(t, 0);
        }
        const char *name = json_string_value(json_array_get(t, 0));
        const char *have =
            json_string_value(json_object_get(json_object_get(want[e], "config"), "name"));
        if (name == NULL || have == NULL || strcmp(name, have) != 0)
            return refuse(im, MR_ERR_CONFIG,
                          "the model's %s is not its %s layer: not supported by mirrored",
                          e ? "output" : "input", e ? "last" : "first");
    }
    return MR_OK;
}

/* The architecture: Sequential or Functional, its layers in order. */
static mr_status put_model(importer *im, const json_t *model) {
    const char *cls = json_string_value(json_object_get(model, "class_name"));
    const json_t *c = json_object_get(model, "config");
    const json_t *layers = json_object_get(c, "layers");
    if (cls == NULL || !json_is_array(layers) || json_array_size(layers) < 2)
        return refuse(im, MR_ERR_DATA, "not a Keras model config (class_name, config.layers)");
    int functional = strcmp(cls, "Functional") == 0 || strcmp(cls, "Model") == 0;
    if (!functional && strcmp(cls, "Sequential") != 0)
        return refuse(im, MR_ERR_CONFIG,
                      "a %s model is not supported by mirrored (Sequential or Functional)", cls);
    const json_t *first = json_array_get(layers, 0);
    const char *first_cls = json_string_value(json_object_get(first, "class_name"));
    if (first_cls == NULL || strcmp(first_cls, "InputLayer") != 0)
        return refuse(im, MR_ERR_CONFIG,
                      "the model has no InputLayer first (build it with keras.Input)");
    /* an unknown class first: it is what the user needs to hear about */
    for (size_t i = 1; i < json_array_size(layers); i++) {
        const json_t *layer = json_array_get(layers, i);
        const char *lc = json_string_value(json_object_get(layer, "class_name"));
        if (kind_of_class(lc) >= 0) continue;
        const char *ln =
            json_string_value(json_object_get(json_object_get(layer, "config"), "name"));
        im->cur_name = ln ? ln : "?";
        im->cur_cls = lc ? lc : "?";
        return refuse(im, MR_ERR_CONFIG, "not supported by mirrored (supported: %s)",
                      mr_keras_import_classes());
    }
    if (functional) MR_CHECK(check_ends(im, c, layers));
    MR_CHECK(put_input(im, first));
    for (size_t i = 1; i < json_array_size(layers); i++)
        MR_CHECK(put_layer(im, json_array_get(layers, i), functional));
    im->cur_name = NULL;
    return MR_OK;
}

/* ---- the compile config -------------------------------------------------- */

#define OPTIMIZER_ARGS                                                                             \
    {"learning_rate", MR_ARG_NUM, "learning_rate"},                                                \
        {"weight_decay", MR_ARG_OPTNUM, "weight_decay"}, {"clipnorm", MR_ARG_OPTNUM, "clipnorm"},  \
        {"global_clipnorm", MR_ARG_OPTNUM, "global_clipnorm"},                                     \
        {"clipvalue", MR_ARG_OPTNUM, "clipvalue"}, {"use_ema", MR_ARG_EQ, "false"},                \
        {"ema_momentum", MR_ARG_IGNORE, NULL}, {"ema_overwrite_frequency", MR_ARG_IGNORE, NULL},   \
        {"loss_scale_factor", MR_ARG_NULL, NULL}, {                                                \
        "gradient_accumulation_steps", MR_ARG_NULL, NULL                                           \
    }
static const mr_keras_arg sgd_args[] = {OPTIMIZER_ARGS,
                                        {"momentum", MR_ARG_NUM, "momentum"},
                                        {"nesterov", MR_ARG_BOOL, "nesterov"},
                                        END};
static const mr_keras_arg adam_args[] = {OPTIMIZER_ARGS,
                                         {"beta_1", MR_ARG_NUM, "beta1"},
                                         {"beta_2", MR_ARG_NUM, "beta2"},
                                         {"epsilon", MR_ARG_NUM, "epsilon"},
                                         {"amsgrad", MR_ARG_EQ, "false"},
                                         END};
static const mr_keras_arg rmsprop_args[] = {OPTIMIZER_ARGS,
                                            {"rho", MR_ARG_NUM, "rho"},
                                            {"momentum", MR_ARG_NUM, "momentum"},
                                            {"epsilon", MR_ARG_NUM, "epsilon"},
                                            {"centered", MR_ARG_EQ, "false"},
                                            END};
static const keras_class optimizers[] = {
    {"SGD", "sgd", 0, sgd_args},
    {"Adam", "adam", 0, adam_args},
    {"AdamW", "adamw", 0, adam_args},
    {"RMSprop", "rmsprop", 0, rmsprop_args},
};

#define LOSS_ARGS                                                                                  \
    {"reduction", MR_ARG_EQ, "\"sum_over_batch_size\""}, {                                         \
        "from_logits", MR_ARG_BOOL, "from_logits"                                                  \
    }
static const mr_keras_arg sparse_ce_args[] = {
    LOSS_ARGS, {"ignore_class", MR_ARG_NULL, NULL}, {"axis", MR_ARG_EQ, "-1"}, END};
static const mr_keras_arg ce_args[] = {
    LOSS_ARGS, {"label_smoothing", MR_ARG_NUM, "label_smoothing"}, {"axis", MR_ARG_EQ, "-1"}, END};
static const mr_keras_arg mse_args[] = {{"reduction", MR_ARG_EQ, "\"sum_over_batch_size\""}, END};
static const mr_keras_arg huber_args[] = {
    {"reduction", MR_ARG_EQ, "\"sum_over_batch_size\""}, {"delta", MR_ARG_EQ, "1.0"}, END};
static const keras_class losses[] = {
    {"SparseCategoricalCrossentropy", "sparse_categorical_crossentropy", 0, sparse_ce_args},
    {"CategoricalCrossentropy", "categorical_crossentropy", 0, ce_args},
    {"BinaryCrossentropy", "binary_crossentropy", 0, ce_args},
    {"MeanSquaredError", "mse", 0, mse_args},
    {"MeanAbsoluteError", "mae", 0, mse_args},
    {"Huber", "huber", 0, huber_args},
};
/* The loss functions' names (compile(loss="...")). */
static const struct {
    const char *keras, *ours;
} loss_names[] = {
    {"sparse_categorical_crossentropy", "sparse_categorical_crossentropy"},
    {"categorical_crossentropy", "categorical_crossentropy"},
    {"binary_crossentropy", "binary_crossentropy"},
    {"mse", "mse"},
    {"mean_squared_error", "mse"},
    {"mae", "mae"},
    {"mean_absolute_error", "mae"},
    {"huber", "huber"},
};
/* The metrics every run reports already (the loss, the accuracy, a regression's mae). */
static const char *const accuracy_names[] = {
    "accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy",
    "loss",     "mae", "mean_absolute_error"};

/* A serialized object {class_name, config} of one of `table`'s classes, as [net] keys. */
static mr_status put_object(importer *im, const char *what, const char *key,
                            const keras_class *table, size_t n, const json_t *v) {
    const char *cls = json_string_value(json_object_get(v, "class_name"));
    const json_t *c = json_object_get(v, "config");
    for (size_t i = 0; cls && i < n; i++)
        if (strcmp(cls, table[i].cls) == 0) {
            if (!json_is_object(c))
                return refuse(im, MR_ERR_DATA, "%s %s without a config", what, cls);
            line(im, "%s = %s", key, table[i].section);
            return put_args(im, table[i].cls, table[i].has_weights, table[i].args, c);
        }
    char shown[96];
    json_brief(cls ? json_object_get(v, "class_name") : v, shown);
    return refuse(im, MR_ERR_CONFIG, "%s %s is not supported by mirrored", what, shown);
}

static mr_status put_loss(importer *im, const json_t *loss) {
    const char *s = json_string_value(loss);
    for (size_t i = 0; s && i < sizeof loss_names / sizeof loss_names[0]; i++)
        if (strcmp(s, loss_names[i].keras) == 0) {
            line(im, "loss = %s", loss_names[i].ours);
            return MR_OK;
        }
    if (s == NULL && json_is_object(loss))
        return put_object(im, "loss", "loss", losses, sizeof losses / sizeof losses[0], loss);
    return bad_value(im, "loss", loss,
                     "sparse_categorical_crossentropy, categorical_crossentropy, "
                     "binary_crossentropy, mse, mae or huber, one output");
}

/* One metric: an accuracy (reported anyway) or the top-k accuracy. */
static mr_status put_metric(importer *im, const json_t *m, int *top_k) {
    const char *s = json_string_value(m);
    if (s == NULL && json_is_object(m)) s = json_string_value(json_object_get(m, "class_name"));
    for (size_t i = 0; s && i < sizeof accuracy_names / sizeof accuracy_names[0]; i++)
        if (strcmp(s, accuracy_names[i]) == 0) return MR_OK;
    const char *cls_names[] = {"Accuracy", "SparseCategoricalAccuracy", "CategoricalAccuracy",
                               "BinaryAccuracy", "MeanAbsoluteError"};
    for (size_t i = 0; s && json_is_object(m) && i < 5; i++)
        if (strcmp(s, cls_names[i]) == 0) return MR_OK;
    if (s && strcmp(s, "sparse_top_k_categorical_accuracy") == 0) return *top_k = 5, MR_OK;
    const json_t *k = json_object_get(json_object_get(m, "config"), "k");
    if (s && strcmp(s, "SparseTopKCategoricalAccuracy") == 0 && json_is_integer(k) &&
        json_integer_value(k) > 0 && json_integer_value(k) < (1 << 20))
        return *top_k = (int)json_integer_value(k), MR_OK;
    return bad_value(im, "metrics", m,
                     "accuracy, SparseTopKCategoricalAccuracy(k) and a regression's mae are the "
                     "metrics mirrored reports");
}

static mr_status put_metrics(importer *im, const json_t *metrics) {
    if (json_is_null(metrics) || metrics == NULL) return MR_OK;
    if (!json_is_array(metrics)) return bad_value(im, "metrics", metrics, "a list, one output");
    int top_k = 0;
    for (size_t i = 0; i < json_array_size(metrics); i++)
        MR_CHECK(put_metric(im, json_array_get(metrics, i), &top_k));
    if (top_k > 0) line(im, "top_k = %d", top_k);
    return MR_OK;
}

/* compile_config (an archive's) or training_config (a .h5's): [net]. */
static mr_status put_compile(importer *im, const json_t *cc) {
    if (!json_is_object(cc))
        return refuse(im, MR_ERR_CONFIG,
                      "the model was saved without compile(): no optimizer and loss to take");
    line(im, "[net]");
    /* Keras fit's batch_size: a global batch of 32 unless --batch-size says otherwise */
    line(im, "global_batch = 32");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)cc, key, v) {
        if (strcmp(key, "optimizer") == 0 || strcmp(key, "optimizer_config") == 0)
            MR_CHECK(put_object(im, "optimizer", "optimizer", optimizers,
                                sizeof optimizers / sizeof optimizers[0], v));
        else if (strcmp(key, "loss") == 0)
            MR_CHECK(put_loss(im, v));
        else if (strcmp(key, "metrics") == 0)
            MR_CHECK(put_metrics(im, v));
        else if (strcmp(key, "loss_weights") == 0 || strcmp(key, "weighted_metrics") == 0) {
            if (!json_is_null(v)) return bad_value(im, key, v, "only null");
        } else if (strcmp(key, "run_eagerly") != 0 && strcmp(key, "steps_per_execution") != 0 &&
                   strcmp(key, "jit_compile") != 0 && strcmp(key, "auto_scale_loss") != 0)
            return refuse(im, MR_ERR_CONFIG, "compile argument '%s' is not supported by mirrored",
                          key);
    }
    if (json_object_get(cc, "optimizer") == NULL && json_object_get(cc, "optimizer_config") == NULL)
        return refuse(im, MR_ERR_CONFIG, "the compile config has no optimizer");
    if (json_object_get(cc, "loss") == NULL)
        return refuse(im, MR_ERR_CONFIG, "the compile config has no loss");
    return MR_OK;
}

/* A JSON text that does not parse: what, jansson's reason, and where when
 * it knows (line -1: the text is not JSON at all, or empty). */
static mr_status json_refused(const char *name, const char *what, const json_error_t *je,
                              mr_error *err) {
    if (je->line < 1)
        return mr_error_set(err, MR_ERR_DATA, "%s: the %s is not JSON: %s", name, what, je->text);
    return mr_error_set(err, MR_ERR_DATA, "%s: the %s is not JSON: %s (line %d, column %d)", name,
                        what, je->text, je->line, je->column);
}

mr_status mr_keras_import_text(const char *model_json, const char *compile_json, const char *name,
                               char **text, mr_error *err) {
    *text = NULL;
    importer *im = calloc(1, sizeof *im);
    if (im == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", name);
    im->file = name;
    im->err = err;
    mr_sb_init(&im->b);
    json_error_t je;
    json_t *model = json_loads(model_json, 0, &je), *cc = NULL;
    mr_status st = MR_OK;
    if (model == NULL)
        st = json_refused(name, "model's config", &je, err);
    else if ((cc = compile_json ? json_loads(compile_json, 0, &je) : json_null()) == NULL)
        st = json_refused(name, "compile config", &je, err);
    if (st == MR_OK) st = put_compile(im, cc);
    if (st == MR_OK) {
        /* the data is the command line's (--data, --synthetic) */
        line(im, "%s", "");
        line(im, "[data]");
        line(im, "train_images =");
        st = put_model(im, model);
    }
    json_decref(model);
    json_decref(cc);
    char *out = mr_sb_take(&im->b);
    if (st == MR_OK && out == NULL) st = mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", name);
    if (st == MR_OK)
        *text = out;
    else
        free(out);
    free(im);
    return st;
}

/* ---- the files ------------------------------------------------------------ */

#define MAX_JSON (64 << 20) /* a config.json larger than this is not a model we can hold */

/* config.json of a .keras archive (malloc'd). */
static mr_status read_archive_json(const char *path, char **out, mr_error *err) {
    int zerr = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY, &zerr);
    if (za == NULL)
        return mr_error_set(err, MR_ERR_DATA, "%s: not a readable .keras archive", path);
    mr_status st = mr_zip_check_names(za, path, err);
    zip_stat_t zs;
    zip_file_t *zf = NULL;
    char *buf = NULL;
    if (st == MR_OK && (zip_stat(za, "config.json", 0, &zs) != 0 || !(zs.valid & ZIP_STAT_SIZE)))
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s: a zip archive without config.json: not a Keras "
                          "3 .keras file",
                          path);
    else if (st == MR_OK && zs.size > MAX_JSON)
        st = mr_error_set(err, MR_ERR_DATA, "%s: config.json is larger than %d MiB", path,
                          MAX_JSON >> 20);
    if (st == MR_OK && ((buf = malloc(zs.size + 1)) == NULL))
        st = mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
    if (st == MR_OK && (zf = zip_fopen(za, "config.json", 0)) == NULL)
        st = mr_error_set(err, MR_ERR_DATA, "%s: config.json cannot be read: %s", path,
                          zip_strerror(za));
    if (st == MR_OK && zip_fread(zf, buf, zs.size) != (zip_int64_t)zs.size)
        st = mr_error_set(err, MR_ERR_DATA, "%s: config.json cannot be read", path);
    if (zf) zip_fclose(zf);
    zip_discard(za);
    if (st != MR_OK) {
        free(buf);
        return st;
    }
    buf[zs.size] = '\0';
    *out = buf;
    return MR_OK;
}

/* The architecture and the compile config of an archive: config.json's whole object (its
 * class_name and config) and its compile_config (re-encoded; NULL when there is none). */
static mr_status archive_pieces(const char *path, char **model, char **compile, mr_error *err) {
    MR_CHECK(read_archive_json(path, model, err));
    *compile = NULL;
    json_t *root = json_loads(*model, 0, NULL);
    const json_t *cc = json_object_get(root, "compile_config");
    if (cc != NULL && !json_is_null(cc)) *compile = json_dumps(cc, 0);
    json_decref(root);
    return MR_OK;
}

typedef struct h5_args {
    const char *path;
    char *model, *compile;
    mr_error *err;
} h5_args;

/* The root attributes model_config and training_config (absent: not compiled) of a .h5. */
static mr_status h5_pieces_now(void *arg) {
    h5_args *a = arg;
    mr_h5 h;
    MR_CHECK(mr_h5_open(&h, a->path, a->err));
    mr_status st = mr_h5_read_attr_str(&h, h.file, "model_config", &a->model, a->err);
    if (st == MR_OK && H5Aexists(h.file, "training_config") > 0)
        st = mr_h5_read_attr_str(&h, h.file, "training_config", &a->compile, a->err);
    mr_h5_close(&h);
    return st;
}

static mr_status h5_pieces(const char *path, char **model, char **compile, mr_error *err) {
    h5_args a = {.path = path, .err = err};
    /* read first in a child: HDF5 crashing on a damaged file is then a refusal naming it */
    h5_args trial = a;
    mr_error scratch = {0};
    trial.err = &scratch;
    MR_CHECK(mr_isolate(path, "the HDF5 library", h5_pieces_now, &trial, err));
    mr_status st = h5_pieces_now(&a);
    if (st != MR_OK) {
        free(a.model);
        free(a.compile);
        return st;
    }
    *model = a.model;
    *compile = a.compile;
    return MR_OK;
}

int mr_keras_import_is_model(const char *path) {
    mr_file_kind kind = mr_file_kind_of(path);
    if (kind == MR_FILE_KIND_KERAS) return 1;
    if (kind != MR_FILE_KIND_HDF5) return 0;
    mr_h5 h;
    mr_error scratch = {0};
    if (mr_h5_open(&h, path, &scratch) != MR_OK) return 0;
    int yes = H5Aexists(h.file, "model_config") > 0 && !mr_h5_exists(&h, h.file, "mirrored");
    mr_h5_close(&h);
    return yes;
}

/* "FILE:LINE: what" of the parser, for a line of the generated text, as "FILE: layer 'x'
 * (Class): what" (or "FILE: what" for [net]): the text is ours, its line numbers are not the
 * user's. */
static void name_the_layer(const char *text, const char *file, mr_error *err) {
    size_t n = strlen(file);
    if (strncmp(err->msg, file, n) != 0 || err->msg[n] != ':') return;
    char *end;
    long at = strtol(err->msg + n + 1, &end, 10);
    if (end == err->msg + n + 1 || strncmp(end, ": ", 2) != 0) return;
    char section[32] = "", name[MR_NAME_MAX] = "";
    const char *p = text;
    for (long ln = 1; p && *p && ln <= at + 1; ln++) {
        if (ln <= at && sscanf(p, "[%31[a-z0-9_]]", section) == 1) name[0] = '\0';
        if (sscanf(p, "name = %31[A-Za-z0-9_]", name) != 1 && ln > at) break;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    const char *cls = strcmp(section, "input") == 0 ? "InputLayer" : NULL;
    for (int k = MR_LAYER_INPUT + 1; !cls && k < MR_LAYER_KIND_COUNT; k++)
        if (strcmp(mr_layer_kind_name((mr_layer_kind)k), section) == 0)
            cls = mr_layer_ops_for((mr_layer_kind)k)->class_name;
    char rest[sizeof err->msg];
    snprintf(rest, sizeof rest, "%s", end + 2);
    const mr_status st = err->status;
    mr_error_clear(err); /* the same refusal in other words (mr_error_set keeps a first one) */
    if (cls && name[0])
        mr_error_set(err, st, "%s: layer '%s' (%s): %.*s", file, name, cls, 600, rest);
    else
        mr_error_set(err, st, "%s: %.*s", file, 600, rest);
}

mr_status mr_keras_import_load(const char *path, mr_config *cfg, mr_error *err) {
    char *model = NULL, *compile = NULL, *text = NULL;
    int archive = mr_file_kind_of(path) == MR_FILE_KIND_KERAS;
    MR_CHECK(archive ? archive_pieces(path, &model, &compile, err)
                     : h5_pieces(path, &model, &compile, err));
    mr_status st = mr_keras_import_text(model, compile, path, &text, err);
    free(model);
    free(compile);
    if (st != MR_OK) return st;
    char folder[MR_PATH_MAX];
    snprintf(folder, sizeof folder, "%s", path);
    st = mr_config_parse(text, path, dirname(folder), cfg, err);
    if (st != MR_OK) name_the_layer(text, path, err);
    free(text);
    return st;
}

mr_status mr_keras_import_config_load(const char *path, mr_config *cfg, mr_error *err) {
    if (mr_keras_import_is_model(path)) return mr_keras_import_load(path, cfg, err);
    return mr_config_load(path, cfg, err);
}
