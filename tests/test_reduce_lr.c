/* test_reduce_lr.c: Keras 3's ReduceLROnPlateau rules (reduce_lr.h) on
 * sequences of epoch figures, worked by hand from the source of Keras
 * 3.15's keras.callbacks.ReduceLROnPlateau (mode auto). */
#include <check.h>

#include "strategies/reduce_lr.h"
#include "tests/testutil.h"

/* Runs v through a fresh state at rate 1; cut[e] = the rate after epoch e. */
static void run(mr_monitor mon, float factor, int patience, float min_delta, int cooldown,
                float min_lr, const double *v, int n, float *cut) {
    mr_net_cfg net = {.reduce_lr_on_plateau = mon,
                      .reduce_lr_factor = factor,
                      .reduce_lr_patience = patience,
                      .reduce_lr_min_delta = min_delta,
                      .reduce_lr_cooldown = cooldown,
                      .min_lr = min_lr};
    mr_reduce_lr r;
    mr_reduce_lr_init(&r, &net, 1.0f);
    for (int e = 0; e < n; e++) {
        mr_epoch_logs logs = {.epoch = e};
        logs.val_loss = logs.val_accuracy = logs.loss = logs.accuracy = v[e];
        mr_reduce_lr_epoch(&r, &logs);
        cut[e] = r.lr;
    }
}

START_TEST(patience_and_factor) {
    /* val_loss flat after epoch 0, patience 2: cuts after epochs 2 and 4 */
    const double v[6] = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
    float lr[6];
    run(MR_MONITOR_VAL_LOSS, 0.5f, 2, 0.0f, 0, 0.0f, v, 6, lr);
    ck_assert(lr[0] == 1.0f && lr[1] == 1.0f && lr[2] == 0.5f && lr[3] == 0.5f && lr[4] == 0.25f &&
              lr[5] == 0.25f);
    /* min_delta: 0.95 is no improvement on 1.0 with min_delta 0.1 */
    const double w[3] = {1.0, 0.95, 0.5};
    run(MR_MONITOR_LOSS, 0.1f, 1, 0.1f, 0, 0.0f, w, 3, lr);
    ck_assert(lr[0] == 1.0f && lr[1] == (float)0.1 && lr[2] == (float)0.1);
    /* an accuracy must rise */
    const double a[3] = {0.5, 0.4, 0.6};
    run(MR_MONITOR_ACCURACY, 0.5f, 1, 0.0f, 0, 0.0f, a, 3, lr);
    ck_assert(lr[1] == 0.5f && lr[2] == 0.5f);
}
END_TEST

START_TEST(cooldown_and_min_lr) {
    /* flat: patience 1, cooldown 2: cut after epoch 1; epochs 2 and 3 in
     * cooldown (wait stays 0; the counter ends at epoch 3, which counts
     * again), so the next cut is after epoch 3... worked step by step:
     * e1: wait 1 -> cut, cooldown 2; e2: cooldown 1, wait 0, in cooldown;
     * e3: cooldown 0, wait 0, not in cooldown: wait 1 -> cut. */
    const double v[5] = {1.0, 1.0, 1.0, 1.0, 1.0};
    float lr[5];
    run(MR_MONITOR_VAL_LOSS, 0.5f, 1, 0.0f, 2, 0.0f, v, 5, lr);
    ck_assert(lr[0] == 1.0f && lr[1] == 0.5f && lr[2] == 0.5f && lr[3] == 0.25f);
    /* min_lr: never below, and no more cuts once there */
    run(MR_MONITOR_VAL_LOSS, 0.1f, 1, 0.0f, 0, 0.05f, v, 5, lr);
    ck_assert(lr[1] == 0.1f && lr[2] == 0.05f && lr[3] == 0.05f && lr[4] == 0.05f);
    /* off */
    run(MR_MONITOR_NONE, 0.1f, 0, 0.0f, 0, 0.0f, v, 5, lr);
    ck_assert(lr[4] == 1.0f);
}
END_TEST

int main(void) {
    Suite *s = suite_create("reduce_lr");
    TCase *tc = tcase_create("reduce_lr");
    tcase_add_test(tc, patience_and_factor);
    tcase_add_test(tc, cooldown_and_min_lr);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
