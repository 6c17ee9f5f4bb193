/* fit_step.c: one update of the fit (fit_step), on every replica: the
 * global batch's shards loaded and run forward and backward (accumulate
 * micro-batches), the gradients all-reduced in buckets during backward
 * with the metric floats riding behind them (strategy_impl.h, METRIC_*),
 * the check for NaN and Inf (on_nan), the update at the plan's rate, the
 * BN statistics' mean; then the step's progress (on_step), --check-sync,
 * a stop request and the every_steps checkpoint. Relies on the test hooks
 * of fault.h, one call at each hook point. */
#include <math.h>
#include <stdio.h>

#include "runtime/clock.h"
#include "runtime/device_trace.h"
#include "strategies/fit_impl.h"

/* One update's figures, as fit_step's stages fill them in. */
typedef struct fit_update {
    int64_t ga;           /* rows of this global batch (G, fewer for an epoch's last) */
    double ts;            /* its start */
    double t_data;        /* seconds converting this replica's rows */
    double t_compute;     /* forward and backward */
    double t_comm;        /* the all-reduces after backward */
    double loss_sum;      /* this replica's sum of its examples' losses */
    double correct;       /* and its metric's numerator (mr_model_train_batch) */
    const float *metrics; /* (METRIC_EXTRA(R)) the reduced floats, the same on every replica */
    double penalty;       /* kernel_l2's at the weights the forward ran with (0: none) */
    int skip;             /* 1: on_nan = skip dropped the update */
} fit_update;

/* A GPU keeps the step's loss sum and correct count on the device (in the
 * host's order, to the same bits): nothing waits between forward and
 * backward, and they reach the metric floats there (mr_model_take_sums).
 * A regression's mae numerator has no device sum: the host's, as the CPU. */
static int sums_on_device(const replica *rep) {
    return mr_model_queues_sums(&rep->model);
}

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
        const double t0 = mr_trace_now(rep->model.trace);
        rep->bucket_status =
            mr_comm_allreduce_start(s->comm, rep->r, mr_dfloat_at(rep->model.grads, rep->reduced),
                                    (size_t)(end - rep->reduced), &rep->err);
        if (rep->model.trace) /* the start: the sum goes on behind backward */
            mr_trace_record(rep->model.trace, "allreduce", "bucket", t0, mr_now_s(),
                            (int64_t)sizeof(float) * (end - rep->reduced));
        rep->reduced = end;
        if (rep->bucket_status != MR_OK) return;
    }
    if (rep->next_bucket > 0) rep->bucket_status = mr_comm_progress(s->comm, rep->r, &rep->err);
}

/* Loads shard k of the global batch of `ga` rows at perm[gbegin..] into
 * the model's input (and rep->labels): the loader writes into the input
 * in place where the device's memory is host memory (the CPU: no copy),
 * else into pinned staging that the upload queues for the device. A
 * synthetic set (--synthetic) without standardisation or augmentation is
 * made on such a device from the example ids (mr_model_input_synthetic),
 * the same floats: only the ids travel. */
static mr_status load_shard(replica *rep, const mr_augment *augp, int64_t gbegin, int64_t ga,
                            int k) {
    mr_strategy *s = rep->s;
    const mr_dataset *ds = s->ds;
    int64_t start, cnt;
    shard_range(ga, s->plan.accumulate * s->R, k * s->R + rep->g, &start, &cnt);
    const int64_t *rows = s->perm + gbegin + start;
    const double t0 = mr_trace_now(rep->model.trace);
    mr_status st;
    if (ds->synthetic && ds->mean == NULL && augp == NULL && !rep->be->host_memory) {
        mr_dataset_fill_labels(ds, rows, (int)cnt, rep->labels);
        st = mr_model_input_synthetic(&rep->model, rows, (int)cnt, ds->synthetic_key[0],
                                      ds->synthetic_key[1], ds->scale, &rep->err);
        mr_trace_end(rep->model.trace, "data", "synthetic batch", t0);
        return st;
    }
    mr_dataset_fill(ds, rows, (int)cnt, augp, mr_model_input_host(&rep->model), rep->labels);
    st = mr_model_input_upload(&rep->model, (int)cnt, &rep->err);
    mr_trace_end(rep->model.trace, "data", "batch", t0);
    return st;
}

/* A GPU computes what train_batch queued for micro-batch k while the host
 * loads the next shard of this epoch (the CPU has computed it all, and
 * keeps its order: load, compute). The upload waits for nothing on the
 * device (model.h). */
static mr_status prefetch_shard(fit_loop *loop, int k) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    const int64_t n = s->n_train, G = s->plan.global_batch;
    if (rep->be->host_memory) return MR_OK;
    const int last = k == s->plan.accumulate - 1;
    const int64_t nb = last ? loop->gbegin + G : loop->gbegin;
    if (nb >= n) return MR_OK;
    MR_CHECK(load_shard(rep, loop->augp, nb, n - nb < G ? n - nb : G, last ? 0 : k + 1));
    loop->loaded = 1;
    return MR_OK;
}

/* Forward and backward of the global batch on this replica: micro-batch k
 * takes shard k*R + g; the buckets start all-reducing during the last
 * micro-batch's backward. Adds into u's loss sum, correct count and
 * times. */
static mr_status step_forward_backward(fit_loop *loop, fit_update *u) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    const int R = s->R, K = s->plan.accumulate;
    MR_CHECK(mr_model_zero_grads(m, &rep->err));
    rep->next_bucket = 0;
    rep->reduced = 0;
    rep->bucket_status = MR_OK;
    for (int k = 0; k < K; k++) {
        int64_t start, cnt;
        shard_range(u->ga, K * R, k * R + rep->g, &start, &cnt);
        rep->reduce_now = k == K - 1;
        /* an empty shard (a last batch smaller than R x K) still runs the
         * layers on zero rows: SyncBN's collectives need every replica */
        double t1 = mr_now_s();
        if (!loop->loaded) MR_CHECK(load_shard(rep, loop->augp, loop->gbegin, u->ga, k));
        loop->loaded = 0;
        double t2 = mr_now_s();
        m->run.seed = s->opts.seed;
        m->run.step = loop->global_step;
        m->run.sample_base = start;
        const int dev = sums_on_device(rep);
        mr_status st = mr_model_train_batch(m, rep->labels, (int)cnt, (float)u->ga,
                                            dev ? NULL : &u->loss_sum, dev ? NULL : &u->correct,
                                            s->n_buckets ? bucket_ready : NULL, rep, &rep->err);
        double t3 = mr_now_s();
        if (st == MR_OK) MR_CHECK(prefetch_shard(loop, k));
        u->t_data += t2 - t1 + mr_now_s() - t3, u->t_compute += t3 - t2;
        if (st != MR_OK)
            return mr_error_set(&rep->err, st,
                                "replica %d: its device or a collective inside the model failed",
                                rep->g);
        if (rep->bucket_status != MR_OK) return rep->bucket_status;
    }
    return MR_OK;
}

/* The all-reduce after backward: the buckets this replica did not reach
 * (its last shard was empty), then the rest of the gradients with the
 * metric floats behind them; the work queued next waits for all of it (a
 * GPU's host does not: step_update's read of the metrics settles it). */
static mr_status step_allreduce(fit_loop *loop, fit_update *u) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    const mr_fit_callbacks *cb = s->cb;
    const int64_t np = m->n_params;
    const size_t n_extra = METRIC_EXTRA(s->R);
    double tc = mr_now_s();
    loop->e_compute += u->t_compute;
    rep->reduce_now = 1;
    bucket_ready(rep, np);
    if (rep->bucket_status != MR_OK) return rep->bucket_status;
    /* METRIC_NONFINITE: whether this replica's own loss sum (a double) is
     * NaN or Inf; summed, how many replicas saw one. METRIC_STOP: the stop
     * flag, read once per update on the host: every replica's view of it
     * is summed, so all agree */
    mr_fault_before_stop_read(s->opts.fault, rep->r, loop->global_step + 1);
    const float asked = cb && cb->stop && atomic_load(cb->stop) ? 1.0f : 0.0f;
    float *sums = rep->extra;
    for (size_t i = 0; i < n_extra; i++)
        sums[i] = 0.0f;
    sums[METRIC_LOSS] = (float)u->loss_sum; /* 0 where sums_on_device: see below */
    sums[METRIC_CORRECT] = (float)u->correct;
    sums[METRIC_NONFINITE] = !isfinite(u->loss_sum);
    sums[METRIC_STOP] = asked;
    sums[METRIC_FLOATS + rep->g] = (float)loop->e_compute;
    MR_CHECK(mr_model_write_extra(m, sums, n_extra, &rep->err));
    /* a GPU's LOSS, CORRECT and NONFINITE come from the device, over the
     * zeros above, in the same queue: no wait */
    if (sums_on_device(rep)) MR_CHECK(mr_model_take_sums(m, &rep->err));
    const int64_t reduced_before = rep->reduced;
    MR_CHECK(mr_comm_allreduce_start(s->comm, rep->r, mr_dfloat_at(m->grads, rep->reduced),
                                     (size_t)(np + (int64_t)n_extra - rep->reduced), &rep->err));
    MR_CHECK(mr_comm_join_all(s->comm, rep->r, &rep->err));
    u->t_comm = mr_now_s() - tc;
    if (m->trace)
        mr_trace_record(m->trace, "allreduce", "allreduce", tc, tc + u->t_comm,
                        (int64_t)sizeof(float) * (np + (int64_t)n_extra - reduced_before));
    /* fault injection (tests): fail or stall after the all-reduce */
    return mr_fault_step(s->opts.fault, rep->r, rep->g, loop->global_step + 1, s->comm->timeout_s,
                         &rep->err);
}

/* on_nan: the step's loss or gradients are NaN or infinite (the same
 * verdict on every replica: they hold the same reduced sums). Stops the
 * fit with one line naming the step, the epoch and the first layer in
 * backward order whose gradients are non-finite (a read of the gradients,
 * on this failure path only), or, with skip, counts the step and stops
 * only after nan_patience of them in a row. u->skip = 1: drop the update. */
static mr_status on_nonfinite(fit_loop *loop, fit_update *u) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    const mr_net_cfg *net = &s->cfg->net;
    u->skip = 1;
    ++loop->nan_in_row;
    ++loop->skipped;
    if (net->on_nan == MR_ON_NAN_SKIP && loop->nan_in_row < net->nan_patience) return MR_OK;
    int layer;
    MR_CHECK(mr_model_first_nonfinite_layer(&rep->model, &layer, &rep->err));
    char where[192] = "the gradients are finite";
    if (layer >= 0) {
        const mr_layer *l = &rep->model.layers[layer];
        snprintf(where, sizeof where,
                 "first non-finite gradients (backward order) in layer '%s' (line %d)", l->name,
                 l->cfg->line);
    }
    /* the loss, and how many replicas' own loss sums were not finite (0:
     * the float sum overflowed, or the gradients alone are not finite) */
    char loss[96];
    const float loss_sum = u->metrics[METRIC_LOSS], on = u->metrics[METRIC_NONFINITE];
    if (on > 0.0f)
        snprintf(loss, sizeof loss, "loss %g (not finite on %.0f of %d replicas)", (double)loss_sum,
                 (double)on, s->R);
    else
        snprintf(loss, sizeof loss, "loss %g", (double)loss_sum);
    char why[64] = "on_nan = stop";
    if (net->on_nan == MR_ON_NAN_SKIP)
        snprintf(why, sizeof why, "%d steps in a row, nan_patience = %d", loop->nan_in_row,
                 net->nan_patience);
    return mr_error_set(&rep->err, MR_ERR_RUNTIME,
                        "%s: NaN or Inf at step %lld of epoch %d (update %lld): %s, %s; "
                        "stopped (%s), no checkpoint of this update written",
                        s->cfg->path, (long long)loop->g + 1, loop->epoch + 1,
                        (long long)loop->global_step + 1, loss, where, why);
}

/* BN moving statistics: the mean over all replicas, the same bits everywhere. */
static mr_status average_bn_state(replica *rep) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    const double tb = mr_trace_now(m->trace);
    MR_CHECK(mr_comm_allreduce_sum(s->comm, rep->r, m->state, (size_t)m->n_state, &rep->err));
    if (m->trace)
        mr_trace_record(m->trace, "allreduce", "bn_state", tb, mr_now_s(),
                        (int64_t)sizeof(float) * m->n_state);
    return mr_backend_scale(rep->be, m->state, (size_t)m->n_state, 1.0f / (float)s->R, &rep->err);
}

/* The update's rate: reduce_lr_on_plateau sets it epoch by epoch (a
 * constant plan), else the plan at this point of the epoch. */
static float step_rate(const fit_loop *loop) {
    const replica *rep = loop->rep;
    const mr_strategy *s = rep->s;
    const double steps = (double)s->plan.steps_per_epoch;
    return rep->rlr.monitor != MR_MONITOR_NONE
               ? rep->rlr.lr
               : mr_plan_learning_rate(&s->plan, loop->epoch + (double)loop->g / steps);
}

/* The update: on_nan's verdict on the reduced sums, the rate, the
 * optimizer's step (dropped where on_nan = skip found NaN or Inf), the BN
 * statistics' mean. */
static mr_status step_update(fit_loop *loop, fit_update *u) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    /* on_nan: the global batch's sums, the same on every replica; a NaN or
     * Inf in the loss is there for free, one in the gradients takes a read
     * of them (the reduced ones: a non-finite value on any replica is one
     * in the sum) */
    /* a GPU queues the check of the reduced gradients before the read of
     * the metrics: the read's wait is the step's only one, and serves both
     * (the flag is read at once: a later check would reuse its memory) */
    const double *gflag = NULL;
    if (sums_on_device(rep)) MR_CHECK(mr_model_grads_nonfinite_begin(m, &gflag, &rep->err));
    /* ... and for the all-reduce (step_allreduce's join): its verdict */
    MR_CHECK(mr_comm_settle(s->comm, rep->r,
                            mr_model_read_extra(m, rep->extra, METRIC_EXTRA(s->R), &rep->err),
                            &rep->err));
    u->metrics = rep->extra;
    const int grads_bad = gflag != NULL && *gflag != 0.0;
    /* kernel_l2: Keras's reported loss is the batch's mean loss plus the
     * penalty at the weights this forward ran with (0 without) */
    MR_CHECK(mr_model_l2_penalty(m, &u->penalty, &rep->err));
    /* The gradients: on_nan = skip must know before the update (one read
     * of them, mr_model_grads_nonfinite); stop learns it from the update's
     * own read of them, at no extra pass: the update is then applied, but
     * the fit ends with an error and nothing saves these weights. A GPU
     * has both from the flag above, and the update no wait of its own. */
    int bad = u->metrics[METRIC_NONFINITE] != 0.0f || !isfinite(u->metrics[METRIC_LOSS]), late = 0;
    const int check_first = s->cfg->net.on_nan == MR_ON_NAN_SKIP;
    if (!bad && check_first && gflag != NULL) bad = grads_bad;
    if (!bad && check_first && gflag == NULL)
        MR_CHECK(mr_model_grads_nonfinite(m, &bad, &rep->err));
    if (bad)
        MR_CHECK(on_nonfinite(loop, u));
    else
        loop->nan_in_row = 0;
    loop->lr = step_rate(loop);
    const double tu = mr_trace_now(m->trace);
    const int du = mr_device_trace_begin(m->dtrace);
    if (!u->skip)
        MR_CHECK(mr_model_apply_update(m, loop->lr, loop->global_step + 1,
                                       check_first || gflag != NULL ? NULL : &late, &rep->err));
    if (gflag != NULL && !check_first) late = grads_bad;
    mr_trace_end(m->trace, "optimizer", "update", tu);
    mr_device_trace_end(m->dtrace, "optimizer", "update", du);
    if (late) /* on_nan = stop: ends the fit here */
        MR_CHECK(on_nonfinite(loop, u));
    if (m->n_state && s->R > 1) MR_CHECK(average_bn_state(rep));
    return MR_OK;
}

/* The update as a replay of the replica's graph (fit_graph.c): the shard
 * loaded, the graph launched, the next shard loaded while it runs, one
 * wait; then on_nan = stop's verdict on what it read, as step_update's. */
static mr_status step_graph(fit_loop *loop, fit_update *u) {
    replica *rep = loop->rep;
    const double t1 = mr_now_s();
    if (!loop->loaded) MR_CHECK(load_shard(rep, loop->augp, loop->gbegin, u->ga, 0));
    loop->loaded = 0;
    u->t_data += mr_now_s() - t1;
    loop->lr = step_rate(loop);
    fit_graph_result o;
    MR_CHECK(fit_graph_run(loop, u->ga, loop->lr, prefetch_shard, &o));
    u->t_data += o.t_data, u->t_compute += o.t_compute;
    loop->e_compute += u->t_compute;
    u->metrics = o.metrics;
    if (u->metrics[METRIC_NONFINITE] != 0.0f || !isfinite(u->metrics[METRIC_LOSS]) || o.grads_bad)
        return on_nonfinite(loop, u); /* on_nan = stop: ends the fit */
    loop->nan_in_row = 0;
    return MR_OK;
}

/* After the update: the count, the epoch's slowest replica so far (every
 * one's compute seconds rode behind the gradients) and time, and the
 * epoch's sums (the global batch's, reduced with the gradients; a skipped
 * update's are not the model's: left out). Every replica keeps them, for
 * early stopping on the training figures. */
static void step_account(fit_loop *loop, const fit_update *u) {
    const float *metrics = u->metrics;
    loop->global_step++;
    loop->slowest = 0;
    for (int i = 1; i < loop->rep->s->R; i++)
        if (metrics[METRIC_FLOATS + i] > metrics[METRIC_FLOATS + loop->slowest]) loop->slowest = i;
    loop->e_comm += u->t_comm, loop->e_data += u->t_data, loop->e_step += mr_now_s() - u->ts;
    if (!u->skip) {
        loop->epoch_loss += metrics[METRIC_LOSS] + u->penalty * (double)u->ga;
        loop->epoch_correct += metrics[METRIC_CORRECT];
        loop->seen += u->ga;
    }
}

/* Global replica 0: the fit's state after this update (what a checkpoint
 * resumes from) and the caller's on_step. */
static void step_report(fit_loop *loop, const fit_update *u) {
    mr_strategy *s = loop->rep->s;
    const mr_fit_callbacks *cb = s->cb;
    fit_loop_record_step(loop, u->ga);
    if (cb == NULL || cb->on_step == NULL) return;
    /* an accuracy's outputs per example: what `correct` counts (multi-label: k) */
    const double w = (double)mr_model_label_width(&loop->rep->model);
    const int64_t seen = loop->seen;
    mr_step_info info = {.epoch = loop->epoch,
                         .step = loop->g + 1,
                         .steps = s->plan.steps_per_epoch,
                         .global_step = loop->global_step,
                         .loss = seen ? loop->epoch_loss / (double)seen : 0.0,
                         .accuracy = seen ? loop->epoch_correct / (seen * w) : 0.0,
                         .step_loss = (double)u->metrics[METRIC_LOSS] / (double)u->ga + u->penalty,
                         .lr = loop->lr,
                         .seconds = mr_now_s() - u->ts,
                         .data_seconds = u->t_data,
                         .compute_seconds = u->t_compute,
                         .comm_seconds = u->t_comm};
    cb->on_step(cb->user, &info);
}

/* --trace: the update, its children inside it; checkpoints after it. A
 * GPU waits for the step's device work and records its spans, inside the
 * host's step. */
static mr_status step_trace(replica *rep, int64_t global_step, double ts) {
    mr_model *m = &rep->model;
    char name[32];
    snprintf(name, sizeof name, "step %lld", (long long)global_step);
    MR_CHECK(mr_device_trace_flush(m->dtrace, name, &rep->err));
    mr_trace_record(m->trace, "step", name, ts, mr_now_s(), -1);
    return MR_OK;
}

/* A planned stop: this update is the last; global replica 0 hands it to
 * on_stop (the state says where to go on: at the end of an epoch,
 * position n, a resume validates and goes on). */
static mr_status step_stop(fit_loop *loop) {
    replica *rep = loop->rep;
    if (rep->r == 0) rep->s->stopped = 1; /* on every process */
    loop->end = FIT_PAUSED;
    return fit_save_on_stop(rep, loop->lr);
}

mr_status fit_step(fit_loop *loop) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    const mr_fit_callbacks *cb = s->cb;
    const int64_t n = s->n_train, G = s->plan.global_batch;
    fit_update u = {.ts = mr_now_s(), .ga = n - loop->gbegin < G ? n - loop->gbegin : G};
    mr_device_trace_arm(m->dtrace); /* --trace on a GPU: this step's device time */
    if (fit_graph_usable(loop, u.ga)) {
        MR_CHECK(step_graph(loop, &u));
    } else {
        MR_CHECK(step_forward_backward(loop, &u));
        MR_CHECK(step_allreduce(loop, &u));
        MR_CHECK(step_update(loop, &u));
        fit_graph_note_eager(loop, u.ga);
    }
    step_account(loop, &u);
    const int stop = u.metrics[METRIC_STOP] > 0.0f;
    if (rep->g == 0) step_report(loop, &u);
    if (s->opts.check_sync > 0 && loop->global_step % s->opts.check_sync == 0) {
        /* fault injection (tests): make the last replica diverge */
        MR_CHECK(mr_fault_perturb(s->opts.fault, m, rep->g, s->R, loop->global_step, &rep->err));
        MR_CHECK(strategy_check_sync(rep, loop->global_step));
    }
    if (m->trace) MR_CHECK(step_trace(rep, loop->global_step, u.ts));
    if (stop) return step_stop(loop);
    if (cb && cb->every_steps > 0 && loop->global_step % cb->every_steps == 0 &&
        loop->gbegin + u.ga < n)
        MR_CHECK(fit_save_checkpoint(rep, loop->lr));
    loop->g++;
    loop->gbegin += G;
    return MR_OK;
}
