/* comm.c: the communicator wrappers (argument checks, then the vtable). */
#include "collectives/comm.h"

#include <math.h>
#include <stdlib.h>

static mr_status check_rank(const mr_comm *c, int rank, const char *what, mr_error *err) {
    if (rank < 0 || rank >= c->size)
        return mr_error_set(err, MR_ERR_USAGE, "%s %s: rank %d outside 0..%d", mr_comm_name(c),
                            what, rank, c->size - 1);
    return MR_OK;
}

mr_status mr_comm_allreduce_sum(mr_comm *c, int rank, mr_dfloat *buf, size_t n, mr_error *err) {
    MR_CHECK(check_rank(c, rank, "all-reduce", err));
    return c->vt->allreduce_sum(c, rank, buf, n, err);
}

mr_status mr_comm_allreduce_sum_f64(mr_comm *c, int rank, double *buf, size_t n, mr_error *err) {
    MR_CHECK(check_rank(c, rank, "all-reduce", err));
    return c->vt->allreduce_sum_f64(c, rank, buf, n, err);
}

mr_status mr_comm_broadcast(mr_comm *c, int rank, mr_dfloat *buf, size_t n, int root,
                            mr_error *err) {
    MR_CHECK(check_rank(c, rank, "broadcast", err));
    if (root < 0 || root >= c->world_size)
        return mr_error_set(err, MR_ERR_USAGE, "%s broadcast: root %d outside 0..%d",
                            mr_comm_name(c), root, c->world_size - 1);
    return c->vt->broadcast(c, rank, buf, n, root, err);
}

mr_status mr_comm_barrier(mr_comm *c, int rank, mr_error *err) {
    MR_CHECK(check_rank(c, rank, "barrier", err));
    return c->vt->barrier(c, rank, err);
}

mr_status mr_comm_allreduce_start(mr_comm *c, int rank, mr_dfloat *buf, size_t n, mr_error *err) {
    MR_CHECK(check_rank(c, rank, "all-reduce", err));
    if (c->vt->allreduce_start == NULL) return c->vt->allreduce_sum(c, rank, buf, n, err);
    return c->vt->allreduce_start(c, rank, buf, n, err);
}

mr_status mr_comm_progress(mr_comm *c, int rank, mr_error *err) {
    MR_CHECK(check_rank(c, rank, "progress", err));
    return c->vt->progress ? c->vt->progress(c, rank, err) : MR_OK;
}

mr_status mr_comm_wait_all(mr_comm *c, int rank, mr_error *err) {
    MR_CHECK(check_rank(c, rank, "wait", err));
    return c->vt->wait_all ? c->vt->wait_all(c, rank, err) : MR_OK;
}

mr_status mr_comm_join_all(mr_comm *c, int rank, mr_error *err) {
    MR_CHECK(check_rank(c, rank, "wait", err));
    if (c->vt->join_all != NULL) return c->vt->join_all(c, rank, err);
    return c->vt->wait_all ? c->vt->wait_all(c, rank, err) : MR_OK;
}

mr_status mr_comm_settle(mr_comm *c, int rank, mr_status waited, mr_error *err) {
    if (rank < 0 || rank >= c->size) /* the wait's own failure stands */
        return waited != MR_OK ? waited : check_rank(c, rank, "wait", err);
    return c->vt->settle ? c->vt->settle(c, rank, waited, err) : waited;
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

int mr_comm_is_async(const mr_comm *c) {
    return c->vt->allreduce_start != NULL;
}

double mr_comm_parse_timeout(const char *s) {
    if (s == NULL) return -1.0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v > 0.0) || !isfinite(v)) return -1.0;
    return v;
}

double mr_comm_default_timeout(void) {
    double v = mr_comm_parse_timeout(getenv("MIRRORED_COMM_TIMEOUT"));
    return v > 0.0 ? v : 600.0;
}
