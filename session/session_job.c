/* session_job.c: the job of processes and its same-job check (session_job.h). */
#include "session/session_job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/hash.h"

/* An integer environment value in [lo, hi]; else MR_ERR_USAGE naming it. */
static mr_status env_long(const char *name, const char *s, long long lo, long long hi,
                          long long *out, mr_error *err) {
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno || v < lo || v > hi)
        return mr_error_set(err, MR_ERR_USAGE, "%s %s: expected an integer in [%lld, %lld]", name,
                            s, lo, hi);
    *out = v;
    return MR_OK;
}

mr_status mr_session_job_init(int *argc, char ***argv, mr_job *job, mr_error *err) {
    int ranks_per_node = 0;
    const char *rpn = getenv("MIRRORED_RANKS_PER_NODE");
    if (rpn != NULL && rpn[0] != '\0') {
        long long v = 0;
        if (env_long("MIRRORED_RANKS_PER_NODE", rpn, 1, 1 << 20, &v, err) != MR_OK) {
            memset(job, 0, sizeof *job);
            return err->status;
        }
        ranks_per_node = (int)v;
    }
    /* a value that is set but wrong is refused, not replaced by the default */
    const char *timeout = getenv("MIRRORED_COMM_TIMEOUT");
    if (timeout != NULL && timeout[0] != '\0' && mr_comm_parse_timeout(timeout) <= 0.0) {
        memset(job, 0, sizeof *job);
        return mr_error_set(err, MR_ERR_USAGE,
                            "MIRRORED_COMM_TIMEOUT=%s: expected a number of seconds > 0", timeout);
    }
    return mr_job_init(argc, argv, ranks_per_node, mr_comm_default_timeout(), job, err);
}

/* "GPUs", "CPUs" */
static const char *plural(const mr_device_set *set) {
    const mr_backend_kind *kind = mr_devices_kind(set);
    return kind != NULL ? kind->plural : set->kind;
}

/* at most this many agreed settings */
#define MAX_AGREED 32

/* What process p compares: the .cfg text's hash, each agreed setting's. */
typedef struct job_fingerprint {
    uint64_t text, settings[MAX_AGREED];
    char path[240]; /* its .cfg, for the message */
} job_fingerprint;

static void fingerprint(const mr_config *cfg, const char *cfg_path, const mr_session_agreed *a,
                        job_fingerprint *f) {
    memset(f, 0, sizeof *f);
    f->text = mr_fnv1a(cfg->text, strlen(cfg->text), MR_FNV1A_INIT);
    for (size_t i = 0; i < a->n && i < MAX_AGREED; i++) {
        char buf[MR_PATH_MAX + 64];
        a->format(a->user, i, 1, buf, sizeof buf);
        f->settings[i] = mr_fnv1a(buf, strlen(buf), MR_FNV1A_INIT);
    }
    snprintf(f->path, sizeof f->path, "%s", cfg_path);
}

/* Setting i differs between rank p and rank 0: every process gathers its
 * own text of it (a collective, as every process found the same p and i),
 * and the message names both. */
static mr_status differing_setting(const mr_session_agreed *a, mr_job *job, int p, size_t i,
                                   mr_error *err) {
    typedef struct {
        char text[512];
    } setting_text;
    setting_text mine, *all = calloc((size_t)job->size, sizeof *all);
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    a->format(a->user, i, 0, mine.text, sizeof mine.text);
    mr_status st = mr_job_allgather(job, &mine, sizeof mine, all, err);
    if (st == MR_OK)
        st = mr_error_set(err, MR_ERR_USAGE,
                          "rank %d (%s) was started with %s and rank 0 (%s) with %s: every "
                          "process of a job must get the same options",
                          p, job->hosts[p], all[p].text, job->hosts[0], all[0].text);
    free(all);
    return st;
}

mr_status mr_session_check_same_job(mr_job *job, const mr_config *cfg, const char *cfg_path,
                                    const mr_session_agreed *agreed, const mr_device_set *devices,
                                    mr_device_set *sets, mr_error *err) {
    MR_ASSERT(agreed->n <= MAX_AGREED);
    sets[job->rank] = *devices;
    if (job->size == 1) return MR_OK;
    /* every process's devices, for rank 0's start line and summary */
    MR_CHECK(mr_job_allgather(job, devices, sizeof *devices, sets, err));
    job_fingerprint mine, *all = calloc((size_t)job->size, sizeof mine);
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    fingerprint(cfg, cfg_path, agreed, &mine);
    mr_status st = mr_job_allgather(job, &mine, sizeof mine, all, err);
    for (int p = 1; st == MR_OK && p < job->size; p++) {
        if (all[p].text != all[0].text) {
            st = mr_error_set(err, MR_ERR_CONFIG,
                              "rank %d (%s) read %s with other contents than rank 0 (%s) read in "
                              "%s: every process must train the same .cfg (was it edited "
                              "during the launch?)",
                              p, job->hosts[p], all[p].path, job->hosts[0], all[0].path);
            break;
        }
        for (size_t i = 0; i < agreed->n; i++)
            if (all[p].settings[i] != all[0].settings[i]) {
                free(all);
                return differing_setting(agreed, job, p, i, err);
            }
        char word[300];
        if (strcmp(sets[p].kind, sets[0].kind) != 0) /* one communicator joins them all */
            st = mr_error_set(err, MR_ERR_USAGE,
                              "rank %d (%s) trains on %s and rank 0 (%s) on %s: every process of "
                              "a job must use the same kind of device (%s on every one)",
                              p, job->hosts[p], plural(&sets[p]), job->hosts[0], plural(&sets[0]),
                              mr_session_word(agreed->words, MR_SESSION_ARG_DEVICES, sets[0].kind,
                                              word, sizeof word));
    }
    free(all);
    return st;
}
