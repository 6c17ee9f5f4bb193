/* test_kill_resume.c: a run killed 20 times by SIGKILL at seeded random
 * moments, each time restarted with the same command and --resume auto,
 * ends bitwise as the uninterrupted run (the weights' params_hash in
 * --json), and its checkpoint folder holds no temporary file at the end.
 *
 * The moments are events, not times: each round watches the checkpoint
 * folder with inotify and kills on the k-th file event of a seeded kind
 * (k in 1..3): a temporary created (the kill then lands in the middle of a
 * write, which leaves a "run-stepN.h5.tmp.PID" for the next start to
 * sweep) or a checkpoint renamed into place, after a seeded delay of 0 to
 * 1 ms (a temporary) or 0 to 5 ms (a checkpoint). A round moves the run
 * on by a few checkpoints of 4 updates: 20 rounds stay far from the end
 * of its 1200 updates on any machine. Every wait has a bound (5 minutes
 * without an event fails), used only to fail. Suite 'slow'. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/rng.h"
#include "tests/testutil.h"

enum { ROUNDS = 20 };

static char train_exe[4096], dir[4096];

/* A small CNN with BN and dropout (every kind of state a resume restores),
 * 20 updates an epoch, a checkpoint every 4 updates. */
static const char *model_cfg =
    "[net]\nglobal_batch=16\nepochs=60\nvalidation_split=0.2\nseed=5\ncheckpoint=ck/run.h5\n"
    "checkpoint_every=4 steps\n"
    "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nscale=1/255\n"
    "[input]\nshape=8,8,1\n[conv2d]\nfilters=4\nsize=3\n[batchnorm]\n[activation]\n"
    "activation=relu\n[maxpool]\nsize=2\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
    "[dropout]\nrate=0.3\n[dense]\nunits=4\nactivation=softmax\n";

static void setup(void) {
    char *p = tu_build_path("launch/mirrored_train");
    snprintf(train_exe, sizeof train_exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    tu_write_image_data(dir, "x.npy", "y.npy", 400, 4);
    free(tu_write_text(dir, "k.cfg", model_cfg));
}

/* Runs `cmd` in dir; its exit status. */
static int run(const char *cmd, char **out) {
    char full[16384];
    snprintf(full, sizeof full, "cd %s && T=%s sh -c '%s'", dir, train_exe, cmd);
    return tu_run(full, out);
}

/* Starts the resuming run in the background, its output appended to
 * rounds.log; its pid. */
static pid_t start_run(void) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "cd %s && exec %s k.cfg --devices cpu --resume auto --json c.json >> rounds.log 2>&1",
             dir, train_exe);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    ck_assert(pid > 0);
    return pid;
}

/* Events of the kind wanted in the inotify records buf[len]: a temporary
 * created (want_tmp) or a checkpoint renamed into place. */
static int count_events(const char *buf, ssize_t len, int want_tmp) {
    int n = 0;
    for (const char *p = buf; p < buf + len;) {
        const struct inotify_event *e = (const struct inotify_event *)p;
        const int tmp = e->len && strstr(e->name, ".tmp.") != NULL;
        if (want_tmp ? (e->mask & IN_CREATE) && tmp : (e->mask & IN_MOVED_TO) && !tmp) n++;
        p += sizeof *e + e->len;
    }
    return n;
}

/* One round: start the run, wait for `events` events of the kind, wait
 * delay_s, SIGKILL. Returns the run's wait status. */
static int kill_round(int fd, int want_tmp, int events, double delay_s) {
    char buf[65536] __attribute__((aligned(8)));
    while (read(fd, buf, sizeof buf) > 0) /* what earlier rounds left */
        ;
    pid_t pid = start_run();
    int seen = 0, status = 0;
    while (seen < events) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = poll(&pfd, 1, 300000);
        ck_assert_msg(ready > 0, "no checkpoint event in 5 minutes");
        ssize_t len = read(fd, buf, sizeof buf);
        if (len > 0) seen += count_events(buf, len, want_tmp);
        if (waitpid(pid, &status, WNOHANG) == pid) return status; /* it ended first */
    }
    struct timespec ts = {0, (long)(delay_s * 1e9)};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return status;
}

/* The temporaries the restarts swept, from their "Removed N temporary
 * files" lines in rounds.log. */
static int swept(void) {
    char *log = tu_read_in(dir, "rounds.log");
    int total = 0;
    for (const char *p = log; p && (p = strstr(p, "Removed ")) != NULL; p++)
        total += atoi(p + 8);
    free(log);
    return total;
}

START_TEST(twenty_sigkills_end_bitwise) {
    char *out;
    int rc = run("rm -rf ck && $T k.cfg --devices cpu --quiet --json full.json && rm -rf ck && "
                 "mkdir ck && rm -f c.json rounds.log",
                 &out);
    ck_assert_msg(rc == 0, "the uninterrupted run: %s", out);
    free(out);
    char ck[8192];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    ck_assert(fd >= 0);
    ck_assert(inotify_add_watch(fd, ck, IN_CREATE | IN_MOVED_TO) >= 0);
    float u[3 * ROUNDS];
    mr_rng_uniform(2027, 3 * ROUNDS, 0, 0, 0.0f, 1.0f, u, 3 * ROUNDS);
    int killed = 0;
    char seen[2048] = "";
    for (int i = 0; i < ROUNDS; i++) {
        const int want_tmp = u[3 * i] < 0.5f, events = 1 + (int)(3.0f * u[3 * i + 1]) % 3;
        const double delay = (want_tmp ? 0.001 : 0.005) * (double)u[3 * i + 2];
        int status = kill_round(fd, want_tmp, events, delay);
        killed += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        size_t len = strlen(seen);
        snprintf(seen + len, sizeof seen - len, " %s#%d+%.2fms:%s", want_tmp ? "tmp" : "ckpt",
                 events, delay * 1e3, WIFSIGNALED(status) ? "killed" : "ended");
    }
    close(fd);
    printf("rounds:%s\n", seen);
    ck_assert_msg(killed == ROUNDS, "%d of %d rounds killed the run:%s", killed, ROUNDS, seen);
    rc = run("$T k.cfg --devices cpu --resume auto --json c.json >> rounds.log 2>&1", NULL);
    ck_assert_msg(rc == 0, "the last restart exited %d", rc);
    printf("temporaries of killed writes swept at the restarts: %d\n", swept());
    tu_same_run(dir, "full.json", NULL, "c.json", NULL);
    rc = run("ls ck | grep tmp", &out);
    ck_assert_msg(rc != 0, "temporaries left in ck/: %s", out);
    free(out);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kill_resume");
    TCase *tc = tcase_create("kill_resume");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 1800);
    tcase_add_test(tc, twenty_sigkills_end_bitwise);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
