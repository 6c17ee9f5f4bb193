/* session_devices.c: the devices of a run on this process (session_devices.h). */
#include "session/session_devices.h"

#include <stdio.h>
#include <string.h>

int mr_session_numbered_across_job(const mr_device_set *set) {
    const mr_backend_kind *kind = mr_devices_kind(set);
    return kind != NULL && kind->discover == NULL;
}

int mr_session_auto_replicas(const mr_config *cfg, int processes, int cores) {
    const mr_net_cfg *net = &cfg->net;
    if (net->global_batch <= 0 || net->global_batch % net->accumulate != 0) return cores;
    int per = net->global_batch / net->accumulate;
    for (int c = cores; c > 1; c--)
        if (per % (c * processes) == 0) return c;
    return 1;
}

mr_status mr_session_check_batch(int64_t batch_size, const mr_config *cfg, const mr_device_set *d,
                                 const mr_job *job, const mr_session_words *words, mr_error *err) {
    /* several processes may hold different counts ("auto" on nodes of
     * other sizes): the job's total is the strategy's to check */
    if (job->size > 1) return MR_OK;
    const int64_t replicas = d->count;
    const int64_t per_update = replicas * cfg->net.accumulate;
    char value[32], word[128], who[96];
    snprintf(value, sizeof value, "%lld", (long long)batch_size);
    mr_session_word(words, MR_SESSION_ARG_BATCH_SIZE, value, word, sizeof word);
    snprintf(who, sizeof who, "%lld replica%s", (long long)replicas, replicas > 1 ? "s" : "");
    const char *acc = cfg->net.accumulate > 1 ? " x accumulate micro-batches" : "";
    if (batch_size < per_update)
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s is smaller than %s%s: each replica needs at least one example",
                            word, who, acc);
    if (batch_size % per_update != 0)
        return mr_error_set(err, MR_ERR_USAGE, "%s does not divide evenly over %s%s", word, who,
                            acc);
    return MR_OK;
}

mr_status mr_session_parse_devices(const char *spec, const mr_device_env *env,
                                   const mr_session_words *words, mr_device_set *d, mr_error *err) {
    /* strategies/ words its refusals with the argument as the face names it */
    const mr_session_words *w = words != NULL ? words : &mr_session_keras_words;
    return mr_devices_parse(spec, env, w->arg[MR_SESSION_ARG_DEVICES], d, err);
}

mr_status mr_session_choose_devices(const char *spec, const mr_job *job, const mr_device_env *env,
                                    const mr_config *cfg, const mr_session_words *words,
                                    mr_device_set *d, mr_error *err) {
    MR_CHECK(mr_session_parse_devices(spec, env, words, d, err));
    if (mr_session_numbered_across_job(d) && strcmp(spec, "auto") == 0) {
        d->count = mr_session_auto_replicas(cfg, job->size, d->count);
        for (int i = 0; i < d->count; i++)
            d->ordinals[i] = i;
    }
    if (job->size > 1 && mr_session_numbered_across_job(d) && d->count > job->cores) {
        char why[128], asked[300], instead[300];
        if (job->bound || job->local_size == 1)
            snprintf(why, sizeof why, "its binding");
        else
            snprintf(why, sizeof why, "%d cores of the node shared by %d processes",
                     job->node_cores, job->local_size);
        return mr_error_set(
            err, MR_ERR_USAGE,
            "%s: this process has %d core%s (%s); use %s, at most cpu:%d, or fewer processes per "
            "node",
            mr_session_word(words, MR_SESSION_ARG_DEVICES, spec, asked, sizeof asked), job->cores,
            job->cores == 1 ? "" : "s", why,
            mr_session_word(words, MR_SESSION_ARG_DEVICES, "auto", instead, sizeof instead),
            job->cores);
    }
    return MR_OK;
}
