/* hierarchical.c: levels of communicators (hierarchical.h). */
#include "collectives/hierarchical.h"
#include "runtime/dmem_impl.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct hier_comm {
    mr_comm base;
    mr_hierarchy h;
} hier_comm;

/* Replica 0's part of an all-reduce: across the processes of the node,
 * across nodes, back down the node. */
static mr_status inter_allreduce(hier_comm *hc, mr_dfloat *buf, size_t n, mr_error *err) {
    const mr_hierarchy *h = &hc->h;
    if (h->node) MR_CHECK(mr_comm_allreduce_sum(h->node, 0, buf, n, err));
    if (h->cross) MR_CHECK(mr_comm_allreduce_sum(h->cross, 0, buf, n, err));
    if (h->node && h->n_nodes > 1) MR_CHECK(mr_comm_broadcast(h->node, 0, buf, n, 0, err));
    return MR_OK;
}

/* Runs `inter` on replica 0 between a local reduction and a local
 * broadcast; a failure of replica 0 releases the other threads. */
static mr_status hier_allreduce(mr_comm *c, int rank, mr_dfloat *buf, size_t n, mr_error *err) {
    hier_comm *hc = (hier_comm *)c;
    mr_comm *local = hc->h.local;
    MR_CHECK(mr_comm_allreduce_sum(local, rank, buf, n, err));
    if (rank == 0) {
        mr_status st = inter_allreduce(hc, buf, n, err);
        if (st != MR_OK) {
            mr_comm_abort(local, 0);
            return st;
        }
    }
    return mr_comm_broadcast(local, rank, buf, n, 0, err);
}

static mr_status hier_allreduce_f64(mr_comm *c, int rank, double *buf, size_t n, mr_error *err) {
    hier_comm *hc = (hier_comm *)c;
    mr_comm *local = hc->h.local;
    MR_CHECK(mr_comm_allreduce_sum_f64(local, rank, buf, n, err));
    if (rank == 0) {
        mr_status st = mr_comm_allreduce_sum_f64(hc->h.world, 0, buf, n, err);
        if (st != MR_OK) {
            mr_comm_abort(local, 0);
            return st;
        }
    }
    /* the bits of n doubles, copied as 2n floats: the local communicator
     * moves host memory, which the f64 buffer is */
    return mr_comm_broadcast(local, rank, mr_dfloat_of((float *)buf), 2 * n, 0, err);
}

static mr_status hier_broadcast(mr_comm *c, int rank, mr_dfloat *buf, size_t n, int root,
                                mr_error *err) {
    hier_comm *hc = (hier_comm *)c;
    if (root != 0)
        return mr_error_set(err, MR_ERR_USAGE, "hierarchical broadcast: only from replica 0");
    if (rank == 0) {
        mr_status st = mr_comm_broadcast(hc->h.world, 0, buf, n, 0, err);
        if (st != MR_OK) {
            mr_comm_abort(hc->h.local, 0);
            return st;
        }
    }
    return mr_comm_broadcast(hc->h.local, rank, buf, n, 0, err);
}

static mr_status hier_barrier(mr_comm *c, int rank, mr_error *err) {
    hier_comm *hc = (hier_comm *)c;
    MR_CHECK(mr_comm_barrier(hc->h.local, rank, err));
    if (rank == 0) {
        mr_status st = mr_comm_barrier(hc->h.world, 0, err);
        if (st != MR_OK) {
            mr_comm_abort(hc->h.local, 0);
            return st;
        }
    }
    return mr_comm_barrier(hc->h.local, rank, err);
}

static void hier_abort(mr_comm *c, int rank) {
    mr_comm_abort(((hier_comm *)c)->h.local, rank);
}

static void hier_destroy(mr_comm *c) {
    hier_comm *hc = (hier_comm *)c;
    mr_comm_destroy(hc->h.local);
    mr_comm_destroy(hc->h.node);
    mr_comm_destroy(hc->h.cross);
    mr_comm_destroy(hc->h.world);
    free(hc);
}

static const mr_comm_vtable hier_vt = {
    .name = "hierarchical",
    .allreduce_sum = hier_allreduce,
    .allreduce_sum_f64 = hier_allreduce_f64,
    .broadcast = hier_broadcast,
    .barrier = hier_barrier,
    .allreduce_start = NULL, /* levels in sequence: a start would block anyway */
    .progress = NULL,
    .wait_all = NULL,
    .abort = hier_abort,
    .destroy = hier_destroy,
};

mr_status mr_comm_hierarchical_create(const mr_hierarchy *h, mr_comm **out, mr_error *err) {
    *out = NULL;
    hier_comm *hc = calloc(1, sizeof *hc);
    if (hc == NULL || h->local == NULL || h->world == NULL) {
        free(hc);
        mr_comm_destroy(h->local);
        mr_comm_destroy(h->node);
        mr_comm_destroy(h->cross);
        mr_comm_destroy(h->world);
        return mr_error_set(err, hc ? MR_ERR_USAGE : MR_ERR_NOMEM,
                            hc ? "hierarchical communicator: no local or world level"
                               : "out of memory");
    }
    hc->h = *h;
    /* the other threads wait at the local broadcast while replica 0 waits
     * on MPI: let MPI's timeout, which names the missing ranks, fire first */
    h->local->timeout_s = 2.0 * h->world->timeout_s + 10.0;
    hc->base.vt = &hier_vt;
    hc->base.size = h->local->size;
    hc->base.world_size = h->world_size;
    hc->base.world_offset = h->world_offset;
    hc->base.timeout_s = h->world->timeout_s;
    *out = &hc->base;
    return MR_OK;
}

void mr_comm_hierarchical_describe(const mr_comm *c, char *buf, size_t n) {
    const hier_comm *hc = (const hier_comm *)c;
    if (c->vt != &hier_vt)
        snprintf(buf, n, "%s", mr_comm_name(c));
    else if (hc->h.n_nodes > 1)
        snprintf(buf, n, "local + %sMPI across %d nodes", hc->h.node ? "MPI in node + " : "",
                 hc->h.n_nodes);
    else
        snprintf(buf, n, "local + MPI");
}
