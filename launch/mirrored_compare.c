/* mirrored_compare: compare two training runs from their per-epoch metrics
 * CSV files (mirrored_train --metrics, or Keras's CSVLogger).
 *
 *   mirrored_compare A.csv B.csv [--plot OUT.png] [--json OUT.json] [--labels A,B]
 *
 * Columns are found by the header's names, in any order: epoch (required,
 * 0-based), loss, accuracy, val_loss, val_accuracy, learning_rate,
 * samples_per_sec, seconds; other columns are ignored, and a column that is
 * missing, or empty on a line, is absent there. Prints a table of the
 * epochs both files have (A, B, B - A; samples/s B / A), then the
 * differences at the last of them and the overall throughput ratio.
 *
 * The plot is drawn by gnuplot (pngcairo), run with posix_spawn on a script
 * and data in a temporary directory. Output files are written next to their
 * destination and renamed into place at the end, so a failure leaves none.
 * Errors: one line "mirrored_compare: message" and an exit code (usage()). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/error.h"
#include "launch/cli.h"

static const char *prog = "mirrored_compare";

extern char **environ;

static void usage(FILE *out) {
    fprintf(out,
            "Usage: %s A.csv B.csv [options]\n"
            "Compare two training runs from their per-epoch metrics CSV files\n"
            "(mirrored_train --metrics FILE, or Keras's CSVLogger).\n"
            "\n"
            "Prints, for every epoch both files have, loss, accuracy, val_loss and\n"
            "val_accuracy of A and B with B - A, and samples/s with B / A; then the\n"
            "differences at the last epoch in common and the overall throughput ratio\n"
            "(each run's samples/s weighted by the seconds of its epochs).\n"
            "Columns are found by the header's names, in any order: epoch (required),\n"
            "loss, accuracy, val_loss, val_accuracy, learning_rate, samples_per_sec,\n"
            "seconds; others are ignored, a missing or empty one is absent.\n"
            "Epochs are numbered from 1 in the table and the plot (as mirrored_train\n"
            "prints them), and as in the CSV files (from 0) in --json. B - A is 0 where\n"
            "the two values are equal as written; +0.0000 means a smaller difference.\n"
            "\n"
            "Options:\n"
            "  --labels A,B       names of the two runs (default: the file names)\n"
            "  --json FILE        write the same numbers as JSON\n"
            "  --plot FILE        draw the loss and accuracy curves of both runs as PNG\n"
            "                     (needs gnuplot; Debian: apt-get install gnuplot-nox)\n"
            "  --help             this text\n"
            "  --version          print the version\n"
            "\n"
            "Exit status: 0 success; 1 failure while running (an output file could not be\n"
            "written, gnuplot failed); 2 bad input (options, a missing or malformed CSV\n"
            "file, no epoch in common, --plot without gnuplot).\n",
            prog);
}

/* ---- reading a metrics CSV ------------------------------------------------ */

/* The columns read; the bit (1u << m) of a row's `has` says column m was given. */
typedef enum metric {
    METRIC_LOSS,
    METRIC_ACCURACY,
    METRIC_VAL_LOSS,
    METRIC_VAL_ACCURACY,
    METRIC_LEARNING_RATE,
    METRIC_SAMPLES_PER_SEC,
    METRIC_SECONDS,
    METRIC_COUNT
} metric;

static const char *const metric_names[METRIC_COUNT] = {
    "loss", "accuracy", "val_loss", "val_accuracy", "learning_rate", "samples_per_sec", "seconds",
};

typedef struct epoch_row {
    long epoch; /* as in the file: 0-based */
    int line;   /* line number in the file, for messages */
    unsigned has;
    double v[METRIC_COUNT];
} epoch_row;

typedef struct run {
    const char *path;
    const char *label; /* --labels, else the path */
    epoch_row *rows;   /* sorted by epoch */
    int n, cap;
} run;

static void run_free(run *r) {
    free(r->rows);
    r->rows = NULL;
    r->n = r->cap = 0;
}

static int row_has(const epoch_row *row, metric m) {
    return row != NULL && (row->has >> m & 1u);
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Splits a CSV line in place into at most `max` fields (the count may be
 * larger: the caller compares it with the header's). A field in double
 * quotes may hold commas, and "" stands for one quote. Fields are trimmed. */
static int split_fields(char *line, char **fields, int max) {
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        char *start = p, *end;
        if (*p == '"') {
            char *w = start;
            for (p++; *p != '\0'; p++) {
                if (*p == '"' && p[1] == '"')
                    *w++ = *p++;
                else if (*p == '"')
                    break;
                else
                    *w++ = *p;
            }
            end = w;
            if (*p == '"') p++;
            while (*p != ',' && *p != '\0')
                p++;
        } else {
            while (*p != ',' && *p != '\0')
                p++;
            end = p;
        }
        char sep = *p;
        *end = '\0';
        if (n < max) fields[n] = trim(start);
        n++;
        if (sep == '\0') return n;
        p++;
    }
}

/* A field as it may appear in a message: at most 40 characters. */
static const char *shown(const char *s, char *buf, size_t n) {
    snprintf(buf, n, "%.40s%s", s, strlen(s) > 40 ? "..." : "");
    return buf;
}

static int cmp_rows(const void *a, const void *b) {
    const epoch_row *x = a, *y = b;
    return (x->epoch > y->epoch) - (x->epoch < y->epoch);
}

/* Parses one data line (already split) into r's rows. col[i] is the metric
 * of field i, -1 for epoch, -2 for a column that is not read. */
static mr_status parse_row(run *r, char **fields, const int *col, int ncols, int line,
                           mr_error *err) {
    char buf[64];
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        epoch_row *rows = realloc(r->rows, sizeof *rows * (size_t)cap);
        if (rows == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
        r->rows = rows;
        r->cap = cap;
    }
    epoch_row *row = &r->rows[r->n];
    *row = (epoch_row){.epoch = -1, .line = line};
    for (int i = 0; i < ncols; i++) {
        const char *f = fields[i];
        if (col[i] == -2) continue;
        if (col[i] == -1) {
            char *end;
            errno = 0;
            long e = strtol(f, &end, 10);
            if (f[0] == '\0')
                return mr_error_set(err, MR_ERR_DATA,
                                    "%s:%d: no epoch number (column epoch is empty)", r->path,
                                    line);
            if (*end != '\0' || errno || e < 0 || e > 100000000)
                return mr_error_set(err, MR_ERR_DATA,
                                    "%s:%d: '%s' is not an epoch number (an integer >= 0) in "
                                    "column epoch",
                                    r->path, line, shown(f, buf, sizeof buf));
            row->epoch = e;
            continue;
        }
        if (f[0] == '\0') continue; /* empty: absent on this line */
        char *end;
        double v = strtod(f, &end);
        if (*end != '\0')
            return mr_error_set(err, MR_ERR_DATA, "%s:%d: '%s' is not a number in column %s",
                                r->path, line, shown(f, buf, sizeof buf), metric_names[col[i]]);
        row->v[col[i]] = v;
        row->has |= 1u << col[i];
    }
    r->n++;
    return MR_OK;
}

/* Reads the header line: which metric each column holds. */
static mr_status parse_header(const run *r, char **fields, int ncols, int *col, int line,
                              mr_error *err) {
    int epoch_col = -1;
    unsigned seen = 0;
    for (int i = 0; i < ncols; i++) {
        col[i] = -2;
        if (strcmp(fields[i], "epoch") == 0) {
            if (epoch_col >= 0)
                return mr_error_set(err, MR_ERR_DATA, "%s:%d: column epoch appears twice", r->path,
                                    line);
            epoch_col = i;
            col[i] = -1;
            continue;
        }
        for (int m = 0; m < METRIC_COUNT; m++) {
            if (strcmp(fields[i], metric_names[m]) != 0) continue;
            if (seen >> m & 1u)
                return mr_error_set(err, MR_ERR_DATA, "%s:%d: column %s appears twice", r->path,
                                    line, metric_names[m]);
            seen |= 1u << m;
            col[i] = m;
        }
    }
    if (epoch_col < 0)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s:%d: no 'epoch' column in the header (expected e.g. "
                            "epoch,accuracy,loss,val_accuracy,val_loss)",
                            r->path, line);
    return MR_OK;
}

/* Reads path into r: rows sorted by epoch, each epoch once. */
static mr_status run_load(run *r, const char *path, mr_error *err) {
    *r = (run){.path = path, .label = path};
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    mr_status st = MR_OK;
    char *line = NULL, **fields = NULL;
    size_t line_cap = 0;
    int *col = NULL, ncols = 0, fields_cap = 0, lineno = 0;
    while (st == MR_OK && getline(&line, &line_cap, f) >= 0) {
        lineno++;
        char *s = line;
        if (lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3; /* a UTF-8 BOM */
        s = trim(s);
        if (s[0] == '\0') continue; /* blank lines, e.g. at the end */
        int need = 1;
        for (const char *p = s; *p; p++)
            need += *p == ',';
        if (need > fields_cap) {
            char **nf = realloc(fields, sizeof *nf * (size_t)need);
            if (nf == NULL) {
                st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
                break;
            }
            fields = nf;
            fields_cap = need;
        }
        int n = split_fields(s, fields, fields_cap);
        if (col == NULL) {
            ncols = n;
            if ((col = malloc(sizeof *col * (size_t)n)) == NULL) {
                st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
                break;
            }
            st = parse_header(r, fields, ncols, col, lineno, err);
        } else if (n != ncols) {
            st = mr_error_set(err, MR_ERR_DATA, "%s:%d: %d field%s, but the header has %d columns",
                              path, lineno, n, n == 1 ? "" : "s", ncols);
        } else {
            st = parse_row(r, fields, col, ncols, lineno, err);
        }
    }
    if (st == MR_OK && ferror(f))
        st = mr_error_set(err, MR_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (st == MR_OK && col == NULL)
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s: empty file (expected a header line such as "
                          "epoch,accuracy,loss,val_accuracy,val_loss)",
                          path);
    if (st == MR_OK && r->n == 0)
        st = mr_error_set(err, MR_ERR_DATA, "%s: no epochs (only the header line)", path);
    if (st == MR_OK) {
        qsort(r->rows, (size_t)r->n, sizeof *r->rows, cmp_rows);
        for (int i = 1; i < r->n && st == MR_OK; i++) {
            const epoch_row *a = &r->rows[i - 1], *b = &r->rows[i];
            if (a->epoch == b->epoch) {
                int first = a->line < b->line ? a->line : b->line;
                st = mr_error_set(err, MR_ERR_DATA, "%s:%d: epoch %ld appears twice (also line %d)",
                                  path, a->line + b->line - first, a->epoch, first);
            }
        }
    }
    free(line);
    free(fields);
    free(col);
    fclose(f);
    if (st != MR_OK) run_free(r);
    return st;
}

/* ---- the comparison -------------------------------------------------------- */

/* One epoch of the table: the rows of A and B (either may be NULL while
 * listing the epochs that only one file has). */
typedef struct pair {
    long epoch;
    const epoch_row *a, *b;
} pair;

typedef struct comparison {
    const run *a, *b;
    pair *all; /* every epoch of either file, in order */
    int n_all, n_common;
    /* throughput over the epochs in common where both runs have
     * samples_per_sec and seconds: sum(samples_per_sec * seconds) / sum(seconds) */
    int tp_epochs;
    double tp_a, tp_b;
} comparison;

static void comparison_free(comparison *c) {
    free(c->all);
    c->all = NULL;
}

/* Whether only run A (which_a) or only run B has epoch p. */
static int only_in(const pair *p, int which_a) {
    return which_a ? p->a && !p->b : p->b && !p->a;
}

/* The epochs only run A (which_a) or only run B has, as 1-based ranges ("1-3, 5"). */
static void format_only(const comparison *c, int which_a, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->n_all; i++) {
        if (!only_in(&c->all[i], which_a)) continue;
        int j = i;
        while (j + 1 < c->n_all && c->all[j + 1].epoch == c->all[j].epoch + 1 &&
               only_in(&c->all[j + 1], which_a))
            j++;
        if (len < n) {
            if (j > i)
                len += (size_t)snprintf(buf + len, n - len, "%s%ld-%ld", len ? ", " : "",
                                        c->all[i].epoch + 1, c->all[j].epoch + 1);
            else
                len += (size_t)snprintf(buf + len, n - len, "%s%ld", len ? ", " : "",
                                        c->all[i].epoch + 1);
        }
        i = j;
    }
}

static mr_status compare_runs(const run *a, const run *b, comparison *c, mr_error *err) {
    *c = (comparison){.a = a, .b = b};
    c->all = malloc(sizeof *c->all * (size_t)(a->n + b->n));
    if (c->all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    int i = 0, j = 0;
    double wa = 0, wb = 0, secs_a = 0, secs_b = 0;
    const unsigned tp = 1u << METRIC_SAMPLES_PER_SEC | 1u << METRIC_SECONDS;
    while (i < a->n || j < b->n) {
        pair p = {0};
        if (j >= b->n || (i < a->n && a->rows[i].epoch < b->rows[j].epoch)) {
            p = (pair){a->rows[i].epoch, &a->rows[i], NULL};
            i++;
        } else if (i >= a->n || b->rows[j].epoch < a->rows[i].epoch) {
            p = (pair){b->rows[j].epoch, NULL, &b->rows[j]};
            j++;
        } else {
            p = (pair){a->rows[i].epoch, &a->rows[i], &b->rows[j]};
            i++, j++;
            c->n_common++;
            if ((p.a->has & tp) == tp && (p.b->has & tp) == tp) {
                const double *va = p.a->v, *vb = p.b->v;
                wa += va[METRIC_SAMPLES_PER_SEC] * va[METRIC_SECONDS];
                wb += vb[METRIC_SAMPLES_PER_SEC] * vb[METRIC_SECONDS];
                secs_a += va[METRIC_SECONDS];
                secs_b += vb[METRIC_SECONDS];
                c->tp_epochs++;
            }
        }
        c->all[c->n_all++] = p;
    }
    if (c->tp_epochs > 0 && secs_a > 0 && secs_b > 0) {
        c->tp_a = wa / secs_a;
        c->tp_b = wb / secs_b;
    } else {
        c->tp_epochs = 0;
    }
    if (c->n_common == 0) {
        char ea[128], eb[128];
        format_only(c, 1, ea, sizeof ea);
        format_only(c, 0, eb, sizeof eb);
        return mr_error_set(err, MR_ERR_DATA,
                            "%s and %s have no epoch in common (%s has epochs %s, %s has %s; "
                            "counted from 1)",
                            a->path, b->path, a->path, ea, b->path, eb);
    }
    return MR_OK;
}

/* Whether metric m appears in an epoch both files have, in either. */
static int metric_shown(const comparison *c, metric m) {
    for (int i = 0; i < c->n_all; i++)
        if (c->all[i].a && c->all[i].b && (row_has(c->all[i].a, m) || row_has(c->all[i].b, m)))
            return 1;
    return 0;
}

static const pair *last_common(const comparison *c) {
    for (int i = c->n_all - 1; i >= 0; i--)
        if (c->all[i].a && c->all[i].b) return &c->all[i];
    return NULL;
}

/* ---- the table ------------------------------------------------------------- */

/* Cell widths, with the space before each cell: values fit 7 characters,
 * differences 8 (a sign), so that the training table (epoch, loss,
 * accuracy, samples/s) fits 80 columns. */
enum { W_EPOCH = 5, W_VAL = 8, W_DIFF = 9, W_RATIO = 7 };

static const char *fmt_value(double v, int integer, char *buf, size_t n) {
    if (isnan(v))
        snprintf(buf, n, "nan");
    else if (isinf(v))
        snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else if (integer)
        snprintf(buf, n, "%.0f", v);
    else if (fabs(v) < 100)
        snprintf(buf, n, "%.4f", v);
    else
        snprintf(buf, n, "%.4g", v);
    return buf;
}

static const char *fmt_diff(double d, char *buf, size_t n) {
    if (!isfinite(d)) return fmt_value(d, 0, buf, n);
    if (d == 0) { /* equal as written, not just close */
        snprintf(buf, n, "0");
        return buf;
    }
    snprintf(buf, n, fabs(d) < 100 ? "%+.4f" : "%+.4g", d);
    return buf;
}

static const char *fmt_ratio(double r, char *buf, size_t n) {
    if (!isfinite(r)) return fmt_value(r, 0, buf, n);
    snprintf(buf, n, "%.2fx", r);
    return buf;
}

/* A column group of the table: a metric with A, B and B - A, or (ratio)
 * B / A. */
typedef struct group {
    metric m;
    const char *title;
    int ratio;
} group;

static int group_width(const group *g) {
    return 2 * W_VAL + (g->ratio ? W_RATIO : W_DIFF);
}

static void print_title(const char *title, int width) {
    int len = (int)strlen(title);
    int dashes = width - len - 3; /* a space before the group, one either side of the title */
    if (dashes < 2) {
        printf("%*s", width, title);
        return;
    }
    printf(" %.*s %s %.*s", dashes / 2, "----------------------------------------", title,
           dashes - dashes / 2, "----------------------------------------");
}

/* A right-aligned cell of width w, always after a space: a value too long
 * for its column shifts the row instead of running into its neighbour. */
static void print_cell(int w, const char *s) {
    printf(" %*s", w - 1, s);
}

/* Prints A, B and B - A (or B / A) of metric g->m for rows a and b ("-" where absent). */
static void print_cells(const group *g, const epoch_row *a, const epoch_row *b) {
    char ba[32], bb[32], bd[32];
    int integer = g->m == METRIC_SAMPLES_PER_SEC;
    int ha = row_has(a, g->m), hb = row_has(b, g->m);
    print_cell(W_VAL, ha ? fmt_value(a->v[g->m], integer, ba, sizeof ba) : "-");
    print_cell(W_VAL, hb ? fmt_value(b->v[g->m], integer, bb, sizeof bb) : "-");
    if (!ha || !hb)
        print_cell(g->ratio ? W_RATIO : W_DIFF, "-");
    else if (g->ratio)
        print_cell(W_RATIO,
                   a->v[g->m] > 0 ? fmt_ratio(b->v[g->m] / a->v[g->m], bd, sizeof bd) : "-");
    else
        print_cell(W_DIFF, fmt_diff(b->v[g->m] - a->v[g->m], bd, sizeof bd));
}

/* One table over the epochs in common: a row per epoch, the groups that
 * either run has. Prints nothing if neither has any. */
static void print_table(const comparison *c, const char *name, const group *groups, int n) {
    const group *shown_groups[8];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (metric_shown(c, groups[i].m)) shown_groups[k++] = &groups[i];
    if (k == 0) return;
    printf("\n%s\n%*s", name, W_EPOCH, "");
    for (int i = 0; i < k; i++)
        print_title(shown_groups[i]->title, group_width(shown_groups[i]));
    printf("\n%*s", W_EPOCH, "epoch");
    for (int i = 0; i < k; i++)
        printf("%*s%*s%*s", W_VAL, "A", W_VAL, "B", shown_groups[i]->ratio ? W_RATIO : W_DIFF,
               shown_groups[i]->ratio ? "B / A" : "B - A");
    printf("\n");
    for (int e = 0; e < c->n_all; e++) {
        const pair *p = &c->all[e];
        if (!p->a || !p->b) continue;
        printf("%*ld", W_EPOCH, p->epoch + 1);
        for (int i = 0; i < k; i++)
            print_cells(shown_groups[i], p->a, p->b);
        printf("\n");
    }
}

/* A note when the two runs trained with different learning rates (e.g. a
 * different replica count under linear scaling): often why the curves differ. */
static void print_lr_note(const comparison *c) {
    int differ = 0, both = 0;
    const pair *first = NULL;
    for (int i = 0; i < c->n_all; i++) {
        const pair *p = &c->all[i];
        if (!row_has(p->a, METRIC_LEARNING_RATE) || !row_has(p->b, METRIC_LEARNING_RATE)) continue;
        both++;
        double la = p->a->v[METRIC_LEARNING_RATE], lb = p->b->v[METRIC_LEARNING_RATE];
        if (fabs(la - lb) > 1e-6 * fmax(fabs(la), fabs(lb))) {
            differ++;
            if (first == NULL) first = p;
        }
    }
    if (differ)
        printf("\nNote: the learning rates differ in %d of %d epochs (epoch %ld: A %g, B %g)\n",
               differ, both, first->epoch + 1, first->a->v[METRIC_LEARNING_RATE],
               first->b->v[METRIC_LEARNING_RATE]);
}

static void print_report(const comparison *c) {
    const run *a = c->a, *b = c->b;
    if (a->label != a->path || b->label != b->path)
        printf("A: %s (%s, %d epochs)   B: %s (%s, %d epochs)\n", a->label, a->path, a->n, b->label,
               b->path, b->n);
    else
        printf("A: %s (%d epochs)   B: %s (%d epochs)\n", a->path, a->n, b->path, b->n);
    char only_a[256], only_b[256];
    format_only(c, 1, only_a, sizeof only_a);
    format_only(c, 0, only_b, sizeof only_b);
    printf("%d epoch%s in common", c->n_common, c->n_common == 1 ? "" : "s");
    if (only_a[0]) printf("; only in A: %s", only_a);
    if (only_b[0]) printf("; only in B: %s", only_b);
    printf(" (epochs counted from 1)\n");

    static const group train[] = {{METRIC_LOSS, "loss", 0},
                                  {METRIC_ACCURACY, "accuracy", 0},
                                  {METRIC_SAMPLES_PER_SEC, "samples/s", 1}};
    static const group val[] = {{METRIC_VAL_LOSS, "val_loss", 0},
                                {METRIC_VAL_ACCURACY, "val_accuracy", 0}};
    print_table(c, "Training", train, 3);
    print_table(c, "Validation", val, 2);
    if (!metric_shown(c, METRIC_VAL_LOSS) && !metric_shown(c, METRIC_VAL_ACCURACY))
        printf("\nValidation: neither run has val_loss or val_accuracy\n");

    const pair *last = last_common(c);
    printf("\nSummary at epoch %ld (the last in common)\n%-14s%*s%*s%*s\n", last->epoch + 1, "",
           W_VAL, "A", W_VAL, "B", W_DIFF, "B - A");
    static const metric final[] = {METRIC_LOSS, METRIC_ACCURACY, METRIC_VAL_LOSS,
                                   METRIC_VAL_ACCURACY};
    for (int i = 0; i < 4; i++) {
        if (!metric_shown(c, final[i])) continue;
        group g = {final[i], metric_names[final[i]], 0};
        printf("%-14s", metric_names[final[i]]);
        print_cells(&g, last->a, last->b);
        printf("\n");
    }
    char ba[32], bb[32], br[32];
    if (c->tp_epochs > 0) {
        printf("%-14s", "throughput");
        print_cell(W_VAL, fmt_value(c->tp_a, 1, ba, sizeof ba));
        print_cell(W_VAL, fmt_value(c->tp_b, 1, bb, sizeof bb));
        print_cell(W_DIFF, c->tp_a > 0 ? fmt_ratio(c->tp_b / c->tp_a, br, sizeof br) : "-");
        printf("  samples/s weighted by seconds");
        if (c->tp_epochs < c->n_common) printf(", %d of %d epochs", c->tp_epochs, c->n_common);
        printf("\n");
    } else
        printf("%-14sn/a (needs samples_per_sec and seconds in both files)\n", "throughput");
    print_lr_note(c);
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, int has, double v) {
    if (has && isfinite(v))
        fprintf(f, "%.10g", v);
    else
        fputs("null", f);
}

/* {"a": .., "b": .., "b_minus_a": ..} (or "b_over_a"), null where absent. */
static void json_metric(FILE *f, const char *key, int has_a, double a, int has_b, double b,
                        int ratio) {
    fprintf(f, "\"%s\": {\"a\": ", key);
    json_num(f, has_a, a);
    fputs(", \"b\": ", f);
    json_num(f, has_b, b);
    fprintf(f, ", \"%s\": ", ratio ? "b_over_a" : "b_minus_a");
    if (ratio)
        json_num(f, has_a && has_b && a > 0, b / a);
    else
        json_num(f, has_a && has_b, b - a);
    fputc('}', f);
}

static void json_row_metrics(FILE *f, const epoch_row *a, const epoch_row *b) {
    static const metric ms[] = {METRIC_LOSS, METRIC_ACCURACY, METRIC_VAL_LOSS, METRIC_VAL_ACCURACY,
                                METRIC_SAMPLES_PER_SEC};
    for (int i = 0; i < 5; i++) {
        metric m = ms[i];
        fputs(", ", f);
        json_metric(f, metric_names[m], row_has(a, m), a->v[m], row_has(b, m), b->v[m],
                    m == METRIC_SAMPLES_PER_SEC);
    }
}

static void json_run(FILE *f, const run *r) {
    fputs("{\"label\": ", f);
    json_str(f, r->label);
    fputs(", \"file\": ", f);
    json_str(f, r->path);
    fprintf(f, ", \"epochs\": %d}", r->n);
}

static void json_only(FILE *f, const comparison *c, int which_a) {
    fputc('[', f);
    int k = 0;
    for (int i = 0; i < c->n_all; i++) {
        if (only_in(&c->all[i], which_a)) fprintf(f, "%s%ld", k++ ? ", " : "", c->all[i].epoch);
    }
    fputc(']', f);
}

static mr_status write_json(FILE *f, const comparison *c, const char *path, mr_error *err) {
    fputs("{\n  \"a\": ", f);
    json_run(f, c->a);
    fputs(",\n  \"b\": ", f);
    json_run(f, c->b);
    fprintf(f, ",\n  \"epochs_in_common\": %d,\n  \"only_in_a\": ", c->n_common);
    json_only(f, c, 1);
    fputs(",\n  \"only_in_b\": ", f);
    json_only(f, c, 0);
    fputs(",\n  \"per_epoch\": [", f);
    int k = 0;
    for (int i = 0; i < c->n_all; i++) {
        const pair *p = &c->all[i];
        if (!p->a || !p->b) continue;
        fprintf(f, "%s\n    {\"epoch\": %ld", k++ ? "," : "", p->epoch);
        json_row_metrics(f, p->a, p->b);
        fputc('}', f);
    }
    const pair *last = last_common(c);
    fprintf(f, "\n  ],\n  \"summary\": {\"epoch\": %ld", last->epoch);
    json_row_metrics(f, last->a, last->b);
    fputs(",\n    ", f);
    int tp = c->tp_epochs > 0;
    json_metric(f, "throughput", tp, c->tp_a, tp, c->tp_b, 1);
    fprintf(f, ", \"throughput_epochs\": %d}\n}\n", c->tp_epochs);
    if (ferror(f)) return mr_error_set(err, MR_ERR_RUNTIME, "--json %s: cannot write", path);
    return MR_OK;
}

/* ---- the plot -------------------------------------------------------------- */

/* Finds an executable in $PATH; 1 and its path in buf if found. */
static int find_program(const char *name, char *buf, size_t n) {
    const char *path = getenv("PATH");
    if (path == NULL || path[0] == '\0') path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0)
            snprintf(buf, n, "./%s", name);
        else
            snprintf(buf, n, "%.*s/%s", (int)len, p, name);
        struct stat st;
        if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) return 1;
        if (end == NULL) return 0;
        p = end + 1;
    }
}

/* Writes s as a gnuplot single-quoted string ('' is a quote). */
static void gp_str(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

static int has_control_char(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20) return 1;
    return 0;
}

/* Whether run r has metric m on any epoch. */
static int run_has(const run *r, metric m) {
    for (int i = 0; i < r->n; i++)
        if (row_has(&r->rows[i], m)) return 1;
    return 0;
}

/* Data for gnuplot: epoch (1-based), loss, accuracy, val_loss, val_accuracy;
 * '?' where absent. */
static mr_status write_plot_data(const char *path, const run *r, mr_error *err) {
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot write %s: %s", path,
                            strerror(errno));
    static const metric cols[] = {METRIC_LOSS, METRIC_ACCURACY, METRIC_VAL_LOSS,
                                  METRIC_VAL_ACCURACY};
    for (int i = 0; i < r->n; i++) {
        const epoch_row *row = &r->rows[i];
        fprintf(f, "%ld", row->epoch + 1);
        for (int k = 0; k < 4; k++) {
            if (row_has(row, cols[k]) && isfinite(row->v[cols[k]]))
                fprintf(f, " %.10g", row->v[cols[k]]);
            else
                fputs(" ?", f);
        }
        fputc('\n', f);
    }
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad) return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot write %s", path);
    return MR_OK;
}

/* One panel: metric m (training, solid) and its validation metric (dashed)
 * of both runs; data column `col` of the data files (val: col + 2). */
static void gp_panel(FILE *f, const comparison *c, const char *data[2], metric m, metric val_m,
                     int col, const char *key_pos) {
    static const char *colors[2] = {"#1f77b4", "#d62728"};
    const run *runs[2] = {c->a, c->b};
    fprintf(f, "set title '%s'\nset ylabel '%s'\nset key %s\nplot ", metric_names[m],
            metric_names[m], key_pos);
    int k = 0;
    for (int r = 0; r < 2; r++) {
        for (int v = 0; v < 2; v++) {
            if (!run_has(runs[r], v ? val_m : m)) continue;
            fputs(k++ ? ", \\\n     " : "", f);
            gp_str(f, data[r]);
            fprintf(f, " using 1:%d with linespoints lw 2 pt 7 ps 0.7 dt %d lc rgb '%s' title ",
                    col + (v ? 2 : 0), v ? 2 : 1, colors[r]);
            char title[1200];
            snprintf(title, sizeof title, "%s %s", runs[r]->label, v ? "validation" : "training");
            gp_str(f, title);
        }
    }
    fputc('\n', f);
}

/* The plot's panels: loss and accuracy, each if either run has it. */
static int plot_panels(const comparison *c, int *loss, int *acc) {
    *loss = run_has(c->a, METRIC_LOSS) || run_has(c->b, METRIC_LOSS) ||
            run_has(c->a, METRIC_VAL_LOSS) || run_has(c->b, METRIC_VAL_LOSS);
    *acc = run_has(c->a, METRIC_ACCURACY) || run_has(c->b, METRIC_ACCURACY) ||
           run_has(c->a, METRIC_VAL_ACCURACY) || run_has(c->b, METRIC_VAL_ACCURACY);
    return *loss + *acc;
}

static mr_status write_plot_script(const char *path, const comparison *c, const char *data[2],
                                   const char *png, mr_error *err) {
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot write %s: %s", path,
                            strerror(errno));
    int loss, acc, panels = plot_panels(c, &loss, &acc);
    long lo = c->all[0].epoch + 1, hi = c->all[c->n_all - 1].epoch + 1;
    fputs("set terminal pngcairo size 1000,450 noenhanced font 'sans,10'\nset output ", f);
    gp_str(f, png);
    fputs("\nset datafile missing '?'\nset grid\nset xlabel 'epoch'\n", f);
    /* whole epochs on the axis, a margin so the end points are not cut,
     * and a visible range for a single epoch */
    double margin = lo == hi ? 0.5 : 0.03 * (double)(hi - lo);
    fprintf(f, "set xrange [%g:%g]\nset xtics %ld\nset format x '%%.0f'\n", (double)lo - margin,
            (double)hi + margin, hi - lo < 12 ? 1 : (hi - lo + 9) / 10);
    fputs("set offsets 0, 0, graph 0.05, graph 0.05\n", f);
    fprintf(f, "set multiplot layout 1,%d title ", panels);
    char title[2100];
    snprintf(title, sizeof title, "%s vs %s", c->a->label, c->b->label);
    gp_str(f, title);
    fputs(" font ',12'\n", f);
    if (loss) gp_panel(f, c, data, METRIC_LOSS, METRIC_VAL_LOSS, 2, "top right");
    if (acc) gp_panel(f, c, data, METRIC_ACCURACY, METRIC_VAL_ACCURACY, 3, "bottom right");
    fputs("unset multiplot\nset output\n", f);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad) return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot write %s", path);
    return MR_OK;
}

/* The last non-empty line of a file (gnuplot's error), or "" */
static void last_line(const char *path, char *buf, size_t n) {
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        char *s = trim(line);
        if (s[0] != '\0' && s[0] != '^') snprintf(buf, n, "%s", s);
    }
    fclose(f);
}

/* Runs `gnuplot script` with stdout discarded and stderr into errpath. */
static mr_status run_gnuplot(const char *gnuplot, const char *script, const char *errpath,
                             mr_error *err) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char *const argv[] = {(char *)"gnuplot", (char *)script, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, gnuplot, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot run %s: %s", gnuplot,
                            strerror(rc));
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return mr_error_set(err, MR_ERR_RUNTIME, "--plot: waiting for gnuplot: %s",
                                strerror(errno));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char why[512];
        last_line(errpath, why, sizeof why);
        if (WIFEXITED(status))
            return mr_error_set(err, MR_ERR_RUNTIME, "--plot: gnuplot failed (exit %d)%s%s",
                                WEXITSTATUS(status), why[0] ? ": " : "", why);
        return mr_error_set(err, MR_ERR_RUNTIME, "--plot: gnuplot was killed by signal %d",
                            WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    return MR_OK;
}

static int is_png(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char buf[8];
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    int ok = fread(buf, 1, 8, f) == 8 && memcmp(buf, sig, 8) == 0;
    fclose(f);
    return ok;
}

/* Draws the plot into png (a temporary name next to the destination):
 * script and data in a fresh temporary directory, removed afterwards. */
static mr_status make_plot(const comparison *c, const char *gnuplot, const char *png,
                           mr_error *err) {
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') base = "/tmp";
    char dir[4096], script[4200], data_a[4200], data_b[4200], errpath[4200];
    snprintf(dir, sizeof dir, "%s/mirrored_compare.XXXXXX", base);
    if (mkdtemp(dir) == NULL)
        return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot create a directory in %s: %s",
                            base, strerror(errno));
    snprintf(script, sizeof script, "%s/plot.gp", dir);
    snprintf(data_a, sizeof data_a, "%s/a.dat", dir);
    snprintf(data_b, sizeof data_b, "%s/b.dat", dir);
    snprintf(errpath, sizeof errpath, "%s/gnuplot.err", dir);
    const char *data[2] = {data_a, data_b};
    mr_status st = MR_OK;
    MR_CHECK_GOTO(write_plot_data(data_a, c->a, err), st, done);
    MR_CHECK_GOTO(write_plot_data(data_b, c->b, err), st, done);
    MR_CHECK_GOTO(write_plot_script(script, c, data, png, err), st, done);
    MR_CHECK_GOTO(run_gnuplot(gnuplot, script, errpath, err), st, done);
    if (!is_png(png))
        st = mr_error_set(err, MR_ERR_RUNTIME, "--plot: gnuplot wrote no PNG image (%s)", png);
done:
    unlink(script);
    unlink(data_a);
    unlink(data_b);
    unlink(errpath);
    rmdir(dir);
    return st;
}

/* ---- the command line ------------------------------------------------------ */

typedef struct cli {
    enum { RUN_COMPARE, RUN_HELP, RUN_VERSION } action;
    const char *path_a, *path_b, *json_path, *plot_path;
    char label_a[512], label_b[512];
    int labels; /* --labels given */
} cli;

static mr_status parse_cli(int argc, char **argv, cli *c, mr_error *err) {
    enum { OPT_PLOT = 1000, OPT_JSON, OPT_LABELS, OPT_HELP, OPT_VERSION };
    static const struct option longopts[] = {
        {"plot", required_argument, NULL, OPT_PLOT},
        {"json", required_argument, NULL, OPT_JSON},
        {"labels", required_argument, NULL, OPT_LABELS},
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    memset(c, 0, sizeof *c);
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (o) {
        case OPT_PLOT:
            c->plot_path = optarg;
            break;
        case OPT_JSON:
            c->json_path = optarg;
            break;
        case OPT_LABELS: {
            const char *comma = strchr(optarg, ',');
            if (comma == NULL || comma == optarg || comma[1] == '\0' || strchr(comma + 1, ',') ||
                has_control_char(optarg) || (size_t)(comma - optarg) >= sizeof c->label_a ||
                strlen(comma + 1) >= sizeof c->label_b)
                return mr_error_set(err, MR_ERR_USAGE,
                                    "--labels %s: expected two names separated by a comma, "
                                    "e.g. --labels cpu,gpu",
                                    optarg);
            snprintf(c->label_a, sizeof c->label_a, "%.*s", (int)(comma - optarg), optarg);
            snprintf(c->label_b, sizeof c->label_b, "%s", comma + 1);
            c->labels = 1;
            break;
        }
        case 'h':
        case OPT_HELP:
            c->action = RUN_HELP;
            return MR_OK;
        case OPT_VERSION:
            c->action = RUN_VERSION;
            return MR_OK;
        default:
            return mr_cli_bad_option(argv, err);
        }
    }
    if (argc - optind != 2)
        return mr_error_set(err, MR_ERR_USAGE, "%s (see --help)",
                            argc - optind < 2 ? "expected two CSV files, A.csv B.csv"
                                              : "more than two CSV files given");
    c->path_a = argv[optind];
    c->path_b = argv[optind + 1];
    return MR_OK;
}

int main(int argc, char **argv) {
    mr_error err = {0};
    cli c;
    run a = {0}, b = {0};
    comparison cmp = {0};
    char gnuplot[4096], png_tmp[4200] = "", json_tmp[4200] = "";
    mr_status st = parse_cli(argc, argv, &c, &err);
    if (st == MR_OK && c.action == RUN_HELP) {
        usage(stdout);
        return MR_EXIT_OK;
    }
    if (st == MR_OK && c.action == RUN_VERSION) {
        printf("mirrored %s\n", MR_VERSION);
        return MR_EXIT_OK;
    }
    /* bad input, found before anything is printed or written */
    if (st == MR_OK) st = run_load(&a, c.path_a, &err);
    if (st == MR_OK) st = run_load(&b, c.path_b, &err);
    if (st == MR_OK && c.labels) a.label = c.label_a, b.label = c.label_b;
    if (st == MR_OK) st = compare_runs(&a, &b, &cmp, &err);
    if (st == MR_OK && c.plot_path != NULL) {
        int loss, acc;
        if (!find_program("gnuplot", gnuplot, sizeof gnuplot))
            st = mr_error_set(&err, MR_ERR_UNSUPPORTED,
                              "--plot needs gnuplot (Debian: apt-get install gnuplot-nox)");
        else if (plot_panels(&cmp, &loss, &acc) == 0)
            st = mr_error_set(&err, MR_ERR_DATA,
                              "--plot: neither %s nor %s has loss or accuracy to plot", a.path,
                              b.path);
        else if (has_control_char(c.plot_path) || has_control_char(a.label) ||
                 has_control_char(b.label))
            st = mr_error_set(&err, MR_ERR_USAGE,
                              "--plot: the output path and the run names may not contain "
                              "control characters (use --labels)");
    }
    if (st == MR_OK) st = mr_cli_check_writable("--plot", c.plot_path, &err);
    if (st == MR_OK) st = mr_cli_check_writable("--json", c.json_path, &err);
    if (st != MR_OK) goto fail;

    print_report(&cmp);
    fflush(stdout);
    /* outputs under temporary names next to their destination, renamed at the end */
    if (c.plot_path != NULL) {
        snprintf(png_tmp, sizeof png_tmp, "%s.tmp.%d", c.plot_path, (int)getpid());
        if ((st = make_plot(&cmp, gnuplot, png_tmp, &err)) != MR_OK) goto fail;
    }
    if (c.json_path != NULL) {
        snprintf(json_tmp, sizeof json_tmp, "%s.tmp.%d", c.json_path, (int)getpid());
        FILE *f = fopen(json_tmp, "w");
        if (f == NULL) {
            st = mr_error_set(&err, MR_ERR_RUNTIME, "--json %s: cannot write: %s", c.json_path,
                              strerror(errno));
            goto fail;
        }
        st = write_json(f, &cmp, c.json_path, &err);
        if (fclose(f) != 0 && st == MR_OK)
            st = mr_error_set(&err, MR_ERR_RUNTIME, "--json %s: cannot write: %s", c.json_path,
                              strerror(errno));
        if (st != MR_OK) goto fail;
    }
    if (png_tmp[0] && rename(png_tmp, c.plot_path) != 0) {
        st = mr_error_set(&err, MR_ERR_RUNTIME, "--plot %s: cannot write: %s", c.plot_path,
                          strerror(errno));
        goto fail;
    }
    png_tmp[0] = '\0';
    if (json_tmp[0] && rename(json_tmp, c.json_path) != 0) {
        st = mr_error_set(&err, MR_ERR_RUNTIME, "--json %s: cannot write: %s", c.json_path,
                          strerror(errno));
        if (c.plot_path != NULL) unlink(c.plot_path); /* all outputs or none */
        goto fail;
    }
    json_tmp[0] = '\0';
    comparison_free(&cmp);
    run_free(&a);
    run_free(&b);
    return MR_EXIT_OK;
fail:
    fprintf(stderr, "%s: %s\n", prog, err.msg);
    if (png_tmp[0]) unlink(png_tmp);
    if (json_tmp[0]) unlink(json_tmp);
    comparison_free(&cmp);
    run_free(&a);
    run_free(&b);
    return mr_cli_exit_code(st);
}
