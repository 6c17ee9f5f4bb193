/* session_replicas.h: the replicas that hold a model's weights between the
 * calls of a session (fit, evaluate, predict, save): made for a key (the
 * devices, the training rows, the batch plan, the seed), with the model's
 * first weights (session_model.h), or the last replicas' weights, state
 * and optimizer slots moved over once a fit has trained them. Relies on
 * strategies/strategy.h. */
#ifndef MR_SESSION_REPLICAS_H
#define MR_SESSION_REPLICAS_H

#include <stdint.h>

#include "session/session_model.h"
#include "strategies/strategy.h"

/* What replicas are built for: another key builds others. */
typedef struct mr_session_key {
    mr_device_set devices;
    int64_t n_train; /* 0: evaluate and predict only */
    int global_batch;
    int64_t seed, max_steps;
} mr_session_key;

/* The replicas of a model (zeroed: none yet). */
typedef struct mr_session_replicas {
    mr_strategy *s; /* NULL: none built yet */
    mr_session_key key;
    /* 1 once a fit has run: the weights are the replicas', not the seed's
     * or the file's, and move to the next replicas */
    int fitted;
    /* where set (not fitted yet): the first weights, read from the file
     * already (the caller's model, kept as long as these replicas), in
     * place of reading path again */
    const mr_model *first;
    /* 1 after a failed fit: the replicas' communicator may stand aborted,
     * so the next call builds fresh ones (with replica 0's weights) */
    int stale;
} mr_session_replicas;

/* 1 if a and b are the same devices (kind, count and ordinals). */
int mr_session_same_devices(const mr_device_set *a, const mr_device_set *b);

/* Makes r->s the replicas of `key` for cfg in job (kept where r->s has
 * that key), with the weights: the last replicas' once a fit has run, else
 * r->first's where set, else the first weights of the model opened from
 * path (source, ck: mr_session_open's), shared by every replica. On
 * failure r is as it was. */
mr_status mr_session_replicas_make(mr_session_replicas *r, const mr_config *cfg,
                                   const mr_session_key *key, mr_job *job, const char *path,
                                   mr_session_source source, const mr_checkpoint *ck,
                                   mr_error *err);

/* Frees the replicas (r zeroed). */
void mr_session_replicas_free(mr_session_replicas *r);

#endif
