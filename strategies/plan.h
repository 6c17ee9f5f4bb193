/* plan.h: the batch plan and the learning-rate schedule of a fit.
 *
 * Pure functions of the .cfg's [net] section and the job's shape (replicas,
 * processes): no devices, no communicator, so the rules (how the global
 * batch splits over R replicas x accumulate micro-batches, how the rate
 * follows the global batch, warmup and cosine decay) are testable alone.
 * The strategy (strategy.h) makes its plan with mr_plan_make, steps the
 * rate with mr_plan_learning_rate and lays out its gradient buckets with
 * mr_plan_buckets. Relies on models/config.h. */
#ifndef MR_PLAN_H
#define MR_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "models/config.h"
#include "runtime/error.h"

/* The largest global batch: the correct count of a global batch rides as a
 * float behind the gradients (strategy_impl.h, METRIC_FLOATS) and stays an
 * exact integer up to 2^24. */
#define MR_PLAN_MAX_GLOBAL_BATCH (1 << 24)

/* What the strategy decided, for the start-up line and the JSON summary. */
typedef struct mr_fit_plan {
    int replicas;       /* of the whole job */
    int local_replicas; /* of this process */
    int processes;
    int batch;        /* per replica, per micro-batch */
    int accumulate;   /* micro-batches per update */
    int global_batch; /* batch x replicas x accumulate */
    int fixed_global; /* 1: [net] global_batch fixed it (the same on any replica count) */
    float base_lr;
    /* The learning rate follows the global batch, not the replica count:
     * with [net] global_batch the batch is the same on any R, and so is the
     * rate (factor 1); with [net] batch per replica and lr_scaling = linear
     * the global batch grows with R (and accumulate), and the rate by
     * global_batch / batch; lr_scaling = none: 1. */
    float lr_factor;
    float warmup_epochs;
    mr_lr_schedule schedule; /* after the warmup */
    float lr_alpha;          /* cosine: final rate / scaled rate */
    mr_floats boundaries;    /* steps: epochs where the factor changes, increasing */
    mr_floats factors;       /* steps: the factor from each boundary on */
    int epochs;              /* of the whole fit: where a cosine decay ends */
    int64_t steps_per_epoch;
} mr_fit_plan;

/* The plan of a job of `replicas` replicas in all, `local_replicas` of them
 * in this process, over `processes` processes, for a training set of
 * n_train examples (0: not known yet; then steps_per_epoch is 0 and the
 * training set bounds nothing): the batch per replica comes from [net]
 * global_batch (which must divide by replicas x accumulate, each replica
 * getting at least one example) or [net] batch; the global batch may not
 * exceed the training set or MR_PLAN_MAX_GLOBAL_BATCH; with n_train > 0 a
 * warmup needs a rate that is scaled (batch per replica, lr_scaling =
 * linear: with global_batch or lr_scaling = none it is refused). Errors are
 * MR_ERR_CONFIG naming cfg->path; *out is written only on success. */
mr_status mr_plan_make(const mr_config *cfg, int replicas, int local_replicas, int processes,
                       int64_t n_train, mr_fit_plan *out, mr_error *err);

/* The learning rate at a point of training (epochs as a real number):
 * a linear ramp from base_lr to base_lr x lr_factor over warmup_epochs,
 * then constant, or a cosine decay from there to lr_alpha times it at
 * plan->epochs (Keras CosineDecay with warmup_target and alpha), or
 * piecewise constant: times factors[i] from boundaries[i] on (an update
 * at progress >= boundaries[i]; a boundary inside the warmup takes effect
 * after it). */
float mr_plan_learning_rate(const mr_fit_plan *plan, double epoch_progress);

/* The gradient buckets of the all-reduce, for a model of n_layers layers
 * whose trainable weights lie in reverse layer order (layer i's start at
 * param_offset[i], the last layer's at 0), so that backward finishes the
 * gradients [0, param_offset[i - 1]) when layer i is done. Writes into
 * ends (room for n_layers - 1) the bucket boundaries, increasing, at layer
 * ends: a boundary wherever the floats since the previous one reach
 * bucket_floats; the floats after the last boundary (and all of them when
 * there is none) go in the all-reduce after backward. Returns how many;
 * bucket_floats 0: none. */
int mr_plan_buckets(const int64_t *param_offset, int n_layers, size_t bucket_floats, int64_t *ends);

/* The default bucket size on GPUs, in MiB: PyTorch DDP's (bucket_cap_mb). */
#define MR_PLAN_GPU_BUCKET_MB 25

/* The default bucket size, in floats, for `replicas` replicas in the whole
 * job: MR_PLAN_GPU_BUCKET_MB MiB where there are 2 or more and `overlaps`
 * (their communicator reduces a bucket beside backward, on the device:
 * GPUs, NCCL on a stream of its own), else 0, one all-reduce after
 * backward (CPU replicas reduce on the cores backward needs: buckets
 * measured slower, docs/performance.md). The sums are the same bits
 * either way: each float is summed over the replicas alone. */
size_t mr_plan_default_bucket_floats(int replicas, int overlaps);

#endif
