/* fit_loop_impl.h: the training loop's state (fit_loop) and its one owner,
 * fit_loop.c: where a fit starts (the checkpoint's state), each epoch's
 * start (its sums, position and augmentation), the epoch's training
 * figures, the resumable state (mr_fit_state) after an update and after an
 * epoch, and whether the fit goes on after an epoch. The loop (fit.c), an
 * update (fit_step.c, which adds the update's figures: count, sums, times,
 * rate, position) and an epoch's end (fit_epoch.c) call it, never each
 * other's state code. Only strategies/fit*.c include it. */
#ifndef MR_FIT_LOOP_IMPL_H
#define MR_FIT_LOOP_IMPL_H

#include <stdint.h>

#include "strategies/strategy_impl.h"

/* How the fit stands. */
typedef enum fit_end {
    FIT_RUNNING,
    FIT_DONE,   /* ran its epochs, or early stopping ended it: restore_best_weights applies */
    FIT_PAUSED, /* a stop request or --max-steps: the state says where to resume, nothing
                   restored */
} fit_end;

typedef struct fit_loop {
    replica *rep;
    fit_end end;
    /* across epochs */
    int64_t global_step; /* updates done in all */
    int nan_in_row;      /* on_nan = skip: skipped updates in a row */
    /* this epoch (fit_loop_epoch_begin sets them) */
    int epoch;                        /* 0-based */
    mr_augment aug;                   /* s->aug with this epoch's number */
    const mr_augment *augp;           /* &aug, or NULL: no augmentation */
    double t0;                        /* this run's start of the epoch */
    double seconds_before;            /* a resumed epoch's training seconds before this run */
    double epoch_loss, epoch_correct; /* the global batches' sums, skipped updates left out */
    int64_t seen;                     /* examples they are over */
    float lr;                         /* the rate of the epoch's last update (0: none yet) */
    int64_t g;                        /* the epoch's next update, 0-based */
    int64_t gbegin;                   /* its first row in the epoch's order (s->perm) */
    int loaded;                       /* 1: the next shard is in the model's input already */
    /* where the epoch's update time goes (mr_epoch_logs), this run's updates */
    double e_compute, e_comm, e_data, e_step;
    int slowest;     /* the job-wide replica with the most compute seconds (-1: none yet) */
    int64_t skipped; /* on_nan = skip: updates dropped this epoch */
} fit_loop;

/* --max-steps: the fit has made the updates it may (opts.max_steps 0: no limit). */
static inline int fit_max_steps_reached(const fit_loop *loop) {
    const int64_t max_steps = loop->rep->s->opts.max_steps;
    return max_steps > 0 && loop->global_step >= max_steps;
}

/* The strategy's resumable state at the start of a fit: s->from (a copy
 * of `from`, or zeros; its position at most n_train) and s->state, at
 * from's epoch and update with from's first `epochs` epoch logs in
 * `history` (room for `epochs`; s->state owns it). */
void fit_loop_prepare(mr_strategy *s, const mr_fit_state *from, int epochs, int64_t n_train,
                      mr_epoch_logs *history);

/* A replica's loop at the start of a fit: running, at the update and the
 * epoch s->from left. */
void fit_loop_begin(fit_loop *loop, replica *rep);

/* Epoch loop->epoch's start: its augmentation, and its sums and position:
 * zero, or where the checkpoint left a resumed epoch. */
void fit_loop_epoch_begin(fit_loop *loop);

/* The epoch's training figures into logs: the mean loss and the accuracy
 * over the examples seen (label_width: an accuracy's outputs per example). */
void fit_loop_epoch_figures(const fit_loop *loop, int label_width, mr_epoch_logs *logs);

/* Global replica 0, after an update of `ga` rows: s->state says where the
 * fit resumes (the next update of this epoch). */
void fit_loop_record_step(const fit_loop *loop, int64_t ga);

/* Each process's replica 0, at the epoch's end (training ended at t1): the
 * logs completed with the epoch's time, rate and skips, kept in s->state's
 * history; s->state moved on to the next epoch's start. */
void fit_loop_record_epoch(const fit_loop *loop, mr_epoch_logs *logs, double t1);

/* After epoch loop->epoch: whether the fit goes on. `stopping`: early
 * stopping or the caller ends it (FIT_DONE); the last epoch is FIT_DONE;
 * --max-steps reached before it FIT_PAUSED (nothing restored). */
void fit_loop_epoch_close(fit_loop *loop, int stopping);

#endif
