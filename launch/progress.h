/* progress.h: Keras-style progress display and the CSV/JSON logs.
 *
 * On a terminal: a bar per epoch (step/steps, ETA, running loss and
 * accuracy), redrawn at most ten times a second. Otherwise: one line per
 * epoch. Every epoch line ends with loss, accuracy, val_loss, val_accuracy
 * and samples/s. */
#ifndef MR_PROGRESS_H
#define MR_PROGRESS_H

#include <stdio.h>

#include "../strategies/strategy.h"

typedef struct mr_progress {
    FILE *out;
    int tty;   /* draw a bar */
    int quiet; /* print nothing */
    int epochs;
    FILE *csv; /* Keras CSVLogger columns, or NULL */
    double epoch_start, last_draw;
    int current_epoch;
    int64_t steps; /* of the current epoch */
    int header_done;
    /* kept for the JSON summary */
    double train_seconds;
    double train_samples;
    mr_epoch_logs last;
} mr_progress;

void mr_progress_init(mr_progress *p, FILE *out, int quiet, int epochs, FILE *csv);

/* mr_fit_callbacks slots, with user = mr_progress. */
void mr_progress_on_step(void *user, int epoch, int64_t step, int64_t steps, double loss,
                         double acc);
void mr_progress_on_epoch_end(void *user, const mr_epoch_logs *logs);

#endif
