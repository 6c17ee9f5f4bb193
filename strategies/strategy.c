/* strategy.c: the strategy's creation (backends, communicator, plan,
 * gradient buckets, replicas' models, replica 0's weights broadcast),
 * destruction, accessors, and replica 0's model copied to every replica.
 * The training loop lives in fit*.c, the threads in replicas.c, the rest
 * beside them (strategy_impl.h). Every meeting of the replicas, in this
 * process or across the job's processes, goes through the communicator
 * (collectives/); each replica computes on its own backend context (its
 * device), and the strategy never reads a replica's device memory itself. */
#include "strategies/strategy.h"

#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>

#include "collectives/local.h"
#include "runtime/device_trace.h"
#include "strategies/strategy_impl.h"

/* mr_exec_ctx.sync_sum for SyncBatchNormalization: a sum over all the replicas. */
static mr_status replica_sync_sum(void *ctx, mr_dfloat *buf, size_t n) {
    replica *rep = ctx;
    return mr_comm_allreduce_sum(rep->s->comm, rep->r, buf, n, &rep->err);
}

static mr_status task_broadcast_init(replica *rep) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    if (rep->g == 0) MR_CHECK(mr_model_init_weights(m, s->opts.seed, &rep->err));
    MR_CHECK(mr_comm_broadcast(s->comm, rep->r, m->params, (size_t)m->n_params, 0, &rep->err));
    if (m->n_state)
        MR_CHECK(mr_comm_broadcast(s->comm, rep->r, m->state, (size_t)m->n_state, 0, &rep->err));
    return MR_OK;
}

/* The process's replicas' backend contexts (before the communicator: NCCL
 * joins their devices). */
static mr_status make_backends(mr_strategy *s, mr_error *err) {
    const mr_strategy_opts *opts = &s->opts;
    s->reps = calloc((size_t)s->L, sizeof *s->reps);
    if (s->reps == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    for (int r = 0; r < s->L; r++) {
        replica *rep = &s->reps[r];
        MR_CHECK(mr_backend_create(s->kind, opts->devices.ordinals[r], &rep->be, err));
        if (mr_fault_staged(opts->fault))
            rep->be->host_memory = 0; /* host code copies, as for a GPU */
    }
    return MR_OK;
}

/* The process's replicas: models, shard buffers. */
static mr_status make_replicas(mr_strategy *s, const mr_config *cfg, mr_error *err) {
    const mr_strategy_opts *opts = &s->opts;
    /* L replicas x BLAS threads <= cores: one replica may use them all */
    int cores = opts->devices.cores > 0 ? opts->devices.cores : mr_cpu_cores();
    for (int r = 0; r < s->L; r++) {
        replica *rep = &s->reps[r];
        rep->s = s;
        rep->r = r;
        rep->g = s->offset + r;
        /* the math library's threads: OpenBLAS's setting is the process's,
         * the same for every replica, set before any model is built */
        if (r == 0) mr_backend_set_threads(rep->be, s->L == 1 ? cores : 1);
        /* this thread builds every replica's model: on each one's device */
        MR_CHECK(mr_backend_enter(rep->be, err));
        MR_CHECK(mr_model_init(&rep->model, rep->be, cfg, s->plan.batch, METRIC_EXTRA(s->R), err));
        char label[64];
        snprintf(label, sizeof label, "replica %d (%s)", rep->g, s->kind->name);
        rep->model.trace = mr_trace_add_lane(opts->trace, rep->g, label);
        if (opts->trace && mr_backend_has_marks(rep->be)) {
            /* a GPU: its device time on a lane beside the host's; room for
             * a step's spans: each layer's forward and backward and the
             * loss per micro-batch, and the update */
            snprintf(label, sizeof label, "replica %d (%s) device", rep->g, s->kind->name);
            mr_trace_lane *lane =
                mr_trace_add_lane(opts->trace, MR_TRACE_DEVICE_TID + rep->g, label);
            const int spans = s->plan.accumulate * (2 * rep->model.n_layers + 1) + 1;
            MR_CHECK(mr_device_trace_create(rep->be, lane, spans, &rep->model.dtrace, err));
        }
        if (s->R > 1) {
            rep->model.run.sync_sum = replica_sync_sum;
            rep->model.run.sync_ctx = rep;
        }
        rep->rows = malloc(sizeof(int64_t) * (size_t)s->plan.batch);
        /* (batch, label width): multi-label binary_crossentropy's rows are k wide */
        rep->labels = malloc(sizeof(int32_t) * (size_t)s->plan.batch *
                             (size_t)mr_model_label_width(&rep->model));
        rep->extra = calloc(METRIC_EXTRA(s->R), sizeof(float));
        if (!rep->rows || !rep->labels || !rep->extra)
            return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    return MR_OK;
}

/* s->buckets: the all-reduce's bucket boundaries at layer ends of replica
 * 0's model (every replica's layout is the same), each bucket at least
 * opts.bucket_floats (none when it is 0; plan.h, mr_plan_buckets), which
 * MR_BUCKETS_AUTO resolves to the default: buckets where the all-reduce
 * overlaps backward on the device (GPUs, 2 or more in the job). */
static mr_status make_buckets(mr_strategy *s, mr_error *err) {
    const mr_model *m0 = &s->reps[0].model;
    if (s->opts.bucket_floats == MR_BUCKETS_AUTO)
        s->opts.bucket_floats = mr_plan_default_bucket_floats(
            s->R, mr_comm_is_async(s->comm) && !s->reps[0].be->host_memory);
    s->buckets = malloc(sizeof(int64_t) * (size_t)(m0->n_layers + 1));
    if (s->buckets == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    s->n_buckets =
        mr_plan_buckets(m0->param_offset, m0->n_layers, s->opts.bucket_floats, s->buckets);
    return MR_OK;
}

/* The communicator for the replicas' device kind: the kind's own where it
 * has one (GPUs: NCCL over their devices, in one process or across the
 * job's); else local threads over shared memory in one process, or the
 * job's mpi or hierarchical communicator, all of which move host memory,
 * which is CPU replicas' device memory (collectives/comm.h). */
static mr_status make_comm(mr_strategy *s, mr_error *err) {
    const mr_strategy_opts *opts = &s->opts;
    double timeout = opts->comm_timeout > 0 ? opts->comm_timeout : mr_comm_default_timeout();
    /* a GPU's kernels can wait inside a collective (SyncBN): the host's
     * waits for the device give up as the collectives' do */
    for (int r = 0; r < s->L; r++)
        s->reps[r].be->timeout_s = timeout;
    if (s->kind->comm_create != NULL) {
        mr_backend *be[MR_MAX_REPLICAS];
        for (int r = 0; r < s->L; r++)
            be[r] = s->reps[r].be;
        if (opts->job != NULL) opts->job->timeout_s = timeout;
        return s->kind->comm_create(be, s->L, opts->job, timeout, &s->comm, err);
    }
    if (opts->job != NULL) {
        opts->job->timeout_s = timeout;
        return mr_job_comm_create(opts->job, s->L, &s->comm, err);
    }
    MR_CHECK(mr_comm_local_create(s->L, &s->comm, err));
    s->comm->timeout_s = timeout;
    return MR_OK;
}

mr_status mr_strategy_create(const mr_config *cfg, const mr_strategy_opts *opts, int64_t n_train,
                             mr_strategy **out, mr_error *err) {
    *out = NULL;
    mr_strategy *s = calloc(1, sizeof *s);
    if (s == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    s->cfg = cfg;
    s->opts = *opts;
    s->L = opts->devices.count;
    s->kind = mr_devices_kind(&opts->devices);
    mr_status st = s->kind != NULL
                       ? make_backends(s, err)
                       : mr_error_set(err, MR_ERR_UNSUPPORTED, "no '%s' devices in this build",
                                      opts->devices.kind);
    /* a device that fails on one process (no GPU, out of memory) fails the
     * job with its message on every process, before the communicator's
     * setup would wait for it */
    if (opts->job != NULL) st = mr_job_agree(opts->job, st, err);
    if (st == MR_OK) st = make_comm(s, err);
    if (st == MR_OK) {
        s->R = s->comm->world_size;
        s->offset = s->comm->world_offset;
        st = mr_plan_make(cfg, s->R, s->L, opts->job ? opts->job->size : 1, n_train, &s->plan, err);
    }
    if (st == MR_OK) {
        strategy_plan_pinning(s);
        /* make_replicas enters each replica's device on this thread (a CPU
         * replica's flush-to-zero): the caller's floating-point environment
         * is its own again after it, as after a task (replicas.c) */
        fenv_t caller_env;
        fegetenv(&caller_env);
        st = make_replicas(s, cfg, err);
        fesetenv(&caller_env);
    }
    if (st == MR_OK) st = make_buckets(s, err);
    /* every process has its replicas (or none has) before the broadcast */
    if (opts->job != NULL && s->comm != NULL) st = mr_job_agree(opts->job, st, err);
    if (st == MR_OK) st = strategy_run_replicas(s, task_broadcast_init, err);
    if (st != MR_OK) {
        mr_strategy_destroy(s);
        return st;
    }
    *out = s;
    return MR_OK;
}

void mr_strategy_destroy(mr_strategy *s) {
    if (s == NULL) return;
    /* models, then the communicator (NCCL uses the contexts' streams), then
     * the contexts */
    for (int r = 0; s->reps && r < s->L; r++) {
        fit_graphs_free(&s->reps[r]);
        mr_model_free(&s->reps[r].model);
        free(s->reps[r].rows);
        mr_backend_free_host(s->reps[r].be, s->reps[r].sync_host);
        free(s->reps[r].best);
        mr_backend_free(s->reps[r].be, s->reps[r].sync_dev);
        free(s->reps[r].labels);
        free(s->reps[r].extra);
    }
    if (s->comm) mr_comm_destroy(s->comm);
    for (int r = 0; s->reps && r < s->L; r++)
        mr_backend_destroy(s->reps[r].be);
    free(s->reps);
    free(s->buckets);
    free(s->perm);
    free(s->val_confusion);
    free(s->state.history);
    free(s);
}

const mr_fit_plan *mr_strategy_plan(const mr_strategy *s) {
    return &s->plan;
}

mr_model *mr_strategy_replica(mr_strategy *s, int r) {
    return &s->reps[r].model;
}

int mr_strategy_replica_cpu(const mr_strategy *s, int r) {
    return s->reps[r].cpu;
}

const mr_comm *mr_strategy_comm(const mr_strategy *s) {
    return s->comm;
}

static mr_status task_sync_model(replica *rep) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    MR_CHECK(mr_comm_broadcast(s->comm, rep->r, m->params, (size_t)m->n_params, 0, &rep->err));
    if (m->n_state)
        MR_CHECK(mr_comm_broadcast(s->comm, rep->r, m->state, (size_t)m->n_state, 0, &rep->err));
    for (int k = 0; k < 2; k++)
        if (m->slots[k])
            MR_CHECK(
                mr_comm_broadcast(s->comm, rep->r, m->slots[k], (size_t)m->n_params, 0, &rep->err));
    return MR_OK;
}

mr_status mr_strategy_sync_model(mr_strategy *s, mr_error *err) {
    return strategy_run_replicas(s, task_sync_model, err);
}
