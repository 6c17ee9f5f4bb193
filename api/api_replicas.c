/* api_replicas.c: the devices a call of the public C API asks for and the
 * replicas that hold a model's weights between calls (api_internal.h),
 * over session/session_replicas.h. */
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

mr_status api_strategy(mirrored_model *m, const mr_session_key *key, mr_error *err) {
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    return mr_session_replicas_make(&m->reps, &m->cfg, key, j, m->path, m->source, &m->ck, err);
}
mr_status api_eval_strategy(mirrored_model *m, const char *spec, int64_t batch_size,
                            mr_error *err) {
    /* the replicas there are (fresh ones of the same key after a failed fit) */
    const mr_session_key now = m->reps.key;
    const int same_batch = batch_size == 0 || batch_size == now.global_batch;
    if (m->reps.s != NULL && same_batch && (spec == NULL || strcmp(spec, "auto") == 0))
        return m->reps.stale ? api_strategy(m, &now, err) : MR_OK;
    mr_device_set set;
    if (m->reps.s != NULL && (spec == NULL || strcmp(spec, "auto") == 0))
        set = now.devices; /* another batch on the same devices */
    else
        MR_CHECK(api_devices(m, spec, 0, &set, err));
    if (m->reps.s != NULL && same_batch && mr_session_same_devices(&now.devices, &set))
        return m->reps.stale ? api_strategy(m, &now, err) : MR_OK;
    mr_session_key key = {
        .devices = set, .global_batch = m->cfg.net.global_batch, .seed = m->cfg.net.seed};
    if (batch_size == 0) return api_strategy(m, &key, err);
    /* Keras's batch_size: the strategy reads the .cfg's, for this call */
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    MR_CHECK(mr_session_check_batch(batch_size, &m->cfg, &set, j, NULL, err));
    const int kept = m->cfg.net.global_batch;
    m->cfg.net.global_batch = (int)batch_size;
    key.global_batch = batch_size;
    const mr_status st = api_strategy(m, &key, err);
    m->cfg.net.global_batch = kept;
    return st;
}
