/* test_api.c: the public C API (include/mirrored.h) through libmirrored:
 * each call and its refusals, fit on arrays and on a .cfg's own data, a
 * second fit going on from the first, evaluate, predict, save and load,
 * a stop from another thread, and the same params_hash as mirrored_train. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "include/mirrored.h"
#include "tests/testutil.h"

/* a tiny dense model of 8x8x1 images and 4 classes */
static const char *tiny_cfg = "[net]\nbatch=16\nepochs=1\nseed=3\nlearning_rate=0.01\n"
                              "[data]\ntrain_images =\nscale=1/255\n"
                              "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\n"
                              "activation=relu\n[dense]\nunits=4\nactivation=softmax\n";

/* the same with its own [data] files (tu_write_image_data) */
static const char *data_cfg = "[net]\nbatch=16\nepochs=2\nseed=5\nlearning_rate=0.01\n"
                              "validation_split=0.25\n"
                              "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
                              "test_images=tx.npy\ntest_labels=ty.npy\nscale=1/255\n"
                              "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\n"
                              "activation=relu\n[dense]\nunits=4\nactivation=softmax\n";

#define N 128
static uint8_t xs[N * 64];
static int32_t ys[N];
static char dir[4096];

/* images whose class brightens its own pixels (learnable), labels i % 4 */
static void make_arrays(void) {
    for (int i = 0; i < N; i++) {
        ys[i] = i % 4;
        for (int j = 0; j < 64; j++)
            xs[i * 64 + j] = (uint8_t)((i * 31 + j * 17) % 100 + (j % 4 == ys[i] ? 120 : 0));
    }
}

static mirrored_array x_of(int64_t n) {
    return (mirrored_array){.dtype = MIRRORED_UINT8, .ndim = 4, .shape = {n, 8, 8, 1}, .data = xs};
}

static mirrored_array y_of(int64_t n) {
    return (mirrored_array){.dtype = MIRRORED_INT32, .ndim = 1, .shape = {n}, .data = ys};
}

static mirrored_model *tiny(void) {
    mirrored_model *m = NULL;
    mirrored_error err;
    ck_assert_msg(mirrored_model_from_config(tiny_cfg, "tiny", NULL, &m, &err) == MIRRORED_OK, "%s",
                  err.message);
    return m;
}

static void setup(void) {
    make_arrays();
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    tu_write_image_data(dir, "x.npy", "y.npy", 128, 4);
    tu_write_image_data(dir, "tx.npy", "ty.npy", 32, 4);
    free(tu_write_text(dir, "d.cfg", data_cfg));
}

static char *in_dir(const char *name) {
    static char path[3][8192];
    static int k;
    k = (k + 1) % 3;
    snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
    return path[k];
}

START_TEST(job_version_devices) {
    mirrored_error err;
    ck_assert_int_eq(mirrored_init(NULL, NULL, &err), MIRRORED_OK);
    ck_assert_int_eq(mirrored_init(NULL, NULL, NULL), MIRRORED_OK);
    int rank = -1, size = -1, count = 0;
    ck_assert_int_eq(mirrored_job(&rank, &size, &err), MIRRORED_OK);
    ck_assert_int_eq(rank, 0);
    ck_assert_int_eq(size, 1);
    ck_assert_str_eq(mirrored_version(), "0.1.0");
    char buf[4096];
    ck_assert_int_eq(mirrored_list_devices(buf, sizeof buf, &count, &err), MIRRORED_OK);
    ck_assert_int_ge(count, 1);
    ck_assert_msg(strncmp(buf, "cpu:0\n", 6) == 0, "%s", buf);
    int lines = 0;
    for (const char *p = buf; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, count);
    ck_assert_int_eq(mirrored_list_devices(buf, 3, &count, &err), MIRRORED_ERR_USAGE);
    ck_assert_int_eq(mirrored_job(NULL, &size, &err), MIRRORED_ERR_USAGE);
}
END_TEST

START_TEST(null_handles_refused) {
    mirrored_error err;
    mirrored_fit_options o = mirrored_fit_options_default();
    mirrored_model_info info;
    double loss, metric;
    float out[4];
    mirrored_array x = x_of(1);
    char buf[64];
    ck_assert_int_eq(mirrored_model_fit(NULL, &o, NULL, &err), MIRRORED_ERR_USAGE);
    ck_assert_msg(err.message[0] != '\0', "no message");
    ck_assert_int_eq(mirrored_model_fit(NULL, &o, NULL, NULL), MIRRORED_ERR_USAGE);
    ck_assert_int_eq(mirrored_model_get_info(NULL, &info, &err), MIRRORED_ERR_USAGE);
    ck_assert_int_eq(mirrored_model_summary(NULL, buf, sizeof buf, &err), MIRRORED_ERR_USAGE);
    ck_assert_int_eq(mirrored_model_evaluate(NULL, NULL, 0, NULL, NULL, &loss, &metric, &err),
                     MIRRORED_ERR_USAGE);
    ck_assert_int_eq(mirrored_model_predict(NULL, NULL, 0, &x, out, 4, &err), MIRRORED_ERR_USAGE);
    ck_assert_int_eq(mirrored_model_save(NULL, "a.h5", &err), MIRRORED_ERR_USAGE);
    ck_assert_int_eq(mirrored_model_load(NULL, NULL, &err), MIRRORED_ERR_USAGE);
    ck_assert_int_eq(mirrored_model_from_config(NULL, NULL, NULL, NULL, &err), MIRRORED_ERR_USAGE);
    mirrored_model_request_stop(NULL);
    mirrored_model_destroy(NULL);
    mirrored_model *m = tiny();
    ck_assert_int_eq(mirrored_model_fit(m, NULL, NULL, &err), MIRRORED_ERR_USAGE);
    ck_assert_int_eq(mirrored_model_predict(m, NULL, 0, &x, NULL, 4, &err), MIRRORED_ERR_USAGE);
    mirrored_model_destroy(m);
}
END_TEST

/* mirrored_fit_options carries its layout's version: the default has this
 * header's; another is refused before a field is read, and the model is
 * left as it was (a fit after it runs). */
START_TEST(fit_options_version) {
    mirrored_error err;
    mirrored_fit_options o = mirrored_fit_options_default();
    ck_assert_int_eq(o.struct_version, MIRRORED_FIT_OPTIONS_VERSION);
    mirrored_model *m = tiny();
    for (int v = 0; v < 3; v += 2) { /* 0: not set; 2: a newer header's */
        o.struct_version = MIRRORED_FIT_OPTIONS_VERSION + v - 1;
        o.devices = "no-such-device:7"; /* never read */
        ck_assert_int_eq(mirrored_model_fit(m, &o, NULL, &err), MIRRORED_ERR_USAGE);
        ck_assert_msg(strstr(err.message, "struct_version") != NULL, "%s", err.message);
    }
    ck_assert_int_eq(err.status, MIRRORED_ERR_USAGE);
    mirrored_model_destroy(m);
}
END_TEST

START_TEST(load_refusals) {
    mirrored_error err;
    mirrored_model *m = (mirrored_model *)1;
    /* a missing file has its own status (the Python package's FileNotFoundError) */
    ck_assert_int_eq(mirrored_model_load("/nonexistent/m.cfg", &m, &err), MIRRORED_ERR_NOT_FOUND);
    ck_assert_int_eq(err.status, MIRRORED_ERR_NOT_FOUND);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err.message, "/nonexistent/m.cfg") != NULL, "%s", err.message);
    free(tu_write_text(dir, "junk.h5", "not a model at all\n"));
    ck_assert_int_ne(mirrored_model_load(in_dir("junk.h5"), &m, &err), MIRRORED_OK);
    ck_assert_msg(strstr(err.message, "junk.h5") != NULL, "%s", err.message);
    ck_assert_int_eq(mirrored_model_from_config("[net]\nbogus=1\n", "b", NULL, &m, &err),
                     MIRRORED_ERR_CONFIG);
}
END_TEST

START_TEST(info_and_summary) {
    mirrored_model *m = tiny();
    mirrored_model_info info;
    mirrored_error err;
    ck_assert_int_eq(mirrored_model_get_info(m, &info, &err), MIRRORED_OK);
    ck_assert_int_eq(info.input_ndim, 3);
    ck_assert_int_eq(info.input_shape[0], 8);
    ck_assert_int_eq(info.outputs, 4);
    ck_assert_int_eq(info.label_width, 1);
    ck_assert_int_eq(info.regression, 0);
    ck_assert_int_eq(info.params, 64 * 16 + 16 + 16 * 4 + 4);
    ck_assert_int_eq(info.has_data, 0);
    ck_assert_str_eq(info.metric, "accuracy");
    ck_assert_str_eq(info.source, "cfg");
    ck_assert_int_eq(info.layers, 3);         /* flatten, dense, dense */
    ck_assert_str_eq(info.optimizer, "adam"); /* the default */
    ck_assert_int_eq(info.updates, 0);
    ck_assert(info.scale == (double)(1.0f / 255.0f) && info.standardized == 0);
    char buf[8192];
    ck_assert_int_eq(mirrored_model_summary(m, buf, sizeof buf, &err), MIRRORED_OK);
    ck_assert_msg(strstr(buf, "1,108") != NULL || strstr(buf, "1108") != NULL, "%s", buf);
    mirrored_model_destroy(m);
}
END_TEST

START_TEST(data_refusals) {
    mirrored_model *m = tiny();
    mirrored_error err;
    mirrored_fit_options o = mirrored_fit_options_default();
    mirrored_array x = x_of(N), y = y_of(N);
    o.x = &x, o.y = &y;
    o.devices = "cpu:x";
    ck_assert_int_eq(mirrored_model_fit(m, &o, NULL, &err), MIRRORED_ERR_USAGE);
    ck_assert_msg(strstr(err.message, "cpu:x") != NULL, "%s", err.message);
    o.devices = "cpu:2";
    mirrored_array bad = x;
    bad.dtype = MIRRORED_INT32;
    o.x = &bad;
    ck_assert_int_eq(mirrored_model_fit(m, &o, NULL, &err), MIRRORED_ERR_USAGE);
    ck_assert_msg(strstr(err.message, "int32") != NULL, "%s", err.message);
    bad = x;
    bad.dtype = (mirrored_dtype)7;
    ck_assert_int_eq(mirrored_model_fit(m, &o, NULL, &err), MIRRORED_ERR_USAGE);
    bad = (mirrored_array){.dtype = MIRRORED_UINT8, .ndim = 3, .shape = {N, 4, 16}, .data = xs};
    ck_assert_int_eq(mirrored_model_fit(m, &o, NULL, &err), MIRRORED_ERR_DATA);
    ck_assert_msg(strstr(err.message, "fit x") != NULL, "%s", err.message);
    o.x = &x;
    mirrored_array short_y = y_of(N - 1);
    o.y = &short_y;
    ck_assert_int_eq(mirrored_model_fit(m, &o, NULL, &err), MIRRORED_ERR_USAGE);
    int32_t big[N];
    memcpy(big, ys, sizeof big);
    big[7] = 4;
    mirrored_array big_y = {.dtype = MIRRORED_INT32, .ndim = 1, .shape = {N}, .data = big};
    o.y = &big_y;
    ck_assert_int_eq(mirrored_model_fit(m, &o, NULL, &err), MIRRORED_ERR_DATA);
    ck_assert_msg(strstr(err.message, "label 4 of example 7") != NULL, "%s", err.message);
    o.y = NULL;
    ck_assert_int_eq(mirrored_model_fit(m, &o, NULL, &err), MIRRORED_ERR_USAGE);
    o.x = o.y = NULL; /* no [data] in the .cfg */
    ck_assert_int_eq(mirrored_model_fit(m, &o, NULL, &err), MIRRORED_ERR_USAGE);
    double loss, metric;
    ck_assert_int_eq(mirrored_model_evaluate(m, NULL, 0, NULL, NULL, &loss, &metric, &err),
                     MIRRORED_ERR_USAGE);
    float out[N * 4];
    ck_assert_int_eq(mirrored_model_predict(m, "cpu", 0, &x, out, N * 4 - 1, &err),
                     MIRRORED_ERR_USAGE);
    ck_assert_msg(strstr(err.message, "room") != NULL, "%s", err.message);
    ck_assert_int_eq(mirrored_model_save(m, in_dir("m.txt"), &err), MIRRORED_ERR_USAGE);
    ck_assert_msg(strstr(err.message, "m.txt") != NULL, "%s", err.message);
    mirrored_model_destroy(m);
}
END_TEST

/* fit on 2 replicas twice: the second goes on (updates add up), and
 * evaluate, predict on the arrays */
START_TEST(fit_arrays_twice) {
    mirrored_model *m = tiny();
    mirrored_error err;
    mirrored_fit_options o = mirrored_fit_options_default();
    mirrored_array x = x_of(N), y = y_of(N);
    o.x = &x, o.y = &y, o.devices = "cpu:2", o.epochs = 2;
    mirrored_fit_result r1, r2;
    ck_assert_msg(mirrored_model_fit(m, &o, &r1, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(r1.replicas, 2);
    ck_assert_int_eq(r1.epochs, 2);
    ck_assert_int_eq(r1.updates, 2 * N / 32);
    ck_assert_int_eq(r1.stopped, 0);
    ck_assert_msg(mirrored_model_fit(m, &o, &r2, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(r2.epochs, 4);
    ck_assert_int_eq(r2.updates, 2 * r1.updates);
    ck_assert_msg(r2.params_hash != r1.params_hash, "the second fit changed nothing");
    /* another device count: the weights move to the new replicas */
    o.devices = "cpu:1";
    o.epochs = 1;
    mirrored_fit_result r3;
    ck_assert_msg(mirrored_model_fit(m, &o, &r3, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(r3.updates, r2.updates + N / 16);
    double loss, acc;
    ck_assert_msg(mirrored_model_evaluate(m, "cpu:2", 0, &x, &y, &loss, &acc, &err) == MIRRORED_OK,
                  "%s", err.message);
    ck_assert_msg(acc > 0.5 && loss > 0.0, "loss %g accuracy %g", loss, acc);
    float out[N * 4];
    ck_assert_msg(mirrored_model_predict(m, NULL, 0, &x, out, N * 4, &err) == MIRRORED_OK, "%s",
                  err.message);
    for (int i = 0; i < N; i++) {
        const double s = out[4 * i] + out[4 * i + 1] + out[4 * i + 2] + out[4 * i + 3];
        ck_assert_msg(s > 0.999 && s < 1.001, "row %d sums to %g", i, s);
    }
    mirrored_model_destroy(m);
}
END_TEST

/* a second fit goes on where the first ended (epochs, updates, optimizer
 * state): fit(1) twice is fit(2) on the same data, bit for bit */
START_TEST(two_fits_are_one) {
    mirrored_error err;
    mirrored_array x = x_of(N), y = y_of(N);
    mirrored_fit_options o = mirrored_fit_options_default();
    o.x = &x, o.y = &y, o.devices = "cpu:2";
    mirrored_fit_result once, twice;
    mirrored_model *a = tiny(), *b = tiny();
    o.epochs = 2;
    ck_assert_msg(mirrored_model_fit(a, &o, &once, &err) == MIRRORED_OK, "%s", err.message);
    o.epochs = 1;
    ck_assert_msg(mirrored_model_fit(b, &o, &twice, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_msg(mirrored_model_fit(b, &o, &twice, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(twice.epochs, 2);
    ck_assert_int_eq(twice.updates, once.updates);
    ck_assert_msg(twice.params_hash == once.params_hash, "%016llx != %016llx",
                  (unsigned long long)twice.params_hash, (unsigned long long)once.params_hash);
    mirrored_model_destroy(a);
    mirrored_model_destroy(b);
}
END_TEST

/* a stop asked before a fit applies to its first update; the fit drops the
 * request when it returns, so the next fit runs whole */
START_TEST(stop_before_fit) {
    mirrored_error err;
    mirrored_array x = x_of(N), y = y_of(N);
    mirrored_fit_options o = mirrored_fit_options_default();
    o.x = &x, o.y = &y, o.devices = "cpu:2", o.epochs = 1;
    mirrored_model *m = tiny();
    mirrored_model_request_stop(m);
    mirrored_fit_result r;
    ck_assert_msg(mirrored_model_fit(m, &o, &r, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(r.stopped, 1);
    ck_assert_int_eq(r.updates, 1);
    ck_assert_msg(mirrored_model_fit(m, &o, &r, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(r.stopped, 0);
    ck_assert_int_eq(r.updates, 1 + N / 32);
    mirrored_model_destroy(m);
}
END_TEST

/* the epoch callback's non-zero return stops after that epoch */
static int stop_at_first(void *user, const mirrored_epoch_logs *l) {
    int *seen = user;
    ck_assert_int_eq(l->epochs, 3);
    (*seen)++;
    return 1;
}

START_TEST(epoch_callback_stops) {
    mirrored_model *m = tiny();
    mirrored_error err;
    mirrored_fit_options o = mirrored_fit_options_default();
    mirrored_array x = x_of(N), y = y_of(N);
    int seen = 0;
    o.x = &x, o.y = &y, o.devices = "cpu:2", o.epochs = 3, o.on_epoch = stop_at_first;
    o.user = &seen;
    o.validation_split = 0.25;
    mirrored_fit_result r;
    ck_assert_msg(mirrored_model_fit(m, &o, &r, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(seen, 1);
    ck_assert_int_eq(r.early_stopped, 1);
    ck_assert_int_eq(r.epochs, 1);
    ck_assert_int_eq(r.updates, 96 / 32);
    mirrored_model_destroy(m);
}
END_TEST

/* a save from the fit's own epoch callback (Keras's ModelCheckpoint):
 * PATH.keras written with the epoch's weights, PATH.h5 refused */
typedef struct save_in_epoch {
    mirrored_model *m;
    int saved, refused;
} save_in_epoch;

static int save_each_epoch(void *user, const mirrored_epoch_logs *l) {
    save_in_epoch *s = user;
    mirrored_error err;
    char name[64];
    snprintf(name, sizeof name, "epoch%d.keras", l->epoch);
    if (mirrored_model_save(s->m, in_dir(name), &err) == MIRRORED_OK) s->saved++;
    if (mirrored_model_save(s->m, in_dir("epoch.h5"), &err) == MIRRORED_ERR_USAGE &&
        strstr(err.message, "epoch callback") != NULL)
        s->refused++;
    return 0;
}

START_TEST(save_from_epoch_callback) {
    mirrored_model *m = tiny(), *back = NULL;
    mirrored_error err;
    mirrored_fit_options o = mirrored_fit_options_default();
    mirrored_array x = x_of(N), y = y_of(N);
    save_in_epoch s = {.m = m};
    o.x = &x, o.y = &y, o.devices = "cpu:2", o.epochs = 2, o.on_epoch = save_each_epoch;
    o.user = &s;
    ck_assert_msg(mirrored_model_fit(m, &o, NULL, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(s.saved, 2);
    ck_assert_int_eq(s.refused, 2);
    ck_assert(!tu_exists(in_dir("epoch.h5")));
    /* the last epoch's file predicts as the fitted model does */
    float a[4 * 4], b[4 * 4];
    mirrored_array x4 = x_of(4);
    ck_assert_msg(mirrored_model_load(in_dir("epoch1.keras"), &back, &err) == MIRRORED_OK, "%s",
                  err.message);
    ck_assert_int_eq(mirrored_model_predict(m, "cpu:1", 0, &x4, a, 16, &err), MIRRORED_OK);
    ck_assert_int_eq(mirrored_model_predict(back, "cpu:1", 0, &x4, b, 16, &err), MIRRORED_OK);
    for (int i = 0; i < 16; i++)
        ck_assert_float_eq_tol(a[i], b[i], 1e-5f);
    /* outside a callback a save during no fit is the ordinary one */
    ck_assert_int_eq(mirrored_model_save(m, in_dir("after.h5"), &err), MIRRORED_OK);
    mirrored_model_destroy(back);
    mirrored_model_destroy(m);
}
END_TEST

/* get_weight and set_weight: Keras's order and shapes (Flatten, then
 * Dense kernels (in, out) before their biases); zero weights give the
 * uniform softmax; a wrong shape or index is refused by name */
START_TEST(weights_round_trip) {
    mirrored_model *m = tiny();
    mirrored_error err;
    int count = 0;
    ck_assert_int_eq(mirrored_model_get_weight(m, 0, NULL, NULL, 0, &count, &err), MIRRORED_OK);
    ck_assert_int_eq(count, 4);
    const int64_t shapes[4][2] = {{64, 16}, {16, 0}, {16, 4}, {4, 0}};
    static float buf[64 * 16], zeros[64 * 16];
    for (int i = 0; i < 4; i++) {
        mirrored_array w;
        ck_assert_msg(mirrored_model_get_weight(m, i, &w, buf, 64 * 16, NULL, &err) == MIRRORED_OK,
                      "%s", err.message);
        ck_assert_int_eq(w.ndim, shapes[i][1] ? 2 : 1);
        ck_assert_int_eq(w.shape[0], shapes[i][0]);
        if (shapes[i][1]) ck_assert_int_eq(w.shape[1], shapes[i][1]);
        w.data = zeros;
        ck_assert_msg(mirrored_model_set_weight(m, i, &w, &err) == MIRRORED_OK, "%s", err.message);
    }
    mirrored_array wrong = {.dtype = MIRRORED_FLOAT32, .ndim = 1, .shape = {5}, .data = zeros};
    ck_assert_int_eq(mirrored_model_set_weight(m, 1, &wrong, &err), MIRRORED_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.message, "shape (16)"));
    mirrored_array w;
    ck_assert_int_eq(mirrored_model_get_weight(m, 4, &w, NULL, 0, NULL, &err), MIRRORED_ERR_USAGE);
    ck_assert_int_eq(mirrored_model_get_weight(m, 0, &w, buf, 10, NULL, &err), MIRRORED_ERR_USAGE);
    float p[2 * 4];
    mirrored_array x2 = x_of(2);
    ck_assert_int_eq(mirrored_model_predict(m, "cpu:1", 0, &x2, p, 8, &err), MIRRORED_OK);
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq_tol(p[i], 0.25f, 1e-6f);
    /* a fit, then the weights read back are the fitted ones (not zero) */
    mirrored_fit_options o = mirrored_fit_options_default();
    mirrored_array x = x_of(N), y = y_of(N);
    o.x = &x, o.y = &y, o.devices = "cpu:2", o.epochs = 1;
    ck_assert_msg(mirrored_model_fit(m, &o, NULL, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(mirrored_model_get_weight(m, 3, &w, buf, 4, NULL, &err), MIRRORED_OK);
    ck_assert(buf[0] != 0.0f || buf[1] != 0.0f || buf[2] != 0.0f || buf[3] != 0.0f);
    mirrored_model_destroy(m);
}
END_TEST

/* Keras's save_weights and load_weights: a fitted model's PATH.weights.h5
 * into a fresh one of the same .cfg gives the same weights, bit for bit,
 * and the same outputs; a file of another architecture is refused. */
START_TEST(weights_file_round_trip) {
    mirrored_model *a = tiny(), *b = tiny();
    mirrored_error err;
    mirrored_fit_options o = mirrored_fit_options_default();
    mirrored_array x = x_of(N), y = y_of(N);
    o.x = &x, o.y = &y, o.devices = "cpu:2", o.epochs = 1;
    ck_assert_msg(mirrored_model_fit(a, &o, NULL, &err) == MIRRORED_OK, "%s", err.message);
    char path[4096];
    snprintf(path, sizeof path, "%s", in_dir("tiny.weights.h5"));
    ck_assert_msg(mirrored_model_save(a, path, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_msg(mirrored_model_load_weights(b, path, &err) == MIRRORED_OK, "%s", err.message);
    static float wa[64 * 16], wb[64 * 16];
    for (int i = 0; i < 4; i++) {
        mirrored_array w;
        ck_assert_int_eq(mirrored_model_get_weight(a, i, &w, wa, 64 * 16, NULL, &err), MIRRORED_OK);
        ck_assert_int_eq(mirrored_model_get_weight(b, i, &w, wb, 64 * 16, NULL, &err), MIRRORED_OK);
        int64_t n = w.ndim == 2 ? w.shape[0] * w.shape[1] : w.shape[0];
        ck_assert_msg(memcmp(wa, wb, sizeof(float) * (size_t)n) == 0, "weight %d differs", i);
    }
    float pa[4 * 4], pb[4 * 4];
    mirrored_array x4 = x_of(4);
    ck_assert_int_eq(mirrored_model_predict(a, "cpu:1", 0, &x4, pa, 16, &err), MIRRORED_OK);
    ck_assert_int_eq(mirrored_model_predict(b, "cpu:1", 0, &x4, pb, 16, &err), MIRRORED_OK);
    ck_assert(memcmp(pa, pb, sizeof pa) == 0);
    /* another architecture's weights: refused by name, the model as it was */
    mirrored_model *wide = NULL;
    const char *other = "[net]\nbatch=16\nepochs=1\nseed=3\n[input]\nshape=64\n[dense]\nunits=8\n"
                        "[dense]\nunits=4\nactivation=softmax\n";
    ck_assert_int_eq(mirrored_model_from_config(other, "other", NULL, &wide, &err), MIRRORED_OK);
    ck_assert_int_ne(mirrored_model_load_weights(wide, path, &err), MIRRORED_OK);
    ck_assert_msg(strstr(err.message, path) != NULL, "%s", err.message);
    ck_assert_int_ne(mirrored_model_load_weights(b, "/nonexistent.weights.h5", &err), MIRRORED_OK);
    mirrored_model_destroy(wide);
    mirrored_model_destroy(a);
    mirrored_model_destroy(b);
}
END_TEST

/* a .cfg with its own [data]: fit, evaluate its test set, save .keras and
 * .h5, load the .h5 and predict the same values */
START_TEST(cfg_data_save_load) {
    mirrored_model *m = NULL, *back = NULL;
    mirrored_error err;
    ck_assert_msg(mirrored_model_load(in_dir("d.cfg"), &m, &err) == MIRRORED_OK, "%s", err.message);
    mirrored_model_info info;
    ck_assert_int_eq(mirrored_model_get_info(m, &info, &err), MIRRORED_OK);
    ck_assert_int_eq(info.has_data, 1);
    ck_assert_int_eq(info.epochs, 2);
    mirrored_fit_options o = mirrored_fit_options_default();
    o.devices = "cpu:2";
    mirrored_fit_result r;
    ck_assert_msg(mirrored_model_fit(m, &o, &r, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(r.updates, 2 * 96 / 32);
    double loss, acc;
    ck_assert_msg(mirrored_model_evaluate(m, NULL, 0, NULL, NULL, &loss, &acc, &err) == MIRRORED_OK,
                  "%s", err.message);
    ck_assert_msg(loss > 0.0 && acc >= 0.0 && acc <= 1.0, "loss %g accuracy %g", loss, acc);
    ck_assert_msg(mirrored_model_save(m, in_dir("m.keras"), &err) == MIRRORED_OK, "%s",
                  err.message);
    ck_assert(tu_exists(in_dir("m.keras")));
    ck_assert_msg(mirrored_model_save(m, in_dir("m.h5"), &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_msg(mirrored_model_load(in_dir("m.h5"), &back, &err) == MIRRORED_OK, "%s",
                  err.message);
    static float a[N * 4], b[N * 4];
    mirrored_array x = x_of(N);
    ck_assert_msg(mirrored_model_predict(m, "cpu:2", 0, &x, a, N * 4, &err) == MIRRORED_OK, "%s",
                  err.message);
    ck_assert_msg(mirrored_model_predict(back, "cpu:1", 0, &x, b, N * 4, &err) == MIRRORED_OK, "%s",
                  err.message);
    ck_assert_msg(memcmp(a, b, sizeof a) == 0, "the loaded .h5 predicts otherwise");
    /* the .h5 says where it comes from and where training stood */
    mirrored_model_info back_info;
    ck_assert_int_eq(mirrored_model_get_info(back, &back_info, &err), MIRRORED_OK);
    ck_assert_str_eq(back_info.source, "checkpoint");
    ck_assert_int_eq(back_info.updates, r.updates);
    ck_assert_int_eq(back_info.layers, info.layers);
    /* mirrored_eval reads the .h5, and mirrored_train goes on from it */
    char *eval = tu_build_path("launch/mirrored_eval"),
         *train = tu_build_path("launch/mirrored_train");
    char cmd[16384], *out;
    snprintf(cmd, sizeof cmd,
             "cd %s && %s m.h5 --devices cpu --quiet && %s d.cfg --resume m.h5 --epochs 3 --quiet",
             dir, eval, train);
    const int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "'%s' exited %d: %s", cmd, rc, out);
    free(out), free(eval), free(train);
    /* the Keras archive loads too */
    mirrored_model *k = NULL;
    ck_assert_msg(mirrored_model_load(in_dir("m.keras"), &k, &err) == MIRRORED_OK, "%s",
                  err.message);
    ck_assert_int_eq(mirrored_model_get_info(k, &info, &err), MIRRORED_OK);
    ck_assert_str_eq(info.source, "keras");
    ck_assert_msg(mirrored_model_predict(k, "cpu:1", 0, &x, b, N * 4, &err) == MIRRORED_OK, "%s",
                  err.message);
    mirrored_model_destroy(k);
    /* a loaded checkpoint saves as .keras before any replica is built
     * (mirrored_export's way): the archive of the fitted model's weights,
     * which predicts as m.keras does */
    mirrored_model *ck = NULL;
    ck_assert_msg(mirrored_model_load(in_dir("m.h5"), &ck, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_msg(mirrored_model_save(ck, in_dir("ck.keras"), &err) == MIRRORED_OK, "%s",
                  err.message);
    mirrored_model_destroy(ck);
    ck_assert_msg(mirrored_model_load(in_dir("ck.keras"), &k, &err) == MIRRORED_OK, "%s",
                  err.message);
    ck_assert_msg(mirrored_model_predict(k, "cpu:1", 0, &x, a, N * 4, &err) == MIRRORED_OK, "%s",
                  err.message);
    ck_assert_msg(memcmp(a, b, sizeof a) == 0, "the .keras of the loaded .h5 predicts otherwise");
    mirrored_model_destroy(k);
    /* the .h5 goes on training: its update count is the checkpoint's */
    mirrored_fit_result r2;
    ck_assert_msg(mirrored_model_fit(back, &o, &r2, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(r2.updates, 2 * r.updates);
    mirrored_model_destroy(back);
    mirrored_model_destroy(m);
}
END_TEST

static int count_epochs(void *user, const mirrored_epoch_logs *l) {
    (void)l;
    ++*(int *)user;
    return 0;
}

/* the same .cfg, seed and devices: the params_hash of mirrored_train --json */
START_TEST(parity_with_mirrored_train) {
    char *exe = tu_build_path("launch/mirrored_train"), cmd[16384], *out, hash[17], mine[17];
    snprintf(cmd, sizeof cmd, "cd %s && %s d.cfg --devices cpu:2 --quiet --json p.json", dir, exe);
    int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "'%s' exited %d: %s", cmd, rc, out);
    free(out), free(exe);
    tu_params_hash(dir, "p.json", hash);
    mirrored_model *m = NULL;
    mirrored_error err;
    ck_assert_msg(mirrored_model_load(in_dir("d.cfg"), &m, &err) == MIRRORED_OK, "%s", err.message);
    /* a predict first builds replicas on other devices: the fit still
     * starts from the seed's weights, as mirrored_train does */
    static float probs[N * 4];
    mirrored_array x = x_of(N);
    ck_assert_msg(mirrored_model_predict(m, "cpu:1", 0, &x, probs, N * 4, &err) == MIRRORED_OK,
                  "%s", err.message);
    mirrored_fit_options o = mirrored_fit_options_default();
    o.devices = "cpu:2";
    mirrored_fit_result r;
    ck_assert_msg(mirrored_model_fit(m, &o, &r, &err) == MIRRORED_OK, "%s", err.message);
    snprintf(mine, sizeof mine, "%016llx", (unsigned long long)r.params_hash);
    ck_assert_msg(strcmp(mine, hash) == 0, "mirrored_model_fit %s, mirrored_train %s", mine, hash);
    mirrored_model_destroy(m);
    /* with an epoch callback (its verdict agreed after each epoch): the same bits */
    ck_assert_msg(mirrored_model_load(in_dir("d.cfg"), &m, &err) == MIRRORED_OK, "%s", err.message);
    int epochs = 0;
    o.on_epoch = count_epochs, o.user = &epochs;
    ck_assert_msg(mirrored_model_fit(m, &o, &r, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(epochs, 2);
    snprintf(mine, sizeof mine, "%016llx", (unsigned long long)r.params_hash);
    ck_assert_msg(strcmp(mine, hash) == 0, "with an epoch callback %s, mirrored_train %s", mine,
                  hash);
    mirrored_model_destroy(m);
}
END_TEST

/* float32 inputs (n, 4) read in place, float targets (n) of a regression,
 * validation_data: the epoch logs have its loss, the metric is mae */
static int saw_val(void *user, const mirrored_epoch_logs *l) {
    *(int *)user += l->has_val && l->val_loss > 0.0;
    return 0;
}

START_TEST(regression_float_targets) {
    static const char *cfg = "[net]\nbatch=8\nepochs=3\noptimizer=sgd\nlearning_rate=0.05\n"
                             "loss=mse\nseed=2\n[data]\ntrain_images =\n"
                             "[input]\nshape=4\n[dense]\nunits=1\nactivation=linear\n";
    mirrored_model *m = NULL;
    mirrored_error err;
    ck_assert_msg(mirrored_model_from_config(cfg, "lin", NULL, &m, &err) == MIRRORED_OK, "%s",
                  err.message);
    mirrored_model_info info;
    ck_assert_int_eq(mirrored_model_get_info(m, &info, &err), MIRRORED_OK);
    ck_assert_int_eq(info.regression, 1);
    ck_assert_str_eq(info.metric, "mae");
    static float x[64 * 4], t[64];
    for (int i = 0; i < 64; i++) {
        for (int j = 0; j < 4; j++)
            x[i * 4 + j] = (float)((i * 7 + j * 3) % 11) / 11.0f;
        t[i] = x[i * 4] - 0.5f * x[i * 4 + 1] + 0.25f;
    }
    mirrored_array xa = {.dtype = MIRRORED_FLOAT32, .ndim = 2, .shape = {48, 4}, .data = x};
    mirrored_array ya = {.dtype = MIRRORED_FLOAT32, .ndim = 1, .shape = {48}, .data = t};
    mirrored_array vx = {
        .dtype = MIRRORED_FLOAT32, .ndim = 2, .shape = {16, 4}, .data = x + 48 * 4};
    mirrored_array vy = {.dtype = MIRRORED_FLOAT32, .ndim = 2, .shape = {16, 1}, .data = t + 48};
    /* class ids are no targets */
    mirrored_array ids = y_of(48);
    mirrored_fit_options o = mirrored_fit_options_default();
    int vals = 0;
    o.x = &xa, o.y = &ids, o.devices = "cpu:2";
    ck_assert_int_eq(mirrored_model_fit(m, &o, NULL, &err), MIRRORED_ERR_DATA);
    o.y = &ya, o.val_x = &vx, o.val_y = &vy, o.on_epoch = saw_val, o.user = &vals;
    mirrored_fit_result r;
    ck_assert_msg(mirrored_model_fit(m, &o, &r, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(vals, 3);
    ck_assert_int_eq(r.updates, 3 * 48 / 16);
    double loss, mae;
    ck_assert_msg(mirrored_model_evaluate(m, "cpu", 0, &vx, &vy, &loss, &mae, &err) == MIRRORED_OK,
                  "%s", err.message);
    ck_assert_msg(loss >= 0.0 && mae >= 0.0, "loss %g mae %g", loss, mae);
    float out[16];
    ck_assert_msg(mirrored_model_predict(m, "cpu", 0, &vx, out, 16, &err) == MIRRORED_OK, "%s",
                  err.message);
    double se = 0.0;
    for (int i = 0; i < 16; i++)
        se += (out[i] - t[48 + i]) * (out[i] - t[48 + i]);
    ck_assert_msg(fabs(se / 16 - loss) < 1e-4 * (1 + loss), "predict's mse %g, evaluate's %g",
                  se / 16, loss);
    mirrored_model_destroy(m);
}
END_TEST

/* ---- a stop from another thread ---------------------------------------- */

typedef struct stopper {
    sem_t stepped;
    mirrored_model *m;
    int timed_out;
} stopper;

static void post_step(void *user, const mirrored_step_logs *l) {
    (void)l;
    sem_post(&((stopper *)user)->stepped);
}

/* waits for the fit's first update (60 s only to fail), then asks it to stop */
static void *stop_thread(void *arg) {
    stopper *s = arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    int rc;
    while ((rc = sem_timedwait(&s->stepped, &until)) != 0 && errno == EINTR)
        ;
    s->timed_out = rc != 0;
    mirrored_model_request_stop(s->m);
    return NULL;
}

START_TEST(stop_from_another_thread) {
    stopper s = {.m = tiny()};
    sem_init(&s.stepped, 0, 0);
    mirrored_error err;
    mirrored_fit_options o = mirrored_fit_options_default();
    mirrored_array x = x_of(N), y = y_of(N);
    o.x = &x, o.y = &y, o.devices = "cpu:2";
    o.epochs = 1000; /* far more than a stop lets run */
    o.on_step = post_step, o.user = &s;
    o.stop_checkpoint = in_dir("stop.h5");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, stop_thread, &s), 0);
    mirrored_fit_result r;
    ck_assert_msg(mirrored_model_fit(s.m, &o, &r, &err) == MIRRORED_OK, "%s", err.message);
    pthread_join(t, NULL);
    ck_assert(!s.timed_out);
    ck_assert_int_eq(r.stopped, 1);
    ck_assert_int_lt(r.updates, 1000 * N / 32);
    mirrored_model *back = NULL;
    ck_assert_msg(mirrored_model_load(in_dir("stop.h5"), &back, &err) == MIRRORED_OK, "%s",
                  err.message);
    mirrored_model_destroy(back);
    mirrored_model_destroy(s.m);
    sem_destroy(&s.stepped);
}
END_TEST

/* After mirrored_finalize every call is refused in one line (under mpirun
 * the next one called MPI_Init after MPI_Finalize, which aborts): 1 if so. */
static int ended_job_refuses(void) {
    mirrored_error err;
    int rank = -1, size = -1, count = 0;
    char buf[64];
    const mirrored_status st[] = {mirrored_init(NULL, NULL, &err), mirrored_job(&rank, &size, &err),
                                  mirrored_list_devices(buf, sizeof buf, &count, &err)};
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
        if (st[i] != MIRRORED_ERR_USAGE) {
            printf("call %zu after mirrored_finalize: status %d\n", i, (int)st[i]);
            return 0;
        }
    if (!strstr(err.message, "the job has ended (mirrored_finalize)")) {
        printf("after mirrored_finalize: %s\n", err.message);
        return 0;
    }
    mirrored_finalize(); /* twice: nothing */
    return 1;
}

int main(void) {
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("api");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, job_version_devices);
    tcase_add_test(tc, null_handles_refused);
    tcase_add_test(tc, load_refusals);
    tcase_add_test(tc, fit_options_version);
    tcase_add_test(tc, info_and_summary);
    tcase_add_test(tc, data_refusals);
    tcase_add_test(tc, fit_arrays_twice);
    tcase_add_test(tc, two_fits_are_one);
    tcase_add_test(tc, stop_before_fit);
    tcase_add_test(tc, epoch_callback_stops);
    tcase_add_test(tc, save_from_epoch_callback);
    tcase_add_test(tc, weights_round_trip);
    tcase_add_test(tc, weights_file_round_trip);
    tcase_add_test(tc, cfg_data_save_load);
    tcase_add_test(tc, parity_with_mirrored_train);
    tcase_add_test(tc, regression_float_targets);
    tcase_add_test(tc, stop_from_another_thread);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* one process: the library's job is started once */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    mirrored_finalize();
    return failed || !ended_job_refuses() ? EXIT_FAILURE : EXIT_SUCCESS;
}
