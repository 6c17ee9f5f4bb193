/* metrics_csv.c: the metrics CSV reader (metrics_csv.h): the header's
 * columns, one row per data line, sorted and checked for repeated epochs. */
#include "launch/compare/metrics_csv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const mr_cmp_metric_names[MR_CMP_METRIC_COUNT] = {
    "loss", "accuracy", "val_loss", "val_accuracy", "learning_rate", "samples_per_sec", "seconds",
};

void mr_cmp_run_free(mr_cmp_run *r) {
    free(r->rows);
    r->rows = NULL;
    r->n = r->cap = 0;
}

int mr_cmp_row_has(const mr_cmp_row *row, mr_cmp_metric m) {
    return row != NULL && (row->has >> m & 1u);
}

int mr_cmp_run_has(const mr_cmp_run *r, mr_cmp_metric m) {
    for (int i = 0; i < r->n; i++)
        if (mr_cmp_row_has(&r->rows[i], m)) return 1;
    return 0;
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
    const mr_cmp_row *x = a, *y = b;
    return (x->epoch > y->epoch) - (x->epoch < y->epoch);
}

/* Parses one data line (already split) into r's rows. col[i] is the metric
 * of field i, -1 for epoch, -2 for a column that is not read. */
static mr_status parse_row(mr_cmp_run *r, char **fields, const int *col, int ncols, int line,
                           mr_error *err) {
    char buf[64];
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        mr_cmp_row *rows = realloc(r->rows, sizeof *rows * (size_t)cap);
        if (rows == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
        r->rows = rows;
        r->cap = cap;
    }
    mr_cmp_row *row = &r->rows[r->n];
    *row = (mr_cmp_row){.epoch = -1, .line = line};
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
        /* empty, or Keras's CSVLogger "NA" (a key the epoch's logs lack, such as val_accuracy
         * of a run without validation): absent on this line */
        if (f[0] == '\0' || strcmp(f, "NA") == 0) continue;
        char *end;
        double v = strtod(f, &end);
        if (*end != '\0')
            return mr_error_set(err, MR_ERR_DATA, "%s:%d: '%s' is not a number in column %s",
                                r->path, line, shown(f, buf, sizeof buf),
                                mr_cmp_metric_names[col[i]]);
        row->v[col[i]] = v;
        row->has |= 1u << col[i];
    }
    r->n++;
    return MR_OK;
}

/* Reads the header line: which metric each column holds. */
static mr_status parse_header(const mr_cmp_run *r, char **fields, int ncols, int *col, int line,
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
        for (int m = 0; m < MR_CMP_METRIC_COUNT; m++) {
            if (strcmp(fields[i], mr_cmp_metric_names[m]) != 0) continue;
            if (seen >> m & 1u)
                return mr_error_set(err, MR_ERR_DATA, "%s:%d: column %s appears twice", r->path,
                                    line, mr_cmp_metric_names[m]);
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

/* See metrics_csv.h. */
mr_status mr_cmp_run_load(mr_cmp_run *r, const char *path, mr_error *err) {
    *r = (mr_cmp_run){.path = path, .label = path};
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
            const mr_cmp_row *a = &r->rows[i - 1], *b = &r->rows[i];
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
    if (st != MR_OK) mr_cmp_run_free(r);
    return st;
}
