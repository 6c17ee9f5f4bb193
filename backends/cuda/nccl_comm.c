/* nccl_comm.c: the NCCL communicator (nccl_comm.h), C against nccl.h and
 * the CUDA runtime's C API; each replica's streams are its context's
 * (backends/cuda/cuda_impl.h: `stream` computes, `comm_stream` communicates).
 *
 * Per rank, two events order the streams without the host: `ready` is
 * recorded on the compute stream and waited for by the communication
 * stream (the buffer's last writer, backward, is on the compute stream),
 * `done` is recorded on the communication stream after the NCCL call and
 * waited for by the compute stream (the optimizer reads the sum): at once
 * after allreduce_sum and broadcast, from wait_all on after
 * allreduce_start (backward goes on while the bucket travels). An event
 * may be recorded again while a wait on its previous record is queued:
 * cudaStreamWaitEvent and cudaEventQuery use the record current at their
 * call. So `done` always marks everything queued on the communication
 * stream so far, and the host waits on it alone (host_wait), or, after
 * join_all, the watchdog watches it (see join_all below).
 *
 * Threads: NCCL allows one thread at a time per communicator (NCCL user
 * guide, "Thread Safety"). Rank r's NCCL calls come from replica r's
 * thread, except that mr_comm_abort, called by a failing replica's thread,
 * aborts every rank's communicator so their kernels stop waiting for it,
 * and that the watchdog's thread reads NCCL's asynchronous error and may
 * abort. A mutex per rank orders them: a replica holds its own only around NCCL
 * calls that return at once (queueing a collective, reading the async
 * error), never while it waits, so an abort gets it within microseconds.
 * NCCL's calls could wait for peers inside the host call when NCCL sets up
 * an algorithm's connections on its first use: create has it connect at
 * init instead (NCCL_RUNTIME_CONNECT=0); should a replica still be stuck
 * inside NCCL, the abort leaves its rank to it after a second rather than
 * race it. NCCL frees a process's communicators together when the last
 * of them is destroyed or aborted (init.cc, commReclaim), so aborting rank
 * q never frees what rank r's thread is using.
 *
 * Relies on: NCCL 2.14+ (ncclCommFinalize, ncclGetLastError), the CUDA
 * runtime 12+. */
#include "backends/cuda/nccl_comm.h"

#include <errno.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/backoff.h"
#include "backends/cuda/cuda_impl.h"
#include "runtime/dmem_impl.h"

typedef struct nccl_rank {
    mr_backend *be;       /* the replica's context: its device and streams */
    int device;           /* its CUDA ordinal */
    ncclComm_t comm;      /* NULL until made */
    int dead;             /* comm aborted: no NCCL call on it any more (under lock) */
    pthread_mutex_t lock; /* NCCL calls on comm: the replica's thread vs mr_comm_abort */
    cudaEvent_t ready;    /* compute stream -> communication stream */
    cudaEvent_t done;     /* communication stream -> compute stream, and the host's wait */
    float *one;           /* (1) device, zero: the barrier's all-reduce */
    double *dbuf, *hbuf;  /* (dcap) the f64 all-reduce's staging: device, pinned host */
    size_t dcap;
    int pending;      /* collectives queued since the last host wait */
    const char *last; /* the last one queued, and its length, for messages */
    size_t last_n;
    atomic_long issued; /* collectives queued so far (read by other ranks' messages) */
    /* join_all's watch, under lock (the watchdog's thread reads it): */
    int armed;        /* joined, not yet settled: held to the deadline */
    double deadline;  /* mr_now_s() by which `done` must have completed */
    int watch_failed; /* the watchdog aborted the rank: watch_st and watch_err say why */
    mr_status watch_st;
    mr_error watch_err;
} nccl_rank;

typedef struct nccl_comm {
    mr_comm base;
    nccl_rank *ranks;      /* (size) */
    int processes;         /* of the job, for messages */
    atomic_int aborted_by; /* local rank that called mr_comm_abort; -1: none */
    atomic_int failed;     /* a rank's NCCL communicator was aborted: destroy aborts the rest */
    pthread_t watcher;     /* the watchdog of join_all (none for one replica) */
    int watching;          /* it runs (set before any replica calls in) */
    pthread_mutex_t wlock; /* the watchdog's sleep: */
    pthread_cond_t wcond;  /* (CLOCK_MONOTONIC) */
    int wstop;             /* under wlock: destroy ends it */
    unsigned long kicks;   /* under wlock: join_all armed a rank */
} nccl_comm;

/* One replica in the whole job: every collective is the identity (the sum
 * over one replica is the value itself, bit for bit, as NCCL's in-place
 * 1-rank all-reduce leaves it), so none makes an NCCL call or a host wait. */
static int solo(const nccl_comm *nc) {
    return nc->base.world_size == 1;
}

static int replica(const nccl_comm *nc, const nccl_rank *k) {
    return nc->base.world_offset + (int)(k - nc->ranks);
}

/* A failed NCCL call: "nccl all-reduce: replica 1 (gpu:1): ncclAllReduce(...):
 * unhandled cuda error (run with NCCL_DEBUG=WARN for details) (NCCL's last error)". */
static mr_status nccl_fail(const nccl_comm *nc, const nccl_rank *k, ncclResult_t res,
                           const char *what, const char *call, mr_error *err) {
    const char *last = ncclGetLastError(k->dead ? NULL : k->comm);
    int has_last = last != NULL && last[0] != '\0';
    return mr_error_set(err, MR_ERR_RUNTIME, "nccl %s: replica %d (gpu:%d): %s: %s%s%s%s", what,
                        replica(nc, k), k->device, call, ncclGetErrorString(res),
                        has_last ? " (" : "", has_last ? last : "", has_last ? ")" : "");
}

/* Aborts rank k's NCCL communicator; the caller holds k->lock. NCCL stops
 * its kernels, so device work queued behind them ends, and the rank makes
 * no NCCL call again. NCCL may make another device current while it frees:
 * the caller's stays. */
static void kill_locked(nccl_comm *nc, nccl_rank *k) {
    if (k->dead) return;
    k->dead = 1;
    atomic_store(&nc->failed, 1);
    if (k->comm == NULL) return;
    int dev = -1;
    (void)cudaGetDevice(&dev);
    (void)ncclCommAbort(k->comm);
    if (dev >= 0) (void)cudaSetDevice(dev);
}

static void kill_rank(nccl_comm *nc, nccl_rank *k) {
    pthread_mutex_lock(&k->lock);
    kill_locked(nc, k);
    pthread_mutex_unlock(&k->lock);
}

static mr_status aborted(const nccl_comm *nc, const nccl_rank *k, const char *what, mr_error *err) {
    int by = atomic_load(&nc->aborted_by);
    if (by >= 0)
        return mr_error_set(err, MR_ERR_ABORTED, "nccl %s: communicator aborted by replica %d",
                            what, nc->base.world_offset + by);
    return mr_error_set(err, MR_ERR_ABORTED,
                        "nccl %s: replica %d's communicator was aborted after an earlier failure",
                        what, replica(nc, k));
}

/* A collective's entry on rank k: not aborted, its device current, and
 * (on MR_OK only) its lock held. */
static mr_status begin(nccl_comm *nc, nccl_rank *k, const char *what, mr_error *err) {
    if (atomic_load(&nc->aborted_by) >= 0) return aborted(nc, k, what, err);
    MR_CHECK(mr_cuda_enter(k->be, err));
    pthread_mutex_lock(&k->lock);
    if (k->dead) {
        pthread_mutex_unlock(&k->lock);
        return aborted(nc, k, what, err);
    }
    return MR_OK;
}

/* Inside a collective (lock held): a failure aborts the rank's NCCL
 * communicator, since the other ranks would wait for a call it never
 * made; `fail` releases the lock. */
#define CUDA_GOTO(call)                                                                            \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            st = mr_cuda_fail(k->be, err, e_, #call);                                              \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
#define NCCL_GOTO(call)                                                                            \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            st = nccl_fail(nc, k, r_, what, #call, err);                                           \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static void note_queued(nccl_rank *k, const char *what, size_t n) {
    k->pending++;
    k->last = what;
    k->last_n = n;
    atomic_fetch_add(&k->issued, 1);
}

/* The message of a host wait past the timeout: which local replicas had
 * not queued as many collectives (the ones missing), else that all had. */
static mr_status timed_out(const nccl_comm *nc, const nccl_rank *k, const char *what,
                           mr_error *err) {
    long mine = atomic_load(&k->issued);
    char behind[256] = "";
    for (int q = 0; q < nc->base.size; q++)
        if (atomic_load(&nc->ranks[q].issued) < mine) {
            char one[16];
            snprintf(one, sizeof one, "%s%d", behind[0] ? "," : "", nc->base.world_offset + q);
            strncat(behind, one, sizeof behind - strlen(behind) - 1);
        }
    const char *why = behind[0]           ? "not yet queued by replica(s) "
                      : nc->processes > 1 ? "every replica of this process queued it: one of "
                                            "another process is missing, or NCCL is stuck"
                                          : "every replica queued it: NCCL is stuck";
    return mr_error_set(err, MR_ERR_RUNTIME,
                        "nccl %s: replica %d (gpu:%d) waited %g s for %d collective(s) (the "
                        "last: %s of %zu values); %s%s; its NCCL communicator is aborted",
                        what, replica(nc, k), k->device, nc->base.timeout_s, k->pending,
                        k->last ? k->last : what, k->last_n, why, behind);
}

/* What this process and NCCL say of rank k's collectives (k->lock held):
 * MR_OK, or the rank's NCCL communicator is aborted and err says why: an
 * abort (mr_comm_abort, or an earlier failure of this rank), or NCCL's
 * asynchronous error. */
static mr_status check_locked(nccl_comm *nc, nccl_rank *k, const char *what, mr_error *err) {
    if (atomic_load(&nc->aborted_by) >= 0 || k->dead) {
        kill_locked(nc, k);
        return aborted(nc, k, what, err);
    }
    ncclResult_t async = ncclSuccess, res = ncclCommGetAsyncError(k->comm, &async);
    if (res != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
        mr_status st = nccl_fail(
            nc, k, res != ncclSuccess ? res : async, what,
            res != ncclSuccess ? "ncclCommGetAsyncError" : "asynchronous NCCL error", err);
        kill_locked(nc, k);
        return st;
    }
    return MR_OK;
}

/* The host waits for everything queued on rank k's communication stream
 * (its `done` event), watching for NCCL's asynchronous errors, for
 * mr_comm_abort and for the timeout; each of those aborts the rank's NCCL
 * communicator. Yields for the first 50 us, then sleeps 1 .. 64 us. */
static mr_status host_wait(nccl_comm *nc, nccl_rank *k, const char *what, mr_error *err) {
    mr_backoff b;
    mr_backoff_begin(&b, 50e-6);
    for (;;) {
        cudaError_t e = cudaEventQuery(k->done);
        if (e != cudaSuccess && e != cudaErrorNotReady) {
            mr_status st = mr_cuda_fail(k->be, err, e, "cudaEventQuery (waiting for NCCL)");
            kill_rank(nc, k);
            return st;
        }
        /* Failures before success: ncclCommAbort (ours, or a peer's after
         * its own failure) lets the pending collectives finish with
         * whatever the buffers hold, so their event completes; a
         * half-reduced buffer must not be reported as a sum. An abort is
         * flagged before ncclCommAbort is called, and NCCL's asynchronous
         * error is set before the operation it ends completes, so a
         * collective cut short is seen here as failed. */
        pthread_mutex_lock(&k->lock);
        mr_status st = check_locked(nc, k, what, err);
        if (st != MR_OK) {
            pthread_mutex_unlock(&k->lock);
            return st;
        }
        if (e == cudaSuccess && atomic_load(&nc->failed)) {
            /* another replica of this process failed and aborted its
             * communicator while this collective was in flight */
            kill_locked(nc, k);
            pthread_mutex_unlock(&k->lock);
            return aborted(nc, k, what, err);
        }
        if (e == cudaSuccess) { /* `done` covers everything queued: a join_all's too */
            k->pending = 0;
            k->armed = 0;
        }
        pthread_mutex_unlock(&k->lock);
        if (e == cudaSuccess) return MR_OK;
        if (mr_backoff_elapsed(&b) > nc->base.timeout_s) {
            mr_status st = timed_out(nc, k, what, err);
            kill_rank(nc, k);
            return st;
        }
        mr_backoff_pause(&b);
    }
}

/* Queues, in place on buf (n floats of rank k's device memory), an
 * all-reduce (root < 0) or a broadcast from NCCL rank root on the
 * communication stream, after the compute stream's work so far. `join`:
 * the compute stream's work to come waits for it (allreduce_sum: the
 * caller may use buf at once); else only from wait_all on (allreduce_start:
 * the caller leaves buf alone until then, so the rest of backward runs
 * while the bucket travels). No host wait. */
static mr_status queue_float(nccl_comm *nc, nccl_rank *k, float *buf, size_t n, int root, int join,
                             const char *what, mr_error *err) {
    MR_CHECK(begin(nc, k, what, err));
    mr_status st = MR_OK;
    if (n > 0 && !solo(nc) && mr_cuda(k->be)->capturing) {
        /* recorded into the replica's graph (fit_graph.c): on the compute
         * stream itself, which a capture may hold, with no event; it runs
         * at each replay, and the host's wait for the replay is its wait */
        mr_cuda_ctx *cx = mr_cuda(k->be);
        if (root < 0)
            NCCL_GOTO(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, k->comm, cx->stream));
        else
            NCCL_GOTO(ncclBroadcast(buf, buf, n, ncclFloat, root, k->comm, cx->stream));
    } else if (n > 0 && !solo(nc)) {
        mr_cuda_ctx *cx = mr_cuda(k->be);
        CUDA_GOTO(cudaEventRecord(k->ready, cx->stream));
        CUDA_GOTO(cudaStreamWaitEvent(cx->comm_stream, k->ready, 0));
        if (root < 0)
            NCCL_GOTO(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, k->comm, cx->comm_stream));
        else
            NCCL_GOTO(ncclBroadcast(buf, buf, n, ncclFloat, root, k->comm, cx->comm_stream));
        CUDA_GOTO(cudaEventRecord(k->done, cx->comm_stream));
        if (join) CUDA_GOTO(cudaStreamWaitEvent(cx->stream, k->done, 0));
        note_queued(k, what, n);
    }
    pthread_mutex_unlock(&k->lock);
    return MR_OK;
fail:
    kill_locked(nc, k);
    pthread_mutex_unlock(&k->lock);
    return st;
}

static mr_status nccl_allreduce(mr_comm *c, int rank, mr_dfloat *dbuf, size_t n, mr_error *err) {
    float *buf = mr_dfloat_ptr(dbuf); /* GPU memory, for NCCL */
    nccl_comm *nc = (nccl_comm *)c;
    return queue_float(nc, &nc->ranks[rank], buf, n, -1, 1, "all-reduce", err);
}

/* Several may be in flight, in order on the communication stream. */
static mr_status nccl_allreduce_start(mr_comm *c, int rank, mr_dfloat *dbuf, size_t n,
                                      mr_error *err) {
    float *buf = mr_dfloat_ptr(dbuf); /* GPU memory, for NCCL */
    nccl_comm *nc = (nccl_comm *)c;
    return queue_float(nc, &nc->ranks[rank], buf, n, -1, 0, "all-reduce", err);
}

/* The compute stream waits for every collective queued so far (the
 * optimizer reads the buckets), and the host with the watchdog. */
static mr_status nccl_wait_all(mr_comm *c, int rank, mr_error *err) {
    nccl_comm *nc = (nccl_comm *)c;
    nccl_rank *k = &nc->ranks[rank];
    const char *what = "all-reduce";
    MR_CHECK(begin(nc, k, what, err));
    mr_status st = MR_OK;
    if (solo(nc) || mr_cuda(k->be)->capturing) { /* nothing queued, or in a graph */
        pthread_mutex_unlock(&k->lock);
        return MR_OK;
    }
    CUDA_GOTO(cudaStreamWaitEvent(mr_cuda(k->be)->stream, k->done, 0));
    pthread_mutex_unlock(&k->lock);
    return host_wait(nc, k, what, err);
fail:
    kill_locked(nc, k);
    pthread_mutex_unlock(&k->lock);
    return st;
}

/* ---- join_all, settle and their watchdog ---------------------------------
 * The training step's all-reduce is not waited for on the host: join_all
 * makes the compute stream wait for `done` and arms the rank's watch, the
 * step's one host wait (the read of its metrics, queued behind the
 * optimizer) waits for the sums with everything else, and settle then
 * reads the verdict without touching the device. The communicator's
 * watchdog thread keeps what host_wait kept: it polls the armed ranks
 * every WATCH_PERIOD_S for NCCL's asynchronous error and, past the
 * deadline (join_all + the timeout, as host_wait counted from wait_all),
 * asks the event once; either failure aborts the rank's NCCL communicator,
 * so its collectives end, the replica's host wait returns, and settle
 * reports the watchdog's message (host_wait's words). The watchdog asks
 * the event only past the deadline: a healthy step gives the device no
 * host synchronisation of its own. */
#define WATCH_PERIOD_S 1e-3

/* The watchdog found rank k failed (k->lock held): `st`, already in
 * k->watch_err, is settle's answer; the rank's communicator is aborted. */
static void watch_end(nccl_comm *nc, nccl_rank *k, mr_status st) {
    k->watch_st = st;
    k->watch_failed = 1;
    k->armed = 0;
    kill_locked(nc, k);
}

/* The watchdog's look at rank k; 1 while it stays armed. */
static int watch_rank(nccl_comm *nc, nccl_rank *k) {
    const char *what = "all-reduce";
    pthread_mutex_lock(&k->lock);
    if (k->armed && !k->dead) {
        mr_status st = check_locked(nc, k, what, &k->watch_err);
        if (st != MR_OK) {
            watch_end(nc, k, st);
        } else if (mr_now_s() > k->deadline) {
            (void)cudaSetDevice(k->device); /* this thread's own current device */
            cudaError_t e = cudaEventQuery(k->done);
            if (e == cudaSuccess) /* complete: its replica was slow to settle */
                k->armed = 0;
            else if (e == cudaErrorNotReady)
                watch_end(nc, k, timed_out(nc, k, what, &k->watch_err));
            else
                watch_end(
                    nc, k,
                    mr_cuda_fail(k->be, &k->watch_err, e, "cudaEventQuery (waiting for NCCL)"));
        }
    }
    const int armed = k->armed && !k->dead;
    pthread_mutex_unlock(&k->lock);
    return armed;
}

static void *watchdog(void *arg) {
    nccl_comm *nc = arg;
    pthread_mutex_lock(&nc->wlock);
    while (!nc->wstop) {
        const unsigned long seen = nc->kicks;
        pthread_mutex_unlock(&nc->wlock);
        int armed = 0;
        for (int q = 0; q < nc->base.size; q++)
            armed |= watch_rank(nc, &nc->ranks[q]);
        pthread_mutex_lock(&nc->wlock);
        if (armed) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            long ns = until.tv_nsec + (long)(WATCH_PERIOD_S * 1e9);
            until.tv_sec += ns / 1000000000L;
            until.tv_nsec = ns % 1000000000L;
            if (!nc->wstop) (void)pthread_cond_timedwait(&nc->wcond, &nc->wlock, &until);
        } else {
            while (!nc->wstop && nc->kicks == seen)
                pthread_cond_wait(&nc->wcond, &nc->wlock);
        }
    }
    pthread_mutex_unlock(&nc->wlock);
    return NULL;
}

/* The compute stream waits for every collective queued so far, and the
 * watchdog holds them to the timeout; the host goes on. Without the
 * watchdog's thread (it could not start), wait_all. */
static mr_status nccl_join_all(mr_comm *c, int rank, mr_error *err) {
    nccl_comm *nc = (nccl_comm *)c;
    nccl_rank *k = &nc->ranks[rank];
    const char *what = "all-reduce";
    if (!nc->watching) return nccl_wait_all(c, rank, err);
    MR_CHECK(begin(nc, k, what, err));
    mr_status st = MR_OK;
    CUDA_GOTO(cudaStreamWaitEvent(mr_cuda(k->be)->stream, k->done, 0));
    if (!k->armed) {
        k->armed = 1;
        k->deadline = mr_now_s() + nc->base.timeout_s;
    }
    pthread_mutex_unlock(&k->lock);
    pthread_mutex_lock(&nc->wlock);
    nc->kicks++;
    pthread_cond_signal(&nc->wcond);
    pthread_mutex_unlock(&nc->wlock);
    return MR_OK;
fail:
    kill_locked(nc, k);
    pthread_mutex_unlock(&k->lock);
    return st;
}

/* settle's verdict (k->lock held), into `mine`. The caller's wait returned,
 * so `done` has completed unless the wait failed: it is not asked again. */
static mr_status settle_locked(nccl_comm *nc, nccl_rank *k, mr_status waited, mr_error *mine) {
    const char *what = "all-reduce";
    if (k->watch_failed) {
        *mine = k->watch_err;
        return k->watch_st;
    }
    MR_CHECK(check_locked(nc, k, what, mine));
    if (waited != MR_OK) {
        /* the caller's wait gave up (the backend's timeout is the same one,
         * counted from a little later, so it usually ends before the
         * watchdog's next look): past the deadline with the collectives
         * still out, they are why */
        if (k->armed && mr_now_s() > k->deadline && cudaEventQuery(k->done) == cudaErrorNotReady) {
            mr_status st = timed_out(nc, k, what, mine);
            kill_locked(nc, k);
            return st;
        }
        return MR_OK; /* the wait's own failure stands */
    }
    if (atomic_load(&nc->failed)) {
        /* another replica of this process failed and aborted its
         * communicator while these collectives were in flight */
        kill_locked(nc, k);
        return aborted(nc, k, what, mine);
    }
    k->pending = 0;
    return MR_OK;
}

static mr_status nccl_settle(mr_comm *c, int rank, mr_status waited, mr_error *err) {
    nccl_comm *nc = (nccl_comm *)c;
    nccl_rank *k = &nc->ranks[rank];
    if (solo(nc)) return waited;
    if (!nc->watching) return waited; /* join_all was wait_all */
    mr_error mine = {0};
    pthread_mutex_lock(&k->lock);
    mr_status st = settle_locked(nc, k, waited, &mine);
    k->armed = 0;
    pthread_mutex_unlock(&k->lock);
    if (st == MR_OK) return waited;
    *err = mine; /* the communicator's words, in place of the wait's */
    return st;
}

/* One replica makes no NCCL call: nothing to watch. */
static void start_watchdog(nccl_comm *nc) {
    if (!solo(nc)) nc->watching = pthread_create(&nc->watcher, NULL, watchdog, nc) == 0;
}

static void stop_watchdog(nccl_comm *nc) {
    if (!nc->watching) return;
    pthread_mutex_lock(&nc->wlock);
    nc->wstop = 1;
    pthread_cond_signal(&nc->wcond);
    pthread_mutex_unlock(&nc->wlock);
    pthread_join(nc->watcher, NULL);
    nc->watching = 0;
}

/* root is a job-wide replica index, which is also its NCCL rank. The host
 * waits (a broadcast comes once per run, before training: a replica that
 * never comes is reported here rather than at the first step). */
static mr_status nccl_broadcast(mr_comm *c, int rank, mr_dfloat *dbuf, size_t n, int root,
                                mr_error *err) {
    float *buf = mr_dfloat_ptr(dbuf); /* GPU memory, for NCCL */
    nccl_comm *nc = (nccl_comm *)c;
    nccl_rank *k = &nc->ranks[rank];
    MR_CHECK(queue_float(nc, k, buf, n, root, 1, "broadcast", err));
    if (solo(nc)) return MR_OK;
    return host_wait(nc, k, "broadcast", err);
}

/* An all-reduce of one float (zero, so it stays zero), then the host waits. */
static mr_status nccl_barrier(mr_comm *c, int rank, mr_error *err) {
    nccl_comm *nc = (nccl_comm *)c;
    nccl_rank *k = &nc->ranks[rank];
    const char *what = "barrier";
    MR_CHECK(begin(nc, k, what, err));
    mr_status st = MR_OK;
    if (solo(nc)) {
        pthread_mutex_unlock(&k->lock);
        return MR_OK;
    }
    mr_cuda_ctx *cx = mr_cuda(k->be);
    NCCL_GOTO(ncclAllReduce(k->one, k->one, 1, ncclFloat, ncclSum, k->comm, cx->comm_stream));
    CUDA_GOTO(cudaEventRecord(k->done, cx->comm_stream));
    note_queued(k, what, 1);
    pthread_mutex_unlock(&k->lock);
    return host_wait(nc, k, what, err);
fail:
    kill_locked(nc, k);
    pthread_mutex_unlock(&k->lock);
    return st;
}

/* The f64 staging of rank k, at least n doubles (grows, never shrinks).
 * Outside the rank's lock: cudaFree waits for the device. */
static mr_status grow_staging(nccl_rank *k, size_t n, mr_error *err) {
    if (n <= k->dcap) return MR_OK;
    MR_CHECK(mr_cuda_enter(k->be, err));
    cudaFree(k->dbuf); /* waits for the device: the previous staging is idle */
    cudaFreeHost(k->hbuf);
    k->dbuf = k->hbuf = NULL;
    k->dcap = 0;
    MR_CUDA_TRY(k->be, err, cudaMalloc((void **)&k->dbuf, sizeof(double) * n));
    MR_CUDA_TRY(k->be, err,
                cudaHostAlloc((void **)&k->hbuf, sizeof(double) * n, cudaHostAllocPortable));
    k->dcap = n;
    return MR_OK;
}

/* Host doubles (n): into pinned memory, to the device, all-reduced, back,
 * all on the communication stream (host memory: no compute-stream order),
 * and the host waits with the watchdog. */
static mr_status nccl_allreduce_f64(mr_comm *c, int rank, double *buf, size_t n, mr_error *err) {
    nccl_comm *nc = (nccl_comm *)c;
    nccl_rank *k = &nc->ranks[rank];
    const char *what = "f64 all-reduce";
    if (n == 0 || solo(nc))
        return atomic_load(&nc->aborted_by) >= 0 ? aborted(nc, k, what, err) : MR_OK;
    MR_CHECK(grow_staging(k, n, err));
    MR_CHECK(begin(nc, k, what, err));
    mr_status st = MR_OK;
    mr_cuda_ctx *cx = mr_cuda(k->be);
    memcpy(k->hbuf, buf, sizeof(double) * n);
    CUDA_GOTO(cudaMemcpyAsync(k->dbuf, k->hbuf, sizeof(double) * n, cudaMemcpyHostToDevice,
                              cx->comm_stream));
    NCCL_GOTO(ncclAllReduce(k->dbuf, k->dbuf, n, ncclFloat64, ncclSum, k->comm, cx->comm_stream));
    CUDA_GOTO(cudaMemcpyAsync(k->hbuf, k->dbuf, sizeof(double) * n, cudaMemcpyDeviceToHost,
                              cx->comm_stream));
    CUDA_GOTO(cudaEventRecord(k->done, cx->comm_stream));
    note_queued(k, what, n);
    pthread_mutex_unlock(&k->lock);
    MR_CHECK(host_wait(nc, k, what, err));
    memcpy(buf, k->hbuf, sizeof(double) * n);
    return MR_OK;
fail:
    kill_locked(nc, k);
    pthread_mutex_unlock(&k->lock);
    return st;
}

/* Takes m within `seconds`: 1 if taken. */
static int lock_within(pthread_mutex_t *m, double seconds) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ns = until.tv_nsec + (long)(seconds * 1e9);
    until.tv_sec += ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    return pthread_mutex_timedlock(m, &until) == 0;
}

/* Aborts every rank's NCCL communicator of this process, so their kernels
 * stop waiting for the failed replica and their host waits return
 * MR_ERR_ABORTED; later calls return it at once. */
static void nccl_abort(mr_comm *c, int rank) {
    nccl_comm *nc = (nccl_comm *)c;
    int none = -1;
    atomic_compare_exchange_strong(&nc->aborted_by, &none, rank);
    for (int q = 0; q < c->size; q++) {
        nccl_rank *k = &nc->ranks[q];
        /* held for longer only by a replica stuck inside NCCL: left to it (top) */
        if (!lock_within(&k->lock, 1.0)) continue;
        kill_locked(nc, k);
        pthread_mutex_unlock(&k->lock);
    }
}

/* Healthy communicators are finalized (their queued work flushed) and
 * destroyed, as NCCL's examples do one after the other from one thread;
 * after any failure a collective may never end, so the rest are aborted. */
static void nccl_destroy(mr_comm *c) {
    nccl_comm *nc = (nccl_comm *)c;
    stop_watchdog(nc);
    int dev = -1;
    (void)cudaGetDevice(&dev);
    const int failed = atomic_load(&nc->failed);
    for (int r = 0; r < c->size; r++) {
        nccl_rank *k = &nc->ranks[r];
        if (k->comm == NULL || k->dead) continue;
        (void)cudaSetDevice(k->device);
        if (failed || ncclCommFinalize(k->comm) != ncclSuccess)
            (void)ncclCommAbort(k->comm);
        else
            (void)ncclCommDestroy(k->comm);
        k->dead = 1;
    }
    for (int r = 0; r < c->size; r++) {
        nccl_rank *k = &nc->ranks[r];
        if (k->be == NULL) continue;
        (void)cudaSetDevice(k->device);
        /* an event still pending is released once it completes */
        if (k->ready) cudaEventDestroy(k->ready);
        if (k->done) cudaEventDestroy(k->done);
        cudaFree(k->one);
        cudaFree(k->dbuf);
        cudaFreeHost(k->hbuf);
        pthread_mutex_destroy(&k->lock);
    }
    if (dev >= 0) (void)cudaSetDevice(dev);
    (void)cudaGetLastError(); /* nothing of the teardown sticks to the caller */
    pthread_cond_destroy(&nc->wcond);
    pthread_mutex_destroy(&nc->wlock);
    free(nc->ranks);
    free(nc);
}

static const mr_comm_vtable nccl_vt = {
    .name = "nccl",
    .allreduce_sum = nccl_allreduce,
    .allreduce_sum_f64 = nccl_allreduce_f64,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
    .allreduce_start = nccl_allreduce_start,
    .progress = NULL, /* NCCL moves on by itself */
    .wait_all = nccl_wait_all,
    .join_all = nccl_join_all,
    .settle = nccl_settle,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

/* Each rank's events and barrier float, on its device. */
static mr_status setup_rank(nccl_rank *k, mr_error *err) {
    MR_CHECK(mr_cuda_enter(k->be, err));
    MR_CUDA_TRY(k->be, err, cudaEventCreateWithFlags(&k->ready, cudaEventDisableTiming));
    MR_CUDA_TRY(k->be, err, cudaEventCreateWithFlags(&k->done, cudaEventDisableTiming));
    MR_CUDA_TRY(k->be, err, cudaMalloc((void **)&k->one, sizeof(float)));
    /* zeroed on the communication stream, which the barrier's all-reduce
     * runs on: cudaMemset goes on the legacy stream, which does not order
     * against the non-blocking streams of the context (and is asynchronous
     * for device memory), so the first barrier could read the float before
     * it is zero (found by ThreadSanitizer on the emulated GPUs) */
    MR_CUDA_TRY(k->be, err, cudaMemsetAsync(k->one, 0, sizeof(float), mr_cuda(k->be)->comm_stream));
    return MR_OK;
}

/* The job's replicas, as mr_job_comm_create counts them. */
static mr_status place(nccl_comm *nc, mr_job *job, int local, mr_error *err) {
    MR_CHECK(mr_job_allgather(job, &local, sizeof local, job->replicas, err));
    int sum = 0;
    for (int p = 0; p < job->size; p++) {
        job->first[p] = sum;
        sum += job->replicas[p];
    }
    job->world_replicas = sum;
    nc->base.world_size = sum;
    nc->base.world_offset = job->first[job->rank];
    nc->processes = job->size;
    return MR_OK;
}

/* One process: ncclCommInitAll over the contexts' devices (NCCL rank r is
 * be[r]; it restores the current device). */
static mr_status init_all(nccl_comm *nc, mr_error *err) {
    const int n = nc->base.size;
    int *devlist = calloc((size_t)n, sizeof(int));
    ncclComm_t *comms = calloc((size_t)n, sizeof(ncclComm_t));
    mr_status st = MR_OK;
    if (devlist == NULL || comms == NULL) {
        st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    } else {
        for (int r = 0; r < n; r++)
            devlist[r] = nc->ranks[r].device;
        ncclResult_t res = ncclCommInitAll(comms, n, devlist);
        /* kept even on failure: destroy aborts what NCCL made */
        for (int r = 0; r < n; r++)
            nc->ranks[r].comm = comms[r];
        if (res != ncclSuccess)
            st = nccl_fail(nc, &nc->ranks[0], res, "init", "ncclCommInitAll", err);
    }
    free(devlist);
    free(comms);
    return st;
}

/* This process's ranks of the NCCL communicator `id`, in one group. */
static mr_status group_init(nccl_comm *nc, ncclUniqueId id, mr_error *err) {
    mr_status st = MR_OK;
    ncclResult_t res = ncclGroupStart();
    if (res != ncclSuccess) return nccl_fail(nc, &nc->ranks[0], res, "init", "ncclGroupStart", err);
    for (int r = 0; r < nc->base.size; r++) {
        nccl_rank *k = &nc->ranks[r];
        cudaError_t e = cudaSetDevice(k->device);
        if (e != cudaSuccess) {
            if (st == MR_OK) st = mr_cuda_fail(k->be, err, e, "cudaSetDevice");
            continue; /* the group must still end */
        }
        res = ncclCommInitRank(&k->comm, nc->base.world_size, id, nc->base.world_offset + r);
        if (res != ncclSuccess && st == MR_OK)
            st = nccl_fail(nc, k, res, "init", "ncclCommInitRank", err);
    }
    res = ncclGroupEnd();
    if (res != ncclSuccess && st == MR_OK)
        st = nccl_fail(nc, &nc->ranks[0], res, "init", "ncclGroupEnd (ncclCommInitRank)", err);
    return st;
}

/* The watchdog of init_ranks: ncclCommInitRank waits inside the host call
 * for every rank of the job, with no timeout and no way to abort it from
 * outside (the communicator does not exist until it returns). Should it
 * wait past the collective timeout (a process failed between the job's
 * agreement and NCCL's set-up, or cannot reach the others), the watchdog
 * says so and ends this process with exit status 2, which makes mpirun
 * end the job: better than a job that hangs. */
typedef struct init_watch {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done; /* init returned (under lock) */
    const nccl_comm *nc;
    const mr_job *job;
} init_watch;

static void *watch_init(void *arg) {
    init_watch *w = arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double t = (double)until.tv_nsec * 1e-9 + w->nc->base.timeout_s;
    until.tv_sec += (time_t)t;
    until.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
    pthread_mutex_lock(&w->lock);
    int rc = 0;
    while (!w->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&w->cond, &w->lock, &until);
    if (!w->done) {
        fprintf(stderr,
                "%s: rank %d (%s): nccl init: ncclCommInitRank waited %g s for the job's other "
                "processes (one failed before it, or cannot reach this one: NCCL_DEBUG=WARN "
                "says more); ending the job\n",
                program_invocation_short_name, w->job->rank, w->job->hosts[w->job->rank],
                w->nc->base.timeout_s);
        fflush(stderr);
        _exit(2);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Several processes: process 0's unique id to all, then this process's
 * ranks in one group (one thread initialises several ranks: NCCL requires
 * the group), each with its device current, under the watchdog. */
static mr_status init_ranks(nccl_comm *nc, mr_job *job, mr_error *err) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    mr_status st = MR_OK;
    if (job->rank == 0) {
        ncclResult_t res = ncclGetUniqueId(&id);
        if (res != ncclSuccess)
            st = nccl_fail(nc, &nc->ranks[0], res, "init", "ncclGetUniqueId", err);
    }
    MR_CHECK(mr_job_agree(job, st, err));
    ncclUniqueId *ids = calloc((size_t)job->size, sizeof *ids);
    if (ids == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    st = mr_job_allgather(job, &id, sizeof id, ids, err);
    id = ids[0];
    free(ids);
    MR_CHECK(st);
    int dev = -1;
    (void)cudaGetDevice(&dev);
    init_watch w = {.done = 0, .nc = nc, .job = job};
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    pthread_t watcher;
    int watching = pthread_create(&watcher, NULL, watch_init, &w) == 0;
    st = group_init(nc, id, err);
    pthread_mutex_lock(&w.lock);
    w.done = 1;
    pthread_cond_signal(&w.cond);
    pthread_mutex_unlock(&w.lock);
    if (watching) pthread_join(watcher, NULL);
    pthread_cond_destroy(&w.cond);
    pthread_mutex_destroy(&w.lock);
    if (dev >= 0) (void)cudaSetDevice(dev);
    return st;
}

mr_status mr_comm_nccl_create(mr_backend **be, int local, mr_job *job, double timeout_s,
                              mr_comm **out, mr_error *err) {
    *out = NULL;
    if (local < 1)
        return mr_error_set(err, MR_ERR_USAGE, "nccl communicator: %d replicas (at least 1)",
                            local);
    for (int r = 0; r < local; r++) {
        if (be[r] == NULL || be[r]->ops != &mr_cuda_ops) {
            char name[32] = "no context";
            if (be[r] != NULL) mr_backend_format(be[r], name, sizeof name);
            return mr_error_set(err, MR_ERR_UNSUPPORTED,
                                "nccl communicator: replica %d is on %s, not a GPU (NCCL joins "
                                "CUDA contexts only)",
                                r, name);
        }
        for (int q = 0; q < r; q++)
            if (mr_cuda(be[q])->device == mr_cuda(be[r])->device)
                return mr_error_set(err, MR_ERR_UNSUPPORTED,
                                    "nccl communicator: replicas %d and %d are both on gpu:%d "
                                    "(NCCL needs a GPU of its own for each)",
                                    q, r, mr_cuda(be[r])->device);
    }
    nccl_comm *nc = calloc(1, sizeof *nc);
    if (nc == NULL || (nc->ranks = calloc((size_t)local, sizeof *nc->ranks)) == NULL) {
        free(nc);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    nc->base.vt = &nccl_vt;
    nc->base.size = nc->base.world_size = local;
    nc->base.world_offset = 0;
    nc->base.timeout_s = timeout_s;
    nc->processes = 1;
    atomic_init(&nc->aborted_by, -1);
    atomic_init(&nc->failed, 0);
    pthread_mutex_init(&nc->wlock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the watchdog's naps */
    pthread_cond_init(&nc->wcond, &ca);
    pthread_condattr_destroy(&ca);
    mr_status st = MR_OK;
    for (int r = 0; r < local; r++) {
        nccl_rank *k = &nc->ranks[r];
        k->be = be[r];
        k->device = mr_cuda(be[r])->device;
        pthread_mutex_init(&k->lock, NULL);
        atomic_init(&k->issued, 0);
        if (st == MR_OK) st = setup_rank(k, err);
    }
    /* NCCL connects an algorithm's peers on its first use by default
     * (NCCL_RUNTIME_CONNECT=1, since 2.22), inside the collective's host
     * call, which then waits for every peer: a replica failing before that
     * would leave the others stuck inside NCCL, out of the watchdog's and
     * mr_comm_abort's reach (top). Connect at init instead, where every rank
     * is present. A user's own setting stands; read at the first init. */
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    /* every process ready (or none) before NCCL's init, which waits for all */
    const int multi = job != NULL && job->size > 1;
    if (multi) st = mr_job_agree(job, st, err);
    if (st == MR_OK && job != NULL) st = place(nc, job, local, err);
    if (st == MR_OK) st = multi ? init_ranks(nc, job, err) : init_all(nc, err);
    if (multi) st = mr_job_agree(job, st, err);
    if (st != MR_OK) {
        atomic_store(&nc->failed, 1); /* destroy aborts what NCCL made */
        nccl_destroy(&nc->base);
        return st;
    }
    start_watchdog(nc);
    *out = &nc->base;
    return MR_OK;
}
