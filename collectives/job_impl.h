/* job_impl.h: the transport under job.c (internal to collectives/).
 * job_mpi.c implements it over MPI; job_single.c, in builds without MPI,
 * refuses a multi-process launch. Called only for jobs that a launcher
 * started (job.c handles the one-process job itself). */
#ifndef MR_JOB_IMPL_H
#define MR_JOB_IMPL_H

#include "collectives/job.h"

/* Turns the one-process job that job.c set up into the launcher's job:
 * every field (rank, node, cores, hosts, impl). */
mr_status mr_job_mpi_init(int *argc, char ***argv, int ranks_per_node, mr_job *job, mr_error *err);
void mr_job_mpi_finalize(mr_job *job);
void mr_job_mpi_abort(mr_job *job, int code);
mr_status mr_job_mpi_allgather(mr_job *job, const void *mine, size_t bytes, void *all,
                               mr_error *err);
/* The mpi or hierarchical communicator, once job->replicas and job->first are known. */
mr_status mr_job_mpi_comm(mr_job *job, int local_replicas, mr_comm **out, mr_error *err);

#endif
