/* reduce_lr.c: Keras's ReduceLROnPlateau rules (reduce_lr.h). */
#include "strategies/reduce_lr.h"

#include "strategies/early_stop.h" /* reading the monitor, and what improves */

void mr_reduce_lr_init(mr_reduce_lr *r, const mr_net_cfg *net, float lr) {
    const mr_monitor m = net->reduce_lr_on_plateau;
    *r = (mr_reduce_lr){.monitor = m,
                        .maximize = m == MR_MONITOR_VAL_ACCURACY || m == MR_MONITOR_ACCURACY,
                        .factor = net->reduce_lr_factor,
                        .min_delta = net->reduce_lr_min_delta,
                        .min_lr = net->min_lr,
                        .patience = net->reduce_lr_patience,
                        .cooldown = net->reduce_lr_cooldown,
                        .lr = lr};
}

int mr_reduce_lr_epoch(mr_reduce_lr *r, const mr_epoch_logs *logs) {
    if (r->monitor == MR_MONITOR_NONE) return 0;
    const mr_early_stop view = {.monitor = r->monitor};
    const double v = mr_early_stop_value(&view, logs);
    if (r->cooldown_counter > 0) {
        r->cooldown_counter--;
        r->wait = 0;
    }
    if (mr_monitor_improves(r->maximize, r->min_delta, r->have_best, r->best, v)) {
        r->best = v;
        r->have_best = 1;
        r->wait = 0;
        return 0;
    }
    if (r->cooldown_counter > 0) return 0;
    if (++r->wait < r->patience) return 0;
    /* old_lr > np.float32(min_lr); new = max(old x factor, min_lr), kept in float32 */
    if (!((double)r->lr > (double)(float)r->min_lr)) return 0;
    double next = (double)r->lr * r->factor;
    if (next < r->min_lr) next = r->min_lr;
    r->lr = (float)next;
    r->cooldown_counter = r->cooldown;
    r->wait = 0;
    return 1;
}
