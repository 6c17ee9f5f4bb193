/* test_mpirun.c: mirrored_train under mpirun as a user runs it: one job of
 * several processes that trains bitwise like the same number of replica
 * threads, prints once and writes one set of files; bad input on one rank
 * or on all fails with one message and exit 2; a failing or killed rank
 * ends the whole job at once (not by the others' collective timeout),
 * named, and a hung one by the collective timeout; --trace writes one file
 * per rank with a common time origin. No check depends on how fast the
 * machine is: a kill waits for an event (a checkpoint written), and a job
 * that does not end is ended by a collective timeout whose message the
 * checks tell apart.
 *
 * mpirun runs with -q (no help banners) except where its own message is
 * what names the rank (a killed process), and as root with the OMPI
 * variables that tests/meson.build sets. */
#include <check.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/clock.h"
#include "tests/testutil.h"

static char exe[4096];
static char dir[4096];

static const char *good_cfg = "[net]\nglobal_batch=16\nepochs=2\nvalidation_split=0.2\nseed=3\n"
                              "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
                              "test_images=x.npy\ntest_labels=y.npy\nscale=1/255\n"
                              "[input]\nshape=8,8,1\n[flatten]\n"
                              "[dense]\nunits=16\nactivation=relu\n"
                              "[dense]\nunits=4\nactivation=softmax\n";

/* A residual graph: a block whose input is added to its
 * output, a strided block with a 1x1 projection shortcut, global average
 * pooling; per-replica BN statistics, as Keras's default. */
static const char *residual_cfg =
    "[net]\nglobal_batch=16\nepochs=2\nseed=3\n"
    "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=1/255\n"
    "[input]\nshape=8,8,1\n"
    "[conv2d]\nname=stem\nfilters=4\nsize=3\npadding=same\nactivation=relu\n"
    "[conv2d]\nfilters=4\nsize=3\npadding=same\nuse_bias=0\n[batchnorm]\n"
    "[add]\nfrom=stem\n[activation]\nactivation=relu\nname=block\n"
    "[conv2d]\nname=down\nfilters=8\nsize=3\nstride=2\npadding=same\nactivation=relu\n"
    "[conv2d]\ninput=block\nfilters=8\nsize=1\nstride=2\n[add]\nfrom=down\n"
    "[globalavgpool]\n[dense]\nunits=4\nactivation=softmax\n";

static void setup(void) {
    char *p = tu_build_path("launch/mirrored_train");
    snprintf(exe, sizeof exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    tu_write_image_data(dir, "x.npy", "y.npy", 400, 4);
    free(tu_write_text(dir, "good.cfg", good_cfg));
    free(tu_write_text(dir, "residual.cfg", residual_cfg));
}

/* Runs `mpirun MPIRUN_ARGS sh -c SCRIPT` in dir; the script sees $T (the
 * executable) and $OMPI_COMM_WORLD_RANK. Returns the exit status. */
static int mpirun(const char *mpirun_args, const char *script, char **out, double *seconds) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cd %s && T=%s mpirun %s -x T sh -c '%s'", dir, exe, mpirun_args,
             script);
    double t0 = mr_now_s();
    int rc = tu_run(cmd, out);
    if (seconds) *seconds = mr_now_s() - t0;
    return rc;
}

/* Occurrences of `what` in s. Not inlined: GCC 12 then takes s for a
 * pointer to the caller's local (a false -Wdangling-pointer). */
__attribute__((noinline)) static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

static char *read_in_dir(const char *name) {
    return tu_read_in(dir, name);
}

/* mpirun that must succeed; returns its output (malloc'd). */
static char *mpirun_ok(const char *mpirun_args, const char *script) {
    char *out = NULL;
    int rc = mpirun(mpirun_args, script, &out, NULL);
    ck_assert_msg(rc == 0, "'%s': exit %d: %s", script, rc, out);
    return out;
}

/* The two runs' --json files name bitwise the same weights. */
static void same_weights(const char *json_a, const char *json_b) {
    char a[17], b[17];
    tu_params_hash(dir, json_a, a);
    tu_params_hash(dir, json_b, b);
    ck_assert_msg(strcmp(a, b) == 0, "%s: %s, %s: %s", json_a, a, json_b, b);
}

START_TEST(one_job_like_replica_threads) {
    char *out = mpirun_ok("-q -np 2", "exec $T good.cfg --json a.json --metrics a.csv");
    /* one start line naming both ranks, one summary, one result */
    ck_assert_msg(strstr(out, "2 replicas on 2 processes (") && strstr(out, ": rank 1 cpu:1") &&
                      strstr(out, "MPI all-reduce (mpi)") && count(out, "Total params") == 1 &&
                      count(out, "Test loss") == 1 && count(out, "Epoch 2/2") == 1,
                  "%s", out);
    /* mpirun gives its ranks a terminal even when its own output
     * goes to a file (here a pipe): plain lines, no progress bar */
    ck_assert_msg(!strchr(out, '\r') && !strchr(out, '\033') && strstr(out, "Epoch 1/2 - "), "%s",
                  out);
    free(out);
    char *json = read_in_dir("a.json");
    ck_assert_msg(strstr(json, "\"replicas\": 2") && strstr(json, "\"processes\": 2") &&
                      strstr(json, "\"communicator\": \"mpi\""),
                  "%s", json);
    free(json);
    char *csv = read_in_dir("a.csv");
    ck_assert_msg(csv && count(csv, "\n") == 3, "%s", csv ? csv : "no csv"); /* header + 2 */
    free(csv);
    /* bitwise the weights of 2 replica threads in one process */
    free(mpirun_ok("-q -np 1", "exec $T good.cfg --devices cpu:2 --quiet --json b.json"));
    same_weights("a.json", "b.json");
    /* no temporary file of any rank left behind */
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "ls -a %s", dir);
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_msg(strstr(out, ".tmp.") == NULL, "%s", out);
    free(out);
}
END_TEST

/* --trace under mpirun -np 2: one file per rank (rank 1's FILE.rank1.json),
 * each its rank as pid, both valid and nested as tests/trace_check.py
 * wants, with a common time origin: each update's step overlaps on both
 * ranks (they meet in its all-reduce); the epoch line names the slowest
 * replica of the job. */
START_TEST(trace_one_file_per_rank) {
    char *out = mpirun_ok("-q -np 2", "exec $T good.cfg --verbose 2 --trace tr.json");
    ck_assert_msg(count(out, "slowest replica ") == 2, "%s", out);
    free(out);
    char cmd[16384], *script = tu_source_path("tests/trace_check.py");
    snprintf(cmd, sizeof cmd,
             "cd %s && python3 %s tr.json tr.rank1.json --layers=flatten,dense,dense_1 "
             "--common-origin && python3 -c 'import json; print(sorted({e[\"pid\"] for f in "
             "(\"tr.json\", \"tr.rank1.json\") for e in json.load(open(f))[\"traceEvents\"] "
             "if e[\"ph\"] == \"X\" and f.endswith(\"rank1.json\") == (e[\"pid\"] == 1)}))'",
             dir, script);
    free(script);
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    /* 20 updates per epoch (320 training rows), 2 epochs, one replica per rank */
    ck_assert_msg(strstr(out, "ok: pids 2 threads 2 steps 80 ") && strstr(out, "\n[0, 1]\n"), "%s",
                  out);
    free(out);
}
END_TEST

/* [net] top_k and per_class: 2 processes report the figures of 2 replica
 * threads, to the digit (the counts ride in the evaluation's all-reduce) */
START_TEST(metrics_job_like_replica_threads) {
    char text[2048];
    snprintf(text, sizeof text, "[net]\ntop_k=2\nper_class=1\n%s", good_cfg + strlen("[net]\n"));
    free(tu_write_text(dir, "tk.cfg", text));
    char *out = mpirun_ok("-q -np 2", "exec $T tk.cfg --json k1.json");
    ck_assert_msg(count(out, "val per-class accuracy: ") == 2 &&
                      count(out, "test per-class accuracy: ") == 1,
                  "%s", out);
    free(out);
    free(mpirun_ok("-q -np 1", "exec $T tk.cfg --devices cpu:2 --quiet --json k2.json"));
    same_weights("k1.json", "k2.json");
    char *a = read_in_dir("k1.json"), *b = read_in_dir("k2.json");
    const char *keys[] = {"\"val_sparse_top_k_categorical_accuracy\"",
                          "\"val_per_class_accuracy\"",
                          "\"val_per_class_examples\"",
                          "\"test_sparse_top_k_categorical_accuracy\"",
                          "\"test_per_class_accuracy\"",
                          "\"test_per_class_examples\""};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *x = strstr(a, keys[i]), *y = strstr(b, keys[i]);
        ck_assert_msg(x && y, "no %s: %s", keys[i], a);
        size_t n = strcspn(x, "\n");
        ck_assert_msg(n == strcspn(y, "\n") && strncmp(x, y, n) == 0, "%.*s vs %.*s", (int)n, x,
                      (int)strcspn(y, "\n"), y);
    }
    free(a), free(b);
}
END_TEST

/* A residual model: 2 processes train bitwise as 2 replica threads. */
START_TEST(residual_job_like_replica_threads) {
    char *out = mpirun_ok("-q -np 2", "exec $T residual.cfg --json r2.json");
    ck_assert_msg(strstr(out, "2 replicas on 2 processes (") && strstr(out, "Connected to") &&
                      count(out, "Total params") == 1 && count(out, "Epoch 2/2") == 1,
                  "%s", out);
    free(out);
    free(mpirun_ok("-q -np 1", "exec $T residual.cfg --devices cpu:2 --quiet --json r1.json"));
    same_weights("r2.json", "r1.json");
}
END_TEST

/* --synthetic under mpirun: every process makes the same examples (keyed
 * by the seed), so 2 processes train bitwise as 2 replica threads, and one
 * process prints the images/sec lines (2 epochs of 160 / 16 = 10 updates,
 * 2 warm-up, a line every 7 counted: 2 lines and the total). */
START_TEST(synthetic_job_like_replica_threads) {
    char *out = mpirun_ok("-q -np 2", "exec $T residual.cfg --synthetic 160 --display-every 7 "
                                      "--warmup-steps 2 --json s2.json");
    ck_assert_msg(count(out, "Synthetic data: 160 random examples") == 1 &&
                      count(out, "images/sec: ") == 3 && count(out, "total images/sec: ") == 1 &&
                      strstr(out, "(2 replicas: "),
                  "%s", out);
    free(out);
    free(mpirun_ok("-q -np 1",
                   "exec $T residual.cfg --synthetic 160 --devices cpu:2 --quiet --json s1.json"));
    same_weights("s2.json", "s1.json");
}
END_TEST

START_TEST(four_processes_oversubscribed) {
    char *out = mpirun_ok("-q --oversubscribe -np 4", "exec $T good.cfg --json c.json");
    ck_assert_msg(count(out, "Test loss") == 1, "%s", out);
    /* on fewer than 4 cores the start line says that cpu:N
     * numbers replicas, not cores */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < 4) {
        char want[128];
        snprintf(want, sizeof want, "oversubscribed: 4 replicas share %d core", CPU_COUNT(&set));
        ck_assert_msg(strstr(out, want) && strstr(out, "not cores"), "%s", out);
    }
    free(out);
    free(mpirun_ok("-q -np 1", "exec $T good.cfg --devices cpu:4 --quiet --json d.json"));
    same_weights("c.json", "d.json");
}
END_TEST

/* MIRRORED_RANKS_PER_NODE makes every rank its own node: the hierarchical
 * communicator's cross-node level runs (two terms: the same sum, the same
 * bits as the flat path). */
START_TEST(simulated_nodes) {
    char *out =
        mpirun_ok("-q -np 2 -x MIRRORED_RANKS_PER_NODE=1", "exec $T good.cfg --json e.json");
    ck_assert_msg(strstr(out, "hierarchical all-reduce (local + MPI across 2 nodes)"), "%s", out);
    free(out);
    free(mpirun_ok("-q -np 2", "exec $T good.cfg --quiet --json f.json"));
    same_weights("e.json", "f.json");
}
END_TEST

/* Bad input, on every rank or one: exit 2, one line, no output files. */
static void expect_bad(const char *args, const char *script, const char *want1, const char *want2) {
    char *out;
    int rc = mpirun(args, script, &out, NULL);
    ck_assert_msg(rc == 2, "'%s': exit %d: %s", script, rc, out);
    ck_assert_msg(count(out, "mirrored_train: ") == 1 && count(out, "\n") == 1 &&
                      strstr(out, want1) && strstr(out, want2),
                  "'%s': want '%s' '%s': %s", script, want1, want2, out);
    free(out);
    char *m = read_in_dir("bad.csv");
    ck_assert_msg(m == NULL, "a metrics file was left behind");
}

START_TEST(bad_input_fails_once) {
    /* a .cfg that differs between ranks (edited during the launch) */
    free(tu_write_text(dir, "other.cfg",
                       "[net]\nglobal_batch=16\nepochs=3\n"
                       "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    expect_bad("-q -np 2",
               "c=good.cfg; [ $OMPI_COMM_WORLD_RANK = 1 ] && c=other.cfg; "
               "exec $T $c --metrics bad.csv",
               "rank 1 (", "other contents");
    /* the data file missing on one node only: the same .cfg text in another folder */
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/elsewhere", dir);
    ck_assert_int_eq(tu_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "cp %s/good.cfg %s/elsewhere/good.cfg", dir, dir);
    ck_assert_int_eq(tu_run(cmd, NULL), 0);
    expect_bad("-q -np 2",
               "c=good.cfg; [ $OMPI_COMM_WORLD_RANK = 1 ] && c=elsewhere/good.cfg; "
               "exec $T $c --metrics bad.csv",
               "rank 1 (", "elsewhere/x.npy: cannot open");
    /* a bad .cfg everywhere: the one-process message, once */
    free(tu_write_text(dir, "broken.cfg", "[net]\nbach=8\n"));
    expect_bad("-q -np 2", "exec $T broken.cfg", "broken.cfg:2:", "did you mean 'batch'");
    /* more processes than examples in a global batch */
    free(tu_write_text(dir, "tiny.cfg",
                       "[net]\nglobal_batch=2\n"
                       "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    expect_bad("-q --oversubscribe -np 4", "exec $T tiny.cfg", "global_batch=2 is smaller than",
               "4 replicas on 4 processes");
    /* more replicas than the process has cores (mpirun binds 2 ranks to a core each) */
    expect_bad("-q -np 2 --bind-to core", "exec $T good.cfg --devices cpu:2", "--devices cpu:2",
               "this process has 1 core");
}
END_TEST

/* An option that changes what the job computes, given otherwise to rank 1:
 * one line naming the option, both values and both ranks, exit 2, before
 * anything is trained (a hang would end at the 10 s collective timeout,
 * with another message). */
START_TEST(different_options_fail_once) {
    /* rank 0's options, rank 1's: one option each */
    char host[256] = "?";
    gethostname(host, sizeof host);
    static const char *cases[][2] = {
        {"--max-steps 10", "--max-steps 5"},
        {"", "--resume auto"},
        {"", "--init-weights w.h5"},
        {"", "--synthetic 160"},
        {"", "--batch-size 32"},
        {"", "--validation-split 0.1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *rank0 = cases[i][0], *rank1 = cases[i][1];
        char script[1024], want1[256], want0[256];
        snprintf(script, sizeof script,
                 "a=\"%s\"; [ $OMPI_COMM_WORLD_RANK = 1 ] && a=\"%s\"; "
                 "exec $T good.cfg --metrics bad.csv --collective-timeout 10 $a",
                 rank0, rank1);
        snprintf(want1, sizeof want1, "rank 1 (%s) was started with %s and rank 0 (", host, rank1);
        if (rank0[0])
            snprintf(want0, sizeof want0, "with %s: every process of a job must get the same",
                     rank0);
        else /* "no --resume" */
            snprintf(want0, sizeof want0, "with no %.*s: every process of a job must get the same",
                     (int)strcspn(rank1, " "), rank1);
        expect_bad("-q -np 2", script, want1, want0);
    }
}
END_TEST

/* --resume auto that chooses other states on two ranks (here: --save's
 * finished file on rank 1 only): one line naming both, exit 2, where
 * rank 1 alone would have ended and rank 0 trained on. */
START_TEST(different_resume_choices_fail_once) {
    free(mpirun_ok("-q -np 2", "exec $T good.cfg --quiet --save done.h5"));
    char host[256] = "?", want[512];
    gethostname(host, sizeof host);
    snprintf(want, sizeof want, "rank 1 (%s) resumes from done.h5 (update 40) and rank 0 (", host);
    expect_bad("-q -np 2",
               "s=other.h5; [ $OMPI_COMM_WORLD_RANK = 1 ] && s=done.h5; "
               "exec $T good.cfg --metrics bad.csv --collective-timeout 10 --resume auto --save $s",
               want, "from no checkpoint (a first start): every process must see the same");
}
END_TEST

/* The failure ends the job: rank 0 does not wait for it in a collective
 * until its timeout (60 s here: the bound on a hang, which the message
 * "waited 60 s" would name). */
START_TEST(failing_rank_ends_the_job) {
    char *out;
    int rc = mpirun("-q -np 2 -x MIRRORED_DEBUG_FAIL=1:3",
                    "exec $T good.cfg --epochs 50 --collective-timeout 60", &out, NULL);
    ck_assert_msg(rc != 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "rank 1 (") && strstr(out, "injected failure at step 3"), "%s", out);
    ck_assert_msg(strstr(out, "waited") == NULL, "ended by the collective timeout: %s", out);
    free(out);
}
END_TEST

/* Rank 1 is killed once the job has saved its first epoch (a checkpoint
 * every epoch, of a run that would go on for 100000), and mpirun itself
 * ends the job and names it; rank 0 does not wait for it until its
 * collective timeout (60 s: the bound on a hang). The killer polls at most
 * 6000 times and only while rank 1 lives. */
START_TEST(killed_rank_ends_the_job) {
    char text[2048], *out;
    snprintf(text, sizeof text, "[net]\ncheckpoint=ck/k.h5\n%s", good_cfg + strlen("[net]\n"));
    free(tu_write_text(dir, "k.cfg", text));
    int rc = mpirun("-np 2",
                    "[ $OMPI_COMM_WORLD_RANK = 1 ] && (n=0; while [ ! -e ck/k-step000000020.h5 ] "
                    "&& kill -0 $$ 2>/dev/null && [ $n -lt 6000 ]; do sleep 0.05; n=$((n+1)); "
                    "done; kill -9 $$) & "
                    "exec $T k.cfg --epochs 100000 --quiet --collective-timeout 60",
                    &out, NULL);
    ck_assert_msg(rc != 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "rank 1") && strstr(out, "signal 9"), "%s", out);
    ck_assert_msg(strstr(out, "waited") == NULL, "ended by the collective timeout: %s", out);
    free(out);
}
END_TEST

START_TEST(hung_rank_times_out) {
    char *out;
    double t;
    int rc = mpirun("-q -np 2 -x MIRRORED_DEBUG_FAIL=1:3:stall",
                    "exec $T good.cfg --epochs 50 --collective-timeout 2", &out, &t);
    /* the whole timeout, however fast the machine */
    ck_assert_msg(rc != 0 && t >= 2.0, "exit %d after %.1f s: %s", rc, t, out);
    ck_assert_msg(strstr(out, "rank 0 (") && strstr(out, "waited 2 s for rank(s) 1"), "%s", out);
    free(out);
}
END_TEST

/* The collective timeout of the stopped-rank runs: short, since the job
 * must end within it plus STOP_MARGIN_S of the stop. */
#define STOP_TIMEOUT_S 5
#define STOP_MARGIN_S  10

/* Where rank 1 is stopped (SIGSTOP, never continued): at startup, the
 * moment it opens its training data (watch_and_stop), mostly before the
 * processes agree on the data, or in training, once the job's first checkpoint is
 * written. */
typedef enum stop_point { STOP_AT_STARTUP, STOP_IN_TRAINING } stop_point;

static double read_seconds(const char *name) {
    char *text = read_in_dir(name);
    double t = text ? atof(text) : -1.0;
    free(text);
    return t;
}

/* 1 while process pid exists and is not a zombie */
static int alive(long pid) {
    char path[64], *stat;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if ((stat = tu_read_file(path, NULL)) == NULL) return 0;
    const char *end = strrchr(stat, ')');
    int live = end != NULL && end[1] == ' ' && end[2] != 'Z';
    free(stat);
    return live;
}

/* A process that stops rank 1 (SIGSTOP; its pid in rank1.pid, written
 * before it execs mirrored_train) the moment it opens stall/x.npy, which
 * only rank 1's .cfg names (inotify IN_OPEN, watched before this returns),
 * and writes the time to stopped_at. It gives up after 60 s. */
static pid_t watch_and_stop(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/stall/x.npy", dir);
    int fd = inotify_init1(IN_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(inotify_add_watch(fd, path, IN_OPEN), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid > 0) {
        close(fd);
        return pid;
    }
    alarm(60);
    char event[4096];
    if (read(fd, event, sizeof event) <= 0) _exit(1);
    char *text = read_in_dir("rank1.pid");
    long rank1 = text ? atol(text) : 0;
    if (rank1 <= 0 || kill((pid_t)rank1, SIGSTOP) != 0) _exit(1);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char when[64];
    snprintf(when, sizeof when, "%lld.%09ld\n", (long long)now.tv_sec, now.tv_nsec);
    free(tu_write_text(dir, "stopped_at", when));
    _exit(0);
}

/* mpirun -np 2 with rank 1 stopped at `where`: the job ends with exit 1
 * (MPI_Abort) within the collective timeout plus STOP_MARGIN_S of the stop,
 * rank 0 naming rank 1, no heap corruption, and the stopped rank is gone.
 * A run that does not end is cut at 60 s (exit 124, a failure). */
static void stop_rank_once(stop_point where) {
    char cmd[16384], *out;
    const char *script =
        where == STOP_AT_STARTUP
            ? "c=good.cfg; if [ $OMPI_COMM_WORLD_RANK = 1 ]; then c=stall/good.cfg; "
              "echo $$ > rank1.pid; fi; exec $T $c --collective-timeout %d"
            : "if [ $OMPI_COMM_WORLD_RANK = 1 ]; then echo $$ > rank1.pid; (n=0; while [ ! -e "
              "ck/k-step000000020.h5 ] && kill -0 $$ 2>/dev/null && [ $n -lt 6000 ]; do sleep "
              "0.05; n=$((n+1)); done; kill -STOP $$ && date +%%s.%%N > stopped_at) & fi; "
              "exec $T k.cfg --epochs 100000 --quiet --collective-timeout %d";
    char body[2048];
    snprintf(body, sizeof body, script, STOP_TIMEOUT_S);
    snprintf(
        cmd, sizeof cmd,
        "{ cd %s && rm -rf ck stopped_at ended_at rank1.pid && T=%s timeout 60 mpirun -q -np 2 "
        "-x T sh -c '%s'; rc=$?; date +%%s.%%N > ended_at; exit $rc; }",
        dir, exe, body);
    const pid_t watcher = where == STOP_AT_STARTUP ? watch_and_stop() : 0;
    int rc = tu_run(cmd, &out);
    if (watcher > 0) {
        kill(watcher, SIGKILL); /* where it never saw the open */
        waitpid(watcher, NULL, 0);
    }
    char *pid_text = read_in_dir("rank1.pid");
    long pid = pid_text ? atol(pid_text) : 0;
    free(pid_text);
    for (int i = 0; pid > 0 && alive(pid) && i < 600; i++) /* 30 s at most */
        usleep(50000);
    int survived = pid > 0 && alive(pid);
    if (survived) kill((pid_t)pid, SIGKILL);
    double stopped = read_seconds("stopped_at"), ended = read_seconds("ended_at");
    ck_assert_msg(stopped > 0, "rank 1 was never stopped: exit %d: %s", rc, out);
    ck_assert_msg(rc == 1 && !strstr(out, "corrupted"), "exit %d: %s", rc, out);
    ck_assert_msg(ended - stopped < STOP_TIMEOUT_S + STOP_MARGIN_S, "ended %.1f s after the stop",
                  ended - stopped);
    /* At startup the SIGSTOP lands a scheduling delay after the open: rank 1
     * may have passed the job's agreement on the data by then, and rank 0
     * then waits in training's all-reduce. Both must name rank 1. */
    char want[128];
    snprintf(want, sizeof want, "waited %d s for rank(s) 1", STOP_TIMEOUT_S);
    ck_assert_msg(strstr(out, "rank 0 (") && strstr(out, want), "want '%s': %s", want, out);
    ck_assert_msg(!survived, "the stopped rank 1 (pid %ld) outlived the job", pid);
    free(out);
}

/* The files of both runs: rank 1's copy of the .cfg beside a FIFO for its
 * training images; the .cfg with a checkpoint every epoch. */
static void stop_rank_setup(void) {
    char cmd[8192], text[2048];
    snprintf(cmd, sizeof cmd, "cd %s && mkdir -p stall && cp good.cfg x.npy y.npy stall/", dir);
    ck_assert_int_eq(tu_run(cmd, NULL), 0);
    snprintf(text, sizeof text, "[net]\ncheckpoint=ck/k.h5\n%s", good_cfg + strlen("[net]\n"));
    free(tu_write_text(dir, "k.cfg", text));
}

START_TEST(stopped_rank_ends_the_job) {
    stop_rank_setup();
    stop_rank_once(STOP_AT_STARTUP);
    stop_rank_once(STOP_IN_TRAINING);
}
END_TEST

/* The same, 20 times each in a row (the slow suite): no run hangs or
 * corrupts the heap of rank 0. */
START_TEST(stopped_rank_20_runs) {
    stop_rank_setup();
    for (int i = 0; i < 20; i++) {
        stop_rank_once(STOP_AT_STARTUP);
        stop_rank_once(STOP_IN_TRAINING);
    }
}
END_TEST

/* A test case of the tests, each run in a fresh folder (setup). */
static TCase *test_case(Suite *s, const char *name, int timeout) {
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

/* No argument: the integration tests; "slow": the 20 runs of a stopped
 * rank. CK_RUN_CASE=stop (or options) runs one case. */
int main(int argc, char **argv) {
    Suite *s = suite_create("mpirun");
    if (argc > 1 && strcmp(argv[1], "slow") == 0) {
        tcase_add_test(test_case(s, "stop20", 3600), stopped_rank_20_runs);
        return tu_run_suite(s);
    }
    TCase *tc = test_case(s, "mpirun", 300);
    tcase_add_test(tc, one_job_like_replica_threads);
    tcase_add_test(tc, trace_one_file_per_rank);
    tcase_add_test(tc, metrics_job_like_replica_threads);
    tcase_add_test(tc, residual_job_like_replica_threads);
    tcase_add_test(tc, synthetic_job_like_replica_threads);
    tcase_add_test(tc, four_processes_oversubscribed);
    tcase_add_test(tc, simulated_nodes);
    tcase_add_test(tc, bad_input_fails_once);
    tcase_add_test(tc, failing_rank_ends_the_job);
    tcase_add_test(tc, killed_rank_ends_the_job);
    tcase_add_test(tc, hung_rank_times_out);
    TCase *options = test_case(s, "options", 300);
    tcase_add_test(options, different_options_fail_once);
    tcase_add_test(options, different_resume_choices_fail_once);
    tcase_add_test(test_case(s, "stop", 300), stopped_rank_ends_the_job);
    return tu_run_suite(s);
}
