/* report.c: the text report (report.h): fixed-width tables whose cells
 * say "-" where a value is absent, "0" where two values are equal as
 * written. */
#include "launch/compare/report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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
    mr_cmp_metric m;
    const char *title;
    int ratio;
} group;

static int group_width(const group *g) {
    return 2 * W_VAL + (g->ratio ? W_RATIO : W_DIFF);
}

static void print_title(FILE *out, const char *title, int width) {
    int len = (int)strlen(title);
    int dashes = width - len - 3; /* a space before the group, one either side of the title */
    if (dashes < 2) {
        fprintf(out, "%*s", width, title);
        return;
    }
    fprintf(out, " %.*s %s %.*s", dashes / 2, "----------------------------------------", title,
            dashes - dashes / 2, "----------------------------------------");
}

/* A right-aligned cell of width w, always after a space: a value too long
 * for its column shifts the row instead of running into its neighbour. */
static void print_cell(FILE *out, int w, const char *s) {
    fprintf(out, " %*s", w - 1, s);
}

/* Prints A, B and B - A (or B / A) of metric g->m for rows a and b ("-" where absent). */
static void print_cells(FILE *out, const group *g, const mr_cmp_row *a, const mr_cmp_row *b) {
    char ba[32], bb[32], bd[32];
    int integer = g->m == MR_CMP_SAMPLES_PER_SEC;
    int ha = mr_cmp_row_has(a, g->m), hb = mr_cmp_row_has(b, g->m);
    print_cell(out, W_VAL, ha ? fmt_value(a->v[g->m], integer, ba, sizeof ba) : "-");
    print_cell(out, W_VAL, hb ? fmt_value(b->v[g->m], integer, bb, sizeof bb) : "-");
    if (!ha || !hb)
        print_cell(out, g->ratio ? W_RATIO : W_DIFF, "-");
    else if (g->ratio)
        print_cell(out, W_RATIO,
                   a->v[g->m] > 0 ? fmt_ratio(b->v[g->m] / a->v[g->m], bd, sizeof bd) : "-");
    else
        print_cell(out, W_DIFF, fmt_diff(b->v[g->m] - a->v[g->m], bd, sizeof bd));
}

/* One table over the epochs in common: a row per epoch, the groups that
 * either run has. Prints nothing if neither has any. */
static void print_table(FILE *out, const mr_cmp_result *c, const char *name, const group *groups,
                        int n) {
    const group *shown_groups[8];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (mr_cmp_metric_shown(c, groups[i].m)) shown_groups[k++] = &groups[i];
    if (k == 0) return;
    fprintf(out, "\n%s\n%*s", name, W_EPOCH, "");
    for (int i = 0; i < k; i++)
        print_title(out, shown_groups[i]->title, group_width(shown_groups[i]));
    fprintf(out, "\n%*s", W_EPOCH, "epoch");
    for (int i = 0; i < k; i++)
        fprintf(out, "%*s%*s%*s", W_VAL, "A", W_VAL, "B", shown_groups[i]->ratio ? W_RATIO : W_DIFF,
                shown_groups[i]->ratio ? "B / A" : "B - A");
    fprintf(out, "\n");
    for (int e = 0; e < c->n_all; e++) {
        const mr_cmp_pair *p = &c->all[e];
        if (!p->a || !p->b) continue;
        fprintf(out, "%*ld", W_EPOCH, p->epoch + 1);
        for (int i = 0; i < k; i++)
            print_cells(out, shown_groups[i], p->a, p->b);
        fprintf(out, "\n");
    }
}

/* A note when the two runs trained with different learning rates (e.g. a
 * different replica count under linear scaling): often why the curves differ. */
static void print_lr_note(FILE *out, const mr_cmp_result *c) {
    int differ = 0, both = 0;
    const mr_cmp_pair *first = NULL;
    for (int i = 0; i < c->n_all; i++) {
        const mr_cmp_pair *p = &c->all[i];
        if (!mr_cmp_row_has(p->a, MR_CMP_LEARNING_RATE) ||
            !mr_cmp_row_has(p->b, MR_CMP_LEARNING_RATE))
            continue;
        both++;
        double la = p->a->v[MR_CMP_LEARNING_RATE], lb = p->b->v[MR_CMP_LEARNING_RATE];
        if (fabs(la - lb) > 1e-6 * fmax(fabs(la), fabs(lb))) {
            differ++;
            if (first == NULL) first = p;
        }
    }
    if (differ)
        fprintf(out,
                "\nNote: the learning rates differ in %d of %d epochs (epoch %ld: A %g, B %g)\n",
                differ, both, first->epoch + 1, first->a->v[MR_CMP_LEARNING_RATE],
                first->b->v[MR_CMP_LEARNING_RATE]);
}

void mr_cmp_print_report(FILE *out, const mr_cmp_result *c) {
    const mr_cmp_run *a = c->a, *b = c->b;
    if (a->label != a->path || b->label != b->path)
        fprintf(out, "A: %s (%s, %d epochs)   B: %s (%s, %d epochs)\n", a->label, a->path, a->n,
                b->label, b->path, b->n);
    else
        fprintf(out, "A: %s (%d epochs)   B: %s (%d epochs)\n", a->path, a->n, b->path, b->n);
    char only_a[256], only_b[256];
    mr_cmp_format_only(c, 1, only_a, sizeof only_a);
    mr_cmp_format_only(c, 0, only_b, sizeof only_b);
    fprintf(out, "%d epoch%s in common", c->n_common, c->n_common == 1 ? "" : "s");
    if (only_a[0]) fprintf(out, "; only in A: %s", only_a);
    if (only_b[0]) fprintf(out, "; only in B: %s", only_b);
    fprintf(out, " (epochs counted from 1)\n");

    static const group train[] = {{MR_CMP_LOSS, "loss", 0},
                                  {MR_CMP_ACCURACY, "accuracy", 0},
                                  {MR_CMP_SAMPLES_PER_SEC, "samples/s", 1}};
    static const group val[] = {{MR_CMP_VAL_LOSS, "val_loss", 0},
                                {MR_CMP_VAL_ACCURACY, "val_accuracy", 0}};
    print_table(out, c, "Training", train, 3);
    print_table(out, c, "Validation", val, 2);
    if (!mr_cmp_metric_shown(c, MR_CMP_VAL_LOSS) && !mr_cmp_metric_shown(c, MR_CMP_VAL_ACCURACY))
        fprintf(out, "\nValidation: neither run has val_loss or val_accuracy\n");

    const mr_cmp_pair *last = mr_cmp_last_common(c);
    fprintf(out, "\nSummary at epoch %ld (the last in common)\n%-14s%*s%*s%*s\n", last->epoch + 1,
            "", W_VAL, "A", W_VAL, "B", W_DIFF, "B - A");
    static const mr_cmp_metric final[] = {MR_CMP_LOSS, MR_CMP_ACCURACY, MR_CMP_VAL_LOSS,
                                          MR_CMP_VAL_ACCURACY};
    for (int i = 0; i < 4; i++) {
        if (!mr_cmp_metric_shown(c, final[i])) continue;
        group g = {final[i], mr_cmp_metric_names[final[i]], 0};
        fprintf(out, "%-14s", mr_cmp_metric_names[final[i]]);
        print_cells(out, &g, last->a, last->b);
        fprintf(out, "\n");
    }
    char ba[32], bb[32], br[32];
    if (c->tp_epochs > 0) {
        fprintf(out, "%-14s", "throughput");
        print_cell(out, W_VAL, fmt_value(c->tp_a, 1, ba, sizeof ba));
        print_cell(out, W_VAL, fmt_value(c->tp_b, 1, bb, sizeof bb));
        print_cell(out, W_DIFF, c->tp_a > 0 ? fmt_ratio(c->tp_b / c->tp_a, br, sizeof br) : "-");
        fprintf(out, "  samples/s weighted by seconds");
        if (c->tp_epochs < c->n_common)
            fprintf(out, ", %d of %d epochs", c->tp_epochs, c->n_common);
        fprintf(out, "\n");
    } else
        fprintf(out, "%-14sn/a (needs samples_per_sec and seconds in both files)\n", "throughput");
    print_lr_note(out, c);
}
