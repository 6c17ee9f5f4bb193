/* comm.c: the communicator wrappers (argument checks, then the vtable). */
#include "comm.h"

#include <stdlib.h>

static mr_status check_rank(const mr_comm *c, int rank, const char *what, mr_error *err) {
    if (rank < 0 || rank >= c->size)
        return mr_error_set(err, MR_ERR_USAGE, "%s %s: rank %d outside 0..%d", mr_comm_name(c),
                            what, rank, c->size - 1);
    return MR_OK;
}

mr_status mr_comm_allreduce_sum(mr_comm *c, int rank, float *buf, size_t n, mr_error *err) {
    MR_CHECK(check_rank(c, rank, "all-reduce", err));
    return c->vt->allreduce_sum(c, rank, buf, n, err);
}

mr_status mr_comm_broadcast(mr_comm *c, int rank, float *buf, size_t n, int root, mr_error *err) {
    MR_CHECK(check_rank(c, rank, "broadcast", err));
    if (root < 0 || root >= c->size)
        return mr_error_set(err, MR_ERR_USAGE, "%s broadcast: root %d outside 0..%d",
                            mr_comm_name(c), root, c->size - 1);
    return c->vt->broadcast(c, rank, buf, n, root, err);
}

mr_status mr_comm_barrier(mr_comm *c, int rank, mr_error *err) {
    MR_CHECK(check_rank(c, rank, "barrier", err));
    return c->vt->barrier(c, rank, err);
}

void mr_comm_abort(mr_comm *c, int rank) {
    if (c != NULL && c->vt->abort != NULL) c->vt->abort(c, rank);
}

void mr_comm_destroy(mr_comm *c) {
    if (c != NULL) c->vt->destroy(c);
}

const char *mr_comm_name(const mr_comm *c) {
    return c->vt->name;
}

double mr_comm_default_timeout(void) {
    const char *s = getenv("MIRRORED_COMM_TIMEOUT");
    if (s != NULL) {
        char *end;
        double v = strtod(s, &end);
        if (end != s && *end == '\0' && v > 0.0) return v;
    }
    return 600.0;
}
