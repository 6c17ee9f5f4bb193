/* test_cuda_graphs.c: [net] cuda_graphs on emulated GPUs (meson test
 * `cuda_graphs`, -Dgpu_emulation=true builds only; strategies/fit_graph.c).
 *
 * - With graphs on, a steady step of each small shipped config on 1 GPU at
 *   batch 64 is 1 graph launch, the input's upload (1 H2D copy), 1 host
 *   sync, nothing else queued outside the graph, no allocation: the counts
 *   of steps 5 and 6 (after the eager first step and one recording per
 *   input buffer) are the same and within that.
 * - The weights (mr_params_hash) and the epoch's loss with graphs on are
 *   bitwise those with graphs off, on 1 and 2 GPUs, with an epoch whose
 *   last batch is partial (that one runs eagerly), over 2 epochs (the
 *   graphs recorded in the first are replayed in the second);
 *   fashion_cnn2.cfg checks [dropout]'s masks, whose step a replay reads
 *   from the device.
 * - On 2 GPUs each replica's steady step is 1 graph launch with the
 *   all-reduce inside it, the upload and at most 1 host sync.
 * - cuda_graphs = 0 launches no graph.
 * Counts come from the emulator (tests/gpu_emu/emu_counters.h). */
#include <check.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategies/check_sync.h"
#include "strategies/strategy.h"
#include "tests/gpu_emu/emu_counters.h"
#include "tests/testutil.h"

enum { BATCH = 64 };

typedef struct run_result {
    mr_emu_counters c; /* the device asked for */
    uint64_t hash;     /* replica 0's weights */
    double loss;       /* the last epoch's training loss */
} run_result;

/* cfg_name trained on `gpus` emulated GPUs at batch 64 each for `epochs`
 * epochs of n examples, graphs on or off; the counters of `device`. */
static run_result fit_on(const char *cfg_name, int64_t n, int epochs, int gpus, int graphs,
                         int device) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/configs/%s", cfg_name);
    char *path = tu_source_path(rel);
    char *text = tu_read_file(path, NULL);
    ck_assert_ptr_nonnull(text);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, path, NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(cfg.net.cuda_graphs, 1); /* the default */
    cfg.net.batch = BATCH;
    cfg.net.global_batch = BATCH * gpus;
    cfg.net.cuda_graphs = graphs;
    const int dims[3] = {28, 28, 1};
    mr_dataset ds;
    ck_assert_msg(mr_dataset_synthetic(&ds, n, 3, dims, 10, 9, &err) == MR_OK, "%s", err.msg);
    ds.scale = 1.0f / 255.0f;
    ds.synthetic = 0; /* the host converts and uploads each batch, as for files */
    mr_strategy_opts so = {0};
    snprintf(so.devices.kind, sizeof so.devices.kind, "gpu");
    so.devices.count = gpus;
    for (int g = 0; g < gpus; g++)
        so.devices.ordinals[g] = g;
    so.seed = 5;
    mr_strategy *s = NULL;
    mr_emu_counters_reset();
    ck_assert_msg(mr_strategy_create(&cfg, &so, n, &s, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_strategy_fit(s, &ds, n, n, 0, epochs, NULL, NULL, NULL, &err) == MR_OK, "%s",
                  err.msg);
    const mr_fit_state *st = mr_strategy_state(s);
    ck_assert_int_eq(st->n_history, epochs);
    run_result r;
    ck_assert_msg(mr_params_hash(mr_strategy_replica(s, 0), &r.hash, &err) == MR_OK, "%s", err.msg);
    r.loss = st->history[epochs - 1].loss;
    mr_strategy_destroy(s);
    mr_emu_counters_get(device, &r.c);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
    free(text);
    free(path);
    return r;
}

static mr_emu_counters diff(const mr_emu_counters *b, const mr_emu_counters *a) {
    mr_emu_counters d;
    const uint64_t *pa = (const uint64_t *)a, *pb = (const uint64_t *)b;
    uint64_t *pd = (uint64_t *)&d;
    for (size_t i = 0; i < sizeof d / sizeof(uint64_t); i++)
        pd[i] = pb[i] - pa[i];
    return d;
}

static const char *const small[] = {"fashion_mlp.cfg", "fashion_cnn.cfg", "fashion_cnn_bn.cfg"};

/* Steps 5 and 6 of a 1-GPU epoch: one replay each. */
START_TEST(steady_step_is_one_launch) {
    const char *cfg = small[_i];
    mr_emu_counters c4 = fit_on(cfg, 4 * BATCH, 1, 1, 1, 0).c,
                    c5 = fit_on(cfg, 5 * BATCH, 1, 1, 1, 0).c,
                    c6 = fit_on(cfg, 6 * BATCH, 1, 1, 1, 0).c;
    mr_emu_counters s5 = diff(&c5, &c4), s6 = diff(&c6, &c5);
    s5.queries = s6.queries = 0; /* how often a host polls depends on timing */
    printf("%s, graphs on, one step: %llu graph launches (%llu operations replayed), %llu ops "
           "queued outside, %llu H2D copies, %llu host syncs, %llu kernel launches outside, "
           "%llu allocations\n",
           cfg, (unsigned long long)s6.graph_launches, (unsigned long long)s6.ops_replayed,
           (unsigned long long)s6.ops, (unsigned long long)s6.copies[MR_EMU_COPY_H2D],
           (unsigned long long)s6.host_syncs, (unsigned long long)s6.launches,
           (unsigned long long)s6.allocs);
    fflush(stdout);
    ck_assert_msg(memcmp(&s5, &s6, sizeof s5) == 0, "%s: steps 5 and 6 differ", cfg);
    ck_assert_uint_eq(s6.graph_launches, 1);
    ck_assert_uint_gt(s6.ops_replayed, 10); /* the step is in the graph */
    /* outside it: the upload, one copy, and nothing else queued */
    ck_assert_uint_eq(s6.ops, 1);
    ck_assert_uint_eq(s6.copies[MR_EMU_COPY_H2D], 1);
    ck_assert_uint_eq(s6.copy_bytes[MR_EMU_COPY_H2D], sizeof(float) * BATCH * 28 * 28);
    ck_assert_uint_eq(s6.launches + s6.blas_calls + s6.dnn_calls + s6.nccl_calls + s6.memsets, 0);
    ck_assert_uint_le(s6.host_syncs, 1);
    ck_assert_uint_eq(s6.allocs, 0);
    ck_assert_uint_eq(s6.frees, 0);
}
END_TEST

/* On 2 GPUs, each replica's steady step: 1 graph launch holding the
 * all-reduce (no NCCL call outside it), the upload, at most 1 host sync,
 * no allocation. */
START_TEST(two_gpus_one_launch_each) {
    int count = 0;
    ck_assert_int_eq(cudaGetDeviceCount(&count), cudaSuccess);
    if (count < 2) return; /* MIRRORED_EMULATED_GPUS=1 */
    for (int d = 0; d < 2; d++) {
        mr_emu_counters c4 = fit_on("fashion_mlp.cfg", 8 * BATCH, 1, 2, 1, d).c,
                        c5 = fit_on("fashion_mlp.cfg", 10 * BATCH, 1, 2, 1, d).c;
        mr_emu_counters s5 = diff(&c5, &c4);
        printf("gpu:%d of 2, graphs on, one step: %llu graph launches, %llu NCCL calls outside, "
               "%llu H2D copies, %llu host syncs, %llu allocations\n",
               d, (unsigned long long)s5.graph_launches, (unsigned long long)s5.nccl_calls,
               (unsigned long long)s5.copies[MR_EMU_COPY_H2D], (unsigned long long)s5.host_syncs,
               (unsigned long long)s5.allocs);
        fflush(stdout);
        ck_assert_uint_eq(s5.graph_launches, 1);
        ck_assert_uint_eq(s5.nccl_calls + s5.launches + s5.blas_calls + s5.dnn_calls, 0);
        ck_assert_uint_eq(s5.copies[MR_EMU_COPY_H2D], 1);
        ck_assert_uint_le(s5.host_syncs, 1);
        ck_assert_uint_eq(s5.allocs, 0);
    }
}
END_TEST

/* Graphs on = graphs off, bit for bit: 2 epochs of 5.5 global batches
 * (the last one partial, eager), on 1 GPU and (when the emulator has
 * them) 2. cuda_graphs = 0 launches no graph. */
static void same_bits(const char *cfg, int gpus) {
    const int64_t n = (int64_t)(5 * BATCH + BATCH / 2) * gpus;
    run_result on = fit_on(cfg, n, 2, gpus, 1, 0), off = fit_on(cfg, n, 2, gpus, 0, 0);
    printf("%s on %d GPU(s): params_hash %016llx with graphs (%llu launches), %016llx without; "
           "loss %.17g, %.17g\n",
           cfg, gpus, (unsigned long long)on.hash, (unsigned long long)on.c.graph_launches,
           (unsigned long long)off.hash, on.loss, off.loss);
    fflush(stdout);
    ck_assert_uint_eq(off.c.graph_launches, 0);
    ck_assert_uint_ge(on.c.graph_launches, 2 * 5 - 1); /* all full updates but the first */
    ck_assert_msg(on.hash == off.hash, "%s on %d GPU(s): the weights differ with graphs", cfg,
                  gpus);
    ck_assert_mem_eq(&on.loss, &off.loss, sizeof on.loss);
}

/* the MLP, BN's batch statistics, and a [dropout] whose masks follow the
 * step (read from the device by a replay) */
static const char *const bits_cfgs[] = {"fashion_mlp.cfg", "fashion_cnn_bn.cfg",
                                        "fashion_cnn2.cfg"};

START_TEST(same_bits_one_gpu) {
    same_bits(bits_cfgs[_i], 1);
}
END_TEST

START_TEST(same_bits_two_gpus) {
    int count = 0;
    ck_assert_int_eq(cudaGetDeviceCount(&count), cudaSuccess);
    if (count < 2) return; /* MIRRORED_EMULATED_GPUS=1 */
    same_bits(bits_cfgs[_i], 2);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cuda_graphs");
    TCase *tc = tcase_create("graphs");
    tcase_set_timeout(tc, 1200);
    tcase_add_loop_test(tc, steady_step_is_one_launch, 0, 3);
    tcase_add_test(tc, two_gpus_one_launch_each);
    tcase_add_loop_test(tc, same_bits_one_gpu, 0, 3);
    tcase_add_loop_test(tc, same_bits_two_gpus, 0, 2);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
