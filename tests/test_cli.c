/* test_cli.c: mirrored_train as a user runs it: options, exit codes, one-line
 * errors for bad input (naming the file and line or the path), no partial
 * output files, and a small successful run on generated data. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include "runtime/array.h"
#include "runtime/npy.h"
#include "runtime/dataset.h"
#include "runtime/h5file.h"
#include "strategies/devices.h"
#include "tests/testutil.h"

static char exe[4096];
static char dir[4096];

/* Runs mirrored_train with args; returns the exit status and the output. */
static int run(const char *args, char **out) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s", dir, exe, args);
    return tu_run(cmd, out);
}

/* Occurrences of `what` in s. */
static int count_in(const char *s, const char *what) {
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

static int one_line(const char *s) {
    const char *nl = strchr(s, '\n');
    return nl != NULL && nl[1] == '\0';
}

static void write_data(const char *name_x, const char *name_y, int64_t n, int classes) {
    tu_write_image_data(dir, name_x, name_y, n, classes);
}

static const char *good_cfg =
    "[net]\nbatch=8\nepochs=2\nvalidation_split=0.2\nseed=3\n"
    "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
    "test_images=x.npy\ntest_labels=y.npy\nscale=1/255\n"
    "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
    "[dense]\nunits=4\nactivation=softmax\n";

static void setup(void) {
    char *p = tu_build_path("launch/mirrored_train");
    snprintf(exe, sizeof exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    write_data("x.npy", "y.npy", 200, 4);
    free(tu_write_text(dir, "good.cfg", good_cfg));
}

START_TEST(help_and_version) {
    char *out;
    ck_assert_int_eq(run("--help", &out), 0);
    ck_assert_msg(strstr(out, "Usage:") && strstr(out, "--devices") && strstr(out, "Exit status"),
                  "%s", out);
    free(out);
    ck_assert_int_eq(run("--version", &out), 0);
    ck_assert_msg(strstr(out, "mirrored "), "%s", out);
    free(out);
    ck_assert_int_eq(run("--help-config", &out), 0);
    ck_assert_msg(strstr(out, "[dense]") && strstr(out, "units"), "%s", out);
    free(out);
    ck_assert_int_eq(run("--list-devices", &out), 0);
    ck_assert_msg(strstr(out, "cpu:") && strstr(out, "gpu") && strstr(out, "auto: "), "%s", out);
    free(out);
}
END_TEST

/* Asking for GPUs where there are none: one line with the CUDA runtime's
 * reason (or that the build has no CUDA), exit 2, never a CPU run. */
START_TEST(gpu_without_gpu) {
    if (mr_gpu_count() > 0) return; /* a GPU machine: nothing to refuse */
    const char *specs[] = {"gpu", "gpu:0", "gpu:0,1"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        char cmd[128], *out;
        snprintf(cmd, sizeof cmd, "--devices %s good.cfg", specs[i]);
        int rc = run(cmd, &out);
        ck_assert_msg(rc == 2, "'%s' exited %d: %s", cmd, rc, out);
        ck_assert_msg(one_line(out) && strstr(out, "no GPU available (") &&
                          strstr(out, tu_gpus()->reason) && !strstr(out, "Epoch"),
                      "'%s': %s", cmd, out);
        free(out);
    }
    /* --list-devices says why */
    char *out;
    ck_assert_int_eq(run("--list-devices", &out), 0);
    ck_assert_msg(strstr(out, "gpu: none (") && strstr(out, tu_gpus()->reason), "%s", out);
    free(out);
}
END_TEST

/* A bad MIRRORED_COMM_TIMEOUT is an error, not the default. */
START_TEST(bad_timeout_env) {
    const char *values[] = {"abc", "0", "-3", "5s"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char cmd[16384], *out;
        snprintf(cmd, sizeof cmd, "cd %s && MIRRORED_COMM_TIMEOUT=%s %s good.cfg", dir, values[i],
                 exe);
        int rc = tu_run(cmd, &out);
        ck_assert_msg(rc == 2, "'%s' exited %d: %s", values[i], rc, out);
        ck_assert_msg(one_line(out) && strstr(out, "MIRRORED_COMM_TIMEOUT") &&
                          strstr(out, values[i]) && !strstr(out, "Epoch"),
                      "'%s': %s", values[i], out);
        free(out);
    }
}
END_TEST

/* --seed and [net] seed take the same range, 0 .. INT64_MAX. */
START_TEST(seed_range) {
    char text[4096], *out;
    snprintf(text, sizeof text, "%s", good_cfg);
    char *s = strstr(text, "seed=3");
    memmove(s + strlen("seed=9223372036854775807"), s + strlen("seed=3"),
            strlen(s + strlen("seed=3")) + 1);
    memcpy(s, "seed=9223372036854775807", strlen("seed=9223372036854775807"));
    free(tu_write_text(dir, "seedmax.cfg", text));
    int rc = run("--epochs 1 --quiet seedmax.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    rc = run("--epochs 1 --quiet --seed 9223372036854775807 good.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
}
END_TEST

START_TEST(bad_options) {
    const char *cases[] = {"",
                           "--bogus good.cfg",
                           "--epochs abc good.cfg",
                           "--epochs 0 good.cfg",
                           "good.cfg other.cfg",
                           "--devices cpu:0 good.cfg",
                           "--devices cpu:-1 good.cfg",
                           "--devices cpu:abc good.cfg",
                           "--devices tpu good.cfg",
                           "--seed -4 good.cfg",
                           "--epochs",
                           "--check-sync x good.cfg",
                           "--seed 9223372036854775808 good.cfg",
                           "--max-steps 0 good.cfg",
                           "--max-steps x good.cfg",
                           "--dry-run --write-data d.h5 good.cfg"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out;
        int rc = run(cases[i], &out);
        ck_assert_msg(rc == 2, "'%s' exited %d: %s", cases[i], rc, out);
        ck_assert_msg(one_line(out) && strstr(out, "mirrored_train: "), "'%s': %s", cases[i], out);
        free(out);
    }
}
END_TEST

/* A .cfg with one bad line: exit 2, one line naming file:line, no output files. */
static void expect_cfg_error(const char *text, const char *want1, const char *want2) {
    free(tu_write_text(dir, "bad.cfg", text));
    char *out;
    int rc = run("--metrics m.csv --json s.json bad.cfg", &out);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, out);
    ck_assert_msg(one_line(out) && strstr(out, want1) && strstr(out, want2), "want '%s' '%s': %s",
                  want1, want2, out);
    free(out);
    char p[8192];
    snprintf(p, sizeof p, "%s/m.csv", dir);
    ck_assert_msg(!tu_exists(p), "partial metrics file left behind");
    snprintf(p, sizeof p, "%s/s.json", dir);
    ck_assert_msg(!tu_exists(p), "partial json file left behind");
}

START_TEST(bad_cfg) {
    char *out;
    ck_assert_int_eq(run("missing.cfg", &out), 2);
    ck_assert_msg(strstr(out, "missing.cfg: cannot open"), "%s", out);
    free(out);
    char text[4096];
    snprintf(text, sizeof text, "%s", good_cfg);
    /* unknown key, suggestion */
    expect_cfg_error(strstr(good_cfg, "[input]")
                         ? "[net]\nbach=8\n[data]\ntrain_images=x.npy\n"
                           "train_labels=y.npy\n[input]\nshape=8,8,1\n[flatten]\n"
                           "[dense]\nunits=4\n"
                         : "",
                     "bad.cfg:2:", "did you mean 'batch'");
    expect_cfg_error("[net]\nepochs=-1\n", "bad.cfg:2:", "out of range");
    expect_cfg_error("[net]\n[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n[dense]\nunits=4\n",
                     "bad.cfg:5:", "[input]");
    expect_cfg_error("[net]\n[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n[input]\nshape=8,8,1\n"
                     "[dense]\nunits=4\n",
                     "bad.cfg:7:", "[flatten]");
    expect_cfg_error("[net]\n[wat]\n", "bad.cfg:2:", "unknown section");
}
END_TEST

/* Bad data files: exit 2, one line naming the path. */
static void expect_data_error(const char *images, const char *labels, const char *want) {
    char text[4096];
    snprintf(text, sizeof text,
             "[net]\nbatch=8\n[data]\ntrain_images=%s\ntrain_labels=%s\n[input]\nshape=8,8,1\n"
             "[flatten]\n[dense]\nunits=4\nactivation=softmax\n",
             images, labels);
    free(tu_write_text(dir, "data.cfg", text));
    char *out;
    int rc = run("--metrics m.csv data.cfg", &out);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, out);
    ck_assert_msg(one_line(out) && strstr(out, want), "want '%s': %s", want, out);
    free(out);
    char p[8192];
    snprintf(p, sizeof p, "%s/m.csv", dir);
    ck_assert(!tu_exists(p));
}

START_TEST(bad_data) {
    expect_data_error("nope.npy", "y.npy", "nope.npy: cannot open");
    /* wrong IDX magic */
    free(tu_write_file(dir, "magic.idx", "\x00\x00\x09\x03\x00\x00\x00\x01", 8));
    expect_data_error("magic.idx", "y.npy", "magic.idx");
    /* truncated IDX: header says 10 images of 8x8, one byte of data */
    free(tu_write_file(dir, "trunc.idx",
                       "\x00\x00\x08\x03\x00\x00\x00\x0a\x00\x00\x00\x08\x00\x00\x00\x08\x01", 17));
    expect_data_error("trunc.idx", "y.npy", "trunc.idx");
    /* image and label counts differ */
    write_data("x150.npy", "y150.npy", 150, 4);
    expect_data_error("x.npy", "y150.npy", "y150.npy: 150 labels");
    /* labels outside the class range (model has 4 outputs) */
    write_data("x6.npy", "y6.npy", 60, 6);
    expect_data_error("x6.npy", "y6.npy", "outside the class range");
    /* not an HDF5 file */
    free(tu_write_text(dir, "fake.h5", "not hdf5 at all"));
    expect_data_error("fake.h5:/x", "y.npy", "fake.h5");
    /* examples of the wrong size for [input] */
    mr_array x = {.dtype = MR_DTYPE_U8, .ndim = 2, .dims = {200, 10}};
    x.data = calloc(2000, 1);
    char p[8192];
    mr_error err = {0};
    snprintf(p, sizeof p, "%s/x10.npy", dir);
    ck_assert(mr_npy_write(p, &x, &err) == MR_OK);
    free(x.data);
    expect_data_error("x10.npy", "y.npy", "[input] shape");
}
END_TEST

/* Cuts the samples_per_sec and seconds columns off every line of a
 * --metrics CSV (in place). */
static void drop_timings(char *csv) {
    char *out = csv;
    for (char *line = csv; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *cut = line + len;
        for (int k = 0; k < 2 && cut > line; k++) {
            cut--;
            while (cut > line && *cut != ',')
                cut--;
        }
        memmove(out, line, (size_t)(cut - line));
        out += cut - line;
        *out++ = '\n';
        line = end ? end + 1 : line + len;
    }
    *out = '\0';
}

START_TEST(trains_and_writes_logs) {
    char *out;
    int rc = run("--devices cpu:2 --metrics m.csv --json s.json good.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "Total params") && strstr(out, "2 replicas (cpu:0, cpu:1)") &&
                      strstr(out, "batch 8/replica = 16 global") && strstr(out, "x 2 = ") &&
                      strstr(out, "Epoch 2/2") && strstr(out, "val_accuracy") &&
                      strstr(out, "samples/s") && strstr(out, "Test loss"),
                  "%s", out);
    free(out);
    char p[8192];
    snprintf(p, sizeof p, "%s/m.csv", dir);
    char *csv = tu_read_file(p, NULL);
    ck_assert_ptr_nonnull(csv);
    const char *header =
        "epoch,accuracy,loss,val_accuracy,val_loss,learning_rate,samples_per_sec,seconds\n0,";
    ck_assert_msg(strncmp(csv, header, strlen(header)) == 0, "%s", csv);
    ck_assert_ptr_nonnull(strstr(csv, "\n1,"));
    snprintf(p, sizeof p, "%s/s.json", dir);
    char *json = tu_read_file(p, NULL);
    ck_assert_ptr_nonnull(json);
    const char *keys[] = {"\"epochs\": 2",   "\"train_samples_per_sec\"",
                          "\"test_loss\"",   "\"test_accuracy\"",
                          "\"replicas\": 2", "\"devices\": [\"cpu:0\", \"cpu:1\"]",
                          "\"params_hash\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(json, keys[i]) != NULL, "missing %s in %s", keys[i], json);
    /* the same seed again: the same metrics and bitwise the same weights */
    rc = run("--devices cpu:2 --quiet --metrics m2.csv --json s2.json good.cfg", &out);
    ck_assert_int_eq(rc, 0);
    free(out);
    snprintf(p, sizeof p, "%s/m2.csv", dir);
    char *csv2 = tu_read_file(p, NULL);
    /* the same metrics; the last two columns are timings */
    drop_timings(csv), drop_timings(csv2);
    ck_assert_str_eq(csv, csv2);
    snprintf(p, sizeof p, "%s/s2.json", dir);
    char *json2 = tu_read_file(p, NULL);
    const char *h1 = strstr(json, "\"params_hash\""), *h2 = strstr(json2, "\"params_hash\"");
    ck_assert(h1 && h2 && strncmp(h1, h2, 34) == 0); /* "params_hash": "<16 hex digits>" */
    /* another seed: other weights */
    rc = run("--devices cpu:2 --quiet --seed 4 --json s3.json good.cfg", &out);
    ck_assert_int_eq(rc, 0);
    free(out);
    snprintf(p, sizeof p, "%s/s3.json", dir);
    char *json3 = tu_read_file(p, NULL);
    const char *h3 = strstr(json3, "\"params_hash\"");
    ck_assert(h3 && strncmp(h1, h3, 34) != 0);
    free(csv), free(csv2), free(json), free(json2), free(json3);
}
END_TEST

/* The " - time: compute C comm M data D other O[, slowest replica N]" at the
 * end of the epoch line `epoch` (1-based) of out (before a " - skipped: N"
 * only): the fractions must sum to 1 within their rounding; returns the
 * slowest replica (one digit), or -1 if the line names none. */
static int epoch_time(const char *out, int epoch, int epochs) {
    char want[64];
    snprintf(want, sizeof want, "Epoch %d/%d - ", epoch, epochs);
    const char *line = strstr(out, want);
    ck_assert_msg(line != NULL, "no %s in %s", want, out);
    const char *t = strstr(line, " - time: ");
    const char *nl = strchr(line, '\n');
    ck_assert_msg(t != NULL && nl != NULL && t < nl, "no time: on the line: %s", line);
    double f[4];
    int slowest = -1, used = 0;
    ck_assert_msg(sscanf(t, " - time: compute %lf comm %lf data %lf other %lf%n", &f[0], &f[1],
                         &f[2], &f[3], &used) == 4,
                  "%s", line);
    double sum = 0.0;
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(f[i] >= 0.0 && f[i] <= 1.0, "%s", line);
        sum += f[i];
    }
    ck_assert_msg(fabs(sum - 1.0) <= 0.021, "fractions sum to %g: %s", sum, line);
    if (strncmp(t + used, ", slowest replica ", 18) == 0) slowest = atoi(t + used + 18);
    /* then the end of the line, or on_nan = skip's " - skipped: N" */
    const char *after = t + used + (slowest >= 0 ? 19 : 0);
    ck_assert_msg(after == nl || strncmp(after, " - skipped: ", 12) == 0, "not last: %s", line);
    return slowest;
}

/* --trace on 2 replicas: the file tests/trace_check.py accepts (valid,
 * nested per thread, one forward and one backward per layer per step,
 * all-reduces with bytes), a step per update per replica; the epoch line
 * and --json say where the time went and which replica was slowest; one
 * replica names none; a path that cannot be written fails at once. */
START_TEST(trace_and_where_the_time_went) {
    char *out;
    int rc = run("--devices cpu:2 --verbose 2 --trace t.json --json t.json.s good.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    for (int e = 1; e <= 2; e++) {
        const int slowest = epoch_time(out, e, 2);
        ck_assert_msg(slowest == 0 || slowest == 1, "%s", out);
    }
    free(out);
    char cmd[16384], *script = tu_source_path("tests/trace_check.py");
    /* 160 training rows, 16 a global batch: 10 updates per epoch, 2 epochs, 2 replicas */
    snprintf(cmd, sizeof cmd, "python3 %s %s/t.json --layers=flatten,dense,dense_1", script, dir);
    rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "ok: pids 1 threads 2 steps 40 "), "%s", out);
    free(out);
    /* the JSON's fractions, as Python reads them */
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); "
             "f = [d[\"time_\" + k] for k in (\"compute\", \"comm\", \"data\", \"other\")]; "
             "print(min(f) >= 0, abs(sum(f) - 1) < 1e-3, d[\"slowest_replica\"] in (0, 1), "
             "f[0] > 0)' %s/t.json.s",
             dir);
    rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0 && strcmp(out, "True True True True\n") == 0, "%s", out);
    free(out);
    /* one replica: the fractions, no straggler; no --trace, no file */
    rc = run("--devices cpu --verbose 2 --epochs 1 --json one.json good.cfg", &out);
    ck_assert_msg(rc == 0 && epoch_time(out, 1, 1) == -1, "%s", out);
    free(out);
    char *json = tu_read_in(dir, "one.json");
    ck_assert_msg(json && strstr(json, "\"slowest_replica\": null"), "%s", json);
    free(json);
    /* a folder that is not there: refused before training, naming the path */
    rc = run("--devices cpu --trace nowhere/t.json good.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "--trace nowhere/t.json") &&
                      strstr(out, "cannot write") && !strstr(out, "Epoch"),
                  "exit %d: %s", rc, out);
    free(out);
    free(script);
}
END_TEST

/* The sum of the integers of the JSON array after `key` ("key": [1, 2]). */
static double json_array_sum(const char *json, const char *key) {
    const char *p = strstr(json, key);
    ck_assert_msg(p != NULL, "no %s in %s", key, json);
    p = strchr(p, '[');
    double sum = 0.0;
    for (char *end; p && *p != ']'; p = end) {
        double v = strtod(p + 1, &end);
        if (end == p + 1) break;
        sum += v;
    }
    return sum;
}

/* [net] top_k and per_class: the epoch line, the per-class line, the CSV
 * column and the JSON fields under Keras's names; the counts per class add
 * up to the set; the config errors name the file and line */
START_TEST(top_k_and_per_class_reported) {
    char text[4096];
    snprintf(text, sizeof text, "[net]\ntop_k=2\nper_class=1\n%s", good_cfg + strlen("[net]\n"));
    free(tu_write_text(dir, "tk.cfg", text));
    char *out;
    int rc = run("--devices cpu:2 --metrics tk.csv --json tk.json tk.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(count_in(out, " - val_sparse_top_k_categorical_accuracy: ") == 2 &&
                      count_in(out, "\nval per-class accuracy: 0 ") == 2 && strstr(out, " | 3 ") &&
                      strstr(out, "test accuracy: ") &&
                      strstr(out, " - test_sparse_top_k_categorical_accuracy: ") &&
                      strstr(out, "\ntest per-class accuracy: 0 "),
                  "%s", out);
    free(out);
    char p[8192];
    snprintf(p, sizeof p, "%s/tk.csv", dir);
    char *csv = tu_read_file(p, NULL);
    const char *header = "epoch,accuracy,loss,val_accuracy,val_loss,val_sparse_top_k_categorical_"
                         "accuracy,learning_rate,samples_per_sec,seconds\n0,";
    ck_assert_msg(strncmp(csv, header, strlen(header)) == 0, "%s", csv);
    free(csv);
    snprintf(p, sizeof p, "%s/tk.json", dir);
    char *json = tu_read_file(p, NULL);
    const char *keys[] = {"\"val_sparse_top_k_categorical_accuracy\": 0.",
                          "\"val_per_class_accuracy\": [",
                          "\"val_per_class_examples\": [",
                          "\"test_sparse_top_k_categorical_accuracy\": 0.",
                          "\"test_per_class_accuracy\": [",
                          "\"test_per_class_examples\": ["};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(json, keys[i]) != NULL, "missing %s in %s", keys[i], json);
    /* validation: the last 20% of 200; test: all 200 */
    ck_assert_double_eq(json_array_sum(json, "\"val_per_class_examples\""), 40.0);
    ck_assert_double_eq(json_array_sum(json, "\"test_per_class_examples\""), 200.0);
    free(json);
    /* without the keys: none of it */
    rc = run("--devices cpu:2 --epochs 1 --json plain.json good.cfg", &out);
    ck_assert_msg(rc == 0 && !strstr(out, "top_k") && !strstr(out, "per-class"), "%s", out);
    free(out);
    snprintf(p, sizeof p, "%s/plain.json", dir);
    json = tu_read_file(p, NULL);
    ck_assert_msg(!strstr(json, "top_k") && !strstr(json, "per_class"), "%s", json);
    free(json);
    /* errors: top_k not below the 4 classes, below 0; per_class with nothing to report on */
    snprintf(text, sizeof text, "[net]\ntop_k=4\n%s", good_cfg + strlen("[net]\n"));
    expect_cfg_error(text, "bad.cfg:", "top_k = 4 must be below the 4 classes");
    snprintf(text, sizeof text, "[net]\ntop_k=-1\n%s", good_cfg + strlen("[net]\n"));
    expect_cfg_error(text, "bad.cfg:2:", "out of range");
    expect_cfg_error("[net]\nper_class=1\n[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
                     "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n",
                     "bad.cfg:", "per_class = 1 has nothing to report on");
}
END_TEST

/* loss = binary_crossentropy: one sigmoid unit (or a linear one with from_logits) on labels
 * 0 and 1 learns, the loss falling every epoch and the accuracy (binary_accuracy) well above
 * chance; 2 replicas; a label of 2 is outside the model's two classes */
START_TEST(binary_crossentropy_trains) {
    write_data("x2.npy", "y2.npy", 200, 2);
    const char *cfg = "[net]\nbatch=8\nepochs=4\nvalidation_split=0.2\nseed=3\nloss="
                      "binary_crossentropy\n%s\n[data]\ntrain_images=x2.npy\ntrain_labels=y2.npy\n"
                      "test_images=x2.npy\ntest_labels=y2.npy\nscale=1/255\n[input]\nshape=8,8,1\n"
                      "[flatten]\n[dense]\nunits=8\nactivation=relu\n[dense]\nunits=1\n%s\n";
    const char *net[2] = {"", "from_logits=1"}, *last[2] = {"activation=sigmoid", ""};
    for (int c = 0; c < 2; c++) {
        char text[2048];
        snprintf(text, sizeof text, cfg, net[c], last[c]);
        free(tu_write_text(dir, "bce.cfg", text));
        char *out;
        int rc = run("--devices cpu:2 --metrics bce.csv bce.cfg", &out);
        ck_assert_msg(rc == 0 && strstr(out, "Epoch 4/4") && strstr(out, "Test loss"),
                      "case %d: exit %d: %s", c, rc, out);
        free(out);
        char p[8192];
        snprintf(p, sizeof p, "%s/bce.csv", dir);
        char *csv = tu_read_file(p, NULL);
        ck_assert_ptr_nonnull(csv);
        /* epoch,accuracy,loss,...: the loss falls, the last accuracy is far above 0.5 */
        double prev = INFINITY, acc = 0.0;
        int rows = 0;
        for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
            const char *f = strchr(line + 1, ',');
            acc = strtod(f + 1, NULL);
            const double loss = strtod(strchr(f + 1, ',') + 1, NULL);
            ck_assert_msg(loss < prev && isfinite(loss), "case %d: %s", c, csv);
            prev = loss, rows++;
        }
        ck_assert_msg(rows == 4 && acc > 0.9 && acc <= 1.0, "case %d: %s", c, csv);
        free(csv);
    }
    /* labels of three classes: a 2 is outside binary_crossentropy's two */
    write_data("x3.npy", "y3.npy", 60, 3);
    char text[2048];
    snprintf(text, sizeof text, cfg, "", "activation=sigmoid");
    char *bad = strstr(text, "x2.npy\ntrain_labels=y2.npy");
    memcpy(bad, "x3.npy\ntrain_labels=y3.npy", 26);
    char *out;
    free(tu_write_text(dir, "bce3.cfg", text));
    int rc = run("--devices cpu:1 bce3.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "y3.npy") &&
                      strstr(out, "outside the class range"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* Multi-label binary_crossentropy: 3 sigmoid units (or linear ones with from_logits) on
 * multi-hot labels (n, 3) learn on 2 replicas, the loss falling every epoch and the binary
 * accuracy (matched outputs over examples x 3) well above chance and at most 1. Refused with
 * one line, exit 2: labels of another width (naming the file), a value other than 0 and 1,
 * --synthetic, and class_weight (file:line). */
START_TEST(multi_label_bce_trains) {
    write_data("xm.npy", "ym_ids.npy", 200, 4);
    tu_write_multi_hot_labels(dir, "ym.npy", 200);
    const char *cfg = "[net]\nbatch=8\nepochs=4\nvalidation_split=0.2\nseed=3\nlearning_rate=0.01\n"
                      "loss=binary_crossentropy\n%s\n[data]\ntrain_images=xm.npy\ntrain_labels=%s\n"
                      "test_images=xm.npy\ntest_labels=ym.npy\nscale=1/255\n[input]\nshape=8,8,1\n"
                      "[flatten]\n[dense]\nunits=8\nactivation=relu\n[dense]\nunits=3\n%s\n";
    const char *net[2] = {"", "from_logits=1"}, *last[2] = {"activation=sigmoid", ""};
    for (int c = 0; c < 2; c++) {
        char text[2048];
        snprintf(text, sizeof text, cfg, net[c], "ym.npy", last[c]);
        free(tu_write_text(dir, "ml.cfg", text));
        char *out;
        int rc = run("--devices cpu:2 --metrics ml.csv ml.cfg", &out);
        ck_assert_msg(rc == 0 && strstr(out, "Epoch 4/4") && strstr(out, "Test loss"),
                      "case %d: exit %d: %s", c, rc, out);
        const double test_acc = strtod(strstr(out, "test accuracy: ") + 15, NULL);
        ck_assert_msg(test_acc > 0.9 && test_acc <= 1.0, "case %d: %s", c, out);
        free(out);
        char p[8192];
        snprintf(p, sizeof p, "%s/ml.csv", dir);
        char *csv = tu_read_file(p, NULL);
        ck_assert_ptr_nonnull(csv);
        /* epoch,accuracy,loss,val_accuracy,...: the loss falls, the last accuracies far above
         * 0.5 and at most 1 */
        double prev = INFINITY, acc = 0.0, val = 0.0;
        int rows = 0;
        for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
            const char *f = strchr(line + 1, ',');
            acc = strtod(f + 1, NULL);
            const char *g = strchr(f + 1, ',');
            const double loss = strtod(g + 1, NULL);
            val = strtod(strchr(g + 1, ',') + 1, NULL);
            ck_assert_msg(loss < prev && isfinite(loss), "case %d: %s", c, csv);
            prev = loss, rows++;
        }
        ck_assert_msg(rows == 4 && acc > 0.9 && acc <= 1.0 && val > 0.9 && val <= 1.0,
                      "case %d: %s", c, csv);
        free(csv);
    }
    /* class ids (n) for 3 outputs: not multi-hot rows of 3 */
    char text[2048];
    snprintf(text, sizeof text, cfg, "", "ym_ids.npy", "activation=sigmoid");
    free(tu_write_text(dir, "ml_ids.cfg", text));
    char *out;
    int rc = run("--devices cpu:1 ml_ids.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "ym_ids.npy") &&
                      strstr(out, "multi-hot labels must be (200, 3)"),
                  "exit %d: %s", rc, out);
    free(out);
    /* a 2 among the multi-hot values */
    snprintf(text, sizeof text, cfg, "", "ym3bad.npy", "activation=sigmoid");
    {
        mr_array y = {.dtype = MR_DTYPE_I64, .ndim = 2, .dims = {200, 3}};
        int64_t *py = calloc(600, sizeof(int64_t));
        py[301] = 2;
        y.data = py;
        char p[8192];
        mr_error err = {0};
        snprintf(p, sizeof p, "%s/ym3bad.npy", dir);
        ck_assert(mr_npy_write(p, &y, &err) == MR_OK);
        free(py);
    }
    free(tu_write_text(dir, "ml_bad.cfg", text));
    rc = run("--devices cpu:1 ml_bad.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "ym3bad.npy") &&
                      strstr(out, "value 2 at row 100, column 1"),
                  "exit %d: %s", rc, out);
    free(out);
    snprintf(text, sizeof text, cfg, "", "ym.npy", "activation=sigmoid");
    free(tu_write_text(dir, "ml.cfg", text));
    rc = run("--devices cpu:1 --synthetic 64 ml.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "--synthetic makes class ids"),
                  "exit %d: %s", rc, out);
    free(out);
    snprintf(text, sizeof text, cfg, "class_weight=1,2,3", "ym.npy", "activation=sigmoid");
    free(tu_write_text(dir, "ml_cw.cfg", text));
    rc = run("--devices cpu:1 ml_cw.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "ml_cw.cfg:21:") &&
                      strstr(out, "takes no class_weight"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

START_TEST(global_batch_errors) {
    free(tu_write_text(
        dir, "gb.cfg",
        "[net]\nglobal_batch=9\n[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n[input]\n"
        "shape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    char *out;
    ck_assert_int_eq(run("--devices cpu:2 gb.cfg", &out), 2);
    ck_assert_msg(one_line(out) && strstr(out, "global_batch=9"), "%s", out);
    free(out);
    free(tu_write_text(
        dir, "gb2.cfg",
        "[net]\nglobal_batch=400\n[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n[input]\n"
        "shape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    ck_assert_int_eq(run("--devices cpu:2 gb2.cfg", &out), 2);
    ck_assert_msg(one_line(out) && strstr(out, "larger than the training set"), "%s", out);
    free(out);
    /* a warmup of a rate that is never scaled is refused, not announced */
    free(tu_write_text(dir, "gbw.cfg",
                       "[net]\nglobal_batch=8\nwarmup_epochs=1\n[data]\ntrain_images=x.npy\n"
                       "train_labels=y.npy\n[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits="
                       "4\nactivation=softmax\n"));
    ck_assert_int_eq(run("--devices cpu:2 --metrics w.csv gbw.cfg", &out), 2);
    ck_assert_msg(one_line(out) && strstr(out, "gbw.cfg") &&
                      strstr(out, "warmup_epochs=1 with global_batch") && !strstr(out, "Epoch"),
                  "%s", out);
    free(out);
}
END_TEST

/* Whether dir/name exists. */
static int exists(const char *name) {
    char p[8192];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* The 16 hex digits of "params_hash" in dir/name (out: 17 bytes). */
static void read_hash(const char *name, char *out) {
    char p[8192];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *json = tu_read_file(p, NULL);
    ck_assert_msg(json != NULL, "%s missing", p);
    const char *h = strstr(json, "\"params_hash\": \"");
    ck_assert_ptr_nonnull(h);
    snprintf(out, 17, "%s", h + strlen("\"params_hash\": \""));
    free(json);
}

/* The same examples as float64 images (NPY '<f8', numpy's default) and
 * one-hot labels (n, 4) train bitwise as the uint8 images and class ids
 * do (the values are the same in float32), with a note for each. */
START_TEST(float64_and_one_hot_data) {
    char p[8192];
    mr_error err = {0};
    mr_array x, y;
    snprintf(p, sizeof p, "%s/x.npy", dir);
    ck_assert(mr_array_read(p, &x, &err) == MR_OK);
    snprintf(p, sizeof p, "%s/y.npy", dir);
    ck_assert(mr_array_read(p, &y, &err) == MR_OK);
    const int64_t n = x.dims[0], row = mr_array_row_size(&x);
    /* an NPY v1 header for float64 (n, 8, 8), padded to 64 bytes */
    char head[128];
    int len =
        snprintf(head, sizeof head,
                 "{'descr': '<f8', 'fortran_order': False, 'shape': (%lld, 8, 8), }", (long long)n);
    const int total = (10 + len + 1 + 63) / 64 * 64;
    size_t bytes = (size_t)total + sizeof(double) * (size_t)(n * row);
    unsigned char *f = calloc(1, bytes);
    memcpy(f, "\x93NUMPY\1\0", 8);
    f[8] = (unsigned char)(total - 10), f[9] = 0;
    memset(f + 10, ' ', (size_t)(total - 10));
    memcpy(f + 10, head, (size_t)len);
    f[total - 1] = '\n';
    for (int64_t i = 0; i < n * row; i++) {
        double v = ((uint8_t *)x.data)[i];
        memcpy(f + total + 8 * i, &v, sizeof v);
    }
    free(tu_write_file(dir, "x64.npy", f, bytes));
    free(f);
    uint8_t *hot = calloc((size_t)(n * 4), 1);
    for (int64_t i = 0; i < n; i++)
        hot[i * 4 + ((uint8_t *)y.data)[i]] = 1;
    mr_array h = {.dtype = MR_DTYPE_U8, .ndim = 2, .dims = {n, 4}, .data = hot};
    snprintf(p, sizeof p, "%s/yhot.npy", dir);
    ck_assert(mr_npy_write(p, &h, &err) == MR_OK);
    free(hot);
    mr_array_free(&x), mr_array_free(&y);
    const char *cfg = "[net]\nbatch=8\nepochs=1\nseed=3\n"
                      "[data]\ntrain_images=%s\ntrain_labels=%s\nscale=1/255\n"
                      "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n";
    char text[1024];
    snprintf(text, sizeof text, cfg, "x.npy", "y.npy");
    free(tu_write_text(dir, "u8.cfg", text));
    snprintf(text, sizeof text, cfg, "x64.npy", "yhot.npy");
    free(tu_write_text(dir, "f64.cfg", text));
    char *out;
    int rc = run("--devices cpu:1 --quiet --json u8.json u8.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    rc = run("--devices cpu:1 --json f64.json f64.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "mirrored_train: note: yhot.npy: one-hot labels (n, 4) read as "
                              "class ids; x64.npy: float64 images read as float32\n"),
                  "%s", out);
    free(out);
    char h1[17], h2[17];
    read_hash("u8.json", h1);
    read_hash("f64.json", h2);
    ck_assert_str_eq(h1, h2);
}
END_TEST

/* On a terminal (script(1), of Debian's essential bsdutils, gives one) the
 * epoch draws a progress bar, redrawn in place (ESC [K); --verbose 2
 * prints the epoch lines only, as Keras's verbose=2 does. */
START_TEST(verbose_2_on_a_terminal) {
    char *out, cmd[16384];
    snprintf(cmd, sizeof cmd,
             "cd %s && script -qec '%s --devices cpu:1 --epochs 1 good.cfg' /dev/null", dir, exe);
    int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    /* the finished bar: "\r\033[K10/10 [=====...] - " (script turns \n into \r\n) */
    ck_assert_msg(strstr(out, "Epoch 1/1") && strstr(out, "\033[K") && strstr(out, "] - "),
                  "no bar on a terminal: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd,
             "cd %s && script -qec '%s --devices cpu:1 --epochs 1 --verbose 2 good.cfg' /dev/null",
             dir, exe);
    rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "Epoch 1/1") && !strstr(out, "\033[K") && !strstr(out, "] - "),
                  "a bar with --verbose 2: %s", out);
    free(out);
}
END_TEST

/* [net] early_stopping as Keras's EarlyStopping: with min_delta 100 no
 * epoch after the first improves val_loss, so patience 1 stops after epoch
 * 2 of 5; restore_best_weights ends with epoch 1's weights, bitwise those
 * of a run of 1 epoch. A run resumed from epoch 1's checkpoint replays the
 * logs and stops at the same epoch with the same weights; one resumed from
 * epoch 2's has nothing to train, and epoch 1's weights are not in it: it
 * keeps the last and says so. A val_ metric without a validation set is
 * refused. */
START_TEST(early_stopping) {
    const char *cfg = "[net]\nbatch=8\nepochs=%d\nvalidation_split=0.2\nseed=3\n"
                      "early_stopping=val_loss\npatience=1\nmin_delta=100\n"
                      "restore_best_weights=1\ncheckpoint=esck/es.h5\n"
                      "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=1/255\n"
                      "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
                      "[dense]\nunits=4\nactivation=softmax\n";
    char text[1024];
    snprintf(text, sizeof text, cfg, 5);
    free(tu_write_text(dir, "es.cfg", text));
    snprintf(text, sizeof text, cfg, 1);
    free(tu_write_text(dir, "es1.cfg", text));
    char *out;
    int rc = run("--devices cpu:2 --json es.json es.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "Epoch 2/5") && !strstr(out, "Epoch 3/5") &&
                      strstr(out, "Epoch 2: early stopping (val_loss: best ") &&
                      strstr(out, " at epoch 1, no improvement by more than min_delta in the 1 "
                                  "epoch after it)") &&
                      strstr(out, "Restoring model weights from the end of the best epoch: 1."),
                  "%s", out);
    free(out);
    rc = run("--devices cpu:2 --quiet --json es1.json --checkpoint-on-signal x.h5 es1.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    char h5[17], h1[17], hr[17];
    read_hash("es.json", h5);
    read_hash("es1.json", h1);
    ck_assert_str_eq(h5, h1);
    /* resumed after epoch 1: the same stop, the same weights */
    rc = run("--devices cpu:2 --json esr.json --resume esck/es-step000000010.h5 es.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "Epoch 2: early stopping") && !strstr(out, "Epoch 3/5"), "%s", out);
    free(out);
    read_hash("esr.json", hr);
    ck_assert_str_eq(hr, h5);
    /* resumed after epoch 2 (the stop): epoch 1's weights are gone */
    rc = run("--devices cpu:2 --resume esck/es-step000000020.h5 es.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "Epoch 2: early stopping") &&
                      strstr(out, "note: restore_best_weights: the best epoch (1) came before"),
                  "%s", out);
    free(out);
    free(tu_write_text(dir, "esbad.cfg",
                       "[net]\nearly_stopping=val_accuracy\n[data]\ntrain_images=x.npy\n"
                       "train_labels=y.npy\n[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=4\n"
                       "activation=softmax\n"));
    rc = run("esbad.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) &&
                      strstr(out, "early_stopping = val_accuracy needs a validation set"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* The learning_rate column of a --metrics CSV in dir (the sixth:
 * epoch,accuracy,loss,val_accuracy,val_loss,learning_rate,...; the val
 * columns may be empty) is want[0..n), one row per epoch. */
static void expect_rates(const char *name, const double *want, int n) {
    char *csv = tu_read_in(dir, name);
    ck_assert_ptr_nonnull(csv);
    const char *line = strchr(csv, '\n') + 1;
    for (int e = 0; e < n; e++) {
        const char *f = line;
        for (int comma = 0; comma < 5; comma++)
            f = strchr(f, ',') + 1;
        ck_assert_msg(atoi(line) == e && fabs(strtod(f, NULL) - want[e]) < 1e-9, "epoch %d: %s", e,
                      csv);
        line = strchr(line, '\n') + 1;
    }
    free(csv);
}

/* [net] reduce_lr_on_plateau as Keras's ReduceLROnPlateau: with min_delta
 * 100 no epoch after the first improves, so patience 1 and factor 0.5
 * halve the rate after epochs 2 and 3 (the metrics CSV's learning_rate:
 * 0.002, 0.002, 0.001, 0.0005), with Keras's line; a run resumed from
 * epoch 2's checkpoint replays the logs and ends with the same weights. A
 * cosine schedule beside it is refused. */
START_TEST(reduce_lr_on_plateau) {
    const char *cfg = "[net]\nbatch=8\nepochs=4\nvalidation_split=0.2\nseed=3\n"
                      "reduce_lr_on_plateau=val_loss\nreduce_lr_patience=1\n"
                      "reduce_lr_factor=0.5\nreduce_lr_min_delta=100\n%s"
                      "checkpoint=rlck/r.h5\n"
                      "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=1/255\n"
                      "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
                      "[dense]\nunits=4\nactivation=softmax\n";
    char text[1024];
    snprintf(text, sizeof text, cfg, "");
    free(tu_write_text(dir, "rl.cfg", text));
    char *out;
    int rc = run("--devices cpu:2 --metrics rl.csv --json rl.json rl.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "Epoch 2: ReduceLROnPlateau reducing learning rate to 0.001.\n") &&
                      strstr(out, "Epoch 3: ReduceLROnPlateau reducing learning rate to 0.0005.\n"),
                  "%s", out);
    free(out);
    const double want[4] = {0.002, 0.002, 0.001, 0.0005};
    expect_rates("rl.csv", want, 4);
    rc = run("--devices cpu:2 --quiet --json rlr.json --resume rlck/r-step000000020.h5 rl.cfg",
             &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    char h1[17], h2[17];
    read_hash("rl.json", h1);
    read_hash("rlr.json", h2);
    ck_assert_str_eq(h1, h2);
    snprintf(text, sizeof text, cfg, "lr_schedule=cosine\n");
    free(tu_write_text(dir, "rlbad.cfg", text));
    rc = run("rlbad.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "needs lr_schedule = constant"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* Rows [begin, begin + n) of dir/name into dir/out (NPY). */
static void write_rows(const char *name, int64_t begin, int64_t n, const char *out) {
    char p[8192];
    mr_error err = {0};
    mr_array a;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    ck_assert_msg(mr_array_read(p, &a, &err) == MR_OK, "%s", err.msg);
    const int64_t row = mr_array_row_size(&a);
    const size_t size = mr_dtype_size(a.dtype);
    mr_array part = a;
    part.dims[0] = n;
    part.data = (char *)a.data + (size_t)(begin * row) * size;
    snprintf(p, sizeof p, "%s/%s", dir, out);
    ck_assert_msg(mr_npy_write(p, &part, &err) == MR_OK, "%s", err.msg);
    mr_array_free(&a);
}

/* Keras's validation_data: [data] val_images/val_labels holding the last
 * 40 of the 200 examples train and validate as validation_split = 0.2 on
 * all 200 does: the same metrics (val_loss, val_accuracy included) and
 * bitwise the same weights. */
START_TEST(validation_files) {
    write_rows("x.npy", 0, 160, "xa.npy");
    write_rows("y.npy", 0, 160, "ya.npy");
    write_rows("x.npy", 160, 40, "xv.npy");
    write_rows("y.npy", 160, 40, "yv.npy");
    free(tu_write_text(dir, "val.cfg",
                       "[net]\nbatch=8\nepochs=2\nseed=3\n"
                       "[data]\ntrain_images=xa.npy\ntrain_labels=ya.npy\nval_images=xv.npy\n"
                       "val_labels=yv.npy\nscale=1/255\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
                       "[dense]\nunits=4\nactivation=softmax\n"));
    free(tu_write_text(dir, "split.cfg",
                       "[net]\nbatch=8\nepochs=2\nvalidation_split=0.2\nseed=3\n"
                       "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=1/255\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
                       "[dense]\nunits=4\nactivation=softmax\n"));
    char *out;
    int rc = run("--devices cpu:2 --metrics mv.csv --json v.json val.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "Train on 160 samples, validate on 40 samples"), "%s", out);
    free(out);
    rc = run("--devices cpu:2 --quiet --metrics ms.csv --json s.json split.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    char *a = tu_metrics_without_timing(dir, "mv.csv"),
         *b = tu_metrics_without_timing(dir, "ms.csv");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(a, b);
    free(a), free(b);
    char h1[17], h2[17];
    read_hash("v.json", h1);
    read_hash("s.json", h2);
    ck_assert_str_eq(h1, h2);
}
END_TEST

/* dir/name, an .npz of the .npy files in dir: members[2i] the member's name, members[2i+1]
 * the file; deflated (numpy.savez_compressed) or stored (numpy.savez). */
static void write_npz(const char *name, const char *const *members, int n, int deflate) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int code = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &code);
    ck_assert_ptr_nonnull(za);
    for (int i = 0; i < n; i++) {
        char file[8192], member[256];
        snprintf(file, sizeof file, "%s/%s", dir, members[2 * i + 1]);
        snprintf(member, sizeof member, "%s.npy", members[2 * i]);
        zip_source_t *src = zip_source_file(za, file, 0, -1);
        ck_assert_ptr_nonnull(src);
        zip_int64_t k = zip_file_add(za, member, src, ZIP_FL_OVERWRITE);
        ck_assert_int_ge(k, 0);
        zip_set_file_compression(za, (zip_uint64_t)k, deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
    }
    ck_assert_int_eq(zip_close(za), 0);
}

/* Keras's dataset files: --data d.npz, or [data] naming the whole archive, trains bitwise as
 * the same arrays in .npy files do; --batch-size and --validation-split are Keras fit's; an
 * archive without x_test/y_test trains without a test set (one line says so); wrong member
 * names are one line listing the archive's; mirrored_eval --data d.npz takes x_test, y_test. */
START_TEST(npz_data_and_fit_flags) {
    const char *const keras[] = {"x_train", "x.npy", "y_train", "y.npy",
                                 "x_test",  "x.npy", "y_test",  "y.npy"};
    write_npz("d.npz", keras, 4, 1);
    write_npz("nt.npz", keras, 2, 0);
    const char *const wrong[] = {"images", "x.npy", "labels", "y.npy"};
    write_npz("w.npz", wrong, 2, 0);
    free(tu_write_text(dir, "whole.cfg",
                       "[net]\nbatch=8\nepochs=2\nvalidation_split=0.2\nseed=3\n"
                       "[data]\ntrain_images=d.npz\ntest_images=d.npz\nscale=1/255\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
                       "[dense]\nunits=4\nactivation=softmax\n"));
    char *out, h_npy[17], h_whole[17], h_data[17];
    int rc = run("--devices cpu:2 --quiet --json zn.json good.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    rc = run("--devices cpu:2 --quiet --json zw.json whole.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    rc = run("--devices cpu:2 --quiet --json zd.json --save zd.h5 --data d.npz good.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    read_hash("zn.json", h_npy);
    read_hash("zw.json", h_whole);
    read_hash("zd.json", h_data);
    ck_assert_str_eq(h_npy, h_whole);
    ck_assert_str_eq(h_npy, h_data);
    rc = run("--devices cpu:2 --verbose 2 --data nt.npz --batch-size 20 --validation-split 0.25 "
             "--epochs 1 good.cfg",
             &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "nt.npz has no x_test and y_test: no test evaluation\n") &&
                      strstr(out, "= 20 global") &&
                      strstr(out, "Train on 150 samples, validate on 50 samples") &&
                      count_in(out, "Epoch 1/1") == 1 && !strstr(out, "Test loss"),
                  "%s", out);
    free(out);
    rc = run("--data w.npz good.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "w.npz: no x_train and y_train") &&
                      strstr(out, "the archive has: images, labels"),
                  "exit %d: %s", rc, out);
    free(out);
    rc = run("--data x.npy good.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "--data x.npy: expected an .npz"),
                  "exit %d: %s", rc, out);
    free(out);
    rc = run("--validation-split 1.5 good.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "--validation-split 1.5"), "%s", out);
    free(out);
    char *ev = tu_build_path("launch/mirrored_eval"), cmd[16384];
    snprintf(cmd, sizeof cmd, "cd %s && %s zd.h5 --devices cpu:1 --data d.npz", dir, ev);
    rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "200 examples of d.npz:x_test"), "exit %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "cd %s && %s zd.h5 --devices cpu:1 --data nt.npz", dir, ev);
    rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 2 && one_line(out) &&
                      strstr(out, "nt.npz: no member 'x_test'; the archive has: x_train, y_train"),
                  "exit %d: %s", rc, out);
    free(out), free(ev);
}
END_TEST

/* A folder of class folders (Keras's image_dataset_from_directory) as
 * [data] train_images and test_images: the 200 examples of x.npy as 8x8
 * PNGs in class folders c0..c3 trains as the same examples in that order
 * (class by class) from NPY files does: the same metrics and bitwise the
 * same weights (same-size images stay uint8, the exact pixels). The note
 * says what was found; mirrored_eval --data takes the folder; a labels file
 * beside a folder, a class count other than the model's, and a file
 * without labels are one-line errors, exit 2. */
START_TEST(image_folder_data) {
    mr_dataset ds;
    mr_error err = {0};
    char p[8192], q[8192];
    snprintf(p, sizeof p, "%s/x.npy", dir);
    snprintf(q, sizeof q, "%s/y.npy", dir);
    ck_assert_msg(mr_dataset_load(&ds, p, q, &err) == MR_OK, "%s", err.msg);
    mr_array xs = {.dtype = MR_DTYPE_U8, .ndim = 4, .dims = {ds.n, 8, 8, 1}};
    mr_array ys = {.dtype = MR_DTYPE_I32, .ndim = 1, .dims = {ds.n}};
    xs.data = malloc((size_t)(ds.n * 64));
    ys.data = malloc(sizeof(int32_t) * (size_t)ds.n);
    int64_t m = 0;
    for (int c = 0; c < 4; c++)
        for (int64_t i = 0; i < ds.n; i++) {
            if (ds.y[i] != c) continue;
            const uint8_t *img = (const uint8_t *)ds.x.data + i * 64;
            memcpy((uint8_t *)xs.data + m * 64, img, 64);
            ((int32_t *)ys.data)[m] = c;
            char name[64];
            snprintf(name, sizeof name, "imgs/c%d/%03lld.png", c, (long long)m++);
            free(tu_write_png(dir, name, 8, 8, 1, img));
        }
    snprintf(p, sizeof p, "%s/xs.npy", dir);
    ck_assert(mr_npy_write(p, &xs, &err) == MR_OK);
    snprintf(p, sizeof p, "%s/ys.npy", dir);
    ck_assert(mr_npy_write(p, &ys, &err) == MR_OK);
    mr_array_free(&xs), mr_array_free(&ys), mr_dataset_free(&ds);
    const char *model = "scale=1/255\n[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\n"
                        "activation=relu\n[dense]\nunits=4\nactivation=softmax\n";
    char text[4096];
    snprintf(text, sizeof text,
             "[net]\nbatch=8\nepochs=2\nvalidation_split=0.2\nseed=3\n"
             "[data]\ntrain_images=imgs\ntest_images=imgs\n%s",
             model);
    free(tu_write_text(dir, "folder.cfg", text));
    snprintf(text, sizeof text,
             "[net]\nbatch=8\nepochs=2\nvalidation_split=0.2\nseed=3\n"
             "[data]\ntrain_images=xs.npy\ntrain_labels=ys.npy\ntest_images=xs.npy\n"
             "test_labels=ys.npy\n%s",
             model);
    free(tu_write_text(dir, "sorted.cfg", text));
    char *out;
    int rc = run("--devices cpu:2 --metrics mf.csv --json f.json --save ck.h5 folder.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "imgs: found 200 files belonging to 4 classes; validation_split "
                              "holds out its last 40 files, of the last classes") &&
                      strstr(out, "Epoch 2/2") && strstr(out, "Test loss"),
                  "%s", out);
    free(out);
    rc = run("--devices cpu:2 --quiet --metrics mn.csv --json n.json sorted.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    char *a = tu_metrics_without_timing(dir, "mf.csv"),
         *b = tu_metrics_without_timing(dir, "mn.csv");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(a, b);
    free(a), free(b);
    char h1[17], h2[17];
    read_hash("f.json", h1);
    read_hash("n.json", h2);
    ck_assert_str_eq(h1, h2);
    /* mirrored_eval --data FOLDER: labelled by its folders */
    char *ev = tu_build_path("launch/mirrored_eval"), cmd[16384];
    snprintf(cmd, sizeof cmd, "cd %s && %s ck.h5 --data imgs --quiet", dir, ev);
    rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "accuracy"), "exit %d: %s", rc, out);
    free(out);
    free(ev);
    /* errors, one line each, exit 2 */
    snprintf(text, sizeof text, "[net]\nbatch=8\n[data]\ntrain_images=imgs\ntrain_labels=y.npy\n%s",
             model);
    free(tu_write_text(dir, "bad1.cfg", text));
    rc = run("bad1.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "imgs: a folder of class folders") &&
                      strstr(out, "give no labels file"),
                  "exit %d: %s", rc, out);
    free(out);
    snprintf(text, sizeof text, "[net]\nbatch=8\n[data]\ntrain_images=x.npy\n%s", model);
    free(tu_write_text(dir, "bad2.cfg", text));
    rc = run("bad2.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) &&
                      strstr(out, "bad2.cfg: [data] train_labels is missing"),
                  "exit %d: %s", rc, out);
    free(out);
    snprintf(text, sizeof text, "[net]\nbatch=8\n[data]\ntrain_images=imgs\n%s", model);
    char *five = strstr(text, "units=4");
    five[6] = '5';
    free(tu_write_text(dir, "bad3.cfg", text));
    rc = run("bad3.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) &&
                      strstr(out, "imgs: 4 class folders, but the model has 5"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* lr_schedule = steps, as a user runs it: the plan line says the steps,
 * the metrics CSV's learning_rate follows them epoch by epoch (0.002, then
 * x0.5 from epoch 2, x0.25 from epoch 3), and a run resumed after epoch 1
 * ends with the same weights. */
START_TEST(steps_schedule_run) {
    free(tu_write_text(dir, "st.cfg",
                       "[net]\nglobal_batch=8\nepochs=3\nlearning_rate=0.002\nseed=3\n"
                       "lr_schedule=steps\nlr_boundaries=1,2\nlr_factors=0.5,0.25\n"
                       "checkpoint=stck/s.h5\n"
                       "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=1/255\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    char *out;
    int rc = run("--devices cpu:2 --metrics st.csv --json st.json st.cfg", &out);
    ck_assert_msg(rc == 0 && strstr(out, ", then 0.001 after epoch 1, 0.0005 after epoch 2)"),
                  "exit %d: %s", rc, out);
    free(out);
    const double want[3] = {0.002, 0.001, 0.0005};
    expect_rates("st.csv", want, 3);
    /* 200 examples / 8 = 25 updates an epoch */
    rc = run("--devices cpu:2 --quiet --json str.json --resume stck/s-step000000025.h5 st.cfg",
             &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    char h1[17], h2[17];
    read_hash("st.json", h1);
    read_hash("str.json", h2);
    ck_assert_str_eq(h1, h2);
}
END_TEST

/* --synthetic, as a benchmark runs: the [data] files need not exist; an
 * images/sec line every --display-every updates after the warm-up (64
 * examples / 8 = 8 updates an epoch, 3 epochs = 24; 4 warm-up, then lines
 * at updates 8, 12, ..., 24) and the total, also in --json; the same
 * command twice trains the same bits (the data are keyed by the seed), and
 * so does a .cfg with [augment] (none on random examples). */
START_TEST(synthetic_benchmark) {
    free(tu_write_text(dir, "syn.cfg",
                       "[net]\nglobal_batch=8\nepochs=3\nseed=5\n"
                       "[data]\ntrain_images=nowhere/x.npy\ntrain_labels=nowhere/y.npy\n"
                       "scale=1/255\n[input]\nshape=8,8,1\n[conv2d]\nfilters=2\nsize=3\n"
                       "activation=relu\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    char *out;
    int rc = run("--devices cpu:2 --synthetic 64 --display-every 4 --warmup-steps 4 --json "
                 "syn1.json syn.cfg",
                 &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "Synthetic data: 64 random examples") &&
                      strstr(out, "Train on 64 samples, 8 steps per epoch") &&
                      strstr(out, "\nStep 8: images/sec: ") &&
                      strstr(out, "\nStep 24: images/sec: ") && !strstr(out, "Step 4: ") &&
                      strstr(out, "(2 replicas: ") && strstr(out, "20 updates after 4 warm-up)") &&
                      !strstr(out, "Test loss"),
                  "%s", out);
    int lines = 0;
    for (const char *p = out; (p = strstr(p, "images/sec: ")) != NULL; p++)
        lines++;
    ck_assert_msg(lines == 5 + 1, "%d images/sec lines: %s", lines, out);
    free(out);
    snprintf(out = malloc(8192), 8192, "%s/syn1.json", dir);
    char *json = tu_read_file(out, NULL);
    free(out);
    ck_assert_msg(json && strstr(json, "\"images_per_sec\": ") &&
                      strstr(json, "\"images_per_sec_updates\": 20") &&
                      strstr(json, "\"warmup_updates\": 4") &&
                      !strstr(json, "\"images_per_sec\": null"),
                  "%s", json);
    free(json);
    rc = run("--devices cpu:2 --synthetic 64 --quiet --json syn2.json syn.cfg", &out);
    ck_assert_msg(rc == 0 && out[0] == '\0', "exit %d: %s", rc, out);
    free(out);
    char h1[17], h2[17];
    read_hash("syn1.json", h1);
    read_hash("syn2.json", h2);
    ck_assert_str_eq(h1, h2);
    /* [data] standardize applies to synthetic examples too (statistics
     * of the examples): the weights differ from the run without it */
    free(tu_write_text(dir, "synstd.cfg",
                       "[net]\nglobal_batch=8\nepochs=3\nseed=5\n"
                       "[data]\ntrain_images=nowhere/x.npy\ntrain_labels=nowhere/y.npy\n"
                       "scale=1/255\nstandardize=1\n[input]\nshape=8,8,1\n[conv2d]\nfilters=2\n"
                       "size=3\nactivation=relu\n[flatten]\n[dense]\nunits=4\n"
                       "activation=softmax\n"));
    rc = run("--devices cpu:2 --synthetic 64 --quiet --json syn3.json synstd.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    read_hash("syn3.json", h2);
    ck_assert_str_ne(h1, h2);
    /* [augment] is not applied to synthetic examples: the bits without it */
    free(tu_write_text(dir, "synaug.cfg",
                       "[net]\nglobal_batch=8\nepochs=3\nseed=5\n"
                       "[data]\ntrain_images=nowhere/x.npy\ntrain_labels=nowhere/y.npy\n"
                       "scale=1/255\n[augment]\nflip=1\nshift=2\n[input]\nshape=8,8,1\n"
                       "[conv2d]\nfilters=2\nsize=3\nactivation=relu\n[flatten]\n[dense]\n"
                       "units=4\nactivation=softmax\n"));
    rc = run("--devices cpu:2 --synthetic 64 --quiet --json syn4.json synaug.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    read_hash("syn4.json", h2);
    ck_assert_str_eq(h1, h2);
    /* without --synthetic the missing files are what they are */
    rc = run("--devices cpu:2 syn.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "nowhere/x.npy"), "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* [normalization]'s state (mean, variance) in a saved model. */
static void read_stats(const char *name, float st[2]) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_msg(mr_h5_open(&h, path, &err) == MR_OK, "%s", err.msg);
    const int64_t one = 1;
    ck_assert_int_eq(mr_h5_read(&h, h.file,
                                "model_weights/normalization/sequential/normalization/mean",
                                MR_H5_F32, 1, &one, &st[0], &err),
                     MR_OK);
    ck_assert_int_eq(mr_h5_read(&h, h.file,
                                "model_weights/normalization/sequential/normalization/variance",
                                MR_H5_F32, 1, &one, &st[1], &err),
                     MR_OK);
    mr_h5_close(&h);
}

/* Keras's adapt() before fit: a fresh fit takes the mean and variance of
 * the training rows (the first 160 of 200: validation_split 0.2) through
 * [data] scale and [rescaling]; the same bits on 1 and 2 replicas;
 * --init-weights keeps the file's statistics (here the .cfg's scale
 * changed, which a new adaptation would show). */
START_TEST(normalization_adapts) {
    const char *fmt = "[net]\nbatch=8\nepochs=1\nvalidation_split=0.2\nseed=3\n"
                      "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=%s\n"
                      "[input]\nshape=8,8,1\n[rescaling]\nscale=2\noffset=-1\n"
                      "[normalization]\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n";
    char text[1024];
    snprintf(text, sizeof text, fmt, "1/255");
    free(tu_write_text(dir, "norm.cfg", text));
    snprintf(text, sizeof text, fmt, "1/127");
    free(tu_write_text(dir, "norm2.cfg", text));
    char *out;
    int rc = run("--devices cpu:2 --quiet --save n2.h5 norm.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    rc = run("--devices cpu:1 --quiet --save n1.h5 norm.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    rc = run("--devices cpu:2 --quiet --init-weights n2.h5 --save n3.h5 norm2.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    /* the reference: the same sums over the same rows */
    char px[8192], py[8192];
    snprintf(px, sizeof px, "%s/x.npy", dir);
    snprintf(py, sizeof py, "%s/y.npy", dir);
    mr_dataset ds;
    mr_error err = {0};
    ck_assert_msg(mr_dataset_load(&ds, px, py, &err) == MR_OK, "%s", err.msg);
    double sum = 0.0, sq = 0.0;
    const int64_t rows = 160, n = rows * ds.row;
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t k = 0; k < n; k++) {
        float x = ((const uint8_t *)ds.x.data)[k] * (1.0f / 255.0f);
        v[k] = x * 2.0f + -1.0f;
        sum += v[k];
    }
    const double mean = sum / (double)n;
    for (int64_t k = 0; k < n; k++)
        sq += (v[k] - mean) * (v[k] - mean);
    free(v);
    ck_assert_int_eq(ds.x.dtype, MR_DTYPE_U8);
    mr_dataset_free(&ds);
    float s1[2], s2[2], s3[2];
    read_stats("n1.h5", s1);
    read_stats("n2.h5", s2);
    read_stats("n3.h5", s3);
    ck_assert_msg(s2[0] == (float)mean && s2[1] == (float)(sq / (double)n),
                  "adapted %.9g %.9g, want %.9g %.9g", s2[0], s2[1], mean, sq / (double)n);
    ck_assert(s1[0] == s2[0] && s1[1] == s2[1]);
    ck_assert(s3[0] == s2[0] && s3[1] == s2[1]);
}
END_TEST

/* save_best_only = val_loss (Keras ModelCheckpoint(save_best_only=True)):
 * a Keras line and a write of --save at each epoch whose val_loss fell
 * below every earlier one, read back from the metrics CSV, and none at the
 * end: the file holds the best epoch (a resume from it starts after that
 * epoch). Without --save it is refused before training. */
START_TEST(save_best_only) {
    free(tu_write_text(dir, "sb.cfg",
                       "[net]\nbatch=8\nepochs=6\nvalidation_split=0.3\nseed=3\n"
                       "learning_rate=0.05\nsave_best_only=val_loss\n"
                       "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=1/255\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
                       "[dense]\nunits=4\nactivation=softmax\n"));
    char *out;
    /* random labels (--synthetic): val_loss falls, then wanders */
    int rc =
        run("--devices cpu:2 --synthetic 200 --verbose 2 --display-every 1000 --metrics sb.csv "
            "--save sbbest.h5 sb.cfg",
            &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    char *csv = tu_read_in(dir, "sb.csv");
    ck_assert_ptr_nonnull(csv);
    double best = INFINITY;
    int improved = 0, best_epoch = -1;
    const char *line = strchr(csv, '\n') + 1;
    for (int e = 0; e < 6; e++) {
        const char *f = line;
        for (int comma = 0; comma < 4; comma++)
            f = strchr(f, ',') + 1;
        const double v = strtod(f, NULL);
        if (v < best) {
            best = v, best_epoch = e, improved++;
            char want[128];
            snprintf(want, sizeof want, "Epoch %d: val_loss improved from ", e + 1);
            ck_assert_msg(strstr(out, want), "no '%s' in %s", want, out);
        }
        line = strchr(line, '\n') + 1;
    }
    free(csv);
    ck_assert_int_eq(count_in(out, "improved from"), improved);
    ck_assert_int_eq(count_in(out, "Saved sbbest.h5"), improved);
    ck_assert_msg(improved >= 1 && improved < 6, "improved %d times: %s", improved, out);
    free(out);
    char want[128], cmd[512];
    snprintf(cmd, sizeof cmd,
             "--devices cpu:2 --synthetic 200 --dry-run --resume sbbest.h5 --save sbx.h5 sb.cfg");
    rc = run(cmd, &out);
    snprintf(want, sizeof want, "Resuming from sbbest.h5: epoch %d/6", best_epoch + 2);
    ck_assert_msg(rc == 0 && strstr(out, want), "exit %d, no '%s': %s", rc, want, out);
    free(out);
    /* resumed from it, the run replays the same later epochs (bitwise),
     * and none beats the best the checkpoint's history holds: no write */
    rc = run("--devices cpu:2 --synthetic 200 --verbose 2 --display-every 1000 --resume sbbest.h5 "
             "--save sbbest.h5 sb.cfg",
             &out);
    ck_assert_msg(rc == 0 && !strstr(out, "improved from") && !strstr(out, "Saved sbbest.h5") &&
                      strstr(out, "this run did not write sbbest.h5"),
                  "exit %d: %s", rc, out);
    free(out);
    rc = run("--devices cpu:2 --synthetic 200 sb.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "no --save was given"), "exit %d: %s", rc,
                  out);
    free(out);
}
END_TEST

/* --dry-run: the summary and the plan, exit 0, and no file or folder made
 * (not the outputs, not the checkpoint folder) */
START_TEST(dry_run) {
    free(tu_write_text(dir, "dry.cfg",
                       "[net]\nbatch=8\nepochs=2\nvalidation_split=0.2\ncheckpoint=dryck/c.h5\n"
                       "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n[input]\nshape=8,8,1\n"
                       "[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    char *out;
    int rc = run("--dry-run --devices cpu:2 --metrics d.csv --json d.json --log d.jsonl --save "
                 "d.h5 dry.cfg",
                 &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "Total params: 260") && strstr(out, "2 replicas (cpu:0, cpu:1)") &&
                      strstr(out, "10 steps per epoch") &&
                      strstr(out, "Dry run: nothing trained or written") &&
                      strstr(out, "160 training, 40 validation, 0 test") && !strstr(out, "Epoch"),
                  "%s", out);
    free(out);
    const char *files[] = {"d.csv", "d.json", "d.jsonl", "d.h5", "dryck"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        ck_assert_msg(!exists(files[i]), "--dry-run made %s", files[i]);
    /* the plan line names the update's options where they are set */
    free(tu_write_text(dir, "dry3.cfg",
                       "[net]\nbatch=8\noptimizer=adamw\nglobal_clipnorm=2.5\n[data]\n"
                       "train_images=x.npy\ntrain_labels=y.npy\n[input]\nshape=8,8,1\n"
                       "[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    rc = run("--dry-run --devices cpu:2 dry3.cfg", &out);
    ck_assert_msg(rc == 0 && strstr(out, "), adamw weight decay 0.004, global_clipnorm 2.5\n"),
                  "exit %d: %s", rc, out);
    free(out);
    rc = run("--dry-run --devices cpu:2 dry.cfg", &out);
    ck_assert_msg(rc == 0 && !strstr(out, "weight decay") && !strstr(out, "clip"), "exit %d: %s",
                  rc, out);
    free(out);
    /* a dry run still fails on what a run would fail on, before training */
    free(tu_write_text(dir, "dry2.cfg",
                       "[net]\nglobal_batch=9\n[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    ck_assert_int_eq(run("--dry-run --devices cpu:2 dry2.cfg", &out), 2);
    ck_assert_msg(one_line(out) && strstr(out, "global_batch=9"), "%s", out);
    free(out);
}
END_TEST

/* --max-steps: stops mid-epoch with a checkpoint and --save of where it
 * stopped; resuming from it gives bitwise the uninterrupted run; a
 * checkpoint already at N has nothing to train; N at an epoch's end stops
 * after that epoch */
START_TEST(max_steps) {
    free(tu_write_text(dir, "ms.cfg",
                       "[net]\nbatch=8\nepochs=2\nvalidation_split=0.2\nseed=3\n"
                       "checkpoint=msck/c.h5\n"
                       "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n[input]\nshape=8,8,1\n"
                       "[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    char *out;
    /* 160 training examples, batch 8: 20 updates per epoch */
    int rc = run("--devices cpu:1 --max-steps 5 --save ms5.h5 --metrics ms.csv ms.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "Stopped by --max-steps 5: update 5 of epoch 1/2") &&
                      strstr(out, "Saved msck/c-step000000005.h5 (epoch 1, step 5)") &&
                      strstr(out, "Saved ms5.h5 (epoch 1, step 5)") && !strstr(out, "Epoch 1/2"),
                  "%s", out);
    free(out);
    rc = run("--devices cpu:1 --quiet --resume ms5.h5 --json resumed.json ms.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    rc = run("--devices cpu:1 --quiet --json whole.json ms.cfg", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    char h1[17], h2[17];
    read_hash("resumed.json", h1);
    read_hash("whole.json", h2);
    ck_assert_str_eq(h1, h2);
    rc = run("--devices cpu:1 --resume ms5.h5 --max-steps 5 ms.cfg", &out);
    ck_assert_msg(rc == 2 && one_line(out) && strstr(out, "ms5.h5") &&
                      strstr(out, "nothing to train"),
                  "exit %d: %s", rc, out);
    free(out);
    rc = run("--devices cpu:1 --max-steps 20 --json ms20.json ms.cfg", &out);
    ck_assert_msg(rc == 0 && strstr(out, "Epoch 1/2") && !strstr(out, "Epoch 2/2") &&
                      strstr(out, "Stopped by --max-steps 20: after epoch 1/2"),
                  "exit %d: %s", rc, out);
    free(out);
    read_hash("ms20.json", h1);
    ck_assert_str_ne(h1, h2);
    /* --json counts the epochs finished */
    char p[8192];
    snprintf(p, sizeof p, "%s/ms20.json", dir);
    char *json = tu_read_file(p, NULL);
    ck_assert_msg(json && strstr(json, "\"epochs\": 1,"), "%s", json);
    free(json);
}
END_TEST

/* ---- files: outputs that would destroy inputs, failed writes, inputs
 * that are not regular files, signals before training, a closed stdout */

/* Runs the shell command `cmd` in dir, $T naming mirrored_train. */
static int run_sh(const char *cmd, char **out) {
    char full[16384];
    snprintf(full, sizeof full, "cd %s && T=%s && { %s; }", dir, exe, cmd);
    return tu_run(full, out);
}

/* Runs mirrored_train with args: exit `want`, one error line, `line` in it. */
static void expect_refused(const char *args, int want, const char *line) {
    char *out;
    int rc = run(args, &out);
    ck_assert_msg(rc == want && strstr(out, line) && count_in(out, "mirrored_train: ") == 1,
                  "'%s' exited %d: %s", args, rc, out);
    free(out);
}

/* An output equal to an input or another output: refused before training,
 * exit 2, one line naming both; the input is untouched. */
START_TEST(outputs_overwriting_inputs) {
    expect_refused("good.cfg --metrics good.cfg", 2,
                   "mirrored_train: --metrics good.cfg is also MODEL.cfg (good.cfg)");
    char p[8192];
    snprintf(p, sizeof p, "%s/good.cfg", dir);
    char *text = tu_read_file(p, NULL);
    ck_assert_str_eq(text, good_cfg);
    free(text);
    expect_refused("good.cfg --save s.h5 --json ./s.h5", 2, "--json ./s.h5 is also --save (s.h5)");
    expect_refused("good.cfg --log x.npy", 2, "--log x.npy is also [data] train_images");
    expect_refused("good.cfg --trace y.npy", 2, "--trace y.npy is also [data] train_labels");
    /* --data's archive, untouched (it was overwritten, exit 0) */
    const char *const members[] = {"x_train", "x.npy", "y_train", "y.npy"};
    write_npz("d.npz", members, 2, 0);
    snprintf(p, sizeof p, "%s/d.npz", dir);
    size_t size0 = 0, size1 = 0;
    char *npz0 = tu_read_file(p, &size0);
    expect_refused("good.cfg --data d.npz --json ./d.npz", 2,
                   "--json ./d.npz is also --data (d.npz)");
    expect_refused("good.cfg --data d.npz --save d.npz", 2, "--save d.npz is also --data (d.npz)");
    char *npz1 = tu_read_file(p, &size1);
    ck_assert_msg(npz0 && npz1 && size0 == size1 && memcmp(npz0, npz1, size0) == 0,
                  "--data d.npz changed");
    free(npz0), free(npz1);
    /* a checkpoint may replace the --resume file; the other outputs may not */
    char *o;
    ck_assert_int_eq(run("good.cfg --quiet --save r.h5", &o), 0);
    free(o);
    ck_assert_int_eq(run("good.cfg --quiet --epochs 3 --resume r.h5 --save r.h5", &o), 0);
    free(o);
    expect_refused("good.cfg --epochs 4 --resume r.h5 --metrics r.h5", 2,
                   "--metrics r.h5 is also --resume (r.h5)");
    /* devices may be named by several outputs */
    char *out;
    int rc = run("good.cfg --quiet --metrics /dev/null --log /dev/null --json /dev/null", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* A write that fails (/dev/full: ENOSPC) is a line naming the file, exit
 * 1 (docs/usage.md); an HDF5 output must be a regular file. /dev/full
 * stays the device it was. */
START_TEST(failed_writes) {
    expect_refused("good.cfg --quiet --metrics /dev/full", 1,
                   "mirrored_train: --metrics /dev/full: cannot write: No space left on device");
    expect_refused("good.cfg --quiet --log /dev/full", 1,
                   "mirrored_train: --log /dev/full: cannot write: No space left on device");
    expect_refused("good.cfg --quiet --json /dev/full", 1,
                   "mirrored_train: --json /dev/full: cannot write: No space left on device");
    expect_refused("good.cfg --quiet --save /dev/full", 2,
                   "mirrored_train: --save /dev/full: not a regular file (a character device)");
    struct stat sb;
    ck_assert(stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode));
}
END_TEST

/* Inputs that are not regular files are refused before they are opened:
 * a FIFO (open would block), /dev/zero (a reader would never end). */
START_TEST(inputs_not_regular) {
    char *out;
    ck_assert_int_eq(run_sh("rm -f f.cfg && mkfifo f.cfg", &out), 0);
    free(out);
    expect_refused("f.cfg", 2, "mirrored_train: f.cfg: not a regular file (a FIFO)");
    expect_refused("good.cfg --resume /dev/zero", 2,
                   "--resume /dev/zero: not a regular file (a character device)");
    expect_refused("good.cfg --init-weights /dev/zero", 2,
                   "--init-weights /dev/zero: not a regular file (a character device)");
    free(tu_write_text(dir, "fifo_data.cfg",
                       "[net]\nbatch=8\nepochs=1\n[data]\ntrain_images=f.cfg\ntrain_labels=y.npy\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=4\n"
                       "activation=softmax\n"));
    expect_refused("fifo_data.cfg", 2, "[data] train_images");
}
END_TEST

/* SIGTERM while the run waits before training (here in open() of a --metrics
 * FIFO that nobody reads): it ends at once, exit 143, one line. The wait
 * for the open is an event (the kernel's wait channel); a run still alive
 * 60 s after the signal is killed and fails the test. */
START_TEST(signal_before_training) {
    char *out;
    int rc = run_sh("rm -f m.fifo && mkfifo m.fifo && "
                    "{ $T good.cfg --quiet --metrics m.fifo & p=$!; n=0; "
                    "while [ \"$(cat /proc/$p/wchan 2>/dev/null)\" != wait_for_partner ] && "
                    "[ $n -lt 6000 ]; do sleep 0.05; n=$((n+1)); done; kill -TERM $p; n=0; "
                    "while kill -0 $p 2>/dev/null && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); "
                    "done; kill -KILL $p 2>/dev/null; wait $p; }",
                    &out);
    ck_assert_msg(rc == 143 && strstr(out, "stopped by SIGTERM before training") && one_line(out),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* stdout a pipe whose reader is gone (mirrored_train | head): progress is
 * best effort, the run finishes (exit 0) and writes its files. */
START_TEST(closed_stdout) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    close(fds[0]);
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "cd %s && rm -f c.h5 c.json && exec %s good.cfg --save c.h5 --json "
             "c.json 2>err.txt",
             dir, exe);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL); /* as a shell's pipeline has it */
        dup2(fds[1], STDOUT_FILENO);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    char p[8192];
    snprintf(p, sizeof p, "%s/err.txt", dir);
    char *err = tu_read_file(p, NULL);
    ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "status %d: %s", ws, err);
    free(err);
    snprintf(p, sizeof p, "%s/c.h5", dir);
    ck_assert(access(p, R_OK) == 0);
    snprintf(p, sizeof p, "%s/c.json", dir);
    ck_assert(access(p, R_OK) == 0);
}
END_TEST

/* --max-steps inside the first epoch: --metrics has its header (CSVLogger
 * writes a row at an epoch's end only), not 0 bytes. */
START_TEST(max_steps_metrics_header) {
    char *out;
    int rc = run("good.cfg --quiet --max-steps 2 --metrics ms2.csv", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    char p[8192];
    snprintf(p, sizeof p, "%s/ms2.csv", dir);
    char *csv = tu_read_file(p, NULL);
    ck_assert_msg(csv && strncmp(csv, "epoch,accuracy,loss,", 20) == 0 && one_line(csv), "%s", csv);
    free(csv);
}
END_TEST

/* mirrored_eval and mirrored_export: a checkpoint that is a device is
 * refused up front, --predict over the checkpoint is refused, and a write
 * that fails (a full disk: /dev/full, or a file size limit) is exit 1. */
START_TEST(eval_and_export_files) {
    char *out;
    int rc = run("good.cfg --quiet --save ck.h5", &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    const struct {
        const char *cmd;
        int want;
        const char *line;
    } cases[] = {
        {"$E /dev/zero", 2, "mirrored_eval: /dev/zero: not a regular file (a character device)"},
        {"$E ck.h5 --predict ck.h5", 2, "--predict ck.h5 is also CHECKPOINT.h5 (ck.h5)"},
        {"$E ck.h5 --predict /dev/full", 1,
         "mirrored_eval: --predict /dev/full: cannot write: No space left on device"},
        {"$E ck.h5 --json /dev/full", 1,
         "mirrored_eval: --json /dev/full: cannot write: No space left on device"},
        {"$X /dev/zero o.keras", 2,
         "mirrored_export: /dev/zero: not a regular file (a character device)"},
        /* writes beyond 1 KiB fail (EFBIG) where a disk would be full */
        {"ulimit -f 2 && trap '' XFSZ && $X ck.h5 o.keras", 1, "mirrored_export: o.keras"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "E=$(dirname $T)/mirrored_eval; X=$(dirname $T)/mirrored_export; %s",
                 cases[i].cmd);
        rc = run_sh(cmd, &out);
        ck_assert_msg(rc == cases[i].want && strstr(out, cases[i].line) &&
                          count_in(out, "mirrored_e") == 1,
                      "'%s' exited %d: %s", cases[i].cmd, rc, out);
        free(out);
    }
    struct stat sb;
    ck_assert(stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode));
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, bad_options);
    tcase_add_test(tc, bad_timeout_env);
    tcase_add_test(tc, seed_range);
    tcase_add_test(tc, gpu_without_gpu);
    tcase_add_test(tc, bad_cfg);
    tcase_add_test(tc, bad_data);
    tcase_add_test(tc, trains_and_writes_logs);
    tcase_add_test(tc, top_k_and_per_class_reported);
    tcase_add_test(tc, binary_crossentropy_trains);
    tcase_add_test(tc, multi_label_bce_trains);
    tcase_add_test(tc, global_batch_errors);
    tcase_add_test(tc, dry_run);
    tcase_add_test(tc, steps_schedule_run);
    tcase_add_test(tc, synthetic_benchmark);
    tcase_add_test(tc, normalization_adapts);
    tcase_add_test(tc, save_best_only);
    tcase_add_test(tc, max_steps);
    tcase_add_test(tc, float64_and_one_hot_data);
    tcase_add_test(tc, validation_files);
    tcase_add_test(tc, image_folder_data);
    tcase_add_test(tc, verbose_2_on_a_terminal);
    tcase_add_test(tc, npz_data_and_fit_flags);
    tcase_add_test(tc, early_stopping);
    tcase_add_test(tc, reduce_lr_on_plateau);
    tcase_add_test(tc, trace_and_where_the_time_went);
    suite_add_tcase(s, tc);
    TCase *files = tcase_create("files");
    tcase_add_checked_fixture(files, setup, NULL);
    tcase_set_timeout(files, 300);
    tcase_add_test(files, outputs_overwriting_inputs);
    tcase_add_test(files, failed_writes);
    tcase_add_test(files, inputs_not_regular);
    tcase_add_test(files, signal_before_training);
    tcase_add_test(files, closed_stdout);
    tcase_add_test(files, max_steps_metrics_header);
    tcase_add_test(files, eval_and_export_files);
    suite_add_tcase(s, files);
    return tu_run_suite(s);
}
