/* plan.c: the batch plan, the learning-rate schedule and the gradient
 * buckets (plan.h). Pure: reads the .cfg's [net] section and the model's
 * parameter layout only. */
#include "strategies/plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* "4 replicas" or "4 replicas on 2 processes" */
static void describe_replicas(int R, int P, char *buf, size_t n) {
    snprintf(buf, n, "%d replica%s%s", R, R > 1 ? "s" : "", P > 1 ? " on " : "");
    if (P > 1) snprintf(buf + strlen(buf), n - strlen(buf), "%d processes", P);
}

mr_status mr_plan_make(const mr_config *cfg, int replicas, int local_replicas, int processes,
                       int64_t n_train, mr_fit_plan *out, mr_error *err) {
    const mr_net_cfg *net = &cfg->net;
    mr_fit_plan plan, *p = &plan;
    p->replicas = replicas;
    p->local_replicas = local_replicas;
    p->processes = processes;
    p->accumulate = net->accumulate;
    int per_update = replicas * net->accumulate;
    char who[64];
    describe_replicas(replicas, processes, who, sizeof who);
    const char *acc = net->accumulate > 1 ? " x accumulate micro-batches" : "";
    p->fixed_global = net->global_batch > 0;
    if (p->fixed_global) {
        if (net->global_batch < per_update)
            return mr_error_set(err, MR_ERR_CONFIG,
                                "%s: [net] global_batch=%d is smaller than %s%s: each replica "
                                "needs at least one example",
                                cfg->path, net->global_batch, who, acc);
        if (net->global_batch % per_update != 0)
            return mr_error_set(err, MR_ERR_CONFIG,
                                "%s: [net] global_batch=%d does not divide evenly over %s%s",
                                cfg->path, net->global_batch, who, acc);
        p->batch = net->global_batch / per_update;
    } else {
        p->batch = net->batch;
    }
    p->global_batch = p->batch * per_update;
    if (n_train > 0 && p->global_batch > n_train)
        return mr_error_set(
            err, MR_ERR_CONFIG,
            "%s: the global batch (%d) is larger than the training set (%lld examples)", cfg->path,
            p->global_batch, (long long)n_train);
    if (p->global_batch > MR_PLAN_MAX_GLOBAL_BATCH)
        return mr_error_set(err, MR_ERR_CONFIG, "%s: the global batch (%d) is larger than %d",
                            cfg->path, p->global_batch, MR_PLAN_MAX_GLOBAL_BATCH);
    p->base_lr = net->learning_rate;
    /* the learning rate follows the global batch (plan.h, mr_fit_plan) */
    p->lr_factor = !p->fixed_global && net->lr_scaling == MR_LR_SCALING_LINEAR
                       ? (float)p->global_batch / (float)p->batch
                       : 1.0f;
    /* the warmup ramps from learning_rate to the scaled rate (Goyal et al.);
     * where the rate is never scaled there is nothing to ramp to, and the
     * start line would announce a warmup that never happens. Training only:
     * evaluation plans a checkpoint's .cfg, which trained as it could. */
    if (n_train > 0 && net->warmup_epochs > 0.0f &&
        (p->fixed_global || net->lr_scaling != MR_LR_SCALING_LINEAR))
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: [net] warmup_epochs=%g with %s: the rate is never scaled, so "
                            "there is nothing to warm up to (remove warmup_epochs, or use batch "
                            "per replica with lr_scaling=linear)",
                            cfg->path, (double)net->warmup_epochs,
                            p->fixed_global ? "global_batch" : "lr_scaling=none");
    p->warmup_epochs = net->warmup_epochs;
    p->schedule = net->lr_schedule;
    p->lr_alpha = net->lr_alpha;
    p->boundaries = net->lr_boundaries;
    p->factors = net->lr_factors;
    p->epochs = net->epochs;
    p->steps_per_epoch = n_train > 0 ? (n_train + p->global_batch - 1) / p->global_batch : 0;
    *out = plan;
    return MR_OK;
}

float mr_plan_learning_rate(const mr_fit_plan *p, double progress) {
    float target = p->base_lr * p->lr_factor;
    if (p->warmup_epochs > 0.0f && progress < p->warmup_epochs)
        return p->base_lr + (target - p->base_lr) * (float)(progress / p->warmup_epochs);
    if (p->schedule == MR_LR_SCHEDULE_STEPS) {
        float f = 1.0f;
        for (int i = 0; i < p->boundaries.n && progress >= (double)p->boundaries.v[i]; i++)
            f = p->factors.v[i];
        return target * f;
    }
    if (p->schedule != MR_LR_SCHEDULE_COSINE) return target;
    double span = (double)p->epochs - p->warmup_epochs;
    double t = span > 0.0 ? (progress - p->warmup_epochs) / span : 1.0;
    if (t > 1.0) t = 1.0;
    double cosine = 0.5 * (1.0 + cos(M_PI * t));
    return (float)(target * ((1.0 - p->lr_alpha) * cosine + p->lr_alpha));
}

size_t mr_plan_default_bucket_floats(int replicas, int overlaps) {
    if (replicas < 2 || !overlaps) return 0;
    return (size_t)MR_PLAN_GPU_BUCKET_MB * 1024 * 1024 / sizeof(float);
}

int mr_plan_buckets(const int64_t *param_offset, int n_layers, size_t bucket_floats,
                    int64_t *ends) {
    int n = 0;
    int64_t last = 0;
    if (bucket_floats == 0) return 0;
    /* backward runs from the last layer: after layer i, [0, param_offset[i - 1]) is final */
    for (int i = n_layers - 1; i >= 1; i--) {
        int64_t ready = param_offset[i - 1];
        if (ready - last >= (int64_t)bucket_floats) {
            ends[n++] = ready;
            last = ready;
        }
    }
    return n;
}
