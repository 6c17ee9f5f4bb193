/* test_mpirun_gpu.c: mirrored_train on GPUs under mpirun as a user runs it
 * (meson test `mpirun_gpu`, CUDA builds with MPI only): one GPU per
 * process, the processes' GPUs joined by the NCCL communicator across
 * processes (backends/cuda/nccl_comm.c: process 0's unique id through the
 * job's all-gather, then ncclCommInitRank on every rank).
 *
 *   - `mpirun -np 2 mirrored_train --devices gpu` trains bitwise like one
 *     process driving both GPUs (`--devices gpu:0,1`, ncclCommInitAll): the
 *     same params_hash and the same final accuracies. Why bitwise: replica
 *     g has GPU g and global shard g in both runs (node-local rank k takes
 *     the k-th GPU), so each replica's forward, backward and optimizer run
 *     the same kernels on the same GPU and inputs, which cuBLAS and our
 *     kernels make bit-reproducible; what remains is the all-reduce, and
 *     with 2 replicas any algorithm NCCL picks (ring, tree, NVLS; within or
 *     across processes) computes each sum as one rounded a+b, which IEEE
 *     float makes commutative: both runs hold the same bits. The metrics
 *     (f64 sums over 2 replicas) agree for the same reason;
 *   - the start line under mpirun names the NCCL all-reduce and each
 *     rank's GPU (node-local rank k takes the k-th: gpu:0 and gpu:1), and
 *     the JSON summary lists them; NCCL itself refuses two ranks on one
 *     device;
 *   - `mpirun -np 3` with 2 GPUs visible (`-np 2` with 1) fails on every
 *     rank with exit 2 and one line naming the too few GPUs.
 *
 * Without a GPU this prints "SKIP: no GPU: <reason>" and exits 77 (meson's
 * SKIP); likewise, with the reason, where mpirun cannot start a job. With
 * one GPU the cases that need 2 print "SKIP: needs 2 GPUs, 1 visible
 * (...)" and the rest runs. No check judges speed: a run that hangs is
 * killed by `timeout` (exit 124, which fails the check). Check runs without fork:
 * discovery has initialised the CUDA runtime, which a forked child cannot
 * use (the child processes here exec at once, which is fine). Without
 * Check's fork its timeouts do not apply, so every mpirun runs under
 * coreutils `timeout`. mpirun runs with -q (no help banners) and
 * --oversubscribe, as root with the OMPI variables that tests/meson.build
 * sets. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/clock.h"
#include "backends/gpu_list.h"
#include "tests/testutil.h"

/* Seconds after which a run that should take a few is killed (a hang). */
#define RUN_LIMIT_S 300

static char exe[4096];
static char dir[4096];
static char mpirun_path[4096];
static char pair[128]; /* CUDA_VISIBLE_DEVICES naming the first two visible GPUs (one if one) */
static int n_pair;     /* how many GPUs pair names: 1 or 2 */

static const char *good_cfg = "[net]\nglobal_batch=16\nepochs=2\nvalidation_split=0.2\nseed=3\n"
                              "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
                              "test_images=x.npy\ntest_labels=y.npy\nscale=1/255\n"
                              "[input]\nshape=8,8,1\n[flatten]\n"
                              "[dense]\nunits=16\nactivation=relu\n"
                              "[dense]\nunits=4\nactivation=softmax\n";

static const char *conv_cfg = "[net]\nglobal_batch=16\nepochs=1\nseed=3\n"
                              "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
                              "test_images=x.npy\ntest_labels=y.npy\nscale=1/255\n"
                              "[input]\nshape=8,8,1\n[conv2d]\nfilters=4\nsize=3\n"
                              "activation=relu\n[flatten]\n"
                              "[dense]\nunits=4\nactivation=softmax\n";

/* Runs `mpirun MPIRUN_ARGS sh -c SCRIPT` in dir under `timeout`; the
 * script sees $T (the executable). Returns the exit status (124: killed
 * by the time limit). */
static int mpirun(const char *mpirun_args, const char *script, char **out, double *seconds) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "cd %s && T=%s timeout -k 10 %d %s -q --oversubscribe %s -x T sh -c '%s'", dir, exe,
             RUN_LIMIT_S, mpirun_path, mpirun_args, script);
    double t0 = mr_now_s();
    int rc = tu_run(cmd, out);
    if (seconds) *seconds = mr_now_s() - t0;
    return rc;
}

/* mpirun that must succeed; returns its output (malloc'd). */
static char *mpirun_ok(const char *mpirun_args, const char *script) {
    char *out = NULL;
    int rc = mpirun(mpirun_args, script, &out, NULL);
    ck_assert_msg(rc == 0, "'%s': exit %d: %s", script, rc, out);
    return out;
}

/* mirrored_train ARGS as one process (no mpirun) on the two GPUs; must succeed. */
static char *train_ok(const char *args) {
    char cmd[16384], *out = NULL;
    snprintf(cmd, sizeof cmd, "cd %s && CUDA_VISIBLE_DEVICES=%s timeout -k 10 %d %s %s", dir, pair,
             RUN_LIMIT_S, exe, args);
    int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "'%s': exit %d: %s", args, rc, out);
    return out;
}

/* Occurrences of `what` in s. Not inlined: GCC 12 then takes s for a
 * pointer to the caller's local (a false -Wdangling-pointer). */
__attribute__((noinline)) static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* The first line of s containing `what` (into buf), or "(none)". Not
 * inlined, like count(). */
__attribute__((noinline)) static const char *line_with(const char *s, const char *what, char *buf,
                                                       size_t n) {
    const char *p = strstr(s, what);
    if (p == NULL) return "(none)";
    while (p > s && p[-1] != '\n')
        p--;
    size_t len = strcspn(p, "\n");
    snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), p);
    return buf;
}

/* The value of "key" in a --json file's text, up to its comma or line end
 * (into buf, n > 1); fails the test when the key is missing. */
static void json_value(const char *json, const char *key, char *buf, size_t n) {
    char k[128];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(json, k);
    ck_assert_msg(p != NULL, "no %s in %s", key, json);
    p += strlen(k);
    size_t len = strcspn(p, ",\n");
    snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), p);
}

/* The two runs' --json files agree on key. */
static void same_value(const char *json_a, const char *json_b, const char *key) {
    char *a = tu_read_in(dir, json_a), *b = tu_read_in(dir, json_b);
    ck_assert_msg(a && b, "missing %s or %s", json_a, json_b);
    char va[64], vb[64];
    json_value(a, key, va, sizeof va);
    json_value(b, key, vb, sizeof vb);
    ck_assert_msg(strcmp(va, vb) == 0, "%s: %s %s, %s %s", key, json_a, va, json_b, vb);
    free(a), free(b);
}

START_TEST(two_processes_equal_one_process_on_two_gpus) {
    char x[256];
    snprintf(x, sizeof x, "-np 2 -x CUDA_VISIBLE_DEVICES=%s", pair);
    char *out = mpirun_ok(x, "exec $T good.cfg --devices gpu --epochs 1 --json a.json");
    char line[1024];
    printf("mpirun -np 2: %s\n", line_with(out, "replicas", line, sizeof line));
    /* one start line: 2 ranks, rank 0's GPU, rank 1 with one of its own, NCCL */
    ck_assert_msg(strstr(out, "2 replicas on 2 processes (") && strstr(out, ": rank 0 gpu:0; ") &&
                      strstr(out, ": rank 1 gpu:1)") && count(out, "NCCL all-reduce (nccl)") == 1 &&
                      count(out, "Total params") == 1 && count(out, "Test loss") == 1 &&
                      count(out, "Epoch 1/1") == 1,
                  "%s", out);
    free(out);
    char *json = tu_read_in(dir, "a.json");
    ck_assert_msg(json && strstr(json, "\"replicas\": 2") && strstr(json, "\"processes\": 2") &&
                      strstr(json, "\"communicator\": \"nccl\"") &&
                      strstr(json, "\"devices\": [\"gpu:0\", \"gpu:1\"]"),
                  "%s", json ? json : "no a.json");
    free(json);

    out = train_ok("good.cfg --devices gpu:0,1 --epochs 1 --json b.json");
    printf("one process: %s\n", line_with(out, "replicas", line, sizeof line));
    ck_assert_msg(strstr(out, "2 replicas (gpu:0, gpu:1), NCCL all-reduce (nccl)"), "%s", out);
    free(out);
    json = tu_read_in(dir, "b.json");
    ck_assert_msg(json && strstr(json, "\"processes\": 1") &&
                      strstr(json, "\"communicator\": \"nccl\""),
                  "%s", json ? json : "no b.json");
    free(json);

    /* bitwise the same weights, hence the same accuracies (header comment) */
    char a[17], b[17];
    tu_params_hash(dir, "a.json", a);
    tu_params_hash(dir, "b.json", b);
    printf("params_hash: mpirun %s, one process %s\n", a, b);
    ck_assert_msg(strcmp(a, b) == 0, "params_hash: mpirun -np 2 %s, one process %s", a, b);
    same_value("a.json", "b.json", "accuracy");
    same_value("a.json", "b.json", "test_accuracy");
    same_value("a.json", "b.json", "test_loss");
}
END_TEST

/* 3 ranks on one node with 2 GPUs: every rank finds too few, they agree,
 * rank 0 says it once; nothing waits in NCCL's init for a missing rank. */
/* A rank that stops answering mid-training (MIRRORED_DEBUG_FAIL stall):
 * the other ends the job with the collective timeout's message, well
 * within the time limit, instead of hanging. Every host wait for a GPU is
 * bounded by the timeout only if no copy blocks inside the CUDA runtime:
 * a copy to or from pageable host memory does (the CUDA runtime returns
 * from it only once it is done), so the step's metrics and --check-sync
 * go through pinned staging. */
START_TEST(hung_rank_times_out) {
    /* with --check-sync, its read of the weights' hashes comes first after
     * the stall; without, the read of the step's metrics */
    const char *checks[] = {"", " --check-sync 1"};
    for (int v = 0; v < 2; v++) {
        char x[256], script[512], *out = NULL;
        snprintf(x, sizeof x, "-np 2 -x CUDA_VISIBLE_DEVICES=%s -x MIRRORED_DEBUG_FAIL=1:3:stall",
                 pair);
        snprintf(script, sizeof script,
                 "exec $T good.cfg --devices gpu --epochs 50 --collective-timeout 3%s", checks[v]);
        double t;
        int rc = mpirun(x, script, &out, &t);
        /* the end of the output: Check's messages have a size limit */
        const char *tail = strlen(out) > 1500 ? out + strlen(out) - 1500 : out;
        printf("hung rank%s: exit %d after %.1f s: %s\n", checks[v], rc, t, tail);
        /* not 124: the job ended before `timeout` killed it */
        ck_assert_msg(rc != 0 && rc != 124, "%s: exit %d after %.1f s", checks[v], rc, t);
        ck_assert_msg(strstr(out, " 3 s"), "%s: no collective-timeout message", checks[v]);
        free(out);
    }
}
END_TEST

START_TEST(too_few_gpus_for_the_ranks) {
    char x[256], want[128], *out;
    double t;
    snprintf(x, sizeof x, "-np %d -x CUDA_VISIBLE_DEVICES=%s", n_pair + 1, pair);
    int rc = mpirun(x, "exec $T good.cfg --devices gpu --epochs 1 --metrics bad.csv", &out, &t);
    printf("mpirun -np %d on %d GPUs: exit %d after %.1f s: %s", n_pair + 1, n_pair, rc, t, out);
    /* a wait in NCCL's init for a missing rank would end in `timeout` (124) */
    ck_assert_msg(rc == 2, "exit %d after %.1f s: %s", rc, t, out);
    snprintf(want, sizeof want, "--devices gpu: %d processes on this node but %d GPU%s for them",
             n_pair + 1, n_pair, n_pair == 1 ? "" : "s");
    ck_assert_msg(count(out, "mirrored_train: ") == 1 && count(out, "\n") == 1 && strstr(out, want),
                  "%s", out);
    free(out);
    char *m = tu_read_in(dir, "bad.csv");
    ck_assert_msg(m == NULL, "a metrics file was left behind");
}
END_TEST

/* A convolution's cuDNN algorithms are on the start line and in the JSON,
 * with whether the run is deterministic. On emulated GPUs
 * (tests/gpu_emu/cudnn_emu.h) the heuristics are steered: when cuDNN
 * offers only a non-deterministic backward-filter algorithm in FMA math,
 * the run says so; when it offers no FMA algorithm at all, the run fails
 * with one line naming the layer. On real GPUs only the first part. */
START_TEST(conv_algorithms_reported) {
    char *out = train_ok("conv.cfg --devices gpu:0 --epochs 1 --json conv.json");
    char line[512];
    printf("cuDNN: %s\n", line_with(out, "Kernels: ", line, sizeof line));
    ck_assert_msg(strstr(out, "Kernels: conv2d: fwd ") && strstr(out, "bwd filter "), "%s", out);
    char *js = tu_read_in(dir, "conv.json");
    ck_assert_msg(js && strstr(js, "\"kernels\": {\"conv2d\": \"fwd "), "%s", js);
    int det = strstr(out, "(deterministic: the same bits") != NULL;
    ck_assert_msg(strstr(js, det ? "\"deterministic\": true" : "\"deterministic\": false"), "%s",
                  js);
    free(js), free(out);
    if (strncmp(tu_gpus()->gpu[0].name, "Emulated GPU", 12) != 0) return;
    ck_assert_msg(det, "the emulated cuDNN's default lists have deterministic FMA algorithms");
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "cd %s && MIRRORED_EMU_CUDNN_PERF='bwd_filter=1:tensor,0:fma:nondet' "
             "timeout -k 10 %d %s conv.cfg --devices gpu:0 --epochs 1 --json nondet.json",
             dir, RUN_LIMIT_S, exe);
    int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "bwd filter ALGO_0 (NOT deterministic"), "exit %d: %s", rc,
                  out);
    free(out);
    js = tu_read_in(dir, "nondet.json");
    ck_assert_msg(js && strstr(js, "\"deterministic\": false"), "%s", js);
    free(js);
    snprintf(cmd, sizeof cmd,
             "cd %s && MIRRORED_EMU_CUDNN_PERF='fwd=1:tensor,0:default' "
             "timeout -k 10 %d %s conv.cfg --devices gpu:0 --epochs 1",
             dir, RUN_LIMIT_S, exe);
    rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 1 &&
                      strstr(out, "[conv2d] conv2d: cuDNN offers no forward algorithm in FMA"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* The executable, and the data and .cfg in a fresh folder (once). */
static void setup(void) {
    char *p = tu_build_path("launch/mirrored_train");
    snprintf(exe, sizeof exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    tu_write_image_data(dir, "x.npy", "y.npy", 400, 4);
    free(tu_write_text(dir, "good.cfg", good_cfg));
    free(tu_write_text(dir, "conv.cfg", conv_cfg));
}

/* pair: "a,b" of CUDA_VISIBLE_DEVICES's first two entries (as given:
 * indices or UUIDs), else "0,1": both runs then see the same two GPUs; with
 * one GPU visible, its entry, else "0". */
static void first_two_gpus(int visible) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    n_pair = visible < 2 ? 1 : 2;
    snprintf(pair, sizeof pair, n_pair == 1 ? "0" : "0,1");
    if (v == NULL || v[0] == '\0') return;
    size_t first = strcspn(v, ",");
    if (n_pair == 1 || v[first] != ',') {
        snprintf(pair, sizeof pair, "%.*s", (int)first, v);
        return;
    }
    size_t second = strcspn(v + first + 1, ",");
    snprintf(pair, sizeof pair, "%.*s", (int)(first + 1 + second), v);
}

int main(void) {
    const mr_gpu_list *gl = tu_gpus();
    if (gl->count == 0) {
        printf("SKIP: no GPU: %s\n", gl->reason[0] ? gl->reason : "none visible");
        return 77; /* meson's SKIP */
    }
    const char *m = getenv("MR_MPIRUN");
    snprintf(mpirun_path, sizeof mpirun_path, "%s", m && m[0] ? m : "mpirun");
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "timeout -k 10 60 %s -q --oversubscribe -np 1 true", mpirun_path);
    int rc = tu_run(cmd, &out);
    if (rc != 0) {
        printf("SKIP: %s cannot start a job (exit %d): %.*s\n", mpirun_path, rc,
               (int)strcspn(out, "\n"), out);
        free(out);
        return 77;
    }
    free(out);
    first_two_gpus(gl->count);
    Suite *s = suite_create("mpirun_gpu");
    TCase *tc = tcase_create("mpirun_gpu");
    tcase_add_unchecked_fixture(tc, setup, NULL);
    if (gl->count >= 2) {
        tcase_add_test(tc, two_processes_equal_one_process_on_two_gpus);
        tcase_add_test(tc, hung_rank_times_out);
    } else {
        printf("SKIP: needs 2 GPUs, %d visible, one per process for mpirun -np 2 "
               "(two_processes_equal_one_process_on_two_gpus, hung_rank_times_out)\n",
               gl->count);
    }
    tcase_add_test(tc, too_few_gpus_for_the_ranks);
    tcase_add_test(tc, conv_algorithms_reported);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* CUDA is initialised in this process */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
