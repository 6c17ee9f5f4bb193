/* test_export.c: mirrored_export as a user runs it. A small conv net with
 * batch normalisation is trained by mirrored_train on generated data and
 * exported; the .keras file is read back with libzip and HDF5: three STORED
 * entries in Keras's order, Keras's metadata and config, and every weight
 * and optimizer variable equal to the checkpoint's (the legacy layout's
 * weight_names order is the archive's vars/<i> order). Bad input: exit 2,
 * one line naming the file, no OUT and no temporary file left. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "runtime/h5file.h"
#include "tests/testutil.h"

static char train_exe[4096], export_exe[4096];
static char dir[4096];
static int trained_rc = -1;
static char *trained_out;

static const char *cfg_text =
    "[net]\nbatch=8\nepochs=1\nseed=5\noptimizer=adam\nlearning_rate=0.01\n"
    "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
    "test_images=x.npy\ntest_labels=y.npy\nscale=1/255\n"
    "[input]\nshape=8,8,1\n"
    "[conv2d]\nfilters=4\nsize=3\npadding=same\nuse_bias=0\n"
    "[batchnorm]\n[activation]\nactivation=relu\n[maxpool]\nsize=2\n[flatten]\n"
    "[dense]\nunits=16\nactivation=relu\n[dropout]\nrate=0.2\n"
    "[dense]\nunits=4\nactivation=softmax\n";

static int run(const char *exe, const char *args, char **out) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s", dir, exe, args);
    return tu_run(cmd, out);
}

static int one_line(const char *s) {
    const char *nl = strchr(s, '\n');
    return nl != NULL && nl[1] == '\0';
}

/* Once for the test case (in the runner's process): data, .cfg, m.h5. */
static void setup_once(void) {
    char *p = tu_build_path("launch/mirrored_train");
    snprintf(train_exe, sizeof train_exe, "%s", p);
    free(p);
    p = tu_build_path("launch/mirrored_export");
    snprintf(export_exe, sizeof export_exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    tu_write_image_data(dir, "x.npy", "y.npy", 200, 4);
    free(tu_write_text(dir, "small.cfg", cfg_text));
    trained_rc = run(train_exe, "--devices cpu:1 --quiet --save m.h5 small.cfg", &trained_out);
}

static void teardown_once(void) {
    free(trained_out);
}

static void need_checkpoint(void) {
    ck_assert_msg(trained_rc == 0, "mirrored_train exited %d: %s", trained_rc, trained_out);
}

/* Names in dir starting with prefix (temporaries "OUT.tmp.*", "OUT.weights.*"). */
static int count_prefix(const char *prefix) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* Entry i of the archive, whole (malloc'd). */
static char *read_entry(zip_t *za, zip_uint64_t i, zip_uint64_t *len) {
    zip_stat_t zs;
    ck_assert_int_eq(zip_stat_index(za, i, 0, &zs), 0);
    char *buf = malloc(zs.size + 1);
    zip_file_t *f = zip_fopen_index(za, i, 0);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(zip_fread(f, buf, zs.size), (zip_int64_t)zs.size);
    zip_fclose(f);
    buf[zs.size] = '\0';
    *len = zs.size;
    return buf;
}

/* Reads dataset loc/obj of h (float32) into a malloc'd buffer; *n floats. */
static float *read_f32(mr_h5 *h, hid_t loc, const char *obj, int *rank, int64_t *dims, int64_t *n) {
    mr_error err = {0};
    ck_assert_msg(mr_h5_shape(h, loc, obj, rank, dims, &err) == MR_OK, "%s", err.msg);
    *n = 1;
    for (int d = 0; d < *rank; d++)
        *n *= dims[d];
    float *v = malloc(sizeof(float) * (size_t)(*n > 0 ? *n : 1));
    ck_assert_msg(mr_h5_read(h, loc, obj, MR_H5_F32, *rank, dims, v, &err) == MR_OK, "%s", err.msg);
    return v;
}

/* Dataset a:obj_a equals b:obj_b: same shape, bitwise the same floats. */
static void expect_same(mr_h5 *a, hid_t la, const char *obj_a, mr_h5 *b, hid_t lb,
                        const char *obj_b) {
    int ra, rb;
    int64_t da[MR_H5_MAX_DIMS], db[MR_H5_MAX_DIMS], na, nb;
    float *va = read_f32(a, la, obj_a, &ra, da, &na);
    float *vb = read_f32(b, lb, obj_b, &rb, db, &nb);
    ck_assert_msg(ra == rb && memcmp(da, db, sizeof(int64_t) * (size_t)ra) == 0,
                  "%s and %s: shapes differ", obj_a, obj_b);
    ck_assert_msg(memcmp(va, vb, sizeof(float) * (size_t)na) == 0, "%s and %s: values differ",
                  obj_a, obj_b);
    free(va), free(vb);
}

START_TEST(help_and_version) {
    char *out;
    ck_assert_int_eq(run(export_exe, "--help", &out), 0);
    ck_assert_msg(strstr(out, "Usage:") && strstr(out, "OUT.keras") && strstr(out, "Exit status"),
                  "%s", out);
    free(out);
    ck_assert_int_eq(run(export_exe, "--version", &out), 0);
    ck_assert_msg(strncmp(out, "mirrored ", 9) == 0, "%s", out);
    free(out);
}
END_TEST

START_TEST(exports_keras_archive) {
    need_checkpoint();
    char *out;
    int rc = run(export_exe, "m.h5 m.keras", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "m.keras: ") && strstr(out, "adam at update 25"), "%s", out);
    free(out);
    ck_assert_int_eq(count_prefix("m.keras."), 0); /* no temporaries left */
    /* the zip: exactly these entries, in this order, all STORED */
    char path[4200];
    snprintf(path, sizeof path, "%s/m.keras", dir);
    int zerr = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    ck_assert_msg(za != NULL, "not a zip (libzip error %d)", zerr);
    const char *names[] = {"metadata.json", "config.json", "model.weights.h5"};
    ck_assert_int_eq(zip_get_num_entries(za, 0), 3);
    for (zip_uint64_t i = 0; i < 3; i++) {
        zip_stat_t zs;
        ck_assert_int_eq(zip_stat_index(za, i, 0, &zs), 0);
        ck_assert_str_eq(zs.name, names[i]);
        ck_assert_msg(zs.comp_method == ZIP_CM_STORE, "%s: method %d", zs.name, zs.comp_method);
        ck_assert(zs.comp_size == zs.size);
    }
    zip_uint64_t len;
    char *meta = read_entry(za, 0, &len);
    ck_assert_msg(strncmp(meta, "{\"keras_version\": \"3.15.1\", \"date_saved\": \"", 43) == 0 &&
                      len == 64 && meta[43 + 10] == '@' && strcmp(meta + 62, "\"}") == 0,
                  "%s", meta);
    char *config = read_entry(za, 1, &len);
    const char *keys[] = {"{\"module\": \"keras\", \"class_name\": \"Sequential\"",
                          "\"class_name\": \"InputLayer\"",
                          "\"class_name\": \"Conv2D\"",
                          "\"class_name\": \"BatchNormalization\"",
                          "\"class_name\": \"Activation\"",
                          "\"class_name\": \"MaxPooling2D\"",
                          "\"class_name\": \"Flatten\"",
                          "\"class_name\": \"Dense\"",
                          "\"class_name\": \"Dropout\"",
                          "\"module\": \"keras.layers\"",
                          "\"build_config\": {\"input_shape\": [null, 8, 8, 1]}",
                          "\"compile_config\": {\"optimizer\": {\"module\": \"keras.optimizers\", "
                          "\"class_name\": \"Adam\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(config, keys[i]) != NULL, "missing %s in %s", keys[i], config);
    /* model.weights.h5, out of the zip into a file HDF5 can open */
    char *weights = read_entry(za, 2, &len);
    free(tu_write_file(dir, "extracted.weights.h5", weights, len));
    zip_close(za);
    free(meta), free(config), free(weights);

    /* every weight: the checkpoint's /model_weights/<layer>/<weight_names[i]>
     * is the archive's layers/<layer>/vars/<i>; the optimizer likewise */
    mr_h5 ck, ar;
    mr_error err = {0};
    snprintf(path, sizeof path, "%s/m.h5", dir);
    ck_assert_msg(mr_h5_open(&ck, path, &err) == MR_OK, "%s", err.msg);
    snprintf(path, sizeof path, "%s/extracted.weights.h5", dir);
    ck_assert_msg(mr_h5_open(&ar, path, &err) == MR_OK, "%s", err.msg);
    expect_same(&ck, ck.file, "model_weights/dense/sequential/dense/kernel", &ar, ar.file,
                "layers/dense/vars/0");
    hid_t mw;
    ck_assert_int_eq(mr_h5_open_group(&ck, ck.file, "model_weights", &mw, &err), MR_OK);
    char **layers;
    int n_layers, n_weights = 0;
    ck_assert_int_eq(mr_h5_read_attr_strs(&ck, mw, "layer_names", &layers, &n_layers, &err), MR_OK);
    ck_assert_int_eq(n_layers, 8);
    for (int l = 0; l < n_layers; l++) {
        hid_t g;
        char **wn;
        int n;
        char obj[512];
        ck_assert_int_eq(mr_h5_open_group(&ck, mw, layers[l], &g, &err), MR_OK);
        ck_assert_int_eq(mr_h5_read_attr_strs(&ck, g, "weight_names", &wn, &n, &err), MR_OK);
        for (int i = 0; i < n; i++) {
            snprintf(obj, sizeof obj, "layers/%s/vars/%d", layers[l], i);
            expect_same(&ck, g, wn[i], &ar, ar.file, obj);
        }
        snprintf(obj, sizeof obj, "layers/%s/vars/%d", layers[l], n);
        ck_assert_msg(!mr_h5_exists(&ar, ar.file, obj), "%s: more variables than weight_names",
                      obj);
        n_weights += n;
        mr_h5_free_strs(wn, n);
        H5Gclose(g);
    }
    /* conv kernel; BN gamma, beta, moving mean and variance; 2 x dense */
    ck_assert_int_eq(n_weights, 1 + 4 + 2 + 2);
    mr_h5_free_strs(layers, n_layers);
    H5Gclose(mw);
    hid_t ow;
    char **on;
    int n_opt;
    ck_assert_int_eq(mr_h5_open_group(&ck, ck.file, "optimizer_weights", &ow, &err), MR_OK);
    ck_assert_int_eq(mr_h5_read_attr_strs(&ck, ow, "weight_names", &on, &n_opt, &err), MR_OK);
    /* iteration, learning_rate, then momentum and velocity of the 7 trainable weights */
    ck_assert_int_eq(n_opt, 2 + 2 * 7);
    int64_t it_ck, it_ar;
    ck_assert_int_eq(mr_h5_read(&ck, ow, on[0], MR_H5_I64, 0, NULL, &it_ck, &err), MR_OK);
    ck_assert_int_eq(mr_h5_read(&ar, ar.file, "optimizer/vars/0", MR_H5_I64, 0, NULL, &it_ar, &err),
                     MR_OK);
    ck_assert_int_eq(it_ck, 25); /* 200 examples, batch 8, 1 epoch */
    ck_assert_int_eq(it_ar, it_ck);
    for (int i = 1; i < n_opt; i++) {
        char obj[64];
        snprintf(obj, sizeof obj, "optimizer/vars/%d", i);
        expect_same(&ck, ow, on[i], &ar, ar.file, obj);
    }
    mr_h5_free_strs(on, n_opt);
    H5Gclose(ow);
    char *name;
    hid_t root_vars;
    ck_assert_int_eq(mr_h5_open_group(&ar, ar.file, "vars", &root_vars, &err), MR_OK);
    ck_assert_int_eq(mr_h5_read_attr_str(&ar, root_vars, "name", &name, &err), MR_OK);
    ck_assert_str_eq(name, "sequential");
    free(name);
    H5Gclose(root_vars);
    mr_h5_close(&ck);
    mr_h5_close(&ar);

    /* exporting again replaces the archive */
    rc = run(export_exe, "m.h5 m.keras", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    ck_assert_int_eq(count_prefix("m.keras"), 1);
}
END_TEST

/* Bad input: exit 2, one line with `want`, nothing named bad.keras* left. */
static void expect_bad(const char *args, const char *want) {
    char *out;
    int rc = run(export_exe, args, &out);
    ck_assert_msg(rc == 2, "'%s' exited %d: %s", args, rc, out);
    ck_assert_msg(one_line(out) && strncmp(out, "mirrored_export: ", 17) == 0 && strstr(out, want),
                  "'%s': want '%s': %s", args, want, out);
    free(out);
    ck_assert_msg(count_prefix("bad.keras") == 0, "'%s' left files behind", args);
}

START_TEST(bad_input) {
    need_checkpoint();
    expect_bad("", "missing CHECKPOINT.h5");
    expect_bad("m.h5", "missing OUT.keras");
    expect_bad("m.h5 bad.keras extra", "extra");
    expect_bad("--bogus m.h5 bad.keras", "--bogus");
    expect_bad("nope.h5 bad.keras", "nope.h5");
    free(tu_write_text(dir, "x.h5", "this is text, not HDF5\n"));
    expect_bad("x.h5 bad.keras", "x.h5");
    /* an HDF5 file without /mirrored (a model Keras wrote, say) */
    mr_h5 h;
    mr_error err = {0};
    char path[4200];
    snprintf(path, sizeof path, "%s/keras_made.h5", dir);
    ck_assert_int_eq(mr_h5_create(&h, path, &err), MR_OK);
    float one = 1.0f;
    ck_assert_int_eq(mr_h5_write(&h, h.file, "model_weights/w", MR_H5_F32, 0, NULL, &one, &err),
                     MR_OK);
    ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
    expect_bad("keras_made.h5 bad.keras", "keras_made.h5: not a mirrored checkpoint");
    /* Keras loads only names ending in .keras */
    expect_bad("m.h5 bad.keras.zip", "bad.keras.zip: the archive's name must end in .keras");
    expect_bad("m.h5 bad.keras.h5", "must end in .keras");
    expect_bad("m.h5 .keras", "must end in .keras");
    /* a folder that does not exist */
    expect_bad("m.h5 nodir/bad.keras", "nodir/bad.keras: cannot write");
    snprintf(path, sizeof path, "%s/nodir", dir);
    ck_assert(!tu_exists(path));
}
END_TEST

/* A residual model exports as Keras's Functional: config.json
 * with its InputLayer, the [data] scale's Rescaling after it (the file
 * takes raw pixels), each layer's inbound node ([add]: two tensors) and
 * the output layer; the weights file's groups named by class and counter
 * (the conv2d named a is group conv2d), every weight the checkpoint's. */
START_TEST(graph_model_exported) {
    need_checkpoint();
    free(tu_write_text(dir, "res.cfg",
                       "[net]\nbatch=8\nepochs=1\n[data]\ntrain_images=x.npy\n"
                       "train_labels=y.npy\nscale=1/255\n[input]\nshape=8,8,1\n"
                       "[conv2d]\nname=a\nfilters=2\nsize=3\npadding=same\n"
                       "[conv2d]\nfilters=2\nsize=3\npadding=same\n[add]\nfrom=a\n"
                       "[globalavgpool]\n[dense]\nunits=4\nactivation=softmax\n"));
    char *out;
    int rc = run(train_exe, "--devices cpu:1 --quiet --save res.h5 res.cfg", &out);
    ck_assert_msg(rc == 0, "%s", out);
    free(out);
    rc = run(export_exe, "res.h5 res.keras", &out);
    ck_assert_msg(rc == 0 && strstr(out, "res.keras: "), "exit %d: %s", rc, out);
    free(out);
    char path[4200];
    snprintf(path, sizeof path, "%s/res.keras", dir);
    int zerr = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    ck_assert_msg(za != NULL, "not a zip (libzip error %d)", zerr);
    zip_uint64_t len;
    char *config = read_entry(za, 1, &len);
    const char *keys[] = {
        "{\"module\": \"keras.src.models.functional\", \"class_name\": \"Functional\"",
        "\"name\": \"input_layer\", \"inbound_nodes\": []}",
        /* [data] scale = 1/255 as a Rescaling after the input: the file takes raw pixels */
        "{\"module\": \"keras.layers\", \"class_name\": \"Rescaling\", \"config\": {\"name\": "
        "\"data_scale\"",
        "\"scale\": 0.003921569, \"offset\": 0.0}",
        "\"name\": \"data_scale\", \"inbound_nodes\": [{\"args\": [{\"class_name\": "
        "\"__keras_tensor__\", \"config\": {\"shape\": [null, 8, 8, 1], \"dtype\": \"float32\", "
        "\"keras_history\": [\"input_layer\", 0, 0]}}], \"kwargs\": {}}]}",
        "\"name\": \"a\", \"inbound_nodes\": [{\"args\": [{\"class_name\": \"__keras_tensor__\", "
        "\"config\": {\"shape\": [null, 8, 8, 1], \"dtype\": \"float32\", \"keras_history\": "
        "[\"data_scale\", 0, 0]}}], \"kwargs\": {}}]}",
        "\"name\": \"conv2d\", \"inbound_nodes\": [{\"args\": [{\"class_name\": "
        "\"__keras_tensor__\", \"config\": {\"shape\": [null, 8, 8, 2], \"dtype\": \"float32\", "
        "\"keras_history\": [\"a\", 0, 0]}}]",
        "\"name\": \"add\", \"inbound_nodes\": [{\"args\": [[{\"class_name\": "
        "\"__keras_tensor__\", \"config\": {\"shape\": [null, 8, 8, 2], \"dtype\": \"float32\", "
        "\"keras_history\": [\"conv2d\", 0, 0]}}, {\"class_name\": \"__keras_tensor__\", "
        "\"config\": {\"shape\": [null, 8, 8, 2], \"dtype\": \"float32\", \"keras_history\": "
        "[\"a\", 0, 0]}}]], \"kwargs\": {}}]}",
        "\"input_layers\": [\"input_layer\", 0, 0], \"output_layers\": [\"dense\", 0, 0]}, "
        "\"registered_name\": \"Functional\""};
    const char *p = config;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *at = strstr(p, keys[i]);
        ck_assert_msg(at != NULL, "missing %s in %s", keys[i], config);
        p = at + 1;
    }
    char *weights = read_entry(za, 2, &len);
    free(tu_write_file(dir, "res.weights.h5", weights, len));
    zip_close(za);
    free(config), free(weights);
    mr_h5 ck, ar;
    mr_error err = {0};
    snprintf(path, sizeof path, "%s/res.h5", dir);
    ck_assert_msg(mr_h5_open(&ck, path, &err) == MR_OK, "%s", err.msg);
    snprintf(path, sizeof path, "%s/res.weights.h5", dir);
    ck_assert_msg(mr_h5_open(&ar, path, &err) == MR_OK, "%s", err.msg);
    /* Keras's groups: class and counter, whatever the layer's name */
    expect_same(&ck, ck.file, "model_weights/a/a/kernel", &ar, ar.file, "layers/conv2d/vars/0");
    expect_same(&ck, ck.file, "model_weights/conv2d/conv2d/kernel", &ar, ar.file,
                "layers/conv2d_1/vars/0");
    expect_same(&ck, ck.file, "model_weights/dense/dense/bias", &ar, ar.file,
                "layers/dense/vars/1");
    ck_assert(mr_h5_exists(&ar, ar.file, "layers/input_layer/vars"));
    ck_assert(mr_h5_exists(&ar, ar.file, "layers/rescaling/vars"));
    mr_h5_close(&ck);
    mr_h5_close(&ar);
}
END_TEST

int main(void) {
    Suite *s = suite_create("export");
    TCase *tc = tcase_create("export");
    tcase_add_unchecked_fixture(tc, setup_once, teardown_once);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, exports_keras_archive);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, graph_model_exported);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
