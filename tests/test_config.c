/* test_config.c: .cfg parsing, defaults, validation and error messages. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "models/config.h"
#include "models/layer.h"
#include "models/model_plan.h"
#include "tests/testutil.h"

static const char *base_cfg = "[net]\n"
                              "batch = 16\n"
                              "[data]\n"
                              "train_images = a.idx\n"
                              "train_labels = b.idx\n"
                              "[input]\n"
                              "shape = 28,28,1\n"
                              "[flatten]\n"
                              "[dense]\n"
                              "units = 10\n"
                              "activation = softmax\n";

/* Parses text, expects failure; returns the message (static). */
static const char *parse_fail(const char *text) {
    static mr_error err;
    mr_config cfg;
    mr_error_clear(&err);
    mr_status st = mr_config_parse(text, "t.cfg", NULL, &cfg, &err);
    ck_assert_int_eq(st, MR_ERR_CONFIG);
    return err.msg;
}

START_TEST(parses_defaults) {
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(base_cfg, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_int_eq(cfg.net.batch, 16);
    ck_assert_int_eq(cfg.net.optimizer, MR_OPTIMIZER_ADAM);
    ck_assert_float_eq_tol(cfg.net.learning_rate, 0.001f, 1e-9f);
    ck_assert_float_eq_tol(cfg.net.beta2, 0.999f, 1e-9f);
    ck_assert_float_eq_tol(cfg.net.epsilon, 1e-7f, 1e-12f);
    ck_assert_int_eq(cfg.net.lr_scaling, MR_LR_SCALING_LINEAR);
    ck_assert_int_eq(cfg.net.lr_schedule, MR_LR_SCHEDULE_CONSTANT);
    ck_assert_float_eq(cfg.net.lr_alpha, 0.0f);
    ck_assert_int_eq(cfg.net.shuffle, 1);
    ck_assert_int_eq(cfg.net.accumulate, 1);
    ck_assert_int_eq(cfg.n_layers, 3);
    ck_assert_int_eq(cfg.layers[0].kind, MR_LAYER_INPUT);
    ck_assert_int_eq(cfg.layers[0].shape_rank, 3);
    ck_assert_int_eq(cfg.layers[0].shape[1], 28);
    ck_assert_int_eq(cfg.layers[1].kind, MR_LAYER_FLATTEN);
    ck_assert_int_eq(cfg.layers[1].line, 8);
    ck_assert_int_eq(cfg.layers[2].units, 10);
    ck_assert_int_eq(cfg.layers[2].activation, MR_ACTIVATION_SOFTMAX);
    ck_assert_int_eq(cfg.layers[2].use_bias, 1);
    ck_assert_str_eq(cfg.data.train_images, "a.idx");
    ck_assert_str_eq(cfg.data.test_images, "");
    ck_assert_int_eq(cfg.augment.present, 0);
    ck_assert_ptr_nonnull(strstr(cfg.text, "[flatten]"));
    mr_config_free(&cfg);
}
END_TEST

START_TEST(parses_all_layer_kinds) {
    const char *text =
        "[net]\noptimizer=sgd\nmomentum=0.9\nnesterov=true\nlearning_rate=1/100\n"
        "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=1/255\nstandardize=yes\n"
        "[augment]\nflip=1\nshift=2\n"
        "[input]\nshape=28,28,1\n"
        "[conv2d]\nfilters=8\nsize=3,5\nstride=2\npadding=same\nactivation=relu\n"
        "[batchnorm]\nmomentum=0.9\n[maxpool]\nsize=2\n[avgpool]\nsize=3\nstride=1\n"
        "[dropout]\nrate=0.25\n[flatten]\n[dense]\nunits=4\n[activation]\nactivation=tanh\n";
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", "/base", &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(cfg.net.optimizer, MR_OPTIMIZER_SGD);
    ck_assert_int_eq(cfg.net.nesterov, 1);
    ck_assert_float_eq_tol(cfg.net.learning_rate, 0.01f, 1e-9f);
    ck_assert_float_eq_tol(cfg.data.scale, 1.0f / 255.0f, 1e-9f);
    ck_assert_int_eq(cfg.data.standardize, 1);
    ck_assert_str_eq(cfg.data.train_images, "/base/x.npy"); /* relative to the .cfg folder */
    ck_assert_int_eq(cfg.augment.present, 1);
    ck_assert_int_eq(cfg.augment.shift, 2);
    const mr_layer_cfg *conv = &cfg.layers[1];
    ck_assert_int_eq(conv->kind, MR_LAYER_CONV2D);
    ck_assert_int_eq(conv->size[0], 3);
    ck_assert_int_eq(conv->size[1], 5);
    ck_assert_int_eq(conv->stride[0], 2);
    ck_assert_int_eq(conv->stride[1], 2);
    ck_assert_int_eq(conv->padding, MR_PADDING_SAME);
    ck_assert_int_eq(cfg.layers[2].kind, MR_LAYER_BATCHNORM);
    ck_assert_float_eq_tol(cfg.layers[2].epsilon, 1e-3f, 1e-9f);
    /* pool stride defaults to the pool size, as Keras */
    ck_assert_int_eq(cfg.layers[3].stride[0], 2);
    ck_assert_int_eq(cfg.layers[4].size[0], 3);
    ck_assert_int_eq(cfg.layers[4].stride[0], 1);
    ck_assert_float_eq_tol(cfg.layers[5].rate, 0.25f, 1e-9f);
    ck_assert_int_eq(cfg.layers[8].activation, MR_ACTIVATION_TANH);
    mr_config_free(&cfg);
}
END_TEST

/* base_cfg with `line` inserted after line number `after` */
static char *with_line(int after, const char *line) {
    static char buf[4096];
    const char *p = base_cfg;
    size_t o = 0;
    for (int n = 0; n < after; n++) {
        const char *nl = strchr(p, '\n');
        memcpy(buf + o, p, (size_t)(nl - p + 1));
        o += (size_t)(nl - p + 1);
        p = nl + 1;
    }
    o += (size_t)sprintf(buf + o, "%s\n", line);
    strcpy(buf + o, p);
    return buf;
}

START_TEST(unknown_key_suggests) {
    const char *msg = parse_fail(with_line(9, "unit = 5"));
    ck_assert_msg(strstr(msg, "t.cfg:10:") && strstr(msg, "'unit'") &&
                      strstr(msg, "did you mean 'units'"),
                  "%s", msg);
}
END_TEST

/* Layer names and references (input =, from =): resolved into src[], and
 * every bad reference one line with the section's line. */
START_TEST(layer_references) {
    const char *head = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4,4,2\n";
    char text[1024];
    mr_config cfg;
    mr_error err = {0};
    snprintf(text, sizeof text,
             "%s[conv2d]\nname=stem\nfilters=2\nsize=1\n[conv2d]\nfilters=2\nsize=1\n"
             "[add]\nfrom=stem\n[conv2d]\ninput=-2\nfilters=2\nsize=1\n[add]\nfrom = -2\n"
             "[flatten]\n[dense]\nunits=2\n",
             head);
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(cfg.graph, 1);
    ck_assert_str_eq(cfg.layers[1].name, "stem");
    ck_assert_int_eq(cfg.layers[3].src[0], 2);
    ck_assert_int_eq(cfg.layers[3].src[1], 1);
    ck_assert_int_eq(cfg.layers[4].src[0], 2);
    ck_assert_int_eq(cfg.layers[5].src[0], 4);
    ck_assert_int_eq(cfg.layers[5].src[1], 3);
    mr_config_free(&cfg);
    /* [concatenate] merges as [add] does; the other kinds take one input */
    snprintf(text, sizeof text,
             "%s[conv2d]\nname=stem\nfilters=2\nsize=1\n[conv2d]\nfilters=2\nsize=1\n"
             "[Concatenate]\nfrom=-2\n[flatten]\n[dense]\nunits=2\n",
             head);
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(cfg.graph, 1);
    ck_assert_int_eq(cfg.layers[3].kind, MR_LAYER_CONCATENATE);
    ck_assert_int_eq(cfg.layers[3].src[0], 2);
    ck_assert_int_eq(cfg.layers[3].src[1], 1);
    mr_config_free(&cfg);
    for (int k = 0; k < MR_LAYER_KIND_COUNT; k++)
        ck_assert_int_eq(mr_layer_kind_merges((mr_layer_kind)k),
                         k == MR_LAYER_ADD || k == MR_LAYER_CONCATENATE);
    /* a chain is no graph, names or not */
    snprintf(text, sizeof text, "%s[flatten]\nname=f\ninput=-1\n[dense]\nunits=2\ninput=f\n", head);
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(cfg.graph, 0);
    mr_config_free(&cfg);
    static const struct {
        const char *layers, *want;
    } bad[] = {
        {"[flatten]\n[add]\nfrom=stem\n[dense]\nunits=2\n",
         "t.cfg:8: [add] from = stem: no layer has that name (name = stem)"},
        {"[flatten]\n[add]\nfrom=later\n[dense]\nunits=2\nname=later\n",
         "t.cfg:8: [add] from = later: that layer comes later (line 10); a layer takes only "
         "outputs of the layers before it, so the graph has no cycle"},
        {"[flatten]\nname=me\ninput=me\n[dense]\nunits=2\n",
         "t.cfg:7: [flatten] input = me: that is this layer (line 7); a layer takes only outputs "
         "of the layers before it, so the graph has no cycle"},
        {"[flatten]\n[add]\nfrom=-3\n[dense]\nunits=2\n",
         "t.cfg:8: [add] from = -3: only 2 sections come before this one"},
        {"[flatten]\nname=x\n[dense]\nunits=2\nname=x\n",
         "t.cfg:9: [dense] name = x: the layer of line 7 has that name"},
        {"[flatten]\nname=a/b\n[dense]\nunits=2\n",
         "t.cfg:8: [flatten] name: 'a/b' is not a name (letters, digits and _)"},
        {"[flatten]\ninput=-0\n[dense]\nunits=2\n",
         "t.cfg:8: [flatten] input: '-0' is not a layer name or -N (N from 1 to 256)"},
        {"[flatten]\n[add]\n[dense]\nunits=2\n",
         "t.cfg:8: [add] is missing the required key 'from' (the earlier layer (NAME or -N) whose "
         "output is added to the input (a residual connection); the shapes must be equal)"},
        {"[flatten]\n[concatenate]\n[dense]\nunits=2\n",
         "t.cfg:8: [concatenate] is missing the required key 'from' (the earlier layer (NAME or "
         "-N) "
         "whose output is joined after the input along the last axis (channels, or features); the "
         "other axes must be equal)"},
        {"[flatten]\n[dense]\nunits=3\n[dense]\nunits=2\ninput=-2\n",
         "t.cfg:8: [dense]: no later layer takes its output (input = or from =), and only the last "
         "layer is the model's output"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "%s%s", head, bad[i].layers);
        const char *msg = parse_fail(text);
        ck_assert_msg(strcmp(msg, bad[i].want) == 0, "case %zu got: %s\nwant: %s", i, msg,
                      bad[i].want);
    }
    /* [input] takes a name but no input */
    const char *msg = parse_fail("[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\n"
                                 "shape=4\ninput=-1\n[dense]\nunits=2\n");
    ck_assert_msg(strstr(msg, "t.cfg:7: unknown key 'input' in [input]"), "%s", msg);
}
END_TEST

/* [normalization]: statistics given together and not negative; an adapted
 * one takes the model input, through [rescaling] layers only. */
START_TEST(normalization_keys) {
    const char *head = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4,4,3\n";
    char text[1024];
    mr_config cfg;
    mr_error err = {0};
    snprintf(text, sizeof text,
             "%s[rescaling]\nscale=0.5\n[rescaling]\noffset=1\n[normalization]\n"
             "[normalization]\nmean=1,2,3\nvariance=0.5\n[flatten]\n[dense]\nunits=2\n",
             head);
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert(cfg.layers[1].rescale == 0.5f && cfg.layers[1].offset == 0.0f);
    ck_assert(cfg.layers[2].rescale == 1.0f && cfg.layers[2].offset == 1.0f);
    ck_assert_int_eq(cfg.layers[3].mean.n, 0);
    ck_assert_int_eq(cfg.layers[4].mean.n, 3);
    ck_assert(cfg.layers[4].mean.v[2] == 3.0f && cfg.layers[4].variance.v[0] == 0.5f);
    mr_config_free(&cfg);
    static const struct {
        const char *layers, *want;
    } bad[] = {
        {"[normalization]\nmean=1\n[flatten]\n[dense]\nunits=2\n",
         "t.cfg:7: [normalization] mean and variance go together: give both, or neither to adapt "
         "them to the training data"},
        {"[normalization]\nmean=0\nvariance=1,-2,1\n[flatten]\n[dense]\nunits=2\n",
         "t.cfg:9: [normalization] variance: -2 is out of range [0, 1e+30]"},
        {"[normalization]\nmean=0,x\nvariance=1\n[flatten]\n[dense]\nunits=2\n",
         "t.cfg:8: [normalization] mean: '0,x' is not a comma-separated list of numbers"},
        {"[rescaling]\n[dropout]\nrate=0.1\n[normalization]\n[flatten]\n[dense]\nunits=2\n",
         "t.cfg:10: [normalization] without mean and variance adapts to the training data: it "
         "must take the model input, directly after [input] or [rescaling] layers only (not "
         "[dropout] of line 8)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "%s%s", head, bad[i].layers);
        const char *msg = parse_fail(text);
        ck_assert_msg(strcmp(msg, bad[i].want) == 0, "case %zu got: %s\nwant: %s", i, msg,
                      bad[i].want);
    }
}
END_TEST

START_TEST(unknown_section_suggests) {
    const char *msg = parse_fail(with_line(8, "[dnse]"));
    ck_assert_msg(strstr(msg, "t.cfg:9:") && strstr(msg, "[dnse]") && strstr(msg, "[dense]"), "%s",
                  msg);
}
END_TEST

/* A model without [data], as a Keras model file has none: the data come from
 * the command line or the caller's arrays; a layer before [input] is still refused */
START_TEST(no_data_section) {
    mr_config cfg;
    mr_error err = {0};
    const char *text = "[net]\n[InputLayer]\nshape = (4,)\n[Dense]\nunits = 3\n"
                       "activation = \"softmax\"\n";
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_str_eq(cfg.data.train_images, "");
    ck_assert_int_eq(cfg.n_layers, 2);
    mr_config_free(&cfg);
    ck_assert_int_ne(mr_config_parse("[net]\n[Dense]\nunits = 3\n", "t.cfg", NULL, &cfg, &err),
                     MR_OK);
    ck_assert_msg(strstr(err.msg, "t.cfg:2:") && strstr(err.msg, "[input]"), "%s", err.msg);
}
END_TEST

/* Keras's spellings: the same meaning is accepted, another is a hint */
START_TEST(keras_names) {
    mr_config cfg;
    mr_error err = {0};
    const char *text = "[net]\nbeta_1 = 0.8\nBeta_2 = 0.99\n[data]\ntrain_images = a\n"
                       "train_labels = b\n[InputLayer]\nshape = 28,28,1\n[Conv2D]\nfilters = 4\n"
                       "kernel_size = 3,5\nstrides = 2\n[MaxPooling2D]\npool_size = 3\n"
                       "[average_pooling2d]\npool_size = 2\nstrides = 1\n"
                       "[BatchNormalization]\n[batch_normalization]\n[flatten]\n[Dense]\n"
                       "units = 10\n";
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_float_eq_tol(cfg.net.beta1, 0.8f, 1e-9f);
    ck_assert_float_eq_tol(cfg.net.beta2, 0.99f, 1e-9f);
    ck_assert_int_eq(cfg.n_layers, 8);
    ck_assert_int_eq(cfg.layers[0].kind, MR_LAYER_INPUT);
    ck_assert_int_eq(cfg.layers[1].kind, MR_LAYER_CONV2D);
    ck_assert_int_eq(cfg.layers[1].size[0], 3);
    ck_assert_int_eq(cfg.layers[1].size[1], 5);
    ck_assert_int_eq(cfg.layers[1].stride[0], 2);
    ck_assert_int_eq(cfg.layers[2].kind, MR_LAYER_MAXPOOL);
    ck_assert_int_eq(cfg.layers[2].size[0], 3);
    ck_assert_int_eq(cfg.layers[3].kind, MR_LAYER_AVGPOOL);
    ck_assert_int_eq(cfg.layers[3].stride[0], 1);
    ck_assert_int_eq(cfg.layers[4].kind, MR_LAYER_BATCHNORM);
    ck_assert_int_eq(cfg.layers[5].kind, MR_LAYER_BATCHNORM);
    ck_assert_int_eq(cfg.layers[7].kind, MR_LAYER_DENSE);
    mr_config_free(&cfg);
    /* a meaning that differs: refused, naming the key to use */
    const char *msg = parse_fail(with_line(1, "lr = 0.1"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "did you mean 'learning_rate'") &&
                      !strstr(msg, "'loss'"),
                  "%s", msg);
    msg = parse_fail(with_line(1, "batch_size = 64"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "'global_batch'") &&
                      strstr(msg, "'batch' (per replica)"),
                  "%s", msg);
    /* an alias is the key itself: not twice, and only in its section */
    msg = parse_fail("[net]\n[data]\ntrain_images = a\ntrain_labels = b\n[input]\nshape = 8,8,1\n"
                     "[conv2d]\nfilters = 2\nsize = 3\nkernel_size = 3\n");
    ck_assert_msg(strstr(msg, "t.cfg:10:") && strstr(msg, "'size' given twice") &&
                      strstr(msg, "'kernel_size'"),
                  "%s", msg);
    msg = parse_fail(with_line(10, "kernel_size = 3"));
    ck_assert_msg(strstr(msg, "t.cfg:11:") && strstr(msg, "unknown key 'kernel_size' in [dense]"),
                  "%s", msg);
}
END_TEST

/* Keras's spellings of sections, keys and values: the same configuration
 * as ours, field for field */
START_TEST(keras_spellings) {
    const char *text =
        "[net]\nclipnorm = None\n[data]\ntrain_images = 'a.npy'\ntrain_labels = \"b.npy\"\n"
        "[InputLayer]\nshape = (8, 8, 1)\n"
        "[ZeroPadding2D]\npadding = ((1, 1), (2, 2))\n"
        "[Conv2D]\nfilters = 4\nkernel_size = (3, 3)\nstrides = [1, 2]\npadding = 'same'\n"
        "activation = \"relu\"\nuse_bias = False\nkernel_regularizer = l2(0.001)\n"
        "kernel_initializer = 'he_normal'\nname = \"c1\"\n"
        "[BatchNormalization]\nsynchronized = True\n"
        "[max_pooling2d]\npool_size = (2, 2)\nstrides = None\n"
        "[zero_padding2d]\npadding = ((0, 1), (0, 1))\n"
        "[GlobalAveragePooling2D]\n[Dense]\nunits = 10\nactivation = None\n"
        "kernel_regularizer = keras.regularizers.L2(l2=0.5)\n";
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_float_eq(cfg.net.clipnorm, 0.0f);
    ck_assert_str_eq(cfg.data.train_images, "a.npy");
    ck_assert_str_eq(cfg.data.train_labels, "b.npy");
    const mr_layer_cfg *l = cfg.layers;
    ck_assert_int_eq(cfg.n_layers, 8);
    ck_assert_int_eq(l[0].shape_rank, 3);
    ck_assert_int_eq(l[0].shape[1], 8);
    ck_assert_int_eq(l[1].kind, MR_LAYER_ZEROPAD);
    ck_assert_int_eq(l[1].pad[0], 1);
    ck_assert_int_eq(l[1].pad[1], 1);
    ck_assert_int_eq(l[1].pad[2], 2);
    ck_assert_int_eq(l[1].pad[3], 2);
    ck_assert_int_eq(l[2].kind, MR_LAYER_CONV2D);
    ck_assert_int_eq(l[2].size[0], 3);
    ck_assert_int_eq(l[2].size[1], 3);
    ck_assert_int_eq(l[2].stride[0], 1);
    ck_assert_int_eq(l[2].stride[1], 2);
    ck_assert_int_eq(l[2].padding, MR_PADDING_SAME);
    ck_assert_int_eq(l[2].activation, MR_ACTIVATION_RELU);
    ck_assert_int_eq(l[2].use_bias, 0);
    ck_assert_float_eq(l[2].kernel_l2, 0.001f);
    ck_assert_int_eq(l[2].kernel_initializer, MR_INIT_HE_NORMAL);
    ck_assert_str_eq(l[2].name, "c1");
    ck_assert_int_eq(l[3].kind, MR_LAYER_BATCHNORM);
    ck_assert_int_eq(l[3].sync, 1);
    ck_assert_int_eq(l[4].kind, MR_LAYER_MAXPOOL);
    ck_assert_int_eq(l[4].stride[0], 2); /* None: the pool size */
    ck_assert_int_eq(l[5].kind, MR_LAYER_ZEROPAD);
    ck_assert_int_eq(l[5].pad[0], 0); /* MobileNetV2's uneven padding */
    ck_assert_int_eq(l[5].pad[1], 1);
    ck_assert_int_eq(l[5].pad[2], 0);
    ck_assert_int_eq(l[5].pad[3], 1);
    ck_assert_int_eq(l[6].kind, MR_LAYER_GLOBALAVGPOOL);
    ck_assert_int_eq(l[7].activation, MR_ACTIVATION_LINEAR);
    ck_assert_float_eq(l[7].kernel_l2, 0.5f);
    mr_config_free(&cfg);
    /* the other forms of a value */
    const char *head = "[net]\n[data]\ntrain_images = a\ntrain_labels = b\n[input]\n";
    char t2[1024];
    snprintf(t2, sizeof t2,
             "%sshape = (784,)\n[Normalization]\nmean = None\nvariance = None\n"
             "[dense]\nunits = 4\nkernel_regularizer = 'l2'\n",
             head);
    ck_assert_msg(mr_config_parse(t2, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(cfg.layers[0].shape_rank, 1);
    ck_assert_int_eq(cfg.layers[0].shape[0], 784);
    ck_assert_int_eq(cfg.layers[1].mean.n, 0);
    ck_assert_float_eq(cfg.layers[2].kernel_l2, 0.01f); /* Keras's L2() default */
    mr_config_free(&cfg);
}
END_TEST

/* Every layer kind's section answers to its Keras class name and Keras's
 * automatic layer name (its ops table's), in any case */
START_TEST(every_kind_by_keras_names) {
    const char *head = "[net]\n[data]\ntrain_images = a\ntrain_labels = b\n[InputLayer]\n"
                       "shape = 8,8,2\n";
    for (int k = MR_LAYER_INPUT + 1; k < MR_LAYER_KIND_COUNT; k++) {
        const mr_layer_ops *ops = mr_layer_ops_for((mr_layer_kind)k);
        const char *names[] = {ops->class_name, ops->keras_name};
        for (int j = 0; j < 2; j++) {
            char text[256];
            snprintf(text, sizeof text, "%s[%s]\n", head, names[j]);
            mr_config cfg;
            mr_error err = {0};
            if (mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK) {
                ck_assert_int_eq(cfg.layers[1].kind, k);
                mr_config_free(&cfg);
            } else { /* a kind with required keys: refused for them, not for its name */
                ck_assert_msg(strstr(err.msg, "missing the required key"), "[%s]: %s", names[j],
                              err.msg);
            }
        }
    }
}
END_TEST

/* A Keras spelling that is wrong: one line, with the file and the line */
START_TEST(keras_spelling_errors) {
    const char *head = "[net]\n[data]\ntrain_images = a\ntrain_labels = b\n[input]\n"
                       "shape = 8,8,1\n";
    const struct {
        const char *tail, *want[2];
    } cases[] = {
        {"[Conv2D]\nfilters = 2\nkernel_size = (3, 3, 3)\n", {"t.cfg:9:", "more than 2"}},
        {"[Conv2D]\nfilters = 2\nkernel_size = 3\nkernel_regularizer = l1(0.01)\n",
         {"t.cfg:10:", "only regularizer here is L2"}},
        {"[Conv2D]\nfilters = 2\nkernel_size = 3\nkernel_regularizer = l2(x)\n",
         {"t.cfg:10:", "not a number"}},
        {"[Conv2D]\nfilters = 2\nkernel_size = 3\nstrides = None\n", {"t.cfg:10:", "'None'"}},
        {"[ZeroPadding2D]\npadding = ((1, 2), (1,))\n",
         {"t.cfg:8:", "((top, bottom), (left, right))"}},
        {"[ZeroPadding2D]\npadding = 1,2,3\n", {"t.cfg:8:", "top,bottom,left,right"}},
        {"[GlobalAveragPooling2D]\n", {"t.cfg:7:", "did you mean [GlobalAveragePooling2D]"}},
        {"[ZeroPading2D]\n", {"t.cfg:7:", "did you mean [ZeroPadding2D]"}},
        {"[Conv2D]\nfilters = 2\nkernel_sise = 3\n", {"t.cfg:9:", "did you mean 'kernel_size'"}},
        {"[MaxPooling2D]\npool_sizes = 3\n", {"t.cfg:8:", "did you mean 'pool_size'"}},
        {"[activation]\nactivation = None\n", {"t.cfg:8:", "'None' is not one of"}},
        {"[Dense]\nunits = \"ten\"\n", {"t.cfg:8:", "'ten' is not an integer"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text, "%s%s", head, cases[i].tail);
        const char *msg = parse_fail(text);
        for (int j = 0; j < 2; j++)
            ck_assert_msg(strstr(msg, cases[i].want[j]), "case %zu: want '%s' in: %s", i,
                          cases[i].want[j], msg);
    }
}
END_TEST

/* Our key `key` of section `sec` as Keras names it (a test's own list). */
static const char *keras_key(const char *sec, const char *key) {
    static const char *const map[][3] = {
        {"conv2d", "size", "kernel_size"},
        {"conv2d", "stride", "strides"},
        {"maxpool", "size", "pool_size"},
        {"maxpool", "stride", "strides"},
        {"avgpool", "size", "pool_size"},
        {"avgpool", "stride", "strides"},
        {"batchnorm", "sync", "synchronized"},
        {"net", "beta1", "beta_1"},
        {"net", "beta2", "beta_2"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i][0], sec) == 0 && strcmp(map[i][1], key) == 0) return map[i][2];
    return key;
}

/* value v of our key `key` of section `sec` in Python's spelling into out */
static void keras_value(const char *sec, const char *key, const char *v, int odd, char *out,
                        size_t n) {
    static const char *const bools[] = {"use_bias", "nesterov", "flip",       "shuffle",
                                        "center",   "sync",     "standardize"};
    static const char *const texts[] = {"activation",   "padding",      "optimizer",
                                        "loss",         "lr_schedule",  "name",
                                        "from",         "input",        "kernel_initializer",
                                        "train_images", "train_labels", "test_images",
                                        "test_labels"};
    int is_bool = strcmp(sec, "layernorm") == 0 && strcmp(key, "scale") == 0;
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++)
        is_bool |= strcmp(key, bools[i]) == 0;
    if (is_bool) {
        snprintf(out, n, "%s", strcmp(v, "1") == 0 ? "True" : "False");
        return;
    }
    int pair = strcmp(key, "size") == 0 || strcmp(key, "stride") == 0;
    if (strcmp(sec, "zeropad") == 0 && strcmp(key, "padding") == 0) {
        snprintf(out, n, strchr(v, ',') ? "(%s)" : "((%s, %s), (%s, %s))", v, v, v, v);
        return;
    }
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (strcmp(key, texts[i]) == 0) {
            snprintf(out, n, odd ? "'%s'" : "\"%s\"", v);
            return;
        }
    if (strcmp(key, "shape") == 0 || pair) {
        /* "28,28,1" as (28, 28, 1) or [28, 28, 1]; one number of a pair as (3, 3); 784 as (784,) */
        char list[256] = "";
        for (const char *p = v; *p; p++) {
            if (*p == ',')
                strcat(list, ", ");
            else
                strncat(list, p, 1);
        }
        if (pair && !strchr(v, ','))
            snprintf(out, n, odd ? "[%s, %s]" : "(%s, %s)", v, v);
        else if (!strchr(v, ','))
            snprintf(out, n, "(%s,)", v);
        else
            snprintf(out, n, odd ? "[%s]" : "(%s)", list);
        return;
    }
    snprintf(out, n, "%s", v);
}

/* A .cfg in Keras's spelling, line for line: sections by their Keras class
 * (or automatic) names, keys by Keras's argument names, values as Python
 * writes them. */
static char *to_keras_spelling(const char *text) {
    size_t cap = strlen(text) * 3 + 1024, o = 0;
    char *out = malloc(cap);
    char sec[64] = "";
    int odd = 0, n_sec = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        p += len + (nl != NULL);
        char *eq = strchr(line, '=');
        odd = !odd;
        if (line[0] == '[') {
            snprintf(sec, sizeof sec, "%.*s", (int)(strcspn(line + 1, "]")), line + 1);
            n_sec++;
            const char *name = sec;
            for (int k = 0; k < MR_LAYER_KIND_COUNT; k++) {
                if (strcmp(mr_layer_kind_name((mr_layer_kind)k), sec) != 0) continue;
                const mr_layer_ops *ops = mr_layer_ops_for((mr_layer_kind)k);
                name = ops ? (n_sec % 3 ? ops->class_name : ops->keras_name) : "InputLayer";
            }
            o += (size_t)snprintf(out + o, cap - o, "[%s]\n", name);
        } else if (line[0] != '#' && eq != NULL) {
            char key[64], val[256];
            snprintf(key, sizeof key, "%.*s", (int)strcspn(line, " ="), line);
            keras_value(sec, key, eq + 1 + strspn(eq + 1, " "), odd, val, sizeof val);
            o += (size_t)snprintf(out + o, cap - o, "%s = %s\n", keras_key(sec, key), val);
        } else {
            o += (size_t)snprintf(out + o, cap - o, "%s\n", line);
        }
    }
    return out;
}

/* Every shipped model in Keras's spelling is the same configuration, field
 * for field, and so the same plan: the same layers, shapes and weights */
START_TEST(keras_spelling_same_model) {
    static const char *const names[] = {"fashion_mlp",  "fashion_mlp_prep", "fashion_cnn",
                                        "fashion_cnn2", "fashion_cnn_bn",   "fashion_resnet20",
                                        "resnet50"};
    static mr_config ours, keras;
    static mr_model_plan p_ours, p_keras;
    mr_error err = {0};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/configs/%s.cfg", names[i]);
        char *path = tu_source_path(rel);
        char *text = tu_read_file(path, NULL);
        ck_assert_msg(text != NULL, "cannot read %s", path);
        char *kt = to_keras_spelling(text);
        ck_assert_msg(mr_config_parse(text, rel, NULL, &ours, &err) == MR_OK, "%s", err.msg);
        ck_assert_msg(mr_config_parse(kt, rel, NULL, &keras, &err) == MR_OK, "%s\n%s", err.msg, kt);
        ck_assert_str_ne(kt, text);
        ck_assert(memcmp(&ours.net, &keras.net, sizeof ours.net) == 0);
        ck_assert(memcmp(&ours.data, &keras.data, sizeof ours.data) == 0);
        ck_assert(memcmp(&ours.augment, &keras.augment, sizeof ours.augment) == 0);
        ck_assert_int_eq(ours.n_layers, keras.n_layers);
        for (int j = 0; j < ours.n_layers; j++)
            ck_assert_msg(memcmp(&ours.layers[j], &keras.layers[j], sizeof ours.layers[j]) == 0,
                          "%s: the layer of line %d differs", rel, ours.layers[j].line);
        ck_assert_msg(mr_model_plan_make(&p_ours, &ours, &err) == MR_OK, "%s", err.msg);
        ck_assert_msg(mr_model_plan_make(&p_keras, &keras, &err) == MR_OK, "%s", err.msg);
        ck_assert_int_eq(p_ours.n_layers, p_keras.n_layers);
        ck_assert_int_eq(p_ours.n_params, p_keras.n_params);
        ck_assert_int_eq(p_ours.n_state, p_keras.n_state);
        for (int j = 0; j < p_ours.n_layers; j++) {
            const mr_layer *a = &p_ours.layers[j], *b = &p_keras.layers[j];
            ck_assert_ptr_eq(a->ops, b->ops);
            ck_assert_str_eq(a->name, b->name);
            ck_assert(memcmp(&a->out, &b->out, sizeof a->out) == 0);
            ck_assert_int_eq(a->n_weights, b->n_weights);
            ck_assert(memcmp(a->w, b->w, sizeof a->w) == 0);
        }
        mr_config_free(&ours), mr_config_free(&keras);
        free(kt), free(text), free(path);
    }
}
END_TEST

/* [net] seed takes what --seed takes, 0 .. INT64_MAX. */
START_TEST(seed_takes_int64) {
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(with_line(1, "seed = 9223372036854775807"), "t.cfg", NULL, &cfg,
                                  &err) == MR_OK,
                  "%s", err.msg);
    ck_assert_int_eq(cfg.net.seed, INT64_MAX);
    mr_config_free(&cfg);
    const char *msg = parse_fail(with_line(1, "seed = 9223372036854775808"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "seed"), "%s", msg);
    msg = parse_fail(with_line(1, "seed = -1"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "out of range"), "%s", msg);
}
END_TEST

START_TEST(wrong_type) {
    const char *msg = parse_fail(with_line(1, "epochs = five"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "epochs") && strstr(msg, "not an integer"),
                  "%s", msg);
    msg = parse_fail(with_line(1, "shuffle = maybe"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "boolean"), "%s", msg);
    msg = parse_fail(with_line(1, "optimizer = adagrad"));
    ck_assert_msg(strstr(msg, "not one of: sgd, adam, rmsprop, adamw"), "%s", msg);
    msg = parse_fail(with_line(1, "learning_rate = 0.01x"));
    ck_assert_msg(strstr(msg, "not a number"), "%s", msg);
    msg = parse_fail(with_line(1, "lr_schedule = step"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "not one of: constant, cosine, steps"),
                  "%s", msg);
}
END_TEST

/* The optimizer keys of Keras 3: rmsprop's rho, weight decay (AdamW's
 * default where the file gives none), and one kind of clipping at most. */
START_TEST(optimizer_keys) {
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(with_line(1, "optimizer = adamw"), "t.cfg", NULL, &cfg, &err),
                     MR_OK);
    ck_assert_int_eq(cfg.net.optimizer, MR_OPTIMIZER_ADAMW);
    ck_assert_float_eq(cfg.net.weight_decay, MR_ADAMW_WEIGHT_DECAY);
    mr_config_free(&cfg);
    /* given, even 0, it is the file's; the key may come before the optimizer */
    ck_assert_int_eq(mr_config_parse(with_line(1, "weight_decay = 0\noptimizer = adamw"), "t.cfg",
                                     NULL, &cfg, &err),
                     MR_OK);
    ck_assert_float_eq(cfg.net.weight_decay, 0.0f);
    mr_config_free(&cfg);
    ck_assert_int_eq(mr_config_parse(with_line(1, "optimizer = rmsprop\nrho = 0.8\nmomentum = "
                                                  "0.5\nweight_decay = 0.01\nclipnorm = 2"),
                                     "t.cfg", NULL, &cfg, &err),
                     MR_OK);
    ck_assert_int_eq(cfg.net.optimizer, MR_OPTIMIZER_RMSPROP);
    ck_assert_float_eq(cfg.net.rho, 0.8f);
    ck_assert_float_eq(cfg.net.momentum, 0.5f);
    ck_assert_float_eq(cfg.net.weight_decay, 0.01f);
    ck_assert_float_eq(cfg.net.clipnorm, 2.0f);
    ck_assert_float_eq(cfg.net.global_clipnorm, 0.0f);
    mr_config_free(&cfg);
    /* defaults: Keras's rho, no decay (adam), no clipping */
    ck_assert_int_eq(mr_config_parse(with_line(1, "optimizer = adam"), "t.cfg", NULL, &cfg, &err),
                     MR_OK);
    ck_assert_float_eq(cfg.net.rho, 0.9f);
    ck_assert_float_eq(cfg.net.weight_decay, 0.0f);
    ck_assert_float_eq(cfg.net.clipvalue, 0.0f);
    mr_config_free(&cfg);
    const char *msg = parse_fail(with_line(1, "clipnorm = 1\nclipvalue = 0.5"));
    ck_assert_msg(strstr(msg, "t.cfg:1:") && strstr(msg, "give one of them at most"), "%s", msg);
    msg = parse_fail(with_line(1, "global_clipnorm = 1\nclipnorm = 1"));
    ck_assert_msg(strstr(msg, "give one of them at most"), "%s", msg);
    msg = parse_fail(with_line(1, "weight_decay = 1"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "out of range"), "%s", msg);
    msg = parse_fail(with_line(1, "clipvalue = -1"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "out of range"), "%s", msg);
}
END_TEST

/* class_weight: a list of weights >= 0, not all 0 (one per class is the
 * model's check: test_model.c) */
START_TEST(class_weight_key) {
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(with_line(1, "class_weight = 1, 0.5,2,0,1,1,1,1,1,3.5"),
                                     "t.cfg", NULL, &cfg, &err),
                     MR_OK);
    ck_assert_int_eq(cfg.net.class_weight.n, 10);
    ck_assert_float_eq(cfg.net.class_weight.v[1], 0.5f);
    ck_assert_float_eq(cfg.net.class_weight.v[9], 3.5f);
    mr_config_free(&cfg);
    ck_assert_int_eq(mr_config_parse(base_cfg, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_int_eq(cfg.net.class_weight.n, 0);
    mr_config_free(&cfg);
    const char *msg = parse_fail(with_line(1, "class_weight = 1, -0.5"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "-0.5 is out of range [0"), "%s", msg);
    msg = parse_fail(with_line(1, "class_weight = 0, 0,0"));
    ck_assert_msg(strstr(msg, "t.cfg:1:") && strstr(msg, "class_weight: every weight is 0"), "%s",
                  msg);
    msg = parse_fail(with_line(1, "class_weight = 1 2"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "not a comma-separated list"), "%s", msg);
}
END_TEST

/* lr_schedule = steps and its two lists: parsed, and the combinations
 * that cannot mean anything refused with one line. */
START_TEST(steps_schedule_keys) {
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(with_line(1, "lr_schedule = steps\nlr_boundaries = 30, "
                                                  "60.5\nlr_factors = 0.1,0.01"),
                                     "t.cfg", NULL, &cfg, &err),
                     MR_OK);
    ck_assert_int_eq(cfg.net.lr_schedule, MR_LR_SCHEDULE_STEPS);
    ck_assert_int_eq(cfg.net.lr_boundaries.n, 2);
    ck_assert_float_eq(cfg.net.lr_boundaries.v[1], 60.5f);
    ck_assert_float_eq(cfg.net.lr_factors.v[0], 0.1f);
    mr_config_free(&cfg);
    const char *msg = parse_fail(with_line(1, "lr_schedule = steps"));
    ck_assert_msg(strstr(msg, "needs lr_boundaries") && strstr(msg, "0 and 0 given"), "%s", msg);
    msg = parse_fail(with_line(1, "lr_schedule = steps\nlr_boundaries = 3\nlr_factors = 1,2"));
    ck_assert_msg(strstr(msg, "1 and 2 given"), "%s", msg);
    msg = parse_fail(with_line(1, "lr_schedule = steps\nlr_boundaries = 3,3\nlr_factors = 1,2"));
    ck_assert_msg(strstr(msg, "must increase: 3 after 3"), "%s", msg);
    msg = parse_fail(with_line(1, "lr_boundaries = 3\nlr_factors = 0.1"));
    ck_assert_msg(strstr(msg, "go with lr_schedule = steps"), "%s", msg);
    msg = parse_fail(with_line(1, "lr_schedule = steps\nlr_boundaries = 3;4"));
    ck_assert_msg(strstr(msg, "t.cfg:3:") && strstr(msg, "not a comma-separated list"), "%s", msg);
    msg = parse_fail(with_line(1, "lr_factors = 0.1, 0"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "0 is out of range (0"), "%s", msg);
    msg = parse_fail(with_line(1, "lr_boundaries = 1,2,3,4,5,6,7,8,9"));
    ck_assert_msg(strstr(msg, "more than 8 numbers"), "%s", msg);
}
END_TEST

/* kernel_l2 on [dense] and [conv2d]: parsed; [0, 1); not on other layers */
START_TEST(kernel_l2_key) {
    mr_config cfg;
    mr_error err = {0};
    const char *text = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4,4,1\n"
                       "[conv2d]\nfilters=2\nsize=3\nkernel_l2=1e-4\n[flatten]\n[dense]\n"
                       "units=2\nkernel_l2=0.5\n";
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_float_eq(cfg.layers[1].kernel_l2, 1e-4f);
    ck_assert_float_eq(cfg.layers[2].kernel_l2, 0.0f);
    ck_assert_float_eq(cfg.layers[3].kernel_l2, 0.5f);
    mr_config_free(&cfg);
    const char *msg = parse_fail("[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\n"
                                 "shape=4\n[dense]\nunits=2\nkernel_l2=1\n");
    ck_assert_msg(strstr(msg, "t.cfg:9:") && strstr(msg, "out of range"), "%s", msg);
    msg = parse_fail("[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\n"
                     "shape=4\n[dropout]\nrate=0.1\nkernel_l2=0.1\n");
    ck_assert_msg(strstr(msg, "t.cfg:9:") && strstr(msg, "kernel_l2"), "%s", msg);
}
END_TEST

/* [layernorm]: defaults, Keras's section names, center/scale, epsilon
 * above 0, and keys of other kinds refused with their line. */
START_TEST(layernorm_keys) {
    mr_config cfg;
    mr_error err = {0};
    const char *text = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4,4,2\n"
                       "[layernorm]\n[LayerNormalization]\nepsilon=1e-5\ncenter=0\n"
                       "[layer_normalization]\nscale=0\n[flatten]\n[dense]\nunits=2\n";
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    for (int i = 1; i <= 3; i++)
        ck_assert_int_eq(cfg.layers[i].kind, MR_LAYER_LAYERNORM);
    ck_assert_float_eq(cfg.layers[1].epsilon, 1e-3f);
    ck_assert_int_eq(cfg.layers[1].center, 1);
    ck_assert_int_eq(cfg.layers[1].scale, 1);
    ck_assert_float_eq(cfg.layers[2].epsilon, 1e-5f);
    ck_assert_int_eq(cfg.layers[2].center, 0);
    ck_assert_int_eq(cfg.layers[2].scale, 1);
    ck_assert_int_eq(cfg.layers[3].center, 1);
    ck_assert_int_eq(cfg.layers[3].scale, 0);
    ck_assert_str_eq(mr_layer_kind_name(MR_LAYER_LAYERNORM), "layernorm");
    mr_config_free(&cfg);
    const char *head = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4\n"
                       "[layernorm]\n";
    static const struct {
        const char *line, *want;
    } bad[] = {
        {"epsilon=0", "out of range (0"},
        {"epsilon=-1e-3", "out of range"},
        {"center=maybe", "center"},
        {"momentum=0.9", "unknown key 'momentum' in [layernorm]"},
        {"axis=1", "'axis'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s%s\n", head, bad[i].line);
        const char *msg = parse_fail(buf);
        ck_assert_msg(strstr(msg, "t.cfg:8:") && strstr(msg, bad[i].want), "%s: %s", bad[i].line,
                      msg);
    }
}
END_TEST

/* top_k and per_class: defaults off; top_k below 0 names its line; per_class
 * needs a validation or test set (top_k below the classes: test_model.c) */
START_TEST(metrics_keys) {
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(base_cfg, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_int_eq(cfg.net.top_k, 0);
    ck_assert_int_eq(cfg.net.per_class, 0);
    mr_config_free(&cfg);
    ck_assert_int_eq(mr_config_parse(with_line(1, "top_k = 5\nper_class = 1\nvalidation_split = "
                                                  "0.1"),
                                     "t.cfg", NULL, &cfg, &err),
                     MR_OK);
    ck_assert_int_eq(cfg.net.top_k, 5);
    ck_assert_int_eq(cfg.net.per_class, 1);
    mr_config_free(&cfg);
    /* a test set alone is enough */
    ck_assert_int_eq(mr_config_parse("[net]\nper_class = 1\n[data]\ntrain_images = a\n"
                                     "train_labels = b\ntest_images = c\ntest_labels = d\n"
                                     "[input]\nshape = 4\n[dense]\nunits = 3\n"
                                     "activation = softmax\n",
                                     "t.cfg", NULL, &cfg, &err),
                     MR_OK);
    mr_config_free(&cfg);
    const char *msg = parse_fail(with_line(1, "top_k = -1"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "top_k"), "%s", msg);
    msg = parse_fail(with_line(1, "per_class = 1"));
    ck_assert_msg(strstr(msg, "per_class = 1 has nothing to report on"), "%s", msg);
}
END_TEST

/* save_best_only names a monitor; a val_ one needs a validation set */
START_TEST(save_best_only_key) {
    const char *msg = parse_fail(with_line(1, "save_best_only = val_accuracy"));
    ck_assert_msg(strstr(msg, "save_best_only = val_accuracy needs a validation set"), "%s", msg);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(with_line(1, "save_best_only = val_loss\nvalidation_split = "
                                                  "0.1"),
                                     "t.cfg", NULL, &cfg, &err),
                     MR_OK);
    ck_assert_int_eq(cfg.net.save_best_only, MR_MONITOR_VAL_LOSS);
    mr_config_free(&cfg);
    ck_assert_int_eq(
        mr_config_parse(with_line(1, "save_best_only = accuracy"), "t.cfg", NULL, &cfg, &err),
        MR_OK);
    ck_assert_int_eq(cfg.net.save_best_only, MR_MONITOR_ACCURACY);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(out_of_range) {
    const char *msg = parse_fail(with_line(1, "validation_split = 1.0"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "out of range"), "%s", msg);
    msg = parse_fail(with_line(1, "batch = 0"));
    ck_assert_msg(strstr(msg, "out of range"), "%s", msg);
    msg = parse_fail(with_line(1, "learning_rate = 0"));
    ck_assert_msg(strstr(msg, "out of range (0"), "%s", msg);
    msg = parse_fail(with_line(1, "lr_alpha = 1.5"));
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "out of range"), "%s", msg);
    msg = parse_fail(
        "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4\n[dense]\nunits=-3\n");
    ck_assert_msg(strstr(msg, "t.cfg:8:") && strstr(msg, "out of range"), "%s", msg);
}
END_TEST

START_TEST(missing_input) {
    const char *msg =
        parse_fail("[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[dense]\nunits=3\n");
    ck_assert_msg(strstr(msg, "t.cfg:5:") && strstr(msg, "[input]"), "%s", msg);
    msg = parse_fail("[net]\n[data]\ntrain_images=a\ntrain_labels=b\n");
    ck_assert_msg(strstr(msg, "missing section [input]"), "%s", msg);
    msg =
        parse_fail("[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=3\n[dense]\nunits=1\n");
    ck_assert_msg(strstr(msg, "missing section [net]"), "%s", msg);
}
END_TEST

START_TEST(missing_required_key) {
    const char *msg =
        parse_fail("[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4\n[dense]\n"
                   "activation=relu\n");
    ck_assert_msg(strstr(msg, "t.cfg:7:") && strstr(msg, "'units'"), "%s", msg);
    /* train_labels may be left out (train_images a folder of class folders:
     * the loader checks that), train_images may not */
    msg = parse_fail("[net]\n[data]\ntrain_labels=a\n[input]\nshape=4\n[dense]\nunits=1\n");
    ck_assert_msg(strstr(msg, "t.cfg:2:") && strstr(msg, "train_images"), "%s", msg);
}
END_TEST

/* val_labels needs val_images (val_images alone may be a folder of class
 * folders, which the loader checks), and they are not given beside
 * validation_split (two validation sets); relative to the .cfg's folder. */
START_TEST(validation_files) {
    const char *msg =
        parse_fail("[net]\n[data]\ntrain_images=a\ntrain_labels=b\nval_labels=c\n[input]\n"
                   "shape=4\n[dense]\nunits=1\n");
    ck_assert_msg(strstr(msg, "t.cfg:1: [data] val_labels without val_images"), "%s", msg);
    msg = parse_fail("[net]\n[data]\ntrain_images=a\ntrain_labels=b\ntest_labels=c\n[input]\n"
                     "shape=4\n[dense]\nunits=1\n");
    ck_assert_msg(strstr(msg, "t.cfg:1: [data] test_labels without test_images"), "%s", msg);
    msg = parse_fail("[net]\nvalidation_split=0.1\n[data]\ntrain_images=a\ntrain_labels=b\n"
                     "val_images=c\nval_labels=d\n[input]\nshape=4\n[dense]\nunits=1\n");
    ck_assert_msg(strstr(msg, "validation_split and [data] val_images both name a validation "
                              "set: give one"),
                  "%s", msg);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse("[net]\n[data]\ntrain_images=a\ntrain_labels=b\n"
                                     "val_images=c\nval_labels=d\n[input]\nshape=4\n[dense]\n"
                                     "units=1\n",
                                     "t.cfg", "base", &cfg, &err),
                     MR_OK);
    ck_assert_str_eq(cfg.data.val_images, "base/c");
    ck_assert_str_eq(cfg.data.val_labels, "base/d");
    mr_config_free(&cfg);
}
END_TEST

START_TEST(duplicates_and_syntax) {
    const char *msg = parse_fail(with_line(2, "[net]"));
    ck_assert_msg(strstr(msg, "t.cfg:3:") && strstr(msg, "twice"), "%s", msg);
    msg = parse_fail(with_line(1, "batch = 8"));
    ck_assert_msg(strstr(msg, "t.cfg:3:") && strstr(msg, "twice"), "%s", msg);
    msg = parse_fail(with_line(1, "this line has no equals sign"));
    ck_assert_msg(strstr(msg, "t.cfg:2:"), "%s", msg);
    msg = parse_fail(with_line(8, "units = 3")); /* [flatten] takes no keys */
    ck_assert_msg(strstr(msg, "t.cfg:9:") && strstr(msg, "takes no keys"), "%s", msg);
    msg = parse_fail(with_line(6, "shape = 28,28"));
    ck_assert_msg(strstr(msg, "H,W,C or F"), "%s", msg);
    msg = parse_fail(with_line(4, "test_labels = t.idx"));
    ck_assert_msg(strstr(msg, "test_images"), "%s", msg);
}
END_TEST

START_TEST(load_file_and_errors) {
    const char *dir = tu_tmpdir();
    char *p = tu_write_text(dir, "m.cfg", base_cfg);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_load(p, &cfg, &err), MR_OK);
    /* relative data paths resolve against the .cfg's folder */
    char want[2048];
    snprintf(want, sizeof want, "%s/a.idx", dir);
    ck_assert_str_eq(cfg.data.train_images, want);
    mr_config_free(&cfg);
    mr_error_clear(&err);
    char missing[2048];
    snprintf(missing, sizeof missing, "%s/nope.cfg", dir);
    ck_assert_int_eq(mr_config_load(missing, &cfg, &err), MR_ERR_IO);
    ck_assert_msg(strstr(err.msg, missing) && strstr(err.msg, "No such file"), "%s", err.msg);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_config_load(dir, &cfg, &err), MR_ERR_IO);
    /* a folder is said to be one, not "larger than 1 MiB" */
    ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, "is a directory") &&
                      !strstr(err.msg, "MiB"),
                  "%s", err.msg);
    free(p);
}
END_TEST

/* A UTF-8 byte order mark before [net] is skipped, as inih does. */
START_TEST(bom_is_skipped) {
    char text[1024];
    snprintf(text, sizeof text, "\xEF\xBB\xBF%s", base_cfg);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(cfg.net.batch, 16);
    ck_assert_int_eq(cfg.layers[1].line, 8); /* line numbers unchanged */
    mr_config_free(&cfg);
    /* only at the very start: elsewhere it is text like any other */
    const char *msg = parse_fail(with_line(1, "\xEF\xBB\xBF[data]"));
    ck_assert_msg(strstr(msg, "t.cfg:2:"), "%s", msg);
}
END_TEST

/* "[dropout" without its ']' is reported on its own line. */
START_TEST(unclosed_header) {
    const char *msg = parse_fail(with_line(11, "[dropout\nrate = 0.5"));
    ck_assert_msg(strstr(msg, "t.cfg:12:") && strstr(msg, "[dropout") && strstr(msg, "']'") &&
                      !strstr(msg, "unknown key"),
                  "%s", msg);
}
END_TEST

/* One rule for comments after a value, for every key: ';' or '#'
 * after a blank starts a comment; without the blank it is part of the value. */
START_TEST(inline_comments) {
    const char *text = "[net]  # training\n"
                       "batch = 16  # per replica\n"
                       "epochs = 3 ; three\n"
                       "learning_rate = 1/100\t# a fraction\n"
                       "optimizer = sgd # plain\n"
                       "checkpoint = ck/run.h5  # every epoch\n"
                       "checkpoint_every = 2 steps # often\n"
                       "[data] ; files\n"
                       "train_images = a#1.idx\n"
                       "train_labels = b.idx;x ; kept: no blank before the ';'\n"
                       "[input]\nshape = 28,28,1 # H,W,C\n[flatten]\n"
                       "[dense]\nunits = 10 #\nactivation = softmax#\n";
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) != MR_OK, "%s", "softmax#");
    ck_assert_msg(strstr(err.msg, "t.cfg:16:") && strstr(err.msg, "softmax#"), "%s", err.msg);
    mr_error_clear(&err);
    char good[2048];
    snprintf(good, sizeof good, "%.*s", (int)(strstr(text, "softmax#") - text), text);
    strcat(good, "softmax # the output\n");
    ck_assert_msg(mr_config_parse(good, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(cfg.net.batch, 16);
    ck_assert_int_eq(cfg.net.epochs, 3);
    ck_assert_float_eq_tol(cfg.net.learning_rate, 0.01f, 1e-9f);
    ck_assert_int_eq(cfg.net.optimizer, MR_OPTIMIZER_SGD);
    ck_assert_str_eq(cfg.net.checkpoint, "ck/run.h5");
    ck_assert_int_eq(cfg.net.checkpoint_every.n, 2);
    ck_assert_int_eq(cfg.net.checkpoint_every.steps, 1);
    ck_assert_str_eq(cfg.data.train_images, "a#1.idx");
    ck_assert_str_eq(cfg.data.train_labels, "b.idx;x");
    ck_assert_int_eq(cfg.layers[0].shape[2], 1);
    ck_assert_int_eq(cfg.layers[2].units, 10);
    ck_assert_int_eq(cfg.layers[2].activation, MR_ACTIVATION_SOFTMAX);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(reference_lists_every_key) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mr_config_write_reference(f, 1);
    fclose(f);
    const char *keys[] = {"`batch`",
                          "`validation_split`",
                          "`warmup_epochs`",
                          "`lr_schedule`",
                          "`lr_alpha`",
                          "`accumulate`",
                          "`scale`",
                          "`standardize`",
                          "`units`",
                          "`filters`",
                          "`rate`",
                          "`sync`",
                          "`[flatten]`",
                          "`flip`",
                          "`[GlobalAveragePooling2D]`",
                          "`kernel_size`",
                          "`kernel_regularizer`"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(buf, keys[i]) != NULL, "missing %s", keys[i]);
    free(buf);
}
END_TEST

/* docs/usage.md's .cfg table is the key table's output, verbatim
 * (regenerate with `mirrored_train --help-config=markdown`). */
START_TEST(docs_table_matches_key_table) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mr_config_write_reference(f, 1);
    fclose(f);
    char *path = tu_source_path("docs/usage.md");
    char *doc = tu_read_file(path, NULL);
    ck_assert_msg(doc != NULL, "cannot read %s", path);
    ck_assert_msg(strstr(doc, buf) != NULL,
                  "docs/usage.md's .cfg table differs from the key table; paste the output of "
                  "`mirrored_train --help-config=markdown`");
    free(doc), free(path), free(buf);
}
END_TEST

int main(void) {
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, parses_defaults);
    tcase_add_test(tc, parses_all_layer_kinds);
    tcase_add_test(tc, unknown_key_suggests);
    tcase_add_test(tc, unknown_section_suggests);
    tcase_add_test(tc, normalization_keys);
    tcase_add_test(tc, no_data_section);
    tcase_add_test(tc, keras_names);
    tcase_add_test(tc, keras_spellings);
    tcase_add_test(tc, every_kind_by_keras_names);
    tcase_add_test(tc, keras_spelling_errors);
    tcase_add_test(tc, keras_spelling_same_model);
    tcase_add_test(tc, seed_takes_int64);
    tcase_add_test(tc, wrong_type);
    tcase_add_test(tc, optimizer_keys);
    tcase_add_test(tc, steps_schedule_keys);
    tcase_add_test(tc, save_best_only_key);
    tcase_add_test(tc, metrics_keys);
    tcase_add_test(tc, kernel_l2_key);
    tcase_add_test(tc, layernorm_keys);
    tcase_add_test(tc, out_of_range);
    tcase_add_test(tc, missing_input);
    tcase_add_test(tc, missing_required_key);
    tcase_add_test(tc, validation_files);
    tcase_add_test(tc, duplicates_and_syntax);
    tcase_add_test(tc, load_file_and_errors);
    tcase_add_test(tc, bom_is_skipped);
    tcase_add_test(tc, unclosed_header);
    tcase_add_test(tc, inline_comments);
    tcase_add_test(tc, reference_lists_every_key);
    tcase_add_test(tc, docs_table_matches_key_table);
    tcase_add_test(tc, layer_references);
    tcase_add_test(tc, class_weight_key);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
