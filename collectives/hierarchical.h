/* hierarchical.h: the communicator for a job whose processes drive several
 * replicas each, or that spans several nodes.
 *
 * An all-reduce runs in levels: the process's replica threads sum through
 * the local communicator; then replica 0 of each process (the only thread
 * that calls MPI) sums the process totals across the processes of its node,
 * then across nodes between one leader process per node, and sends the
 * result back down the node; then a local broadcast hands it to the other
 * threads. Each level sums in a fixed order, so the result repeats bitwise
 * (though it is associated differently from a flat sum over all replicas).
 * Small collectives (doubles, barrier, broadcast) go through one flat MPI
 * communicator over all processes. MPI-free itself: it composes
 * communicators made elsewhere (job_mpi.c). */
#ifndef MR_HIERARCHICAL_H
#define MR_HIERARCHICAL_H

#include "collectives/comm.h"

typedef struct mr_hierarchy {
    mr_comm *local;   /* this process's replica threads (size L >= 1) */
    mr_comm *node;    /* one participant per process of this node; NULL if it is alone */
    mr_comm *cross;   /* one participant per node, on node leaders only; NULL elsewhere */
    mr_comm *world;   /* one participant per process of the job */
    int n_nodes;      /* nodes of the job (> 1: results come back down the node) */
    int world_size;   /* replicas of the job */
    int world_offset; /* job-wide index of this process's replica 0 */
} mr_hierarchy;

/* Takes ownership of the communicators in h (also on failure). */
mr_status mr_comm_hierarchical_create(const mr_hierarchy *h, mr_comm **out, mr_error *err);

/* "local + MPI" or "local + MPI in node + MPI across 2 nodes", for the
 * start line; writes at most n bytes. */
void mr_comm_hierarchical_describe(const mr_comm *c, char *buf, size_t n);

#endif
