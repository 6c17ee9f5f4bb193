/* report.h: mirrored_compare's text report: the runs, the epochs in common,
 * a training and a validation table (A, B, B - A; samples/s B / A), the
 * differences at the last epoch in common, the overall throughput ratio,
 * and a note when the learning rates differ. Prints what compare.h computed. */
#ifndef MR_COMPARE_REPORT_H
#define MR_COMPARE_REPORT_H

#include <stdio.h>

#include "launch/compare/compare.h"

void mr_cmp_print_report(FILE *out, const mr_cmp_result *c);

#endif
