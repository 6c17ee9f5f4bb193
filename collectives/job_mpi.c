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
#include "runtime/clock.h"

struct mr_job_impl {
    MPI_Comm node;    /* the processes of this node (real or simulated) */
    MPI_Comm leaders; /* rank 0 of every node; MPI_COMM_NULL elsewhere */
    MPI_Comm gather;  /* MPI_COMM_WORLD's ranks, for the job's all-gathers only */
    int oversubscribed;
};

/* "1 (host-b), 3 (host-d)": the processes whose receive (reqs[i] from
 * peers[i]) has not completed; a process whose host is not known yet (the
 * all-gather of the host names) by its rank alone. */
static void name_pending(const mr_job *job, MPI_Request *reqs, const int *peers, int n, char *buf,
                         size_t size) {
    for (int i = 0; i < n; i++) {
        int done = 1;
        if (reqs[i] != MPI_REQUEST_NULL) MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
        if (done) continue;
        const char *host = job->hosts[peers[i]];
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, host[0] ? "%s%d (%s)" : "%s%d", len ? ", " : "", peers[i],
                 host);
    }
}

/* The processes whose bytes never came (receives i < n, from peers[i]);
 * where all came, those that never took ours (sends n + i, to peers[i]):
 * a process stopped after it sent, before it received, holds up the job
 * as surely. */
static void name_missing(const mr_job *job, MPI_Request *reqs, const int *peers, int n, char *buf,
                         size_t size) {
    buf[0] = '\0';
    name_pending(job, reqs, peers, n, buf, size);
    if (buf[0] == '\0') name_pending(job, reqs + n, peers, n, buf, size);
}

/* The all-gather over point-to-point messages: each process sends its
 * bytes to every other and receives theirs, so a wait that times out
 * names exactly the processes whose bytes never came. The buffers are the
 * job's own, never the caller's: after a timeout MPI may still read and
 * write them (a stopped process that resumes), so they are left to it,
 * never freed, and the job is marked failed (only an abort ends it). */
mr_status mr_job_mpi_allgather(mr_job *job, const void *mine, size_t bytes, void *all,
                               mr_error *err) {
    if (bytes > (size_t)1 << 30)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "job all-gather of %zu bytes", bytes);
    if (job->failed)
        return mr_error_set(err, MR_ERR_RUNTIME,
                            "an earlier collective of the job failed on this process");
    const int n = job->size, me = job->rank;
    char *buf = malloc(bytes * (size_t)n); /* (n, bytes): process p's at p * bytes */
    MPI_Request *reqs = malloc(2 * (size_t)n * sizeof *reqs); /* n - 1 receives, then sends */
    int *peers = malloc((size_t)n * sizeof *peers);           /* (n - 1) rank of receive i */
    if (buf == NULL || reqs == NULL || peers == NULL) {
        free(buf), free(reqs), free(peers);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    memcpy(buf + (size_t)me * bytes, mine, bytes);
    int k = 0, rc = MPI_SUCCESS;
    for (int p = 0; p < n && rc == MPI_SUCCESS; p++)
        if (p != me) {
            peers[k] = p;
            rc = MPI_Irecv(buf + (size_t)p * bytes, (int)bytes, MPI_BYTE, p, 0, job->impl->gather,
                           &reqs[k++]);
        }
    for (int p = 0; p < n && rc == MPI_SUCCESS; p++)
        if (p != me)
            rc = MPI_Isend(buf + (size_t)me * bytes, (int)bytes, MPI_BYTE, p, 0, job->impl->gather,
                           &reqs[k++]);
    const double t0 = mr_now_s();
    mr_status st = mr_mpi_check(rc, "MPI_Irecv or MPI_Isend", err);
    if (st == MR_OK)
        st = mr_mpi_wait(reqs, k, NULL, job->timeout_s, job->impl->oversubscribed,
                         "waiting for the other processes of the job", err);
    if (st != MR_OK) {
        job->failed = 1; /* buf and reqs are MPI's now */
        if (rc != MPI_SUCCESS || mr_now_s() - t0 < job->timeout_s) return st; /* an MPI error */
        char missing[512];
        name_missing(job, reqs, peers, n - 1, missing, sizeof missing);
        mr_error_clear(err);
        return mr_error_set(err, MR_ERR_RUNTIME,
                            "waited %.0f s for rank(s) %s in a collective of the job (stopped, "
                            "hung or still starting)",
                            job->timeout_s, missing[0] ? missing : "(none: only sends pending)");
    }
    memcpy(all, buf, bytes * (size_t)n);
    free(buf), free(reqs), free(peers);
    return MR_OK;
}

/* This process's cores, and its share when the node's processes are not
 * bound: identical masks mean nobody was given cores of its own, so the
 * node's cores are divided among them (at least one each). Every process's
 * mask is gathered with its node (job->node), the node's are used. */
static mr_status find_cores(mr_job *job, mr_error *err) {
    typedef struct {
        int node;
        cpu_set_t mask;
    } cores;
    cores mine = {.node = job->node}, *all = calloc((size_t)job->size, sizeof *all);
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    CPU_ZERO(&mine.mask);
    if (sched_getaffinity(0, sizeof mine.mask, &mine.mask) != 0) CPU_SET(0, &mine.mask);
    mr_status st = mr_job_mpi_allgather(job, &mine, sizeof mine, all, err);
    if (st == MR_OK) {
        cpu_set_t uni;
        CPU_ZERO(&uni);
        int same = 1;
        for (int p = 0; p < job->size; p++) {
            if (all[p].node != job->node) continue;
            CPU_OR(&uni, &uni, &all[p].mask);
            same &= CPU_EQUAL(&all[p].mask, &mine.mask);
        }
        job->node_cores = CPU_COUNT(&uni);
        job->bound = job->local_size > 1 && !same;
        int own = CPU_COUNT(&mine.mask);
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
    job->impl->node = job->impl->leaders = job->impl->gather = MPI_COMM_NULL;
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
    /* the all-gathers' own messages, apart from every communicator's */
    MR_CHECK(mr_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &job->impl->gather), "MPI_Comm_dup", err));
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
    MR_CHECK(mr_job_mpi_allgather(job, host, MR_HOST_MAX, job->hosts, err));
    return find_cores(job, err);
}

void mr_job_mpi_finalize(mr_job *job) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) {
        if (job->impl->leaders != MPI_COMM_NULL) MPI_Comm_free(&job->impl->leaders);
        if (job->impl->node != MPI_COMM_NULL) MPI_Comm_free(&job->impl->node);
        if (job->impl->gather != MPI_COMM_NULL) MPI_Comm_free(&job->impl->gather);
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
