/* metrics_csv.h: reading a run's per-epoch metrics CSV file (mirrored_train
 * --metrics, or Keras's CSVLogger) for mirrored_compare.
 *
 * Columns are found by the header's names, in any order: epoch (required,
 * 0-based), loss, accuracy, val_loss, val_accuracy, learning_rate,
 * samples_per_sec, seconds; other columns are ignored, and a column that is
 * missing, or empty or "NA" on a line (Keras's CSVLogger writes NA for a key
 * the epoch did not log), is absent there. Fields may be quoted
 * ("a, b", "" for a quote); spaces around fields, CRLF line ends, blank
 * lines and a UTF-8 BOM are accepted. Errors are one line naming the file
 * and line (runtime/error.h). Relies on stdio and runtime/error.h only. */
#ifndef MR_COMPARE_METRICS_CSV_H
#define MR_COMPARE_METRICS_CSV_H

#include "runtime/error.h"

/* The columns read; the bit (1u << m) of a row's `has` says column m was given. */
typedef enum mr_cmp_metric {
    MR_CMP_LOSS,
    MR_CMP_ACCURACY,
    MR_CMP_VAL_LOSS,
    MR_CMP_VAL_ACCURACY,
    MR_CMP_LEARNING_RATE,
    MR_CMP_SAMPLES_PER_SEC,
    MR_CMP_SECONDS,
    MR_CMP_METRIC_COUNT
} mr_cmp_metric;

/* The column names: "loss", "accuracy", ..., "seconds". */
extern const char *const mr_cmp_metric_names[MR_CMP_METRIC_COUNT];

typedef struct mr_cmp_row {
    long epoch; /* as in the file: 0-based */
    int line;   /* line number in the file, for messages */
    unsigned has;
    double v[MR_CMP_METRIC_COUNT];
} mr_cmp_row;

typedef struct mr_cmp_run {
    const char *path;  /* not copied: must outlive the run */
    const char *label; /* the path, until the caller names the run (--labels) */
    mr_cmp_row *rows;  /* sorted by epoch, each epoch once */
    int n, cap;
} mr_cmp_run;

/* Reads path into r. Bad input is MR_ERR_IO (cannot open or read) or
 * MR_ERR_DATA ("path:line: ..."): no epoch column, a field that is not a
 * number, a line with the wrong number of fields, an epoch twice, a column
 * twice, no epochs. On failure r holds nothing to free. */
mr_status mr_cmp_run_load(mr_cmp_run *r, const char *path, mr_error *err);

void mr_cmp_run_free(mr_cmp_run *r);

/* Whether row (may be NULL: no) has metric m. */
int mr_cmp_row_has(const mr_cmp_row *row, mr_cmp_metric m);

/* Whether run r has metric m on any epoch. */
int mr_cmp_run_has(const mr_cmp_run *r, mr_cmp_metric m);

#endif
