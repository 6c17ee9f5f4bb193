/* fit.c: the training step and the epoch loop (mr_strategy_fit): shards
 * of the global batch, gradients all-reduced in buckets during backward,
 * the update, the BN statistics' mean, progress and checkpoints. Relies on
 * plan.h (batch, rate), check_sync.c, evaluate.c (validation) and the test
 * hooks of fault.h, one call at each hook point. */
#include <stdlib.h>

#include "runtime/clock.h"
#include "runtime/rng.h"
#include "strategies/strategy_impl.h"

mr_status strategy_make_buckets(mr_strategy *s, mr_error *err) {
    const mr_strategy_opts *opts = &s->opts;
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
        rep->bucket_status =
            mr_comm_allreduce_start(s->comm, rep->r, mr_dfloat_at(rep->model.grads, rep->reduced),
                                    (size_t)(end - rep->reduced), &rep->err);
        rep->reduced = end;
        if (rep->bucket_status != MR_OK) return;
    }
    if (rep->next_bucket > 0) rep->bucket_status = mr_comm_progress(s->comm, rep->r, &rep->err);
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

static mr_status task_fit(replica *rep) {
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
        const int64_t max_steps = s->opts.max_steps;
        for (; gbegin < n && !(max_steps > 0 && global_step >= max_steps); g++, gbegin += G) {
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
            MR_CHECK(mr_comm_allreduce_start(s->comm, rep->r, mr_dfloat_at(m->grads, rep->reduced),
                                             (size_t)(np + METRIC_FLOATS - rep->reduced),
                                             &rep->err));
            MR_CHECK(mr_comm_wait_all(s->comm, rep->r, &rep->err));
            double t_comm = mr_now_s() - tc;
            /* fault injection (tests): fail or stall after the all-reduce */
            MR_CHECK(mr_fault_step(s->opts.fault, rep->r, rep->g, global_step + 1,
                                   s->comm->timeout_s, &rep->err));
            lr = mr_plan_learning_rate(p, epoch + (double)g / (double)steps);
            MR_CHECK(mr_model_apply_update(m, lr, global_step + 1, &rep->err));
            if (m->n_state && R > 1) {
                /* BN moving statistics: the mean over all replicas, same bits everywhere */
                MR_CHECK(mr_comm_allreduce_sum(s->comm, rep->r, m->state, (size_t)m->n_state,
                                               &rep->err));
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
                MR_CHECK(strategy_check_sync(rep, global_step));
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
            MR_CHECK(strategy_evaluate_replica(rep, s->ds, s->val_begin, s->n_val, &logs.val_loss,
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
        else if (max_steps > 0 && global_step >= max_steps && epoch + 1 < s->plan.epochs)
            MR_CHECK(save_checkpoint(rep, lr)); /* --max-steps at an epoch's end */
        if (max_steps > 0 && global_step >= max_steps) break;
    }
    return MR_OK;
}

mr_status mr_strategy_fit(mr_strategy *s, const mr_dataset *train, int64_t n_train,
                          int64_t val_begin, int64_t n_val, int epochs, const mr_augment *aug,
                          const mr_fit_state *from, const mr_fit_callbacks *cb, mr_error *err) {
    if (n_train < 1) return mr_error_set(err, MR_ERR_DATA, "no training examples");
    MR_CHECK(mr_plan_make(s->cfg, s->R, s->L, s->opts.job ? s->opts.job->size : 1, n_train,
                          &s->plan, err));
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
    return strategy_run_replicas(s, task_fit, err);
}

const mr_fit_state *mr_strategy_state(const mr_strategy *s) {
    return &s->state;
}
