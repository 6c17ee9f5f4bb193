/* early_stop.c: Keras's EarlyStopping rules (early_stop.h). */
#include "strategies/early_stop.h"

#include <limits.h>

void mr_early_stop_init(mr_early_stop *es, const mr_net_cfg *net) {
    *es = (mr_early_stop){.monitor = net->early_stopping,
                          .maximize = net->early_stopping == MR_MONITOR_VAL_ACCURACY ||
                                      net->early_stopping == MR_MONITOR_ACCURACY,
                          .min_delta =
                              net->min_delta < 0 ? -(double)net->min_delta : (double)net->min_delta,
                          .patience = net->patience,
                          .best_epoch = -1};
}

void mr_early_stop_init_monitor(mr_early_stop *es, mr_monitor monitor) {
    const mr_net_cfg net = {.early_stopping = monitor, .patience = INT_MAX};
    mr_early_stop_init(es, &net);
}

double mr_early_stop_value(const mr_early_stop *es, const mr_epoch_logs *logs) {
    switch (es->monitor) {
    case MR_MONITOR_VAL_LOSS:
        return logs->val_loss;
    case MR_MONITOR_VAL_ACCURACY:
        return logs->val_accuracy;
    case MR_MONITOR_LOSS:
        return logs->loss;
    case MR_MONITOR_ACCURACY:
        return logs->accuracy;
    case MR_MONITOR_NONE:
        break;
    }
    return 0.0;
}

int mr_monitor_improves(int maximize, double min_delta, int have_best, double best, double v) {
    if (!have_best) return 1;
    return maximize ? v - min_delta > best : v + min_delta < best;
}

mr_early_stop_action mr_early_stop_epoch(mr_early_stop *es, const mr_epoch_logs *logs) {
    if (es->monitor == MR_MONITOR_NONE || es->stopped) return MR_EARLY_STOP_NONE;
    const double v = mr_early_stop_value(es, logs);
    es->wait++;
    if (mr_monitor_improves(es->maximize, es->min_delta, es->have_best, es->best, v)) {
        es->best = v;
        es->have_best = 1;
        es->best_epoch = logs->epoch;
        es->wait = 0;
        return MR_EARLY_STOP_IMPROVED;
    }
    if (es->wait >= es->patience && logs->epoch > 0) {
        es->stopped = 1;
        return MR_EARLY_STOP_STOP;
    }
    return MR_EARLY_STOP_NONE;
}

const char *mr_monitor_name(mr_monitor m) {
    switch (m) {
    case MR_MONITOR_VAL_LOSS:
        return "val_loss";
    case MR_MONITOR_VAL_ACCURACY:
        return "val_accuracy";
    case MR_MONITOR_LOSS:
        return "loss";
    case MR_MONITOR_ACCURACY:
        return "accuracy";
    case MR_MONITOR_NONE:
        break;
    }
    return "none";
}
