/* fit_checkpoint.c: the fit's hand-offs to the caller's checkpoint
 * callbacks (mr_fit_callbacks: save, on_stop, save_best): global replica
 * 0's model (every replica holds the same bits) and the fit's state, never
 * weights with a NaN or an infinity, each timed as a "checkpoint" span
 * under --trace. What a checkpoint file holds is checkpoint.c's. */
#include "strategies/fit_impl.h"

/* No checkpoint holds non-finite weights (the step drops a non-finite
 * gradient before its update, but a finite update can still overflow
 * them): the newest file on disk stays the last good one. */
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

mr_status fit_save_checkpoint(replica *rep, float lr) {
    mr_strategy *s = rep->s;
    if (rep->g != 0 || s->cb == NULL || s->cb->save == NULL) return MR_OK;
    MR_CHECK(check_weights_finite(rep));
    const double t0 = mr_trace_now(rep->model.trace);
    mr_status st = s->cb->save(s->cb->save_user, &s->state, &rep->model, lr, &rep->err);
    mr_trace_end(rep->model.trace, "checkpoint", "checkpoint", t0);
    return st;
}

mr_status fit_save_on_stop(replica *rep, float lr) {
    mr_strategy *s = rep->s;
    if (rep->g != 0 || s->cb == NULL || s->cb->on_stop == NULL) return MR_OK;
    MR_CHECK(check_weights_finite(rep));
    const double t0 = mr_trace_now(rep->model.trace);
    MR_CHECK(s->cb->on_stop(s->cb->save_user, &s->state, &rep->model, lr, &rep->err));
    mr_trace_end(rep->model.trace, "checkpoint", "checkpoint", t0);
    return MR_OK;
}

mr_status fit_save_best(replica *rep, float lr, double value, int had_best, double best_before) {
    mr_strategy *s = rep->s;
    if (rep->g != 0 || s->cb == NULL || s->cb->save_best == NULL) return MR_OK;
    MR_CHECK(check_weights_finite(rep));
    const double t0 = mr_trace_now(rep->model.trace);
    MR_CHECK(s->cb->save_best(s->cb->save_user, &s->state, &rep->model, lr, value, had_best,
                              best_before, &rep->err));
    mr_trace_end(rep->model.trace, "checkpoint", "checkpoint", t0);
    return MR_OK;
}
