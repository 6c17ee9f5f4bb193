/* early_stop.h: Keras's EarlyStopping, as a pure function of the epoch
 * logs: which epoch was best, and when to stop.
 *
 * Every replica of the job runs it on the same logs (the validation
 * figures are all-reduced, the training ones ride with the gradients), so
 * every replica and process stops after the same epoch with no message
 * between them. A resumed fit replays the checkpoint's epoch logs through
 * it and goes on in the same state as the uninterrupted fit. The rules
 * are those of Keras 3's EarlyStopping.on_epoch_end (mode auto, no
 * baseline, start_from_epoch 0): the first epoch is an improvement; a loss
 * improves when it falls below the best by more than min_delta, an
 * accuracy when it rises above it by more than min_delta; `wait` counts
 * epochs since the last improvement, and the fit stops when it reaches
 * `patience` (never after the first epoch). Relies on models/config.h
 * (mr_monitor) and strategies/strategy.h (mr_epoch_logs). */
#ifndef MR_EARLY_STOP_H
#define MR_EARLY_STOP_H

#include "models/config.h"
#include "strategies/strategy.h"

typedef enum mr_early_stop_action {
    MR_EARLY_STOP_NONE,     /* no improvement, go on (or early stopping is off) */
    MR_EARLY_STOP_IMPROVED, /* this epoch is the best so far */
    MR_EARLY_STOP_STOP,     /* patience exhausted: this epoch is the last */
} mr_early_stop_action;

typedef struct mr_early_stop {
    mr_monitor monitor; /* MR_MONITOR_NONE: off */
    int maximize;       /* accuracies: higher is better */
    double min_delta;   /* >= 0 */
    int patience;
    int wait;       /* epochs since the last improvement */
    int have_best;  /* 0 before the first epoch */
    double best;    /* the best value so far */
    int best_epoch; /* 0-based; -1 before the first epoch */
    int stopped;    /* 1 once STOP was returned */
} mr_early_stop;

/* The state before the first epoch, from [net] early_stopping, patience
 * and min_delta. */
void mr_early_stop_init(mr_early_stop *es, const mr_net_cfg *net);

/* A monitor alone (save_best_only): `monitor`, min_delta 0, never stops
 * (Keras's ModelCheckpoint is a MonitorCallback without patience). */
void mr_early_stop_init_monitor(mr_early_stop *es, mr_monitor monitor);

/* The monitored value of an epoch's logs. */
double mr_early_stop_value(const mr_early_stop *es, const mr_epoch_logs *logs);

/* One finished epoch: updates the state and says what the fit does. */
mr_early_stop_action mr_early_stop_epoch(mr_early_stop *es, const mr_epoch_logs *logs);

/* Keras's MonitorCallback._is_improvement: with no best yet, yes; else
 * (v - min_delta) > best for a maximised metric, (v + min_delta) < best
 * for a minimised one (min_delta >= 0); a NaN never improves. Shared with
 * reduce_lr.c. */
int mr_monitor_improves(int maximize, double min_delta, int have_best, double best, double v);

/* "val_loss", "accuracy", ...: the .cfg's and Keras's name. */
const char *mr_monitor_name(mr_monitor m);

#endif
