/* test_keras_golden.c: our executables against what Keras 3 computed, with
 * no TensorFlow: the golden files of the bench/keras_*.py checks.
 *
 * Each check's --record mode (bench/keras_golden.py records them all) ran
 * Keras and wrote tests/golden/keras/<check>/: the inputs our side needs
 * (.cfg files, .npy data, the .h5 files Keras saved), expected.h5 (Keras's
 * arrays: weights after training, predictions, decoded images) and
 * golden.json: per case, the commands of our side ("runs": argv lists,
 * argv[0] a program of build/launch, {golden} the check's folder, {out} a
 * scratch folder) and the comparisons ("compare"), each an object with a
 * "name" and one of these keys:
 *   weights   our .h5 (Keras's legacy layout): every weight against
 *             expected.h5's "keras" group (datasets 0, 1, ... in layer
 *             order) or "ours_ref" (another of our files), as
 *             max |ours - ref| / max |ref - init| <= "tol" ("init": the
 *             .h5 Keras saved before training);
 *   csv       a --metrics CSV: column "column" at the epochs "rows" (all:
 *             as many as "keras" holds) against the numbers "keras" or
 *             the same column of "ours_ref", within "rel" or "abs";
 *   array     an array our side wrote (.npy, file.h5:/dataset) against
 *             expected.h5's dataset "keras", within "abs", over the rows
 *             "rows" (all when absent);
 *   json      a --json file's value at the JSON pointer "pointer" against
 *             "keras", within "abs" or "rel";
 *   archive   a .keras archive's config.json at "pointer": what Keras read
 *             from our export when it was recorded ("keras": a string,
 *             number or bool; numbers within "rel");
 *   h5_attr   a string-list attribute "attr" of "object" in our .h5 (with
 *             "replace": [from, to] applied) against the list "keras";
 *   callbacks the epoch figures of a --metrics CSV replayed through our
 *             early stopping and ReduceLROnPlateau (strategies/early_stop.h,
 *             reduce_lr.h) with the [net] of "cfg": the epochs run and the
 *             rate of every epoch against Keras's callbacks on the same
 *             figures ("epochs", "rates"), or, with "self", against the
 *             CSV's own rows (the run applied its own decisions).
 * A failure names the check, the case, the comparison, the weight or
 * element and the difference; every comparison's figure is printed. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "models/config.h"
#include "runtime/array.h"
#include "runtime/h5file.h"
#include "runtime/strbuf.h"
#include "strategies/early_stop.h"
#include "strategies/reduce_lr.h"
#include "tests/testutil.h"

static const char *const default_checks[] = {"optimizers",  "losses",    "callbacks",    "metrics",
                                             "activations", "layernorm", "image_folder", "interop",
                                             "depthwise",   "random"};
enum { N_DEFAULT = sizeof default_checks / sizeof default_checks[0], MAX_CHECKS = 32 };
/* The checks run: the default ones, or MIRRORED_KERAS_GOLDEN's (names separated by spaces or
 * commas; the fuzz phase runs "random_all", 200 random models, this way). */
static const char *checks[MAX_CHECKS];
static int n_checks;

/* One check's state while its cases run. */
typedef struct golden {
    const char *check;
    const char *case_name;
    char *dir;      /* tests/golden/keras/<check> */
    char *out;      /* the scratch folder our side writes into */
    char *expected; /* dir/expected.h5 */
    mr_sb fails;    /* one line per failed comparison */
    int n_fail;
} golden;

static void mismatch(golden *g, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void mismatch(golden *g, const char *what, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mr_sb_printf(&g->fails, "%s/%s: %s: %s\n", g->check, g->case_name, what, msg);
    printf("%s/%s: %s: FAIL %s\n", g->check, g->case_name, what, msg);
    g->n_fail++;
}

/* The figure of a comparison that passed, for the log. */
static void agree(golden *g, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void agree(golden *g, const char *what, const char *fmt, ...) {
    va_list ap;
    printf("%s/%s: %s: ", g->check, g->case_name, what);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

/* s with {golden} and {out} replaced (malloc'd). */
static char *expand(const golden *g, const char *s) {
    mr_sb b;
    mr_sb_init(&b);
    while (*s) {
        if (strncmp(s, "{golden}", 8) == 0)
            mr_sb_printf(&b, "%s", g->dir), s += 8;
        else if (strncmp(s, "{out}", 5) == 0)
            mr_sb_printf(&b, "%s", g->out), s += 5;
        else
            mr_sb_printf(&b, "%c", *s++);
    }
    return mr_sb_take(&b);
}

/* A string member of a comparison, expanded (malloc'd); NULL if absent. */
static char *path_of(const golden *g, json_t *c, const char *key) {
    const char *s = json_string_value(json_object_get(c, key));
    return s ? expand(g, s) : NULL;
}

/* Appends s single-quoted for the shell. */
static void sb_quoted(mr_sb *b, const char *s) {
    mr_sb_printf(b, "'");
    for (; *s; s++)
        mr_sb_printf(b, *s == '\'' ? "'\\''" : "%c", *s);
    mr_sb_printf(b, "'");
}

/* Runs one argv of "runs" in the scratch folder; 0 if it exited 0. */
static int run_ours(golden *g, json_t *argv) {
    mr_sb b;
    mr_sb_init(&b);
    mr_sb_printf(&b, "cd ");
    sb_quoted(&b, g->out);
    mr_sb_printf(&b, " && ");
    const char *prog = json_string_value(json_array_get(argv, 0));
    char rel[256];
    snprintf(rel, sizeof rel, "launch/%s", prog);
    char *exe = tu_build_path(rel);
    sb_quoted(&b, exe);
    free(exe);
    for (size_t i = 1; i < json_array_size(argv); i++) {
        char *arg = expand(g, json_string_value(json_array_get(argv, i)));
        mr_sb_printf(&b, " ");
        sb_quoted(&b, arg);
        free(arg);
    }
    char *cmd = mr_sb_take(&b), *output = NULL;
    int rc = tu_run(cmd, &output);
    if (rc != 0) mismatch(g, prog, "exited %d: %s\n%s", rc, cmd, output);
    free(cmd);
    free(output);
    return rc;
}

/* ---- weights ---- */

/* An .h5's weights in Keras's legacy layout, in layer order. */
typedef struct weights {
    int n;
    char **names; /* "layer/weight" */
    mr_array *w;  /* float32 */
} weights;

static void weights_free(weights *w) {
    for (int i = 0; i < w->n; i++)
        free(w->names[i]), mr_array_free(&w->w[i]);
    free(w->names), free(w->w);
    memset(w, 0, sizeof *w);
}

static void weights_add(weights *w, const char *name, mr_array a) {
    w->names = realloc(w->names, sizeof(char *) * (size_t)(w->n + 1));
    w->w = realloc(w->w, sizeof(mr_array) * (size_t)(w->n + 1));
    w->names[w->n] = strdup(name);
    w->w[w->n++] = a;
}

/* Appends the weights of one layer group of /model_weights. */
static mr_status read_layer(const char *path, mr_h5 *h, hid_t mw, const char *layer, weights *out,
                            mr_error *err) {
    hid_t g;
    MR_CHECK(mr_h5_open_group(h, mw, layer, &g, err));
    char **names = NULL;
    int n = 0;
    mr_status st = mr_h5_read_attr_strs(h, g, "weight_names", &names, &n, err);
    for (int i = 0; st == MR_OK && i < n; i++) {
        char spec[2048];
        snprintf(spec, sizeof spec, "/model_weights/%s/%s", layer, names[i]);
        mr_array a = {0};
        st = mr_array_read_h5(path, spec, &a, err);
        if (st == MR_OK) weights_add(out, spec + strlen("/model_weights/"), a);
    }
    mr_h5_free_strs(names, n);
    H5Gclose(g);
    return st;
}

static mr_status read_weights(const char *path, weights *out, mr_error *err) {
    mr_h5 h;
    MR_CHECK(mr_h5_open(&h, path, err));
    hid_t mw = -1;
    char **layers = NULL;
    int n = 0;
    mr_status st = mr_h5_open_group(&h, h.file, "model_weights", &mw, err);
    if (st == MR_OK) st = mr_h5_read_attr_strs(&h, mw, "layer_names", &layers, &n, err);
    for (int i = 0; st == MR_OK && i < n; i++)
        st = read_layer(path, &h, mw, layers[i], out, err);
    mr_h5_free_strs(layers, n);
    if (mw >= 0) H5Gclose(mw);
    mr_h5_close(&h);
    return st;
}

/* expected.h5's group/0, group/1, ... as weights named like `like`'s. */
static mr_status read_expected_weights(const golden *g, const char *group, const weights *like,
                                       weights *out, mr_error *err) {
    for (int i = 0; i < like->n; i++) {
        char spec[1024];
        snprintf(spec, sizeof spec, "/%s/%d", group, i);
        mr_array a = {0};
        MR_CHECK(mr_array_read_h5(g->expected, spec, &a, err));
        weights_add(out, like->names[i], a);
    }
    return MR_OK;
}

/* 1 if the difference d is worse than the worst so far (a NaN is the worst). */
static int worse(double d, double worst) {
    return !isnan(worst) && (isnan(d) || d > worst);
}

static double max_abs_diff(const mr_array *a, const mr_array *b) {
    const float *x = a->data, *y = b->data;
    double m = 0;
    for (int64_t i = 0; i < mr_array_count(a); i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (worse(d, m)) m = d;
    }
    return m;
}

/* 0 if the three lists hold the same shapes, else says which differs. */
static int same_shapes(golden *g, const char *what, const weights *o, const weights *r,
                       const weights *i0) {
    if (o->n != r->n || o->n != i0->n) {
        mismatch(g, what, "%d weights in ours, %d in the reference, %d in the initial weights",
                 o->n, r->n, i0->n);
        return 0;
    }
    for (int i = 0; i < o->n; i++)
        if (mr_array_count(&o->w[i]) != mr_array_count(&r->w[i]) ||
            mr_array_count(&o->w[i]) != mr_array_count(&i0->w[i])) {
            mismatch(g, what, "%s: %lld values in ours, %lld in the reference", o->names[i],
                     (long long)mr_array_count(&o->w[i]), (long long)mr_array_count(&r->w[i]));
            return 0;
        }
    return 1;
}

/* max |ours - ref| / max |ref - init| over all weights, the worst named;
 * rn names the reference ("Keras"). */
static void judge_weights(golden *g, const char *what, const weights *o, const weights *r,
                          const weights *i0, double tol, const char *rn) {
    double moved = 0, worst = 0;
    int at = 0;
    for (int i = 0; i < o->n; i++) {
        moved = fmax(moved, max_abs_diff(&r->w[i], &i0->w[i]));
        double d = max_abs_diff(&o->w[i], &r->w[i]);
        if (worse(d, worst)) worst = d, at = i;
    }
    double rel = worst / fmax(moved, 1e-30);
    if (!(rel <= tol) || moved == 0)
        mismatch(g, what, "%s: max |ours - %s| %.3g / max |%s - init| %.3g = %.3g > %.0e",
                 o->names[at], rn, worst, rn, moved, rel, tol);
    else
        agree(g, what, "max |ours - %s| / max |%s - init| %.2e (worst: %s; tolerance %.0e)", rn, rn,
              rel, o->names[at], tol);
}

static void compare_weights(golden *g, const char *what, json_t *c) {
    weights o = {0}, r = {0}, i0 = {0};
    mr_error err = {0};
    char *ours = path_of(g, c, "weights"), *ref = path_of(g, c, "ours_ref");
    char *init = path_of(g, c, "init");
    const char *keras = json_string_value(json_object_get(c, "keras"));
    mr_status st = read_weights(ours, &o, &err);
    if (st == MR_OK) st = read_weights(init, &i0, &err);
    if (st == MR_OK)
        st = ref ? read_weights(ref, &r, &err) : read_expected_weights(g, keras, &o, &r, &err);
    if (st != MR_OK)
        mismatch(g, what, "%s", err.msg);
    else if (same_shapes(g, what, &o, &r, &i0))
        judge_weights(g, what, &o, &r, &i0, json_number_value(json_object_get(c, "tol")),
                      ref ? "ours_ref" : "Keras");
    weights_free(&o), weights_free(&r), weights_free(&i0);
    free(ours), free(ref), free(init);
}

/* ---- numbers within a tolerance ---- */

typedef struct tolerance {
    double rel, abs; /* one of them > 0 */
} tolerance;

static tolerance tolerance_of(json_t *c) {
    tolerance t = {json_number_value(json_object_get(c, "rel")),
                   json_number_value(json_object_get(c, "abs"))};
    return t;
}

/* The difference as the tolerance measures it. */
static double off_by(tolerance t, double ours, double ref) {
    return t.rel > 0 ? fabs(ours - ref) / fmax(fabs(ref), 1e-12) : fabs(ours - ref);
}

static int within(tolerance t, double ours, double ref) {
    return off_by(t, ours, ref) <= (t.rel > 0 ? t.rel : t.abs);
}

static const char *tol_kind(tolerance t) {
    return t.rel > 0 ? "relative" : "absolute";
}

/* ---- csv ---- */

/* A --metrics CSV: the header's columns and the rows' numbers. */
typedef struct csv {
    int cols, rows;
    char **head;
    double *v; /* (rows, cols) */
} csv;

static void csv_free(csv *t) {
    for (int i = 0; i < t->cols; i++)
        free(t->head[i]);
    free(t->head), free(t->v);
    memset(t, 0, sizeof *t);
}

static int csv_read(const char *path, csv *t) {
    memset(t, 0, sizeof *t);
    char *text = tu_read_file(path, NULL);
    if (text == NULL) return 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *s2 = NULL;
        int col = 0;
        if (t->head == NULL) {
            for (char *f = strtok_r(line, ",", &s2); f; f = strtok_r(NULL, ",", &s2)) {
                t->head = realloc(t->head, sizeof(char *) * (size_t)(t->cols + 1));
                t->head[t->cols++] = strdup(f);
            }
            continue;
        }
        t->v = realloc(t->v, sizeof(double) * (size_t)((t->rows + 1) * t->cols));
        for (char *f = strtok_r(line, ",", &s2); f && col < t->cols; f = strtok_r(NULL, ",", &s2))
            t->v[t->rows * t->cols + col++] = strtod(f, NULL);
        for (; col < t->cols; col++)
            t->v[t->rows * t->cols + col] = NAN;
        t->rows++;
    }
    free(text);
    return t->head != NULL;
}

static int csv_col(const csv *t, const char *name) {
    for (int i = 0; i < t->cols; i++)
        if (strcmp(t->head[i], name) == 0) return i;
    return -1;
}

/* The reference of row r: "keras"[k] or ours_ref's row. */
static double csv_ref(json_t *keras, const csv *ref, int col, int k, int r) {
    return ref ? ref->v[r * ref->cols + col] : json_number_value(json_array_get(keras, (size_t)k));
}

static void judge_csv(golden *g, const char *what, json_t *c, const csv *o, const csv *ref) {
    const char *column = json_string_value(json_object_get(c, "column"));
    json_t *keras = json_object_get(c, "keras"), *rows = json_object_get(c, "rows");
    int col = csv_col(o, column), rcol = ref ? csv_col(ref, column) : col;
    int n = rows ? (int)json_array_size(rows) : ref ? ref->rows : (int)json_array_size(keras);
    tolerance t = tolerance_of(c);
    if (col < 0 || rcol < 0) return mismatch(g, what, "no column %s", column);
    double worst = -1;
    int at = 0;
    for (int k = 0; k < n; k++) {
        int r = rows ? (int)json_integer_value(json_array_get(rows, (size_t)k)) : k;
        if (r >= o->rows || (ref && r >= ref->rows))
            return mismatch(g, what, "%s: epoch %d missing (ours: %d epochs)", column, r + 1,
                            o->rows);
        double d = off_by(t, o->v[r * o->cols + col], csv_ref(keras, ref, rcol, k, r));
        if (worse(d, worst)) worst = d, at = k;
    }
    int r = rows ? (int)json_integer_value(json_array_get(rows, (size_t)at)) : at;
    double ours = o->v[r * o->cols + col], want = csv_ref(keras, ref, rcol, at, r);
    if (!within(t, ours, want))
        mismatch(g, what, "%s, epoch %d: ours %.6g, %s %.6g: %s difference %.3g > %.0e", column,
                 r + 1, ours, ref ? "ours_ref" : "Keras", want, tol_kind(t), worst,
                 t.rel > 0 ? t.rel : t.abs);
    else
        agree(g, what, "%s: largest %s difference %.2e (epoch %d)", column, tol_kind(t), worst,
              r + 1);
}

static void compare_csv(golden *g, const char *what, json_t *c) {
    char *ours = path_of(g, c, "csv"), *ref_path = path_of(g, c, "ours_ref");
    csv o, ref;
    if (!csv_read(ours, &o))
        mismatch(g, what, "cannot read %s", ours);
    else if (ref_path && !csv_read(ref_path, &ref))
        mismatch(g, what, "cannot read %s", ref_path);
    else
        judge_csv(g, what, c, &o, ref_path ? &ref : NULL);
    csv_free(&o);
    if (ref_path) csv_free(&ref);
    free(ours), free(ref_path);
}

/* ---- arrays ---- */

static double element(const mr_array *a, int64_t i) {
    switch (a->dtype) {
    case MR_DTYPE_U8:
        return ((const uint8_t *)a->data)[i];
    case MR_DTYPE_I32:
        return ((const int32_t *)a->data)[i];
    case MR_DTYPE_I64:
        return (double)((const int64_t *)a->data)[i];
    case MR_DTYPE_F32:
        return ((const float *)a->data)[i];
    }
    return NAN;
}

/* 1 if row r is compared ("rows" absent: all). */
static int row_wanted(json_t *rows, int64_t r) {
    if (rows == NULL) return 1;
    for (size_t k = 0; k < json_array_size(rows); k++)
        if (json_integer_value(json_array_get(rows, k)) == r) return 1;
    return 0;
}

static void judge_arrays(golden *g, const char *what, json_t *c, const mr_array *o,
                         const mr_array *k) {
    if (mr_array_count(o) != mr_array_count(k) || o->dims[0] != k->dims[0])
        return mismatch(g, what, "%lld rows of %lld values in ours, %lld of %lld in Keras's",
                        (long long)o->dims[0], (long long)mr_array_row_size(o),
                        (long long)k->dims[0], (long long)mr_array_row_size(k));
    json_t *rows = json_object_get(c, "rows");
    double tol = json_number_value(json_object_get(c, "abs"));
    double rel = json_number_value(json_object_get(c, "rel")), worst = 0, excess = 0;
    int64_t row = mr_array_row_size(o), at = 0, n = 0;
    for (int64_t i = 0; i < mr_array_count(o); i++) {
        if (!row_wanted(rows, i / row)) continue;
        /* "rel" (0 when absent): numpy's allclose, |ours - Keras| <= abs + rel |Keras| */
        double d = fabs(element(o, i) - element(k, i)), e = d - rel * fabs(element(k, i));
        n++;
        if (worse(d, worst)) worst = d;
        if (n == 1 || worse(e, excess)) excess = e, at = i;
    }
    char bound[64];
    if (rel > 0)
        snprintf(bound, sizeof bound, "%.0e + %.0e |Keras|", tol, rel);
    else
        snprintf(bound, sizeof bound, "%.0e", tol);
    if (!(excess <= tol))
        mismatch(g, what, "row %lld, value %lld: ours %.7g, Keras %.7g: difference %.3g > %s",
                 (long long)(at / row), (long long)(at % row), element(o, at), element(k, at),
                 fabs(element(o, at) - element(k, at)), bound);
    else
        agree(g, what, "max |ours - Keras| %.2e over %lld values (tolerance %s)", worst,
              (long long)n, bound);
}

static void compare_array(golden *g, const char *what, json_t *c) {
    char *ours = path_of(g, c, "array");
    char spec[1024];
    snprintf(spec, sizeof spec, "/%s", json_string_value(json_object_get(c, "keras")));
    mr_array o = {0}, k = {0};
    mr_error err = {0};
    if (mr_array_read(ours, &o, &err) != MR_OK || mr_array_read_h5(g->expected, spec, &k, &err))
        mismatch(g, what, "%s", err.msg);
    else
        judge_arrays(g, what, c, &o, &k);
    mr_array_free(&o), mr_array_free(&k);
    free(ours);
}

/* ---- JSON values: --json files and the archive's config.json ---- */

/* The value at a JSON pointer ("/a/0/b"); NULL if there is none. */
static json_t *pointer_get(json_t *doc, const char *pointer) {
    char *p = strdup(pointer), *save = NULL;
    for (char *part = strtok_r(p, "/", &save); part && doc; part = strtok_r(NULL, "/", &save))
        doc = json_is_array(doc) ? json_array_get(doc, strtoul(part, NULL, 10))
                                 : json_object_get(doc, part);
    free(p);
    return doc;
}

/* Compares the value at "pointer" of doc with "keras" (from `source`). */
static void judge_value(golden *g, const char *what, json_t *c, json_t *doc, const char *source) {
    const char *pointer = json_string_value(json_object_get(c, "pointer"));
    json_t *got = pointer_get(doc, pointer), *want = json_object_get(c, "keras");
    if (got == NULL) return mismatch(g, what, "%s has nothing at %s", source, pointer);
    if (json_is_number(want)) {
        tolerance t = tolerance_of(c);
        double o = json_number_value(got), k = json_number_value(want);
        if (!json_is_number(got) || !within(t, o, k))
            return mismatch(g, what, "%s %s: ours %.7g, Keras %.7g: %s difference %.3g > %.0e",
                            source, pointer, o, k, tol_kind(t), off_by(t, o, k),
                            t.rel > 0 ? t.rel : t.abs);
        return agree(g, what, "%.7g, Keras %.7g", o, k);
    }
    char *a = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
    char *b = json_dumps(want, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!json_equal(got, want))
        mismatch(g, what, "%s %s: ours %s, Keras read %s", source, pointer, a, b);
    else
        agree(g, what, "%s", a);
    free(a), free(b);
}

static void compare_json(golden *g, const char *what, json_t *c) {
    char *path = path_of(g, c, "json");
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    if (doc == NULL)
        mismatch(g, what, "%s: %s", path, jerr.text);
    else
        judge_value(g, what, c, doc, "--json");
    json_decref(doc);
    free(path);
}

/* config.json of a .keras archive (parsed); NULL with why. */
static json_t *archive_config(const char *path, char *why, size_t n) {
    int zerr = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &zerr);
    zip_stat_t st;
    if (z == NULL || zip_stat(z, "config.json", 0, &st) != 0) {
        snprintf(why, n, "%s: no archive with a config.json", path);
        if (z) zip_discard(z);
        return NULL;
    }
    char *text = calloc(1, st.size + 1);
    zip_file_t *f = zip_fopen(z, "config.json", 0);
    zip_int64_t got = f ? zip_fread(f, text, st.size) : -1;
    if (f) zip_fclose(f);
    zip_discard(z);
    json_error_t jerr;
    json_t *doc = got == (zip_int64_t)st.size ? json_loads(text, 0, &jerr) : NULL;
    if (doc == NULL) snprintf(why, n, "%s: config.json unreadable", path);
    free(text);
    return doc;
}

static void compare_archive(golden *g, const char *what, json_t *c) {
    char *path = path_of(g, c, "archive"), why[1200];
    json_t *doc = archive_config(path, why, sizeof why);
    if (doc == NULL)
        mismatch(g, what, "%s", why);
    else
        judge_value(g, what, c, doc, "config.json");
    json_decref(doc);
    free(path);
}

/* ---- h5_attr ---- */

/* s with every `from` replaced by `to` (malloc'd). */
static char *replace_all(const char *s, const char *from, const char *to) {
    mr_sb b;
    mr_sb_init(&b);
    size_t n = from ? strlen(from) : 0;
    while (*s) {
        if (n > 0 && strncmp(s, from, n) == 0)
            mr_sb_printf(&b, "%s", to), s += n;
        else
            mr_sb_printf(&b, "%c", *s++);
    }
    return mr_sb_take(&b);
}

static void judge_names(golden *g, const char *what, json_t *c, char **names, int n) {
    json_t *want = json_object_get(c, "keras"), *rep = json_object_get(c, "replace");
    const char *from = json_string_value(json_array_get(rep, 0));
    const char *to = json_string_value(json_array_get(rep, 1));
    if ((size_t)n != json_array_size(want))
        return mismatch(g, what, "%d names in ours, Keras has %zu", n, json_array_size(want));
    for (int i = 0; i < n; i++) {
        char *name = replace_all(names[i], from, to ? to : "");
        const char *k = json_string_value(json_array_get(want, (size_t)i));
        int same = strcmp(name, k) == 0;
        if (!same)
            mismatch(g, what, "name %d: ours %s (as Keras's: %s), Keras %s", i, names[i], name, k);
        free(name);
        if (!same) return;
    }
    agree(g, what, "the same %d names", n);
}

static void compare_h5_attr(golden *g, const char *what, json_t *c) {
    char *path = path_of(g, c, "h5_attr");
    const char *object = json_string_value(json_object_get(c, "object"));
    const char *attr = json_string_value(json_object_get(c, "attr"));
    mr_h5 h;
    mr_error err = {0};
    hid_t grp = -1;
    char **names = NULL;
    int n = 0;
    mr_status st = mr_h5_open(&h, path, &err);
    if (st == MR_OK) {
        st = mr_h5_open_group(&h, h.file, object, &grp, &err);
        if (st == MR_OK) st = mr_h5_read_attr_strs(&h, grp, attr, &names, &n, &err);
        if (grp >= 0) H5Gclose(grp);
        mr_h5_close(&h);
    }
    if (st != MR_OK)
        mismatch(g, what, "%s", err.msg);
    else
        judge_names(g, what, c, names, n);
    mr_h5_free_strs(names, n);
    free(path);
}

/* ---- callbacks ---- */

/* Replays the figures of t through early stopping and ReduceLROnPlateau as
 * [net] says; returns the epochs run, rates[e] the rate of epoch e. */
static int replay(const mr_net_cfg *net, const csv *t, double *rates) {
    mr_early_stop es;
    mr_reduce_lr rl;
    mr_early_stop_init(&es, net);
    mr_reduce_lr_init(&rl, net, net->learning_rate);
    int cl = csv_col(t, "loss"), ca = csv_col(t, "accuracy");
    int cvl = csv_col(t, "val_loss"), cva = csv_col(t, "val_accuracy");
    for (int e = 0; e < t->rows; e++) {
        const double *row = t->v + e * t->cols;
        mr_epoch_logs logs = {
            .epoch = e, .loss = row[cl], .accuracy = row[ca], .has_val = cvl >= 0};
        if (cvl >= 0) logs.val_loss = row[cvl], logs.val_accuracy = row[cva];
        rates[e] = rl.lr;
        int stop = mr_early_stop_epoch(&es, &logs) == MR_EARLY_STOP_STOP;
        mr_reduce_lr_epoch(&rl, &logs);
        if (stop) return e + 1;
    }
    return t->rows;
}

/* The expected decisions: Keras's ("epochs", "rates") or the CSV's own. */
static int decisions(json_t *c, const csv *t, double *want) {
    if (json_is_true(json_object_get(c, "self"))) {
        int col = csv_col(t, "learning_rate");
        for (int e = 0; e < t->rows; e++)
            want[e] = t->v[e * t->cols + col];
        return t->rows;
    }
    json_t *rates = json_object_get(c, "rates");
    for (size_t e = 0; e < json_array_size(rates) && e < (size_t)t->rows; e++)
        want[e] = json_number_value(json_array_get(rates, e));
    return (int)json_integer_value(json_object_get(c, "epochs"));
}

static void judge_callbacks(golden *g, const char *what, json_t *c, const mr_net_cfg *net,
                            const csv *t) {
    double *ours = calloc((size_t)t->rows + 1, sizeof(double));
    double *want = calloc((size_t)t->rows + 1, sizeof(double));
    int ran = replay(net, t, ours), want_ran = decisions(c, t, want), bad = -1;
    const char *who = json_is_true(json_object_get(c, "self")) ? "the run" : "Keras";
    for (int e = 0; e < ran && e < want_ran && bad < 0; e++)
        /* the CSV's learning_rate has 6 significant digits */
        if (!(fabs(ours[e] - want[e]) <= 1e-5 * fmax(want[e], 1e-12) + 1e-9)) bad = e;
    if (ran != want_ran)
        mismatch(g, what, "ours stop after %d epochs, %s after %d", ran, who, want_ran);
    else if (bad >= 0)
        mismatch(g, what, "epoch %d's learning rate: ours %.6g, %s %.6g", bad + 1, ours[bad], who,
                 want[bad]);
    else
        agree(g, what, "the same %d epochs and rates (last %.6g)", ran, ours[ran - 1]);
    free(ours), free(want);
}

static void compare_callbacks(golden *g, const char *what, json_t *c) {
    char *figures = path_of(g, c, "callbacks"), *cfg_path = path_of(g, c, "cfg");
    mr_config cfg;
    mr_error err = {0};
    csv t;
    if (mr_config_load(cfg_path, &cfg, &err) != MR_OK) {
        mismatch(g, what, "%s", err.msg);
    } else {
        if (!csv_read(figures, &t) || t.rows == 0)
            mismatch(g, what, "cannot read %s", figures);
        else
            judge_callbacks(g, what, c, &cfg.net, &t);
        csv_free(&t);
        mr_config_free(&cfg);
    }
    free(figures), free(cfg_path);
}

/* ---- the cases ---- */

static void compare(golden *g, json_t *c) {
    static const struct {
        const char *key;
        void (*fn)(golden *, const char *, json_t *);
    } kinds[] = {{"weights", compare_weights},    {"csv", compare_csv},
                 {"array", compare_array},        {"json", compare_json},
                 {"archive", compare_archive},    {"h5_attr", compare_h5_attr},
                 {"callbacks", compare_callbacks}};
    const char *what = json_string_value(json_object_get(c, "name"));
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (json_object_get(c, kinds[i].key)) return kinds[i].fn(g, what, c);
    mismatch(g, what ? what : "?", "no comparison this test knows");
}

static void run_case(golden *g, json_t *kase) {
    g->case_name = json_string_value(json_object_get(kase, "name"));
    json_t *runs = json_object_get(kase, "runs"), *cmp = json_object_get(kase, "compare");
    for (size_t i = 0; i < json_array_size(runs); i++)
        if (run_ours(g, json_array_get(runs, i)) != 0) return; /* its outputs are missing */
    for (size_t i = 0; i < json_array_size(cmp); i++)
        compare(g, json_array_get(cmp, i));
}

START_TEST(check) {
    golden g = {.check = checks[_i]};
    char rel[256];
    snprintf(rel, sizeof rel, "tests/golden/keras/%s", g.check);
    g.dir = tu_source_path(rel);
    g.out = strdup(tu_tmpdir());
    size_t n = strlen(g.dir) + 16;
    g.expected = malloc(n);
    snprintf(g.expected, n, "%s/expected.h5", g.dir);
    mr_sb_init(&g.fails);
    char json_path[4096];
    snprintf(json_path, sizeof json_path, "%s/golden.json", g.dir);
    json_error_t jerr;
    json_t *doc = json_load_file(json_path, 0, &jerr);
    ck_assert_msg(doc != NULL, "%s: %s (line %d)", json_path, jerr.text, jerr.line);
    printf("%s: recorded with Keras %s\n", g.check,
           json_string_value(json_object_get(doc, "keras")));
    json_t *cases = json_object_get(doc, "cases");
    for (size_t i = 0; i < json_array_size(cases); i++)
        run_case(&g, json_array_get(cases, i));
    char *fails = mr_sb_take(&g.fails);
    ck_assert_msg(g.n_fail == 0, "%d comparison(s) with Keras failed (our outputs: %s):\n%s",
                  g.n_fail, g.out, fails);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g.out);
    tu_run(cmd, NULL);
    free(fails), json_decref(doc);
    free(g.dir), free(g.out), free(g.expected);
}
END_TEST

/* One test case per check (CK_RUN_CASE=losses runs one; MIRRORED_KERAS_GOLDEN=random_all runs
 * that folder's). */
static void choose_checks(void) {
    static char names[1024];
    const char *env = getenv("MIRRORED_KERAS_GOLDEN");
    if (env == NULL || *env == '\0') {
        for (n_checks = 0; n_checks < N_DEFAULT; n_checks++)
            checks[n_checks] = default_checks[n_checks];
        return;
    }
    snprintf(names, sizeof names, "%s", env);
    char *save = NULL;
    for (char *t = strtok_r(names, " ,", &save); t && n_checks < MAX_CHECKS;
         t = strtok_r(NULL, " ,", &save))
        checks[n_checks++] = t;
}

int main(void) {
    choose_checks();
    Suite *s = suite_create("keras_golden");
    for (int i = 0; i < n_checks; i++) {
        TCase *tc = tcase_create(checks[i]);
        tcase_add_loop_test(tc, check, i, i + 1);
        suite_add_tcase(s, tc);
    }
    return tu_run_suite(s);
}
