/* local.c: the shared-memory communicator for replica threads (local.h).
 *
 * Meeting point: a sense-reversing barrier on C11 atomics. Each round every
 * rank increments `arrived`; the last one resets it and flips `sense`; the
 * others wait for the flip: spinning (with a pause) for MR_LOCAL_SPIN_S,
 * then yielding the core between two looks until MR_LOCAL_YIELD_S, then
 * blocking on a futex that the last one wakes. A long spin would spend the
 * time slices of a replica whose core is shared with a busy neighbour, and
 * sleeping with a backoff would wake it late; the phases below avoid both
 * (docs/performance.md, "A busy neighbour"). With more ranks than cores
 * (4 replicas on 2 cores) a waiter blocks at once: the rank it waits for
 * may need the very core it would spin on (docs/performance.md,
 * "Oversubscribed replicas"). A waiter past the timeout, or any waiter once
 * a rank has aborted (the abort wakes the blocked ones), fails with a
 * message that names who was missing.
 *
 * All-reduce of n floats over R ranks: each rank publishes its buffer
 * pointer; [barrier]; rank r sums slice r of every buffer in rank order
 * 0..R-1 (fixed order: every rank, every run, same bits) and writes the sum
 * into slice r of every buffer; [barrier], after which every buffer is
 * complete and nobody reads another's buffer any more. Pushing the reduced
 * slice, rather than each rank pulling the others' slices after a second
 * barrier, saves a barrier and a pass over lines another core has just
 * written (docs/performance.md, "Why a batch runs in cache-sized passes"). */
#include "collectives/local.h"
#include "runtime/dmem_impl.h"
#include "runtime/clock.h"

#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "runtime/target_clones.h"

/* How a waiter waits, in three phases. It spins with a pause for
 * MR_LOCAL_SPIN_S: the replicas of a quiet machine usually arrive that
 * close. It then yields its core between two looks until MR_LOCAL_YIELD_S:
 * on a core of its own a yield returns at once (it notices the flip within
 * a microsecond or two and pays no futex wake-up), while on a core shared
 * with another thread the yield hands the core over. Only then does it
 * block. With a busy neighbour on one core, the replica on the free core
 * waits a few ms at every step for the one that shares a core; blocking
 * sooner would make it sleep and wake late at each of the step's barriers
 * (bench/contention.py; docs/performance.md, "A busy neighbour"). */
#define MR_LOCAL_SPIN_S  100e-6
#define MR_LOCAL_YIELD_S 20e-3

typedef struct local_comm {
    mr_comm base;
    _Alignas(64) atomic_int arrived;
    _Alignas(64) atomic_int sense;
    /* the futex word the blocked waiters sleep on: bumped by every release
     * and by an abort, so a waiter that read it before either wakes */
    _Alignas(64) atomic_uint wake_seq;
    atomic_int sleepers;                /* waiters blocked (or about to block) in futex_wait */
    _Alignas(64) atomic_int aborted_by; /* -1: none */
    _Alignas(64) atomic_int *present;   /* (size) rank r is at the current barrier */
    double spin_s;                      /* seconds of spinning before yielding: 0 oversubscribed */
    double yield_s;                     /* seconds after arrival of yielding before blocking */
    float *volatile *bufs;              /* (size) published buffers */
    double *volatile *dbufs;            /* (size) published double buffers (f64 all-reduce) */
    int first;                          /* job-wide number of rank 0, for messages */
} local_comm;

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Sleeps while *word == seen, at most timeout_s (spurious returns are fine:
 * the caller checks again). */
static void futex_wait(atomic_uint *word, unsigned seen, double timeout_s) {
    if (timeout_s <= 0.0) return;
    struct timespec ts = {(time_t)timeout_s, (long)((timeout_s - (double)(time_t)timeout_s) * 1e9)};
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

/* Bumps the word and wakes every waiter blocked on it, if any may be. */
static void wake_all(local_comm *lc, int always) {
    atomic_fetch_add(&lc->wake_seq, 1);
    if (always || atomic_load(&lc->sleepers) > 0)
        syscall(SYS_futex, (unsigned *)&lc->wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static mr_status aborted(local_comm *lc, const char *what, mr_error *err) {
    return mr_error_set(err, MR_ERR_ABORTED, "local %s: communicator aborted by replica %d", what,
                        lc->first + atomic_load(&lc->aborted_by));
}

static mr_status timed_out(local_comm *lc, int rank, const char *what, mr_error *err) {
    char missing[256] = "";
    for (int r = 0; r < lc->base.size; r++)
        if (!atomic_load(&lc->present[r])) {
            char one[16];
            snprintf(one, sizeof one, "%s%d", missing[0] ? "," : "", lc->first + r);
            strncat(missing, one, sizeof missing - strlen(missing) - 1);
        }
    return mr_error_set(err, MR_ERR_RUNTIME, "local %s: replica %d waited %.0f s for replica(s) %s",
                        what, lc->first + rank, lc->base.timeout_s, missing);
}

/* The waiter's side once spinning and yielding are over: blocks on the futex until the
 * sense flips, a rank aborts, or the timeout. The sleepers count is raised
 * before the sense is read again (all seq_cst), and the releaser flips the
 * sense before it reads the count: either it sees this sleeper and wakes
 * it, or this sleeper sees the flipped sense. FUTEX_WAIT returns at once if
 * wake_seq moved since it was read, so no wake is lost in between. */
static mr_status block(local_comm *lc, int rank, int my_sense, double start, const char *what,
                       mr_error *err) {
    mr_status st = MR_OK;
    atomic_fetch_add(&lc->sleepers, 1);
    for (;;) {
        /* seq_cst loads (acquire included): the order argued above */
        unsigned seen = atomic_load(&lc->wake_seq);
        if (atomic_load(&lc->sense) == my_sense) break;
        if (atomic_load(&lc->aborted_by) >= 0) {
            st = aborted(lc, what, err);
            break;
        }
        double left = lc->base.timeout_s - (mr_now_s() - start);
        if (left < 0.0) {
            st = timed_out(lc, rank, what, err);
            break;
        }
        futex_wait(&lc->wake_seq, seen, left < 1.0 ? left : 1.0);
    }
    atomic_fetch_sub(&lc->sleepers, 1);
    return st;
}

static mr_status barrier(local_comm *lc, int rank, const char *what, mr_error *err) {
    const int size = lc->base.size;
    if (atomic_load_explicit(&lc->aborted_by, memory_order_acquire) >= 0)
        return aborted(lc, what, err);
    int my_sense = !atomic_load_explicit(&lc->sense, memory_order_relaxed);
    atomic_store_explicit(&lc->present[rank], 1, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&lc->arrived, 1, memory_order_acq_rel) == size - 1) {
        for (int r = 0; r < size; r++)
            atomic_store_explicit(&lc->present[r], 0, memory_order_relaxed);
        atomic_store_explicit(&lc->arrived, 0, memory_order_relaxed);
        atomic_store(&lc->sense, my_sense); /* seq_cst: before the sleepers are read */
        wake_all(lc, 0);
        return MR_OK;
    }
    /* spin (a pause each time, the clock every 64) for spin_s: the others
     * are usually microseconds behind when every rank has a core */
    double start = mr_now_s();
    for (long spins = 1; lc->spin_s > 0.0; spins++) {
        if (atomic_load_explicit(&lc->sense, memory_order_acquire) == my_sense) return MR_OK;
        cpu_pause();
        if (spins % 64 == 0) {
            if (atomic_load_explicit(&lc->aborted_by, memory_order_acquire) >= 0)
                return aborted(lc, what, err);
            if (mr_now_s() - start > lc->spin_s) break;
        }
    }
    /* yield, a look at the clock every 8 (a yield is a system call) */
    for (long yields = 1; lc->yield_s > 0.0; yields++) {
        if (atomic_load_explicit(&lc->sense, memory_order_acquire) == my_sense) return MR_OK;
        sched_yield();
        if (yields % 8 == 0) {
            if (atomic_load_explicit(&lc->aborted_by, memory_order_acquire) >= 0)
                return aborted(lc, what, err);
            if (mr_now_s() - start > lc->yield_s) break;
        }
    }
    return block(lc, rank, my_sense, start, what, err);
}

/* Slice r of n floats over size ranks, 16-float (64-byte) aligned. */
static void slice(size_t n, int size, int r, size_t *begin, size_t *end) {
    size_t per = (n + (size_t)size - 1) / (size_t)size;
    per = (per + 15) & ~(size_t)15;
    *begin = per * (size_t)r < n ? per * (size_t)r : n;
    *end = *begin + per < n ? *begin + per : n;
}

MR_AVX2_CLONES static mr_status local_allreduce(mr_comm *c, int rank, mr_dfloat *dbuf, size_t n,
                                                mr_error *err) {
    float *buf = mr_dfloat_ptr(dbuf); /* host memory: CPU replicas' device memory */
    local_comm *lc = (local_comm *)c;
    const int size = c->size;
    if (size == 1) return MR_OK;
    lc->bufs[rank] = buf;
    MR_CHECK(barrier(lc, rank, "all-reduce", err));
    size_t b, e;
    slice(n, size, rank, &b, &e);
    /* slice r of every buffer = bufs[0][b:e] + bufs[1][b:e] + ... in rank
     * order: rank r reads slice r everywhere and writes the sum back into
     * every buffer (reduce-scatter, then an all-gather that the owner
     * pushes). Nobody else touches slice r in between. */
    if (size == 2) { /* the common case: one vectorised pass, no staging */
        float *restrict s0 = lc->bufs[0], *restrict s1 = lc->bufs[1];
        for (size_t i = b; i < e; i++) {
            float v = s0[i] + s1[i];
            s0[i] = v;
            s1[i] = v;
        }
    } else if (b < e) {
        /* through a small accumulator so the loops vectorise */
        float acc[1024];
        for (size_t i = b; i < e; i += 1024) {
            size_t m = e - i < 1024 ? e - i : 1024;
            const float *src0 = lc->bufs[0] + i;
            for (size_t j = 0; j < m; j++)
                acc[j] = src0[j];
            for (int q = 1; q < size; q++) {
                const float *restrict src = lc->bufs[q] + i;
                for (size_t j = 0; j < m; j++)
                    acc[j] += src[j];
            }
            for (int q = 0; q < size; q++)
                memcpy(lc->bufs[q] + i, acc, sizeof(float) * m);
        }
    }
    return barrier(lc, rank, "all-reduce", err);
}

/* A few doubles: every rank sums all published buffers in rank order into a
 * private copy, then (after everyone has read) writes its own buffer. */
static mr_status local_allreduce_f64(mr_comm *c, int rank, double *buf, size_t n, mr_error *err) {
    local_comm *lc = (local_comm *)c;
    if (c->size == 1 || n == 0) return MR_OK;
    double small[16], *sum = n <= 16 ? small : malloc(sizeof(double) * n);
    if (sum == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    lc->dbufs[rank] = buf;
    mr_status st = barrier(lc, rank, "all-reduce", err);
    if (st == MR_OK) {
        for (size_t i = 0; i < n; i++)
            sum[i] = lc->dbufs[0][i];
        for (int q = 1; q < c->size; q++)
            for (size_t i = 0; i < n; i++)
                sum[i] += lc->dbufs[q][i];
        st = barrier(lc, rank, "all-reduce", err);
    }
    if (st == MR_OK) memcpy(buf, sum, sizeof(double) * n);
    if (sum != small) free(sum);
    return st;
}

static mr_status local_broadcast(mr_comm *c, int rank, mr_dfloat *dbuf, size_t n, int root,
                                 mr_error *err) {
    float *buf = mr_dfloat_ptr(dbuf); /* host memory: CPU replicas' device memory */
    local_comm *lc = (local_comm *)c;
    if (c->size == 1) return MR_OK;
    lc->bufs[rank] = buf;
    MR_CHECK(barrier(lc, rank, "broadcast", err));
    if (rank != root && n) memcpy(buf, lc->bufs[root], sizeof(float) * n);
    return barrier(lc, rank, "broadcast", err);
}

static mr_status local_barrier(mr_comm *c, int rank, mr_error *err) {
    if (c->size == 1) return MR_OK;
    return barrier((local_comm *)c, rank, "barrier", err);
}

static void local_abort(mr_comm *c, int rank) {
    local_comm *lc = (local_comm *)c;
    int none = -1;
    atomic_compare_exchange_strong(&lc->aborted_by, &none, rank);
    wake_all(lc, 1); /* the blocked waiters see the abort now, not at their timeout */
}

static void local_destroy(mr_comm *c) {
    local_comm *lc = (local_comm *)c;
    free((void *)lc->present);
    free((void *)lc->bufs);
    free((void *)lc->dbufs);
    free(lc);
}

static const mr_comm_vtable local_vt = {
    .name = "local",
    .allreduce_sum = local_allreduce,
    .allreduce_sum_f64 = local_allreduce_f64,
    .broadcast = local_broadcast,
    .barrier = local_barrier,
    .abort = local_abort,
    .destroy = local_destroy,
};

/* Spin and yield before blocking only when every rank has a core of its
 * own; with more ranks than cores the rank a waiter waits for may need its
 * core. */
static void set_waiting(local_comm *lc, int cores) {
    int own = lc->base.size <= cores;
    lc->spin_s = own ? MR_LOCAL_SPIN_S : 0.0;
    lc->yield_s = own ? MR_LOCAL_YIELD_S : 0.0;
}

mr_status mr_comm_local_create(int size, mr_comm **out, mr_error *err) {
    *out = NULL;
    if (size < 1) return mr_error_set(err, MR_ERR_USAGE, "local communicator: size %d < 1", size);
    local_comm *lc = aligned_alloc(64, (sizeof *lc + 63) & ~(size_t)63);
    if (lc == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    memset(lc, 0, sizeof *lc);
    lc->base.vt = &local_vt;
    lc->base.size = size;
    lc->base.world_size = size;
    lc->base.timeout_s = mr_comm_default_timeout();
    atomic_init(&lc->arrived, 0);
    atomic_init(&lc->sense, 0);
    atomic_init(&lc->wake_seq, 0);
    atomic_init(&lc->sleepers, 0);
    atomic_init(&lc->aborted_by, -1);
    /* cores this process may run on */
    cpu_set_t set;
    int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    set_waiting(lc, cores);
    lc->present = calloc((size_t)size, sizeof *lc->present);
    lc->bufs = calloc((size_t)size, sizeof *lc->bufs);
    lc->dbufs = calloc((size_t)size, sizeof *lc->dbufs);
    if (lc->present == NULL || lc->bufs == NULL || lc->dbufs == NULL) {
        local_destroy(&lc->base);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    *out = &lc->base;
    return MR_OK;
}

void mr_comm_local_place(mr_comm *c, int first, int cores) {
    local_comm *lc = (local_comm *)c;
    lc->first = first;
    set_waiting(lc, cores < 1 ? 1 : cores);
}
