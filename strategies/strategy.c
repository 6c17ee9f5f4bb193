/* strategy.c: replicas as threads, the training step, sharded evaluation.
 * Every meeting of the replicas, in this process or across the job's
 * processes, goes through the communicator (collectives/). Each replica
 * computes on its own backend context (its device); the strategy never
 * reads a replica's device memory itself: the batch goes in through the
 * model's host staging, the metrics and the --check-sync hashes come out
 * through copies, and the BN state is averaged by the backend. */
#include "strategies/strategy.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/local.h"
#include "runtime/hash.h"
#include "runtime/rng.h"
#include "runtime/clock.h"

/* Floats that ride behind the gradients in the all-reduce: the global
 * batch's loss sum and correct count. The count is at most G, which
 * make_plan keeps at or below 2^24, so it stays an exact integer in a
 * float; the epoch's totals add up in doubles on replica 0. */
#define METRIC_FLOATS       2
#define MAX_EXACT_FLOAT_INT (1 << 24)

typedef struct replica {
    mr_strategy *s;
    int r;          /* index in this process (the communicator's rank) */
    int g;          /* index in the job */
    mr_backend *be; /* this replica's backend context (its device) */
    mr_model model;
    int64_t *rows;   /* (max_batch) row indices of the current shard */
    int32_t *labels; /* (max_batch) */
    mr_error err;
    /* bucketed all-reduce state for the current update */
    int next_bucket;
    int64_t reduced;
    int reduce_now; /* 1 during the last micro-batch of an update */
    mr_status bucket_status;
    int cpu; /* the core this replica's thread is pinned to, or -1 */
} replica;

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
    /* the job the replica threads run, and its arguments */
    mr_status (*job)(replica *rep);
    const mr_dataset *ds;
    int64_t n_train, val_begin, n_val;
    const mr_augment *aug;
    const mr_fit_callbacks *cb;
    mr_fit_state from;  /* where the fit starts (zero: the beginning) */
    mr_fit_state state; /* where it is, on global replica 0: history of finished epochs */
    int64_t *perm;      /* (n_train) this epoch's order, written by replica 0 */
    int64_t eval_begin, eval_count;
    double eval_loss, eval_acc;
    mr_eval_detail *eval_detail; /* or NULL */
    cpu_set_t cpus;              /* the process's cores at creation */
};

/* ---- running a job on every replica ----------------------------------- */

/* When the replicas fill the cores, replica r runs on the r-th core of the
 * process's affinity mask as it was when the strategy was made (rep->cpu):
 * a replica that migrates leaves its caches behind (measured: about 2.5%
 * of fashion_cnn.cfg's 2-replica throughput on 2 cores). */
static void pin_replica(const replica *rep) {
    if (rep->cpu < 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(rep->cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

static void *thread_main(void *arg) {
    replica *rep = arg;
    pin_replica(rep);
    /* a GPU replica's thread works on its own device */
    mr_status st = mr_backend_enter(rep->be, &rep->err);
    if (st == MR_OK) st = rep->s->job(rep);
    /* a failing replica releases the others from their collectives */
    if (st != MR_OK) mr_comm_abort(rep->s->comm, rep->r);
    return NULL;
}

/* Runs job on this process's replicas: threads for 1..L-1, the caller is
 * replica 0 (the thread that may call MPI). Returns the first real error,
 * not an MR_ERR_ABORTED echo of it. */
static mr_status run_replicas(mr_strategy *s, mr_status (*job)(replica *), mr_error *err) {
    s->job = job;
    pthread_t tid[MR_MAX_REPLICAS];
    int started[MR_MAX_REPLICAS] = {0};
    for (int r = 0; r < s->L; r++)
        mr_error_clear(&s->reps[r].err);
    for (int r = 1; r < s->L; r++) {
        if (pthread_create(&tid[r], NULL, thread_main, &s->reps[r]) != 0) {
            mr_error_set(&s->reps[r].err, MR_ERR_RUNTIME, "cannot start the thread of replica %d",
                         s->reps[r].g);
            mr_comm_abort(s->comm, r);
            continue;
        }
        started[r] = 1;
    }
    thread_main(&s->reps[0]);
    /* the caller was replica 0: give it back the whole mask */
    if (s->reps[0].cpu >= 0) pthread_setaffinity_np(pthread_self(), sizeof s->cpus, &s->cpus);
    for (int r = 1; r < s->L; r++)
        if (started[r]) pthread_join(tid[r], NULL);
    const mr_error *first = NULL;
    for (int r = 0; r < s->L; r++) {
        const mr_error *e = &s->reps[r].err;
        if (e->status == MR_OK) continue;
        if (first == NULL || (first->status == MR_ERR_ABORTED && e->status != MR_ERR_ABORTED))
            first = e;
    }
    if (first == NULL) return MR_OK;
    return mr_error_set(err, first->status, "%s", first->msg);
}

/* ---- creation ----------------------------------------------------------- */

/* mr_run.sync_sum for SyncBatchNormalization: a sum over all the replicas. */
static mr_status replica_sync_sum(void *ctx, mr_dfloat *buf, size_t n) {
    replica *rep = ctx;
    return mr_comm_allreduce_sum(rep->s->comm, rep->r, mr_comm_buf(buf), n, &rep->err);
}

static mr_status job_broadcast_init(replica *rep) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    if (rep->g == 0) MR_CHECK(mr_model_init_weights(m, s->opts.seed, &rep->err));
    MR_CHECK(mr_comm_broadcast(s->comm, rep->r, mr_comm_buf(m->params), (size_t)m->n_params, 0,
                               &rep->err));
    if (m->n_state)
        MR_CHECK(mr_comm_broadcast(s->comm, rep->r, mr_comm_buf(m->state), (size_t)m->n_state, 0,
                                   &rep->err));
    return MR_OK;
}

/* "4 replicas" or "4 replicas on 2 processes" */
static void describe_replicas(const mr_strategy *s, char *buf, size_t n) {
    int P = s->plan.processes;
    snprintf(buf, n, "%d replica%s%s", s->R, s->R > 1 ? "s" : "", P > 1 ? " on " : "");
    if (P > 1) snprintf(buf + strlen(buf), n - strlen(buf), "%d processes", P);
}

static mr_status make_plan(mr_strategy *s, int64_t n_train, mr_error *err) {
    const mr_net_cfg *net = &s->cfg->net;
    mr_fit_plan *p = &s->plan;
    p->replicas = s->R;
    p->local_replicas = s->L;
    p->processes = s->opts.job ? s->opts.job->size : 1;
    p->accumulate = net->accumulate;
    int per_update = s->R * net->accumulate;
    char who[64];
    describe_replicas(s, who, sizeof who);
    const char *acc = net->accumulate > 1 ? " x accumulate micro-batches" : "";
    p->fixed_global = net->global_batch > 0;
    if (p->fixed_global) {
        if (net->global_batch < per_update)
            return mr_error_set(err, MR_ERR_CONFIG,
                                "%s: [net] global_batch=%d is smaller than %s%s: each replica "
                                "needs at least one example",
                                s->cfg->path, net->global_batch, who, acc);
        if (net->global_batch % per_update != 0)
            return mr_error_set(err, MR_ERR_CONFIG,
                                "%s: [net] global_batch=%d does not divide evenly over %s%s",
                                s->cfg->path, net->global_batch, who, acc);
        p->batch = net->global_batch / per_update;
    } else {
        p->batch = net->batch;
    }
    p->global_batch = p->batch * per_update;
    if (n_train > 0 && p->global_batch > n_train)
        return mr_error_set(
            err, MR_ERR_CONFIG,
            "%s: the global batch (%d) is larger than the training set (%lld examples)",
            s->cfg->path, p->global_batch, (long long)n_train);
    if (p->global_batch > MAX_EXACT_FLOAT_INT)
        return mr_error_set(err, MR_ERR_CONFIG, "%s: the global batch (%d) is larger than %d",
                            s->cfg->path, p->global_batch, MAX_EXACT_FLOAT_INT);
    p->base_lr = net->learning_rate;
    /* the learning rate follows the global batch (strategy.h, mr_fit_plan) */
    p->lr_factor = !p->fixed_global && net->lr_scaling == MR_LR_SCALING_LINEAR
                       ? (float)p->global_batch / (float)p->batch
                       : 1.0f;
    p->warmup_epochs = net->warmup_epochs;
    p->schedule = net->lr_schedule;
    p->lr_alpha = net->lr_alpha;
    p->epochs = net->epochs;
    p->steps_per_epoch = n_train > 0 ? (n_train + p->global_batch - 1) / p->global_batch : 0;
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

/* The process's replicas: models, shard buffers, pinning. */
static mr_status make_replicas(mr_strategy *s, const mr_config *cfg, mr_error *err) {
    const mr_strategy_opts *opts = &s->opts;
    /* pin only when the replicas fill the process's cores exactly (the
     * `auto` plan): fewer replicas pinned to the first cores would pile two
     * jobs of a shared machine onto the same cores */
    int pin = s->kind->pin_threads && s->L > 1 &&
              sched_getaffinity(0, sizeof s->cpus, &s->cpus) == 0 && s->L == CPU_COUNT(&s->cpus);
    /* L replicas x BLAS threads <= cores: one replica may use them all */
    int cores = opts->devices.cores > 0 ? opts->devices.cores : mr_cpu_cores();
    for (int r = 0; r < s->L; r++) {
        replica *rep = &s->reps[r];
        rep->s = s;
        rep->r = r;
        rep->g = s->offset + r;
        rep->cpu = -1;
        for (int c = 0, n = 0; pin && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &s->cpus) && n++ == r) {
                rep->cpu = c;
                break;
            }
        /* the math library's threads: OpenBLAS's setting is the process's,
         * the same for every replica, set before any model is built */
        if (r == 0) mr_backend_set_threads(rep->be, s->L == 1 ? cores : 1);
        /* this thread builds every replica's model: on each one's device */
        MR_CHECK(mr_backend_enter(rep->be, err));
        MR_CHECK(mr_model_init(&rep->model, rep->be, cfg, s->plan.batch, METRIC_FLOATS, err));
        if (s->R > 1) {
            rep->model.run.sync_sum = replica_sync_sum;
            rep->model.run.sync_ctx = rep;
        }
        rep->rows = malloc(sizeof(int64_t) * (size_t)s->plan.batch);
        rep->labels = malloc(sizeof(int32_t) * (size_t)s->plan.batch);
        if (!rep->rows || !rep->labels) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    /* bucket boundaries at layer ends, every >= bucket_floats */
    mr_model *m0 = &s->reps[0].model;
    s->buckets = malloc(sizeof(int64_t) * (size_t)(m0->n_layers + 1));
    if (s->buckets == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    int64_t last = 0;
    if (opts->bucket_floats > 0)
        for (int i = m0->n_layers - 1; i >= 1; i--) {
            int64_t ready = m0->param_offset[i - 1];
            if (ready - last >= (int64_t)opts->bucket_floats) {
                s->buckets[s->n_buckets++] = ready;
                last = ready;
            }
        }
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
        st = make_plan(s, n_train, err);
    }
    if (st == MR_OK) st = make_replicas(s, cfg, err);
    /* every process has its replicas (or none has) before the broadcast */
    if (opts->job != NULL && s->comm != NULL) st = mr_job_agree(opts->job, st, err);
    if (st == MR_OK) st = run_replicas(s, job_broadcast_init, err);
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
        mr_model_free(&s->reps[r].model);
        free(s->reps[r].rows);
        free(s->reps[r].labels);
    }
    if (s->comm) mr_comm_destroy(s->comm);
    for (int r = 0; s->reps && r < s->L; r++)
        mr_backend_destroy(s->reps[r].be);
    free(s->reps);
    free(s->buckets);
    free(s->perm);
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

float mr_plan_learning_rate(const mr_fit_plan *p, double progress) {
    float target = p->base_lr * p->lr_factor;
    if (p->warmup_epochs > 0.0f && progress < p->warmup_epochs)
        return p->base_lr + (target - p->base_lr) * (float)(progress / p->warmup_epochs);
    if (p->schedule != MR_LR_SCHEDULE_COSINE) return target;
    double span = (double)p->epochs - p->warmup_epochs;
    double t = span > 0.0 ? (progress - p->warmup_epochs) / span : 1.0;
    if (t > 1.0) t = 1.0;
    double cosine = 0.5 * (1.0 + cos(M_PI * t));
    return (float)(target * ((1.0 - p->lr_alpha) * cosine + p->lr_alpha));
}

/* ---- the training step -------------------------------------------------- */

/* Shard s of `total` rows split over `parts`: as even as possible, in order.
 * For a full global batch every shard is exactly B rows at s*B. */
static void shard_range(int64_t total, int parts, int s, int64_t *start, int64_t *count) {
    int64_t base = total / parts, rem = total % parts;
    *start = s * base + (s < rem ? s : rem);
    *count = base + (s < rem);
}

/* After a layer's backward: start reducing every bucket that is now final
 * (in the background where the communicator can), and let MPI move the
 * buckets already in flight. */
static void bucket_ready(void *ctx, int64_t ready) {
    replica *rep = ctx;
    mr_strategy *s = rep->s;
    if (!rep->reduce_now || rep->bucket_status != MR_OK) return;
    while (rep->next_bucket < s->n_buckets && s->buckets[rep->next_bucket] <= ready) {
        int64_t end = s->buckets[rep->next_bucket++];
        rep->bucket_status = mr_comm_allreduce_start(
            s->comm, rep->r, mr_comm_buf(mr_dfloat_at(rep->model.grads, rep->reduced)),
            (size_t)(end - rep->reduced), &rep->err);
        rep->reduced = end;
        if (rep->bucket_status != MR_OK) return;
    }
    if (rep->next_bucket > 0) rep->bucket_status = mr_comm_progress(s->comm, rep->r, &rep->err);
}

/* --check-sync: every replica hashes each of its weights (parameters and
 * state, read through the model: in place on the CPU, copied from a GPU);
 * the hashes travel through the communicator, 16 bits per float in a row
 * of zeros per replica (a sum of zeros and one integer below 2^16 is
 * exact), so replicas of other processes are compared without reading
 * their memory. The rows go through device memory, as a communicator for
 * the replicas' device takes it. Every replica reaches the same verdict:
 * global replica 0 reports the first replica and weight that differ, the
 * others stop with MR_ERR_ABORTED (an echo: they print nothing). */
static mr_status check_sync(replica *rep, int64_t step) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    int nw = 0;
    for (int i = 0; i < m->n_layers; i++)
        nw += m->layers[i].n_weights;
    const size_t row = (size_t)nw * 4, n = (size_t)s->R * row;
    float *all = calloc(n, sizeof(float));
    mr_dfloat *dall = mr_backend_alloc_floats(rep->be, n);
    if (all == NULL || dall == NULL) {
        free(all);
        mr_backend_free(rep->be, dall);
        return mr_error_set(&rep->err, MR_ERR_NOMEM, "out of memory");
    }
    float *mine = all + (size_t)rep->g * row;
    mr_status st = MR_OK;
    for (int i = 0, k = 0; st == MR_OK && i < m->n_layers; i++)
        for (int w = 0; st == MR_OK && w < m->layers[i].n_weights; w++, k++) {
            const mr_weight *wt = &m->layers[i].w[w];
            const float *data;
            st = mr_model_read(m, wt->data, (size_t)wt->size, &data, &rep->err);
            if (st != MR_OK) break;
            uint64_t h = mr_fnv1a(data, sizeof(float) * (size_t)wt->size, MR_FNV1A_INIT);
            for (int d = 0; d < 4; d++)
                mine[k * 4 + d] = (float)((h >> (16 * d)) & 0xFFFF);
        }
    if (st == MR_OK) st = mr_backend_to_device(rep->be, dall, all, sizeof(float) * n, &rep->err);
    if (st == MR_OK) st = mr_comm_allreduce_sum(s->comm, rep->r, mr_comm_buf(dall), n, &rep->err);
    if (st == MR_OK) st = mr_backend_to_host(rep->be, all, dall, sizeof(float) * n, &rep->err);
    for (int q = 1; st == MR_OK && q < s->R; q++) {
        const float *other = all + (size_t)q * row;
        if (memcmp(other, all, sizeof(float) * row) == 0) continue;
        if (rep->g != 0) {
            st = mr_error_set(&rep->err, MR_ERR_ABORTED,
                              "replica %d: stopped by --check-sync (replica 0 reports)", rep->g);
            break;
        }
        for (int i = 0, k = 0; i < m->n_layers; i++)
            for (int w = 0; w < m->layers[i].n_weights; w++, k++)
                if (st == MR_OK && memcmp(other + k * 4, all + k * 4, sizeof(float) * 4) != 0)
                    st =
                        mr_error_set(&rep->err, MR_ERR_RUNTIME,
                                     "--check-sync: after step %lld replica %d differs from "
                                     "replica 0 in layer %s (%s)",
                                     (long long)step, q, m->layers[i].name, m->layers[i].w[w].name);
    }
    free(all);
    mr_backend_free(rep->be, dall);
    return st;
}

/* Loss and correct sums over this replica's shards of [begin, begin+count),
 * then one all-reduce of the two sums as doubles (and, with `detail`, of
 * the confusion matrix: counts as doubles stay exact). */
static mr_status evaluate_replica(replica *rep, const mr_dataset *ds, int64_t begin, int64_t count,
                                  double *loss, double *acc, mr_eval_detail *detail) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    int B = m->max_batch;
    const int k = detail ? detail->classes : 0;
    double loss_sum = 0.0;
    int64_t correct = 0;
    int64_t chunks = (count + B - 1) / B;
    size_t nsum = 2 + (size_t)k * (size_t)k;
    double *sums = calloc(nsum, sizeof(double));
    int32_t *pred = detail ? malloc(sizeof(int32_t) * (size_t)B) : NULL;
    float *probs =
        detail && detail->on_probs ? malloc(sizeof(float) * (size_t)B * (size_t)k) : NULL;
    if (sums == NULL || (detail && pred == NULL) || (detail && detail->on_probs && !probs)) {
        free(sums), free(pred), free(probs);
        return mr_error_set(&rep->err, MR_ERR_NOMEM, "out of memory for the evaluation");
    }
    for (int64_t c = rep->g; c < chunks; c += s->R) {
        int64_t start = begin + c * B;
        int n = (int)(start + B <= begin + count ? B : begin + count - start);
        for (int i = 0; i < n; i++)
            rep->rows[i] = start + i;
        mr_dataset_fill(ds, rep->rows, n, NULL, mr_model_input_host(m), rep->labels);
        mr_status st = mr_model_input_upload(m, n, &rep->err);
        if (st == MR_OK)
            st = mr_model_eval_batch(m, rep->labels, n, &loss_sum, &correct, &rep->err);
        if (st == MR_OK && detail != NULL) st = mr_model_predictions(m, n, pred, probs, &rep->err);
        if (st != MR_OK) {
            free(sums), free(pred), free(probs);
            return st;
        }
        if (detail == NULL) continue;
        for (int i = 0; i < n; i++)
            sums[2 + (size_t)rep->labels[i] * (size_t)k + (size_t)pred[i]] += 1.0;
        if (probs) detail->on_probs(detail->user, start - begin, n, probs);
    }
    sums[0] = loss_sum, sums[1] = (double)correct;
    mr_status st = mr_comm_allreduce_sum_f64(s->comm, rep->r, sums, nsum, &rep->err);
    if (st == MR_OK) {
        *loss = count ? sums[0] / (double)count : 0.0;
        *acc = count ? sums[1] / (double)count : 0.0;
        if (detail && rep->r == 0) memcpy(detail->confusion, sums + 2, sizeof(double) * (nsum - 2));
    }
    free(sums), free(pred), free(probs);
    return st;
}

/* Global replica 0 hands its model and the state to the checkpoint writer. */
static mr_status save_checkpoint(replica *rep, float lr) {
    mr_strategy *s = rep->s;
    if (rep->g != 0 || s->cb == NULL || s->cb->save == NULL) return MR_OK;
    return s->cb->save(s->cb->save_user, &s->state, &rep->model, lr, &rep->err);
}

/* Loads shard k of the global batch of `ga` rows at perm[gbegin..] into
 * the model's input (and rep->labels): the loader writes into the input
 * in place where the device's memory is host memory (the CPU: no copy),
 * else into pinned staging that the upload queues for the device. */
static mr_status load_shard(replica *rep, const mr_augment *augp, int64_t gbegin, int64_t ga,
                            int k) {
    mr_strategy *s = rep->s;
    int64_t start, cnt;
    shard_range(ga, s->plan.accumulate * s->R, k * s->R + rep->g, &start, &cnt);
    mr_dataset_fill(s->ds, s->perm + gbegin + start, (int)cnt, augp,
                    mr_model_input_host(&rep->model), rep->labels);
    return mr_model_input_upload(&rep->model, (int)cnt, &rep->err);
}

static mr_status job_fit(replica *rep) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    const mr_fit_plan *p = &s->plan;
    const mr_fit_callbacks *cb = s->cb;
    const int R = s->R, K = p->accumulate, G = p->global_batch;
    const int64_t n = s->n_train, steps = p->steps_per_epoch;
    const int64_t np = m->n_params;
    const int shuffle = s->cfg->net.shuffle;
    const mr_fit_state *from = &s->from;
    mr_fit_state *state = &s->state; /* kept up to date by global replica 0 */
    int64_t global_step = from->global_step;
    for (int epoch = from->epoch; epoch < s->plan.epochs; epoch++) {
        /* every process computes the same permutation */
        if (rep->r == 0) {
            if (shuffle)
                mr_rng_permutation(s->opts.seed, epoch, s->perm, n);
            else
                for (int64_t i = 0; i < n; i++)
                    s->perm[i] = i;
        }
        /* everyone sees the permutation before using it */
        MR_CHECK(mr_comm_barrier(s->comm, rep->r, &rep->err));
        mr_augment aug;
        const mr_augment *augp = NULL;
        if (s->aug != NULL) {
            aug = *s->aug;
            aug.epoch = epoch;
            augp = &aug;
        }
        /* a resumed epoch goes on from where the checkpoint left it */
        const int resumed = epoch == from->epoch;
        double t0 = mr_now_s(), epoch_loss = resumed ? from->epoch_loss : 0.0;
        double epoch_correct = resumed ? from->epoch_correct : 0.0;
        double seconds_before = resumed ? from->epoch_seconds : 0.0;
        int64_t seen = resumed ? from->seen : 0;
        float lr = 0.0f;
        int64_t g = resumed ? from->step : 0, gbegin = resumed ? from->position : 0;
        int loaded = 0; /* 1: the next shard is in the model's input already */
        for (; gbegin < n; g++, gbegin += G) {
            double ts = mr_now_s(), t_data = 0.0, t_compute = 0.0;
            int64_t ga = n - gbegin < G ? n - gbegin : G; /* real size of this global batch */
            MR_CHECK(mr_model_zero_grads(m, &rep->err));
            rep->next_bucket = 0;
            rep->reduced = 0;
            rep->bucket_status = MR_OK;
            double loss_sum = 0.0;
            int64_t correct = 0;
            for (int k = 0; k < K; k++) {
                int64_t start, cnt;
                shard_range(ga, K * R, k * R + rep->g, &start, &cnt);
                rep->reduce_now = k == K - 1;
                /* an empty shard (a last batch smaller than R x K) still runs the
                 * layers on zero rows: SyncBN's collectives need every replica */
                double t1 = mr_now_s();
                if (!loaded) MR_CHECK(load_shard(rep, augp, gbegin, ga, k));
                loaded = 0;
                double t2 = mr_now_s();
                m->run.seed = s->opts.seed;
                m->run.step = global_step;
                m->run.sample_base = start;
                mr_status st =
                    mr_model_train_batch(m, rep->labels, (int)cnt, (float)ga, &loss_sum, &correct,
                                         s->n_buckets ? bucket_ready : NULL, rep, &rep->err);
                double t3 = mr_now_s();
                /* A GPU computes what train_batch queued while the host loads
                 * the next shard of this epoch (the CPU has computed it all,
                 * and keeps its order: load, compute). The upload waits for
                 * nothing on the device (model.h). */
                if (st == MR_OK && !rep->be->host_memory) {
                    const int last = k == K - 1;
                    const int64_t nb = last ? gbegin + G : gbegin;
                    if (nb < n) {
                        MR_CHECK(
                            load_shard(rep, augp, nb, n - nb < G ? n - nb : G, last ? 0 : k + 1));
                        loaded = 1;
                    }
                }
                t_data += t2 - t1 + mr_now_s() - t3, t_compute += t3 - t2;
                if (st != MR_OK)
                    return mr_error_set(&rep->err, st,
                                        "replica %d: its device or a collective inside the model "
                                        "failed",
                                        rep->g);
                if (rep->bucket_status != MR_OK) return rep->bucket_status;
            }
            /* buckets this replica did not reach (its last shard was empty) */
            double tc = mr_now_s();
            rep->reduce_now = 1;
            bucket_ready(rep, np);
            if (rep->bucket_status != MR_OK) return rep->bucket_status;
            const float sums[METRIC_FLOATS] = {(float)loss_sum, (float)correct};
            MR_CHECK(mr_model_write_extra(m, sums, METRIC_FLOATS, &rep->err));
            MR_CHECK(mr_comm_allreduce_start(
                s->comm, rep->r, mr_comm_buf(mr_dfloat_at(m->grads, rep->reduced)),
                (size_t)(np + METRIC_FLOATS - rep->reduced), &rep->err));
            MR_CHECK(mr_comm_wait_all(s->comm, rep->r, &rep->err));
            double t_comm = mr_now_s() - tc;
            /* fault injection (tests): fail or stall after the all-reduce */
            MR_CHECK(mr_fault_step(s->opts.fault, rep->r, rep->g, global_step + 1,
                                   s->comm->timeout_s, &rep->err));
            lr = mr_plan_learning_rate(p, epoch + (double)g / (double)steps);
            MR_CHECK(mr_model_apply_update(m, lr, global_step + 1, &rep->err));
            if (m->n_state && R > 1) {
                /* BN moving statistics: the mean over all replicas, same bits everywhere */
                MR_CHECK(mr_comm_allreduce_sum(s->comm, rep->r, mr_comm_buf(m->state),
                                               (size_t)m->n_state, &rep->err));
                MR_CHECK(mr_backend_scale(rep->be, m->state, (size_t)m->n_state, 1.0f / (float)R,
                                          &rep->err));
            }
            global_step++;
            if (rep->g == 0) {
                /* the global batch's sums, reduced with the gradients */
                float metrics[METRIC_FLOATS];
                MR_CHECK(mr_model_read_extra(m, metrics, METRIC_FLOATS, &rep->err));
                epoch_loss += metrics[0];
                epoch_correct += metrics[1];
                seen += ga;
                *state = (mr_fit_state){.epoch = epoch,
                                        .step = g + 1,
                                        .position = gbegin + ga,
                                        .global_step = global_step,
                                        .epoch_loss = epoch_loss,
                                        .epoch_correct = epoch_correct,
                                        .seen = seen,
                                        .epoch_seconds = seconds_before + mr_now_s() - t0,
                                        .n_history = state->n_history,
                                        .history = state->history};
                if (cb && cb->on_step) {
                    mr_step_info info = {.epoch = epoch,
                                         .step = g + 1,
                                         .steps = steps,
                                         .global_step = global_step,
                                         .loss = epoch_loss / (double)seen,
                                         .accuracy = epoch_correct / (double)seen,
                                         .step_loss = (double)metrics[0] / (double)ga,
                                         .lr = lr,
                                         .seconds = mr_now_s() - ts,
                                         .data_seconds = t_data,
                                         .compute_seconds = t_compute,
                                         .comm_seconds = t_comm};
                    cb->on_step(cb->user, &info);
                }
            }
            if (s->opts.check_sync > 0 && global_step % s->opts.check_sync == 0) {
                /* fault injection (tests): make the last replica diverge */
                MR_CHECK(mr_fault_perturb(s->opts.fault, m, rep->g, R, global_step, &rep->err));
                MR_CHECK(check_sync(rep, global_step));
            }
            if (cb && cb->every_steps > 0 && global_step % cb->every_steps == 0 && gbegin + ga < n)
                MR_CHECK(save_checkpoint(rep, lr));
        }
        double t1 = mr_now_s();
        mr_epoch_logs logs = {.epoch = epoch};
        if (s->n_val > 0) {
            MR_CHECK(evaluate_replica(rep, s->ds, s->val_begin, s->n_val, &logs.val_loss,
                                      &logs.val_accuracy, NULL));
            logs.has_val = 1;
        }
        if (rep->g == 0) {
            logs.loss = seen ? epoch_loss / (double)seen : 0.0;
            logs.accuracy = seen ? epoch_correct / (double)seen : 0.0;
            logs.train_seconds = seconds_before + t1 - t0;
            logs.samples_per_sec = (double)n / logs.train_seconds;
            logs.lr = lr;
            state->history[state->n_history++] = logs;
            *state = (mr_fit_state){.epoch = epoch + 1,
                                    .global_step = global_step,
                                    .n_history = state->n_history,
                                    .history = state->history};
            if (cb && cb->on_epoch_end) cb->on_epoch_end(cb->user, &logs);
        }
        int every = cb ? cb->every_epochs : 0;
        if ((every > 0 && (epoch + 1) % every == 0) ||
            (cb && cb->every_steps > 0 && global_step % cb->every_steps == 0))
            MR_CHECK(save_checkpoint(rep, lr));
    }
    return MR_OK;
}

mr_status mr_strategy_fit(mr_strategy *s, const mr_dataset *train, int64_t n_train,
                          int64_t val_begin, int64_t n_val, int epochs, const mr_augment *aug,
                          const mr_fit_state *from, const mr_fit_callbacks *cb, mr_error *err) {
    if (n_train < 1) return mr_error_set(err, MR_ERR_DATA, "no training examples");
    MR_CHECK(make_plan(s, n_train, err));
    free(s->perm);
    s->perm = malloc(sizeof(int64_t) * (size_t)n_train);
    mr_epoch_logs *history = calloc((size_t)(epochs > 0 ? epochs : 1), sizeof *history);
    if (s->perm == NULL || history == NULL) {
        free(history);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory for the permutation");
    }
    s->from = from ? *from : (mr_fit_state){0};
    if (s->from.position > n_train) s->from.position = n_train;
    free(s->state.history);
    s->state = (mr_fit_state){
        .epoch = s->from.epoch, .global_step = s->from.global_step, .history = history};
    for (int e = 0; from && e < from->n_history && e < epochs; e++)
        history[s->state.n_history++] = from->history[e];
    s->ds = train;
    s->n_train = n_train;
    s->val_begin = val_begin;
    s->n_val = n_val;
    s->plan.epochs = epochs;
    s->aug = aug;
    s->cb = cb;
    return run_replicas(s, job_fit, err);
}

const mr_fit_state *mr_strategy_state(const mr_strategy *s) {
    return &s->state;
}

static mr_status job_sync_model(replica *rep) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    MR_CHECK(mr_comm_broadcast(s->comm, rep->r, mr_comm_buf(m->params), (size_t)m->n_params, 0,
                               &rep->err));
    if (m->n_state)
        MR_CHECK(mr_comm_broadcast(s->comm, rep->r, mr_comm_buf(m->state), (size_t)m->n_state, 0,
                                   &rep->err));
    for (int k = 0; k < 2; k++)
        if (m->slots[k])
            MR_CHECK(mr_comm_broadcast(s->comm, rep->r, mr_comm_buf(m->slots[k]),
                                       (size_t)m->n_params, 0, &rep->err));
    return MR_OK;
}

mr_status mr_strategy_sync_model(mr_strategy *s, mr_error *err) {
    return run_replicas(s, job_sync_model, err);
}

static mr_status job_evaluate(replica *rep) {
    mr_strategy *s = rep->s;
    double loss, acc;
    MR_CHECK(
        evaluate_replica(rep, s->ds, s->eval_begin, s->eval_count, &loss, &acc, s->eval_detail));
    if (rep->r == 0) s->eval_loss = loss, s->eval_acc = acc;
    return MR_OK;
}

mr_status mr_strategy_evaluate(mr_strategy *s, const mr_dataset *ds, int64_t begin, int64_t count,
                               double *loss, double *accuracy, mr_error *err) {
    return mr_strategy_evaluate_detail(s, ds, begin, count, loss, accuracy, NULL, err);
}

mr_status mr_strategy_evaluate_detail(mr_strategy *s, const mr_dataset *ds, int64_t begin,
                                      int64_t count, double *loss, double *accuracy,
                                      mr_eval_detail *detail, mr_error *err) {
    s->ds = ds;
    s->eval_begin = begin;
    s->eval_count = count;
    s->eval_detail = detail;
    MR_CHECK(run_replicas(s, job_evaluate, err));
    *loss = s->eval_loss;
    *accuracy = s->eval_acc;
    return MR_OK;
}
