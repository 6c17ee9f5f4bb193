/* fit_epoch.c: an epoch's end (fit_epoch_end), on every replica:
 * validation, the epoch's training figures, Keras's epoch callbacks as pure
 * functions of them (EarlyStopping and save_best_only's monitor,
 * early_stop.c; ReduceLROnPlateau, reduce_lr.c), restore_best_weights' copy
 * of the best epoch, the epoch's logs (on_epoch_end) and checkpoints; and
 * the same callbacks replayed over a checkpoint's epochs when a fit resumes
 * (fit_epoch_replay). Every replica decides alike: all hold the same
 * figures. */
#include <stdlib.h>

#include "runtime/clock.h"
#include "strategies/fit_impl.h"

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

/* A resumed run whose best epoch came before the checkpoint does not hold
 * its weights: s->best_lost says so. */
mr_status fit_restore_best(replica *rep) {
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

/* Every replica replays alike. A best epoch that is the last of the
 * replayed ones has its weights in the model now; an older one's are
 * gone. */
mr_status fit_epoch_replay(fit_loop *loop) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    mr_early_stop_init(&rep->es, &s->cfg->net);
    mr_early_stop_init_monitor(&rep->sb, s->cfg->net.save_best_only);
    mr_reduce_lr_init(&rep->rlr, &s->cfg->net, mr_plan_learning_rate(&s->plan, 0.0));
    rep->best_epoch = -1;
    int done = 0;
    const int n = s->state.n_history;
    for (int e = 0; e < n; e++) {
        if (mr_early_stop_epoch(&rep->es, &s->state.history[e]) == MR_EARLY_STOP_STOP) done = 1;
        mr_early_stop_epoch(&rep->sb, &s->state.history[e]);
        mr_reduce_lr_epoch(&rep->rlr, &s->state.history[e]);
    }
    if (n > 0 && rep->es.best_epoch == n - 1 && s->from.position == 0 && s->from.step == 0)
        MR_CHECK(keep_best(rep, rep->es.best_epoch));
    if (done) {
        if (rep->r == 0) s->early_stopped = n;
        loop->end = FIT_DONE;
    }
    return MR_OK;
}

/* Validation on rows [val_begin, val_begin + n_val), this replica's share
 * of them, summed over the job; [net] top_k's and per_class's counts ride
 * in the same all-reduce. */
static mr_status epoch_validate(replica *rep, mr_epoch_logs *logs) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    const mr_net_cfg *net = &s->cfg->net;
    mr_eval_detail detail = {.classes = mr_model_classes(m),
                             .confusion = net->per_class ? s->val_confusion : NULL};
    const double tv = mr_trace_now(m->trace);
    MR_CHECK(strategy_evaluate_replica(rep, s->ds, s->val_begin, s->n_val, &logs->val_loss,
                                       &logs->val_accuracy,
                                       net->top_k || net->per_class ? &detail : NULL));
    mr_trace_end(m->trace, "validate", "validation", tv); /* its layers' forward inside */
    logs->has_val = 1;
    logs->val_top_k = detail.top_k_accuracy;
    logs->val_confusion = detail.confusion;
    logs->classes = detail.classes;
    return MR_OK;
}

/* Each process's replica 0: the epoch's logs completed and kept
 * (fit_loop_record_epoch), then the caller's on_epoch_end. */
static void epoch_report(fit_loop *loop, mr_epoch_logs *logs, double t1) {
    const mr_fit_callbacks *cb = loop->rep->s->cb;
    fit_loop_record_epoch(loop, logs, t1);
    if (cb && cb->on_epoch_end) cb->on_epoch_end(cb->user, logs);
}

/* The epoch's checkpoint: after every every_epochs epochs, or where
 * every_steps falls on its last update; else where --max-steps ends the
 * run at this epoch's end before the last epoch (and early stopping does
 * not end the fit here: `stopping`). */
static mr_status epoch_checkpoint(fit_loop *loop, int stopping) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    const mr_fit_callbacks *cb = s->cb;
    const int every = cb ? cb->every_epochs : 0;
    if ((every > 0 && (loop->epoch + 1) % every == 0) ||
        (cb && cb->every_steps > 0 && loop->global_step % cb->every_steps == 0))
        return fit_save_checkpoint(rep, loop->lr);
    if (fit_max_steps_reached(loop) && loop->epoch + 1 < s->plan.epochs && !stopping)
        return fit_save_checkpoint(rep, loop->lr);
    return MR_OK;
}

/* The caller's stop_after_epoch, asked on each process's replica 0 and
 * summed over the job's replicas, so that all end after the same epoch. */
static mr_status epoch_caller_stop(replica *rep, const mr_epoch_logs *logs, int *stop) {
    const mr_fit_callbacks *cb = rep->s->cb;
    *stop = 0;
    if (cb == NULL || cb->stop_after_epoch == NULL) return MR_OK;
    double verdict = rep->r == 0 && cb->stop_after_epoch(cb->user, logs) != 0 ? 1.0 : 0.0;
    MR_CHECK(mr_comm_allreduce_sum_f64(rep->s->comm, rep->r, &verdict, 1, &rep->err));
    *stop = verdict > 0.0;
    return MR_OK;
}

mr_status fit_epoch_end(fit_loop *loop) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    const double t1 = mr_now_s();
    mr_epoch_logs logs = {.epoch = loop->epoch};
    if (s->n_val > 0) MR_CHECK(epoch_validate(rep, &logs));
    /* an accuracy's outputs per example: what `correct` counts (multi-label: k) */
    fit_loop_epoch_figures(loop, mr_model_label_width(&rep->model), &logs);
    /* every replica decides alike: the same logs everywhere */
    const mr_early_stop_action es = mr_early_stop_epoch(&rep->es, &logs);
    const int sb_had = rep->sb.have_best;
    const double sb_before = rep->sb.best;
    const int sb_better = mr_early_stop_epoch(&rep->sb, &logs) == MR_EARLY_STOP_IMPROVED;
    logs.lr = loop->lr; /* the rate of this epoch's last update, before any cut */
    if (mr_reduce_lr_epoch(&rep->rlr, &logs)) logs.reduced_lr = rep->rlr.lr;
    if (es == MR_EARLY_STOP_IMPROVED) MR_CHECK(keep_best(rep, loop->epoch));
    if (rep->r == 0) epoch_report(loop, &logs, t1);
    if (rep->g == 0 && sb_better)
        MR_CHECK(
            fit_save_best(rep, loop->lr, mr_early_stop_value(&rep->sb, &logs), sb_had, sb_before));
    int caller_stop;
    MR_CHECK(epoch_caller_stop(rep, &logs, &caller_stop));
    const int stopping = es == MR_EARLY_STOP_STOP || caller_stop;
    MR_CHECK(epoch_checkpoint(loop, stopping));
    /* --trace: each process's file holds the epochs done so far, whatever happens next */
    if (rep->r == 0 && s->opts.trace) MR_CHECK(mr_trace_write(s->opts.trace, &rep->err));
    if (stopping && rep->r == 0) s->early_stopped = loop->epoch + 1;
    fit_loop_epoch_close(loop, stopping);
    return MR_OK;
}
