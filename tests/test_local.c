/* test_local.c: the shared-memory communicator: sums in rank order on every
 * rank (bitwise), doubles, broadcast, barrier reuse, the non-blocking
 * wrappers, timeout and abort (naming replicas by their job-wide number),
 * waiters that block rather than spin, an abort that wakes them,
 * and the wrappers' argument checks.
 *
 * Whether a waiter blocks, and what released it, is read from its futex
 * waits (collectives/local.c blocks and wakes with syscall(SYS_futex, ...)),
 * counted by the syscall() below, never from how long anything took: the
 * tests pass or fail alike on a fast, a slow or a loaded machine. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/dmem_impl.h"
#include "runtime/clock.h"
#include "collectives/local.h"
#include "tests/testutil.h"

/* A thread's futex waits (FUTEX_WAIT), counted where the thread set
 * tl_waits: how many began, and whether the latest ended by its own
 * timeout (a waiter's timed check, ETIMEDOUT) rather than by a wake. */
typedef struct futex_waits {
    atomic_int entered;
    atomic_int last_timed_out;
} futex_waits;

static _Thread_local futex_waits *tl_waits;

typedef long (*syscall_fn)(long, ...);

/* Stands in for libc's syscall() in this process (the executable's
 * definition is the one the communicator's object resolves to) and
 * forwards every call to it; counts the FUTEX_WAITs of the threads that
 * set tl_waits. Six arguments, as libc's own reads: on x86-64 and aarch64
 * they come from the registers that va_start saves, whatever the caller
 * passed. */
long syscall(long number, ...) {
    static _Atomic(syscall_fn) real;
    syscall_fn fn = atomic_load_explicit(&real, memory_order_relaxed);
    if (fn == NULL) {
        fn = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
        atomic_store_explicit(&real, fn, memory_order_relaxed);
    }
    va_list ap;
    va_start(ap, number);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    futex_waits *w = number == SYS_futex && (a[1] & FUTEX_CMD_MASK) == FUTEX_WAIT ? tl_waits : NULL;
    if (w) atomic_fetch_add(&w->entered, 1);
    long r = fn(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (w) {
        int e = errno;
        atomic_store(&w->last_timed_out, r == -1 && e == ETIMEDOUT);
        errno = e;
    }
    return r;
}

/* How long a rank waits for the others to block before it gives up and
 * fails the test: a bound on a hang (a waiter that spins never blocks),
 * not a measure of speed. */
#define BLOCK_BOUND_S 60.0

typedef struct job {
    mr_comm *c;
    int rank;
    size_t n;
    float *buf;
    int op; /* 0 all-reduce, 1 broadcast, 2 many small all-reduces, 3 absent, 4 abort,
               5 f64 all-reduce, 6 all-reduce in two started halves, 7 all-reduce
               once the others block, 8 abort once the others block */
    int root;
    struct job *all;    /* (c->size) every rank's job, for ops 7 and 8 */
    futex_waits waits;  /* this rank's futex waits */
    int others_blocked; /* ops 7 and 8: the others blocked before this rank came */
    double wall_s;      /* wall time the thread spent in its op */
    mr_status st;
    mr_error err;
} job;

static float value(int rank, size_t i) {
    return (float)((rank + 1) * 0.37) + (float)i * 1e-3f + 1.0f / (float)(rank + 3);
}

/* Waits until every other rank has begun a futex wait: blocked in the
 * kernel, not spinning. 0 if one has not within BLOCK_BOUND_S. */
static int others_block(const job *j) {
    const struct timespec ms = {0, 1000000};
    for (double start = mr_now_s(); mr_now_s() - start < BLOCK_BOUND_S; nanosleep(&ms, NULL)) {
        int all = 1;
        for (int r = 0; r < j->c->size; r++)
            all &= r == j->rank || atomic_load(&j->all[r].waits.entered) > 0;
        if (all) return 1;
    }
    return 0;
}

/* Op 7's arrival: once the others block, and then 0.3 s later, the span
 * over which test waiters_block counts their futex waits. */
static void arrive_late(job *j) {
    j->others_blocked = others_block(j);
    const struct timespec span = {0, 300000000};
    nanosleep(&span, NULL);
}

static void *worker(void *arg) {
    job *j = arg;
    tl_waits = &j->waits;
    double wall0 = mr_now_s();
    if (j->op == 7) arrive_late(j);
    if (j->op == 8) j->others_blocked = others_block(j);
    switch (j->op) {
    case 0:
    case 7:
        j->st = mr_comm_allreduce_sum(j->c, j->rank, mr_dfloat_of(j->buf), j->n, &j->err);
        break;
    case 1:
        j->st = mr_comm_broadcast(j->c, j->rank, mr_dfloat_of(j->buf), j->n, j->root, &j->err);
        break;
    case 2:
        for (int k = 0; k < 1000 && j->st == MR_OK; k++) {
            j->buf[0] = (float)j->rank;
            j->st = mr_comm_allreduce_sum(j->c, j->rank, mr_dfloat_of(j->buf), 1, &j->err);
            if (j->st == MR_OK && j->buf[0] != (float)(j->c->size * (j->c->size - 1) / 2))
                j->st = MR_ERR_RUNTIME;
            if (j->st == MR_OK) j->st = mr_comm_barrier(j->c, j->rank, &j->err);
        }
        break;
    case 3:
        break; /* never arrives */
    case 4:
    case 8:
        mr_comm_abort(j->c, j->rank);
        j->st = MR_ERR_RUNTIME;
        break;
    case 5: {
        double d[3] = {1e9 + j->rank, 0.1 * (j->rank + 1), (double)(1 << 26)};
        j->st = mr_comm_allreduce_sum_f64(j->c, j->rank, d, 3, &j->err);
        memcpy(j->buf, d, sizeof d);
        break;
    }
    case 6:
        j->st = mr_comm_allreduce_start(j->c, j->rank, mr_dfloat_of(j->buf), j->n / 2, &j->err);
        if (j->st == MR_OK)
            j->st = mr_comm_allreduce_start(j->c, j->rank, mr_dfloat_of(j->buf + j->n / 2),
                                            j->n - j->n / 2, &j->err);
        if (j->st == MR_OK) j->st = mr_comm_progress(j->c, j->rank, &j->err);
        if (j->st == MR_OK) j->st = mr_comm_wait_all(j->c, j->rank, &j->err);
        break;
    case 9: /* the same, joined and settled (without those slots: wait_all) */
        j->st = mr_comm_allreduce_start(j->c, j->rank, mr_dfloat_of(j->buf), j->n, &j->err);
        if (j->st == MR_OK) j->st = mr_comm_join_all(j->c, j->rank, &j->err);
        j->st = mr_comm_settle(j->c, j->rank, j->st, &j->err);
        break;
    }
    j->wall_s = mr_now_s() - wall0;
    return NULL;
}

/* Runs one job per rank (ops[r]), returns the jobs. Every job is filled in
 * before the first thread starts: ops 7 and 8 read the others' jobs. */
static job *run_all(mr_comm *c, size_t n, const int *ops, int root) {
    int R = c->size;
    job *jobs = calloc((size_t)R, sizeof *jobs);
    pthread_t tid[16];
    for (int r = 0; r < R; r++) {
        jobs[r] = (job){.c = c, .rank = r, .n = n, .op = ops[r], .root = root, .all = jobs};
        jobs[r].buf = malloc(sizeof(float) * (n > 6 ? n : 6));
        for (size_t i = 0; i < n; i++)
            jobs[r].buf[i] = value(r, i);
    }
    for (int r = 0; r < R; r++)
        pthread_create(&tid[r], NULL, worker, &jobs[r]);
    for (int r = 0; r < R; r++)
        pthread_join(tid[r], NULL);
    return jobs;
}

static void free_jobs(job *jobs, int R) {
    for (int r = 0; r < R; r++)
        free(jobs[r].buf);
    free(jobs);
}

START_TEST(allreduce_bitwise_in_rank_order) {
    const size_t sizes[] = {0, 1, 7, 1000, 100003};
    for (int R = 1; R <= 4; R++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            mr_comm *c;
            mr_error err = {0};
            ck_assert_int_eq(mr_comm_local_create(R, &c, &err), MR_OK);
            int ops[4] = {0, 0, 0, 0};
            size_t n = sizes[k];
            job *jobs = run_all(c, n, ops, 0);
            for (int r = 0; r < R; r++)
                ck_assert_msg(jobs[r].st == MR_OK, "%s", jobs[r].err.msg);
            for (size_t i = 0; i < n; i++) {
                float want = value(0, i);
                for (int q = 1; q < R; q++)
                    want += value(q, i);
                for (int r = 0; r < R; r++)
                    ck_assert_msg(memcmp(&jobs[r].buf[i], &want, sizeof want) == 0,
                                  "R=%d n=%zu rank %d element %zu: %g != %g", R, n, r, i,
                                  jobs[r].buf[i], want);
            }
            free_jobs(jobs, R);
            mr_comm_destroy(c);
        }
}
END_TEST

START_TEST(broadcast_from_every_root) {
    for (int root = 0; root < 3; root++) {
        mr_comm *c;
        mr_error err = {0};
        ck_assert_int_eq(mr_comm_local_create(3, &c, &err), MR_OK);
        int ops[3] = {1, 1, 1};
        job *jobs = run_all(c, 1001, ops, root);
        for (int r = 0; r < 3; r++) {
            ck_assert_int_eq(jobs[r].st, MR_OK);
            for (size_t i = 0; i < 1001; i++)
                ck_assert(jobs[r].buf[i] == value(root, i));
        }
        free_jobs(jobs, 3);
        mr_comm_destroy(c);
    }
}
END_TEST

START_TEST(many_small_collectives) {
    for (int R = 2; R <= 4; R += 2) {
        mr_comm *c;
        mr_error err = {0};
        ck_assert_int_eq(mr_comm_local_create(R, &c, &err), MR_OK);
        int ops[4] = {2, 2, 2, 2};
        job *jobs = run_all(c, 1, ops, 0);
        for (int r = 0; r < R; r++)
            ck_assert_msg(jobs[r].st == MR_OK, "rank %d: %s", r, jobs[r].err.msg);
        free_jobs(jobs, R);
        mr_comm_destroy(c);
    }
}
END_TEST

START_TEST(timeout_names_the_missing_rank) {
    mr_comm *c;
    mr_error err = {0};
    ck_assert_int_eq(mr_comm_local_create(3, &c, &err), MR_OK);
    c->timeout_s = 0.2;
    /* rank 2 never arrives; were the timeout not kept, the test case's
     * own timeout would end the wait */
    int ops[3] = {0, 0, 3};
    job *jobs = run_all(c, 10, ops, 0);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(jobs[r].st, MR_ERR_RUNTIME);
        ck_assert_msg(strstr(jobs[r].err.msg, "all-reduce") &&
                          strstr(jobs[r].err.msg, "replica(s) 2"),
                      "%s", jobs[r].err.msg);
        /* the whole timeout, however fast the machine */
        ck_assert_double_ge(jobs[r].wall_s, 0.2);
    }
    free_jobs(jobs, 3);
    mr_comm_destroy(c);
}
END_TEST

START_TEST(abort_releases_the_others) {
    mr_comm *c;
    mr_error err = {0};
    ck_assert_int_eq(mr_comm_local_create(3, &c, &err), MR_OK);
    int ops[3] = {0, 4, 0}; /* rank 1 fails and aborts */
    job *jobs = run_all(c, 10, ops, 0);
    /* the others are released with an echo of rank 1's failure, not a cause */
    ck_assert_int_eq(jobs[0].st, MR_ERR_ABORTED);
    ck_assert_int_eq(jobs[2].st, MR_ERR_ABORTED);
    ck_assert_msg(strstr(jobs[0].err.msg, "aborted by replica 1"), "%s", jobs[0].err.msg);
    /* and later collectives fail at once */
    float x = 1.0f;
    ck_assert_int_eq(mr_comm_allreduce_sum(c, 0, mr_dfloat_of(&x), 1, &err), MR_ERR_ABORTED);
    free_jobs(jobs, 3);
    mr_comm_destroy(c);
}
END_TEST

/* A waiter spins for a moment and then blocks: a spinning or yielding
 * waiter would burn the time a late rank takes, which a neighbour sharing
 * its core would lose. Rank 1 arrives only once rank 0 has begun a futex
 * wait (a waiter that never blocks fails the test at BLOCK_BOUND_S), and
 * 0.3 s after that: rank 0 sleeps through it, waking at most for its timed
 * checks (one a second), where a waiter that polls with short sleeps would
 * wake hundreds of times. The last rank's arrival wakes it: its last wait
 * did not end by its timeout. The late rank's data still arrives whole. */
START_TEST(waiters_block) {
    mr_comm *c;
    mr_error err = {0};
    ck_assert_int_eq(mr_comm_local_create(2, &c, &err), MR_OK);
    int ops[2] = {0, 7};
    job *jobs = run_all(c, 100, ops, 0);
    ck_assert_msg(jobs[1].others_blocked, "rank 0 did not block within %.0f s", BLOCK_BOUND_S);
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(jobs[r].st, MR_OK);
    ck_assert_float_eq(jobs[0].buf[99], value(0, 99) + value(1, 99));
    int waits = atomic_load(&jobs[0].waits.entered);
    ck_assert_msg(waits <= 2 + (int)jobs[0].wall_s, "%d futex waits in %.3f s", waits,
                  jobs[0].wall_s);
    ck_assert_msg(!atomic_load(&jobs[0].waits.last_timed_out),
                  "rank 0 left at its timed check, not at rank 1's wake");
    free_jobs(jobs, 2);
    mr_comm_destroy(c);
}
END_TEST

/* An abort wakes the waiters that are blocked already: they leave at the
 * abort, not at their next timed check (one a second). Rank 1 aborts once
 * ranks 0 and 2 have begun their futex waits; each one's last wait ends by
 * the abort's wake, not by its timeout. A timer that runs out in the very
 * moment of the abort also ends a wait by its timeout: the case is tried
 * again, up to 3 times, where a missing wake fails every time. */
START_TEST(abort_wakes_blocked_waiters) {
    int woken = 0;
    for (int attempt = 0; attempt < 3 && !woken; attempt++) {
        mr_comm *c;
        mr_error err = {0};
        ck_assert_int_eq(mr_comm_local_create(3, &c, &err), MR_OK);
        int ops[3] = {0, 8, 0};
        job *jobs = run_all(c, 10, ops, 0);
        ck_assert_msg(jobs[1].others_blocked, "ranks 0 and 2 did not block within %.0f s",
                      BLOCK_BOUND_S);
        woken = 1;
        for (int r = 0; r < 3; r += 2) {
            ck_assert_int_eq(jobs[r].st, MR_ERR_ABORTED);
            woken &= !atomic_load(&jobs[r].waits.last_timed_out);
        }
        free_jobs(jobs, 3);
        mr_comm_destroy(c);
    }
    ck_assert_msg(woken, "a blocked waiter left at its timed check, not at the abort's wake");
}
END_TEST

/* Doubles keep what floats lose: 1e9 + 1 and sums past 2^24, in rank order. */
START_TEST(allreduce_f64_exact) {
    for (int R = 1; R <= 3; R++) {
        mr_comm *c;
        mr_error err = {0};
        ck_assert_int_eq(mr_comm_local_create(R, &c, &err), MR_OK);
        int ops[3] = {5, 5, 5};
        job *jobs = run_all(c, 0, ops, 0);
        double want[3] = {0, 0, 0};
        for (int r = 0; r < R; r++) {
            want[0] += 1e9 + r;
            want[1] += 0.1 * (r + 1);
            want[2] += (double)(1 << 26);
        }
        for (int r = 0; r < R; r++) {
            ck_assert_msg(jobs[r].st == MR_OK, "%s", jobs[r].err.msg);
            ck_assert(memcmp(jobs[r].buf, want, sizeof want) == 0);
        }
        free_jobs(jobs, R);
        mr_comm_destroy(c);
    }
}
END_TEST

/* Without a non-blocking slot the started reductions complete at once:
 * two started halves give the bits of one all-reduce. */
START_TEST(started_allreduce_completes) {
    mr_comm *c;
    mr_error err = {0};
    ck_assert_int_eq(mr_comm_local_create(3, &c, &err), MR_OK);
    ck_assert_int_eq(mr_comm_is_async(c), 0);
    int ops[3] = {6, 6, 6};
    job *jobs = run_all(c, 1001, ops, 0);
    for (int r = 0; r < 3; r++) {
        ck_assert_msg(jobs[r].st == MR_OK, "%s", jobs[r].err.msg);
        for (size_t i = 0; i < 1001; i++) {
            float want = value(0, i) + value(1, i) + value(2, i);
            ck_assert(memcmp(&jobs[r].buf[i], &want, sizeof want) == 0);
        }
    }
    free_jobs(jobs, 3);
    mr_comm_destroy(c);
}
END_TEST

/* join_all and settle on a communicator without them: wait_all, and
 * settle hands back the caller's wait as it was. */
START_TEST(join_and_settle_fall_back) {
    mr_comm *c;
    mr_error err = {0};
    ck_assert_int_eq(mr_comm_local_create(2, &c, &err), MR_OK);
    int ops[2] = {9, 9};
    job *jobs = run_all(c, 100, ops, 0);
    for (int r = 0; r < 2; r++) {
        ck_assert_msg(jobs[r].st == MR_OK, "%s", jobs[r].err.msg);
        for (size_t i = 0; i < 100; i++) {
            float want = value(0, i) + value(1, i);
            ck_assert(memcmp(&jobs[r].buf[i], &want, sizeof want) == 0);
        }
    }
    free_jobs(jobs, 2);
    mr_error_set(&err, MR_ERR_IO, "the caller's wait");
    ck_assert_int_eq(mr_comm_settle(c, 0, MR_ERR_IO, &err), MR_ERR_IO);
    ck_assert_str_eq(err.msg, "the caller's wait");
    ck_assert_int_eq(mr_comm_settle(c, 0, MR_OK, &err), MR_OK);
    ck_assert_int_eq(mr_comm_settle(c, 2, MR_OK, &err), MR_ERR_USAGE);
    ck_assert_int_eq(mr_comm_join_all(c, -1, &err), MR_ERR_USAGE);
    mr_comm_destroy(c);
}
END_TEST

/* A local level placed in a job names its replicas by their job-wide number. */
START_TEST(placed_names_job_replicas) {
    mr_comm *c;
    mr_error err = {0};
    ck_assert_int_eq(mr_comm_local_create(2, &c, &err), MR_OK);
    mr_comm_local_place(c, 6, 1); /* replicas 6 and 7, one core: yield at once */
    c->timeout_s = 0.2;
    int ops[2] = {0, 3};
    job *jobs = run_all(c, 10, ops, 0);
    ck_assert_int_eq(jobs[0].st, MR_ERR_RUNTIME);
    ck_assert_msg(strstr(jobs[0].err.msg, "replica 6 waited") &&
                      strstr(jobs[0].err.msg, "replica(s) 7"),
                  "%s", jobs[0].err.msg);
    free_jobs(jobs, 2);
    mr_comm_destroy(c);
}
END_TEST

START_TEST(wrapper_checks) {
    mr_comm *c;
    mr_error err = {0};
    ck_assert_int_eq(mr_comm_local_create(2, &c, &err), MR_OK);
    float x = 0.0f;
    ck_assert_int_eq(mr_comm_allreduce_sum(c, 2, mr_dfloat_of(&x), 1, &err), MR_ERR_USAGE);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_comm_broadcast(c, 0, mr_dfloat_of(&x), 1, 5, &err), MR_ERR_USAGE);
    ck_assert_str_eq(mr_comm_name(c), "local");
    mr_comm_destroy(c);
    ck_assert_int_eq(mr_comm_local_create(0, &c, &err), MR_ERR_USAGE);
    setenv("MIRRORED_COMM_TIMEOUT", "12.5", 1);
    ck_assert_double_eq(mr_comm_default_timeout(), 12.5);
    setenv("MIRRORED_COMM_TIMEOUT", "abc", 1);
    ck_assert_double_eq(mr_comm_default_timeout(), 600.0);
    unsetenv("MIRRORED_COMM_TIMEOUT");
    ck_assert_double_eq(mr_comm_parse_timeout("2.5"), 2.5);
    ck_assert_double_eq(mr_comm_parse_timeout("0"), -1.0);
    ck_assert_double_eq(mr_comm_parse_timeout("inf"), -1.0);
    ck_assert_double_eq(mr_comm_parse_timeout("5s"), -1.0);
    ck_assert_double_eq(mr_comm_parse_timeout(NULL), -1.0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("local");
    TCase *tc = tcase_create("local");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, allreduce_bitwise_in_rank_order);
    tcase_add_test(tc, broadcast_from_every_root);
    tcase_add_test(tc, many_small_collectives);
    tcase_add_test(tc, timeout_names_the_missing_rank);
    tcase_add_test(tc, abort_releases_the_others);
    tcase_add_test(tc, waiters_block);
    tcase_add_test(tc, abort_wakes_blocked_waiters);
    tcase_add_test(tc, allreduce_f64_exact);
    tcase_add_test(tc, started_allreduce_completes);
    tcase_add_test(tc, join_and_settle_fall_back);
    tcase_add_test(tc, placed_names_job_replicas);
    tcase_add_test(tc, wrapper_checks);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
