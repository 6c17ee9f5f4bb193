/* test_repeatable.c: the README's promise that the same seed and replica
 * count give bitwise the same weights, whatever cores the process may use:
 * one replica trained with every core of the machine and the
 * same under `taskset -c 0` end with the same params_hash. The model has a
 * Dense layer with 784 inputs, a GEMM whose K OpenBLAS blocks differently
 * with one thread and with several (backends/cpu/backend_cpu.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "tests/testutil.h"

static char exe[4096];
static char dir[4096];

/* 8x8 images; the second Dense multiplies (rows x 784) by (784 x 64). */
static const char *cfg =
    "[net]\nbatch=32\nepochs=1\nseed=5\nlearning_rate=0.01\n"
    "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=1/255\n"
    "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=784\nactivation=relu\n"
    "[dense]\nunits=64\nactivation=relu\n[dense]\nunits=4\nactivation=softmax\n";

static void setup(void) {
    char *p = tu_build_path("launch/mirrored_train");
    snprintf(exe, sizeof exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    tu_write_image_data(dir, "x.npy", "y.npy", 256, 4);
    free(tu_write_text(dir, "r.cfg", cfg));
}

/* Trains the config above on one replica, `prefix` before the command (taskset or
 * nothing), without the caller's OPENBLAS_NUM_THREADS (CI sets it), and
 * returns the run's params_hash in hash (17 chars). */
static void train(const char *prefix, const char *json, char *hash) {
    char cmd[16384], *out;
    snprintf(cmd, sizeof cmd,
             "cd %s && env -u OPENBLAS_NUM_THREADS %s %s r.cfg --devices cpu --quiet --json %s",
             dir, prefix, exe, json);
    int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "'%s' exited %d: %s", cmd, rc, out);
    free(out);
    tu_params_hash(dir, json, hash);
}

START_TEST(one_core_and_all_cores_alike) {
    if (mr_cpu_cores() < 2 || system("taskset -c 0 true >/dev/null 2>&1") != 0) {
        fprintf(stderr, "skipped: needs 2 cores and taskset\n");
        return;
    }
    char all[17], one[17];
    train("", "all.json", all);
    train("taskset -c 0", "one.json", one);
    ck_assert_msg(strcmp(all, one) == 0, "every core: %s, taskset -c 0: %s", all, one);
}
END_TEST

int main(void) {
    Suite *s = suite_create("repeatable");
    TCase *tc = tcase_create("repeatable");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, one_core_and_all_cores_alike);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
