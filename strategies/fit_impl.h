/* fit_impl.h: the functions the training loop's files share (only
 * strategies/fit*.c include it); the loop's state, fit_loop, and its one
 * owner are fit_loop_impl.h and fit_loop.c:
 *   fit.c             mr_strategy_fit and the loop every replica runs:
 *                     fit_begin, epochs of fit_step closed by
 *                     fit_epoch_end, fit_finish;
 *   fit_step.c        one update (fit_step): shards, forward and backward,
 *                     the bucketed all-reduce, on_nan, the update, the
 *                     step's progress, --check-sync, stop requests and
 *                     every_steps checkpoints;
 *   fit_epoch.c       an epoch's end (fit_epoch_end): validation, early
 *                     stopping, ReduceLROnPlateau, restore_best_weights,
 *                     the epoch's logs and checkpoints; the same callbacks
 *                     replayed when a fit resumes (fit_epoch_replay);
 *   fit_checkpoint.c  the hand-offs to the caller's checkpoint callbacks
 *                     (never weights with NaN or Inf).
 * Each replica runs the loop on its thread with a fit_loop of its own; all
 * decide on the reduced figures, the same everywhere. fit.c calls the
 * others; none of them calls fit.c, and each moves the loop's state only
 * through fit_loop.c. */
#ifndef MR_FIT_IMPL_H
#define MR_FIT_IMPL_H

#include <stdint.h>

#include "strategies/fit_loop_impl.h"

/* ---- fit_step.c --------------------------------------------------------- */

/* One update: global batch loop->g of the epoch, rows from loop->gbegin
 * of s->perm; then moves loop->g and loop->gbegin on. A stop request ends
 * the fit after it (loop->end = FIT_PAUSED). */
mr_status fit_step(fit_loop *loop);

/* ---- fit_graph.c -------------------------------------------------------- */

/* 1 where this update of `ga` rows runs as a replay of the replica's graph
 * ([net] cuda_graphs on a GPU, a full global batch, after one eager step;
 * fit_graph.c says what else keeps a step eager and why). */
int fit_graph_usable(const fit_loop *loop, int64_t ga);

/* What a replayed update hands back to the step (fit_step.c). */
typedef struct fit_graph_result {
    const float *metrics; /* (METRIC_EXTRA(R)) the step's metric floats, rep->extra */
    int grads_bad;        /* 1: the reduced gradients held NaN or Inf */
    double t_compute;     /* seconds from the launch to the end of the host's wait */
    double t_data;        /* seconds loading the next shard (prefetch) */
} fit_graph_result;

/* The update of global batch loop->g (ga rows, its shard already loaded)
 * at rate lr: recorded the first time (and when the context's buffers
 * moved), replayed after; `prefetch` loads the next shard while the device
 * runs it; then the step's one host wait, and its figures in *out. */
mr_status fit_graph_run(fit_loop *loop, int64_t ga, float lr,
                        mr_status (*prefetch)(fit_loop *loop, int k), fit_graph_result *out);

/* After an eager update of ga rows: the next full one may be recorded. */
void fit_graph_note_eager(fit_loop *loop, int64_t ga);

/* ---- fit_epoch.c -------------------------------------------------------- */

/* Early stopping's, save_best_only's and ReduceLROnPlateau's state at the
 * start of a fit: the checkpoint's finished epochs replayed through them;
 * a replay that ends in a stop leaves nothing to train (FIT_DONE). */
mr_status fit_epoch_replay(fit_loop *loop);

/* The end of epoch loop->epoch: validation, the callbacks, the logs, the
 * checkpoints; loop->end says whether another epoch follows. */
mr_status fit_epoch_end(fit_loop *loop);

/* restore_best_weights at the end of a finished fit (Keras's
 * on_train_end): back to the best epoch's weights where this run holds
 * them. */
mr_status fit_restore_best(replica *rep);

/* ---- fit_checkpoint.c --------------------------------------------------- */

/* On global replica 0, where the caller has the callback: cb->save with the
 * state and the model after an update at rate lr; an error, and nothing
 * written, where the weights hold NaN or Inf. */
mr_status fit_save_checkpoint(replica *rep, float lr);

/* The same through cb->on_stop, after a stop request's last update. */
mr_status fit_save_on_stop(replica *rep, float lr);

/* The same through cb->save_best, for an epoch whose monitored value
 * improved to `value` (had_best 0: the first; else best_before the best
 * before it). */
mr_status fit_save_best(replica *rep, float lr, double value, int had_best, double best_before);

#endif
