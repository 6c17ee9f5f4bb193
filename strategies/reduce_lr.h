/* reduce_lr.h: Keras's ReduceLROnPlateau, as a pure function of the epoch
 * logs: the learning rate of the next epoch.
 *
 * Every replica runs it on the same logs (as early_stop.h), so all use the
 * same rate; a resumed fit replays the checkpoint's epoch logs through it.
 * The rules are Keras 3's (mode auto): an epoch improves on the best when
 * a loss falls below it by more than min_delta (an accuracy rises above it
 * by more); during the `cooldown` epochs after a cut, `wait` stays 0;
 * otherwise each epoch without improvement adds 1 to it, and when it
 * reaches `patience` the rate, if above min_lr, becomes max(rate x factor,
 * min_lr), rounded to float32 as Keras's optimizer variable holds it, and
 * the cooldown starts. Relies on models/config.h and strategies/strategy.h
 * (mr_epoch_logs). */
#ifndef MR_REDUCE_LR_H
#define MR_REDUCE_LR_H

#include "models/config.h"
#include "strategies/strategy.h"

typedef struct mr_reduce_lr {
    mr_monitor monitor; /* MR_MONITOR_NONE: off */
    int maximize;
    double factor, min_delta, min_lr;
    int patience, cooldown;
    int have_best;
    double best;
    int wait, cooldown_counter;
    float lr; /* the rate now */
} mr_reduce_lr;

/* The state before the first epoch at rate lr (the plan's constant rate). */
void mr_reduce_lr_init(mr_reduce_lr *r, const mr_net_cfg *net, float lr);

/* One finished epoch: 1 if it cut the rate (r->lr is the new one), else 0. */
int mr_reduce_lr_epoch(mr_reduce_lr *r, const mr_epoch_logs *logs);

#endif
