/* strategy.h: the replica manager and the training step.
 *
 * A job trains R replicas. A strategy owns this process's L of them (one
 * mr_model each, one host thread each; L = R in a one-process job), the
 * communicator that joins all R (across processes under mpirun), and the
 * step of docs/architecture.md. A replica's job-wide index is its process's offset
 * plus its local index, and everything below uses the job-wide index and R:
 *   1. replica 0 initialises the weights; they are broadcast to all;
 *   2. global batch g (G = B x R x K rows of the epoch's permutation, the
 *      same on every process) is split in order: micro-batch k, replica r
 *      takes shard s = k*R + r; shards are B rows each, or as even as
 *      possible for the last, partial batch;
 *   3. each replica's loss is the SUM of its per-example losses / G (the real
 *      size of the global batch), so SUM-all-reduced gradients are those of
 *      the mean loss over the global batch;
 *   4. gradients (and the loss/accuracy sums riding behind them) are
 *      all-reduced in buckets, in reverse layer order, once per update;
 *   5. every replica applies the same update with the same learning rate, so
 *      replicas stay bitwise identical without another broadcast.
 * With R = 1 this is the one_device strategy, the same code.
 *
 * Each replica computes on its own backend context (runtime/backend.h),
 * made from opts->devices, and the communicator is one for that device
 * kind (CPU replicas: local, mpi or hierarchical, over host memory). The
 * strategy reaches a replica's device memory only through the model and the
 * backend: the batch through the model's host staging, the metrics riding
 * behind the gradients and the --check-sync hashes through copies, the BN
 * state's averaging through the backend's scale; on the CPU all of it is in
 * place, as before. */
#ifndef MR_STRATEGY_H
#define MR_STRATEGY_H

#include <stdatomic.h>
#include <stdint.h>

#include "collectives/comm.h"
#include "collectives/job.h"
#include "models/model.h"
#include "runtime/dataset.h"
#include "runtime/trace.h"
#include "strategies/devices.h"
#include "strategies/fault.h"
#include "strategies/plan.h" /* mr_fit_plan, mr_plan_learning_rate */

typedef struct mr_strategy mr_strategy;

/* mr_strategy_opts.bucket_floats: the default for the replicas (plan.h). */
#define MR_BUCKETS_AUTO ((size_t)-1)

typedef struct mr_strategy_opts {
    mr_device_set devices; /* this process's replicas */
    mr_job *job;           /* the job's processes; NULL: this process alone */
    uint64_t seed;
    int check_sync;        /* every K steps verify replicas are bitwise equal (0: never) */
    size_t bucket_floats;  /* all-reduce bucket size (0: one all-reduce after backward;
                              MR_BUCKETS_AUTO: mr_plan_default_bucket_floats's) */
    double comm_timeout;   /* seconds a collective waits (0: mr_comm_default_timeout()) */
    int64_t max_steps;     /* fit stops once global_step reaches it (0: no limit): mid-epoch,
                              after a checkpoint through the callbacks' save, if any */
    const mr_fault *fault; /* tests only: faults to inject (fault.h), NULL: none; must
                              outlive the strategy */
    mr_trace *trace;       /* --trace: each replica records its steps in a lane of it, and fit
                              rewrites the file after each epoch; NULL: off. Must outlive
                              the strategy */
} mr_strategy_opts;

typedef struct mr_epoch_logs {
    int epoch;             /* 0-based */
    double loss, accuracy; /* training, means over the epoch's examples */
    int has_val;
    double val_loss, val_accuracy;
    double train_seconds;   /* training steps only, no validation */
    double samples_per_sec; /* training examples / train_seconds */
    float lr;               /* learning rate at the end of the epoch */
    int64_t skipped;        /* on_nan = skip: updates dropped for NaN or Inf this epoch */
    float reduced_lr;       /* reduce_lr_on_plateau cut the rate to this after the epoch (0: no) */
    double val_top_k;       /* [net] top_k > 0: the validation set's top-k accuracy (has_val) */
    /* [net] per_class (has_val): the validation set's confusion matrix
     * (classes, classes), [label][predicted] counts summed over the job, in
     * the strategy's buffer: this epoch's until the next epoch ends or the
     * strategy is destroyed; NULL in epochs restored from a checkpoint */
    const double *val_confusion;
    int classes;
    /* Where the epoch's update time went, on global replica 0, summed over
     * the updates this run trained (0 in epochs restored from a
     * checkpoint): as mr_step_info's, and step_seconds their wall times */
    double compute_seconds, comm_seconds, data_seconds, step_seconds;
    /* the job-wide replica with the most compute seconds this epoch (the
     * straggler the others wait for in the all-reduce); -1: unknown */
    int slowest_replica;
} mr_epoch_logs;

/* One update, as global replica 0 saw it (for progress and --log). */
typedef struct mr_step_info {
    int epoch;              /* 0-based */
    int64_t step, steps;    /* 1-based update in this epoch, updates of the epoch */
    int64_t global_step;    /* updates since the start of training (1-based) */
    double loss, accuracy;  /* running means over the epoch so far */
    double step_loss;       /* this update's mean loss over its global batch */
    float lr;               /* the rate this update applied */
    double seconds;         /* wall time of the update */
    double data_seconds;    /* converting this replica's rows */
    double compute_seconds; /* forward and backward */
    double comm_seconds;    /* the all-reduces after backward (waiting for the others too) */
} mr_step_info;

/* Where a fit is and what it has reported: with the weights and the
 * optimizer slots, everything a checkpoint needs to resume exactly. */
typedef struct mr_fit_state {
    int epoch;           /* the epoch under way (0-based); == epochs when training is over */
    int64_t step;        /* updates done in this epoch */
    int64_t position;    /* examples of this epoch's order consumed */
    int64_t global_step; /* updates done in all (Adam's t, dropout masks) */
    double epoch_loss, epoch_correct; /* this epoch's sums so far */
    int64_t seen;                     /* examples they are over */
    double epoch_seconds;             /* training time of this epoch so far */
    int n_history;                    /* finished epochs' logs in history */
    mr_epoch_logs *history;           /* (epochs) owned by the strategy or the caller */
} mr_fit_state;

/* Progress reporting; called on global replica 0's thread only. Any slot may be NULL. */
typedef struct mr_fit_callbacks {
    void *user;
    /* after each update, on the thread of the job's replica 0 */
    void (*on_step)(void *user, const mr_step_info *info);
    /* after each epoch (validation done), on the thread of each process's
     * replica 0: the logs are the job's figures, the same on every process */
    void (*on_epoch_end)(void *user, const mr_epoch_logs *logs);
    /* Keras's model.stop_training: after on_epoch_end, on the same threads;
     * non-zero from any process ends the fit after this epoch, as early
     * stopping does (mr_fit_end.early_stopped). Every replica learns the
     * verdict through one all-reduce of a double, made only where this is
     * set. NULL: never. */
    int (*stop_after_epoch)(void *user, const mr_epoch_logs *logs);
    /* Checkpoints: after every `every_steps` updates (0: never), and after
     * every `every_epochs` epochs (0: never), with the model of global
     * replica 0 (every replica holds the same bits) and the state to resume
     * from. A failure stops training (the caller's file is left as it was). */
    int every_epochs;
    int64_t every_steps;
    void *save_user;
    mr_status (*save)(void *save_user, const mr_fit_state *state, const mr_model *model, float lr,
                      mr_error *err);
    /* [net] save_best_only: at the end of an epoch whose monitored value
     * improved on every epoch before (resumed epochs included), with the
     * value and the best before it (had_best 0 for the first). NULL:
     * nothing. */
    mr_status (*save_best)(void *save_user, const mr_fit_state *state, const mr_model *model,
                           float lr, double value, int had_best, double best_before, mr_error *err);
    /* A planned stop (preemption): when *stop is non-zero (a signal
     * handler's flag, read on the host before each update's all-reduce;
     * NULL: never), every replica of the job finishes the same update, the
     * flag riding behind the gradients; then global replica 0 calls
     * on_stop (NULL: nothing) with the state of that update, and the fit
     * returns MR_OK early (mr_strategy_stopped). An atomic, not a
     * volatile sig_atomic_t: replica threads read what the handler (or
     * another thread) wrote, and a lock-free atomic is signal-safe too. */
    const atomic_int *stop;
    mr_status (*on_stop)(void *save_user, const mr_fit_state *state, const mr_model *model,
                         float lr, mr_error *err);
} mr_fit_callbacks;

/* Builds this process's replicas of the model (shape errors name the .cfg
 * line) and the communicator (through opts->job when there is one: then a
 * collective call of every process); works out the batch plan for a
 * training set of n_train examples (a global batch that does not divide by
 * R x accumulate, that is smaller than that, or larger than the training
 * set, is an MR_ERR_CONFIG). Weights are initialised from opts->seed on
 * replica 0 and broadcast. */
mr_status mr_strategy_create(const mr_config *cfg, const mr_strategy_opts *opts, int64_t n_train,
                             mr_strategy **out, mr_error *err);
void mr_strategy_destroy(mr_strategy *s);

const mr_fit_plan *mr_strategy_plan(const mr_strategy *s);

/* This process's replica r's model (r < local_replicas). */
mr_model *mr_strategy_replica(mr_strategy *s, int r);

/* The core replica r's thread runs on during fit and evaluate: with R > 1
 * CPU replicas and exactly R cores in the process's affinity mask, replica
 * r is pinned to its r-th core (the caller, replica 0, gets its mask back
 * afterwards); otherwise -1, not pinned. */
int mr_strategy_replica_cpu(const mr_strategy *s, int r);

/* The communicator joining the job's replicas (for its name on the start line). */
const mr_comm *mr_strategy_comm(const mr_strategy *s);

/* Trains `epochs` epochs on rows [0, n_train) of train, validating on rows
 * [val_begin, val_begin + n_val) after each epoch when n_val > 0. aug (may be
 * NULL) augments training examples. from (may be NULL: the start) is where
 * a checkpoint left off: its epoch, position in the epoch's order, update
 * count, partial sums and history; the weights and slots must already be
 * in place (mr_strategy_sync_model). With the replica count of the run
 * that wrote it, the rest of the run is bitwise the uninterrupted one;
 * with another, training goes on from the same example of the epoch. */
mr_status mr_strategy_fit(mr_strategy *s, const mr_dataset *train, int64_t n_train,
                          int64_t val_begin, int64_t n_val, int epochs, const mr_augment *aug,
                          const mr_fit_state *from, const mr_fit_callbacks *cb, mr_error *err);

/* 1 if the last mr_strategy_fit ended early at a stop request
 * (mr_fit_callbacks.stop), after the update mr_strategy_state names. */
int mr_strategy_stopped(const mr_strategy *s);

/* How the last fit ended as far as [net] early_stopping goes. */
typedef struct mr_fit_end {
    int early_stopped;  /* stopped early after this many epochs (0: it did not) */
    int best_epoch;     /* the best epoch of the monitored metric, 1-based (0: off) */
    double best;        /* its value */
    int restored_epoch; /* restore_best_weights: the weights are this epoch's (0: not restored) */
    int best_lost;      /* restore_best_weights: the best epoch came before the checkpoint
                           this fit resumed from, whose weights it does not hold: kept the last */
} mr_fit_end;
mr_fit_end mr_strategy_fit_end(const mr_strategy *s);

/* The logs of the epochs trained so far (and restored from a checkpoint). */
const mr_fit_state *mr_strategy_state(const mr_strategy *s);

/* Copies the parameters, state and optimizer slots of global replica 0 to
 * every replica of the job (after loading a checkpoint into it). */
mr_status mr_strategy_sync_model(mr_strategy *s, mr_error *err);

/* Mean loss and accuracy over rows [begin, begin + count) of ds, sharded over
 * all the job's replicas, exact for uneven shards (the sums travel as
 * doubles: a correct count stays exact far past 2^24 examples). */
mr_status mr_strategy_evaluate(mr_strategy *s, const mr_dataset *ds, int64_t begin, int64_t count,
                               double *loss, double *accuracy, mr_error *err);

/* What an evaluation reports besides the mean loss and accuracy. */
typedef struct mr_eval_detail {
    int classes;
    double *confusion;     /* (classes, classes): [label][predicted] counts, filled; NULL: none */
    double top_k_accuracy; /* filled: [net] top_k's accuracy (0 when top_k is 0) */
    /* Called on each replica's thread with the class probabilities of rows
     * [row, row + n) of the evaluated range, (n, classes); may be NULL. */
    void (*on_probs)(void *user, int64_t row, int n, const float *probs);
    void *user;
} mr_eval_detail;

/* mr_strategy_evaluate that also fills `detail` (the confusion matrix over
 * the whole range and the top-k accuracy, summed across the job exactly as
 * doubles). */
mr_status mr_strategy_evaluate_detail(mr_strategy *s, const mr_dataset *ds, int64_t begin,
                                      int64_t count, double *loss, double *accuracy,
                                      mr_eval_detail *detail, mr_error *err);

#endif
