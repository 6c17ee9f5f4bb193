/* test_isolate.c: a reader's trial run in a child process (isolate.h): a
 * child that returns (an error or not) lets the caller go on; one that
 * crashes is a one-line refusal naming the file; the child's writes never
 * reach the parent; a child that never ends is killed after its seconds,
 * and one whose parent dies dies with it. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/h5file.h"
#include "runtime/isolate.h"
#include "tests/testutil.h"

static mr_status returns_ok(void *arg) {
    *(int *)arg = 1; /* the child's copy */
    return MR_OK;
}

static mr_status returns_error(void *arg) {
    (void)arg;
    return MR_ERR_DATA;
}

static mr_status crashes(void *arg) {
    (void)arg;
    raise(SIGSEGV);
    return MR_OK;
}

static mr_status aborts(void *arg) {
    (void)arg;
    abort();
}

/* dies where it runs in the child of mr_isolate */
static mr_status dies_in_child(void *arg) {
    (void)arg;
    if (mr_isolate_in_child()) abort();
    return MR_OK;
}

/* mr_isolate_in_child: 1 in the child only (the backend leaves device
 * memory alone there), 0 in the caller before and after. */
START_TEST(knows_the_child) {
    mr_error err = {0};
    ck_assert_int_eq(mr_isolate_in_child(), 0);
    ck_assert_int_eq(dies_in_child(NULL), MR_OK);
    ck_assert_int_eq(mr_isolate("f.h5", "the reader", dies_in_child, NULL, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "f.h5: the reader crashed reading it (SIGABRT)") != NULL, "%s",
                  err.msg);
    ck_assert_int_eq(mr_isolate_in_child(), 0);
}
END_TEST

START_TEST(child_outcomes) {
    mr_error err = {0};
    int touched = 0;
    ck_assert_int_eq(mr_isolate("f.h5", "the reader", returns_ok, &touched, &err), MR_OK);
    ck_assert_int_eq(touched, 0);
    ck_assert_int_eq(mr_isolate("f.h5", "the reader", returns_error, NULL, &err), MR_OK);
    ck_assert_int_eq(mr_isolate("f.h5", "the reader", crashes, NULL, &err), MR_ERR_DATA);
    ck_assert_str_eq(err.msg, "f.h5: the reader crashed reading it (SIGSEGV): the file is damaged");
    mr_error_clear(&err);
    ck_assert_int_eq(mr_isolate("g.h5", "HDF5", aborts, NULL, &err), MR_ERR_DATA);
    ck_assert_str_eq(err.msg, "g.h5: HDF5 crashed reading it (SIGABRT): the file is damaged");
}
END_TEST

/* A reader that never ends (HDF5 on /dev/zero): it tells its pid on the
 * pipe arg, then spins. */
static mr_status spins(void *arg) {
    pid_t me = getpid();
    if (write(*(int *)arg, &me, sizeof me) != sizeof me) return MR_ERR_IO;
    /* unsigned: a signed counter overflows within the second on a fast
     * idle core, and UBSan then ends the child (exit 1, "crashed") */
    for (volatile unsigned i = 0;; i++)
        ;
    return MR_OK;
}

/* A child that never ends is killed after its seconds: a refusal naming the file. */
START_TEST(child_time_bound) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    mr_error err = {0};
    ck_assert_int_eq(mr_isolate_timed("z.h5", "HDF5", spins, &fds[1], 1, &err), MR_ERR_DATA);
    ck_assert_str_eq(err.msg, "z.h5: HDF5 did not finish reading it in 1 s");
    close(fds[0]), close(fds[1]);
}
END_TEST

/* The caller killed while its child reads: the child dies too, no orphan
 * left spinning. This process adopts orphans (a subreaper) to see it. */
START_TEST(child_dies_with_parent) {
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t caller = fork();
    ck_assert_int_ge(caller, 0);
    if (caller == 0) {
        mr_error err = {0};
        mr_isolate("z.h5", "HDF5", spins, &fds[1], &err);
        _exit(0);
    }
    pid_t reader;
    ck_assert_int_eq(read(fds[0], &reader, sizeof reader), (ssize_t)sizeof reader);
    kill(caller, SIGKILL);
    int ws;
    ck_assert_int_eq(waitpid(caller, &ws, 0), caller);
    /* the orphan is ours now: it ends (the tcase's timeout bounds a hang) */
    ck_assert_int_eq(waitpid(reader, &ws, 0), reader);
    ck_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    close(fds[0]), close(fds[1]);
}
END_TEST

#ifndef __SANITIZE_ADDRESS__ /* see main */
/* ---- a trial read while another thread is inside HDF5 ---- */

static char h5_path[64];
static atomic_int readers_stop;

/* Opens, reads and closes h5_path, as any reader of the library does. */
static mr_status read_once(void *arg) {
    (void)arg;
    mr_h5 h;
    mr_error err = {0};
    MR_CHECK(mr_h5_open(&h, h5_path, &err));
    float v[256];
    const int64_t n = 256;
    mr_status st = mr_h5_read(&h, h.file, "v", MR_H5_F32, 1, &n, v, &err);
    mr_h5_close(&h);
    return st;
}

static void *reads_until_stopped(void *arg) {
    (void)arg;
    while (!atomic_load(&readers_stop))
        read_once(NULL);
    return NULL;
}

/* Forked while another thread holds libhdf5's (thread-safe) lock, the
 * child would wait on it forever: every trial read of a valid file would
 * then be "did not finish". h5_lock.h: none is inside HDF5 at the fork. */
START_TEST(trial_while_another_thread_reads) {
    snprintf(h5_path, sizeof h5_path, "/tmp/mr_isolate_XXXXXX");
    int fd = mkstemp(h5_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    mr_h5 h;
    mr_error err = {0};
    float v[256] = {1.0f};
    const int64_t n = 256;
    ck_assert_int_eq(mr_h5_create(&h, h5_path, &err), MR_OK);
    ck_assert_int_eq(mr_h5_write(&h, h.file, "v", MR_H5_F32, 1, &n, v, &err), MR_OK);
    ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
    pthread_t t;
    atomic_store(&readers_stop, 0);
    ck_assert_int_eq(pthread_create(&t, NULL, reads_until_stopped, NULL), 0);
    mr_status st = MR_OK;
    for (int i = 0; i < 100 && st == MR_OK; i++)
        st = mr_isolate_timed(h5_path, "HDF5", read_once, NULL, 5, &err);
    atomic_store(&readers_stop, 1);
    pthread_join(t, NULL);
    unlink(h5_path);
    ck_assert_msg(st == MR_OK, "%s", err.msg);
}
END_TEST
#endif

int main(void) {
    Suite *s = suite_create("isolate");
    TCase *tc = tcase_create("isolate");
    tcase_add_test(tc, child_outcomes);
    tcase_add_test(tc, knows_the_child);
    tcase_add_test(tc, child_time_bound);
    tcase_add_test(tc, child_dies_with_parent);
#ifndef __SANITIZE_ADDRESS__
    /* not under ASan: its allocator (GCC 12's libasan) takes no locks
     * around fork(), so a child forked while the reader thread allocates
     * can wait forever on them, whatever HDF5 does; the release build's
     * run of this case is the one that tells */
    tcase_add_test(tc, trial_while_another_thread_reads);
#endif
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
