/* report_json.h: mirrored_compare --json: the numbers of the text report
 * (report.h) as JSON, written with runtime/json.h.
 *
 *   {"a": {"label", "file", "epochs"}, "b": {...}, "epochs_in_common",
 *    "only_in_a": [epochs], "only_in_b": [epochs],
 *    "per_epoch": [{"epoch", "loss", "accuracy", "val_loss", "val_accuracy",
 *                   "samples_per_sec"}, ...],
 *    "summary": {the same at the last epoch in common, "throughput",
 *                "throughput_epochs"}}
 *
 * Each metric is {"a", "b", "b_minus_a"} ("b_over_a" for samples_per_sec and
 * throughput), null where absent or not finite. Epochs as in the CSV files
 * (from 0). */
#ifndef MR_COMPARE_REPORT_JSON_H
#define MR_COMPARE_REPORT_JSON_H

#include <stdio.h>

#include "launch/compare/compare.h"
#include "runtime/error.h"

/* Writes the JSON of c to f; a failed write is MR_ERR_RUNTIME
 * "--json path: cannot write". */
mr_status mr_cmp_write_json(FILE *f, const mr_cmp_result *c, const char *path, mr_error *err);

#endif
