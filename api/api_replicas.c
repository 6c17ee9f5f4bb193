/* api_replicas.c: the replicas that hold a model's weights between calls
 * of the public C API (api_internal.h): made for a key (devices, batch
 * plan, seed), with the model's first weights (session/session_model.h),
 * or the last strategy's weights, state and optimizer slots moved over. */
#include <string.h>

#include "api/api_internal.h"
#include "session/session_devices.h"

mr_status api_devices(mirrored_model *m, const char *spec, int for_fit, mr_device_set *set,
                      mr_error *err) {
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    mr_device_env env;
    char conflict[sizeof err->msg];
    MR_CHECK(mr_devices_job_env(j, &env, conflict, sizeof conflict, err));
    spec = spec != NULL ? spec : "auto";
    *set = (mr_device_set){0};
    if (for_fit) return mr_session_choose_devices(spec, j, &env, &m->cfg, NULL, set, err);
    return mr_session_parse_devices(spec, &env, NULL, set, err);
}

static int same_devices(const mr_device_set *a, const mr_device_set *b) {
    if (strcmp(a->kind, b->kind) != 0 || a->count != b->count) return 0;
    for (int i = 0; i < a->count; i++)
        if (a->ordinals[i] != b->ordinals[i]) return 0;
    return 1;
}

static int same_key(const api_key *a, const api_key *b) {
    return same_devices(&a->devices, &b->devices) && a->n_train == b->n_train &&
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

/* The weights, state and optimizer slots of a's replica 0 into b's. */
static mr_status move_weights(mr_strategy *a, mr_strategy *b, mr_error *err) {
    const mr_model *s = mr_strategy_replica(a, 0);
    mr_model *d = mr_strategy_replica(b, 0);
    MR_CHECK(copy_floats(s, s->params, d, d->params, s->n_params, err));
    MR_CHECK(copy_floats(s, s->state, d, d->state, s->n_state, err));
    for (int k = 0; k < 2; k++)
        MR_CHECK(copy_floats(s, s->slots[k], d, d->slots[k], s->n_params, err));
    return MR_OK;
}

/* The model's first weights into s's replica 0 (mr_session_first_weights);
 * *loaded: 1 where they are to be shared. */
static mr_status first_weights(mirrored_model *m, mr_strategy *s, int *loaded, mr_error *err) {
    return mr_session_first_weights(m->path, m->source, &m->ck, &m->cfg, mr_strategy_replica(s, 0),
                                    loaded, err);
}

mr_status api_strategy(mirrored_model *m, const api_key *key, mr_error *err) {
    if (m->s != NULL && same_key(&m->key, key)) return MR_OK;
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    const mr_strategy_opts opts = {.devices = key->devices,
                                   .job = j,
                                   .seed = (uint64_t)key->seed,
                                   .max_steps = key->max_steps};
    mr_strategy *s = NULL;
    MR_CHECK(mr_strategy_create(&m->cfg, &opts, key->n_train, &s, err));
    int share = 1;
    mr_status st = m->fitted ? move_weights(m->s, s, err) : first_weights(m, s, &share, err);
    if (st == MR_OK && share) st = mr_strategy_sync_model(s, err);
    if (st != MR_OK) {
        mr_strategy_destroy(s);
        return st;
    }
    mr_strategy_destroy(m->s);
    m->s = s;
    m->key = *key;
    return MR_OK;
}

mr_status api_eval_strategy(mirrored_model *m, const char *spec, mr_error *err) {
    if (m->s != NULL && (spec == NULL || strcmp(spec, "auto") == 0)) return MR_OK;
    mr_device_set set;
    MR_CHECK(api_devices(m, spec, 0, &set, err));
    if (m->s != NULL && same_devices(&m->key.devices, &set)) return MR_OK;
    const api_key key = {
        .devices = set, .global_batch = m->cfg.net.global_batch, .seed = m->cfg.net.seed};
    return api_strategy(m, &key, err);
}
