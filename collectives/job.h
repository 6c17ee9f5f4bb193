/* job.h: the processes of one training job: which one this is, where it
 * runs, what they agree on, and the communicator that joins their replicas.
 *
 * Under mpirun (or another MPI launcher) a job is OpenMPI's MPI_COMM_WORLD:
 * each process finds the others on its node (MPI_Comm_split_type with
 * MPI_COMM_TYPE_SHARED), its node, its share of the node's cores, and the
 * host names of all. Run without a launcher, or built without MPI
 * (job_single.c), a job is this one process and MPI is never initialised.
 *
 * Every function here except mr_job_abort is collective where the job has
 * several processes: all of them call it, in the same order. */
#ifndef MR_JOB_H
#define MR_JOB_H

#include <stdint.h>

#include "runtime/error.h"
#include "collectives/comm.h"

#define MR_HOST_MAX 64

typedef struct mr_job_impl mr_job_impl;

typedef struct mr_job {
    int rank, size;             /* this process among the job's */
    int local_rank, local_size; /* among the processes of its node */
    int node, n_nodes;          /* its node (0-based, in rank order), nodes of the job */
    int cores;                  /* cores this process may use: its binding, or its share */
    int bound;                  /* 1: its cores are its own (bound by the launcher) */
    int node_cores;             /* cores of the node that its processes may use */
    char (*hosts)[MR_HOST_MAX]; /* (size) host name of each process */
    /* Filled by mr_job_comm_create: */
    int *replicas;      /* (size) replicas of each process */
    int *first;         /* (size) job-wide index of each process's replica 0 */
    int world_replicas; /* replicas of the job */
    double timeout_s;   /* for the job's own collectives and its communicators */
    /* 1: one of the job's own collectives failed on this process (another
     * process never arrived within timeout_s): MPI may still write its
     * buffers and the processes no longer agree, so the job can only be
     * aborted (mr_job_finalize does so) */
    int failed;
    mr_job_impl *impl;
} mr_job;

/* Starts the job: MPI_Init_thread when a launcher started this process
 * (else a one-process job). ranks_per_node > 0 groups that many consecutive
 * ranks into a simulated node instead of the real ones (1: every rank its
 * own node), so the cross-node paths run on one machine. */
mr_status mr_job_init(int *argc, char ***argv, int ranks_per_node, double timeout_s, mr_job *job,
                      mr_error *err);

/* Ends the job normally (MPI_Finalize); a job whose collective failed
 * (job->failed) is aborted instead with exit status 1, since MPI_Finalize
 * would wait for the process that never arrived. */
void mr_job_finalize(mr_job *job);

/* Ends every process of the job at once with exit status `code`
 * (MPI_Abort), for a failure that the other processes cannot know about.
 * Returns only in a one-process job, where the caller exits as usual. */
void mr_job_abort(mr_job *job, int code);

/* Each process contributes `bytes` from mine; all[p * bytes ...] receives
 * process p's. Past the job's timeout: an MR_ERR_RUNTIME naming the ranks
 * (and hosts) that did not arrive, job->failed set; mine and all are not
 * touched after the call returns (MPI works in buffers of the job's). */
mr_status mr_job_allgather(mr_job *job, const void *mine, size_t bytes, void *all, mr_error *err);

/* Every process passes its own status `st` (its message in *err). Returns
 * the job's: MR_OK if every process succeeded, else on every process the
 * error of the lowest failing rank, prefixed "rank R (host): " unless every
 * process failed with the same message (a bad .cfg fails the same
 * everywhere and is reported once, as in a one-process run); a failure
 * without a message is named by its status. When the all-gather itself
 * fails (job->failed), its error, on this process only. */
mr_status mr_job_agree(mr_job *job, mr_status st, mr_error *err);

/* The communicator for this process's `local_replicas` threads, chosen from
 * the job's shape: local (one process), mpi (one replica per process, one
 * node) or hierarchical (several replicas in a process, or several nodes).
 * All three move host memory: for CPU replicas only (comm.h).
 * Fills job->replicas, job->first and job->world_replicas. */
mr_status mr_job_comm_create(mr_job *job, int local_replicas, mr_comm **out, mr_error *err);

/* "host-a: rank 0" */
void mr_job_format_rank(const mr_job *job, int rank, char *buf, size_t n);

#endif
