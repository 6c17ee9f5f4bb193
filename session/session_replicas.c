/* session_replicas.c: the replicas of a model between calls (session_replicas.h). */
#include "session/session_replicas.h"

#include <string.h>

int mr_session_same_devices(const mr_device_set *a, const mr_device_set *b) {
    if (strcmp(a->kind, b->kind) != 0 || a->count != b->count) return 0;
    for (int i = 0; i < a->count; i++)
        if (a->ordinals[i] != b->ordinals[i]) return 0;
    return 1;
}

static int same_key(const mr_session_key *a, const mr_session_key *b) {
    return mr_session_same_devices(&a->devices, &b->devices) && a->n_train == b->n_train &&
           a->global_batch == b->global_batch && a->seed == b->seed && a->max_steps == b->max_steps;
}

/* n floats of src's memory `from` into dst's `to`, through the host in
 * pieces the models' staging buffers hold. */
static mr_status copy_floats(const mr_model *src, const mr_dfloat *from, mr_model *dst,
                             mr_dfloat *to, int64_t n, mr_error *err) {
    if (from == NULL || to == NULL || n <= 0) return MR_OK;
    int64_t piece = n;
    if (src->host_floats > 0 && (int64_t)src->host_floats < piece)
        piece = (int64_t)src->host_floats;
    if (dst->host_floats > 0 && (int64_t)dst->host_floats < piece)
        piece = (int64_t)dst->host_floats;
    for (int64_t at = 0; at < n; at += piece) {
        const size_t c = (size_t)(n - at < piece ? n - at : piece);
        const float *h;
        MR_CHECK(mr_model_read(src, mr_dfloat_at_c(from, at), c, &h, err));
        mr_dfloat *t = mr_dfloat_at(to, at);
        float *w = mr_model_host_for(dst, t);
        memmove(w, h, c * sizeof(float));
        MR_CHECK(mr_model_write(dst, t, w, c, err));
    }
    return MR_OK;
}

/* The weights, state and optimizer slots of s into d (the same model). */
static mr_status copy_model(const mr_model *s, mr_model *d, mr_error *err) {
    MR_CHECK(copy_floats(s, s->params, d, d->params, s->n_params, err));
    MR_CHECK(copy_floats(s, s->state, d, d->state, s->n_state, err));
    for (int k = 0; k < 2; k++)
        MR_CHECK(copy_floats(s, s->slots[k], d, d->slots[k], s->n_params, err));
    return MR_OK;
}

mr_status mr_session_replicas_make(mr_session_replicas *r, const mr_config *cfg,
                                   const mr_session_key *key, mr_job *job, const char *path,
                                   mr_session_source source, const mr_checkpoint *ck,
                                   mr_error *err) {
    if (r->s != NULL && same_key(&r->key, key) && !r->stale) return MR_OK;
    const mr_strategy_opts opts = {.devices = key->devices,
                                   .job = job,
                                   .seed = (uint64_t)key->seed,
                                   .max_steps = key->max_steps,
                                   .bucket_floats = MR_BUCKETS_AUTO};
    mr_strategy *s = NULL;
    MR_CHECK(mr_strategy_create(cfg, &opts, key->n_train, &s, err));
    int share = 1;
    mr_model *to = mr_strategy_replica(s, 0);
    mr_status st = r->fitted  ? copy_model(mr_strategy_replica(r->s, 0), to, err)
                   : r->first ? copy_model(r->first, to, err)
                              : mr_session_first_weights(path, source, ck, cfg, to, &share, err);
    if (st == MR_OK && share) st = mr_strategy_sync_model(s, err);
    if (st != MR_OK) {
        mr_strategy_destroy(s);
        return st;
    }
    mr_strategy_destroy(r->s);
    r->s = s;
    r->key = *key;
    r->stale = 0;
    return MR_OK;
}

void mr_session_replicas_free(mr_session_replicas *r) {
    mr_strategy_destroy(r->s);
    *r = (mr_session_replicas){0};
}
