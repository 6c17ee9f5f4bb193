/* fit_loop.c: the one owner of the training loop's state (fit_loop_impl.h):
 * where a fit and each epoch start, the epoch's figures, the resumable
 * state (mr_fit_state) the checkpoints take, and whether the fit goes on.
 * Every replica holds a fit_loop of its own and moves it alike. */
#include "runtime/clock.h"
#include "strategies/fit_loop_impl.h"

void fit_loop_prepare(mr_strategy *s, const mr_fit_state *from, int epochs, int64_t n_train,
                      mr_epoch_logs *history) {
    s->from = from ? *from : (mr_fit_state){0};
    if (s->from.position > n_train) s->from.position = n_train;
    s->state = (mr_fit_state){
        .epoch = s->from.epoch, .global_step = s->from.global_step, .history = history};
    for (int e = 0; from && e < from->n_history && e < epochs; e++)
        history[s->state.n_history++] = from->history[e];
}

void fit_loop_begin(fit_loop *loop, replica *rep) {
    const mr_strategy *s = rep->s;
    *loop = (fit_loop){
        .rep = rep, .end = FIT_RUNNING, .global_step = s->from.global_step, .epoch = s->from.epoch};
}

void fit_loop_epoch_begin(fit_loop *loop) {
    const mr_strategy *s = loop->rep->s;
    loop->augp = NULL;
    if (s->aug != NULL) {
        loop->aug = *s->aug;
        loop->aug.epoch = loop->epoch;
        loop->augp = &loop->aug;
    }
    const mr_fit_state *from = &s->from;
    const int resumed = loop->epoch == from->epoch;
    loop->t0 = mr_now_s();
    loop->epoch_loss = resumed ? from->epoch_loss : 0.0;
    loop->epoch_correct = resumed ? from->epoch_correct : 0.0;
    loop->seconds_before = resumed ? from->epoch_seconds : 0.0;
    loop->seen = resumed ? from->seen : 0;
    loop->lr = 0.0f;
    loop->g = resumed ? from->step : 0;
    loop->gbegin = resumed ? from->position : 0;
    loop->loaded = 0;
    loop->e_compute = loop->e_comm = loop->e_data = loop->e_step = 0.0;
    loop->slowest = -1;
    loop->skipped = 0;
}

void fit_loop_epoch_figures(const fit_loop *loop, int label_width, mr_epoch_logs *logs) {
    const double w = (double)label_width;
    logs->loss = loop->seen ? loop->epoch_loss / (double)loop->seen : 0.0;
    logs->accuracy = loop->seen ? loop->epoch_correct / ((double)loop->seen * w) : 0.0;
}

void fit_loop_record_step(const fit_loop *loop, int64_t ga) {
    mr_fit_state *state = &loop->rep->s->state;
    *state = (mr_fit_state){.epoch = loop->epoch,
                            .step = loop->g + 1,
                            .position = loop->gbegin + ga,
                            .global_step = loop->global_step,
                            .epoch_loss = loop->epoch_loss,
                            .epoch_correct = loop->epoch_correct,
                            .seen = loop->seen,
                            .epoch_seconds = loop->seconds_before + mr_now_s() - loop->t0,
                            .n_history = state->n_history,
                            .history = state->history};
}

void fit_loop_record_epoch(const fit_loop *loop, mr_epoch_logs *logs, double t1) {
    mr_strategy *s = loop->rep->s;
    mr_fit_state *state = &s->state;
    logs->train_seconds = loop->seconds_before + t1 - loop->t0;
    logs->samples_per_sec = (double)s->n_train / logs->train_seconds;
    logs->lr = loop->lr;
    logs->skipped = loop->skipped;
    logs->compute_seconds = loop->e_compute;
    logs->comm_seconds = loop->e_comm;
    logs->data_seconds = loop->e_data;
    logs->step_seconds = loop->e_step;
    logs->slowest_replica = s->R > 1 ? loop->slowest : -1; /* one replica: no straggler */
    state->history[state->n_history] = *logs;
    state->history[state->n_history++].val_confusion = NULL; /* the buffer moves on */
    *state = (mr_fit_state){.epoch = loop->epoch + 1,
                            .global_step = loop->global_step,
                            .n_history = state->n_history,
                            .history = state->history};
}

void fit_loop_epoch_close(fit_loop *loop, int stopping) {
    const mr_strategy *s = loop->rep->s;
    if (stopping)
        loop->end = FIT_DONE;
    else if (loop->epoch + 1 >= s->plan.epochs)
        loop->end = FIT_DONE; /* the last epoch */
    else if (fit_max_steps_reached(loop))
        loop->end = FIT_PAUSED; /* --max-steps before the last epoch: nothing restored */
}
