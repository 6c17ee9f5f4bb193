/* api_weights.c: mirrored_model_get_weight, mirrored_model_set_weight
 * and mirrored_model_load_weights (include/mirrored.h), Keras's
 * get_weights and set_weights one array at a time, and load_weights, on the weights as they stand:
 * a file's host copy where no call has built replicas, else replica 0's (every replica's after a
 * set). */
#include <stdio.h>
#include <string.h>

#include "api/api_internal.h"
#include "models/keras.h"

/* The model that holds the weights now: the file's host copy, or replica
 * 0 (replicas built where there are none; during the fit's epoch
 * callback, the fit's own). */
static mr_status weights_of(mirrored_model *m, mr_model **out, mr_error *err) {
    if (m->reps.s == NULL && m->host_be != NULL) {
        *out = &m->host;
        return MR_OK;
    }
    if (api_in_epoch_callback() != m) MR_CHECK(api_eval_strategy(m, NULL, 0, err));
    *out = mr_strategy_replica(m->reps.s, 0);
    return MR_OK;
}

/* Weight `index` in Keras's order (NULL past the end); *count: how many. */
static mr_weight *weight_at(mr_model *md, int index, int *count) {
    int order[MR_MAX_LAYERS];
    mr_keras_layer_order(md, order);
    mr_weight *found = NULL;
    int n = 0;
    for (int k = 0; k < md->n_layers; k++) {
        mr_layer *l = &md->layers[order[k]];
        for (int w = 0; w < l->n_weights; w++, n++)
            if (n == index) found = &l->w[w];
    }
    *count = n;
    return found;
}

static mirrored_status get_weight(mirrored_model *m, int index, mirrored_array *a, float *out,
                                  int64_t room, int *count, mirrored_error *err) {
    mr_error e = {0};
    mr_model *md;
    if (weights_of(m, &md, &e) != MR_OK) return api_fail(err, &e);
    int n;
    const mr_weight *w = weight_at(md, index, &n);
    if (count != NULL) *count = n;
    if (a == NULL) return api_ok(err);
    if (w == NULL) return api_usage(err, "%s: weight %d: the model has %d", m->name, index, n);
    *a = (mirrored_array){.dtype = MIRRORED_FLOAT32, .ndim = w->rank};
    for (int i = 0; i < w->rank; i++)
        a->shape[i] = w->dims[i];
    if (out == NULL) return api_ok(err);
    if (room < w->size)
        return api_usage(err, "%s: weight %d (%s): %lld floats, out has room for %lld", m->name,
                         index, w->name, (long long)w->size, (long long)room);
    const float *host;
    if (mr_model_read(md, w->data, (size_t)w->size, &host, &e) != MR_OK) return api_fail(err, &e);
    memcpy(out, host, (size_t)w->size * sizeof(float));
    return api_ok(err);
}

/* a's shape is w's, float32, with data */
static int same_shape(const mirrored_array *a, const mr_weight *w) {
    if (a->dtype != MIRRORED_FLOAT32 || a->data == NULL || a->ndim != w->rank) return 0;
    for (int i = 0; i < w->rank; i++)
        if (a->shape[i] != w->dims[i]) return 0;
    return 1;
}

static mirrored_status set_weight(mirrored_model *m, int index, const mirrored_array *a,
                                  mirrored_error *err) {
    mr_error e = {0};
    mr_model *md;
    if (weights_of(m, &md, &e) != MR_OK) return api_fail(err, &e);
    int n;
    mr_weight *w = weight_at(md, index, &n);
    if (w == NULL) return api_usage(err, "%s: weight %d: the model has %d", m->name, index, n);
    if (!same_shape(a, w)) {
        char shape[64] = "";
        for (int i = 0, at = 0; i < w->rank && at < (int)sizeof shape; i++)
            at += snprintf(shape + at, sizeof shape - (size_t)at, i ? ", %d" : "%d", w->dims[i]);
        return api_usage(err, "%s: weight %d (%s): float32 of shape (%s) is taken", m->name, index,
                         w->name, shape);
    }
    float *host = mr_model_host_for(md, w->data);
    memcpy(host, a->data, (size_t)w->size * sizeof(float));
    if (mr_model_write(md, w->data, host, (size_t)w->size, &e) != MR_OK) return api_fail(err, &e);
    /* every replica holds replica 0's weights again, and the next
     * replicas (other devices, a batch) take them, not the seed's */
    if (md != &m->host && mr_strategy_sync_model(m->reps.s, &e) != MR_OK) return api_fail(err, &e);
    if (md != &m->host) m->reps.fitted = 1;
    return api_ok(err);
}

/* Keras's load_weights: a .weights.h5 (or a Keras .h5, a .keras, a
 * checkpoint) into the weights as they stand, as mr_keras_load pairs a
 * file's weights with a model's; every replica gets them. */
static mirrored_status load_weights(mirrored_model *m, const char *path, mirrored_error *err) {
    mr_error e = {0};
    mr_model *md = NULL;
    mr_status st = weights_of(m, &md, &e);
    if (st == MR_OK) st = mr_keras_load(path, md, 0, NULL, &e);
    /* under mpirun: one process's missing or damaged file fails them all */
    st = api_agree(st, &e);
    if (st == MR_OK && md != &m->host) st = mr_strategy_sync_model(m->reps.s, &e);
    if (st == MR_OK && md != &m->host) m->reps.fitted = 1; /* as set_weight */
    return st == MR_OK ? api_ok(err) : api_fail(err, &e);
}

MIRRORED_API mirrored_status mirrored_model_load_weights(mirrored_model *m, const char *path,
                                                         mirrored_error *err) {
    if (m == NULL || path == NULL)
        return api_usage(err, "mirrored_model_load_weights: model or path is NULL");
    if (api_enter(m, "load_weights", err) != MIRRORED_OK) return MIRRORED_ERR_USAGE;
    const mirrored_status st = load_weights(m, path, err);
    api_leave(m);
    return st;
}

MIRRORED_API mirrored_status mirrored_model_get_weight(mirrored_model *m, int index,
                                                       mirrored_array *w, float *out, int64_t room,
                                                       int *count, mirrored_error *err) {
    if (m == NULL) return api_usage(err, "mirrored_model_get_weight: model is NULL");
    if (api_in_epoch_callback() == m) return get_weight(m, index, w, out, room, count, err);
    if (api_enter(m, "get_weight", err) != MIRRORED_OK) return MIRRORED_ERR_USAGE;
    const mirrored_status st = get_weight(m, index, w, out, room, count, err);
    api_leave(m);
    return st;
}

MIRRORED_API mirrored_status mirrored_model_set_weight(mirrored_model *m, int index,
                                                       const mirrored_array *w,
                                                       mirrored_error *err) {
    if (m == NULL || w == NULL)
        return api_usage(err, "mirrored_model_set_weight: model or array is NULL");
    if (api_enter(m, "set_weight", err) != MIRRORED_OK) return MIRRORED_ERR_USAGE;
    const mirrored_status st = set_weight(m, index, w, err);
    api_leave(m);
    return st;
}
