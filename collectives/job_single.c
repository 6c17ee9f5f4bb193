/* job_single.c: the job transport of a build without MPI (job_impl.h):
 * a launch of several processes is refused, since each would train alone. */
#include <stdlib.h>

#include "collectives/job_impl.h"

mr_status mr_job_mpi_init(int *argc, char ***argv, int ranks_per_node, mr_job *job, mr_error *err) {
    (void)argc, (void)argv, (void)ranks_per_node, (void)job;
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (n == NULL) n = getenv("PMI_SIZE");
    if (n == NULL || atoi(n) <= 1) return MR_OK; /* a launcher with one process: just that */
    return mr_error_set(err, MR_ERR_UNSUPPORTED,
                        "started as one of %s processes, but this build has no MPI: each "
                        "would train alone (rebuild with libopenmpi-dev installed, "
                        "meson setup -Dmpi=enabled)",
                        n);
}

void mr_job_mpi_finalize(mr_job *job) {
    (void)job;
}

void mr_job_mpi_abort(mr_job *job, int code) {
    (void)job, (void)code;
}

mr_status mr_job_mpi_allgather(mr_job *job, const void *mine, size_t bytes, void *all,
                               mr_error *err) {
    (void)job, (void)mine, (void)bytes, (void)all;
    return mr_error_set(err, MR_ERR_UNSUPPORTED, "this build has no MPI");
}

mr_status mr_job_mpi_comm(mr_job *job, int local_replicas, mr_comm **out, mr_error *err) {
    (void)job, (void)local_replicas, (void)out;
    return mr_error_set(err, MR_ERR_UNSUPPORTED, "this build has no MPI");
}
