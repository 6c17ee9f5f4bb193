/* fit.c: the training step and the epoch loop (mr_strategy_fit): shards
 * of the global batch, gradients all-reduced in buckets during backward,
 * the check for NaN and Inf (on_nan), the update, the BN statistics' mean,
 * progress and checkpoints. Relies on plan.h (batch, rate), check_sync.c,
 * evaluate.c (validation) and the test hooks of fault.h, one call at each
 * hook point. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/clock.h"
#include "runtime/device_trace.h"
#include "runtime/rng.h"
#include "strategies/early_stop.h"
#include "strategies/reduce_lr.h"
#include "strategies/strategy_impl.h"

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

/* Global replica 0 hands its model and the state to the checkpoint writer,
 * never weights with a NaN or an infinity (the last good checkpoint stays
 * the newest): the step drops a non-finite gradient before its update, but
 * a finite update can still overflow. */
/* No checkpoint holds non-finite weights (a finite update can still
 * overflow them): the newest file on disk stays the last good one. */
static mr_status check_weights_finite(replica *rep) {
    int bad;
    MR_CHECK(mr_model_params_nonfinite(&rep->model, &bad, &rep->err));
    if (bad)
        return mr_error_set(&rep->err, MR_ERR_RUNTIME,
                            "%s: the weights hold NaN or Inf after update %lld; no checkpoint "
                            "written",
                            rep->s->cfg->path, (long long)rep->s->state.global_step);
    return MR_OK;
}

static mr_status save_checkpoint(replica *rep, float lr) {
    mr_strategy *s = rep->s;
    if (rep->g != 0 || s->cb == NULL || s->cb->save == NULL) return MR_OK;
    MR_CHECK(check_weights_finite(rep));
    const double t0 = mr_trace_now(rep->model.trace);
    mr_status st = s->cb->save(s->cb->save_user, &s->state, &rep->model, lr, &rep->err);
    mr_trace_end(rep->model.trace, "checkpoint", "checkpoint", t0);
    return st;
}

/* on_nan: the step's loss or gradients are NaN or infinite (the same
 * verdict on every replica: they hold the same reduced sums). Stops the
 * fit with one line naming the step, the epoch and the first layer in
 * backward order whose gradients are non-finite (a read of the gradients,
 * on this failure path only), or, with skip, counts the step and stops
 * only after nan_patience of them in a row. *skip = 1: drop the update. */
static mr_status on_nonfinite(replica *rep, int epoch, int64_t g, int64_t global_step,
                              const float *metrics, int *in_row, int64_t *skipped, int *skip) {
    mr_strategy *s = rep->s;
    const mr_net_cfg *net = &s->cfg->net;
    *skip = 1;
    ++*in_row;
    ++*skipped;
    if (net->on_nan == MR_ON_NAN_SKIP && *in_row < net->nan_patience) return MR_OK;
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
    const float loss_sum = metrics[METRIC_LOSS], on = metrics[METRIC_NONFINITE];
    if (on > 0.0f)
        snprintf(loss, sizeof loss, "loss %g (not finite on %.0f of %d replicas)", (double)loss_sum,
                 (double)on, s->R);
    else
        snprintf(loss, sizeof loss, "loss %g", (double)loss_sum);
    char why[64] = "on_nan = stop";
    if (net->on_nan == MR_ON_NAN_SKIP)
        snprintf(why, sizeof why, "%d steps in a row, nan_patience = %d", *in_row,
                 net->nan_patience);
    return mr_error_set(&rep->err, MR_ERR_RUNTIME,
                        "%s: NaN or Inf at step %lld of epoch %d (update %lld): %s, %s; "
                        "stopped (%s), no checkpoint of this update written",
                        s->cfg->path, (long long)g + 1, epoch + 1, (long long)global_step + 1, loss,
                        where, why);
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

/* restore_best_weights: the weights (and BN state) of the best epoch so
 * far, kept in host memory of each replica (all replicas hold the same
 * bits; each restores its own copy). */
static mr_status keep_best(replica *rep, int epoch) {
    mr_strategy *s = rep->s;
    if (!s->cfg->net.restore_best_weights) return MR_OK;
    const mr_model *m = &rep->model;
    const size_t np = (size_t)m->n_params, ns = (size_t)m->n_state;
    if (rep->best == NULL) {
        rep->best = malloc(sizeof(float) * (np + ns + 1));
        if (rep->best == NULL)
            return mr_error_set(&rep->err, MR_ERR_NOMEM,
                                "restore_best_weights: out of memory for a copy of the weights");
    }
    MR_CHECK(mr_backend_to_host(rep->be, rep->best, m->params, sizeof(float) * np, &rep->err));
    if (ns)
        MR_CHECK(
            mr_backend_to_host(rep->be, rep->best + np, m->state, sizeof(float) * ns, &rep->err));
    rep->best_epoch = epoch;
    return MR_OK;
}

/* At the end of a fit that ran its epochs or stopped early (Keras's
 * on_train_end): back to the best epoch's weights, where this run holds
 * them (a resumed run whose best epoch came before the checkpoint does
 * not: s->best_lost says so). */
static mr_status restore_best(replica *rep) {
    mr_strategy *s = rep->s;
    if (!s->cfg->net.restore_best_weights || rep->es.best_epoch < 0) return MR_OK;
    if (rep->best == NULL || rep->best_epoch != rep->es.best_epoch) {
        if (rep->r == 0) s->best_lost = 1;
        return MR_OK;
    }
    mr_model *m = &rep->model;
    const size_t np = (size_t)m->n_params, ns = (size_t)m->n_state;
    MR_CHECK(mr_backend_to_device(rep->be, m->params, rep->best, sizeof(float) * np, &rep->err));
    if (ns)
        MR_CHECK(
            mr_backend_to_device(rep->be, m->state, rep->best + np, sizeof(float) * ns, &rep->err));
    if (rep->r == 0) s->restored_epoch = rep->best_epoch + 1;
    return MR_OK;
}

/* Early stopping's and ReduceLROnPlateau's state at the start of a fit:
 * the epochs the checkpoint finished, replayed (every replica alike). A best epoch that is the last
 * of them has its weights in the model now; an older one's are gone. A
 * replay that ends in a stop leaves nothing to train. */
static mr_status early_stop_replay(replica *rep, int *done) {
    mr_strategy *s = rep->s;
    mr_early_stop_init(&rep->es, &s->cfg->net);
    mr_early_stop_init_monitor(&rep->sb, s->cfg->net.save_best_only);
    mr_reduce_lr_init(&rep->rlr, &s->cfg->net, mr_plan_learning_rate(&s->plan, 0.0));
    rep->best_epoch = -1;
    *done = 0;
    const int n = s->state.n_history;
    for (int e = 0; e < n; e++) {
        if (mr_early_stop_epoch(&rep->es, &s->state.history[e]) == MR_EARLY_STOP_STOP) *done = 1;
        mr_early_stop_epoch(&rep->sb, &s->state.history[e]);
        mr_reduce_lr_epoch(&rep->rlr, &s->state.history[e]);
    }
    if (n > 0 && rep->es.best_epoch == n - 1 && s->from.position == 0 && s->from.step == 0)
        MR_CHECK(keep_best(rep, rep->es.best_epoch));
    if (*done && rep->r == 0) s->early_stopped = n;
    return MR_OK;
}

static mr_status task_fit(replica *rep) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    const mr_fit_plan *p = &s->plan;
    const mr_fit_callbacks *cb = s->cb;
    const int R = s->R, K = p->accumulate, G = p->global_batch;
    const int64_t n = s->n_train, steps = p->steps_per_epoch;
    const int64_t np = m->n_params;
    const size_t n_extra = METRIC_EXTRA(R);
    const int shuffle = s->cfg->net.shuffle;
    const mr_fit_state *from = &s->from;
    mr_fit_state *state = &s->state; /* kept up to date by global replica 0 */
    int64_t global_step = from->global_step;
    int nan_in_row = 0; /* on_nan = skip: skipped updates in a row, across epochs */
    int done;
    MR_CHECK(early_stop_replay(rep, &done));
    if (done) return restore_best(rep);
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
        /* an accuracy's outputs per example: what `correct` counts (multi-label: k) */
        const double w = (double)mr_model_label_width(m);
        float lr = 0.0f;
        int64_t g = resumed ? from->step : 0, gbegin = resumed ? from->position : 0;
        int loaded = 0; /* 1: the next shard is in the model's input already */
        /* where this epoch's update time goes (mr_epoch_logs), this run's updates */
        double e_compute = 0.0, e_comm = 0.0, e_data = 0.0, e_step = 0.0;
        int slowest_epoch = -1; /* the job-wide replica with the most compute (none yet) */
        int64_t skipped = 0;    /* on_nan = skip: updates dropped this epoch */
        const int64_t max_steps = s->opts.max_steps;
        for (; gbegin < n && !(max_steps > 0 && global_step >= max_steps); g++, gbegin += G) {
            double ts = mr_now_s(), t_data = 0.0, t_compute = 0.0;
            int64_t ga = n - gbegin < G ? n - gbegin : G; /* real size of this global batch */
            mr_device_trace_arm(m->dtrace); /* --trace on a GPU: this step's device time */
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
            e_compute += t_compute;
            rep->reduce_now = 1;
            bucket_ready(rep, np);
            if (rep->bucket_status != MR_OK) return rep->bucket_status;
            /* METRIC_NONFINITE: whether this replica's own loss sum (a
             * double) is NaN or Inf; summed, how many replicas saw one.
             * METRIC_STOP: the stop flag, read once per update on the host:
             * every replica's view of it is summed, so all agree */
            const float asked = cb && cb->stop && atomic_load(cb->stop) ? 1.0f : 0.0f;
            float *sums = rep->extra;
            for (size_t i = 0; i < n_extra; i++)
                sums[i] = 0.0f;
            sums[METRIC_LOSS] = (float)loss_sum;
            sums[METRIC_CORRECT] = (float)correct;
            sums[METRIC_NONFINITE] = !isfinite(loss_sum);
            sums[METRIC_STOP] = asked;
            sums[METRIC_FLOATS + rep->g] = (float)e_compute;
            MR_CHECK(mr_model_write_extra(m, sums, n_extra, &rep->err));
            const int64_t reduced_before = rep->reduced;
            MR_CHECK(mr_comm_allreduce_start(s->comm, rep->r, mr_dfloat_at(m->grads, rep->reduced),
                                             (size_t)(np + (int64_t)n_extra - rep->reduced),
                                             &rep->err));
            MR_CHECK(mr_comm_wait_all(s->comm, rep->r, &rep->err));
            const double t_comm = mr_now_s() - tc;
            if (m->trace)
                mr_trace_record(m->trace, "allreduce", "allreduce", tc, tc + t_comm,
                                (int64_t)sizeof(float) * (np + (int64_t)n_extra - reduced_before));
            /* fault injection (tests): fail or stall after the all-reduce */
            MR_CHECK(mr_fault_step(s->opts.fault, rep->r, rep->g, global_step + 1,
                                   s->comm->timeout_s, &rep->err));
            /* on_nan: the global batch's sums, the same on every replica;
             * a NaN or Inf in the loss is there for free, one in the
             * gradients takes a read of them (the reduced ones: a
             * non-finite value on any replica is one in the sum) */
            MR_CHECK(mr_model_read_extra(m, rep->extra, n_extra, &rep->err));
            const float *metrics = rep->extra;
            /* kernel_l2: Keras's reported loss is the batch's mean loss plus
             * the penalty at the weights this forward ran with (0 without) */
            double penalty;
            MR_CHECK(mr_model_l2_penalty(m, &penalty, &rep->err));
            /* The gradients: on_nan = skip must know before the update
             * (one read of them, mr_model_grads_nonfinite); stop learns it
             * from the update's own read of them, at no extra pass: the
             * update is then applied, but the fit ends with an error and
             * nothing saves these weights. */
            int bad = metrics[METRIC_NONFINITE] != 0.0f || !isfinite(metrics[METRIC_LOSS]),
                skip = 0, late = 0;
            const int check_first = s->cfg->net.on_nan == MR_ON_NAN_SKIP;
            if (!bad && check_first) MR_CHECK(mr_model_grads_nonfinite(m, &bad, &rep->err));
            if (bad)
                MR_CHECK(on_nonfinite(rep, epoch, g, global_step, metrics, &nan_in_row, &skipped,
                                      &skip));
            else
                nan_in_row = 0;
            /* reduce_lr_on_plateau sets the rate epoch by epoch (a constant plan) */
            lr = rep->rlr.monitor != MR_MONITOR_NONE
                     ? rep->rlr.lr
                     : mr_plan_learning_rate(p, epoch + (double)g / (double)steps);
            const double tu = mr_trace_now(m->trace);
            const int du = mr_device_trace_begin(m->dtrace);
            if (!skip)
                MR_CHECK(mr_model_apply_update(m, lr, global_step + 1, check_first ? NULL : &late,
                                               &rep->err));
            mr_trace_end(m->trace, "optimizer", "update", tu);
            mr_device_trace_end(m->dtrace, "optimizer", "update", du);
            if (late) /* on_nan = stop: ends the fit here */
                MR_CHECK(on_nonfinite(rep, epoch, g, global_step, metrics, &nan_in_row, &skipped,
                                      &skip));
            if (m->n_state && R > 1) {
                /* BN moving statistics: the mean over all replicas, same bits everywhere */
                const double tb = mr_trace_now(m->trace);
                MR_CHECK(mr_comm_allreduce_sum(s->comm, rep->r, m->state, (size_t)m->n_state,
                                               &rep->err));
                if (m->trace)
                    mr_trace_record(m->trace, "allreduce", "bn_state", tb, mr_now_s(),
                                    (int64_t)sizeof(float) * m->n_state);
                MR_CHECK(mr_backend_scale(rep->be, m->state, (size_t)m->n_state, 1.0f / (float)R,
                                          &rep->err));
            }
            global_step++;
            const int stop = metrics[METRIC_STOP] > 0.0f;
            /* the slowest replica so far this epoch: every one's compute
             * seconds rode behind the gradients */
            slowest_epoch = 0;
            for (int i = 1; i < R; i++)
                if (metrics[METRIC_FLOATS + i] > metrics[METRIC_FLOATS + slowest_epoch])
                    slowest_epoch = i;
            e_comm += t_comm, e_data += t_data, e_step += mr_now_s() - ts;
            /* the global batch's sums, reduced with the gradients (a skipped
             * step's are not the model's: left out); every replica keeps
             * them, for early stopping on the training figures */
            if (!skip) {
                epoch_loss += metrics[METRIC_LOSS] + penalty * (double)ga;
                epoch_correct += metrics[METRIC_CORRECT];
                seen += ga;
            }
            if (rep->g == 0) {
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
                                         .loss = seen ? epoch_loss / (double)seen : 0.0,
                                         .accuracy = seen ? epoch_correct / (seen * w) : 0.0,
                                         .step_loss =
                                             (double)metrics[METRIC_LOSS] / (double)ga + penalty,
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
                MR_CHECK(strategy_check_sync(rep, global_step));
            }
            if (m->trace) { /* the update, its children inside it; checkpoints after it */
                char name[32];
                snprintf(name, sizeof name, "step %lld", (long long)global_step);
                /* a GPU: waits for the step's device work and records its
                 * spans, inside the host's step */
                MR_CHECK(mr_device_trace_flush(m->dtrace, name, &rep->err));
                mr_trace_record(m->trace, "step", name, ts, mr_now_s(), -1);
            }
            if (stop) {
                /* a planned stop: this update is the last; global replica 0
                 * hands it to on_stop (the state says where to go on: at the
                 * end of an epoch, position n, a resume validates and goes on) */
                if (rep->r == 0) s->stopped = 1; /* on every process */
                if (rep->g == 0 && cb->on_stop) {
                    MR_CHECK(check_weights_finite(rep));
                    const double tk = mr_trace_now(m->trace);
                    MR_CHECK(cb->on_stop(cb->save_user, &s->state, &rep->model, lr, &rep->err));
                    mr_trace_end(m->trace, "checkpoint", "checkpoint", tk);
                }
                return MR_OK;
            }
            if (cb && cb->every_steps > 0 && global_step % cb->every_steps == 0 && gbegin + ga < n)
                MR_CHECK(save_checkpoint(rep, lr));
        }
        if (gbegin < n) {
            /* --max-steps inside the epoch: no validation, no epoch logs; the
             * state says where to resume. Checkpoint as at the end of a run,
             * unless every_steps has just written this one. */
            const int saved = cb && cb->every_steps > 0 && global_step % cb->every_steps == 0;
            if (global_step > from->global_step && !saved) MR_CHECK(save_checkpoint(rep, lr));
            return MR_OK;
        }
        double t1 = mr_now_s();
        mr_epoch_logs logs = {.epoch = epoch};
        if (s->n_val > 0) {
            /* [net] top_k and per_class: their counts ride in the same all-reduce */
            const mr_net_cfg *net = &s->cfg->net;
            mr_eval_detail detail = {.classes = mr_model_classes(m),
                                     .confusion = net->per_class ? s->val_confusion : NULL};
            const double tv = mr_trace_now(m->trace);
            MR_CHECK(strategy_evaluate_replica(rep, s->ds, s->val_begin, s->n_val, &logs.val_loss,
                                               &logs.val_accuracy,
                                               net->top_k || net->per_class ? &detail : NULL));
            mr_trace_end(m->trace, "validate", "validation", tv); /* its layers' forward inside */
            logs.has_val = 1;
            logs.val_top_k = detail.top_k_accuracy;
            logs.val_confusion = detail.confusion;
            logs.classes = detail.classes;
        }
        logs.loss = seen ? epoch_loss / (double)seen : 0.0;
        logs.accuracy = seen ? epoch_correct / ((double)seen * w) : 0.0;
        /* every replica decides alike: the same logs everywhere */
        const mr_early_stop_action es = mr_early_stop_epoch(&rep->es, &logs);
        const int sb_had = rep->sb.have_best;
        const double sb_before = rep->sb.best;
        const int sb_better = mr_early_stop_epoch(&rep->sb, &logs) == MR_EARLY_STOP_IMPROVED;
        logs.lr = lr; /* the rate of this epoch's last update, before any cut */
        if (mr_reduce_lr_epoch(&rep->rlr, &logs)) logs.reduced_lr = rep->rlr.lr;
        if (es == MR_EARLY_STOP_IMPROVED) MR_CHECK(keep_best(rep, epoch));
        if (rep->g == 0) {
            logs.train_seconds = seconds_before + t1 - t0;
            logs.samples_per_sec = (double)n / logs.train_seconds;
            logs.lr = lr;
            logs.skipped = skipped;
            logs.compute_seconds = e_compute;
            logs.comm_seconds = e_comm;
            logs.data_seconds = e_data;
            logs.step_seconds = e_step;
            logs.slowest_replica = R > 1 ? slowest_epoch : -1; /* one replica: no straggler */
            state->history[state->n_history] = logs;
            state->history[state->n_history++].val_confusion = NULL; /* the buffer moves on */
            *state = (mr_fit_state){.epoch = epoch + 1,
                                    .global_step = global_step,
                                    .n_history = state->n_history,
                                    .history = state->history};
            if (cb && cb->on_epoch_end) cb->on_epoch_end(cb->user, &logs);
            if (sb_better && cb && cb->save_best) {
                MR_CHECK(check_weights_finite(rep));
                const double tk = mr_trace_now(m->trace);
                MR_CHECK(cb->save_best(cb->save_user, state, m, lr,
                                       mr_early_stop_value(&rep->sb, &logs), sb_had, sb_before,
                                       &rep->err));
                mr_trace_end(m->trace, "checkpoint", "checkpoint", tk);
            }
        }
        int every = cb ? cb->every_epochs : 0;
        if ((every > 0 && (epoch + 1) % every == 0) ||
            (cb && cb->every_steps > 0 && global_step % cb->every_steps == 0))
            MR_CHECK(save_checkpoint(rep, lr));
        else if (max_steps > 0 && global_step >= max_steps && epoch + 1 < s->plan.epochs &&
                 es != MR_EARLY_STOP_STOP)
            MR_CHECK(save_checkpoint(rep, lr)); /* --max-steps at an epoch's end */
        /* --trace: each process's file holds the epochs done so far, whatever happens next */
        if (rep->r == 0 && s->opts.trace) MR_CHECK(mr_trace_write(s->opts.trace, &rep->err));
        if (es == MR_EARLY_STOP_STOP) {
            if (rep->r == 0) s->early_stopped = epoch + 1;
            break;
        }
        /* --max-steps before the last epoch: not finished, nothing restored */
        if (max_steps > 0 && global_step >= max_steps && epoch + 1 < s->plan.epochs) return MR_OK;
    }
    return restore_best(rep);
}

mr_status mr_strategy_fit(mr_strategy *s, const mr_dataset *train, int64_t n_train,
                          int64_t val_begin, int64_t n_val, int epochs, const mr_augment *aug,
                          const mr_fit_state *from, const mr_fit_callbacks *cb, mr_error *err) {
    if (n_train < 1) return mr_error_set(err, MR_ERR_DATA, "no training examples");
    MR_CHECK(mr_plan_make(s->cfg, s->R, s->L, s->opts.job ? s->opts.job->size : 1, n_train,
                          &s->plan, err));
    free(s->perm);
    s->perm = malloc(sizeof(int64_t) * (size_t)n_train);
    const int classes = mr_model_classes(&s->reps[0].model);
    free(s->val_confusion);
    s->val_confusion = s->cfg->net.per_class && n_val > 0
                           ? calloc((size_t)classes * (size_t)classes, sizeof(double))
                           : NULL;
    mr_epoch_logs *history = calloc((size_t)(epochs > 0 ? epochs : 1), sizeof *history);
    if (s->perm == NULL || history == NULL ||
        (s->cfg->net.per_class && n_val > 0 && s->val_confusion == NULL)) {
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
    s->stopped = 0;
    s->early_stopped = 0;
    s->restored_epoch = 0;
    s->best_lost = 0;
    return strategy_run_replicas(s, task_fit, err);
}

mr_fit_end mr_strategy_fit_end(const mr_strategy *s) {
    const replica *rep = &s->reps[0];
    return (mr_fit_end){.early_stopped = s->early_stopped,
                        .best_epoch = rep->es.best_epoch + 1,
                        .best = rep->es.best,
                        .restored_epoch = s->restored_epoch,
                        .best_lost = s->best_lost};
}

int mr_strategy_stopped(const mr_strategy *s) {
    return s->stopped;
}

const mr_fit_state *mr_strategy_state(const mr_strategy *s) {
    return &s->state;
}
