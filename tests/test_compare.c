/* test_compare.c: mirrored_compare as a user runs it: the table and summary
 * of two metrics CSV files (mirrored_train's columns, the older five, and
 * Keras's alphabetical order), --json, --plot through gnuplot (a real PNG
 * when gnuplot is installed; a fake gnuplot for its failures), one-line
 * errors with exit 2 and no output files for bad input, and the files that
 * mirrored_train --metrics writes. Expected numbers are computed here from
 * the inputs. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch/compare/compare.h"
#include "launch/compare/metrics_csv.h"
#include "tests/testutil.h"

static char exe[4096], train_exe[4096];
static char dir[4096];

static void setup(void) {
    char *p = tu_build_path("launch/mirrored_compare");
    snprintf(exe, sizeof exe, "%s", p);
    free(p);
    p = tu_build_path("launch/mirrored_train");
    snprintf(train_exe, sizeof train_exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
}

/* Runs mirrored_compare in dir with `env` (may be "") before it; returns the
 * exit status and the output (stdout and stderr). */
static int run_env(const char *env, const char *args, char **out) {
    char cmd[32768];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s '%s' %s", dir, env, exe, args);
    return tu_run(cmd, out);
}

static int run(const char *args, char **out) {
    return run_env("", args, out);
}

static int one_line(const char *s) {
    const char *nl = strchr(s, '\n');
    return nl != NULL && nl[1] == '\0';
}

static int exists_in_dir(const char *name) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return tu_exists(path);
}

/* Number of entries in a directory (without . and ..). */
static int count_entries(const char *path) {
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "%s", path);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* ---- inputs ---- */

typedef struct epoch_metrics {
    double loss, acc, val_loss, val_acc, lr, sps, secs;
} epoch_metrics;

/* Writes a CSV in mirrored_train's current columns (has_val: val columns filled). */
static void write_new(const char *name, const epoch_metrics *m, int n, int has_val) {
    char text[4096];
    size_t len = (size_t)snprintf(
        text, sizeof text,
        "epoch,accuracy,loss,val_accuracy,val_loss,learning_rate,samples_per_sec,seconds\n");
    for (int e = 0; e < n; e++) {
        len += (size_t)snprintf(text + len, sizeof text - len, "%d,%.6f,%.6f,", e, m[e].acc,
                                m[e].loss);
        if (has_val)
            len += (size_t)snprintf(text + len, sizeof text - len, "%.6f,%.6f", m[e].val_acc,
                                    m[e].val_loss);
        else
            len += (size_t)snprintf(text + len, sizeof text - len, ",");
        len += (size_t)snprintf(text + len, sizeof text - len, ",%.8g,%.1f,%.3f\n", m[e].lr,
                                m[e].sps, m[e].secs);
    }
    free(tu_write_text(dir, name, text));
}

/* The older five columns (mirrored_train before samples_per_sec). */
static void write_old(const char *name, const epoch_metrics *m, int n) {
    char text[4096];
    size_t len = (size_t)snprintf(text, sizeof text, "epoch,accuracy,loss,val_accuracy,val_loss\n");
    for (int e = 0; e < n; e++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%d,%.6f,%.6f,%.6f,%.6f\n", e,
                                m[e].acc, m[e].loss, m[e].val_acc, m[e].val_loss);
    free(tu_write_text(dir, name, text));
}

/* Keras's CSVLogger: epoch, then its log keys sorted alphabetically. */
static void write_keras(const char *name, const epoch_metrics *m, int n) {
    char text[4096];
    size_t len = (size_t)snprintf(text, sizeof text,
                                  "epoch,accuracy,learning_rate,loss,val_accuracy,val_loss\n");
    for (int e = 0; e < n; e++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%d,%.6f,%.8g,%.6f,%.6f,%.6f\n", e,
                                m[e].acc, m[e].lr, m[e].loss, m[e].val_acc, m[e].val_loss);
    free(tu_write_text(dir, name, text));
}

/* Run A, and run B: twice as fast in every epoch (half the seconds), slightly
 * different curves. */
static const epoch_metrics run_a[3] = {
    {0.900, 0.700, 0.850, 0.720, 0.002, 1000.0, 10.0},
    {0.600, 0.800, 0.650, 0.790, 0.002, 3000.0, 30.0},
    {0.450, 0.850, 0.550, 0.820, 0.002, 2000.0, 20.0},
};
static const epoch_metrics run_b[3] = {
    {0.850, 0.710, 0.830, 0.730, 0.002, 2000.0, 5.0},
    {0.580, 0.810, 0.640, 0.795, 0.002, 6000.0, 15.0},
    {0.440, 0.860, 0.560, 0.815, 0.002, 4000.0, 10.0},
};

/* Each run's samples/s over its epochs, weighted by their seconds. */
static double weighted_sps(const epoch_metrics *m, int n) {
    double w = 0, s = 0;
    for (int e = 0; e < n; e++)
        w += m[e].sps * m[e].secs, s += m[e].secs;
    return w / s;
}

/* ---- reading the report ---- */

enum { MAX_TOK = 16 };
typedef char token[48];

/* The whitespace-separated tokens of the first line under `section` (a
 * line of its own, up to the next blank line) whose first token is
 * `first`; returns their count, 0 if there is no such line. */
static int row_tokens(const char *out, const char *section, const char *first, token *tok) {
    const char *p = strstr(out, section);
    if (p == NULL) return 0;
    p = strchr(p, '\n');
    while (p != NULL && p[1] != '\0' && p[1] != '\n') {
        const char *line = p + 1, *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        int n = 0;
        for (char *t = strtok(buf, " "); t != NULL && n < MAX_TOK; t = strtok(NULL, " "))
            snprintf(tok[n++], sizeof tok[0], "%s", t);
        if (n > 0 && strcmp(tok[0], first) == 0) return n;
        p = end;
    }
    return 0;
}

static const char *f4(double v, token buf) {
    snprintf(buf, sizeof(token), "%.4f", v);
    return buf;
}

static const char *d4(double v, token buf) {
    snprintf(buf, sizeof(token), v == 0 ? "0" : "%+.4f", v);
    return buf;
}

/* Asserts the tokens of a row: its label, then A, B, B - A of each metric
 * pair (a[i], b[i]); then, if sps, A's and B's samples/s and B / A. */
static void check_row(const char *out, const char *section, const char *first, const double *a,
                      const double *b, int n, const double *sps_a, const double *sps_b) {
    token tok[MAX_TOK], want;
    int got = row_tokens(out, section, first, tok);
    ck_assert_msg(got == 1 + 3 * n + (sps_a ? 3 : 0), "%s row %s: %d tokens in\n%s", section, first,
                  got, out);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(strcmp(tok[1 + 3 * i], f4(a[i], want)) == 0, "%s row %s: A %s, want %s\n%s",
                      section, first, tok[1 + 3 * i], want, out);
        ck_assert_msg(strcmp(tok[2 + 3 * i], f4(b[i], want)) == 0, "%s row %s: B %s, want %s\n%s",
                      section, first, tok[2 + 3 * i], want, out);
        ck_assert_msg(strcmp(tok[3 + 3 * i], d4(b[i] - a[i], want)) == 0,
                      "%s row %s: B - A %s, want %s\n%s", section, first, tok[3 + 3 * i], want,
                      out);
    }
    if (sps_a) {
        char s[48];
        snprintf(s, sizeof s, "%.0f", *sps_a);
        ck_assert_msg(strcmp(tok[1 + 3 * n], s) == 0, "%s: A samples/s %s, want %s", first,
                      tok[1 + 3 * n], s);
        snprintf(s, sizeof s, "%.0f", *sps_b);
        ck_assert_msg(strcmp(tok[2 + 3 * n], s) == 0, "%s: B samples/s %s, want %s", first,
                      tok[2 + 3 * n], s);
        snprintf(s, sizeof s, "%.2fx", *sps_b / *sps_a);
        ck_assert_msg(strcmp(tok[3 + 3 * n], s) == 0, "%s: B / A %s, want %s", first,
                      tok[3 + 3 * n], s);
    }
}

/* The table rows of every epoch in common, the training table with samples/s if sps. */
static void check_tables(const char *out, const epoch_metrics *a, const epoch_metrics *b, int n,
                         int sps, int val) {
    for (int e = 0; e < n; e++) {
        char label[16];
        snprintf(label, sizeof label, "%d", e + 1); /* 1-based in the table */
        double ta[2] = {a[e].loss, a[e].acc}, tb[2] = {b[e].loss, b[e].acc};
        check_row(out, "\nTraining\n", label, ta, tb, 2, sps ? &a[e].sps : NULL,
                  sps ? &b[e].sps : NULL);
        if (!val) continue;
        double va[2] = {a[e].val_loss, a[e].val_acc}, vb[2] = {b[e].val_loss, b[e].val_acc};
        check_row(out, "\nValidation\n", label, va, vb, 2, NULL, NULL);
    }
}

/* ---- tests ---- */

START_TEST(help_and_version) {
    char *out;
    ck_assert_int_eq(run("--help", &out), 0);
    ck_assert_msg(strstr(out, "Usage:") && strstr(out, "--plot") && strstr(out, "--labels") &&
                      strstr(out, "Exit status"),
                  "%s", out);
    free(out);
    ck_assert_int_eq(run("--version", &out), 0);
    ck_assert_msg(strncmp(out, "mirrored ", 9) == 0 && one_line(out), "%s", out);
    free(out);
}
END_TEST

/* mirrored_train's current columns on both sides: every difference, the
 * samples/s ratio per epoch and overall. */
START_TEST(table_new_format) {
    write_new("a.csv", run_a, 3, 1);
    write_new("b.csv", run_b, 3, 1);
    char *out;
    int rc = run("a.csv b.csv", &out);
    ck_assert_msg(rc == 0, "rc %d\n%s", rc, out);
    ck_assert_msg(strncmp(out, "A: a.csv (3 epochs)   B: b.csv (3 epochs)\n", 42) == 0, "%s", out);
    ck_assert_msg(strstr(out, "3 epochs in common") && !strstr(out, "only in"), "%s", out);
    check_tables(out, run_a, run_b, 3, 1, 1);
    /* the summary: differences at the last epoch, the weighted throughput */
    const epoch_metrics *la = &run_a[2], *lb = &run_b[2];
    double sa[4] = {la->loss, la->acc, la->val_loss, la->val_acc};
    double sb[4] = {lb->loss, lb->acc, lb->val_loss, lb->val_acc};
    const char *names[4] = {"loss", "accuracy", "val_loss", "val_accuracy"};
    ck_assert_msg(strstr(out, "Summary at epoch 3 (the last in common)"), "%s", out);
    for (int i = 0; i < 4; i++)
        check_row(out, "Summary at epoch", names[i], &sa[i], &sb[i], 1, NULL, NULL);
    token tok[MAX_TOK];
    ck_assert_int_ge(row_tokens(out, "Summary at epoch", "throughput", tok), 4);
    double wa = weighted_sps(run_a, 3), wb = weighted_sps(run_b, 3);
    char want[48];
    snprintf(want, sizeof want, "%.2fx", wb / wa);
    ck_assert_str_eq(want, "2.00x"); /* B is twice as fast */
    ck_assert_msg(strcmp(tok[3], want) == 0, "throughput %s, want %s\n%s", tok[3], want, out);
    snprintf(want, sizeof want, "%.0f", wa);
    ck_assert_str_eq(tok[1], want);
    ck_assert_msg(!strstr(out, "learning rates differ"), "%s", out);
    free(out);

    /* a run against itself: every difference exactly 0, throughput 1.00x */
    ck_assert_int_eq(run("a.csv a.csv", &out), 0);
    check_tables(out, run_a, run_a, 3, 1, 1);
    ck_assert_int_ge(row_tokens(out, "Summary at epoch", "throughput", tok), 4);
    ck_assert_str_eq(tok[3], "1.00x");
    ck_assert_int_eq(row_tokens(out, "\nTraining\n", "2", tok), 10);
    ck_assert_str_eq(tok[3], "0");
    free(out);
}
END_TEST

/* The overall ratio weights each epoch's samples/s by its seconds: here it
 * is not the ratio of the plain means. Labels name the runs; the epochs
 * only one run has are listed; different learning rates are noted. */
START_TEST(throughput_weighted_and_labels) {
    epoch_metrics b[4];
    memcpy(b, run_b, sizeof run_b);
    b[3] = (epoch_metrics){0.4, 0.87, 0.5, 0.83, 0.004, 4000, 1};
    for (int e = 0; e < 3; e++)
        b[e].sps = 4000, b[e].secs = 1 + e, b[e].lr = 0.004;
    write_new("a.csv", run_a, 3, 1);
    write_new("b.csv", b, 4, 0);
    char *out;
    int rc = run("a.csv b.csv --labels cpu,gpu", &out);
    ck_assert_msg(rc == 0, "rc %d\n%s", rc, out);
    ck_assert_msg(strncmp(out, "A: cpu (a.csv, 3 epochs)   B: gpu (b.csv, 4 epochs)\n", 51) == 0,
                  "%s", out);
    ck_assert_msg(strstr(out, "3 epochs in common; only in B: 4"), "%s", out);
    ck_assert_msg(strstr(out, "learning rates differ in 3 of 3 epochs"), "%s", out);
    check_tables(out, run_a, b, 3, 1, 0);
    /* B has no validation: its cells are "-" */
    token tok[MAX_TOK];
    ck_assert_int_eq(row_tokens(out, "\nValidation\n", "1", tok), 7);
    ck_assert_str_eq(tok[2], "-");
    ck_assert_str_eq(tok[3], "-");
    ck_assert_int_ge(row_tokens(out, "Summary at epoch", "throughput", tok), 4);
    char want[48];
    snprintf(want, sizeof want, "%.2fx", weighted_sps(b, 3) / weighted_sps(run_a, 3));
    ck_assert_str_eq(want, "1.71x"); /* the plain means would give 2.00x */
    ck_assert_msg(strcmp(tok[3], want) == 0, "throughput %s, want %s\n%s", tok[3], want, out);
    free(out);
}
END_TEST

/* An older five-column file against a Keras-ordered one, and one with the
 * columns shuffled, an unknown column, CRLF line ends and spaces. */
START_TEST(table_old_and_keras_order) {
    write_old("old.csv", run_a, 3);
    write_keras("keras.csv", run_b, 2);
    char *out;
    int rc = run("old.csv keras.csv", &out);
    ck_assert_msg(rc == 0, "rc %d\n%s", rc, out);
    ck_assert_msg(strstr(out, "2 epochs in common; only in A: 3"), "%s", out);
    check_tables(out, run_a, run_b, 2, 0, 1);
    ck_assert_msg(!strstr(out, "samples/s"), "no samples/s column in either:\n%s", out);
    ck_assert_msg(strstr(out, "throughput    n/a"), "%s", out);
    ck_assert_msg(strstr(out, "Summary at epoch 2"), "%s", out);
    free(out);

    free(tu_write_text(dir, "shuffled.csv",
                       "val_loss, seconds ,note,loss,epoch,accuracy,samples_per_sec\r\n"
                       "0.830000,5,\"a, b\",0.850000,0,0.710000,2000\r\n"
                       "0.640000,15,x,0.580000,1,0.810000,6000\r\n"
                       "\r\n"));
    write_new("a.csv", run_a, 3, 1);
    rc = run("a.csv shuffled.csv", &out);
    ck_assert_msg(rc == 0, "rc %d\n%s", rc, out);
    check_tables(out, run_a, run_b, 2, 1, 0);
    token tok[MAX_TOK];
    /* val_loss in both, val_accuracy only in A */
    double va = run_a[1].val_loss, vb = run_b[1].val_loss;
    ck_assert_int_eq(row_tokens(out, "\nValidation\n", "2", tok), 7);
    token want;
    ck_assert_str_eq(tok[3], d4(vb - va, want));
    ck_assert_str_eq(tok[4], f4(run_a[1].val_acc, want));
    ck_assert_str_eq(tok[5], "-");
    free(out);
}
END_TEST

/* Keras 3's CSVLogger of a run without validation writes NA in its val_ columns: absent, so
 * the runs are compared on what both have. */
START_TEST(keras_na_absent) {
    write_keras("b.csv", run_b, 3);
    free(tu_write_text(dir, "na.csv",
                       "accuracy,epoch,learning_rate,loss,val_accuracy,val_loss\n"
                       "0.7,0,0.002,0.9,NA,NA\n0.8,1,0.002,0.6,NA,NA\n"));
    char *out;
    int rc = run("na.csv b.csv", &out);
    ck_assert_msg(rc == 0, "rc %d\n%s", rc, out);
    ck_assert_msg(strstr(out, "2 epochs in common; only in B: 3"), "%s", out);
    ck_assert_msg(strstr(out, "Summary at epoch 2"), "%s", out);
    free(out);
    char path[8192];
    snprintf(path, sizeof path, "%s/na.csv", dir);
    mr_cmp_run r;
    mr_error err = {0};
    ck_assert_msg(mr_cmp_run_load(&r, path, &err) == MR_OK, "%s", err.msg);
    ck_assert(mr_cmp_run_has(&r, MR_CMP_LOSS));
    ck_assert(!mr_cmp_run_has(&r, MR_CMP_VAL_ACCURACY) && !mr_cmp_run_has(&r, MR_CMP_VAL_LOSS));
    mr_cmp_run_free(&r);
}
END_TEST

/* Reads "key": {"a": A, "b": B, "<diff>": D} after `from` in the JSON text. */
static int json_triple(const char *from, const char *key, double *a, double *b, double *d) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": {", key);
    const char *p = strstr(from, pat);
    if (p == NULL) return 0;
    char name[32];
    return sscanf(p + strlen(pat), "\"a\": %lf, \"b\": %lf, \"%31[a-z_]\": %lf", a, b, name, d) ==
           4;
}

START_TEST(json_output) {
    write_new("a.csv", run_a, 3, 1);
    write_new("b.csv", run_b, 3, 1);
    char *out;
    int rc = run("a.csv b.csv --json out.json --labels cpu,gpu", &out);
    ck_assert_msg(rc == 0, "rc %d\n%s", rc, out);
    free(out);
    char path[8192];
    snprintf(path, sizeof path, "%s/out.json", dir);
    char *json = tu_read_file(path, NULL);
    ck_assert_ptr_nonnull(json);
    ck_assert_int_eq(count_entries(dir), 3); /* a.csv, b.csv, out.json: no temporary left */
    /* valid JSON (meson needs python3, so it is there) */
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "python3 -m json.tool '%s' > /dev/null", path);
    ck_assert_msg(tu_run(cmd, &out) == 0, "%s\n%s", out, json);
    free(out);
    ck_assert_msg(strstr(json, "\"a\": {\"label\": \"cpu\", \"file\": \"a.csv\", \"epochs\": 3}"),
                  "%s", json);
    ck_assert_msg(strstr(json, "\"epochs_in_common\": 3"), "%s", json);
    ck_assert_msg(strstr(json, "\"only_in_a\": [],\n  \"only_in_b\": []"), "%s", json);
    /* every epoch as in the CSV (0-based), with differences and ratios */
    for (int e = 0; e < 3; e++) {
        char key[32];
        snprintf(key, sizeof key, "{\"epoch\": %d,", e);
        const char *p = strstr(json, key);
        ck_assert_msg(p != NULL, "%s: %s", key, json);
        double a, b, d;
        const struct {
            const char *key;
            double a, b;
            int ratio;
        } want[] = {
            {"loss", run_a[e].loss, run_b[e].loss, 0},
            {"accuracy", run_a[e].acc, run_b[e].acc, 0},
            {"val_loss", run_a[e].val_loss, run_b[e].val_loss, 0},
            {"val_accuracy", run_a[e].val_acc, run_b[e].val_acc, 0},
            {"samples_per_sec", run_a[e].sps, run_b[e].sps, 1},
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            ck_assert_msg(json_triple(p, want[i].key, &a, &b, &d), "%s %s", key, want[i].key);
            double dw = want[i].ratio ? want[i].b / want[i].a : want[i].b - want[i].a;
            ck_assert_msg(fabs(a - want[i].a) < 1e-9 && fabs(b - want[i].b) < 1e-9 &&
                              fabs(d - dw) < 1e-9,
                          "epoch %d %s: %g %g %g, want %g %g %g", e, want[i].key, a, b, d,
                          want[i].a, want[i].b, dw);
        }
    }
    const char *s = strstr(json, "\"summary\": {\"epoch\": 2,");
    ck_assert_msg(s != NULL, "%s", json);
    double a, b, r;
    ck_assert(json_triple(s, "loss", &a, &b, &r));
    ck_assert(fabs(r - (run_b[2].loss - run_a[2].loss)) < 1e-9);
    ck_assert(json_triple(s, "throughput", &a, &b, &r));
    ck_assert_msg(fabs(a - weighted_sps(run_a, 3)) < 1e-6 &&
                      fabs(b - weighted_sps(run_b, 3)) < 1e-6 && fabs(r - 2.0) < 1e-9,
                  "throughput %g %g %g", a, b, r);
    ck_assert_msg(strstr(s, "\"throughput_epochs\": 3"), "%s", json);
    free(json);

    /* absent values are null: the old format has no samples/s */
    write_old("old.csv", run_a, 2);
    rc = run("old.csv b.csv --json out.json", &out);
    ck_assert_msg(rc == 0, "rc %d\n%s", rc, out);
    free(out);
    json = tu_read_file(path, NULL);
    ck_assert_msg(
        strstr(json, "\"samples_per_sec\": {\"a\": null, \"b\": 2000, \"b_over_a\": null}"), "%s",
        json);
    ck_assert_msg(strstr(json, "\"throughput\": {\"a\": null, \"b\": null, \"b_over_a\": null}"),
                  "%s", json);
    ck_assert_msg(strstr(json, "\"only_in_b\": [2]"), "%s", json);
    free(json);
}
END_TEST

/* Every bad input: exit 2, one line naming the file (and line), nothing written. */
START_TEST(bad_input) {
    static const struct {
        const char *text; /* contents of bad.csv; NULL: no such file */
        const char *want; /* in the message */
    } cases[] = {
        {NULL, "bad.csv: cannot open: No such file or directory"},
        {"", "bad.csv: empty file"},
        {"\n\n", "bad.csv: empty file"},
        {"accuracy,loss\n0.5,0.4\n", "bad.csv:1: no 'epoch' column in the header"},
        {"epoch,loss\n0,0.5\n1,abc\n", "bad.csv:3: 'abc' is not a number in column loss"},
        {"epoch,accuracy\n0,0.5x\n", "bad.csv:2: '0.5x' is not a number in column accuracy"},
        {"epoch,loss\n0,0.5\nx,0.4\n", "bad.csv:3: 'x' is not an epoch number"},
        {"epoch,loss\n-1,0.5\n", "bad.csv:2: '-1' is not an epoch number"},
        {"epoch,loss\n0,0.5,7\n", "bad.csv:2: 3 fields, but the header has 2 columns"},
        {"epoch,loss\n0\n", "bad.csv:2: 1 field, but the header has 2 columns"},
        {"epoch,loss\n", "bad.csv: no epochs (only the header line)"},
        {"epoch,loss\n0,0.5\n0,0.4\n", "bad.csv:3: epoch 0 appears twice (also line 2)"},
        {"epoch,loss,loss\n0,0.5,0.5\n", "bad.csv:1: column loss appears twice"},
        {"epoch,loss\n7,0.5\n8,0.4\n",
         "good.csv and bad.csv have no epoch in common (good.csv has epochs 1-2, bad.csv has 8-9; "
         "counted from 1)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int bad_first = 0; bad_first < 2; bad_first++) {
            snprintf(dir, sizeof dir, "%s", tu_tmpdir());
            write_new("good.csv", run_a, 2, 1);
            if (cases[i].text) free(tu_write_text(dir, "bad.csv", cases[i].text));
            int files = count_entries(dir);
            char args[256], *out;
            snprintf(args, sizeof args, "%s --json out.json --plot out.png",
                     bad_first ? "bad.csv good.csv" : "good.csv bad.csv");
            int rc = run(args, &out);
            if (strstr(cases[i].want, "no epoch in common") && bad_first) {
                /* the same failure, named from the other side */
                ck_assert_msg(rc == 2 && strstr(out, "bad.csv and good.csv have no epoch"), "%s",
                              out);
            } else {
                ck_assert_msg(rc == 2, "case %zu (%s): rc %d\n%s", i, args, rc, out);
                ck_assert_msg(strncmp(out, "mirrored_compare: ", 18) == 0 &&
                                  strstr(out, cases[i].want) && one_line(out),
                              "case %zu: want '%s', got:\n%s", i, cases[i].want, out);
            }
            ck_assert_msg(count_entries(dir) == files, "case %zu left files behind", i);
            free(out);
        }
    }
    /* a directory where a file should be */
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    write_new("good.csv", run_a, 2, 1);
    char *out;
    char sub[8192];
    snprintf(sub, sizeof sub, "%s/sub.csv", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_int_eq(run("good.csv sub.csv --json out.json", &out), 2);
    ck_assert_msg(strstr(out, "sub.csv: cannot read: Is a directory") && one_line(out), "%s", out);
    ck_assert(!exists_in_dir("out.json"));
    free(out);
}
END_TEST

START_TEST(bad_options) {
    write_new("a.csv", run_a, 2, 1);
    write_new("b.csv", run_b, 2, 1);
    const char *cases[] = {"",
                           "a.csv",
                           "a.csv b.csv a.csv",
                           "--bogus a.csv b.csv",
                           "-x a.csv b.csv",
                           "a.csv b.csv --labels cpu",
                           "a.csv b.csv --labels ,gpu",
                           "a.csv b.csv --labels cpu,",
                           "a.csv b.csv --labels a,b,c",
                           "a.csv b.csv --json",
                           "a.csv b.csv --json no/such/dir/out.json --plot out.png"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out;
        int rc = run(cases[i], &out);
        ck_assert_msg(rc == 2 && one_line(out) && strncmp(out, "mirrored_compare: ", 18) == 0,
                      "'%s': rc %d\n%s", cases[i], rc, out);
        free(out);
        ck_assert_msg(count_entries(dir) == 2, "'%s' left files behind", cases[i]);
    }
}
END_TEST

/* Without gnuplot on PATH: one line saying how to get it, exit 2, no output. */
START_TEST(plot_without_gnuplot) {
    write_new("a.csv", run_a, 3, 1);
    write_new("b.csv", run_b, 3, 1);
    char *out;
    int rc = run_env("PATH=/nonexistent", "a.csv b.csv --json out.json --plot out.png", &out);
    ck_assert_msg(rc == 2, "rc %d\n%s", rc, out);
    ck_assert_str_eq(out, "mirrored_compare: --plot needs gnuplot (Debian: apt-get install "
                          "gnuplot-nox)\n");
    ck_assert_int_eq(count_entries(dir), 2);
    free(out);
}
END_TEST

/* A gnuplot that fails, or writes no image: exit 1, its message, no outputs
 * and no temporary files (script, data) left. */
START_TEST(plot_gnuplot_fails) {
    write_new("a.csv", run_a, 3, 1);
    write_new("b.csv", run_b, 3, 1);
    char bin[4096], tmp[4096];
    snprintf(bin, sizeof bin, "%s", tu_tmpdir());
    snprintf(tmp, sizeof tmp, "%s", tu_tmpdir());
    const char *fakes[][2] = {
        {"#!/bin/sh\necho 'line 3: fake failure' >&2\nexit 1\n",
         "gnuplot failed (exit 1): line 3: fake failure"},
        {"#!/bin/sh\nexit 0\n", "gnuplot wrote no PNG image"},
    };
    for (int i = 0; i < 2; i++) {
        char *path = tu_write_text(bin, "gnuplot", fakes[i][0]);
        ck_assert_int_eq(chmod(path, 0755), 0);
        free(path);
        char env[8300], *out;
        snprintf(env, sizeof env, "PATH='%s' TMPDIR='%s'", bin, tmp);
        int rc = run_env(env, "a.csv b.csv --json out.json --plot out.png", &out);
        ck_assert_msg(rc == 1, "rc %d\n%s", rc, out);
        ck_assert_msg(strstr(out, fakes[i][1]), "%s", out);
        ck_assert_int_eq(count_entries(dir), 2);
        ck_assert_int_eq(count_entries(tmp), 0);
        free(out);
    }
}
END_TEST

static int find_gnuplot(void) {
    return tu_run("command -v gnuplot > /dev/null", NULL) == 0;
}

static unsigned be32(const unsigned char *p) {
    return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3];
}

/* A real PNG of the curves: signature, IHDR size 1000 x 450, no temporary
 * files left; names with spaces and quotes reach gnuplot intact. */
START_TEST(plot_png) {
    if (!find_gnuplot()) {
        fprintf(stderr, "test_compare: plot_png SKIPPED: gnuplot is not installed (Debian: "
                        "apt-get install gnuplot-nox; scripts/deps.sh installs it)\n");
        return;
    }
    write_new("a.csv", run_a, 3, 1);
    write_new("b.csv", run_b, 3, 0);
    write_old("one.csv", run_a, 1);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", tu_tmpdir());
    const char *args[] = {
        "a.csv b.csv --plot out.png --labels \"cpu run,gpu's run\"",
        "one.csv b.csv --plot out.png", /* one epoch, no samples/s */
    };
    for (int i = 0; i < 2; i++) {
        char env[4200], *out;
        snprintf(env, sizeof env, "TMPDIR='%s'", tmp);
        int rc = run_env(env, args[i], &out);
        ck_assert_msg(rc == 0, "%s: rc %d\n%s", args[i], rc, out);
        free(out);
        char path[8192];
        snprintf(path, sizeof path, "%s/out.png", dir);
        size_t len;
        unsigned char *png = (unsigned char *)tu_read_file(path, &len);
        ck_assert_msg(png != NULL && len > 1000, "%s: no PNG", args[i]);
        ck_assert(memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0);
        ck_assert(memcmp(png + 12, "IHDR", 4) == 0);
        ck_assert_int_eq(be32(png + 16), 1000);
        ck_assert_int_eq(be32(png + 20), 450);
        free(png);
        ck_assert_int_eq(count_entries(tmp), 0);
        ck_assert_int_eq(count_entries(dir), 4); /* a.csv b.csv one.csv out.png */
        unlink(path);
    }
}
END_TEST

/* The files mirrored_train --metrics writes compare cleanly. */
START_TEST(from_mirrored_train) {
    tu_write_image_data(dir, "x.npy", "y.npy", 200, 4);
    free(tu_write_text(dir, "m.cfg",
                       "[net]\nbatch=8\nepochs=2\nvalidation_split=0.2\nseed=3\n"
                       "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=1/255\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
                       "[dense]\nunits=4\nactivation=softmax\n"));
    char cmd[16384], *out;
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s' m.cfg --quiet --devices cpu:%d --metrics %s.csv",
                 dir, train_exe, i + 1, i ? "b" : "a");
        int rc = tu_run(cmd, &out);
        ck_assert_msg(rc == 0, "%s: rc %d\n%s", cmd, rc, out);
        free(out);
    }
    int rc = run("a.csv b.csv --json out.json", &out);
    ck_assert_msg(rc == 0, "rc %d\n%s", rc, out);
    token tok[MAX_TOK];
    ck_assert_msg(row_tokens(out, "\nTraining\n", "2", tok) >= 7, "%s", out);
    ck_assert_msg(row_tokens(out, "\nValidation\n", "2", tok) == 7, "%s", out);
    ck_assert_msg(strstr(out, "2 epochs in common (epochs"), "%s", out);
    free(out);
}
END_TEST

/* ---- the CSV reader and the comparison, called directly ---- */

static void path_in_dir(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", dir, name);
}

/* Columns by name in any order, quoted fields, a BOM, CRLF, blank lines,
 * an empty cell (absent), epochs out of order (sorted). */
START_TEST(csv_reader_api) {
    free(tu_write_text(dir, "r.csv",
                       "\xEF\xBB\xBF"
                       "note, loss ,epoch,samples_per_sec,val_accuracy\r\n"
                       "\"x, \"\"y\"\"\",0.5,2,100,\r\n"
                       "\r\n"
                       "z,0.75,0,200,0.25\r\n"
                       " ,1e-1, 1 ,,0.5\r\n"));
    char path[8192];
    path_in_dir("r.csv", path, sizeof path);
    mr_cmp_run r;
    mr_error err = {0};
    ck_assert_int_eq(mr_cmp_run_load(&r, path, &err), MR_OK);
    ck_assert_ptr_eq(r.path, path);
    ck_assert_ptr_eq(r.label, path);
    ck_assert_int_eq(r.n, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(r.rows[i].epoch, i);
    ck_assert_int_eq(r.rows[0].line, 4);
    ck_assert_int_eq(r.rows[2].line, 2);
    ck_assert(r.rows[0].v[MR_CMP_LOSS] == 0.75 && r.rows[1].v[MR_CMP_LOSS] == 0.1);
    ck_assert(r.rows[2].v[MR_CMP_SAMPLES_PER_SEC] == 100);
    ck_assert(mr_cmp_row_has(&r.rows[0], MR_CMP_VAL_ACCURACY));
    ck_assert(!mr_cmp_row_has(&r.rows[2], MR_CMP_VAL_ACCURACY)); /* empty cell */
    ck_assert(!mr_cmp_row_has(&r.rows[1], MR_CMP_SAMPLES_PER_SEC));
    ck_assert(!mr_cmp_row_has(&r.rows[0], MR_CMP_ACCURACY)); /* no such column */
    ck_assert(!mr_cmp_row_has(NULL, MR_CMP_LOSS));
    ck_assert(mr_cmp_run_has(&r, MR_CMP_VAL_ACCURACY));
    ck_assert(!mr_cmp_run_has(&r, MR_CMP_SECONDS));
    ck_assert_str_eq(mr_cmp_metric_names[MR_CMP_SAMPLES_PER_SEC], "samples_per_sec");
    mr_cmp_run_free(&r);
    ck_assert_ptr_null(r.rows);
    ck_assert_int_eq(r.n, 0);
    mr_cmp_run_free(&r); /* twice: nothing to free */

    /* failures: the status and one line naming the file and line; nothing to free */
    free(tu_write_text(dir, "bad.csv", "epoch,loss\n1,0.5\n1,0.4\n"));
    path_in_dir("bad.csv", path, sizeof path);
    ck_assert_int_eq(mr_cmp_run_load(&r, path, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "bad.csv:3: epoch 1 appears twice (also line 2)"), "%s", err.msg);
    ck_assert_ptr_null(r.rows);
    mr_error_clear(&err);
    path_in_dir("missing.csv", path, sizeof path);
    ck_assert_int_eq(mr_cmp_run_load(&r, path, &err), MR_ERR_IO);
    ck_assert_msg(strstr(err.msg, "missing.csv: cannot open: No such file or directory"), "%s",
                  err.msg);
}
END_TEST

/* Epochs matched by number, the ones only one run has, the weighted
 * throughput over the epochs where both have samples/s and seconds. */
START_TEST(comparison_api) {
    free(tu_write_text(dir, "a.csv",
                       "epoch,loss,samples_per_sec,seconds\n"
                       "0,0.9,100,1\n1,0.8,300,3\n2,0.7,,\n5,0.6,100,1\n"));
    free(tu_write_text(dir, "b.csv",
                       "epoch,loss,accuracy,samples_per_sec,seconds\n"
                       "1,0.7,0.5,600,1\n2,0.6,0.6,100,1\n3,0.5,,100,1\n4,0.4,,100,1\n"
                       "6,0.3,,100,1\n"));
    char pa[8192], pb[8192];
    path_in_dir("a.csv", pa, sizeof pa);
    path_in_dir("b.csv", pb, sizeof pb);
    mr_cmp_run a, b;
    mr_cmp_result c;
    mr_error err = {0};
    ck_assert_int_eq(mr_cmp_run_load(&a, pa, &err), MR_OK);
    ck_assert_int_eq(mr_cmp_run_load(&b, pb, &err), MR_OK);
    ck_assert_int_eq(mr_cmp_compare(&a, &b, &c, &err), MR_OK);
    ck_assert_int_eq(c.n_all, 7); /* epochs 0-6 */
    ck_assert_int_eq(c.n_common, 2);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(c.all[i].epoch, i);
    ck_assert(mr_cmp_only_in(&c.all[0], 1) && !mr_cmp_only_in(&c.all[0], 0));
    ck_assert(!mr_cmp_only_in(&c.all[1], 1) && !mr_cmp_only_in(&c.all[1], 0));
    ck_assert(mr_cmp_only_in(&c.all[3], 0));
    ck_assert_ptr_eq(c.all[1].a, &a.rows[1]);
    ck_assert_ptr_eq(c.all[1].b, &b.rows[0]);
    char buf[64];
    mr_cmp_format_only(&c, 1, buf, sizeof buf);
    ck_assert_str_eq(buf, "1, 6"); /* 1-based */
    mr_cmp_format_only(&c, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "4-5, 7");
    ck_assert(mr_cmp_metric_shown(&c, MR_CMP_LOSS));
    ck_assert(mr_cmp_metric_shown(&c, MR_CMP_ACCURACY)); /* in B only, at a common epoch */
    ck_assert(!mr_cmp_metric_shown(&c, MR_CMP_VAL_LOSS));
    ck_assert_int_eq(mr_cmp_last_common(&c)->epoch, 2);
    /* only epoch 1 has samples/s and seconds in both */
    ck_assert_int_eq(c.tp_epochs, 1);
    ck_assert(c.tp_a == 300 && c.tp_b == 600);
    mr_cmp_result_free(&c);
    ck_assert_ptr_null(c.all);

    /* no epoch in common */
    free(tu_write_text(dir, "far.csv", "epoch,loss\n10,0.5\n11,0.4\n"));
    path_in_dir("far.csv", pb, sizeof pb);
    mr_cmp_run_free(&b);
    ck_assert_int_eq(mr_cmp_run_load(&b, pb, &err), MR_OK);
    ck_assert_int_eq(mr_cmp_compare(&a, &b, &c, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "have no epoch in common") &&
                      strstr(err.msg, "a.csv has epochs 1-3, 6") && strstr(err.msg, "has 11-12"),
                  "%s", err.msg);
    mr_cmp_result_free(&c);
    mr_cmp_run_free(&a);
    mr_cmp_run_free(&b);
}
END_TEST

static Suite *compare_suite(void) {
    Suite *s = suite_create("compare");
    TCase *tc = tcase_create("compare");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, table_new_format);
    tcase_add_test(tc, throughput_weighted_and_labels);
    tcase_add_test(tc, table_old_and_keras_order);
    tcase_add_test(tc, keras_na_absent);
    tcase_add_test(tc, json_output);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, bad_options);
    tcase_add_test(tc, plot_without_gnuplot);
    tcase_add_test(tc, plot_gnuplot_fails);
    tcase_add_test(tc, plot_png);
    tcase_add_test(tc, from_mirrored_train);
    tcase_add_test(tc, csv_reader_api);
    tcase_add_test(tc, comparison_api);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tu_run_suite(compare_suite());
}
