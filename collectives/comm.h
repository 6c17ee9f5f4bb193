/* comm.h: communicators over flat float buffers of device memory.
 *
 * A communicator joins the replicas of a job: `size` of them call in from
 * this process (one thread each, identified by their local rank 0..size-1),
 * `world_size` in the whole job, of which this process holds the job-wide
 * indices world_offset .. world_offset + size - 1. A communicator of one
 * process (local) has world_size == size and world_offset 0; an MPI
 * communicator with one replica per process has size 1. Every participant
 * calls the same collectives in the same order with buffers of the same
 * length. collectives/ knows nothing of models: it moves float buffers.
 *
 * The float buffers are the replicas' device memory (mr_dfloat *,
 * runtime/dmem.h): a communicator reads and writes them, so it serves one
 * device kind. local, mpi and hierarchical join CPU replicas only, whose
 * device memory is host memory (they turn it into float * through
 * runtime/dmem_impl.h); GPU replicas get their kind's communicator (NCCL,
 * backends/cuda/nccl_comm.c), and the strategy picks the communicator for
 * the replicas' kind (backends/backends.h).
 * The f64 all-reduce takes host memory (a few metric sums).
 *
 * No collective waits forever: a participant that does not arrive within the
 * communicator's timeout makes the others return MR_ERR_RUNTIME with a message
 * that says which collective was waiting for which participants. A
 * participant that fails elsewhere calls mr_comm_abort so the others in its
 * process stop waiting at once (they return MR_ERR_ABORTED: an echo of that
 * failure, not a cause); another process's failure ends the job (job.h). */
#ifndef MR_COMM_H
#define MR_COMM_H

#include <stddef.h>

#include "runtime/error.h"
#include "runtime/dmem.h"

typedef struct mr_comm mr_comm;

/* The interface every communicator implements. Callers use the mr_comm_*
 * wrappers below, never the slots directly. */
typedef struct mr_comm_vtable {
    /* Short name for logs: "local", "mpi", "nccl", "hierarchical". */
    const char *name;
    /* In place: buf (n floats) becomes the element-wise sum over all
     * participants of the job. The summation order is fixed, so every
     * participant gets bitwise the same result and two runs repeat bitwise. */
    mr_status (*allreduce_sum)(mr_comm *c, int rank, mr_dfloat *buf, size_t n, mr_error *err);
    /* The same for a few doubles (metric sums that must stay exact past
     * 2^24: counts over a whole dataset), summed in job-wide order. */
    mr_status (*allreduce_sum_f64)(mr_comm *c, int rank, double *buf, size_t n, mr_error *err);
    /* In place: every participant's buf (n floats) becomes the buf of root
     * (a job-wide index; communicators spanning processes take root 0 only). */
    mr_status (*broadcast)(mr_comm *c, int rank, mr_dfloat *buf, size_t n, int root, mr_error *err);
    /* Returns once every participant has called it. */
    mr_status (*barrier)(mr_comm *c, int rank, mr_error *err);
    /* Non-blocking all-reduce, for gradient buckets while backward goes on:
     * starts summing buf (n floats), which the caller leaves alone until
     * wait_all returns; several may be in flight. May be NULL: the wrapper
     * then reduces at once. */
    mr_status (*allreduce_start)(mr_comm *c, int rank, mr_dfloat *buf, size_t n, mr_error *err);
    /* Moves in-flight reductions on without waiting (MPI makes progress only
     * inside its calls). May be NULL. */
    mr_status (*progress)(mr_comm *c, int rank, mr_error *err);
    /* Returns once every reduction `rank` started is complete. May be NULL. */
    mr_status (*wait_all)(mr_comm *c, int rank, mr_error *err);
    /* wait_all for a device that orders work by itself (NCCL's streams):
     * the device work the caller queues from now on waits for every
     * reduction `rank` started, and the host goes on at once; a watchdog
     * meanwhile holds the reductions to the timeout (it aborts them, so the
     * caller's next host wait for that work ends). Their outcome is known
     * after that wait: settle. May be NULL: the wrapper calls wait_all. */
    mr_status (*join_all)(mr_comm *c, int rank, mr_error *err);
    /* After join_all and the caller's host wait for device work queued
     * after it, `waited` that wait's status (err its message): MR_OK if the
     * reductions completed, else why not (the timeout, NCCL's error, an
     * abort), in place of the wait's own message where the communicator
     * knows better, else `waited`. May be NULL: the wrapper returns waited. */
    mr_status (*settle)(mr_comm *c, int rank, mr_status waited, mr_error *err);
    /* Makes every pending and future collective of this process's
     * participants return MR_ERR_ABORTED. May be NULL. */
    void (*abort)(mr_comm *c, int rank);
    /* Frees the communicator (called once, after all participants are done). */
    void (*destroy)(mr_comm *c);
} mr_comm_vtable;

struct mr_comm {
    const mr_comm_vtable *vt;
    int size;         /* participants calling in from this process */
    int world_size;   /* participants in the whole job */
    int world_offset; /* job-wide index of this process's participant 0 */
    double timeout_s; /* how long a collective waits for the others before failing */
};

/* Wrappers: check arguments (rank in range, root in range) then dispatch. */
mr_status mr_comm_allreduce_sum(mr_comm *c, int rank, mr_dfloat *buf, size_t n, mr_error *err);
mr_status mr_comm_allreduce_sum_f64(mr_comm *c, int rank, double *buf, size_t n, mr_error *err);
mr_status mr_comm_broadcast(mr_comm *c, int rank, mr_dfloat *buf, size_t n, int root,
                            mr_error *err);
mr_status mr_comm_barrier(mr_comm *c, int rank, mr_error *err);
mr_status mr_comm_allreduce_start(mr_comm *c, int rank, mr_dfloat *buf, size_t n, mr_error *err);
mr_status mr_comm_progress(mr_comm *c, int rank, mr_error *err);
mr_status mr_comm_wait_all(mr_comm *c, int rank, mr_error *err);
mr_status mr_comm_join_all(mr_comm *c, int rank, mr_error *err);
mr_status mr_comm_settle(mr_comm *c, int rank, mr_status waited, mr_error *err);
void mr_comm_abort(mr_comm *c, int rank);
void mr_comm_destroy(mr_comm *c);
const char *mr_comm_name(const mr_comm *c);
/* 1 if reductions started with mr_comm_allreduce_start can overlap the
 * caller's work (the slot exists), 0 if they complete inside the call. */
int mr_comm_is_async(const mr_comm *c);

/* Default collective timeout in seconds: MIRRORED_COMM_TIMEOUT from the
 * environment if set and valid, else 600. */
double mr_comm_default_timeout(void);

/* Parses a timeout in seconds ("600", "2.5"): > 0 and finite, else -1. */
double mr_comm_parse_timeout(const char *s);

#endif
