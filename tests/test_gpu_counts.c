/* test_gpu_counts.c: what one training step gives an emulated GPU (meson
 * test `gpu_counts`, -Dgpu_emulation=true builds only), held to budgets.
 *
 * Each shipped Fashion-MNIST config (models/configs/) trains on 1 emulated
 * GPU at batch 64 on synthetic 28x28x1 images converted on the host and
 * uploaded, as a user's files are. Three runs of 2, 3 and 4 steps: the
 * differences 3-2 and 4-3 are one steady step each (creating the strategy,
 * the first step and the end of the epoch cancel out); they must be equal,
 * and each count exactly today's below: a change that adds a host
 * synchronisation, a copy, a memset, an allocation or a launch to a step
 * fails here, and so does one that removes some, until it writes the new
 * counts (and docs/gpus.md's table) in the same commit.
 *
 * On 2, 3 and 4 emulated GPUs (as many as the emulator has; meson test
 * `gpu_counts_4` runs this part alone on 4) the MLP's steady step is held
 * the same way on each replica: one host sync, the one of 1 GPU (the
 * all-reduce is not polled: nccl_comm.c's watchdog), with the gradients'
 * all-reduce its only NCCL call (one replica makes none) and the 1-GPU
 * step's operations plus its NCCL calls, under the default
 * buckets; and with a bucket per layer, one all-reduce per bucket started
 * during backward, still one host sync. And the device's loss sums, which
 * let a step wait once, are checked against the host's, bit for bit.
 *
 * Counts come from the emulator (tests/gpu_emu/emu_counters.h): kernel
 * launches, library calls, operations queued on streams, host syncs,
 * copies by direction and their bytes, allocations. Prints them all.
 * These are the eager step's counts ([net] cuda_graphs = 0); the replayed
 * graph's are test_cuda_graphs.c's. */
#include <check.h>
#include <math.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backends.h"
#include "models/model.h"
#include "strategies/strategy.h"
#include "tests/gpu_emu/emu_counters.h"
#include "tests/testutil.h"

/* Today's per-step counts on one GPU at batch 64 (exactly these). */
typedef struct budget {
    const char *cfg;
    uint64_t ops, launches, host_syncs, h2d_copies, d2h_copies, d2d_copies, d2d_bytes, memsets,
        allocs;
} budget;

static const budget budgets[] = {
    /* config            ops launches syncs H2D D2H D2D, bytes memsets allocations */
    {"fashion_mlp.cfg", 24, 10, 1, 3, 2, 0, 0, 1, 0},
    {"fashion_cnn.cfg", 22, 10, 1, 3, 2, 0, 0, 1, 0},
    {"fashion_cnn_bn.cfg", 39, 22, 1, 3, 2, 0, 0, 1, 0},
    {"fashion_resnet20.cfg", 196, 125, 1, 3, 2, 0, 0, 1, 0},
};
#define N_BUDGETS (int)(sizeof budgets / sizeof budgets[0])

enum { BATCH = 64 };

/* The counters of every device (out[0..gpus-1]) after a one-epoch fit of
 * `steps` steps of cfg on `gpus` emulated GPUs at batch 64 each, with
 * buckets of bucket_floats (a fresh strategy each time). */
static void fit_steps_all(const char *cfg_name, int steps, int gpus, size_t bucket_floats,
                          mr_emu_counters *out) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/configs/%s", cfg_name);
    char *path = tu_source_path(rel);
    char *text = tu_read_file(path, NULL);
    ck_assert_ptr_nonnull(text);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, path, NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    cfg.net.batch = BATCH;
    cfg.net.global_batch = BATCH * gpus;
    cfg.net.cuda_graphs = 0; /* the eager step's calls, each counted */
    const int64_t n = (int64_t)steps * BATCH * gpus;
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
    so.bucket_floats = bucket_floats;
    mr_strategy *s = NULL;
    mr_emu_counters_reset();
    ck_assert_msg(mr_strategy_create(&cfg, &so, n, &s, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_strategy_fit(s, &ds, n, n, 0, 1, NULL, NULL, NULL, &err) == MR_OK, "%s",
                  err.msg);
    mr_strategy_destroy(s);
    for (int d = 0; d < gpus; d++)
        mr_emu_counters_get(d, &out[d]);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
    free(text);
    free(path);
}

static mr_emu_counters fit_steps(const char *cfg_name, int steps) {
    mr_emu_counters c;
    fit_steps_all(cfg_name, steps, 1, 0, &c);
    return c;
}

/* b - a, field by field (every field is a uint64_t count). */
static mr_emu_counters diff(const mr_emu_counters *b, const mr_emu_counters *a) {
    mr_emu_counters d;
    const uint64_t *pa = (const uint64_t *)a, *pb = (const uint64_t *)b;
    uint64_t *pd = (uint64_t *)&d;
    for (size_t i = 0; i < sizeof d / sizeof(uint64_t); i++)
        pd[i] = pb[i] - pa[i];
    return d;
}

static void print_step(const char *cfg, int gpus, const mr_emu_counters *c) {
    printf(
        "%s, one step at batch %d on %d GPU(s): %llu ops queued, %llu kernel launches, "
        "%llu cuBLAS, %llu cuDNN, %llu NCCL calls, %llu event records and waits, %llu host syncs, "
        "copies H2D %llu (%llu B), D2H %llu (%llu B), D2D %llu (%llu B), %llu memsets, "
        "%llu allocations, %llu frees, %llu graph launches\n",
        cfg, BATCH, gpus, (unsigned long long)c->ops, (unsigned long long)c->launches,
        (unsigned long long)c->blas_calls, (unsigned long long)c->dnn_calls,
        (unsigned long long)c->nccl_calls, (unsigned long long)c->waits,
        (unsigned long long)c->host_syncs, (unsigned long long)c->copies[MR_EMU_COPY_H2D],
        (unsigned long long)c->copy_bytes[MR_EMU_COPY_H2D],
        (unsigned long long)c->copies[MR_EMU_COPY_D2H],
        (unsigned long long)c->copy_bytes[MR_EMU_COPY_D2H],
        (unsigned long long)c->copies[MR_EMU_COPY_D2D],
        (unsigned long long)c->copy_bytes[MR_EMU_COPY_D2D], (unsigned long long)c->memsets,
        (unsigned long long)c->allocs, (unsigned long long)c->frees,
        (unsigned long long)c->graph_launches);
    fflush(stdout);
}

#define EXACTLY(cfg, what, got, want)                                                              \
    ck_assert_msg((got) == (want), "%s: %s per step %llu, not today's %llu", cfg, what,            \
                  (unsigned long long)(got), (unsigned long long)(want))

START_TEST(steady_step_within_budget) {
    const budget *b = &budgets[_i];
    mr_emu_counters c2 = fit_steps(b->cfg, 2), c3 = fit_steps(b->cfg, 3), c4 = fit_steps(b->cfg, 4);
    mr_emu_counters s3 = diff(&c3, &c2), s4 = diff(&c4, &c3);
    s3.queries = s4.queries = 0; /* how often a host polls depends on timing */
    print_step(b->cfg, 1, &s4);
    ck_assert_msg(memcmp(&s3, &s4, sizeof s3) == 0,
                  "%s: steps 3 and 4 differ: the step is not steady (see the two lines above)",
                  b->cfg);
    EXACTLY(b->cfg, "operations queued", s4.ops, b->ops);
    EXACTLY(b->cfg, "kernel launches", s4.launches, b->launches);
    EXACTLY(b->cfg, "host syncs", s4.host_syncs, b->host_syncs);
    EXACTLY(b->cfg, "host-to-device copies", s4.copies[MR_EMU_COPY_H2D], b->h2d_copies);
    EXACTLY(b->cfg, "device-to-host copies", s4.copies[MR_EMU_COPY_D2H], b->d2h_copies);
    EXACTLY(b->cfg, "device-to-device copies", s4.copies[MR_EMU_COPY_D2D], b->d2d_copies);
    EXACTLY(b->cfg, "device-to-device bytes", s4.copy_bytes[MR_EMU_COPY_D2D], b->d2d_bytes);
    EXACTLY(b->cfg, "memsets", s4.memsets, b->memsets);
    EXACTLY(b->cfg, "allocations", s4.allocs, b->allocs);
    /* the context's own cuBLAS workspace (MR_CUDA_BLAS_WORKSPACE), never the pool */
    EXACTLY(b->cfg, "cuBLAS calls on its own pool", s4.blas_pool_calls, 0);
    /* what a step allocates it frees: no growth */
    ck_assert_uint_eq(s4.allocs, s4.frees);
}
END_TEST

/* On 2 to 4 emulated GPUs (as far as the emulator has them), each
 * replica's steady step: this many host syncs (1 GPU's), and with the
 * default buckets (the MLP's 0.4 MiB of weights: one) the gradients'
 * all-reduce is its only NCCL call (the MLP: no BN statistics to average);
 * with a bucket per layer, one all-reduce per bucket and the rest. Its
 * operations are 1 GPU's (budgets[0], the MLP) and its NCCL calls. */
enum {
    SYNCS_MULTI = 1,
    MLP_BUCKETS = 3 /* ends after Dense 10, Dense 64 and Dense 128
                    (all of them: the metric floats go alone) */
};

/* The steady step of each of `gpus` replicas, held as above. */
static void multi_gpu_step(int gpus, size_t bucket_floats, uint64_t nccl_calls) {
    mr_emu_counters c2[MR_MAX_GPUS], c3[MR_MAX_GPUS], c4[MR_MAX_GPUS];
    fit_steps_all("fashion_mlp.cfg", 2, gpus, bucket_floats, c2);
    fit_steps_all("fashion_mlp.cfg", 3, gpus, bucket_floats, c3);
    fit_steps_all("fashion_mlp.cfg", 4, gpus, bucket_floats, c4);
    char what[96];
    snprintf(what, sizeof what, "fashion_mlp.cfg on %d GPUs, buckets of %s floats", gpus,
             bucket_floats == 1 ? "1" : "the default");
    for (int d = 0; d < gpus; d++) {
        mr_emu_counters s3 = diff(&c3[d], &c2[d]), s4 = diff(&c4[d], &c3[d]);
        s3.queries = s4.queries = 0;
        printf("gpu:%d of %d (%s): ", d, gpus, what);
        print_step("fashion_mlp.cfg", gpus, &s4);
        ck_assert_msg(memcmp(&s3, &s4, sizeof s3) == 0, "%s: steps 3 and 4 differ", what);
        EXACTLY(what, "host syncs", s4.host_syncs, SYNCS_MULTI);
        EXACTLY(what, "NCCL calls", s4.nccl_calls, nccl_calls);
        EXACTLY(what, "operations queued", s4.ops, budgets[0].ops + nccl_calls);
        EXACTLY(what, "device-to-device copies", s4.copies[MR_EMU_COPY_D2D], 0);
    }
}

START_TEST(multi_gpu_within_budget) {
    int count = 0;
    ck_assert_int_eq(cudaGetDeviceCount(&count), cudaSuccess);
    for (int gpus = 2; gpus <= (count < 4 ? count : 4); gpus++) { /* none on 1 emulated GPU */
        multi_gpu_step(gpus, MR_BUCKETS_AUTO, 1);
        multi_gpu_step(gpus, 1, MLP_BUCKETS + 1);
    }
}
END_TEST

/* What the one sync rests on: the loss sums a GPU keeps on the device
 * (mr_model_train_batch with NULL sums, mr_model_take_sums) are the host's
 * sums to the bit, and the queued check for NaN and Inf
 * (mr_model_grads_nonfinite_begin) reads what the waiting one does, both
 * read after one mr_model_read_extra. */
START_TEST(queued_sums_are_the_hosts) {
    char *path = tu_source_path("models/configs/fashion_mlp.cfg");
    char *text = tu_read_file(path, NULL);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, path, NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    enum { B = 8 };
    mr_backend *be = NULL;
    ck_assert_msg(mr_backend_create(mr_backend_kind_find("gpu"), 0, &be, &err) == MR_OK, "%s",
                  err.msg);
    mr_model m;
    ck_assert_msg(mr_model_init(&m, be, &cfg, B, 3, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_model_queues_sums(&m), 1);
    float *in = mr_model_input_host(&m);
    for (int i = 0; i < B * 28 * 28; i++)
        in[i] = (float)((i * 37) % 101) / 101.0f;
    ck_assert_int_eq(mr_model_input_upload(&m, B, &err), MR_OK);
    int32_t labels[B];
    for (int i = 0; i < B; i++)
        labels[i] = (i * 3) % 10;
    double loss = 0.0, correct = 0.0;
    for (int r = 0; r < 2; r++) /* the host's sums of two batches */
        ck_assert_msg(mr_model_train_batch(&m, labels, B, (float)B, &loss, &correct, NULL, NULL,
                                           &err) == MR_OK,
                      "%s", err.msg);
    for (int r = 0; r < 2; r++) /* the device's */
        ck_assert_msg(mr_model_train_batch(&m, labels, B, (float)B, NULL, NULL, NULL, NULL, &err) ==
                          MR_OK,
                      "%s", err.msg);
    const double *flag = NULL;
    ck_assert_int_eq(mr_model_take_sums(&m, &err), MR_OK);
    ck_assert_int_eq(mr_model_grads_nonfinite_begin(&m, &flag, &err), MR_OK);
    float got[3];
    ck_assert_int_eq(mr_model_read_extra(&m, got, 3, &err), MR_OK);
    printf("loss sum %.9g (host %.9g), correct %g (host %g)\n", (double)got[0], loss,
           (double)got[1], correct);
    ck_assert(isfinite(loss) && loss > 0.0);
    ck_assert_mem_eq(&got[0], &(float){(float)loss}, sizeof(float));
    ck_assert_mem_eq(&got[1], &(float){(float)correct}, sizeof(float));
    ck_assert(got[2] == 0.0f);
    int any = 1;
    ck_assert_int_eq(mr_model_grads_nonfinite(&m, &any, &err), MR_OK);
    ck_assert(*flag == (double)any && any == 0);
    /* a NaN in the last gradient: both checks see it */
    const float nan = NAN;
    ck_assert_int_eq(mr_model_write(&m, mr_dfloat_at(m.grads, m.n_params - 1), &nan, 1, &err),
                     MR_OK);
    ck_assert_int_eq(mr_model_grads_nonfinite_begin(&m, &flag, &err), MR_OK);
    ck_assert_int_eq(mr_model_read_extra(&m, got, 3, &err), MR_OK);
    ck_assert(*flag == 1.0);
    ck_assert_int_eq(mr_model_grads_nonfinite(&m, &any, &err), MR_OK);
    ck_assert_int_eq(any, 1);
    mr_model_free(&m);
    mr_backend_destroy(be);
    mr_config_free(&cfg);
    free(text);
    free(path);
}
END_TEST

/* argv[1] "multi": the multi-GPU step alone (gpu_counts_4). */
int main(int argc, char **argv) {
    const int multi_only = argc > 1 && strcmp(argv[1], "multi") == 0;
    Suite *s = suite_create("gpu_counts");
    TCase *tc = tcase_create("counts");
    tcase_set_timeout(tc, 1200);
    if (!multi_only) tcase_add_loop_test(tc, steady_step_within_budget, 0, N_BUDGETS);
    tcase_add_test(tc, multi_gpu_within_budget);
    if (!multi_only) tcase_add_test(tc, queued_sums_are_the_hosts);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
