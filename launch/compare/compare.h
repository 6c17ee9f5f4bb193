/* compare.h: the comparison of two runs read from metrics CSV files
 * (metrics_csv.h): their epochs matched by number, the epochs only one run
 * has, and the throughput of each over the epochs in common. The report
 * (report.h, report_json.h, plot.h) prints what this computes. */
#ifndef MR_COMPARE_COMPARE_H
#define MR_COMPARE_COMPARE_H

#include <stddef.h>

#include "launch/compare/metrics_csv.h"
#include "runtime/error.h"

/* One epoch of either run: its rows in A and B (NULL where that run lacks it). */
typedef struct mr_cmp_pair {
    long epoch;
    const mr_cmp_row *a, *b;
} mr_cmp_pair;

typedef struct mr_cmp_result {
    const mr_cmp_run *a, *b;
    mr_cmp_pair *all; /* every epoch of either file, in order */
    int n_all, n_common;
    /* throughput over the epochs in common where both runs have
     * samples_per_sec and seconds: sum(samples_per_sec * seconds) / sum(seconds) */
    int tp_epochs; /* 0: not available */
    double tp_a, tp_b;
} mr_cmp_result;

/* Matches the epochs of a and b (which must outlive c) into c. No epoch in
 * common is MR_ERR_DATA, naming both files and the epochs each has. */
mr_status mr_cmp_compare(const mr_cmp_run *a, const mr_cmp_run *b, mr_cmp_result *c, mr_error *err);

void mr_cmp_result_free(mr_cmp_result *c);

/* Whether only run A (which_a) or only run B has the epoch of p. */
int mr_cmp_only_in(const mr_cmp_pair *p, int which_a);

/* The epochs only run A (which_a) or only run B has, as 1-based ranges
 * ("1-3, 5") into buf[n] ("" if none; cut short if it does not fit). */
void mr_cmp_format_only(const mr_cmp_result *c, int which_a, char *buf, size_t n);

/* Whether metric m appears, in either run, in an epoch both have. */
int mr_cmp_metric_shown(const mr_cmp_result *c, mr_cmp_metric m);

/* The last epoch both runs have (never NULL after a successful compare). */
const mr_cmp_pair *mr_cmp_last_common(const mr_cmp_result *c);

#endif
