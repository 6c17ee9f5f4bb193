/* fit_graph.c: [net] cuda_graphs, the steady update of a GPU replica as a
 * graph (runtime/backend.h's mr_graph_ops): recorded once per input buffer
 * (the model's two, used in turn: each graph reads fixed addresses), then
 * replayed each update. The graph holds the whole update: the gradients'
 * zeroing, the labels' copy, forward, loss, backward, the metric floats in
 * and out, the check for NaN and Inf, and the optimizer's update. Outside
 * it, per update: the next shard's upload and the one host wait. What
 * changes per update reaches the replay through pinned staging: the
 * batch, its labels, the metric floats the host writes, and the step
 * scalars (rate, Adam's step size, the masks' step: mr_step_scalars).
 *
 * An update stays eager (fit_step.c's path) where a graph cannot hold it:
 *   - a last global batch of another size (its shape differs);
 *   - more than one replica over a communicator other than NCCL (NCCL's
 *     calls are recorded into the graph: nccl_comm.c), or with a
 *     [batchnorm] sync = 1 (SyncBN's sums go through the host);
 *   - accumulate > 1 (one micro-batch per graph);
 *   - --trace (per-layer device marks), --check-sync and a test fault at
 *     a step (fault.h: its hook sits between the all-reduce and the update);
 *   - on_nan = skip (the host decides before the update), clipnorm,
 *     global_clipnorm and kernel_l2 (their sums are read by the host
 *     inside the update), a regression (its metric is summed on the host);
 *   - the first update (its lazily made buffers may not be made inside a
 *     capture).
 * The same kernels on the same buffers in the same order: the weights are
 * bitwise those of the eager step. */
#include <stdlib.h>
#include <string.h>

#include "models/layer.h"

#include "runtime/clock.h"
#include "strategies/fit_impl.h"

struct fit_graphs {
    void *graph[2];      /* per input buffer (m->inputs[i]), NULL: not recorded */
    int64_t rows;        /* the global batch the graphs hold */
    const double *gflag; /* the NaN check's pinned flag (mr_model_grads_nonfinite_begin) */
    int warm;            /* an eager full update ran: the buffers exist */
};

void fit_graphs_free(replica *rep) {
    struct fit_graphs *fg = rep->graphs;
    if (fg == NULL) return;
    const mr_graph_ops *go = mr_backend_graphs(rep->be);
    for (int i = 0; i < 2; i++)
        if (fg->graph[i] && go && go->graph_free) go->graph_free(rep->be, fg->graph[i]);
    free(fg);
    rep->graphs = NULL;
}

static int has_l2(const mr_model *m) {
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].cfg->kernel_l2 > 0.0f) return 1;
    return 0;
}

/* Several replicas: NCCL's collectives go into the graph, SyncBN's not. */
static int replicas_allowed(const replica *rep) {
    const mr_model *m = &rep->model;
    if (rep->s->R == 1) return 1;
    if (strcmp(mr_comm_name(rep->s->comm), "nccl") != 0) return 0;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].cfg->sync && m->run.sync_sum != NULL) return 0;
    return 1;
}

/* The settings under which an update may be a graph at all (see top). */
static int graphs_allowed(const replica *rep) {
    const mr_strategy *s = rep->s;
    const mr_model *m = &rep->model;
    const mr_net_cfg *net = &s->cfg->net;
    return net->cuda_graphs && mr_backend_graphs(rep->be) != NULL && !rep->be->host_memory &&
           replicas_allowed(rep) && s->plan.accumulate == 1 && m->trace == NULL &&
           m->dtrace == NULL && s->opts.check_sync == 0 &&
           (s->opts.fault == NULL || s->opts.fault->fail_step == 0) &&
           net->on_nan == MR_ON_NAN_STOP && m->opt.clipnorm <= 0.0f &&
           m->opt.global_clipnorm <= 0.0f && !has_l2(m) && mr_model_queues_sums(m);
}

int fit_graph_usable(const fit_loop *loop, int64_t ga) {
    const replica *rep = loop->rep;
    return ga == rep->s->plan.global_batch && rep->graphs != NULL && rep->graphs->warm &&
           graphs_allowed(rep);
}

void fit_graph_note_eager(fit_loop *loop, int64_t ga) {
    replica *rep = loop->rep;
    if (ga != rep->s->plan.global_batch || !graphs_allowed(rep)) return;
    if (rep->graphs == NULL) rep->graphs = calloc(1, sizeof *rep->graphs);
    if (rep->graphs != NULL) rep->graphs->warm = 1; /* else: eager steps, as before */
}

/* The metric floats the host writes before the graph's copy reads them
 * (fit_step.c's step_allreduce: the device adds the loss sums over them). */
static void metric_floats(fit_loop *loop, float *sums) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    const mr_fit_callbacks *cb = s->cb;
    for (size_t i = 0; i < METRIC_EXTRA(s->R); i++)
        sums[i] = 0.0f;
    sums[METRIC_STOP] = cb && cb->stop && atomic_load(cb->stop) ? 1.0f : 0.0f;
    sums[METRIC_FLOATS + rep->g] = (float)loop->e_compute;
}

/* The gradients and metric floats all-reduced in the eager step's pieces
 * (the buckets, then the rest: the same calls), recorded. */
static mr_status record_allreduce(replica *rep) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    const int64_t end = m->n_params + (int64_t)METRIC_EXTRA(s->R);
    int64_t done = 0;
    for (int b = 0; b < s->n_buckets; done = s->buckets[b++])
        MR_CHECK(mr_comm_allreduce_start(s->comm, rep->r, mr_dfloat_at(m->grads, done),
                                         (size_t)(s->buckets[b] - done), &rep->err));
    MR_CHECK(mr_comm_allreduce_start(s->comm, rep->r, mr_dfloat_at(m->grads, done),
                                     (size_t)(end - done), &rep->err));
    return mr_comm_wait_all(s->comm, rep->r, &rep->err);
}

/* BN moving statistics: the mean over the replicas (fit_step.c's
 * average_bn_state), recorded. */
static mr_status record_bn_mean(replica *rep) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    if (m->n_state == 0 || s->R == 1) return MR_OK;
    MR_CHECK(mr_comm_allreduce_sum(s->comm, rep->r, m->state, (size_t)m->n_state, &rep->err));
    return mr_backend_scale(rep->be, m->state, (size_t)m->n_state, 1.0f / (float)s->R, &rep->err);
}

/* This replica's shard of a global batch of ga rows (accumulate 1): as
 * fit_step.c's shard_range. */
static void shard_of(const replica *rep, int64_t ga, int64_t *start, int64_t *cnt) {
    const int R = rep->s->R, g = rep->g;
    const int64_t base = ga / R, rem = ga % R;
    *start = g * base + (g < rem ? g : rem);
    *cnt = base + (g < rem);
}

/* The update's device work, queued while the stream records (ga rows
 * over the replicas: this one's shard). */
static mr_status record(fit_loop *loop, int64_t ga, float lr, const double **gflag) {
    replica *rep = loop->rep;
    mr_model *m = &rep->model;
    const int R = rep->s->R;
    const size_t n_extra = METRIC_EXTRA(R);
    int64_t start, cnt;
    shard_of(rep, ga, &start, &cnt);
    MR_CHECK(mr_model_zero_grads(m, &rep->err));
    m->run.seed = rep->s->opts.seed;
    m->run.step = loop->global_step;
    m->run.sample_base = start;
    MR_CHECK(mr_model_train_batch(m, rep->labels, (int)cnt, (float)ga, NULL, NULL, NULL, NULL,
                                  &rep->err));
    MR_CHECK(mr_model_write_extra(m, rep->extra, n_extra, &rep->err));
    MR_CHECK(mr_model_take_sums(m, &rep->err));
    if (R > 1) MR_CHECK(record_allreduce(rep));
    MR_CHECK(mr_model_grads_nonfinite_begin(m, gflag, &rep->err));
    /* the metric floats back into the staging they came from, after the
     * update's inputs are final: read by the host after its wait */
    const mr_graph_ops *go = mr_backend_graphs(rep->be);
    MR_CHECK(go->queue_to_host(rep->be, m->host, mr_dfloat_at(m->grads, m->n_params),
                               sizeof(float) * n_extra, &rep->err));
    MR_CHECK(mr_model_apply_update(m, lr, loop->global_step + 1, NULL, &rep->err));
    return record_bn_mean(rep);
}

/* Records the update's graph for input buffer i (and launches nothing). */
static mr_status capture(fit_loop *loop, int64_t ga, float lr, const mr_step_scalars *sc, int i) {
    replica *rep = loop->rep;
    struct fit_graphs *fg = rep->graphs;
    const mr_graph_ops *go = mr_backend_graphs(rep->be);
    if (fg->graph[i] != NULL) go->graph_free(rep->be, fg->graph[i]);
    fg->graph[i] = NULL;
    MR_CHECK(go->capture_begin(rep->be, sc, &rep->err));
    mr_status st = record(loop, ga, lr, &fg->gflag);
    mr_error end_err = {0};
    mr_status st_end = go->capture_end(rep->be, &fg->graph[i], &end_err);
    if (st != MR_OK) return st;
    if (st_end != MR_OK) rep->err = end_err;
    fg->rows = ga;
    return st_end;
}

mr_status fit_graph_run(fit_loop *loop, int64_t ga, float lr,
                        mr_status (*prefetch)(fit_loop *loop, int k), fit_graph_result *out) {
    replica *rep = loop->rep;
    mr_model *m = &rep->model;
    struct fit_graphs *fg = rep->graphs;
    const mr_graph_ops *go = mr_backend_graphs(rep->be);
    const size_t n_extra = METRIC_EXTRA(rep->s->R);
    const int i = m->input == m->inputs[1]; /* the buffer this batch is in */
    const mr_step_rates r = mr_optimizer_rates(&m->opt, lr, loop->global_step + 1);
    const mr_step_scalars sc = {.lr = r.lr, .alpha = r.alpha, .step = loop->global_step};
    const double t0 = mr_now_s();
    metric_floats(loop, rep->extra);
    if (fg->graph[i] == NULL || fg->rows != ga || !go->graph_current(rep->be, fg->graph[i])) {
        MR_CHECK(capture(loop, ga, lr, &sc, i));
    } else {
        int64_t start, cnt;
        shard_of(rep, ga, &start, &cnt);
        MR_CHECK(
            go->stage(rep->be, &sc, rep->labels, (int)cnt * mr_model_label_width(m), &rep->err));
        memcpy(mr_model_host_for(m, mr_dfloat_at(m->grads, m->n_params)), rep->extra,
               sizeof(float) * n_extra);
    }
    MR_CHECK(go->launch(rep->be, fg->graph[i], &rep->err));
    const double t1 = mr_now_s();
    MR_CHECK(prefetch(loop, 0));
    const double t2 = mr_now_s();
    MR_CHECK(go->wait(rep->be, "the update's graph", &rep->err));
    /* the communicator's verdict on the collectives the replay ran: an
     * abort (a peer failed) ends them early, with no sum in the buffers */
    if (rep->s->R > 1) MR_CHECK(mr_comm_wait_all(rep->s->comm, rep->r, &rep->err));
    memcpy(rep->extra, m->host, sizeof(float) * n_extra);
    out->metrics = rep->extra;
    out->grads_bad = fg->gflag != NULL && *fg->gflag != 0.0;
    out->t_data = t2 - t1;
    out->t_compute = mr_now_s() - t0 - out->t_data;
    return MR_OK;
}
