/* test_bn_counts.c: BatchNormalization's kernel launches in a training step
 * on an emulated GPU (meson test `bn_counts`, -Dgpu_emulation=true builds
 * only): at most MAX_BN_LAUNCHES per layer and step (issue 42: the sums are
 * batchnorm_stats.h's tree, one launch each way, and the statistics are
 * finished by the per-element kernels).
 *
 * A small model (conv 3x3 16, then flatten, dense 10 softmax) trains on 1
 * emulated GPU at batch 64 on synthetic 28x28x1 images, with and without a
 * [batchnorm] (plain, and with sync = 1) after the convolution; a steady
 * step's launches (those of 3 steps less those of 2) with the layer, less
 * those without it, are the layer's. Counts come from
 * tests/gpu_emu/emu_counters.h. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "strategies/strategy.h"
#include "tests/gpu_emu/emu_counters.h"
#include "tests/testutil.h"

/* Forward: sums and normalize; backward: sums and dx (5: issue 42's bar). */
#define MAX_BN_LAUNCHES 5

enum { BATCH = 64 };

static const char *const bn_sections[] = {
    "",                        /* no batchnorm: the baseline */
    "[batchnorm]\n",           /* BN */
    "[batchnorm]\nsync = 1\n", /* SyncBatchNormalization's path */
};

/* Kernel launches on device 0 of a one-epoch fit of `steps` steps of the
 * model with `bn` after its convolution. */
static uint64_t fit_launches(const char *bn, int steps) {
    char text[1024];
    snprintf(text, sizeof text,
             "[net]\nglobal_batch = %d\nepochs = 1\noptimizer = sgd\nlearning_rate = 0.01\n"
             "seed = 1\n\n[input]\nshape = 28,28,1\n\n[conv2d]\nfilters = 16\nsize = 3\n"
             "padding = same\nuse_bias = 0\n\n%s\n[flatten]\n\n[dense]\nunits = 10\n"
             "activation = softmax\n",
             BATCH, bn);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "bn_counts.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    const int64_t n = (int64_t)steps * BATCH;
    const int dims[3] = {28, 28, 1};
    mr_dataset ds;
    ck_assert_msg(mr_dataset_synthetic(&ds, n, 3, dims, 10, 9, &err) == MR_OK, "%s", err.msg);
    ds.scale = 1.0f / 255.0f;
    mr_strategy_opts so = {0};
    snprintf(so.devices.kind, sizeof so.devices.kind, "gpu");
    so.devices.count = 1;
    so.devices.ordinals[0] = 0;
    so.seed = 5;
    mr_strategy *s = NULL;
    mr_emu_counters_reset();
    ck_assert_msg(mr_strategy_create(&cfg, &so, n, &s, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_strategy_fit(s, &ds, n, n, 0, 1, NULL, NULL, NULL, &err) == MR_OK, "%s",
                  err.msg);
    mr_strategy_destroy(s);
    mr_emu_counters c;
    mr_emu_counters_get(0, &c);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
    return c.launches;
}

/* A steady step's launches: 3 steps less 2 (creating the strategy, the
 * first step and the end of the epoch cancel out). */
static uint64_t step_launches(const char *bn) {
    return fit_launches(bn, 3) - fit_launches(bn, 2);
}

START_TEST(bn_launches_per_step) {
    const uint64_t base = step_launches(bn_sections[0]);
    const uint64_t with = step_launches(bn_sections[_i]);
    printf("a [batchnorm]%s: %llu kernel launches per step (%llu with, %llu without)\n",
           _i == 2 ? " with sync" : "", (unsigned long long)(with - base), (unsigned long long)with,
           (unsigned long long)base);
    fflush(stdout);
    ck_assert_uint_gt(with, base); /* the layer runs on the GPU: it launches something */
    ck_assert_msg(with - base <= MAX_BN_LAUNCHES,
                  "a [batchnorm] layer: %llu launches per step, over %d",
                  (unsigned long long)(with - base), MAX_BN_LAUNCHES);
}
END_TEST

int main(void) {
    Suite *s = suite_create("bn_counts");
    TCase *tc = tcase_create("counts");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, bn_launches_per_step, 1, 3);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
