/* check_sync.c: --check-sync (replicas compare their weights' hashes
 * through the communicator) and the weights' hash of a model (check_sync.h).
 * Relies on the model's host access to read a replica's device memory. */
#include "strategies/check_sync.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/hash.h"
#include "strategies/strategy_impl.h"

/* --check-sync: every replica hashes each of its weights (parameters and
 * state, read through the model: in place on the CPU, copied from a GPU);
 * the hashes travel through the communicator, 16 bits per float in a row
 * of zeros per replica (a sum of zeros and one integer below 2^16 is
 * exact), so replicas of other processes are compared without reading
 * their memory. The rows go through device memory, as a communicator for
 * the replicas' device takes it. Every replica reaches the same verdict:
 * global replica 0 reports the first replica and weight that differ, the
 * others stop with MR_ERR_ABORTED (an echo: they print nothing). */
mr_status strategy_check_sync(replica *rep, int64_t step) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    int nw = 0;
    for (int i = 0; i < m->n_layers; i++)
        nw += m->layers[i].n_weights;
    const size_t row = (size_t)nw * 4, n = (size_t)s->R * row;
    /* host staging of the context (pinned on a GPU): a copy from or to
     * pageable memory would block inside the CUDA runtime, past the timed
     * wait for a peer that never comes */
    if (rep->sync_host == NULL) {
        rep->sync_host = mr_backend_alloc_host(rep->be, sizeof(float) * n);
        rep->sync_dev = mr_backend_alloc_floats(rep->be, n);
        rep->sync_floats = n;
        if (rep->sync_host == NULL || rep->sync_dev == NULL)
            return mr_error_set(&rep->err, MR_ERR_NOMEM, "out of memory for --check-sync");
    }
    MR_ASSERT(rep->sync_floats == n);
    float *all = rep->sync_host;
    mr_dfloat *dall = rep->sync_dev;
    float *mine = all + (size_t)rep->g * row;
    mr_status st = MR_OK;
    for (int i = 0, k = 0; st == MR_OK && i < m->n_layers; i++)
        for (int w = 0; st == MR_OK && w < m->layers[i].n_weights; w++, k++) {
            const mr_weight *wt = &m->layers[i].w[w];
            const float *data;
            st = mr_model_read(m, wt->data, (size_t)wt->size, &data, &rep->err);
            if (st != MR_OK) break;
            uint64_t h = mr_fnv1a(data, sizeof(float) * (size_t)wt->size, MR_FNV1A_INIT);
            for (int d = 0; d < 4; d++)
                mine[k * 4 + d] = (float)((h >> (16 * d)) & 0xFFFF);
        }
    if (st == MR_OK) st = mr_backend_to_device(rep->be, dall, all, sizeof(float) * n, &rep->err);
    if (st == MR_OK) st = mr_comm_allreduce_sum(s->comm, rep->r, dall, n, &rep->err);
    if (st == MR_OK) st = mr_backend_to_host(rep->be, all, dall, sizeof(float) * n, &rep->err);
    for (int q = 1; st == MR_OK && q < s->R; q++) {
        const float *other = all + (size_t)q * row;
        if (memcmp(other, all, sizeof(float) * row) == 0) continue;
        if (rep->g != 0) {
            st = mr_error_set(&rep->err, MR_ERR_ABORTED,
                              "replica %d: stopped by --check-sync (replica 0 reports)", rep->g);
            break;
        }
        for (int i = 0, k = 0; i < m->n_layers; i++)
            for (int w = 0; w < m->layers[i].n_weights; w++, k++)
                if (st == MR_OK && memcmp(other + k * 4, all + k * 4, sizeof(float) * 4) != 0)
                    st =
                        mr_error_set(&rep->err, MR_ERR_RUNTIME,
                                     "--check-sync: after step %lld replica %d differs from "
                                     "replica 0 in layer %s (%s)",
                                     (long long)step, q, m->layers[i].name, m->layers[i].w[w].name);
    }
    return st;
}

/* FNV-1a over n floats of the model's device memory p, read in pieces the
 * model's host staging holds (at once where its memory is host memory). */
static mr_status hash_floats(const mr_model *m, const mr_dfloat *p, int64_t n, uint64_t *h,
                             mr_error *err) {
    int64_t step = m->be->host_memory ? n : (int64_t)m->host_floats;
    for (int64_t i = 0; i < n; i += step) {
        int64_t k = n - i < step ? n - i : step;
        const float *host;
        MR_CHECK(mr_model_read(m, mr_dfloat_at_c(p, i), (size_t)k, &host, err));
        *h = mr_fnv1a(host, sizeof(float) * (size_t)k, *h);
    }
    return MR_OK;
}

mr_status mr_params_hash(const mr_model *m, uint64_t *h, mr_error *err) {
    *h = MR_FNV1A_INIT;
    MR_CHECK(hash_floats(m, m->params, m->n_params, h, err));
    if (m->state) MR_CHECK(hash_floats(m, m->state, m->n_state, h, err));
    return MR_OK;
}
