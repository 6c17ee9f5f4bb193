/* test_nccl.c: the NCCL communicator (backends/cuda/nccl_comm.c), reached
 * as the GPU kind's comm_create (backends/backends.h):
 *
 *   test_nccl        a CUDA build: creating one over a CPU context fails
 *                    cleanly with MR_ERR_UNSUPPORTED and says why (meson
 *                    test `nccl`; a build without CUDA has no NCCL)
 *   test_nccl gpu    over every visible GPU, one thread per GPU: all-reduce
 *                    against a CPU sum (exact for integer-valued floats,
 *                    within a rounding bound for random ones, the same bits
 *                    on every rank), broadcast from every root, the f64
 *                    all-reduce, buckets started then waited for in order
 *                    with the compute stream, barriers, abort and timeout
 *                    (meson test `nccl_gpu`, CUDA builds only). Without a
 *                    GPU it prints "SKIP: no GPU: <reason>" and exits 77,
 *                    meson's skip.
 * The GPU suite runs without forking (CK_NOFORK): the parent has asked the
 * CUDA runtime for the GPUs, and a forked child cannot use CUDA. So the
 * replica threads never assert: they record what failed and the test's
 * thread asserts after joining them. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backends.h"
#include "runtime/clock.h"
#include "tests/testutil.h"

/* The GPU kind's communicator (NCCL). Only called in a build that has a
 * GPU kind: a build without one has no NCCL (test_backends checks that it
 * has no "gpu" entry). */
static mr_status nccl_create(mr_backend **be, int local, mr_job *job, double timeout_s,
                             mr_comm **out, mr_error *err) {
    return mr_backend_kind_find("gpu")->comm_create(be, local, job, timeout_s, out, err);
}

START_TEST(cpu_context_refused) {
    if (!tu_cuda_built()) return; /* no NCCL in this build */
    mr_backend *be[1] = {tu_cpu_backend()};
    mr_comm *c = (mr_comm *)1;
    mr_error err = {0};
    ck_assert_int_eq(nccl_create(be, 1, NULL, 10.0, &c, &err), MR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err.msg, "cpu:0") && strstr(err.msg, "not a GPU"), "%s", err.msg);
}
END_TEST

START_TEST(bad_arguments_refused) {
    if (!tu_cuda_built()) return; /* no NCCL in this build */
    mr_backend *be[2] = {tu_cpu_backend(), NULL};
    mr_comm *c = (mr_comm *)1;
    mr_error err = {0};
    /* no replica at all */
    mr_status st = nccl_create(be, 0, NULL, 10.0, &c, &err);
    ck_assert_int_eq(st, MR_ERR_USAGE);
    ck_assert_ptr_null(c);
    ck_assert(err.msg[0] != '\0');
    /* a missing context */
    mr_error_clear(&err);
    c = (mr_comm *)1;
    be[0] = NULL;
    ck_assert_int_eq(nccl_create(be, 2, NULL, 10.0, &c, &err), MR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err.msg, "no context"), "%s", err.msg);
}
END_TEST

/* ---- GPU cases ---------------------------------------------------------- */

typedef struct gpus {
    int n;
    mr_backend *be[MR_MAX_GPUS];
    mr_comm *c;
} gpus;

static void open_gpus(gpus *g, double timeout_s) {
    mr_error err = {0};
    memset(g, 0, sizeof *g);
    g->n = tu_gpus()->count;
    for (int r = 0; r < g->n; r++)
        ck_assert_msg(mr_backend_create(mr_backend_kind_find("gpu"), r, &g->be[r], &err) == MR_OK,
                      "%s", err.msg);
    ck_assert_msg(nccl_create(g->be, g->n, NULL, timeout_s, &g->c, &err) == MR_OK, "%s", err.msg);
    ck_assert_str_eq(mr_comm_name(g->c), "nccl");
    ck_assert_int_eq(g->c->size, g->n);
    ck_assert_int_eq(g->c->world_size, g->n);
    ck_assert_int_eq(g->c->world_offset, 0);
    ck_assert(mr_comm_is_async(g->c));
}

static void close_gpus(gpus *g) {
    mr_comm_destroy(g->c);
    for (int r = 0; r < g->n; r++)
        mr_backend_destroy(g->be[r]);
}

typedef struct worker {
    gpus *g;
    int rank;
    int op;       /* what the thread does (the tests below) */
    size_t n;     /* floats */
    float *host;  /* (n) this rank's result, read back */
    double d[3];  /* the f64 all-reduce */
    mr_status st; /* the first failing collective's status */
    mr_error err;
    char fail[256]; /* a wrong value, described ("" if none) */
} worker;

/* An integer-valued float, exact in any sum of up to 64 ranks. */
static float int_value(int rank, size_t i) {
    return (float)((rank + 1) * (int)((i * 7) % 1001));
}

/* A float in [-1, 1), from (rank, i) alone. */
static float rand_value(int rank, size_t i) {
    uint64_t x = ((uint64_t)rank << 40) ^ (i * 0x9E3779B97F4A7C15ull);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Device copy of `host` (n floats) on the worker's context. */
static mr_dfloat *upload(worker *w, const float *host, size_t n) {
    mr_backend *be = w->g->be[w->rank];
    mr_dfloat *d = mr_backend_alloc_floats(be, n);
    if (d == NULL) {
        w->st = mr_error_set(&w->err, MR_ERR_NOMEM, "gpu:%d: cannot allocate", w->rank);
        return NULL;
    }
    w->st = mr_backend_to_device(be, d, host, sizeof(float) * n, &w->err);
    return d;
}

/* Reads back n floats into w->host, through the compute stream, which
 * waits for the collectives queued before (nccl_comm.h). */
static void download(worker *w, mr_dfloat *d, size_t n) {
    if (w->st == MR_OK)
        w->st = mr_backend_to_host(w->g->be[w->rank], w->host, d, sizeof(float) * n, &w->err);
}

enum {
    OP_INT,
    OP_RAND,
    OP_BROADCAST,
    OP_F64,
    OP_BUCKETS,
    OP_BUCKETS_JOINED,
    OP_BARRIER,
    OP_ABORT,
    OP_ABSENT,
    OP_ABSENT_JOINED
};

static const size_t bucket_n[4] = {1, 1000, 1 << 18, 7}; /* slices of one buffer, in order */

static void *work(void *arg) {
    worker *w = arg;
    mr_comm *c = w->g->c;
    mr_backend *be = w->g->be[w->rank];
    const int r = w->rank;
    w->st = mr_backend_enter(be, &w->err);
    if (w->st != MR_OK) return NULL;
    float *h = malloc(sizeof(float) * (w->n ? w->n : 1));
    mr_dfloat *d = NULL;
    switch (w->op) {
    case OP_INT:
    case OP_RAND:
        for (size_t i = 0; i < w->n; i++)
            h[i] = w->op == OP_INT ? int_value(r, i) : rand_value(r, i);
        d = upload(w, h, w->n);
        if (w->st == MR_OK) w->st = mr_comm_allreduce_sum(c, r, d, w->n, &w->err);
        /* integers: doubled on the compute stream at once, which must wait
         * for the sum (no host wait in between) */
        if (w->st == MR_OK && w->op == OP_INT) w->st = mr_backend_scale(be, d, w->n, 2.0f, &w->err);
        download(w, d, w->n);
        if (w->st == MR_OK) w->st = mr_comm_wait_all(c, r, &w->err);
        break;
    case OP_BROADCAST:
        for (int root = 0; root < c->world_size && w->st == MR_OK; root++) {
            for (size_t i = 0; i < w->n; i++)
                h[i] = rand_value(r, i);
            mr_backend_free(be, d);
            d = upload(w, h, w->n);
            if (w->st == MR_OK) w->st = mr_comm_broadcast(c, r, d, w->n, root, &w->err);
            download(w, d, w->n);
            for (size_t i = 0; i < w->n && w->st == MR_OK && !w->fail[0]; i++)
                if (memcmp(&w->host[i], &(float){rand_value(root, i)}, sizeof(float)) != 0)
                    snprintf(w->fail, sizeof w->fail, "root %d: element %zu is %g, not %g", root, i,
                             w->host[i], rand_value(root, i));
        }
        break;
    case OP_F64:
        w->d[0] = 1e9 + r;
        w->d[1] = 0.1 * (r + 1);
        w->d[2] = (double)(1 << 26) * (r + 1);
        w->st = mr_comm_allreduce_sum_f64(c, r, w->d, 3, &w->err);
        break;
    case OP_BUCKETS:
    case OP_BUCKETS_JOINED: {
        /* bucket 1 is scaled by 2 on the compute stream just before its
         * start (the all-reduce must wait for it), bucket 0 by 3 after
         * wait_all or join_all (the scaling must wait for the sum); joined,
         * the host waits only in the read, which settle then vouches for */
        for (size_t i = 0; i < w->n; i++)
            h[i] = int_value(r, i);
        d = upload(w, h, w->n);
        size_t off[5] = {0};
        for (int b = 0; b < 4; b++)
            off[b + 1] = off[b] + bucket_n[b];
        for (int b = 0; b < 4 && w->st == MR_OK; b++) {
            mr_dfloat *slice = mr_dfloat_at(d, (int64_t)off[b]);
            if (b == 1) w->st = mr_backend_scale(be, slice, bucket_n[b], 2.0f, &w->err);
            if (w->st == MR_OK) w->st = mr_comm_allreduce_start(c, r, slice, bucket_n[b], &w->err);
        }
        const int joined = w->op == OP_BUCKETS_JOINED;
        if (w->st == MR_OK)
            w->st = joined ? mr_comm_join_all(c, r, &w->err) : mr_comm_wait_all(c, r, &w->err);
        if (w->st == MR_OK) w->st = mr_backend_scale(be, d, bucket_n[0], 3.0f, &w->err);
        download(w, d, w->n);
        if (joined) w->st = mr_comm_settle(c, r, w->st, &w->err);
        break;
    }
    case OP_BARRIER:
        for (int k = 0; k < 100 && w->st == MR_OK; k++)
            w->st = mr_comm_barrier(c, r, &w->err);
        break;
    case OP_ABORT:
        /* rank 0 fails before the collective; the others are released */
        for (size_t i = 0; i < w->n; i++)
            h[i] = int_value(r, i);
        d = upload(w, h, w->n);
        if (w->st != MR_OK) break;
        if (r == 0) {
            mr_comm_abort(c, 0);
            w->st = mr_comm_allreduce_sum(c, r, d, w->n, &w->err);
        } else {
            w->st = mr_comm_allreduce_start(c, r, d, w->n, &w->err);
            if (w->st == MR_OK) w->st = mr_comm_wait_all(c, r, &w->err);
        }
        break;
    case OP_ABSENT:
        /* rank 0 never comes; the others time out */
        for (size_t i = 0; i < w->n; i++)
            h[i] = int_value(r, i);
        d = upload(w, h, w->n);
        if (w->st != MR_OK || r == 0) break;
        w->st = mr_comm_allreduce_start(c, r, d, w->n, &w->err);
        if (w->st == MR_OK) w->st = mr_comm_wait_all(c, r, &w->err);
        break;
    case OP_ABSENT_JOINED: {
        /* the same, joined: the read of the sum waits without a timeout of
         * its own (the context's is 0), so only the watchdog's abort ends it */
        for (size_t i = 0; i < w->n; i++)
            h[i] = int_value(r, i);
        d = upload(w, h, w->n);
        if (w->st != MR_OK || r == 0) break;
        const double t0 = mr_now_s();
        w->st = mr_comm_allreduce_start(c, r, d, w->n, &w->err);
        if (w->st == MR_OK) w->st = mr_comm_join_all(c, r, &w->err);
        download(w, d, w->n);
        w->st = mr_comm_settle(c, r, w->st, &w->err);
        w->d[0] = mr_now_s() - t0;
        break;
    }
    }
    /* cudaFree waits for the device: an aborted collective has ended */
    mr_backend_free(be, d);
    free(h);
    return NULL;
}

/* Runs op on every GPU's thread; returns the workers (free_workers). */
static worker *run_workers(gpus *g, int op, size_t n) {
    worker *w = calloc((size_t)g->n, sizeof *w);
    pthread_t tid[MR_MAX_GPUS];
    for (int r = 0; r < g->n; r++) {
        w[r] = (worker){.g = g, .rank = r, .op = op, .n = n};
        w[r].host = calloc(n ? n : 1, sizeof(float));
        ck_assert_int_eq(pthread_create(&tid[r], NULL, work, &w[r]), 0);
    }
    for (int r = 0; r < g->n; r++)
        pthread_join(tid[r], NULL);
    return w;
}

static void expect_ok(const gpus *g, const worker *w) {
    for (int r = 0; r < g->n; r++) {
        ck_assert_msg(w[r].st == MR_OK, "rank %d: %s", r, w[r].err.msg);
        ck_assert_msg(w[r].fail[0] == '\0', "rank %d: %s", r, w[r].fail);
    }
}

static void free_workers(const gpus *g, worker *w) {
    for (int r = 0; r < g->n; r++)
        free(w[r].host);
    free(w);
}

/* Every rank holds bitwise rank 0's result. */
static void expect_same_bits(const gpus *g, const worker *w, size_t n) {
    for (int r = 1; r < g->n; r++)
        ck_assert_msg(memcmp(w[r].host, w[0].host, sizeof(float) * n) == 0,
                      "rank %d's sum differs from rank 0's", r);
}

START_TEST(allreduce_integers_exact) {
    gpus g;
    open_gpus(&g, 60.0);
    const size_t sizes[] = {1, 1000, (1 << 20) + 3};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        worker *w = run_workers(&g, OP_INT, n);
        expect_ok(&g, w);
        for (size_t i = 0; i < n; i++) {
            float want = 0.0f;
            for (int q = 0; q < g.n; q++)
                want += int_value(q, i);
            want *= 2.0f; /* scaled after the sum (work) */
            ck_assert_msg(w[0].host[i] == want, "n=%zu element %zu: %g != %g", n, i, w[0].host[i],
                          want);
        }
        expect_same_bits(&g, w, n);
        free_workers(&g, w);
    }
    close_gpus(&g);
}
END_TEST

START_TEST(allreduce_random_within_rounding) {
    gpus g;
    open_gpus(&g, 60.0);
    const size_t n = 3 << 18;
    worker *w = run_workers(&g, OP_RAND, n);
    expect_ok(&g, w);
    /* NCCL sums R floats in an order of its own: each of the R - 1 roundings
     * errs by at most 2^-24 of a partial sum, itself at most sum |x_q| */
    for (size_t i = 0; i < n; i++) {
        double exact = 0.0, mag = 0.0;
        for (int q = 0; q < g.n; q++) {
            exact += rand_value(q, i);
            mag += fabs(rand_value(q, i));
        }
        double bound = (g.n > 1 ? g.n - 1 : 1) * ldexp(mag, -24) + ldexp(fabs(exact), -24);
        ck_assert_msg(fabs(w[0].host[i] - exact) <= bound, "element %zu: %.9g vs %.9g (bound %g)",
                      i, w[0].host[i], exact, bound);
    }
    expect_same_bits(&g, w, n);
    free_workers(&g, w);
    close_gpus(&g);
}
END_TEST

START_TEST(broadcast_from_every_root) {
    gpus g;
    open_gpus(&g, 60.0);
    worker *w = run_workers(&g, OP_BROADCAST, 100003);
    expect_ok(&g, w);
    free_workers(&g, w);
    close_gpus(&g);
}
END_TEST

START_TEST(allreduce_f64) {
    gpus g;
    open_gpus(&g, 60.0);
    worker *w = run_workers(&g, OP_F64, 0);
    expect_ok(&g, w);
    const int R = g.n;
    double want1 = 0.0;
    for (int q = 0; q < R; q++)
        want1 += 0.1 * (q + 1);
    for (int r = 0; r < R; r++) {
        ck_assert(w[r].d[0] == 1e9 * R + (double)(R * (R - 1) / 2)); /* integers: exact */
        ck_assert(w[r].d[2] == (double)(1 << 26) * (R * (R + 1) / 2));
        ck_assert_msg(fabs(w[r].d[1] - want1) <= 1e-15 * R, "%.17g vs %.17g", w[r].d[1], want1);
        ck_assert(memcmp(&w[r].d[1], &w[0].d[1], sizeof(double)) == 0);
    }
    free_workers(&g, w);
    close_gpus(&g);
}
END_TEST

START_TEST(buckets_started_then_waited) {
    gpus g;
    open_gpus(&g, 60.0);
    const size_t n = bucket_n[0] + bucket_n[1] + bucket_n[2] + bucket_n[3];
    worker *w = run_workers(&g, OP_BUCKETS, n);
    expect_ok(&g, w);
    for (size_t i = 0; i < n; i++) {
        float want = 0.0f;
        for (int q = 0; q < g.n; q++)
            want += int_value(q, i);
        /* bucket 0 scaled after the sums, bucket 1 before its own */
        if (i < bucket_n[0])
            want *= 3.0f;
        else if (i < bucket_n[0] + bucket_n[1])
            want *= 2.0f;
        ck_assert_msg(w[0].host[i] == want, "element %zu: %g != %g", i, w[0].host[i], want);
    }
    expect_same_bits(&g, w, n);
    free_workers(&g, w);
    close_gpus(&g);
}
END_TEST

/* join_all: the same sums, the host's only wait the read (settle MR_OK). */
START_TEST(buckets_started_then_joined) {
    gpus g;
    open_gpus(&g, 60.0);
    const size_t n = bucket_n[0] + bucket_n[1] + bucket_n[2] + bucket_n[3];
    worker *w = run_workers(&g, OP_BUCKETS_JOINED, n);
    expect_ok(&g, w);
    for (size_t i = 0; i < n; i++) {
        float want = 0.0f;
        for (int q = 0; q < g.n; q++)
            want += int_value(q, i);
        if (i < bucket_n[0])
            want *= 3.0f;
        else if (i < bucket_n[0] + bucket_n[1])
            want *= 2.0f;
        ck_assert_msg(w[0].host[i] == want, "element %zu: %g != %g", i, w[0].host[i], want);
    }
    expect_same_bits(&g, w, n);
    free_workers(&g, w);
    close_gpus(&g);
}
END_TEST

START_TEST(barriers) {
    gpus g;
    open_gpus(&g, 60.0);
    worker *w = run_workers(&g, OP_BARRIER, 0);
    expect_ok(&g, w);
    free_workers(&g, w);
    close_gpus(&g);
}
END_TEST

START_TEST(abort_releases_the_others) {
    gpus g;
    open_gpus(&g, 60.0);
    worker *w = run_workers(&g, OP_ABORT, 1 << 20);
    for (int r = 0; r < g.n; r++) {
        ck_assert_msg(w[r].st == MR_ERR_ABORTED, "rank %d: %d %s", r, w[r].st, w[r].err.msg);
        ck_assert_msg(strstr(w[r].err.msg, "aborted by replica 0"), "%s", w[r].err.msg);
    }
    free_workers(&g, w);
    close_gpus(&g);
}
END_TEST

START_TEST(absent_replica_times_out) {
    gpus g;
    open_gpus(&g, 2.0);
    if (g.n < 2) {
        printf("absent_replica_times_out: needs 2 GPUs, %d visible: not run\n", g.n);
        close_gpus(&g);
        return;
    }
    worker *w = run_workers(&g, OP_ABSENT, 1 << 20);
    ck_assert_msg(w[0].st == MR_OK, "%s", w[0].err.msg);
    /* every waiting rank fails; the first to time out names the absent
     * replica, and aborts its communicator on the way out, which the ranks
     * still waiting (3 GPUs or more) may see as NCCL's remote error first */
    int named = 0;
    for (int r = 1; r < g.n; r++) {
        ck_assert_msg(w[r].st == MR_ERR_RUNTIME, "rank %d: %d %s", r, w[r].st, w[r].err.msg);
        int waited = strstr(w[r].err.msg, "waited") &&
                     strstr(w[r].err.msg, "not yet queued by replica(s) 0");
        named += waited;
        ck_assert_msg(waited || (g.n > 2 && strstr(w[r].err.msg, "remote")), "%s", w[r].err.msg);
    }
    ck_assert_int_ge(named, 1);
    free_workers(&g, w);
    close_gpus(&g); /* aborts what is left, rank 0's communicator included */
}
END_TEST

/* Joined, nobody polls: the watchdog aborts the waiting ranks' NCCL
 * communicators within the timeout (2 s), their reads return, and settle
 * gives host_wait's message. Round 0: the reads wait for as long as it
 * takes (the contexts' timeout 0), so only the watchdog ends them; round
 * 1: they give up after the same 2 s, counted from a little later, which
 * usually comes before the watchdog's next look: settle names the
 * collective all the same, not the read. */
START_TEST(absent_replica_times_out_joined) {
    for (int round = 0; round < 2; round++) {
        gpus g;
        open_gpus(&g, 2.0);
        if (g.n < 2) {
            printf("absent_replica_times_out_joined: needs 2 GPUs, %d visible: not run\n", g.n);
            close_gpus(&g);
            return;
        }
        for (int r = 0; r < g.n; r++)
            g.be[r]->timeout_s = round == 0 ? 0.0 : 2.0;
        worker *w = run_workers(&g, OP_ABSENT_JOINED, 1 << 20);
        ck_assert_msg(w[0].st == MR_OK, "%s", w[0].err.msg);
        int named = 0;
        for (int r = 1; r < g.n; r++) {
            printf("round %d, rank %d after %.2f s: %s\n", round, r, w[r].d[0], w[r].err.msg);
            ck_assert_msg(w[r].st == MR_ERR_RUNTIME, "rank %d: %d %s", r, w[r].st, w[r].err.msg);
            int waited = strstr(w[r].err.msg, "waited 2 s") &&
                         strstr(w[r].err.msg, "not yet queued by replica(s) 0") &&
                         strstr(w[r].err.msg, "its NCCL communicator is aborted");
            named += waited;
            ck_assert_msg(waited || (g.n > 2 && strstr(w[r].err.msg, "remote")), "%s",
                          w[r].err.msg);
            /* the first rank to time out releases the others, which may have started later */
            ck_assert_msg(w[r].d[0] > 1.0 && w[r].d[0] < 30.0, "rank %d: %.2f s", r, w[r].d[0]);
        }
        ck_assert_int_ge(named, 1);
        free_workers(&g, w);
        close_gpus(&g);
    }
}
END_TEST

static int run_gpu_suite(void) {
    const mr_gpu_list *gl = tu_gpus();
    if (gl->count == 0) {
        printf("SKIP: no GPU: %s\n", gl->reason);
        return 77;
    }
    printf("NCCL over %d GPU(s): %s ...\n", gl->count, gl->gpu[0].name);
    Suite *s = suite_create("nccl_gpu");
    TCase *tc = tcase_create("nccl_gpu");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, allreduce_integers_exact);
    tcase_add_test(tc, allreduce_random_within_rounding);
    tcase_add_test(tc, broadcast_from_every_root);
    tcase_add_test(tc, allreduce_f64);
    tcase_add_test(tc, buckets_started_then_waited);
    tcase_add_test(tc, buckets_started_then_joined);
    tcase_add_test(tc, barriers);
    tcase_add_test(tc, abort_releases_the_others);
    tcase_add_test(tc, absent_replica_times_out);
    tcase_add_test(tc, absent_replica_times_out_joined);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* CUDA is initialised in this process */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "gpu") == 0) return run_gpu_suite();
    Suite *s = suite_create("nccl");
    TCase *tc = tcase_create("nccl");
    tcase_add_test(tc, cpu_context_refused);
    tcase_add_test(tc, bad_arguments_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
