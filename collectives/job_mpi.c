/* job_mpi.c: a job of several processes over MPI (job_impl.h).
 *
 * MPI is initialised with MPI_THREAD_FUNNELED: only the main thread calls
 * it, which is the thread of each process's replica 0 (the strategy runs
 * replica 0 on the caller's thread, and only replica 0 of a hierarchical
 * communicator talks to other processes). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/hierarchical.h"
#include "collectives/job_impl.h"
#include "collectives/local.h"
#include "collectives/mpi_comm.h"
#include "collectives/mpi_impl.h"

struct mr_job_impl {
    MPI_Comm node;    /* the processes of this node (real or simulated) */
    MPI_Comm leaders; /* rank 0 of every node; MPI_COMM_NULL elsewhere */
    int oversubscribed;
};

/* Waits for a non-blocking job-level collective within the job's timeout. */
static mr_status wait_one(mr_job *job, MPI_Request *req, const char *what, mr_error *err) {
    return mr_mpi_wait(req, 1, NULL, job->timeout_s, job->impl->oversubscribed, what, err);
}

mr_status mr_job_mpi_allgather(mr_job *job, const void *mine, size_t bytes, void *all,
                               mr_error *err) {
    if (bytes > (size_t)1 << 30)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "job all-gather of %zu bytes", bytes);
    MPI_Request req;
    MR_CHECK(mr_mpi_check(
        MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &req),
        "MPI_Iallgather", err));
    return wait_one(job, &req, "waiting for the other processes of the job", err);
}

/* This process's cores, and its share when the node's processes are not
 * bound: identical masks mean nobody was given cores of its own, so the
 * node's cores are divided among them (at least one each). */
static mr_status find_cores(mr_job *job, mr_error *err) {
    cpu_set_t mine, *all = calloc((size_t)job->local_size, sizeof *all);
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_SET(0, &mine);
    MPI_Request req;
    mr_status st = mr_mpi_check(MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all,
                                               (int)sizeof mine, MPI_BYTE, job->impl->node, &req),
                                "MPI_Iallgather", err);
    if (st == MR_OK) st = wait_one(job, &req, "waiting for the processes of this node", err);
    if (st == MR_OK) {
        cpu_set_t uni;
        CPU_ZERO(&uni);
        int same = 1;
        for (int p = 0; p < job->local_size; p++) {
            CPU_OR(&uni, &uni, &all[p]);
            same &= CPU_EQUAL(&all[p], &mine);
        }
        job->node_cores = CPU_COUNT(&uni);
        job->bound = job->local_size > 1 && !same;
        int own = CPU_COUNT(&mine);
        job->cores = job->bound || job->local_size == 1 ? own : own / job->local_size;
        if (job->cores < 1) job->cores = 1;
        job->impl->oversubscribed = job->local_size > job->node_cores;
    }
    free(all);
    return st;
}

mr_status mr_job_mpi_init(int *argc, char ***argv, int ranks_per_node, mr_job *job, mr_error *err) {
    int provided = 0;
    MR_CHECK(mr_mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
                          "MPI_Init_thread", err));
    job->impl = calloc(1, sizeof *job->impl);
    if (job->impl == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    job->impl->node = job->impl->leaders = MPI_COMM_NULL;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_FUNNELED)
        return mr_error_set(err, MR_ERR_UNSUPPORTED,
                            "MPI provides thread level %d; mirrored needs MPI_THREAD_FUNNELED",
                            provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &job->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &job->size);
    free(job->hosts); /* the one-process job's (job.c) */
    free(job->replicas);
    free(job->first);
    job->hosts = calloc((size_t)job->size, sizeof *job->hosts);
    job->replicas = calloc((size_t)job->size, sizeof *job->replicas);
    job->first = calloc((size_t)job->size, sizeof *job->first);
    if (job->hosts == NULL || job->replicas == NULL || job->first == NULL)
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    /* nodes: the processes that share memory, or simulated ones */
    int rc = ranks_per_node > 0 ? MPI_Comm_split(MPI_COMM_WORLD, job->rank / ranks_per_node,
                                                 job->rank, &job->impl->node)
                                : MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED,
                                                      job->rank, MPI_INFO_NULL, &job->impl->node);
    MR_CHECK(mr_mpi_check(rc, "MPI_Comm_split_type", err));
    MPI_Comm_rank(job->impl->node, &job->local_rank);
    MPI_Comm_size(job->impl->node, &job->local_size);
    MR_CHECK(mr_mpi_check(MPI_Comm_split(MPI_COMM_WORLD, job->local_rank == 0 ? 0 : MPI_UNDEFINED,
                                         job->rank, &job->impl->leaders),
                          "MPI_Comm_split", err));
    int where[2] = {0, 0}; /* node index, nodes: known to the leaders, sent down */
    if (job->impl->leaders != MPI_COMM_NULL) {
        MPI_Comm_rank(job->impl->leaders, &where[0]);
        MPI_Comm_size(job->impl->leaders, &where[1]);
    }
    MR_CHECK(mr_mpi_check(MPI_Bcast(where, 2, MPI_INT, 0, job->impl->node), "MPI_Bcast", err));
    job->node = where[0];
    job->n_nodes = where[1];
    char host[MR_HOST_MAX] = "";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[MR_HOST_MAX - 1] = '\0';
    MR_CHECK(find_cores(job, err));
    return mr_job_mpi_allgather(job, host, MR_HOST_MAX, job->hosts, err);
}

void mr_job_mpi_finalize(mr_job *job) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) {
        if (job->impl->leaders != MPI_COMM_NULL) MPI_Comm_free(&job->impl->leaders);
        if (job->impl->node != MPI_COMM_NULL) MPI_Comm_free(&job->impl->node);
        MPI_Finalize();
    }
    free(job->impl);
    job->impl = NULL;
}

void mr_job_mpi_abort(mr_job *job, int code) {
    (void)job;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
}

mr_status mr_job_mpi_comm(mr_job *job, int local_replicas, mr_comm **out, mr_error *err) {
    const double T = job->timeout_s;
    const int yield = job->impl->oversubscribed || local_replicas > job->cores;
    int flat = job->n_nodes == 1;
    for (int p = 0; p < job->size; p++)
        flat &= job->replicas[p] == 1;
    if (flat) return mr_comm_mpi_create(MPI_COMM_WORLD, T, yield, out, err);
    mr_hierarchy h = {.n_nodes = job->n_nodes,
                      .world_size = job->world_replicas,
                      .world_offset = job->first[job->rank]};
    mr_status st = mr_comm_local_create(local_replicas, &h.local, err);
    if (st == MR_OK) mr_comm_local_place(h.local, job->first[job->rank], job->cores);
    if (st == MR_OK) st = mr_comm_mpi_create(MPI_COMM_WORLD, T, yield, &h.world, err);
    if (st == MR_OK && job->local_size > 1)
        st = mr_comm_mpi_create(job->impl->node, T, yield, &h.node, err);
    if (st == MR_OK && job->impl->leaders != MPI_COMM_NULL && job->n_nodes > 1)
        st = mr_comm_mpi_create(job->impl->leaders, T, yield, &h.cross, err);
    if (st != MR_OK) {
        mr_comm_destroy(h.local);
        mr_comm_destroy(h.world);
        mr_comm_destroy(h.node);
        mr_comm_destroy(h.cross);
        return st;
    }
    return mr_comm_hierarchical_create(&h, out, err);
}
