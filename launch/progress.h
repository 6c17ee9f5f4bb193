/* progress.h: Keras-style progress display and the CSV and JSON-lines logs.
 *
 * On a terminal: a bar per epoch (step/steps, ETA, running loss and
 * accuracy), redrawn at most ten times a second. Otherwise, and always
 * under mpirun (whose ranks see a terminal wherever mpirun's own output
 * goes): one line per epoch. Every epoch line ends with loss, accuracy,
 * val_loss, val_accuracy and samples/s ([net] top_k:
 * val_sparse_top_k_categorical_accuracy after val_accuracy), then where
 * the update time went (mr_time_fractions); [net] per_class adds a line of
 * the validation set's per-class accuracy after it. A regression shows mae and val_mae
 * where a classification shows accuracy and val_accuracy. The CSV (--metrics)
 * has Keras CSVLogger's columns, then the learning rate, samples/s and
 * seconds of the epoch; the JSON lines (--log) one object per update. */
#ifndef MR_PROGRESS_H
#define MR_PROGRESS_H

#include <stdio.h>

#include "launch/throughput.h"
#include "runtime/error.h"
#include "strategies/strategy.h"

typedef struct mr_progress {
    FILE *out;
    int tty;   /* draw a bar */
    int quiet; /* print nothing */
    int epochs;
    FILE *csv;                 /* Keras CSVLogger columns and ours, or NULL */
    FILE *log;                 /* one JSON object per update, or NULL */
    const char *device;        /* "cpu" or "gpu", for the log */
    int top_k;                 /* [net] top_k: > 0 adds the top-k accuracy (Keras's name) */
    int regression;            /* 1: the logs' accuracy fields hold Keras's mae metric, shown as
                                  mae and val_mae (mr_model_regression) */
    mr_throughput *throughput; /* images/sec per update, or NULL */
    double epoch_start, last_draw;
    int current_epoch;
    int64_t steps; /* of the current epoch */
    int header_done;
    int csv_errno, log_errno; /* the first failed write to csv, log (0: none) */
    /* kept for the JSON summary */
    double train_seconds;
    double train_samples;
    mr_epoch_logs last;
} mr_progress;

void mr_progress_init(mr_progress *p, FILE *out, int quiet, int epochs, FILE *csv);

/* mr_fit_callbacks slots, with user = mr_progress. */
void mr_progress_on_step(void *user, const mr_step_info *info);
void mr_progress_on_epoch_end(void *user, const mr_epoch_logs *logs);

/* The per-class line: "SET per-class accuracy: 0 0.8600 (1000) | 1 ..."
 * (each class: its accuracy, correct / examples of the class, and that
 * count in parentheses) from a confusion matrix (classes, classes),
 * [label][predicted]; a class without examples shows 0. */
void mr_progress_print_per_class(FILE *out, const char *set, const double *confusion, int classes);

/* Where an epoch's update time went on global replica 0, as fractions of
 * the wall time of its updates (mr_epoch_logs.step_seconds): forward and
 * backward (compute), the all-reduces after backward, waiting for the
 * slowest replica included (comm), converting and uploading the batch
 * (data), and the rest (the optimizer update, the NaN checks, progress).
 * They sum to 1. */
typedef struct mr_time_fractions {
    double compute, comm, data, other;
} mr_time_fractions;

/* Fills f from the epoch's logs; returns 0 (f zero) for an epoch without
 * timed updates (restored from a checkpoint). */
int mr_progress_time_fractions(const mr_epoch_logs *l, mr_time_fractions *f);

/* A planned stop in the middle of an epoch: the CSV keeps its header and
 * the rows of finished epochs (flushed), a bar on a terminal its line. */
void mr_progress_on_stop(mr_progress *p);

/* The end of a fit, a --max-steps stop inside an epoch included: the CSV
 * has its header even when no epoch finished (CSVLogger writes a row at an
 * epoch's end only, so a partial epoch has none), both logs are flushed. */
void mr_progress_on_end(mr_progress *p);

/* Closes an output stream (*f; NULL: nothing to do) after checking that
 * every write reached it: fflush, ferror, fclose. A failure is
 * MR_ERR_RUNTIME "OPT PATH: cannot write: REASON" (REASON from
 * first_errno, the errno of an earlier failed write, when not 0). *f is
 * NULL afterwards. */
mr_status mr_progress_close_file(FILE **f, const char *opt, const char *path, int first_errno,
                                 mr_error *err);

/* Writes the CSV lines of epochs finished before a resume (their logs from
 * the checkpoint), so the file reads as the uninterrupted run's. */
void mr_progress_replay(mr_progress *p, const mr_epoch_logs *logs, int n);

#endif
