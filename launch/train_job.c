/* train_job.c: what every process of a job must agree on (train_job.h). */
#include "launch/train_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/hash.h"

/* 1: the replicas of set's kind are threads on the cores (the CPU), so
 * they are numbered across the job, in rank order; 0: they are devices,
 * named by their ordinal on their node (GPUs). */
int mr_train_numbered_across_job(const mr_device_set *set) {
    const mr_backend_kind *kind = mr_devices_kind(set);
    return kind != NULL && kind->discover == NULL;
}

/* "GPUs", "CPUs" */
static const char *plural(const mr_device_set *set) {
    const mr_backend_kind *kind = mr_devices_kind(set);
    return kind != NULL ? kind->plural : set->kind;
}

/* --devices auto with a global batch fixed by the .cfg: the most replicas,
 * up to one per core, over which the global batch divides evenly (on every
 * process alike, so that the job's total divides too). */
int mr_train_auto_replicas(const mr_config *cfg, int processes, int cores) {
    const mr_net_cfg *net = &cfg->net;
    if (net->global_batch <= 0 || net->global_batch % net->accumulate != 0) return cores;
    int per = net->global_batch / net->accumulate;
    for (int c = cores; c > 1; c--)
        if (per % (c * processes) == 0) return c;
    return 1;
}

/* Every process must train the same model with the same settings (a .cfg
 * edited while mpirun started the processes, or different files on two
 * nodes, would train different models or wait in different collectives):
 * the .cfg text and the options that change the model or the sequence of
 * collectives are hashed and compared. The same verdict on every process. */
mr_status mr_train_check_same_job(const char *cfg_path, mr_job *job, const mr_config *cfg,
                                  const mr_strategy_opts *opts, mr_device_set *sets,
                                  mr_error *err) {
    sets[job->rank] = opts->devices;
    if (job->size == 1) return MR_OK;
    /* every process's devices, for rank 0's start line and summary */
    MR_CHECK(mr_job_allgather(job, &opts->devices, sizeof opts->devices, sets, err));
    struct {
        uint64_t text, settings;
        char path[240];
    } mine = {0}, *all = calloc((size_t)job->size, sizeof mine);
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    mine.text = mr_fnv1a(cfg->text, strlen(cfg->text), MR_FNV1A_INIT);
    long long settings[] = {cfg->net.epochs, cfg->net.seed, opts->check_sync,
                            (long long)opts->bucket_floats};
    mine.settings = mr_fnv1a(settings, sizeof settings, MR_FNV1A_INIT);
    snprintf(mine.path, sizeof mine.path, "%s", cfg_path);
    mr_status st = mr_job_allgather(job, &mine, sizeof mine, all, err);
    for (int p = 1; st == MR_OK && p < job->size; p++) {
        if (all[p].text != all[0].text)
            st = mr_error_set(err, MR_ERR_CONFIG,
                              "rank %d (%s) read %s with other contents than rank 0 (%s) read in "
                              "%s: every process must train the same .cfg (was it edited "
                              "during the launch?)",
                              p, job->hosts[p], all[p].path, job->hosts[0], all[0].path);
        else if (all[p].settings != all[0].settings)
            st = mr_error_set(err, MR_ERR_USAGE,
                              "rank %d (%s) was started with other --epochs, --seed, "
                              "--check-sync or --bucket-mb than rank 0 (%s)",
                              p, job->hosts[p], job->hosts[0]);
        else if (strcmp(sets[p].kind, sets[0].kind) != 0) /* one communicator joins them all */
            st = mr_error_set(err, MR_ERR_USAGE,
                              "rank %d (%s) trains on %s and rank 0 (%s) on %s: every process of "
                              "a job must use the same kind of device (--devices)",
                              p, job->hosts[p], plural(&sets[p]), job->hosts[0], plural(&sets[0]));
    }
    free(all);
    return st;
}
