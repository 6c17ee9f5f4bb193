/* test_early_stop.c: Keras 3's EarlyStopping rules (early_stop.h) on
 * sequences of epoch figures, worked by hand from the source of Keras
 * 3.15's keras.callbacks.EarlyStopping (mode auto, min_delta, patience). */
#include <check.h>
#include <math.h>

#include "strategies/early_stop.h"
#include "tests/testutil.h"

/* Runs the figures through a fresh state; returns the 0-based epoch that
 * stopped (-1: none) and fills best_epoch. */
static int run(mr_monitor mon, int patience, float min_delta, const double *v, int n,
               int *best_epoch, mr_early_stop_action *acts) {
    mr_net_cfg net = {.early_stopping = mon, .patience = patience, .min_delta = min_delta};
    mr_early_stop es;
    mr_early_stop_init(&es, &net);
    int stopped = -1;
    for (int e = 0; e < n && stopped < 0; e++) {
        mr_epoch_logs logs = {.epoch = e, .has_val = 1};
        logs.val_loss = logs.val_accuracy = logs.loss = logs.accuracy = v[e];
        mr_early_stop_action a = mr_early_stop_epoch(&es, &logs);
        if (acts) acts[e] = a;
        if (a == MR_EARLY_STOP_STOP) stopped = e;
    }
    *best_epoch = es.best_epoch;
    return stopped;
}

START_TEST(loss_patience) {
    /* val_loss 1.0, 0.8, 0.9, 0.85, 0.7: patience 2 stops at epoch 3 (two
     * epochs, 2 and 3, without beating 0.8); patience 3 reaches 0.7 */
    const double v[5] = {1.0, 0.8, 0.9, 0.85, 0.7};
    int best;
    mr_early_stop_action a[5];
    ck_assert_int_eq(run(MR_MONITOR_VAL_LOSS, 2, 0.0f, v, 5, &best, a), 3);
    ck_assert_int_eq(best, 1);
    ck_assert(a[0] == MR_EARLY_STOP_IMPROVED && a[1] == MR_EARLY_STOP_IMPROVED &&
              a[2] == MR_EARLY_STOP_NONE);
    ck_assert_int_eq(run(MR_MONITOR_VAL_LOSS, 3, 0.0f, v, 5, &best, NULL), -1);
    ck_assert_int_eq(best, 4);
    /* patience 0: the first epoch without improvement stops, never the first */
    ck_assert_int_eq(run(MR_MONITOR_LOSS, 0, 0.0f, v, 5, &best, NULL), 2);
    const double flat[2] = {1.0, 1.0};
    ck_assert_int_eq(run(MR_MONITOR_LOSS, 0, 0.0f, flat, 2, &best, NULL), 1);
    ck_assert_int_eq(best, 0);
}
END_TEST

START_TEST(accuracy_and_min_delta) {
    /* accuracies rise: 0.5, 0.55, 0.56, 0.6 with min_delta 0.045: 0.55 is
     * an improvement (0.55 - 0.045 > 0.5), 0.56 not (0.515 < 0.55), 0.6
     * is (0.555 > 0.55) */
    const double v[4] = {0.5, 0.55, 0.56, 0.6};
    int best;
    mr_early_stop_action a[4];
    ck_assert_int_eq(run(MR_MONITOR_VAL_ACCURACY, 1, 0.045f, v, 4, &best, a), 2);
    ck_assert_int_eq(best, 1);
    ck_assert_int_eq(run(MR_MONITOR_ACCURACY, 2, 0.045f, v, 4, &best, a), -1);
    ck_assert_int_eq(best, 3);
    ck_assert(a[2] == MR_EARLY_STOP_NONE && a[3] == MR_EARLY_STOP_IMPROVED);
    /* a falling accuracy never improves: stops after patience */
    const double down[3] = {0.9, 0.8, 0.7};
    ck_assert_int_eq(run(MR_MONITOR_ACCURACY, 1, 0.0f, down, 3, &best, NULL), 1);
    ck_assert_int_eq(best, 0);
    /* a NaN never improves */
    const double nan[3] = {1.0, NAN, NAN};
    ck_assert_int_eq(run(MR_MONITOR_VAL_LOSS, 2, 0.0f, nan, 3, &best, NULL), 2);
    ck_assert_int_eq(best, 0);
}
END_TEST

START_TEST(improves_as_keras) {
    ck_assert(mr_monitor_improves(0, 0.1, 0, 0.0, 5.0)); /* no best yet */
    ck_assert(mr_monitor_improves(0, 0.1, 1, 1.0, 0.85));
    ck_assert(!mr_monitor_improves(0, 0.1, 1, 1.0, 0.95));
    ck_assert(mr_monitor_improves(1, 0.1, 1, 0.5, 0.65));
    ck_assert(!mr_monitor_improves(1, 0.1, 1, 0.5, 0.55));
    ck_assert(!mr_monitor_improves(0, 0.0, 1, 1.0, NAN));
}
END_TEST

START_TEST(off_and_names) {
    const double v[3] = {1.0, 2.0, 3.0};
    int best;
    ck_assert_int_eq(run(MR_MONITOR_NONE, 0, 0.0f, v, 3, &best, NULL), -1);
    ck_assert_int_eq(best, -1);
    ck_assert_str_eq(mr_monitor_name(MR_MONITOR_VAL_LOSS), "val_loss");
    ck_assert_str_eq(mr_monitor_name(MR_MONITOR_ACCURACY), "accuracy");
    ck_assert_str_eq(mr_monitor_name(MR_MONITOR_NONE), "none");
    mr_net_cfg net = {.early_stopping = MR_MONITOR_VAL_ACCURACY};
    mr_early_stop es;
    mr_early_stop_init(&es, &net);
    mr_epoch_logs logs = {.val_accuracy = 0.25, .val_loss = 7.0};
    ck_assert(mr_early_stop_value(&es, &logs) == 0.25);
}
END_TEST

int main(void) {
    Suite *s = suite_create("early_stop");
    TCase *tc = tcase_create("early_stop");
    tcase_add_test(tc, loss_patience);
    tcase_add_test(tc, accuracy_and_min_delta);
    tcase_add_test(tc, off_and_names);
    tcase_add_test(tc, improves_as_keras);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
