/* comm.h: communicators over flat float buffers.
 *
 * A communicator joins `size` participants (replica threads of one process,
 * MPI ranks, GPUs). Every participant calls the same collectives in the same
 * order with buffers of the same length; each call names the caller's rank.
 * collectives/ knows nothing of models: it moves float buffers.
 *
 * No collective waits forever: a participant that does not arrive within the
 * communicator's timeout makes the others return MR_ERR_RUNTIME with a message
 * that says which collective was waiting for which ranks. A participant that
 * fails elsewhere calls mr_comm_abort so the others stop waiting at once. */
#ifndef MR_COMM_H
#define MR_COMM_H

#include <stddef.h>

#include "../runtime/error.h"

typedef struct mr_comm mr_comm;

/* The interface every communicator implements. Callers use the mr_comm_*
 * wrappers below, never the slots directly. */
typedef struct mr_comm_vtable {
    /* Short name for logs: "local", "mpi", "nccl", "hierarchical". */
    const char *name;
    /* In place: buf (n floats) becomes the element-wise sum over all ranks.
     * The summation order is fixed, so every rank gets bitwise the same result
     * and two runs repeat bitwise. */
    mr_status (*allreduce_sum)(mr_comm *c, int rank, float *buf, size_t n, mr_error *err);
    /* In place: every rank's buf (n floats) becomes root's buf. */
    mr_status (*broadcast)(mr_comm *c, int rank, float *buf, size_t n, int root, mr_error *err);
    /* Returns once every rank has called it. */
    mr_status (*barrier)(mr_comm *c, int rank, mr_error *err);
    /* Makes every pending and future collective return MR_ERR_RUNTIME. May be NULL. */
    void (*abort)(mr_comm *c, int rank);
    /* Frees the communicator (called once, after all ranks are done). */
    void (*destroy)(mr_comm *c);
} mr_comm_vtable;

struct mr_comm {
    const mr_comm_vtable *vt;
    int size;         /* participants */
    double timeout_s; /* how long a collective waits for the others before failing */
};

/* Wrappers: check arguments (rank in range, root in range) then dispatch. */
mr_status mr_comm_allreduce_sum(mr_comm *c, int rank, float *buf, size_t n, mr_error *err);
mr_status mr_comm_broadcast(mr_comm *c, int rank, float *buf, size_t n, int root, mr_error *err);
mr_status mr_comm_barrier(mr_comm *c, int rank, mr_error *err);
void mr_comm_abort(mr_comm *c, int rank);
void mr_comm_destroy(mr_comm *c);
const char *mr_comm_name(const mr_comm *c);

/* Default collective timeout in seconds: MIRRORED_COMM_TIMEOUT from the
 * environment if set and valid, else 600. */
double mr_comm_default_timeout(void);

#endif
