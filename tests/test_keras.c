/* test_keras.c: the model in Keras's formats: the Sequential config (the
 * classes and keys Keras writes), the legacy .h5 layout written and read
 * back bit for bit (weights, BN state, optimizer slots), the archive's
 * weights file, and every mismatch between a file and a model named; a
 * residual graph as Keras's Functional, in both forms. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "models/keras.h"
#include "runtime/rng.h"
#include "runtime/dmem_impl.h"
#include "backends/backends.h"
#include "tests/testutil.h"

/* Every layer kind Keras's formats need to describe. */
static const char *all_kinds =
    "[net]\nbatch=4\noptimizer=adam\n%s\n[data]\ntrain_images=a\ntrain_labels=b\n"
    "[input]\nshape=8,8,1\n"
    "[conv2d]\nfilters=4\nsize=3\npadding=same\nuse_bias=0\n"
    "[batchnorm]\n[activation]\nactivation=relu\n[maxpool]\nsize=2\n"
    "[conv2d]\nfilters=3\nsize=3\nstride=1\nactivation=relu\n[avgpool]\nsize=2\n"
    "[flatten]\n[dense]\nunits=%d\nactivation=relu\n[dropout]\nrate=0.3\n"
    "[dense]\nunits=4\nactivation=softmax\n";

/* The context models are built on: the test's CPU context, or one whose
 * memory is not host memory, so that files are written and read through
 * the model's host staging as on a GPU. */
static mr_backend *model_be;

static void build(mr_config *cfg, mr_model *m, const char *extra, int units) {
    char text[4096];
    snprintf(text, sizeof text, all_kinds, extra, units);
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(m, model_be ? model_be : tu_cpu_backend(), cfg, 4, 0, &err) ==
                      MR_OK,
                  "%s", err.msg);
}

/* CPU device memory is host memory: the tests read and write it in place. */
static float *host(mr_dfloat *p) {
    return mr_dfloat_ptr(p);
}

/* Random weights, state and slots (not the initial ones: a read that
 * skipped a weight would go unnoticed with zeros). */
static void randomise(mr_model *m, uint64_t key) {
    mr_rng_uniform(key, 1, 0, 0, -1.0f, 1.0f, host(m->params), m->n_params);
    if (m->n_state) mr_rng_uniform(key, 2, 0, 0, 0.5f, 2.0f, host(m->state), m->n_state);
    for (int s = 0; s < 2; s++)
        if (m->slots[s])
            mr_rng_uniform(key, 3 + s, 0, 0, 0.0f, 1.0f, host(m->slots[s]), m->n_params);
}

static const char *dir_path(const char *name) {
    static char dir[4096] = "", p[8192];
    if (!dir[0]) snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void write_h5(const char *path, const mr_model *m) {
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_create(&h, path, &err), MR_OK);
    ck_assert_msg(mr_keras_write_h5(&h, m, 77, 0.002f, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
}

/* A Keras 3 weights file (iteration 5, learning rate 0.01). */
static void write_archive_weights(const char *path, const mr_model *m) {
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_create(&h, path, &err), MR_OK);
    ck_assert_msg(mr_keras_write_archive_weights(&h, m, 5, 0.01f, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
}

START_TEST(model_config_as_keras_writes_it) {
    mr_config cfg;
    mr_model m;
    build(&cfg, &m, "", 16);
    char *j = mr_keras_model_config(&m, MR_KERAS_LEGACY_H5, 0.001f);
    ck_assert_ptr_nonnull(j);
    const char *classes[] = {
        "\"Sequential\"", "\"InputLayer\"",   "\"Conv2D\"",  "\"BatchNormalization\"",
        "\"Activation\"", "\"MaxPooling2D\"", "\"Conv2D\"",  "\"AveragePooling2D\"",
        "\"Flatten\"",    "\"Dense\"",        "\"Dropout\"", "\"Dense\""};
    const char *p = j;
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        p = strstr(p, classes[i]);
        ck_assert_msg(p != NULL, "%s missing or out of order in %s", classes[i], j);
        p++;
    }
    const char *keys[] = {"\"batch_shape\": [null, 8, 8, 1]",
                          "\"name\": \"conv2d\"",
                          "\"kernel_size\": [3, 3]",
                          "\"padding\": \"same\"",
                          "\"use_bias\": false",
                          "\"name\": \"batch_normalization\"",
                          "\"momentum\": 0.99",
                          "\"epsilon\": 0.001",
                          "\"pool_size\": [2, 2]",
                          "\"strides\": [2, 2]",
                          "\"name\": \"conv2d_1\"",
                          "\"rate\": 0.3",
                          "\"units\": 4, \"activation\": \"softmax\"",
                          "\"build_input_shape\": [null, 8, 8, 1]"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(j, keys[i]) != NULL, "no %s in %s", keys[i], j);
    ck_assert_ptr_null(strstr(j, "\"module\": \"keras.layers\"")); /* legacy form: no modules */
    free(j);
    /* the archive form: modules, build configs (input shapes), compile config */
    j = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, 0.001f);
    const char *akeys[] = {"{\"module\": \"keras\", \"class_name\": \"Sequential\"",
                           "\"module\": \"keras.layers\", \"class_name\": \"Dense\"",
                           "\"build_config\": {\"input_shape\": [null, 8, 8, 1]}",
                           "\"build_config\": {\"input_shape\": [null, 3]}",
                           "\"compile_config\": {\"optimizer\": {\"module\": \"keras.optimizers\", "
                           "\"class_name\": \"Adam\"",
                           "\"loss\": \"sparse_categorical_crossentropy\""};
    for (size_t i = 0; i < sizeof akeys / sizeof akeys[0]; i++)
        ck_assert_msg(strstr(j, akeys[i]) != NULL, "no %s in %s", akeys[i], j);
    free(j);
    j = mr_keras_training_config(&m, 0.001f);
    ck_assert_msg(strstr(j, "\"optimizer_config\": {\"class_name\": \"Adam\", \"config\": "
                            "{\"name\": \"adam\", \"learning_rate\": 0.001") &&
                      strstr(j, "\"beta_2\": 0.999") && strstr(j, "\"epsilon\": 1e-07") &&
                      strstr(j, "\"metrics\": [\"accuracy\"]"),
                  "%s", j);
    free(j);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* from_logits and label smoothing: the loss object keras.losses.serialize
 * writes (checked against Keras 3.15's output; Keras loads it) */
START_TEST(loss_object_with_from_logits) {
    const char *text = "[net]\nloss=categorical_crossentropy\nfrom_logits=1\nlabel_smoothing=0.25\n"
                       "[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=3\n[dense]\n"
                       "units=2\n";
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err) == MR_OK, "%s", err.msg);
    const char *want = "\"class_name\": \"CategoricalCrossentropy\", \"config\": {\"name\": "
                       "\"categorical_crossentropy\", \"reduction\": \"sum_over_batch_size\", "
                       "\"from_logits\": true, \"label_smoothing\": 0.25, \"axis\": -1}";
    char *j = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, 0.001f);
    ck_assert_msg(strstr(j, "\"loss\": {\"module\": \"keras.losses\", ") && strstr(j, want) &&
                      strstr(j, "\"registered_name\": null}, \"loss_weights\""),
                  "%s", j);
    free(j);
    j = mr_keras_training_config(&m, 0.001f);
    ck_assert_msg(strstr(j, "\"loss\": {\"class_name\"") && strstr(j, want), "%s", j);
    free(j);
    mr_model_free(&m);
    mr_config_free(&cfg);
    text = "[net]\nfrom_logits=1\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=3\n"
           "[dense]\nunits=2\n";
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err) == MR_OK, "%s", err.msg);
    j = mr_keras_training_config(&m, 0.001f);
    ck_assert_msg(strstr(j, "\"class_name\": \"SparseCategoricalCrossentropy\"") &&
                      strstr(j, "\"from_logits\": true, \"ignore_class\": null}}"),
                  "%s", j);
    free(j);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* Multi-label binary_crossentropy (3 sigmoid outputs): the compile config's metric is
 * "binary_accuracy" (Keras's "accuracy" on 3 outputs would be the argmax's); one output keeps
 * "accuracy" (Keras's binary accuracy there). Checked by hand: Keras 3.15's evaluate of such an
 * export gives mirrored_eval's test loss and accuracy (0.5706, 0.7583), where "accuracy" gave
 * the argmax's 0.66. */
START_TEST(multi_label_metric) {
    const char *text = "[net]\nloss=binary_crossentropy\n[data]\ntrain_images=a\ntrain_labels=b\n"
                       "[input]\nshape=3\n[dense]\nunits=%d\nactivation=sigmoid\n";
    for (int units = 1; units <= 3; units += 2) {
        char t[512];
        snprintf(t, sizeof t, text, units);
        mr_config cfg;
        mr_model m;
        mr_error err = {0};
        ck_assert_int_eq(mr_config_parse(t, "t.cfg", NULL, &cfg, &err), MR_OK);
        ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err) == MR_OK, "%s",
                      err.msg);
        const char *want =
            units > 1 ? "\"metrics\": [\"binary_accuracy\"]" : "\"metrics\": [\"accuracy\"]";
        char *j = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, 0.001f);
        ck_assert_msg(strstr(j, "\"loss\": \"binary_crossentropy\"") && strstr(j, want), "%s", j);
        free(j);
        j = mr_keras_training_config(&m, 0.001f);
        ck_assert_msg(strstr(j, want), "%s", j);
        free(j);
        mr_model_free(&m);
        mr_config_free(&cfg);
    }
}
END_TEST

/* Regression losses under Keras's names (mean_squared_error, mean_absolute_error, huber) and
 * its mae metric; a softmax last layer with mse keeps "accuracy" (class ids). */
START_TEST(regression_loss_names) {
    const struct {
        const char *loss, *act, *want_loss, *want_metric;
    } cases[] = {
        {"mse", "linear", "mean_squared_error", "mae"},
        {"mae", "relu", "mean_absolute_error", "mae"},
        {"huber", "linear", "huber", "mae"},
        {"mse", "softmax", "mean_squared_error", "accuracy"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char t[512], want[2][96];
        snprintf(t, sizeof t,
                 "[net]\nloss=%s\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=3\n"
                 "[dense]\nunits=2\nactivation=%s\n",
                 cases[i].loss, cases[i].act);
        snprintf(want[0], sizeof want[0], "\"loss\": \"%s\"", cases[i].want_loss);
        snprintf(want[1], sizeof want[1], "\"metrics\": [\"%s\"]", cases[i].want_metric);
        mr_config cfg;
        mr_model m;
        mr_error err = {0};
        ck_assert_int_eq(mr_config_parse(t, "t.cfg", NULL, &cfg, &err), MR_OK);
        ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err) == MR_OK, "%s",
                      err.msg);
        char *j = mr_keras_training_config(&m, 0.001f);
        ck_assert_msg(strstr(j, want[0]) && strstr(j, want[1]), "case %zu: %s", i, j);
        free(j);
        mr_model_free(&m);
        mr_config_free(&cfg);
    }
}
END_TEST

/* elu and leaky_relu under Keras's names (Keras loads them:
 * bench/keras_activations.py) */
START_TEST(activations_keras_names) {
    const char *text = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4,4,1\n"
                       "[conv2d]\nfilters=2\nsize=3\nactivation=elu\n[flatten]\n[dense]\nunits=3\n"
                       "activation=leaky_relu\n[dense]\nunits=2\nactivation=softmax\n";
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err) == MR_OK, "%s", err.msg);
    char *j = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, 0.001f);
    ck_assert_msg(strstr(j, "\"activation\": \"elu\"") &&
                      strstr(j, "\"activation\": \"leaky_relu\""),
                  "%s", j);
    free(j);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* The optimizer and initializers as Keras 3.15's get_config writes them
 * (bench/keras_optimizers.py has Keras load them): RMSprop with its
 * settings, weight decay and clipnorm set, the other two clips null; He
 * initializers by class; and the optimizer's variables in an .h5 in
 * Keras's order, RMSprop's slot by slot (every velocity, then every
 * momentum). */
START_TEST(optimizer_and_initializers_as_keras_writes_them) {
    const char *text = "[net]\noptimizer=rmsprop\nrho=0.8\nmomentum=0.5\nweight_decay=0.01\n"
                       "clipnorm=1\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\n"
                       "shape=4,4,1\n[conv2d]\nfilters=2\nsize=3\nkernel_initializer=he_normal\n"
                       "[flatten]\n[dense]\nunits=2\nactivation=softmax\n"
                       "kernel_initializer=he_uniform\nkernel_l2=0.0001\n";
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err) == MR_OK, "%s", err.msg);
    char *j = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, 0.001f);
    const char *want[] = {
        "\"class_name\": \"RMSprop\", \"config\": {\"name\": \"rmsprop\", \"learning_rate\": "
        "0.001, \"weight_decay\": 0.01, \"clipnorm\": 1.0, \"global_clipnorm\": null, "
        "\"clipvalue\": null, ",
        "\"rho\": 0.8, \"momentum\": 0.5, \"epsilon\": 1e-07, \"centered\": false}",
        "\"kernel_initializer\": {\"module\": \"keras.initializers\", \"class_name\": "
        "\"HeNormal\", \"config\": {\"seed\": null",
        "\"class_name\": \"HeUniform\"",
        "\"kernel_regularizer\": {\"module\": \"keras.regularizers\", \"class_name\": \"L2\", "
        "\"config\": {\"l2\": 0.0001}, \"registered_name\": null}, \"bias_regularizer\": null",
        "\"kernel_regularizer\": null, \"bias_regularizer\": null, \"activity_regularizer\": null"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(j, want[i]), "missing %s in %s", want[i], j);
    free(j);
    const char *path = dir_path("rms.h5");
    write_h5(path, &m);
    mr_h5 h;
    ck_assert_int_eq(mr_h5_open(&h, path, &err), MR_OK);
    hid_t ow;
    ck_assert_int_eq(mr_h5_open_group(&h, h.file, "optimizer_weights", &ow, &err), MR_OK);
    char **names;
    int n;
    ck_assert_int_eq(mr_h5_read_attr_strs(&h, ow, "weight_names", &names, &n, &err), MR_OK);
    const char *order[] = {"rmsprop/iteration",
                           "rmsprop/learning_rate",
                           "rmsprop/sequential_conv2d_kernel_velocity",
                           "rmsprop/sequential_conv2d_bias_velocity",
                           "rmsprop/sequential_dense_kernel_velocity",
                           "rmsprop/sequential_dense_bias_velocity",
                           "rmsprop/sequential_conv2d_kernel_momentum",
                           "rmsprop/sequential_conv2d_bias_momentum",
                           "rmsprop/sequential_dense_kernel_momentum",
                           "rmsprop/sequential_dense_bias_momentum"};
    ck_assert_int_eq(n, 10);
    for (int i = 0; i < n; i++)
        ck_assert_str_eq(names[i], order[i]);
    mr_h5_free_strs(names, n);
    H5Gclose(ow);
    mr_h5_close(&h);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* _i = 1: through models whose context stages every host access */
START_TEST(h5_round_trip_bitwise) {
    if (_i == 1) {
        ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, &model_be, NULL), MR_OK);
        model_be->host_memory = 0;
    }
    mr_config cfg, cfg_b; /* one each: a second parse into cfg would leak the first */
    mr_model a, b;
    build(&cfg, &a, "", 16);
    build(&cfg_b, &b, "", 16);
    randomise(&a, 1);
    const char *p = dir_path("m.h5");
    write_h5(p, &a);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
    ck_assert_msg(mr_keras_read_weights(&h, &b, 1, &err) == MR_OK, "%s", err.msg);
    int64_t step = 0;
    ck_assert_msg(mr_keras_read_optimizer(&h, &b, &step, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(step, 77);
    /* the layout Keras's loader walks */
    char **names;
    int n;
    hid_t g;
    ck_assert_int_eq(mr_h5_open_group(&h, h.file, "model_weights", &g, &err), MR_OK);
    ck_assert_int_eq(mr_h5_read_attr_strs(&h, g, "layer_names", &names, &n, &err), MR_OK);
    ck_assert_int_eq(n, a.n_layers);
    ck_assert_str_eq(names[1], "batch_normalization");
    mr_h5_free_strs(names, n);
    H5Gclose(g);
    ck_assert(mr_h5_exists(&h, h.file,
                           "model_weights/batch_normalization/sequential/batch_normalization/"
                           "moving_variance"));
    ck_assert(mr_h5_exists(&h, h.file, "optimizer_weights/adam/sequential_dense_1_bias_velocity"));
    mr_h5_close(&h);
    ck_assert(memcmp(host(a.params), host(b.params), sizeof(float) * (size_t)a.n_params) == 0);
    ck_assert(memcmp(host(a.state), host(b.state), sizeof(float) * (size_t)a.n_state) == 0);
    for (int s = 0; s < 2; s++)
        ck_assert(memcmp(host(a.slots[s]), host(b.slots[s]), sizeof(float) * (size_t)a.n_params) ==
                  0);
    mr_model_free(&a);
    mr_model_free(&b);
    mr_config_free(&cfg);
    mr_config_free(&cfg_b);
    mr_backend_destroy(model_be);
    model_be = NULL;
}
END_TEST

/* Reading into a model it does not fit: each way named. */
static void expect_mismatch(const char *file, const char *extra, int units, int same_layers,
                            const char *want1, const char *want2) {
    mr_config cfg;
    mr_model m;
    build(&cfg, &m, extra, units);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, file, &err), MR_OK);
    mr_status st = mr_keras_read_weights(&h, &m, same_layers, &err);
    mr_h5_close(&h);
    ck_assert_msg(st == MR_ERR_DATA && strstr(err.msg, want1) && strstr(err.msg, want2),
                  "want '%s' '%s': %s", want1, want2, err.msg);
    mr_model_free(&m);
    mr_config_free(&cfg);
}

START_TEST(mismatches_named) {
    mr_config cfg;
    mr_model a;
    build(&cfg, &a, "", 16);
    const char *p = dir_path("base.h5");
    write_h5(p, &a);
    mr_model_free(&a);
    mr_config_free(&cfg);
    /* a Dense of 8 units where the file has 16: the dataset and both shapes */
    expect_mismatch(p, "", 8, 0, "/model_weights/dense/sequential/dense/kernel", "(3, 16)");
    /* another model altogether (an MLP): its layers named */
    mr_model mlp;
    ck_assert_int_eq(
        mr_config_parse("[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\n"
                        "shape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n",
                        "mlp.cfg", NULL, &cfg, NULL),
        MR_OK);
    ck_assert_int_eq(mr_model_init(&mlp, tu_cpu_backend(), &cfg, 2, 0, NULL), MR_OK);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
    ck_assert_int_eq(mr_keras_read_weights(&h, &mlp, 1, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "another model") && strstr(err.msg, "(flatten, dense)"), "%s",
                  err.msg);
    mr_error_clear(&err);
    /* loosely (a Keras file): the first layer with weights is a conv2d, not a dense */
    ck_assert_int_eq(mr_keras_read_weights(&h, &mlp, 0, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "layer conv2d of the file") && strstr(err.msg, "dense"), "%s",
                  err.msg);
    mr_h5_close(&h);
    mr_model_free(&mlp);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(archive_weights_layout) {
    mr_config cfg;
    mr_model a;
    build(&cfg, &a, "", 16);
    randomise(&a, 2);
    const char *p = dir_path("w.h5");
    write_archive_weights(p, &a);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
    /* BN's four variables as vars/0..3, moving_mean third */
    const mr_layer *bn = &a.layers[1];
    float got[4];
    int64_t dims[1] = {4};
    ck_assert_int_eq(
        mr_h5_read(&h, h.file, "layers/batch_normalization/vars/2", MR_H5_F32, 1, dims, got, &err),
        MR_OK);
    ck_assert(memcmp(got, host(bn->w[2].data), sizeof got) == 0);
    char *name;
    hid_t g;
    ck_assert_int_eq(mr_h5_open_group(&h, h.file, "layers/dense_1/vars", &g, &err), MR_OK);
    ck_assert_int_eq(mr_h5_read_attr_str(&h, g, "name", &name, &err), MR_OK);
    ck_assert_str_eq(name, "dense_1");
    free(name);
    H5Gclose(g);
    int64_t it;
    ck_assert_int_eq(mr_h5_read(&h, h.file, "optimizer/vars/0", MR_H5_I64, 0, NULL, &it, &err),
                     MR_OK);
    ck_assert_int_eq(it, 5);
    ck_assert(mr_h5_exists(&h, h.file, "layers/dropout/vars") && mr_h5_exists(&h, h.file, "vars"));
    mr_h5_close(&h);
    mr_model_free(&a);
    mr_config_free(&cfg);
}
END_TEST

/* A Keras 3 weights file read back: every weight and BN state bitwise;
 * a model it does not fit (fewer units, or fewer layers with weights) is
 * refused naming the group. */
START_TEST(archive_weights_read_back) {
    mr_config cfg, cfg_b, cfg_c;
    mr_model a, b, c;
    build(&cfg, &a, "", 16);
    build(&cfg_b, &b, "", 16);
    randomise(&a, 4);
    const char *p = dir_path("back.weights.h5");
    write_archive_weights(p, &a);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
    ck_assert_msg(mr_keras_read_archive_weights(&h, &b, &err) == MR_OK, "%s", err.msg);
    ck_assert(memcmp(host(a.params), host(b.params), sizeof(float) * (size_t)a.n_params) == 0);
    ck_assert(memcmp(host(a.state), host(b.state), sizeof(float) * (size_t)a.n_state) == 0);
    build(&cfg_c, &c, "", 8);
    ck_assert_int_eq(mr_keras_read_archive_weights(&h, &c, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "/layers/dense/vars/0") && strstr(err.msg, "(3, 16)"), "%s",
                  err.msg);
    mr_error_clear(&err);
    mr_h5_close(&h);
    /* an MLP: conv2d and the rest are groups left over */
    mr_config cfg_m;
    mr_model mlp;
    ck_assert_int_eq(
        mr_config_parse("[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\n"
                        "shape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n",
                        "mlp.cfg", NULL, &cfg_m, NULL),
        MR_OK);
    ck_assert_int_eq(mr_model_init(&mlp, tu_cpu_backend(), &cfg_m, 2, 0, NULL), MR_OK);
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
    mr_status st = mr_keras_read_archive_weights(&h, &mlp, &err);
    mr_h5_close(&h);
    ck_assert_msg(st == MR_ERR_DATA && strstr(err.msg, p) &&
                      (strstr(err.msg, "left over") || strstr(err.msg, "has shape")),
                  "%s", err.msg);
    mr_model_free(&mlp);
    mr_model_free(&a);
    mr_model_free(&b);
    mr_model_free(&c);
    mr_config_free(&cfg);
    mr_config_free(&cfg_b);
    mr_config_free(&cfg_c);
    mr_config_free(&cfg_m);
}
END_TEST

/* [layernorm] as Keras writes LayerNormalization: its config keys, gamma
 * and beta only where center / scale are on (the .h5's weight names and
 * the archive's vars), read back bit for bit from both forms; a file's
 * layer_normalization where the model has another layer is refused. */
START_TEST(layernorm_as_keras_writes_it) {
    const char *text = "[net]\nbatch=4\n[data]\ntrain_images=a\ntrain_labels=b\n"
                       "[input]\nshape=4,4,3\n[layernorm]\n[layernorm]\ncenter=0\n"
                       "[layernorm]\nscale=0\nepsilon=1e-5\n[flatten]\n[dense]\nunits=2\n"
                       "activation=softmax\n";
    mr_config cfg, cfg_b;
    mr_model a, b;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg_b, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_model_init(&a, tu_cpu_backend(), &cfg, 4, 0, &err), MR_OK);
    ck_assert_int_eq(mr_model_init(&b, tu_cpu_backend(), &cfg_b, 4, 0, &err), MR_OK);
    char *j = mr_keras_model_config(&a, MR_KERAS_ARCHIVE, 0.001f);
    const char *keys[] = {
        "\"class_name\": \"LayerNormalization\", \"config\": {\"name\": \"layer_normalization\"",
        "\"axis\": [-1], \"epsilon\": 0.001, \"center\": true, \"scale\": true, \"rms_scaling\": "
        "false, \"beta_initializer\": {\"module\": \"keras.initializers\", \"class_name\": "
        "\"Zeros\"",
        "\"name\": \"layer_normalization_1\"",
        "\"center\": false, \"scale\": true",
        "\"epsilon\": 1e-05, \"center\": true, \"scale\": false",
        "\"gamma_constraint\": null}, \"registered_name\": null, \"build_config\": "
        "{\"input_shape\": [null, 4, 4, 3]}"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(j, keys[i]) != NULL, "no %s in %s", keys[i], j);
    free(j);
    randomise(&a, 6);
    const char *p = dir_path("ln.h5");
    write_h5(p, &a);
    mr_h5 h;
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
    ck_assert_msg(mr_keras_read_weights(&h, &b, 1, &err) == MR_OK, "%s", err.msg);
    const char *root = "model_weights/layer_normalization";
    char q[160];
    static const char *const present[] = {
        "/sequential/layer_normalization/gamma", "/sequential/layer_normalization/beta",
        "_1/sequential/layer_normalization_1/gamma", "_2/sequential/layer_normalization_2/beta"};
    static const char *const absent[] = {"_1/sequential/layer_normalization_1/beta",
                                         "_2/sequential/layer_normalization_2/gamma"};
    for (int i = 0; i < 4; i++) {
        snprintf(q, sizeof q, "%s%s", root, present[i]);
        ck_assert_msg(mr_h5_exists(&h, h.file, q), "%s", q);
    }
    for (int i = 0; i < 2; i++) {
        snprintf(q, sizeof q, "%s%s", root, absent[i]);
        ck_assert_msg(!mr_h5_exists(&h, h.file, q), "%s", q);
    }
    mr_h5_close(&h);
    ck_assert(memcmp(host(a.params), host(b.params), sizeof(float) * (size_t)a.n_params) == 0);
    /* the archive's weights file: gamma is vars/0, beta vars/1 */
    randomise(&a, 7);
    p = dir_path("ln.weights.h5");
    write_archive_weights(p, &a);
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
    float got[3];
    int64_t dims[1] = {3};
    ck_assert_int_eq(
        mr_h5_read(&h, h.file, "layers/layer_normalization/vars/1", MR_H5_F32, 1, dims, got, &err),
        MR_OK);
    ck_assert(memcmp(got, host(a.layers[0].w[1].data), sizeof got) == 0);
    ck_assert_msg(mr_keras_read_archive_weights(&h, &b, &err) == MR_OK, "%s", err.msg);
    mr_h5_close(&h);
    ck_assert(memcmp(host(a.params), host(b.params), sizeof(float) * (size_t)a.n_params) == 0);
    mr_model_free(&a);
    mr_model_free(&b);
    mr_config_free(&cfg);
    mr_config_free(&cfg_b);
    /* the file's layer_normalization where the model has batch_normalization */
    p = dir_path("ln.h5");
    expect_mismatch(p, "", 16, 0, "layer_normalization", "the layers differ");
}
END_TEST

/* The preprocessing layers as Keras 3.15 writes them (observed: a
 * Sequential with layers.Rescaling(0.5, offset=-1.0) and an adapted
 * layers.Normalization(), get_config() and model.save of .h5 and .keras),
 * in the summary, and Normalization's state through both files: mean,
 * variance and count, the count an int64 scalar as Keras stores it. */
static const char *prep_cfg = "[net]\nbatch=4\n[data]\ntrain_images=a\ntrain_labels=b\n"
                              "[input]\nshape=3\n[rescaling]\nscale=0.5\noffset=-1\n"
                              "[normalization]\nmean=1,2,3\nvariance=4\n"
                              "[dense]\nunits=2\nactivation=softmax\n";

START_TEST(preprocessing_config_as_keras_writes_it) {
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(prep_cfg, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 4, 0, &err) == MR_OK, "%s", err.msg);
    const char *rescaling =
        "{\"class_name\": \"Rescaling\", \"config\": {\"name\": \"rescaling\", \"trainable\": "
        "true, \"dtype\": {\"module\": \"keras\", \"class_name\": \"DTypePolicy\", \"config\": "
        "{\"name\": \"float32\"}, \"registered_name\": null}, \"scale\": 0.5, \"offset\": -1.0}}";
    const char *normalization =
        "{\"class_name\": \"Normalization\", \"config\": {\"name\": \"normalization\", "
        "\"trainable\": true, \"dtype\": {\"module\": \"keras\", \"class_name\": "
        "\"DTypePolicy\", \"config\": {\"name\": \"float32\"}, \"registered_name\": null}, "
        "\"axis\": [-1], \"invert\": false, \"mean\": null, \"variance\": null}}";
    char *j = mr_keras_model_config(&m, MR_KERAS_LEGACY_H5, 0.001f);
    ck_assert_msg(strstr(j, rescaling) != NULL, "no %s in %s", rescaling, j);
    ck_assert_msg(strstr(j, normalization) != NULL, "no %s in %s", normalization, j);
    free(j);
    j = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, 0.001f);
    const char *archive =
        "\"scale\": 0.5, \"offset\": -1.0}, \"registered_name\": null, \"build_config\": "
        "{\"input_shape\": [null, 3]}}";
    ck_assert_msg(strstr(j, archive) != NULL, "no %s in %s", archive, j);
    const char *narchive = "\"mean\": null, \"variance\": null}, \"registered_name\": null, "
                           "\"build_config\": {\"input_shape\": [null, 3]}}";
    ck_assert_msg(strstr(j, narchive) != NULL, "no %s in %s", narchive, j);
    free(j);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mr_model_summary(&m, "prep", f);
    fclose(f);
    ck_assert_msg(strstr(buf, " rescaling (Rescaling)         (None, 3)                 0\n") &&
                      strstr(buf, " normalization (Normalization) (None, 3)                 7\n") &&
                      strstr(buf, "Non-trainable params: 7\n"),
                  "%s", buf);
    free(buf);
    /* the state through a .h5 and a .keras weights file into a fresh model */
    float *st = mr_dfloat_ptr(m.state);
    for (int64_t i = 0; i < m.n_state; i++)
        st[i] = 0.5f + (float)i;
    mr_weight *count = &m.layers[1].w[2];
    mr_dfloat_ptr(count->data)[0] = 42.0f;
    for (int form = 0; form < 2; form++) {
        const char *p = dir_path(form ? "prep.weights.h5" : "prep.h5");
        if (form)
            write_archive_weights(p, &m);
        else
            write_h5(p, &m);
        mr_h5 h;
        ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
        hid_t d = H5Dopen2(h.file,
                           form ? "layers/normalization/vars/2"
                                : "model_weights/normalization/sequential/normalization/count",
                           H5P_DEFAULT);
        ck_assert_int_ge(d, 0);
        hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
        ck_assert_int_eq(H5Tget_class(t), H5T_INTEGER);
        ck_assert_int_eq((int)H5Tget_size(t), 8);
        ck_assert_int_eq(H5Sget_simple_extent_ndims(sp), 0);
        H5Sclose(sp), H5Tclose(t), H5Dclose(d);
        mr_model m2;
        ck_assert_int_eq(mr_model_init(&m2, tu_cpu_backend(), &cfg, 4, 0, &err), MR_OK);
        ck_assert_msg((form ? mr_keras_read_archive_weights(&h, &m2, &err)
                            : mr_keras_read_weights(&h, &m2, 1, &err)) == MR_OK,
                      "%s", err.msg);
        mr_h5_close(&h);
        ck_assert_int_eq(m2.n_state, 7);
        ck_assert_mem_eq(mr_dfloat_ptr(m2.state), st, sizeof(float) * 7);
        mr_model_free(&m2);
    }
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* A residual graph as Keras 3.15 writes its Functional (the model a
 * keras.Model(inp, out) of the same layers saves, checked against its
 * config.json and model_config): conv2d -> conv2d_1 -> c3, add(c3, conv2d),
 * global average pooling, dense. */
static const char *residual_cfg =
    "[net]\nbatch=4\noptimizer=adam\n[data]\ntrain_images=a\ntrain_labels=b\n"
    "[input]\nshape=8,8,1\n"
    "[conv2d]\nfilters=4\nsize=3\npadding=same\nactivation=relu\n"
    "[conv2d]\nfilters=4\nsize=3\npadding=same\nactivation=relu\n"
    "[conv2d]\nname=c3\nfilters=4\nsize=3\npadding=same\n"
    "[add]\nfrom=-3\n[globalavgpool]\n[dense]\nunits=3\nactivation=softmax\n";

static void build_residual(mr_config *cfg, mr_model *m) {
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(residual_cfg, "r.cfg", NULL, cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(m, tu_cpu_backend(), cfg, 4, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(m->graph, 1);
}

START_TEST(functional_config_as_keras_writes_it) {
    mr_config cfg;
    mr_model m;
    build_residual(&cfg, &m);
    char *j = mr_keras_model_config(&m, MR_KERAS_LEGACY_H5, 0.001f);
    ck_assert_ptr_nonnull(j);
    /* in order: the model, its InputLayer, each layer with its one node */
    const char *keys[] = {
        "{\"class_name\": \"Functional\", \"config\": {\"name\": \"functional\", \"trainable\": "
        "true, \"layers\": [{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": "
        "[null, 8, 8, 1], \"dtype\": \"float32\", \"sparse\": false, \"ragged\": false, "
        "\"name\": \"input_layer\", \"optional\": false}, \"name\": \"input_layer\", "
        "\"inbound_nodes\": []}, {\"class_name\": \"Conv2D\", \"config\": {\"name\": \"conv2d\"",
        "\"bias_constraint\": null}, \"name\": \"conv2d\", \"inbound_nodes\": [{\"args\": "
        "[{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 8, 8, 1], "
        "\"dtype\": \"float32\", \"keras_history\": [\"input_layer\", 0, 0]}}], \"kwargs\": {}}]}",
        "\"name\": \"conv2d_1\", \"inbound_nodes\": [{\"args\": [{\"class_name\": "
        "\"__keras_tensor__\", \"config\": {\"shape\": [null, 8, 8, 4], \"dtype\": \"float32\", "
        "\"keras_history\": [\"conv2d\", 0, 0]}}]",
        "{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"c3\"",
        "\"keras_history\": [\"conv2d_1\", 0, 0]",
        /* [add]: one node whose args are a list of its two tensors */
        "{\"class_name\": \"Add\", \"config\": {\"name\": \"add\", \"trainable\": true, \"dtype\": "
        "{\"module\": \"keras\", \"class_name\": \"DTypePolicy\", \"config\": {\"name\": "
        "\"float32\"}, \"registered_name\": null}}, \"name\": \"add\", \"inbound_nodes\": "
        "[{\"args\": [[{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 8, "
        "8, 4], \"dtype\": \"float32\", \"keras_history\": [\"c3\", 0, 0]}}, {\"class_name\": "
        "\"__keras_tensor__\", \"config\": {\"shape\": [null, 8, 8, 4], \"dtype\": \"float32\", "
        "\"keras_history\": [\"conv2d\", 0, 0]}}]], \"kwargs\": {}}]}",
        "\"keras_history\": [\"add\", 0, 0]",
        "\"shape\": [null, 4], \"dtype\": \"float32\", \"keras_history\": "
        "[\"global_average_pooling2d\", 0, 0]",
        "], \"input_layers\": [\"input_layer\", 0, 0], \"output_layers\": [\"dense\", 0, 0]}}"};
    const char *p = j;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *at = strstr(p, keys[i]);
        ck_assert_msg(at != NULL, "no %s after %.60s in %s", keys[i], p, j);
        p = at + 1;
    }
    ck_assert_ptr_null(strstr(j, "Sequential"));
    ck_assert_ptr_null(strstr(j, "build_input_shape"));
    free(j);
    /* the archive: module keys, build configs ([add]'s two shapes), the
     * model's registered name and compile config */
    j = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, 0.001f);
    const char *akeys[] = {
        "{\"module\": \"keras.src.models.functional\", \"class_name\": \"Functional\"",
        "\"module\": \"keras.layers\", \"class_name\": \"InputLayer\"",
        "\"name\": \"input_layer\", \"optional\": false}, \"registered_name\": null, \"name\": "
        "\"input_layer\", \"inbound_nodes\": []}",
        "\"registered_name\": null, \"build_config\": {\"input_shape\": [null, 8, 8, 4]}, "
        "\"name\": \"c3\", \"inbound_nodes\": ",
        "\"registered_name\": null, \"build_config\": {\"input_shape\": [[null, 8, 8, 4], [null, "
        "8, 8, 4]]}, \"name\": \"add\", \"inbound_nodes\": [{\"args\": [[",
        "\"registered_name\": null, \"name\": \"global_average_pooling2d\", \"inbound_nodes\"",
        "\"output_layers\": [\"dense\", 0, 0]}, \"registered_name\": \"Functional\", "
        "\"build_config\": {\"input_shape\": null}, \"compile_config\": {\"optimizer\": "
        "{\"module\": \"keras.optimizers\", \"class_name\": \"Adam\""};
    p = j;
    for (size_t i = 0; i < sizeof akeys / sizeof akeys[0]; i++) {
        const char *at = strstr(p, akeys[i]);
        ck_assert_msg(at != NULL, "no %s in %s", akeys[i], j);
        p = at + 1;
    }
    free(j);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* [concatenate] as Keras 3.15 writes Concatenate() in a Functional (its
 * config.json of keras.Model(i, Dense(2)(Flatten()(Concatenate()([
 * Conv2D(3, 3, padding="same")(i), i])))): axis -1, both input shapes in
 * the build config, one node whose args list its input, then its from. */
START_TEST(concatenate_as_keras_writes_it) {
    const char *text = "[net]\nbatch=4\n[data]\ntrain_images=a\ntrain_labels=b\n"
                       "[input]\nshape=4,4,2\nname=img\n[conv2d]\nfilters=3\nsize=3\n"
                       "padding=same\n[concatenate]\nfrom=img\n[flatten]\n[dense]\nunits=2\n"
                       "activation=softmax\n";
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "c.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 4, 0, &err) == MR_OK, "%s", err.msg);
    char *j = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, 0.001f);
    ck_assert_ptr_nonnull(j);
    const char *want =
        "\"class_name\": \"Concatenate\", \"config\": {\"name\": \"concatenate\", \"trainable\": "
        "true, \"dtype\": {\"module\": \"keras\", \"class_name\": \"DTypePolicy\", \"config\": "
        "{\"name\": \"float32\"}, \"registered_name\": null}, \"axis\": -1}, \"registered_name\": "
        "null, \"build_config\": {\"input_shape\": [[null, 4, 4, 3], [null, 4, 4, 2]]}, \"name\": "
        "\"concatenate\", \"inbound_nodes\": [{\"args\": [[{\"class_name\": \"__keras_tensor__\", "
        "\"config\": {\"shape\": [null, 4, 4, 3], \"dtype\": \"float32\", \"keras_history\": "
        "[\"conv2d\", 0, 0]}}, {\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": "
        "[null, 4, 4, 2], \"dtype\": \"float32\", \"keras_history\": [\"img\", 0, 0]}}]], "
        "\"kwargs\": {}}]}";
    ck_assert_msg(strstr(j, want) != NULL, "no %s in %s", want, j);
    free(j);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* The graph's files as Keras writes a Functional's: the .h5 lists its
 * InputLayer, weights at <layer>/<layer>/<weight>, optimizer slots without
 * the model's name; the weights file's groups are named by class and
 * counter (c3, the third Conv2D, is conv2d_2) and hold the InputLayer's.
 * Both read back bitwise. */
START_TEST(functional_files_round_trip) {
    mr_config cfg, cfg_b;
    mr_model a, b;
    build_residual(&cfg, &a);
    build_residual(&cfg_b, &b);
    randomise(&a, 6);
    const char *p = dir_path("f.h5");
    write_h5(p, &a);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
    char **names;
    int n;
    hid_t g;
    ck_assert_int_eq(mr_h5_open_group(&h, h.file, "model_weights", &g, &err), MR_OK);
    ck_assert_int_eq(mr_h5_read_attr_strs(&h, g, "layer_names", &names, &n, &err), MR_OK);
    ck_assert_int_eq(n, a.n_layers + 1);
    ck_assert_str_eq(names[0], "input_layer");
    ck_assert_str_eq(names[3], "c3");
    mr_h5_free_strs(names, n);
    H5Gclose(g);
    ck_assert(mr_h5_exists(&h, h.file, "model_weights/input_layer"));
    ck_assert(mr_h5_exists(&h, h.file, "model_weights/c3/c3/kernel"));
    ck_assert(mr_h5_exists(&h, h.file, "optimizer_weights/adam/c3_kernel_momentum"));
    ck_assert(mr_h5_exists(&h, h.file, "optimizer_weights/adam/dense_bias_velocity"));
    ck_assert_msg(mr_keras_read_weights(&h, &b, 1, &err) == MR_OK, "%s", err.msg);
    int64_t step = 0;
    ck_assert_msg(mr_keras_read_optimizer(&h, &b, &step, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(step, 77);
    mr_h5_close(&h);
    ck_assert_mem_eq(host(a.params), host(b.params), sizeof(float) * (size_t)a.n_params);
    for (int s = 0; s < 2; s++)
        ck_assert_mem_eq(host(a.slots[s]), host(b.slots[s]), sizeof(float) * (size_t)a.n_params);

    mr_model_free(&b);
    mr_config_free(&cfg_b);
    build_residual(&cfg_b, &b);
    p = dir_path("f.weights.h5");
    write_archive_weights(p, &a);
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
    char *name;
    ck_assert_int_eq(mr_h5_open_group(&h, h.file, "layers/conv2d_2/vars", &g, &err), MR_OK);
    ck_assert_int_eq(mr_h5_read_attr_str(&h, g, "name", &name, &err), MR_OK);
    ck_assert_str_eq(name, "c3");
    free(name);
    H5Gclose(g);
    ck_assert_int_eq(mr_h5_open_group(&h, h.file, "vars", &g, &err), MR_OK);
    ck_assert_int_eq(mr_h5_read_attr_str(&h, g, "name", &name, &err), MR_OK);
    ck_assert_str_eq(name, "functional");
    free(name);
    H5Gclose(g);
    ck_assert(mr_h5_exists(&h, h.file, "layers/input_layer/vars"));
    ck_assert(!mr_h5_exists(&h, h.file, "layers/c3"));
    ck_assert_msg(mr_keras_read_archive_weights(&h, &b, &err) == MR_OK, "%s", err.msg);
    mr_h5_close(&h);
    ck_assert_mem_eq(host(a.params), host(b.params), sizeof(float) * (size_t)a.n_params);
    mr_model_free(&a);
    mr_model_free(&b);
    mr_config_free(&cfg);
    mr_config_free(&cfg_b);
}
END_TEST

/* Keras orders a Functional's layers by depth (keras.c, keras_order): the
 * shortcut's convolution proj (proj -> batch_normalization -> add) has the
 * depth of the block's second one (conv2d -> main -> add) and the walk from
 * the output reaches it first ([add]'s input is the shortcut), so Keras
 * has a, proj, conv2d, batch_normalization, main where the file has a,
 * conv2d, main, proj, batch_normalization. The config's layers, the .h5's
 * layer_names and the optimizer's variables follow Keras's order (as
 * Keras 3.15.1 builds this model, and loads fashion_resnet20.cfg's files),
 * and the files read back bitwise. */
START_TEST(functional_layers_in_keras_order) {
    const char *text =
        "[net]\nbatch=4\noptimizer=adam\n[data]\ntrain_images=a\ntrain_labels=b\n"
        "[input]\nshape=8,8,1\n[conv2d]\nname=a\nfilters=2\nsize=3\npadding=same\n"
        "[conv2d]\nfilters=2\nsize=3\npadding=same\nuse_bias=0\n[batchnorm]\nname=main\n"
        "[conv2d]\ninput=a\nname=proj\nfilters=2\nsize=1\nuse_bias=0\n[batchnorm]\n"
        "[add]\nfrom=main\n[globalavgpool]\n[dense]\nunits=3\nactivation=softmax\n";
    mr_config cfg, cfg_b;
    mr_model a, b;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "p.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_config_parse(text, "p.cfg", NULL, &cfg_b, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_model_init(&a, tu_cpu_backend(), &cfg, 4, 0, &err), MR_OK);
    ck_assert_int_eq(mr_model_init(&b, tu_cpu_backend(), &cfg_b, 4, 0, &err), MR_OK);
    randomise(&a, 8);
    char *j = mr_keras_model_config(&a, MR_KERAS_LEGACY_H5, 0.001f);
    const char *in_order[] = {"\"name\": \"input_layer\", \"inbound_nodes\"",
                              "\"name\": \"a\", \"inbound_nodes\"",
                              "\"name\": \"proj\", \"inbound_nodes\"",
                              "\"name\": \"conv2d\", \"inbound_nodes\"",
                              "\"name\": \"batch_normalization\", \"inbound_nodes\"",
                              "\"name\": \"main\", \"inbound_nodes\"",
                              "\"name\": \"add\", \"inbound_nodes\"",
                              "\"name\": \"dense\", \"inbound_nodes\""};
    const char *p = j;
    for (size_t i = 0; i < sizeof in_order / sizeof in_order[0]; i++) {
        p = strstr(p, in_order[i]);
        ck_assert_msg(p != NULL, "%s missing or out of Keras's order", in_order[i]);
    }
    free(j);
    const char *path = dir_path("order.h5");
    write_h5(path, &a);
    mr_h5 h;
    ck_assert_int_eq(mr_h5_open(&h, path, &err), MR_OK);
    char **names;
    int n;
    hid_t g;
    ck_assert_int_eq(mr_h5_open_group(&h, h.file, "model_weights", &g, &err), MR_OK);
    ck_assert_int_eq(mr_h5_read_attr_strs(&h, g, "layer_names", &names, &n, &err), MR_OK);
    ck_assert_int_eq(n, 9);
    const char *want[] = {"input_layer",
                          "a",
                          "proj",
                          "conv2d",
                          "batch_normalization",
                          "main",
                          "add",
                          "global_average_pooling2d",
                          "dense"};
    for (int i = 0; i < 9; i++)
        ck_assert_str_eq(names[i], want[i]);
    mr_h5_free_strs(names, n);
    H5Gclose(g);
    ck_assert_msg(mr_keras_read_weights(&h, &b, 1, &err) == MR_OK, "%s", err.msg);
    mr_h5_close(&h);
    ck_assert_mem_eq(host(a.params), host(b.params), sizeof(float) * (size_t)a.n_params);
    ck_assert_mem_eq(host(a.state), host(b.state), sizeof(float) * (size_t)a.n_state);
    /* the weights file: the optimizer's variables in Keras's order (0, 1:
     * iteration and rate; then momentum and velocity of a's kernel and
     * bias, proj's kernel (1, 1, 2, 2) at 6, conv2d's (3, 3, 2, 2) at 8) */
    path = dir_path("order.weights.h5");
    write_archive_weights(path, &a);
    ck_assert_int_eq(mr_h5_open(&h, path, &err), MR_OK);
    int rank;
    int64_t dims[MR_H5_MAX_DIMS];
    ck_assert_int_eq(mr_h5_shape(&h, h.file, "optimizer/vars/6", &rank, dims, &err), MR_OK);
    ck_assert_msg(rank == 4 && dims[0] == 1 && dims[1] == 1, "optimizer/vars/6: rank %d (%d, ...)",
                  rank, (int)dims[0]);
    ck_assert_int_eq(mr_h5_shape(&h, h.file, "optimizer/vars/8", &rank, dims, &err), MR_OK);
    ck_assert_msg(rank == 4 && dims[0] == 3, "optimizer/vars/8: rank %d (%d, ...)", rank,
                  (int)dims[0]);
    memset(host(b.params), 0, sizeof(float) * (size_t)b.n_params);
    ck_assert_msg(mr_keras_read_archive_weights(&h, &b, &err) == MR_OK, "%s", err.msg);
    mr_h5_close(&h);
    ck_assert_mem_eq(host(a.params), host(b.params), sizeof(float) * (size_t)a.n_params);
    mr_model_free(&a);
    mr_model_free(&b);
    mr_config_free(&cfg);
    mr_config_free(&cfg_b);
}
END_TEST

int main(void) {
    Suite *s = suite_create("keras");
    TCase *tc = tcase_create("keras");
    tcase_add_test(tc, model_config_as_keras_writes_it);
    tcase_add_test(tc, preprocessing_config_as_keras_writes_it);
    tcase_add_test(tc, loss_object_with_from_logits);
    tcase_add_test(tc, multi_label_metric);
    tcase_add_test(tc, regression_loss_names);
    tcase_add_test(tc, activations_keras_names);
    tcase_add_test(tc, optimizer_and_initializers_as_keras_writes_them);
    tcase_add_loop_test(tc, h5_round_trip_bitwise, 0, 2);
    tcase_add_test(tc, mismatches_named);
    tcase_add_test(tc, archive_weights_layout);
    tcase_add_test(tc, archive_weights_read_back);
    tcase_add_test(tc, layernorm_as_keras_writes_it);
    tcase_add_test(tc, functional_config_as_keras_writes_it);
    tcase_add_test(tc, functional_files_round_trip);
    tcase_add_test(tc, functional_layers_in_keras_order);
    tcase_add_test(tc, concatenate_as_keras_writes_it);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
