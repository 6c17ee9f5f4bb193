/* fit.c: the training loop (mr_strategy_fit): every replica runs
 * task_fit on its thread, fit_begin (where the checkpoint left off, the
 * epoch callbacks replayed), then epochs of updates, each opened by
 * fit_epoch_begin, made of fit_step (fit_step.c) and closed by
 * fit_epoch_end (fit_epoch.c), then fit_finish. Its state is a fit_loop,
 * which fit_loop.c alone sets up and moves on (fit_loop_impl.h). */
#include <stdlib.h>

#include "runtime/rng.h"
#include "strategies/fit_impl.h"

/* The loop's state at the start of a fit: from the update and the epoch
 * the checkpoint left (s->from), with the epoch callbacks' state replayed
 * from its finished epochs. */
static mr_status fit_begin(fit_loop *loop, replica *rep) {
    const mr_strategy *s = rep->s;
    fit_loop_begin(loop, rep);
    MR_CHECK(fit_epoch_replay(loop));
    if (loop->epoch >= s->plan.epochs) loop->end = FIT_DONE;
    return MR_OK;
}

/* An epoch's start: its order (every process computes the same
 * permutation), then the loop's state for it (fit_loop_epoch_begin). */
static mr_status fit_epoch_begin(fit_loop *loop) {
    replica *rep = loop->rep;
    mr_strategy *s = rep->s;
    const int64_t n = s->n_train;
    if (rep->r == 0) {
        if (s->cfg->net.shuffle)
            mr_rng_permutation(s->opts.seed, loop->epoch, s->perm, n);
        else
            for (int64_t i = 0; i < n; i++)
                s->perm[i] = i;
    }
    /* everyone sees the permutation before using it */
    MR_CHECK(mr_comm_barrier(s->comm, rep->r, &rep->err));
    fit_loop_epoch_begin(loop);
    return MR_OK;
}

/* --max-steps inside an epoch: no validation, no epoch logs; the state
 * says where to resume. A checkpoint as at the end of a run, unless
 * every_steps has just written this one (or this run made no update). */
static mr_status fit_pause(fit_loop *loop) {
    replica *rep = loop->rep;
    const mr_fit_callbacks *cb = rep->s->cb;
    const int saved = cb && cb->every_steps > 0 && loop->global_step % cb->every_steps == 0;
    if (loop->global_step > rep->s->from.global_step && !saved)
        MR_CHECK(fit_save_checkpoint(rep, loop->lr));
    loop->end = FIT_PAUSED;
    return MR_OK;
}

/* A fit that ran its epochs or stopped early (Keras's on_train_end) goes
 * back to the best epoch's weights (restore_best_weights); a paused one
 * keeps its last. */
static mr_status fit_finish(fit_loop *loop) {
    return loop->end == FIT_DONE ? fit_restore_best(loop->rep) : MR_OK;
}

/* One replica's fit, on its thread: every replica runs the same loop and
 * decides on the same reduced figures, so all leave it after the same
 * update. */
static mr_status task_fit(replica *rep) {
    const int64_t n = rep->s->n_train;
    fit_loop loop;
    MR_CHECK(fit_begin(&loop, rep));
    for (; loop.end == FIT_RUNNING; loop.epoch++) {
        MR_CHECK(fit_epoch_begin(&loop));
        while (loop.end == FIT_RUNNING && loop.gbegin < n) {
            if (fit_max_steps_reached(&loop))
                MR_CHECK(fit_pause(&loop));
            else
                MR_CHECK(fit_step(&loop));
        }
        if (loop.end == FIT_RUNNING) MR_CHECK(fit_epoch_end(&loop));
    }
    return fit_finish(&loop);
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
        if (history == NULL) /* one entry an epoch, held for the whole fit */
            return mr_error_set(err, MR_ERR_NOMEM, "out of memory for the history of %d epochs",
                                epochs);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory for the permutation of %lld examples",
                            (long long)n_train);
    }
    free(s->state.history);
    fit_loop_prepare(s, from, epochs, n_train, history);
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
