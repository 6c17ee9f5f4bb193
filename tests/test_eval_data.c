/* test_eval_data.c: the data readers as a user meets them through mirrored_train and
 * mirrored_eval: a folder's class names carried by the checkpoint into mirrored_eval's tables
 * and --json (a checkpoint of files without them evaluates as before); a flat folder of new
 * images predicted, its file names beside the probabilities; data of the model's size but
 * another shape (channels first, flat) refused in one line, Keras's channel axis of 1 added;
 * a regression on float targets trained and evaluated. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/array.h"
#include "runtime/npy.h"
#include "tests/testutil.h"

static char train_exe[4096], eval_exe[4096], dir[4096];

static void setup(void) {
    char *p = tu_build_path("launch/mirrored_train");
    snprintf(train_exe, sizeof train_exe, "%s", p);
    free(p);
    p = tu_build_path("launch/mirrored_eval");
    snprintf(eval_exe, sizeof eval_exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
}

/* Runs `exe args` in dir; the exit status, the output in *out (malloc'd). */
static int run(const char *exe, const char *args, char **out) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s 2>&1", dir, exe, args);
    return tu_run(cmd, out);
}

static int one_line(const char *s) {
    const char *nl = strchr(s, '\n');
    return nl != NULL && nl[1] == '\0';
}

/* An 8x8 grey PNG of one value. */
static void grey_png(const char *name, uint8_t v) {
    uint8_t px[64];
    memset(px, v, sizeof px);
    free(tu_write_png(dir, name, 8, 8, 1, px));
}

static const char *model = "scale=1/255\n[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=2\n"
                           "activation=softmax\n";

/* Trains one epoch on images (a folder, or "x.npy" with labels) into ck.h5. */
static void train(const char *data) {
    char text[2048], *out;
    snprintf(text, sizeof text, "[net]\nbatch=1\nepochs=1\nseed=1\n[data]\n%s\n%s", data, model);
    free(tu_write_text(dir, "m.cfg", text));
    int rc = run(train_exe, "--devices cpu --quiet --save ck.h5 m.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
}

START_TEST(class_names_in_eval) {
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "imgs/cat/%d.png", i);
        grey_png(name, (uint8_t)(20 + i));
        snprintf(name, sizeof name, "imgs/dog/%d.png", i);
        grey_png(name, (uint8_t)(200 + i));
    }
    train("train_images=imgs");
    char *out;
    int rc = run(eval_exe, "ck.h5 --devices cpu --data imgs --json e.json", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "class  examples  accuracy  name\n"), "%s", out);
    ck_assert_msg(strstr(out, "  cat\n") && strstr(out, "  dog\n"), "%s", out);
    free(out);
    char *json = tu_read_in(dir, "e.json");
    ck_assert_msg(strstr(json, "\"class_names\": [\"cat\", \"dog\"]") &&
                      strstr(json, "\"name\": \"dog\""),
                  "%s", json);
    free(json);
    /* the names come from the checkpoint: the same on data without folders */
    mr_array x = {.dtype = MR_DTYPE_U8, .ndim = 3, .dims = {2, 8, 8}};
    mr_array y = {.dtype = MR_DTYPE_U8, .ndim = 1, .dims = {2}};
    uint8_t px[128], lab[2] = {0, 1};
    memset(px, 20, 64), memset(px + 64, 200, 64);
    x.data = px, y.data = lab;
    char p[8192];
    mr_error err = {0};
    snprintf(p, sizeof p, "%s/x.npy", dir);
    ck_assert(mr_npy_write(p, &x, &err) == MR_OK);
    snprintf(p, sizeof p, "%s/y.npy", dir);
    ck_assert(mr_npy_write(p, &y, &err) == MR_OK);
    rc = run(eval_exe, "ck.h5 --devices cpu --data x.npy,y.npy --per-class", &out);
    ck_assert_msg(rc == 0 && strstr(out, "  dog\n"), "exit %d: %s", rc, out);
    free(out);
    /* a checkpoint of files carries no names: the tables as they were */
    train("train_images=x.npy\ntrain_labels=y.npy");
    rc = run(eval_exe, "ck.h5 --devices cpu --data x.npy,y.npy --json f.json", &out);
    ck_assert_msg(rc == 0 && strstr(out, "class  examples  accuracy\n") && !strstr(out, "name"),
                  "exit %d: %s", rc, out);
    free(out);
    json = tu_read_in(dir, "f.json");
    ck_assert_msg(!strstr(json, "name"), "%s", json);
    free(json);
}
END_TEST

START_TEST(flat_folder_predicted) {
    grey_png("c/cat/a.png", 20), grey_png("c/dog/b.png", 200);
    train("train_images=c");
    grey_png("new/b.png", 200), grey_png("new/a.png", 20);
    free(tu_write_text(dir, "new/notes.txt", "not an image"));
    char *out;
    int rc = run(eval_exe, "ck.h5 --devices cpu --data new --predict p.npy", &out);
    ck_assert_msg(rc == 0 && strstr(out, "class probabilities (2, 2) in p.npy, their files' "
                                         "names in p.txt"),
                  "exit %d: %s", rc, out);
    free(out);
    char *names = tu_read_in(dir, "p.txt");
    ck_assert_str_eq(names, "a.png\nb.png\n");
    free(names);
    char p[8192];
    snprintf(p, sizeof p, "%s/p.npy", dir);
    mr_array a;
    mr_error err = {0};
    ck_assert_msg(mr_array_read(p, &a, &err) == MR_OK, "%s", err.msg);
    ck_assert(a.ndim == 2 && a.dims[0] == 2 && a.dims[1] == 2);
    mr_array_free(&a);
    /* without --predict there is nothing to do with it */
    rc = run(eval_exe, "ck.h5 --devices cpu --data new", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "--data new: no labels"), "exit %d: %s",
                  rc, out);
    free(out);
}
END_TEST

/* Writes dir/name: n examples of `ndim` dims (after the count), zeros. */
static void write_zeros(const char *name, int ndim, const int64_t *dims, int64_t n) {
    mr_array x = {.dtype = MR_DTYPE_U8, .ndim = ndim + 1, .dims = {n}};
    int64_t row = 1;
    for (int i = 0; i < ndim; i++)
        x.dims[i + 1] = dims[i], row *= dims[i];
    x.data = calloc((size_t)(n * row), 1);
    char p[8192];
    mr_error err = {0};
    snprintf(p, sizeof p, "%s/%s", dir, name);
    ck_assert(mr_npy_write(p, &x, &err) == MR_OK);
    mr_array_free(&x);
}

START_TEST(other_shapes_refused) {
    tu_write_image_data(dir, "x.npy", "y.npy", 8, 2); /* (8, 8, 8): the channel axis added */
    write_zeros("cf.npy", 3, (int64_t[]){1, 8, 8}, 8);
    write_zeros("flat.npy", 1, (int64_t[]){64}, 8);
    train("train_images=x.npy\ntrain_labels=y.npy");
    const struct {
        const char *file, *shape;
    } bad[] = {{"cf.npy", "(1,8,8)"}, {"flat.npy", "(64)"}};
    for (int i = 0; i < 2; i++) {
        char text[2048], *out, want[256];
        snprintf(text, sizeof text,
                 "[net]\nbatch=4\n[data]\ntrain_images=%s\ntrain_labels=y.npy\n%s", bad[i].file,
                 model);
        free(tu_write_text(dir, "bad.cfg", text));
        int rc = run(train_exe, "--devices cpu bad.cfg", &out);
        snprintf(want, sizeof want,
                 "%s: examples of shape %s, but the model's [input] shape is 8,8,1", bad[i].file,
                 bad[i].shape);
        ck_assert_msg(rc == 2 && one_line(out) && strstr(out, want), "exit %d: %s", rc, out);
        free(out);
        snprintf(text, sizeof text, "ck.h5 --devices cpu --data %s,y.npy", bad[i].file);
        rc = run(eval_exe, text, &out);
        ck_assert_msg(rc == 2 && one_line(out) && strstr(out, want), "exit %d: %s", rc, out);
        free(out);
    }
}
END_TEST

/* Writes dir/name: a float32 array of n rows of `cols` values (cols 0: shape (n)). */
static void write_floats(const char *name, const float *v, int64_t n, int64_t cols) {
    mr_array a = {.dtype = MR_DTYPE_F32, .ndim = cols ? 2 : 1, .dims = {n, cols}};
    a.data = (void *)v;
    char p[8192];
    mr_error err = {0};
    snprintf(p, sizeof p, "%s/%s", dir, name);
    ck_assert(mr_npy_write(p, &a, &err) == MR_OK);
}

/* A regression's --metrics row `row` (1: the first epoch): Keras CSVLogger's columns epoch, loss,
 * mae, val_loss, val_mae. */
static void metrics_row(const char *csv, int row, double v[4]) {
    const char *line = csv;
    for (int i = 0; i < row; i++)
        line = strchr(line, '\n') + 1;
    double epoch;
    ck_assert_int_eq(sscanf(line, "%lf,%lf,%lf,%lf,%lf", &epoch, &v[0], &v[1], &v[2], &v[3]), 5);
}

/* The number after "key": in a JSON text (the key must be there). */
static double json_number(const char *json, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *at = strstr(json, k);
    ck_assert_msg(at != NULL, "no %s in %s", key, json);
    return strtod(at + strlen(k), NULL);
}

/* A regression's figures where a classification has accuracy: mae in the epoch line, the
 * --metrics columns (loss, mae, val_loss, val_mae) and --json of mirrored_train and of
 * mirrored_eval; none of accuracy. With loss = mae on k outputs the mae metric is the loss. */
static void check_regression_metrics(const char *loss, int k) {
    char text[2048], *out;
    snprintf(text, sizeof text,
             "[net]\nloss=%s\noptimizer=sgd\nlearning_rate=0.05\nbatch=8\nepochs=2\n"
             "seed=1\nvalidation_split=0.25\n[data]\ntrain_images=rx.npy\n"
             "train_labels=%s\n[input]\nshape=4\n[dense]\nunits=%d\n",
             loss, k == 1 ? "ry.npy" : "ry2k.npy", k);
    free(tu_write_text(dir, "m.cfg", text));
    int rc = run(train_exe,
                 "--devices cpu --verbose 2 --metrics m.csv --json m.json --save m.h5 m.cfg", &out);
    ck_assert_msg(rc == 0 && strstr(out, " - mae: ") && strstr(out, " - val_mae: ") &&
                      !strstr(out, "accuracy"),
                  "%s: exit %d: %s", loss, rc, out);
    free(out);
    char *csv = tu_read_in(dir, "m.csv");
    ck_assert_msg(strncmp(csv, "epoch,loss,mae,val_loss,val_mae,learning_rate,", 46) == 0, "%s",
                  csv);
    double v[4];
    metrics_row(csv, 2, v);
    free(csv);
    char *json = tu_read_in(dir, "m.json");
    ck_assert_msg(!strstr(json, "accuracy"), "%s", json);
    ck_assert(fabs(json_number(json, "mae") - v[1]) < 1e-5);
    ck_assert(fabs(json_number(json, "val_mae") - v[3]) < 1e-5);
    free(json);
    if (strcmp(loss, "mae") == 0) /* the loss and the metric are one figure */
        ck_assert_msg(fabs(v[0] - v[1]) < 1e-4 && fabs(v[2] - v[3]) < 1e-4, "%g %g %g %g", v[0],
                      v[1], v[2], v[3]);
    else
        ck_assert(v[1] > 0.0 && v[3] > 0.0);
    snprintf(text, sizeof text, "m.h5 --devices cpu --json e.json --data rx.npy,%s",
             k == 1 ? "ry.npy" : "ry2k.npy");
    rc = run(eval_exe, text, &out);
    ck_assert_msg(rc == 0 && strstr(out, " - test mae: ") && !strstr(out, "accuracy"),
                  "%s: exit %d: %s", loss, rc, out);
    free(out);
    json = tu_read_in(dir, "e.json");
    ck_assert_msg(!strstr(json, "accuracy"), "%s", json);
    const double test_loss = json_number(json, "test_loss"), mae = json_number(json, "test_mae");
    free(json);
    if (strcmp(loss, "mae") == 0)
        ck_assert_msg(fabs(test_loss - mae) < 1e-5, "%g %g", test_loss, mae);
    else
        ck_assert(mae > 0.0);
}

/* Regression: y = x . w + 0.5 on 4 features, a linear [dense] of one unit trained with mse, mae
 * and huber on float targets (n): the loss falls over the epochs, mirrored_eval reports a test
 * loss; targets of another shape, and float targets with a class-id loss, are refused naming
 * the labels file. */
START_TEST(regression_trains) {
    enum { N = 64 };
    float x[N * 4], y[N];
    for (int i = 0; i < N; i++) {
        y[i] = 0.5f;
        for (int j = 0; j < 4; j++) {
            x[i * 4 + j] = (float)((i * 7 + j * 13) % 17) / 8.0f - 1.0f;
            y[i] += x[i * 4 + j] * (float)(j + 1) * 0.25f;
        }
    }
    write_floats("rx.npy", x, N, 4);
    write_floats("ry.npy", y, N, 0);
    write_floats("ry2.npy", y, N / 2, 2);
    float y2[N * 2]; /* two outputs: y and -y / 2 */
    for (int i = 0; i < N; i++)
        y2[2 * i] = y[i], y2[2 * i + 1] = -0.5f * y[i];
    write_floats("ry2k.npy", y2, N, 2);
    const char *losses[] = {"mse", "mae", "huber"};
    for (int c = 0; c < 3; c++) {
        char text[2048], *out;
        snprintf(text, sizeof text,
                 "[net]\nloss=%s\noptimizer=sgd\nlearning_rate=0.05\nbatch=8\nepochs=6\n"
                 "seed=1\nvalidation_split=0.25\n[data]\ntrain_images=rx.npy\n"
                 "train_labels=ry.npy\n[input]\nshape=4\n[dense]\nunits=1\n",
                 losses[c]);
        free(tu_write_text(dir, "r.cfg", text));
        int rc = run(train_exe, "--devices cpu --quiet --metrics r.csv --save r.h5 r.cfg", &out);
        ck_assert_msg(rc == 0, "%s: exit %d: %s", losses[c], rc, out);
        free(out);
        char *csv = tu_read_in(dir, "r.csv");
        double v[4];
        metrics_row(csv, 1, v);
        const double first = v[0];
        metrics_row(csv, 6, v);
        const double last = v[0];
        ck_assert_msg(last < 0.5 * first, "%s: loss %g then %g", losses[c], first, last);
        free(csv);
        rc = run(eval_exe, "r.h5 --devices cpu --quiet --data rx.npy,ry.npy", &out);
        ck_assert_msg(rc == 0 && strstr(out, "Test loss: "), "%s: exit %d: %s", losses[c], rc, out);
        free(out);
        check_regression_metrics(losses[c], 1);
        check_regression_metrics(losses[c], 2);
        rc = run(eval_exe, "r.h5 --devices cpu --quiet --data rx.npy,ry2.npy", &out);
        ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "ry2.npy: float targets must be "),
                      "exit %d: %s", rc, out);
        free(out);
    }
    free(tu_write_text(dir, "c.cfg",
                       "[net]\nbatch=8\n[data]\ntrain_images=rx.npy\ntrain_labels=ry.npy\n"
                       "[input]\nshape=4\n[dense]\nunits=2\nactivation=softmax\n"));
    char *out;
    int rc = run(train_exe, "--devices cpu c.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "ry.npy: label ") &&
                      strstr(out, "is not a class id"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

int main(void) {
    Suite *s = suite_create("eval_data");
    TCase *tc = tcase_create("eval_data");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, class_names_in_eval);
    tcase_add_test(tc, flat_folder_predicted);
    tcase_add_test(tc, other_shapes_refused);
    tcase_add_test(tc, regression_trains);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
