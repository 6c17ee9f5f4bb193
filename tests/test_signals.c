/* test_signals.c: a planned stop (preemption) as a user meets it: a stop
 * signal during an epoch (1 and 2 replicas, under mpirun -np 2 to one rank
 * and to all) ends every process with 128 + the signal after one
 * checkpoint of the stop update, written by one process; the same command
 * with --resume auto then ends bitwise as the uninterrupted run (weights
 * and --metrics); SIGINT leaves the finished epochs' rows in --metrics and
 * a line saying how to go on; a storm of signals during the save corrupts
 * nothing; --resume auto with no checkpoint starts fresh; and a chaos run,
 * killed 10 times at seeded random moments (SIGKILL and SIGTERM) and
 * restarted with the same command, ends bitwise as the uninterrupted one;
 * --trace's file stays valid JSON through a stop and a SIGKILL.
 * With the argument "gpu" (test signals_gpu, suite gpu): the same on every
 * visible GPU, a SKIP (77) without one. The stops at a given update use the
 * MIRRORED_DEBUG_FAIL=RANK:STEP:TERM hook (strategies/fault.h); the others a real kill from
 * outside, sent once the run has written a given checkpoint (an event, not
 * a time: the same on a fast, a slow or a loaded machine). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "backends/gpu_list.h"
#include "tests/testutil.h"

static char train_exe[4096], dir[4096];

/* The global batch: 16 on CPU replicas; 4 a GPU with "gpu" (any number of
 * GPUs divides it). The data is 25 global batches, so that an epoch is
 * always 20 updates (validation_split 0.2 keeps 20 batches to train). */
static int global_batch = 16;

/* The CNN of test_resume.c (BN and dropout: every kind of state), with a
 * checkpoint after each epoch of 20 updates (%d: global_batch). */
static const char *model_cfg =
    "[net]\nglobal_batch=%d\nepochs=2\nvalidation_split=0.2\nseed=3\ncheckpoint=ck/run.h5\n"
    "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\ntest_images=x.npy\ntest_labels=y.npy\n"
    "scale=1/255\n"
    "[input]\nshape=8,8,1\n[conv2d]\nfilters=4\nsize=3\n[batchnorm]\n[activation]\n"
    "activation=relu\n[maxpool]\nsize=2\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
    "[dropout]\nrate=0.3\n[dense]\nunits=4\nactivation=softmax\n";

/* model_cfg with this run's global batch, as dir/name. */
static void write_cfg(const char *name) {
    char text[2048];
    snprintf(text, sizeof text, model_cfg, global_batch);
    free(tu_write_text(dir, name, text));
}

static void setup(void) {
    char *p = tu_build_path("launch/mirrored_train");
    snprintf(train_exe, sizeof train_exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    tu_write_image_data(dir, "x.npy", "y.npy", 25 * global_batch, 4);
    write_cfg("m.cfg");
}

/* Shell functions for a command that starts a run in the background as $p
 * (no single quotes: run() wraps the command in them):
 *   w FILE: waits until FILE exists while the run lives;
 *   newest: the newest checkpoint's name in ck/ ("" without one);
 *   wn NAME: waits until the newest checkpoint is not NAME while the run lives.
 * A run that ends or fails first ends the wait at once, and the caller's
 * check of its exit status says what happened. A wait polls at most 6000
 * (w, every 50 ms) or 30000 times (wn, every 10 ms): 5 minutes and more, a
 * bound on a hang, not a measure of speed. */
#define WAIT_FNS                                                                                   \
    "w() { n=0; while [ ! -e $1 ] && kill -0 $p 2>/dev/null && [ $n -lt 6000 ]; do sleep 0.05; "   \
    "n=$((n+1)); done; }; "                                                                        \
    "newest() { ls ck 2>/dev/null | grep -v tmp | tail -n 1; }; "                                  \
    "wn() { n=0; while [ \"$(newest)\" = \"$1\" ] && kill -0 $p 2>/dev/null && [ $n -lt 30000 ]; " \
    "do sleep 0.01; n=$((n+1)); done; }; "

/* Runs `cmd` in dir (prefix $T: mirrored_train); its exit status. */
static int run(const char *cmd, char **out) {
    char full[40000];
    snprintf(full, sizeof full,
             "cd %s && T=%s OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 sh -c '%s'",
             dir, train_exe, cmd);
    return tu_run(full, out);
}

static void run_expect(const char *cmd, int want) {
    char *out;
    int rc = run(cmd, &out);
    ck_assert_msg(rc == want, "'%s' exited %d, not %d: %s", cmd, rc, want, out);
    free(out);
}

/* The names in ck/, one a line, sorted. */
static char *ck_files(void) {
    char *out;
    ck_assert_int_eq(run("ls ck | grep -v tmp", &out), 0);
    return out;
}

/* Stop at update 26 (the hook raises after update 25: the flag rides on
 * update 26's all-reduce), resume with the same command: bitwise. */
static void stop_and_resume(const char *launcher, const char *devices, const char *fault,
                            int want_rc) {
    char cmd[4096], *out;
    run_expect("rm -rf ck", 0);
    snprintf(cmd, sizeof cmd, "%s $T m.cfg %s --quiet --json full.json --metrics full.csv",
             launcher, devices);
    run_expect(cmd, 0);
    run_expect("rm -rf ck", 0);
    snprintf(cmd, sizeof cmd,
             "MIRRORED_DEBUG_FAIL=%s %s $T m.cfg %s --quiet --resume auto --json s.json "
             "--metrics s.csv",
             fault, launcher, devices);
    int rc = run(cmd, &out);
    ck_assert_msg(rc == want_rc, "'%s' exited %d: %s", cmd, rc, out);
    /* one line, from one process, saying where and how to go on */
    const char *line = strstr(out, "mirrored_train: stopped by ");
    ck_assert_msg(line != NULL, "%s", out);
    ck_assert_msg(strstr(line + 1, "mirrored_train: stopped by ") == NULL, "two lines: %s", out);
    ck_assert_msg(strstr(out, "after update 26 (epoch 2, update 6/20): checkpoint "
                              "ck/run-step000000026.h5 written") != NULL,
                  "%s", out);
    ck_assert_msg(strstr(out, "--resume auto") != NULL, "%s", out);
    free(out);
    /* the epoch's checkpoint and the stop's, nothing else */
    char *files = ck_files();
    ck_assert_str_eq(files, "run-step000000020.h5\nrun-step000000026.h5\n");
    free(files);
    /* the finished epoch's row is in --metrics */
    char *csv = tu_read_in(dir, "s.csv");
    ck_assert_msg(csv != NULL && strstr(csv, "\n0,") != NULL, "%s", csv ? csv : "(none)");
    free(csv);
    snprintf(cmd, sizeof cmd, "%s $T m.cfg %s --quiet --resume auto --json s.json --metrics s.csv",
             launcher, devices);
    run_expect(cmd, 0);
    tu_same_run(dir, "full.json", "full.csv", "s.json", "s.csv");
}

START_TEST(sigterm_one_and_two_replicas) {
    stop_and_resume("", "--devices cpu", "0:25:TERM", 143);
    stop_and_resume("", "--devices cpu:2", "0:25:TERM", 143);
}
END_TEST

/* Runs `cmd` in dir as it is (run() quotes it in '...': no quotes inside). */
static int run_here(const char *cmd, char **out) {
    char full[40000];
    snprintf(full, sizeof full, "cd %s && %s", dir, cmd);
    return tu_run(full, out);
}

/* --trace through a planned stop and a SIGKILL: the stop's file holds
 * every update to the stop (26 on each of 2 replicas) and both checkpoints
 * (the epoch's and the stop's), nested as tests/trace_check.py wants; a
 * run killed mid-epoch leaves the file of its last finished epoch, valid
 * JSON. */
START_TEST(trace_survives_stops) {
    char *out, cmd[8192], *script = tu_source_path("tests/trace_check.py");
    run_expect("rm -rf ck; MIRRORED_DEBUG_FAIL=0:25:TERM $T m.cfg --devices cpu:2 --quiet "
               "--trace st.json",
               143);
    snprintf(cmd, sizeof cmd,
             "python3 %s st.json --layers=conv2d,batch_normalization,activation,max_pooling2d,"
             "flatten,dense,dropout,dense_1 && grep -c '\"cat\": \"checkpoint\"' st.json",
             script);
    int rc = run_here(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "ok: pids 1 threads 2 steps 52 ") && strstr(out, "\n2\n"),
                  "%s", out);
    free(out);
    /* SIGKILL a long run once it has saved its second epoch (whose trace
     * file follows the checkpoint): no handler, no last write */
    run_expect("rm -rf ck; " WAIT_FNS "$T m.cfg --devices cpu:2 --quiet --epochs 100000 "
               "--trace k.json & p=$!; w ck/run-step000000040.h5; kill -KILL $p; wait $p",
               137);
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); "
             "print(sum(e.get(\"cat\") == \"step\" for e in d[\"traceEvents\"]) %% 40)' k.json");
    rc = run_here(cmd, &out);
    /* whole epochs of 20 updates on 2 replicas, at least one */
    ck_assert_msg(rc == 0 && strcmp(out, "0\n") == 0, "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "python3 %s k.json", script);
    rc = run(cmd, &out);
    ck_assert_msg(rc == 0 && !strstr(out, "steps 0 "), "%s", out);
    free(out);
    free(script);
}
END_TEST

START_TEST(sigint_is_130_and_keeps_the_metrics) {
    stop_and_resume("", "--devices cpu", "0:25:INT", 130);
    /* in the first epoch: the CSV has its header, not 0 bytes */
    run_expect("rm -rf ck; MIRRORED_DEBUG_FAIL=0:3:INT $T m.cfg --quiet --metrics e.csv", 130);
    char *csv = tu_read_in(dir, "e.csv");
    ck_assert_msg(csv != NULL && strncmp(csv, "epoch,accuracy,loss", 19) == 0, "%s",
                  csv ? csv : "(none)");
    free(csv);
}
END_TEST

START_TEST(sigterm_under_mpirun) {
    /* to one rank (the one that does not write), then to all */
    stop_and_resume("mpirun -q -np 2", "", "1:25:TERM", 143);
    char *out;
    run_expect("rm -rf ck", 0);
    /* a real signal from outside to every rank: mpirun forwards SIGUSR1
     * (SIGTERM it follows with SIGKILL after 1 s, docs/multi-process.md) */
    int rc = run(WAIT_FNS "mpirun -q -np 2 $T m.cfg --quiet --epochs 100000 --json s.json & "
                          "p=$!; w ck/run-step000000040.h5; kill -USR1 $p; wait $p",
                 &out);
    ck_assert_msg(rc == 138, "exited %d: %s", rc, out);
    ck_assert_msg(strstr(out, "mirrored_train: stopped by SIGUSR1 after update") != NULL, "%s",
                  out);
    free(out);
    /* SIGTERM to every rank itself (as systemd sends it to a unit's
     * processes): mpirun's children, from /proc (no procps needed) */
    run_expect("rm -rf ck", 0);
    rc = run(WAIT_FNS "mpirun -q -np 2 $T m.cfg --quiet --epochs 100000 --json s.json & p=$!; "
                      "w ck/run-step000000040.h5; kill -TERM $(cat /proc/$p/task/$p/children); "
                      "wait $p",
             &out);
    ck_assert_msg(rc == 143, "exited %d: %s", rc, out);
    ck_assert_msg(strstr(out, "mirrored_train: stopped by SIGTERM after update") != NULL, "%s",
                  out);
    free(out);
    /* the stop's file is the newest, past the epochs' (not a multiple of 20) */
    char *newest;
    ck_assert_int_eq(run("ls ck | grep -v tmp | tail -n 1", &newest), 0);
    long long step = 0;
    ck_assert_msg(sscanf(newest, "run-step%lld.h5", &step) == 1 && step > 40 && step % 20 != 0,
                  "%s", newest);
    free(newest);
}
END_TEST

/* A storm of SIGTERMs from outside, during the step and the save: one
 * stop, a whole checkpoint, and the resumed run is the uninterrupted one.
 * The storm starts after epoch 1's checkpoint, so the run must not end by
 * itself first (on a loaded machine a short run does): it is asked for
 * 100000 epochs, and both the resumed run and the uninterrupted one it is
 * compared with end one epoch after the stop's (--epochs is not part of
 * what a resume compares: a run may be extended). */
START_TEST(signals_during_the_save) {
    char *out, cmd[256];
    run_expect("rm -rf ck", 0);
    int rc = run(WAIT_FNS "$T m.cfg --quiet --epochs 100000 --json s.json & p=$!; "
                          "w ck/run-step000000020.h5; while kill -TERM $p 2>/dev/null; do :; done; "
                          "wait $p",
                 &out);
    ck_assert_msg(rc == 143, "exited %d: %s", rc, out);
    const char *line = strstr(out, "stopped by SIGTERM after update ");
    long long update = 0;
    int epoch = 0;
    ck_assert_msg(
        line != NULL &&
            sscanf(line, "stopped by SIGTERM after update %lld (epoch %d,", &update, &epoch) == 2 &&
            update > 20 && epoch >= 2,
        "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "$T m.cfg --quiet --epochs %d --resume auto --json s.json",
             epoch + 1);
    run_expect(cmd, 0);
    snprintf(cmd, sizeof cmd, "rm -rf ck; $T m.cfg --quiet --epochs %d --json full.json",
             epoch + 1);
    run_expect(cmd, 0);
    tu_same_run(dir, "full.json", NULL, "s.json", NULL);
}
END_TEST

START_TEST(resume_auto_without_checkpoint_starts_fresh) {
    run_expect("rm -rf ck; $T m.cfg --quiet --json full.json", 0);
    char *out;
    ck_assert_int_eq(run("rm -rf ck; $T m.cfg --resume auto --json s.json", &out), 0);
    ck_assert_msg(strstr(out, "--resume auto: no checkpoint yet") != NULL, "%s", out);
    free(out);
    tu_same_run(dir, "full.json", NULL, "s.json", NULL);
    /* without [net] checkpoint: beside --json, and found there again */
    write_cfg("n.cfg");
    run_expect("sed -i /^checkpoint=/d n.cfg; rm -f n-stopped.h5", 0);
    run_expect("MIRRORED_DEBUG_FAIL=0:25:TERM $T n.cfg --quiet --resume auto --json n.json", 143);
    char stopped[8192];
    snprintf(stopped, sizeof stopped, "%s/n-stopped.h5", dir);
    ck_assert(tu_exists(stopped));
    run_expect("$T n.cfg --quiet --resume auto --json n.json", 0);
    tu_same_run(dir, "full.json", NULL, "n.json", NULL);
}
END_TEST

/* Each save says how long it took, and warns when a stop would not fit. */
START_TEST(save_time_and_budget) {
    char *out;
    ck_assert_int_eq(run("rm -rf ck; $T m.cfg --epochs 2 --stop-budget 0.000001", &out), 0);
    ck_assert_msg(strstr(out, "Saved ck/run-step000000020.h5 (epoch 1, step 20) in ") != NULL, "%s",
                  out);
    ck_assert_msg(strstr(out, "more than --stop-budget 1e-06 s: a stop on a signal would not "
                              "fit") != NULL,
                  "%s", out);
    free(out);
    /* the resumed run says so at its start: its checkpoint (step 40) knows
     * how long the save before it (step 20) took */
    ck_assert_int_eq(run("$T m.cfg --epochs 3 --resume auto --stop-budget 0.000001", &out), 0);
    const char *warn = strstr(out, "Warning: the last save of this model took ");
    const char *first_save = strstr(out, "Saved ");
    ck_assert_msg(warn != NULL && first_save != NULL && warn < first_save, "%s", out);
    ck_assert_msg(strstr(warn, "more than --stop-budget 1e-06 s: a stop on a signal may not fit"),
                  "%s", out);
    free(out);
    ck_assert_int_eq(run("rm -rf ck; $T m.cfg --epochs 1", &out), 0);
    ck_assert_msg(strstr(out, "--stop-budget") == NULL, "%s", out);
    free(out);
    ck_assert_int_eq(run("$T m.cfg --epochs 2 --resume auto", &out), 0);
    ck_assert_msg(strstr(out, "Warning: the last save") == NULL, "%s", out);
    free(out);
}
END_TEST

/* Killed 10 times at seeded random moments, SIGKILL or SIGTERM, restarted
 * with the same command each time: the end is the uninterrupted run's. A
 * round's moment is an event and a seeded offset: the kill goes 0 to 10 ms
 * after the round sees its run's first checkpoint, so the signal handler is
 * in place (a TERM stops the run) and the kill lands anywhere in an update
 * or a save. A round moves the run on by an epoch and those of one poll
 * (10 ms) and the offset: a few epochs, some dozens where an epoch takes
 * 0.1 ms, far from the 300 it is asked for, so that the first two rounds
 * (a SIGKILL and a SIGTERM with seed 2026) find it running on any machine.
 * (A round that finds the run ended exits 0.) */
START_TEST(chaos_restarts_end_bitwise) {
    const char *cmd = "$T m.cfg --quiet --epochs 300 --resume auto --json c.json";
    run_expect("rm -rf ck; $T m.cfg --quiet --epochs 300 --json full.json", 0);
    run_expect("rm -rf ck", 0);
    float u[20];
    mr_rng_uniform(2026, 20, 0, 0, 0.0f, 1.0f, u, 20);
    int killed = 0, stopped = 0;
    char seen[512] = "";
    for (int i = 0; i < 10; i++) {
        char round[4096], *out;
        const char *sig = u[2 * i] < 0.5f ? "KILL" : "TERM";
        double at = 0.01 * (double)u[2 * i + 1];
        snprintf(round, sizeof round,
                 WAIT_FNS "s=$(newest); %s & p=$!; wn \"$s\"; sleep %.4f; kill -%s $p; wait $p",
                 cmd, at, sig);
        int rc = run(round, &out);
        /* 137: killed; 143: stopped; 0: it ended before the signal */
        ck_assert_msg(rc == 137 || rc == 143 || rc == 0, "round %d (%s): %d: %s", i, sig, rc, out);
        killed += rc == 137;
        stopped += rc == 143 && strstr(out, "stopped by SIGTERM") != NULL;
        size_t len = strlen(seen);
        snprintf(seen + len, sizeof seen - len, " %s@+%.4f:%d", sig, at, rc);
        free(out);
    }
    ck_assert_msg(killed > 0 && stopped > 0, "rounds:%s", seen);
    char last[4096];
    snprintf(last, sizeof last, "%s", cmd);
    run_expect(last, 0);
    tu_same_run(dir, "full.json", NULL, "c.json", NULL);
}
END_TEST

/* On every visible GPU (the flag is read on the host between updates):
 * a stop at update 26, and a real SIGTERM from outside. */
START_TEST(sigterm_on_gpus) {
    stop_and_resume("", "--devices gpu", "0:25:TERM", 143);
    char *out;
    run_expect("rm -rf ck", 0);
    int rc = run(WAIT_FNS "$T m.cfg --devices gpu --quiet --epochs 100000 --json s.json & p=$!; "
                          "w ck/run-step000000040.h5; kill -TERM $p; wait $p",
                 &out);
    ck_assert_msg(rc == 143, "exited %d: %s", rc, out);
    ck_assert_msg(strstr(out, "mirrored_train: stopped by SIGTERM after update") != NULL, "%s",
                  out);
    free(out);
}
END_TEST

int main(int argc, char **argv) {
    Suite *s = suite_create("signals");
    TCase *tc = tcase_create("signals");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 600);
    if (argc > 1 && strcmp(argv[1], "gpu") == 0) {
        const mr_gpu_list *gl = tu_gpus();
        if (gl->count == 0) {
            printf("SKIP: no GPU: %s\n", gl->reason[0] ? gl->reason : "none visible");
            return 77; /* meson's SKIP */
        }
        global_batch = 4 * gl->count;
        printf("%d GPU%s: global_batch %d, %d examples\n", gl->count, gl->count == 1 ? "" : "s",
               global_batch, 25 * global_batch);
        tcase_add_test(tc, sigterm_on_gpus);
        suite_add_tcase(s, tc);
        return tu_run_suite(s);
    }
    tcase_add_test(tc, sigterm_one_and_two_replicas);
    tcase_add_test(tc, sigint_is_130_and_keeps_the_metrics);
    tcase_add_test(tc, trace_survives_stops);
    tcase_add_test(tc, sigterm_under_mpirun);
    tcase_add_test(tc, signals_during_the_save);
    tcase_add_test(tc, resume_auto_without_checkpoint_starts_fresh);
    tcase_add_test(tc, save_time_and_budget);
    tcase_add_test(tc, chaos_restarts_end_bitwise);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
