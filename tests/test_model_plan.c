/* test_model_plan.c: a model's plan from its .cfg alone (model_plan.h):
 * Keras's automatic names, shapes, a graph's sources, the weight layout
 * against a model built on a CPU context from the same .cfg, each refusal
 * of the loss rules word for word, classes and label width; a model made
 * from a plan (mr_model_init_from_plan) against mr_model_init's, and a
 * plan's layer set up on a context (mr_layer_setup_kernels). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"
#include "models/model_plan.h"
#include "runtime/dmem_impl.h"
#include "runtime/rng.h"
#include "tests/testutil.h"

static const char *data = "[data]\ntrain_images=a\ntrain_labels=b\n";

static void parse(const char *text, mr_config *cfg) {
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, cfg, &err) == MR_OK, "%s", err.msg);
}

/* A plan on the heap (MR_MAX_LAYERS layers), made from text. */
static mr_model_plan *plan_of(const char *text, mr_config *cfg) {
    parse(text, cfg);
    mr_model_plan *p = malloc(sizeof *p);
    mr_error err = {0};
    ck_assert_msg(mr_model_plan_make(p, cfg, &err) == MR_OK, "%s", err.msg);
    return p;
}

/* The plan of cfg says what the model built from it on the CPU has:
 * shapes, names, sources, the weight layout, the loss's decisions. Frees
 * cfg. */
static void same_as_model_cfg(mr_config *cfg) {
    mr_model_plan *p = malloc(sizeof *p);
    mr_error err = {0};
    ck_assert_msg(mr_model_plan_make(p, cfg, &err) == MR_OK, "%s", err.msg);
    mr_model m;
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), cfg, 3, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(p->n_layers, m.n_layers);
    ck_assert_int_eq(p->in_size, m.in_size);
    ck_assert_int_eq(p->out_size, m.out_size);
    ck_assert_int_eq(p->n_params, m.n_params);
    ck_assert_int_eq(p->n_state, m.n_state);
    ck_assert_int_eq(p->graph, m.graph);
    ck_assert_int_eq(p->fused_softmax, m.fused_softmax);
    ck_assert_int_eq(p->classes, mr_model_classes(&m));
    ck_assert_int_eq(p->label_width, mr_model_label_width(&m));
    for (int i = 0; i < m.n_layers; i++) {
        const mr_layer *a = &p->layers[i], *b = &m.layers[i];
        ck_assert_str_eq(a->name, b->name);
        ck_assert_ptr_eq(a->ops, b->ops);
        ck_assert_ptr_null(a->kern);
        ck_assert_ptr_nonnull(b->kern);
        ck_assert_mem_eq(&a->out, &b->out, sizeof a->out);
        ck_assert_mem_eq(&a->in2, &b->in2, sizeof a->in2);
        ck_assert_int_eq(a->logits_out, b->logits_out);
        ck_assert_int_eq(p->param_offset[i], m.param_offset[i]);
        ck_assert_int_eq(p->src[i][0], m.src[i][0]);
        ck_assert_int_eq(p->src[i][1], m.src[i][1]);
        ck_assert_int_eq(a->n_weights, b->n_weights);
        for (int w = 0; w < a->n_weights; w++) {
            ck_assert_str_eq(a->w[w].name, b->w[w].name);
            ck_assert_int_eq(a->w[w].offset, b->w[w].offset);
            ck_assert_int_eq(a->w[w].size, b->w[w].size);
            ck_assert_ptr_null(a->w[w].data);
            mr_dfloat *buf = a->w[w].trainable ? m.params : m.state;
            ck_assert_ptr_eq(b->w[w].data, mr_dfloat_at(buf, a->w[w].offset));
            ck_assert_int_le(a->w[w].size, p->largest_weight);
        }
    }
    mr_model_free(&m);
    mr_config_free(cfg);
    free(p);
}

static void same_as_model(const char *text) {
    mr_config cfg;
    parse(text, &cfg);
    same_as_model_cfg(&cfg);
}

/* Automatic names as Keras gives them (a name given takes none), shapes
 * one example at a time, the layout of an MLP, its loss's decisions. */
START_TEST(names_shapes_and_layout) {
    char text[512];
    snprintf(text, sizeof text,
             "[net]\n%s[input]\nshape=28,28,1\n[flatten]\n[dense]\nunits=128\nactivation=relu\n"
             "[dense]\nname=mine\nunits=64\n[dense]\nunits=10\nactivation=softmax\n",
             data);
    mr_config cfg;
    mr_model_plan *p = plan_of(text, &cfg);
    ck_assert_int_eq(p->n_layers, 4);
    ck_assert_int_eq(p->in_size, 784);
    ck_assert_int_eq(p->out_size, 10);
    ck_assert_str_eq(p->layers[0].name, "flatten");
    ck_assert_str_eq(p->layers[1].name, "dense");
    ck_assert_str_eq(p->layers[2].name, "mine");
    ck_assert_str_eq(p->layers[3].name, "dense_1");
    ck_assert_int_eq(p->layers[0].out.d[0], 784);
    ck_assert_int_eq(p->layers[2].in.d[0], 128);
    ck_assert_int_eq(p->layers[3].index, 4);
    /* reverse layer order: the last layer's kernel (64, 10) first, its bias next */
    ck_assert_int_eq(p->layers[3].w[0].offset, 0);
    ck_assert_int_eq(p->layers[3].w[1].offset, 640);
    ck_assert_int_eq(p->param_offset[2], 650);
    ck_assert_int_eq(p->layers[1].w[0].offset, 650 + 128 * 64 + 64);
    ck_assert_int_eq(p->n_params, 784 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10);
    ck_assert_int_eq(p->n_state, 0);
    ck_assert_int_eq(p->largest_weight, 784 * 128);
    ck_assert_int_eq(p->widest, 784);
    ck_assert_int_eq(p->whole_batch, 0);
    ck_assert_int_eq(p->fused_softmax, 1);
    ck_assert_int_eq(p->layers[3].logits_out, 1);
    ck_assert_int_eq(p->classes, 10);
    ck_assert_int_eq(p->label_width, 1);
    ck_assert_int_eq(p->graph, 0);
    mr_config_free(&cfg);
    free(p);
    same_as_model(text);
}
END_TEST

/* The shipped models (BatchNormalization's state, a residual graph) and a
 * graph that adds and concatenates: the plan is the model's layout. */
START_TEST(layout_as_the_model) {
    const char *shipped[] = {"models/configs/fashion_mlp.cfg", "models/configs/fashion_cnn_bn.cfg",
                             "models/configs/fashion_resnet20.cfg"};
    for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++) {
        char *path = tu_source_path(shipped[i]);
        mr_config cfg;
        mr_error err = {0};
        ck_assert_msg(mr_config_load(path, &cfg, &err) == MR_OK, "%s", err.msg);
        same_as_model_cfg(&cfg);
        free(path);
    }
    char text[1024];
    snprintf(text, sizeof text,
             "[net]\n%s[input]\nshape=4,4,2\nname=img\n"
             "[conv2d]\nname=a\nfilters=3\nsize=3\npadding=same\nactivation=tanh\n"
             "[concatenate]\nfrom=img\nname=cat\n[conv2d]\nfilters=5\nsize=1\n[batchnorm]\n"
             "[add]\nfrom=cat\n[activation]\nactivation=relu\n[globalavgpool]\n"
             "[dense]\nunits=3\nactivation=softmax\n",
             data);
    same_as_model(text);
}
END_TEST

/* A graph's sources, second inputs and merged shapes. */
START_TEST(graph_sources) {
    char text[1024];
    snprintf(text, sizeof text,
             "[net]\n%s[input]\nshape=4,4,2\nname=img\n"
             "[conv2d]\nname=a\nfilters=3\nsize=3\npadding=same\nactivation=tanh\n"
             "[concatenate]\nfrom=img\nname=cat\n[conv2d]\nfilters=5\nsize=1\n"
             "[add]\nfrom=cat\n[globalavgpool]\n[dense]\nunits=3\nactivation=softmax\n",
             data);
    mr_config cfg;
    mr_model_plan *p = plan_of(text, &cfg);
    ck_assert_int_eq(p->graph, 1);
    ck_assert_int_eq(p->n_layers, 6);
    /* concatenate: the convolution's 3 channels, then the input's 2 */
    ck_assert_str_eq(p->layers[1].name, "cat");
    ck_assert_int_eq(p->src[1][0], 0);
    ck_assert_int_eq(p->src[1][1], -1);
    ck_assert_int_eq(p->layers[1].in2.d[2], 2);
    ck_assert_int_eq(p->layers[1].out.d[2], 5);
    ck_assert_str_eq(p->layers[2].name, "conv2d");
    ck_assert_str_eq(p->layers[3].name, "add");
    ck_assert_int_eq(p->src[3][0], 2);
    ck_assert_int_eq(p->src[3][1], 1);
    ck_assert_int_eq(p->layers[3].out.d[2], 5);
    ck_assert_int_eq(p->src[4][1], -1); /* not a merge */
    ck_assert_int_eq(p->widest, 4 * 4 * 5);
    mr_config_free(&cfg);
    free(p);
}
END_TEST

/* The line in text of the last "[dense]" section. */
static int last_dense_line(const char *text) {
    const char *last = NULL;
    for (const char *s = text; (s = strstr(s, "[dense]")) != NULL; s++)
        last = s;
    int line = 1;
    for (const char *s = text; s < last; s++)
        line += *s == '\n';
    return line;
}

/* Every refusal of the plan, word for word: the last layer's shape, the
 * loss rules (the last layer's activation against cross-entropy,
 * from_logits, label_smoothing, binary_crossentropy), top_k and
 * class_weight against the classes, a name taken, a shape a layer cannot
 * take; mr_model_init refuses with the same message. {LINE}: the last
 * [dense]'s line. */
START_TEST(refusals_word_for_word) {
    static const struct {
        const char *net, *layers, *want;
    } cases[] = {
        {"", "[input]\nshape=4,4,2\n[conv2d]\nfilters=2\nsize=1\n",
         "t.cfg:8: the last layer must output class scores (a flat vector); add [flatten] and a "
         "[dense] layer"},
        {"loss=binary_crossentropy", "[input]\nshape=6\n[dense]\nunits=1\nactivation=softmax\n",
         "t.cfg:{LINE}: [net] loss = binary_crossentropy needs activation = sigmoid on the last "
         "layer, not softmax"},
        {"loss=binary_crossentropy\nfrom_logits=1",
         "[input]\nshape=6\n[dense]\nunits=1\nactivation=sigmoid\n",
         "t.cfg:{LINE}: [net] loss = binary_crossentropy with from_logits = 1 needs a linear last "
         "layer, not a sigmoid (drop from_logits)"},
        {"loss=binary_crossentropy\nclass_weight=1,2,3",
         "[input]\nshape=6\n[dense]\nunits=3\nactivation=sigmoid\n",
         "t.cfg:{LINE}: [net] loss = binary_crossentropy with more than one output (multi-label) "
         "takes no class_weight"},
        {"loss=mse\nfrom_logits=1", "[input]\nshape=6\n[dense]\nunits=3\n",
         "t.cfg: [net] from_logits applies to the cross-entropy losses, not to loss = mse"},
        {"loss=mse\nlabel_smoothing=0.1", "[input]\nshape=6\n[dense]\nunits=3\n",
         "t.cfg: [net] label_smoothing applies to the cross-entropy losses, not to loss = mse"},
        {"label_smoothing=0.1", "[input]\nshape=6\n[dense]\nunits=3\nactivation=softmax\n",
         "t.cfg: [net] label_smoothing needs loss = categorical_crossentropy (Keras's "
         "SparseCategoricalCrossentropy has no label smoothing)"},
        {"from_logits=1", "[input]\nshape=6\n[dense]\nunits=3\nactivation=softmax\n",
         "t.cfg:{LINE}: [net] from_logits = 1, but the last layer is a softmax: its outputs are "
         "probabilities (drop from_logits, or make it linear)"},
        {"", "[input]\nshape=6\n[dense]\nunits=3\n",
         "t.cfg:{LINE}: the last layer is linear and the loss a cross-entropy: set [net] "
         "from_logits = 1 (its outputs are logits) or activation = softmax"},
        {"loss=binary_crossentropy", "[input]\nshape=6\n[dense]\nunits=1\n",
         "t.cfg:{LINE}: the last layer is linear and the loss a cross-entropy: set [net] "
         "from_logits = 1 (its outputs are logits) or activation = sigmoid"},
        {"loss=mse\nvalidation_split=0.2\nearly_stopping=val_accuracy",
         "[input]\nshape=6\n[dense]\nunits=3\n",
         "t.cfg:{LINE}: [net] early_stopping = val_accuracy watches an accuracy, but loss = mse on "
         "this last layer is a regression, whose metric is mae: watch val_loss or loss"},
        {"top_k=3", "[input]\nshape=6\n[dense]\nunits=3\nactivation=softmax\n",
         "t.cfg:{LINE}: [net] top_k = 3 must be below the 3 classes the last layer outputs"},
        {"class_weight=1,2", "[input]\nshape=6\n[dense]\nunits=3\nactivation=softmax\n",
         "t.cfg:{LINE}: [net] class_weight has 2 weights, but the last layer outputs 3 classes: "
         "give one weight per class"},
        {"",
         "[input]\nshape=4\n[dense]\nunits=3\nname=dense_1\n[dense]\nunits=3\n[dense]\nunits=2\n"
         "activation=softmax\n",
         "t.cfg:8: name = dense_1 is the automatic name of the [dense] of line {LINE}; choose "
         "another"},
        {"", "[input]\nshape=4,4,1\n[dense]\nunits=3\nactivation=softmax\n",
         "t.cfg:{LINE}: [dense] needs a flat input (features); got shape (4,4,1): add a [flatten] "
         "section before it"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024], want[512];
        snprintf(text, sizeof text, "[net]\n%s\n%s%s", cases[i].net, data, cases[i].layers);
        /* {LINE}: the last [dense]'s line */
        const char *at = strstr(cases[i].want, "{LINE}");
        if (at)
            snprintf(want, sizeof want, "%.*s%d%s", (int)(at - cases[i].want), cases[i].want,
                     last_dense_line(text), at + 6);
        else
            snprintf(want, sizeof want, "%s", cases[i].want);
        mr_config cfg;
        parse(text, &cfg);
        mr_model_plan *p = malloc(sizeof *p);
        mr_error err = {0};
        ck_assert_int_eq(mr_model_plan_make(p, &cfg, &err), MR_ERR_CONFIG);
        ck_assert_msg(strcmp(err.msg, want) == 0, "case %zu\n got: %s\nwant: %s", i, err.msg, want);
        mr_model m;
        mr_error_clear(&err);
        ck_assert_int_eq(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err), MR_ERR_CONFIG);
        ck_assert_str_eq(err.msg, want);
        mr_model_free(&m); /* nothing held: a no-op */
        free(p);
        mr_config_free(&cfg);
    }
}
END_TEST

/* Classes and labels per example, by loss and outputs; which layer
 * outputs logits. */
START_TEST(classes_and_label_width) {
    static const struct {
        const char *net, *last;
        int units, classes, width, fused, logits_out;
    } cases[] = {
        {"", "activation=softmax", 10, 10, 1, 1, 1},
        {"from_logits=1", "", 10, 10, 1, 1, 0},
        {"loss=mse", "", 4, 4, 4, 0, 0},                   /* regression: float targets (n, 4) */
        {"loss=mae", "activation=softmax", 4, 4, 1, 0, 0}, /* one-hot of class ids */
        {"loss=binary_crossentropy", "activation=sigmoid", 1, 2, 1, 1, 1},
        {"loss=binary_crossentropy\nfrom_logits=1", "", 1, 2, 1, 1, 0},
        {"loss=binary_crossentropy", "activation=sigmoid", 3, 3, 3, 1, 1},
        /* a last layer without an activation of its own: outputs as they come */
        {"", "[dropout]\nrate=0.5", 5, 5, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "[net]\n%s\n%s[input]\nshape=6\n[dense]\nunits=%d\n%s\n",
                 cases[i].net, data, cases[i].units, cases[i].last);
        mr_config cfg;
        mr_model_plan *p = plan_of(text, &cfg);
        ck_assert_msg(p->classes == cases[i].classes && p->label_width == cases[i].width &&
                          p->fused_softmax == cases[i].fused &&
                          p->layers[p->n_layers - 1].logits_out == cases[i].logits_out,
                      "case %zu: classes %d width %d fused %d logits_out %d", i, p->classes,
                      p->label_width, p->fused_softmax, p->layers[p->n_layers - 1].logits_out);
        mr_config_free(&cfg);
        free(p);
        same_as_model(text);
    }
}
END_TEST

/* mr_layer_ops.has_activation is what the .cfg says: a kind has it exactly
 * where its section takes `activation =`, or fixes it ([softmax]: softmax). */
START_TEST(has_activation_as_the_cfg) {
    for (int k = 0; k < MR_LAYER_KIND_COUNT; k++) {
        const mr_layer_ops *ops = mr_layer_ops_for((mr_layer_kind)k);
        if (ops == NULL) continue; /* [input] */
        char text[512];
        snprintf(text, sizeof text, "[net]\n%s[input]\nshape=4,4,2\n[%s]\nactivation=relu\n", data,
                 mr_layer_kind_name((mr_layer_kind)k));
        mr_config cfg;
        mr_error err = {0};
        mr_status st = mr_config_parse(text, "t.cfg", NULL, &cfg, &err);
        const int takes = st == MR_OK || (!strstr(err.msg, "unknown key 'activation'") &&
                                          !strstr(err.msg, "takes no keys"));
        const int fixed = k == MR_LAYER_SOFTMAX;
        ck_assert_msg(ops->has_activation == (takes || fixed), "[%s]: has_activation %d, %s",
                      mr_layer_kind_name((mr_layer_kind)k), ops->has_activation, err.msg);
        if (st == MR_OK) mr_config_free(&cfg);
    }
}
END_TEST

/* A model made from a plan is mr_model_init's: the same layout, pass size
 * and initial weights; the plan may go before the model is used. */
START_TEST(init_from_plan_as_init) {
    char *path = tu_source_path("models/configs/fashion_cnn_bn.cfg");
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_load(path, &cfg, &err) == MR_OK, "%s", err.msg);
    free(path);
    mr_model_plan *p = malloc(sizeof *p);
    ck_assert_msg(mr_model_plan_make(p, &cfg, &err) == MR_OK, "%s", err.msg);
    mr_model a, b;
    ck_assert_msg(mr_model_init_from_plan(&a, tu_cpu_backend(), p, 8, 2, &err) == MR_OK, "%s",
                  err.msg);
    memset(p, 0xff, sizeof *p); /* gone */
    free(p);
    ck_assert_msg(mr_model_init(&b, tu_cpu_backend(), &cfg, 8, 2, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(a.n_params, b.n_params);
    ck_assert_int_eq(a.n_state, b.n_state);
    ck_assert_int_eq(a.pass_rows, b.pass_rows);
    ck_assert_int_eq(a.grads_extra, 2);
    ck_assert_int_eq(mr_model_classes(&a), 10);
    ck_assert_int_eq(mr_model_init_weights(&a, 7, &err), MR_OK);
    ck_assert_int_eq(mr_model_init_weights(&b, 7, &err), MR_OK);
    ck_assert_mem_eq(mr_dfloat_cptr(a.params), mr_dfloat_cptr(b.params),
                     sizeof(float) * (size_t)a.n_params);
    ck_assert_mem_eq(mr_dfloat_cptr(a.state), mr_dfloat_cptr(b.state),
                     sizeof(float) * (size_t)a.n_state);
    for (int i = 0; i < a.n_layers; i++) {
        ck_assert_int_eq(a.layers[i].fused, b.layers[i].fused);
        ck_assert_int_eq(a.layers[i].scratch_floats, b.layers[i].scratch_floats);
    }
    mr_rng_uniform(3, 1, 0, 0, 0.0f, 1.0f, mr_model_input_host(&a), 8 * a.in_size);
    ck_assert_int_eq(mr_model_forward(&a, 8, 0, &err), MR_OK);
    mr_model_free(&a);
    mr_model_free(&b);
    mr_config_free(&cfg);
}
END_TEST

/* A plan's layer (ops set up) on a context: the kernels of its device
 * kind, or MR_ERR_UNSUPPORTED naming the .cfg line where there are none. */
START_TEST(layer_setup_kernels) {
    char text[512];
    snprintf(text, sizeof text, "[net]\n%s[input]\nshape=6\n[dense]\nunits=3\nactivation=softmax\n",
             data);
    mr_config cfg;
    mr_model_plan *p = plan_of(text, &cfg);
    mr_layer l = p->layers[0];
    mr_error err = {0};
    ck_assert_int_eq(mr_layer_setup_kernels(&l, tu_cpu_backend(), 4, "t.cfg", &err), MR_OK);
    ck_assert_ptr_nonnull(l.kern);
    ck_assert_int_eq(l.n_weights, 2); /* the plan's, untouched */
    mr_layer_destroy(&l);
    mr_backend fake = *tu_cpu_backend();
    mr_backend_ops ops = *fake.ops;
    ops.kernels = NULL;
    fake.ops = &ops;
    l = p->layers[0];
    ck_assert_int_eq(mr_layer_setup_kernels(&l, &fake, 4, "t.cfg", &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "t.cfg:7: [dense]: no kernels for "), "%s", err.msg);
    mr_layer_destroy(&l);
    mr_config_free(&cfg);
    free(p);
}
END_TEST

int main(void) {
    Suite *s = suite_create("model_plan");
    TCase *tc = tcase_create("model_plan");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, names_shapes_and_layout);
    tcase_add_test(tc, layout_as_the_model);
    tcase_add_test(tc, graph_sources);
    tcase_add_test(tc, refusals_word_for_word);
    tcase_add_test(tc, classes_and_label_width);
    tcase_add_test(tc, has_activation_as_the_cfg);
    tcase_add_test(tc, init_from_plan_as_init);
    tcase_add_test(tc, layer_setup_kernels);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
