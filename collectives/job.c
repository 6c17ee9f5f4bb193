/* job.c: the one-process job, and what every job shares: agreeing on a
 * status, naming a rank (job.h). Multi-process transport: job_impl.h. */
#include "collectives/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/backend.h"
#include "collectives/job_impl.h"
#include "collectives/local.h"

/* Processes in the job a launcher started, from its environment (OpenMPI's
 * mpirun, or a PMI/PMIx launcher such as srun); 0 when none did. */
static int launched_size(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && atoi(v) > 0) return atoi(v);
    }
    return getenv("PMIX_RANK") || getenv("PMI_RANK") ? 1 : 0;
}

mr_status mr_job_init(int *argc, char ***argv, int ranks_per_node, double timeout_s, mr_job *job,
                      mr_error *err) {
    memset(job, 0, sizeof *job);
    job->size = job->local_size = job->n_nodes = 1;
    job->timeout_s = timeout_s;
    job->cores = job->node_cores = mr_cpu_cores();
    job->hosts = calloc(1, sizeof *job->hosts);
    job->replicas = calloc(1, sizeof *job->replicas);
    job->first = calloc(1, sizeof *job->first);
    if (job->hosts == NULL || job->replicas == NULL || job->first == NULL) {
        mr_job_finalize(job);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    if (gethostname(job->hosts[0], MR_HOST_MAX) != 0) snprintf(job->hosts[0], MR_HOST_MAX, "?");
    job->hosts[0][MR_HOST_MAX - 1] = '\0';
    if (launched_size() == 0) return MR_OK; /* no launcher: this process is the job */
    return mr_job_mpi_init(argc, argv, ranks_per_node, job, err);
}

void mr_job_finalize(mr_job *job) {
    if (job->failed) mr_job_abort(job, 1); /* returns in a one-process job */
    if (job->impl != NULL) mr_job_mpi_finalize(job);
    free(job->hosts);
    free(job->replicas);
    free(job->first);
    memset(job, 0, sizeof *job);
}

void mr_job_abort(mr_job *job, int code) {
    if (job->impl != NULL && job->size > 1) mr_job_mpi_abort(job, code);
}

mr_status mr_job_allgather(mr_job *job, const void *mine, size_t bytes, void *all, mr_error *err) {
    if (job->impl == NULL) {
        memcpy(all, mine, bytes);
        return MR_OK;
    }
    return mr_job_mpi_allgather(job, mine, bytes, all, err);
}

void mr_job_format_rank(const mr_job *job, int rank, char *buf, size_t n) {
    snprintf(buf, n, "%s: rank %d", job->hosts[rank], rank);
}

typedef struct verdict {
    int status;
    char msg[sizeof(((mr_error *)0)->msg)];
} verdict;

mr_status mr_job_agree(mr_job *job, mr_status st, mr_error *err) {
    if (st != MR_OK && err->msg[0] == '\0') { /* named by its status, never an empty line */
        mr_error_clear(err);
        mr_error_set(err, st, "failed (%s) without a message", mr_status_name(st));
    }
    if (job->size == 1) return st;
    verdict mine = {.status = st};
    if (st != MR_OK) snprintf(mine.msg, sizeof mine.msg, "%s", err->msg);
    verdict *all = calloc((size_t)job->size, sizeof *all);
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    mr_error gerr = {0};
    if (mr_job_allgather(job, &mine, sizeof mine, all, &gerr) != MR_OK) {
        free(all);
        mr_error_clear(err);
        return mr_error_set(err, gerr.status, "%s", gerr.msg);
    }
    int first = -1, same = 1;
    for (int p = 0; p < job->size; p++) {
        if (all[p].status == MR_OK) {
            same = 0;
            continue;
        }
        if (first < 0)
            first = p;
        else if (strcmp(all[p].msg, all[first].msg) != 0)
            same = 0;
    }
    if (first < 0) {
        free(all);
        return MR_OK;
    }
    verdict v = all[first];
    free(all);
    mr_error_clear(err);
    if (same) return mr_error_set(err, (mr_status)v.status, "%s", v.msg);
    return mr_error_set(err, (mr_status)v.status, "rank %d (%s): %s", first, job->hosts[first],
                        v.msg);
}

mr_status mr_job_comm_create(mr_job *job, int local_replicas, mr_comm **out, mr_error *err) {
    *out = NULL;
    if (local_replicas < 1)
        return mr_error_set(err, MR_ERR_USAGE, "a process needs at least one replica");
    MR_CHECK(mr_job_allgather(job, &local_replicas, sizeof local_replicas, job->replicas, err));
    int sum = 0;
    for (int p = 0; p < job->size; p++) {
        job->first[p] = sum;
        sum += job->replicas[p];
    }
    job->world_replicas = sum;
    if (job->size == 1) {
        MR_CHECK(mr_comm_local_create(local_replicas, out, err));
        (*out)->timeout_s = job->timeout_s;
        mr_comm_local_place(*out, 0, job->cores);
        return MR_OK;
    }
    return mr_job_mpi_comm(job, local_replicas, out, err);
}
