/* strategy_impl.h: the strategy's state, shared by the files that implement
 * strategy.h (only the .c files of strategies/ include it):
 *   strategy.c    creation (backends, communicator, replicas), destruction,
 *                 accessors, copying replica 0's model to all;
 *   replicas.c    threads: running a task on every replica, pinning;
 *   fit.c         the training loop (mr_strategy_fit), its steps in
 *                 fit_step.c, its epochs' ends in fit_epoch.c, its
 *                 checkpoints in fit_checkpoint.c (fit_impl.h);
 *   check_sync.c  --check-sync (and the weights' hash, check_sync.h);
 *   evaluate.c    sharded evaluation;
 *   plan.c        the batch plan, learning rate and gradient buckets
 *                 (plan.h, pure);
 *   fault.c       the test hooks (fault.h).
 * Relies on collectives/comm.h for every meeting of the replicas and on the
 * model and backend (models/model.h) for every access to a replica's
 * device memory. */
#ifndef MR_STRATEGY_IMPL_H
#define MR_STRATEGY_IMPL_H

#include <sched.h>
#include <stdint.h>

#include "strategies/early_stop.h"
#include "strategies/reduce_lr.h"
#include "strategies/strategy.h"

/* Floats that ride behind the gradients in the all-reduce: the global
 * batch's loss sum and correct count; how many replicas' own loss sums
 * (doubles) were NaN or infinite (on_nan: fit_step.c); and the stop flag (each
 * replica adds 1 when its process has been asked to stop,
 * mr_fit_callbacks.stop: a sum above 0 stops every replica of the job after
 * the same update, at no extra round trip). The count is at most G, which
 * mr_plan_make keeps at or below MR_PLAN_MAX_GLOBAL_BATCH = 2^24, so it
 * stays an exact integer in a float; the epoch's totals add up in doubles
 * on replica 0. */
enum { METRIC_LOSS, METRIC_CORRECT, METRIC_NONFINITE, METRIC_STOP, METRIC_FLOATS };

/* After the METRIC_FLOATS ride R more: slot METRIC_FLOATS + g holds global
 * replica g's compute seconds of the epoch so far (0 from the others), so
 * the sum tells every replica everyone's, and the epoch's slowest, at no
 * extra round trip. */
#define METRIC_EXTRA(R) ((size_t)METRIC_FLOATS + (size_t)(R))

typedef struct replica {
    mr_strategy *s;
    int r;          /* index in this process (the communicator's rank) */
    int g;          /* index in the job */
    mr_backend *be; /* this replica's backend context (its device) */
    mr_model model;
    int64_t *rows;   /* (max_batch) row indices of the current shard */
    int32_t *labels; /* (max_batch, mr_model_label_width) */
    mr_error err;
    /* bucketed all-reduce state for the current update */
    int next_bucket;
    int64_t reduced;
    int reduce_now; /* 1 during the last micro-batch of an update */
    mr_status bucket_status;
    int cpu;      /* the core this replica's thread is pinned to, or -1 */
    float *extra; /* (METRIC_EXTRA(R)) the floats after the gradients, host side */
    /* [net] early_stopping: the state (the same on every replica), and
     * with restore_best_weights a host copy of the best epoch's params
     * and BN state (n_params + n_state floats) and which epoch it is */
    mr_early_stop es;
    mr_early_stop sb; /* [net] save_best_only's monitor (never stops) */
    mr_reduce_lr rlr; /* [net] reduce_lr_on_plateau: the rate, the same everywhere */
    float *best;
    int best_epoch;
    /* --check-sync's buffers, made at its first check and kept: host
     * staging (pinned on a GPU) and device memory, sync_floats each.
     * Kept, not freed after each check: freeing pinned memory synchronises
     * the whole device (cudaFreeHost), collectives in flight included. */
    float *sync_host;
    mr_dfloat *sync_dev;
    size_t sync_floats;
    /* [net] cuda_graphs: the replica's recorded steps (fit_graph.c), NULL
     * until its first; freed by fit_graphs_free before its context */
    struct fit_graphs *graphs;
} replica;

/* Frees rep's graphs (fit_graph.c); nothing where it has none. */
void fit_graphs_free(replica *rep);

struct mr_strategy {
    const mr_config *cfg;
    mr_strategy_opts opts;
    mr_fit_plan plan;
    const mr_backend_kind *kind; /* the replicas' device kind (opts.devices) */
    int R;                       /* replicas of the job */
    int L;                       /* replicas of this process */
    int offset;                  /* job-wide index of this process's replica 0 */
    replica *reps;
    mr_comm *comm;
    /* bucket boundaries: all-reduce [b[i-1], b[i]) once backward has made b[i] floats final */
    int64_t *buckets;
    int n_buckets;
    /* the task the replica threads run, and its arguments */
    mr_status (*task)(replica *rep);
    const mr_dataset *ds;
    int64_t n_train, val_begin, n_val;
    const mr_augment *aug;
    const mr_fit_callbacks *cb;
    mr_fit_state from;  /* where the fit starts (zero: the beginning) */
    mr_fit_state state; /* where it is, on global replica 0: history of finished epochs */
    int stopped;        /* 1: the last fit ended early at a stop request (cb->stop) */
    int early_stopped;  /* the last fit's early stop: after this many epochs (0: none) */
    int restored_epoch; /* restore_best_weights: the 1-based epoch restored (0: none) */
    int best_lost;      /* restore_best_weights: the best epoch predates the resume */
    int64_t *perm;      /* (n_train) this epoch's order, written by replica 0 */
    int64_t eval_begin, eval_count;
    double eval_loss, eval_acc;
    mr_eval_detail *eval_detail; /* or NULL */
    double *val_confusion;       /* [net] per_class: (classes, classes), the last validation's */
    cpu_set_t cpus;              /* the process's cores at creation */
};

/* ---- replicas.c --------------------------------------------------------- */

/* Chooses each replica's core (rep->cpu, s->cpus): see pin_replica. */
void strategy_plan_pinning(mr_strategy *s);

/* Runs task on this process's replicas: threads for 1..L-1, the caller is
 * replica 0 (the thread that may call MPI). Returns the first real error,
 * not an MR_ERR_ABORTED echo of it. */
mr_status strategy_run_replicas(mr_strategy *s, mr_status (*task)(replica *), mr_error *err);

/* ---- check_sync.c ------------------------------------------------------- */

/* --check-sync after update `step`: every replica of the job compares its
 * weights' hashes with the others'; global replica 0 reports a difference. */
mr_status strategy_check_sync(replica *rep, int64_t step);

/* ---- evaluate.c --------------------------------------------------------- */

/* Mean loss and accuracy over rows [begin, begin+count) of ds, this
 * replica's batches of them, summed over the job (detail may be NULL). A
 * collective: every replica of the job calls it. */
mr_status strategy_evaluate_replica(replica *rep, const mr_dataset *ds, int64_t begin,
                                    int64_t count, double *loss, double *acc,
                                    mr_eval_detail *detail);

#endif
