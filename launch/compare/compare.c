/* compare.c: matching two runs' epochs, and the throughput over the epochs
 * in common (compare.h). */
#include "launch/compare/compare.h"

#include <stdio.h>
#include <stdlib.h>

void mr_cmp_result_free(mr_cmp_result *c) {
    free(c->all);
    c->all = NULL;
}

/* Whether only run A (which_a) or only run B has epoch p. */
int mr_cmp_only_in(const mr_cmp_pair *p, int which_a) {
    return which_a ? p->a && !p->b : p->b && !p->a;
}

/* The epochs only run A (which_a) or only run B has, as 1-based ranges ("1-3, 5"). */
void mr_cmp_format_only(const mr_cmp_result *c, int which_a, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->n_all; i++) {
        if (!mr_cmp_only_in(&c->all[i], which_a)) continue;
        int j = i;
        while (j + 1 < c->n_all && c->all[j + 1].epoch == c->all[j].epoch + 1 &&
               mr_cmp_only_in(&c->all[j + 1], which_a))
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

mr_status mr_cmp_compare(const mr_cmp_run *a, const mr_cmp_run *b, mr_cmp_result *c,
                         mr_error *err) {
    *c = (mr_cmp_result){.a = a, .b = b};
    c->all = malloc(sizeof *c->all * (size_t)(a->n + b->n));
    if (c->all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    int i = 0, j = 0;
    double wa = 0, wb = 0, secs_a = 0, secs_b = 0;
    const unsigned tp = 1u << MR_CMP_SAMPLES_PER_SEC | 1u << MR_CMP_SECONDS;
    while (i < a->n || j < b->n) {
        mr_cmp_pair p = {0};
        if (j >= b->n || (i < a->n && a->rows[i].epoch < b->rows[j].epoch)) {
            p = (mr_cmp_pair){a->rows[i].epoch, &a->rows[i], NULL};
            i++;
        } else if (i >= a->n || b->rows[j].epoch < a->rows[i].epoch) {
            p = (mr_cmp_pair){b->rows[j].epoch, NULL, &b->rows[j]};
            j++;
        } else {
            p = (mr_cmp_pair){a->rows[i].epoch, &a->rows[i], &b->rows[j]};
            i++, j++;
            c->n_common++;
            if ((p.a->has & tp) == tp && (p.b->has & tp) == tp) {
                const double *va = p.a->v, *vb = p.b->v;
                wa += va[MR_CMP_SAMPLES_PER_SEC] * va[MR_CMP_SECONDS];
                wb += vb[MR_CMP_SAMPLES_PER_SEC] * vb[MR_CMP_SECONDS];
                secs_a += va[MR_CMP_SECONDS];
                secs_b += vb[MR_CMP_SECONDS];
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
        mr_cmp_format_only(c, 1, ea, sizeof ea);
        mr_cmp_format_only(c, 0, eb, sizeof eb);
        return mr_error_set(err, MR_ERR_DATA,
                            "%s and %s have no epoch in common (%s has epochs %s, %s has %s; "
                            "counted from 1)",
                            a->path, b->path, a->path, ea, b->path, eb);
    }
    return MR_OK;
}

/* Whether metric m appears in an epoch both files have, in either. */
int mr_cmp_metric_shown(const mr_cmp_result *c, mr_cmp_metric m) {
    for (int i = 0; i < c->n_all; i++)
        if (c->all[i].a && c->all[i].b &&
            (mr_cmp_row_has(c->all[i].a, m) || mr_cmp_row_has(c->all[i].b, m)))
            return 1;
    return 0;
}

const mr_cmp_pair *mr_cmp_last_common(const mr_cmp_result *c) {
    for (int i = c->n_all - 1; i >= 0; i--)
        if (c->all[i].a && c->all[i].b) return &c->all[i];
    return NULL;
}
