/* mpi_comm.c: the fixed-order MPI communicator (mpi_comm.h).
 *
 * An all-reduce in flight is an `op`: phase 1 sends slice q of the buffer to
 * process q and receives this process's slice of every other buffer into a
 * staging area (P - 1 slices); once all arrived, the slice is summed in rank
 * order into the buffer, and phase 2 sends it to every process and receives
 * theirs into the buffer. Each op has its own tags (sequence number x 2 +
 * phase), since two ops in flight may be in different phases on two
 * processes. Ops are kept in a small ring, started and completed in order. */
#include "collectives/mpi_comm.h"
#include "runtime/dmem_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/mpi_impl.h"
#include "runtime/target_clones.h"

#define MAX_OPS 64

typedef struct op {
    float *buf;
    size_t n;
    int phase; /* 1 or 2; 0: free */
    int tag;   /* phase 1 uses tag, phase 2 tag + 1 */
    float *stage;
    size_t stage_cap;
    MPI_Request *reqs; /* 2 (P - 1) */
} op;

typedef struct mpi_comm {
    mr_comm base;
    MPI_Comm comm;
    int P, me;
    int yield;
    int *world; /* (P) MPI_COMM_WORLD rank of each member, for messages */
    int *peers; /* (2 (P - 1)) what each request of an op waits for */
    op ops[MAX_OPS];
    int head, count; /* ring of ops in flight, oldest at head */
    unsigned seq;    /* ops started so far (same count on every process) */
    double *dstage;  /* (P x n) f64 all-reduce staging */
    size_t dstage_cap;
} mpi_comm;

/* Slice q of n floats over P: 16-float (64-byte) aligned, as local.c. */
static void slice(size_t n, int P, int q, size_t *begin, size_t *end) {
    size_t per = (n + (size_t)P - 1) / (size_t)P;
    per = (per + 15) & ~(size_t)15;
    *begin = per * (size_t)q < n ? per * (size_t)q : n;
    *end = *begin + per < n ? *begin + per : n;
}

/* Tags stay below 32767, the least MPI_TAG_UB that MPI allows. */
static int tag_of(unsigned seq) {
    return (int)(seq % 16000u) * 2;
}

static mr_status wait_op(mpi_comm *mc, op *o, const char *what, mr_error *err) {
    return mr_mpi_wait(o->reqs, 2 * (mc->P - 1), mc->peers, mc->base.timeout_s, mc->yield, what,
                       err);
}

/* Phase 1: post the slice exchange. */
static mr_status post_phase1(mpi_comm *mc, op *o, mr_error *err) {
    const int P = mc->P, me = mc->me;
    size_t b, e;
    slice(o->n, P, me, &b, &e);
    size_t len = e - b, need = (size_t)(P - 1) * (len ? len : 1);
    if (need > o->stage_cap) {
        float *s = realloc(o->stage, sizeof(float) * need);
        if (s == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory for MPI staging");
        o->stage = s;
        o->stage_cap = need;
    }
    int k = 0;
    for (int q = 0; q < P; q++) {
        if (q == me) continue;
        int i = q < me ? q : q - 1;
        MR_CHECK(mr_mpi_check(MPI_Irecv(o->stage + (size_t)i * len, (int)len, MPI_FLOAT, q, o->tag,
                                        mc->comm, &o->reqs[k++]),
                              "MPI_Irecv", err));
    }
    for (int q = 0; q < P; q++) {
        if (q == me) continue;
        size_t qb, qe;
        slice(o->n, P, q, &qb, &qe);
        MR_CHECK(mr_mpi_check(
            MPI_Isend(o->buf + qb, (int)(qe - qb), MPI_FLOAT, q, o->tag, mc->comm, &o->reqs[k++]),
            "MPI_Isend", err));
    }
    o->phase = 1;
    return MR_OK;
}

/* Between the phases: sum this process's slice in rank order, then post
 * phase 2 (send the sum to everyone, receive theirs). */
MR_AVX2_CLONES static mr_status post_phase2(mpi_comm *mc, op *o, mr_error *err) {
    const int P = mc->P, me = mc->me;
    size_t b, e;
    slice(o->n, P, me, &b, &e);
    const size_t len = e - b;
    float acc[1024];
    for (size_t i = 0; i < len; i += 1024) {
        size_t m = len - i < 1024 ? len - i : 1024;
        for (int q = 0; q < P; q++) {
            const float *src =
                q == me ? o->buf + b + i : o->stage + (size_t)(q < me ? q : q - 1) * len + i;
            if (q == 0)
                memcpy(acc, src, sizeof(float) * m);
            else
                for (size_t j = 0; j < m; j++)
                    acc[j] += src[j];
        }
        memcpy(o->buf + b + i, acc, sizeof(float) * m);
    }
    int k = 0;
    for (int q = 0; q < P; q++) {
        if (q == me) continue;
        size_t qb, qe;
        slice(o->n, P, q, &qb, &qe);
        MR_CHECK(mr_mpi_check(MPI_Irecv(o->buf + qb, (int)(qe - qb), MPI_FLOAT, q, o->tag + 1,
                                        mc->comm, &o->reqs[k++]),
                              "MPI_Irecv", err));
    }
    for (int q = 0; q < P; q++) {
        if (q == me) continue;
        MR_CHECK(mr_mpi_check(
            MPI_Isend(o->buf + b, (int)len, MPI_FLOAT, q, o->tag + 1, mc->comm, &o->reqs[k++]),
            "MPI_Isend", err));
    }
    o->phase = 2;
    return MR_OK;
}

/* Moves every op in flight on as far as it can without waiting. */
static mr_status mpi_progress(mr_comm *c, int rank, mr_error *err) {
    (void)rank;
    mpi_comm *mc = (mpi_comm *)c;
    for (int k = 0; k < mc->count; k++) {
        op *o = &mc->ops[(mc->head + k) % MAX_OPS];
        int done = 0;
        MR_CHECK(mr_mpi_check(MPI_Testall(2 * (mc->P - 1), o->reqs, &done, MPI_STATUSES_IGNORE),
                              "MPI_Testall", err));
        if (done && o->phase == 1) MR_CHECK(post_phase2(mc, o, err));
    }
    return MR_OK;
}

static mr_status mpi_allreduce_start(mr_comm *c, int rank, mr_dfloat *dbuf, size_t n,
                                     mr_error *err) {
    float *buf = mr_dfloat_ptr(dbuf); /* host memory: CPU replicas' device memory */
    (void)rank;
    mpi_comm *mc = (mpi_comm *)c;
    if (mc->P == 1 || n == 0) return MR_OK;
    if (n / (size_t)mc->P > (size_t)1 << 30)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "mpi all-reduce: %zu floats is too many", n);
    if (mc->count == MAX_OPS)
        return mr_error_set(err, MR_ERR_USAGE, "mpi all-reduce: more than %d in flight", MAX_OPS);
    op *o = &mc->ops[(mc->head + mc->count) % MAX_OPS];
    o->buf = buf;
    o->n = n;
    o->tag = tag_of(mc->seq++);
    mc->count++;
    MR_CHECK(post_phase1(mc, o, err));
    return mpi_progress(c, rank, err);
}

static mr_status mpi_wait_all(mr_comm *c, int rank, mr_error *err) {
    (void)rank;
    mpi_comm *mc = (mpi_comm *)c;
    while (mc->count > 0) {
        op *o = &mc->ops[mc->head];
        MR_CHECK(wait_op(mc, o, "mpi all-reduce", err));
        if (o->phase == 1) {
            MR_CHECK(post_phase2(mc, o, err));
            MR_CHECK(wait_op(mc, o, "mpi all-reduce", err));
        }
        o->phase = 0;
        mc->head = (mc->head + 1) % MAX_OPS;
        mc->count--;
    }
    /* start the next ops from slot 0 again: their staging areas are then
     * the same few, already allocated and in memory, step after step */
    mc->head = 0;
    return MR_OK;
}

static mr_status mpi_allreduce(mr_comm *c, int rank, mr_dfloat *buf, size_t n, mr_error *err) {
    MR_CHECK(mpi_allreduce_start(c, rank, buf, n, err));
    return mpi_wait_all(c, rank, err);
}

/* Few doubles: everyone sends its buffer to everyone, then sums all P in
 * rank order (P x n doubles; only metric sums take this path). */
static mr_status mpi_allreduce_f64(mr_comm *c, int rank, double *buf, size_t n, mr_error *err) {
    (void)rank;
    mpi_comm *mc = (mpi_comm *)c;
    const int P = mc->P, me = mc->me;
    if (P == 1 || n == 0) return MR_OK;
    MR_CHECK(mpi_wait_all(c, rank, err));
    if ((size_t)P * n > mc->dstage_cap) {
        double *d = realloc(mc->dstage, sizeof(double) * (size_t)P * n);
        if (d == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
        mc->dstage = d;
        mc->dstage_cap = (size_t)P * n;
    }
    MPI_Request *reqs = mc->ops[0].reqs;
    int tag = tag_of(mc->seq++), k = 0;
    for (int q = 0; q < P; q++)
        if (q != me)
            MR_CHECK(mr_mpi_check(MPI_Irecv(mc->dstage + (size_t)q * n, (int)n, MPI_DOUBLE, q, tag,
                                            mc->comm, &reqs[k++]),
                                  "MPI_Irecv", err));
    for (int q = 0; q < P; q++)
        if (q != me)
            MR_CHECK(mr_mpi_check(MPI_Isend(buf, (int)n, MPI_DOUBLE, q, tag, mc->comm, &reqs[k++]),
                                  "MPI_Isend", err));
    MR_CHECK(mr_mpi_wait(reqs, k, mc->peers, c->timeout_s, mc->yield, "mpi all-reduce", err));
    memcpy(mc->dstage + (size_t)me * n, buf, sizeof(double) * n);
    for (size_t i = 0; i < n; i++) {
        double s = mc->dstage[i];
        for (int q = 1; q < P; q++)
            s += mc->dstage[(size_t)q * n + i];
        buf[i] = s;
    }
    return MR_OK;
}

static mr_status mpi_broadcast(mr_comm *c, int rank, mr_dfloat *dbuf, size_t n, int root,
                               mr_error *err) {
    float *buf = mr_dfloat_ptr(dbuf); /* host memory: CPU replicas' device memory */
    (void)rank;
    mpi_comm *mc = (mpi_comm *)c;
    if (mc->P == 1 || n == 0) return MR_OK;
    MR_CHECK(mpi_wait_all(c, rank, err));
    if (n > (size_t)1 << 31)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "mpi broadcast: %zu floats is too many", n);
    MPI_Request req;
    MR_CHECK(
        mr_mpi_check(MPI_Ibcast(buf, (int)n, MPI_FLOAT, root, mc->comm, &req), "MPI_Ibcast", err));
    /* the root waits for every other process: named where there is one */
    int peer = mc->me != root ? mc->world[root] : mc->P == 2 ? mc->world[1 - root] : -1;
    return mr_mpi_wait(&req, 1, &peer, c->timeout_s, mc->yield, "mpi broadcast", err);
}

/* A token from everyone to everyone: whoever is missing is named. */
static mr_status mpi_barrier(mr_comm *c, int rank, mr_error *err) {
    (void)rank;
    mpi_comm *mc = (mpi_comm *)c;
    const int P = mc->P, me = mc->me;
    if (P == 1) return MR_OK;
    MR_CHECK(mpi_wait_all(c, rank, err));
    MPI_Request *reqs = mc->ops[0].reqs;
    int tag = tag_of(mc->seq++), k = 0;
    for (int q = 0; q < P; q++)
        if (q != me)
            MR_CHECK(mr_mpi_check(MPI_Irecv(NULL, 0, MPI_BYTE, q, tag, mc->comm, &reqs[k++]),
                                  "MPI_Irecv", err));
    for (int q = 0; q < P; q++)
        if (q != me)
            MR_CHECK(mr_mpi_check(MPI_Isend(NULL, 0, MPI_BYTE, q, tag, mc->comm, &reqs[k++]),
                                  "MPI_Isend", err));
    return mr_mpi_wait(reqs, k, mc->peers, c->timeout_s, mc->yield, "mpi barrier", err);
}

static void mpi_destroy(mr_comm *c) {
    mpi_comm *mc = (mpi_comm *)c;
    for (int k = 0; k < MAX_OPS; k++) {
        free(mc->ops[k].stage);
        free(mc->ops[k].reqs);
    }
    if (mc->comm != MPI_COMM_NULL) MPI_Comm_free(&mc->comm);
    free(mc->world);
    free(mc->peers);
    free(mc->dstage);
    free(mc);
}

static const mr_comm_vtable mpi_vt = {
    .name = "mpi",
    .allreduce_sum = mpi_allreduce,
    .allreduce_sum_f64 = mpi_allreduce_f64,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .allreduce_start = mpi_allreduce_start,
    .progress = mpi_progress,
    .wait_all = mpi_wait_all,
    .abort = NULL, /* a failing process ends the whole job (job.h) */
    .destroy = mpi_destroy,
};

mr_status mr_comm_mpi_create(MPI_Comm comm, double timeout_s, int yield, mr_comm **out,
                             mr_error *err) {
    *out = NULL;
    mpi_comm *mc = calloc(1, sizeof *mc);
    if (mc == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    mc->comm = MPI_COMM_NULL;
    mr_status st = mr_mpi_check(MPI_Comm_dup(comm, &mc->comm), "MPI_Comm_dup", err);
    if (st == MR_OK)
        st = mr_mpi_check(MPI_Comm_set_errhandler(mc->comm, MPI_ERRORS_RETURN),
                          "MPI_Comm_set_errhandler", err);
    if (st == MR_OK) {
        MPI_Comm_size(mc->comm, &mc->P);
        MPI_Comm_rank(mc->comm, &mc->me);
        mc->world = malloc(sizeof(int) * (size_t)mc->P);
        mc->peers = malloc(sizeof(int) * (size_t)(2 * mc->P));
        for (int k = 0; k < MAX_OPS && mc->world && mc->peers; k++)
            if ((mc->ops[k].reqs = calloc((size_t)(2 * mc->P), sizeof(MPI_Request))) == NULL) break;
        if (mc->world == NULL || mc->peers == NULL || mc->ops[MAX_OPS - 1].reqs == NULL)
            st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    if (st == MR_OK) {
        /* member q's rank in MPI_COMM_WORLD, for messages */
        MPI_Group g, wg;
        MPI_Comm_group(mc->comm, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        int *mine = malloc(sizeof(int) * (size_t)mc->P);
        if (mine == NULL) {
            st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
        } else {
            for (int q = 0; q < mc->P; q++)
                mine[q] = q;
            MPI_Group_translate_ranks(g, mc->P, mine, wg, mc->world);
            free(mine);
        }
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
    }
    if (st != MR_OK) {
        mpi_destroy(&mc->base);
        return st;
    }
    /* requests of an op: P - 1 receives (from the other members in rank
     * order), then P - 1 sends (to them, in the same order): a send still
     * pending at a timeout names its receiver too, which has not taken it */
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int q = 0; q < mc->P; q++)
            if (q != mc->me) mc->peers[k++] = mc->world[q];
    for (; k < 2 * mc->P; k++)
        mc->peers[k] = -1;
    mc->base.vt = &mpi_vt;
    mc->base.size = 1;
    mc->base.world_size = mc->P;
    mc->base.world_offset = mc->me;
    mc->base.timeout_s = timeout_s;
    mc->yield = yield;
    *out = &mc->base;
    return MR_OK;
}
