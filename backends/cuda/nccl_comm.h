/* nccl_comm.h: the communicator for GPU replicas, over NCCL.
 *
 * Its participants are this process's CUDA contexts, one per GPU and one
 * replica thread each: local rank r is be[r], and its buffers are device
 * memory of be[r] (mr_dfloat *, collectives/comm.h). One process drives all of them
 * (ncclCommInitAll over the contexts' devices), or each process of a job
 * drives its own (ncclCommInitRank, the unique id of process 0 sent to the
 * others with mr_job_allgather); NCCL rank of local rank r is the job-wide
 * replica index first + r.
 *
 * Stream-ordered: a collective queues, with no host synchronisation, an
 * event on the context's compute stream, makes its communication stream
 * wait for it, runs NCCL there, and makes the compute stream wait for the
 * result: kernels queued after the call see the sum, and the host sees it
 * after the usual copy to the host. allreduce_sum does only that.
 * allreduce_start (gradient buckets; several may be in flight, in order)
 * lets the compute stream run on, and wait_all makes it wait for them all;
 * wait_all is also where the host waits, polling the last collective's event
 * and ncclCommGetAsyncError against the communicator's timeout, so a
 * replica that never comes, or an NCCL error, fails with a message and
 * aborts this rank's NCCL communicator instead of hanging. join_all (the
 * training step's) makes the compute stream wait the same way but not the
 * host: a watchdog thread per communicator polls NCCL's asynchronous error
 * and, past the timeout, the event, and aborts the rank's communicator, so
 * the host's next wait for the device (the step's read of its metrics)
 * ends; settle then gives the verdict, in wait_all's words. broadcast,
 * barrier and allreduce_sum_f64 (host doubles, staged through pinned and
 * device memory) wait the same way before they return. mr_comm_abort
 * aborts this process's NCCL communicators, so device work waiting on a
 * failed replica ends, and later calls return MR_ERR_ABORTED.
 *
 * Summation order: NCCL's all-reduce hands every rank bitwise the same
 * sums, and for a fixed topology, rank count and NCCL version the same
 * ones run after run; but the order of summation is NCCL's (rings, trees,
 * chunks), not rank order 0..R-1 as in local and mpi, so GPU and CPU runs
 * of the same job agree to float rounding, not bitwise. The f64 sums of
 * metrics are exact where they are integers below 2^53. */
#ifndef MR_NCCL_COMM_H
#define MR_NCCL_COMM_H

#include "runtime/backend.h"
#include "collectives/comm.h"
#include "collectives/job.h"

/* A communicator over be[0..local-1], this process's CUDA contexts (one
 * per GPU, no GPU twice). job NULL or of one process: the job is this
 * process; else every process of the job calls this (collective), and
 * job->replicas, job->first and job->world_replicas are filled as
 * mr_job_comm_create fills them. timeout_s bounds every host wait.
 * MR_ERR_UNSUPPORTED for a context that is not CUDA's, or in a build
 * without CUDA ("this build has no CUDA backend (NCCL)"); MR_ERR_RUNTIME
 * with NCCL's or CUDA's words when the communicator cannot be made. */
mr_status mr_comm_nccl_create(mr_backend **be, int local, mr_job *job, double timeout_s,
                              mr_comm **out, mr_error *err);

#endif
