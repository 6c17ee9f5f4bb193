/* train_job.c: what every process of a job must agree on (train_job.h). */
#include "launch/train_job.h"

#include <stddef.h>
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

/* The options that change what the job computes or which collectives it
 * runs, in the order they are compared: every process must get them alike.
 * The others may differ between processes: the outputs (--metrics, --json,
 * --log, --save, --keep: the lead process writes them), what is printed
 * (--quiet, --verbose, --display-every, --warmup-steps), the limits of a
 * failure or a stop (--collective-timeout, --stop-budget), and --devices,
 * of which only the kind must agree (check_devices). */
typedef enum agreed_kind {
    AGREED_LONG,    /* a long long, unset below 1 (--epochs, --seed: -1; the rest: 0) */
    AGREED_REAL,    /* a double, unset below 0 (--bucket-mb, --validation-split) */
    AGREED_TEXT,    /* a const char *, NULL unset */
    AGREED_GIVEN,   /* a const char * whose presence alone counts (--trace: a file per rank) */
    AGREED_FLAG,    /* an int, 0 unset */
    AGREED_SIGNALS, /* --stop-signals */
} agreed_kind;

#define FIELD(f) offsetof(mr_train_options, f)

static const struct {
    const char *name;
    agreed_kind kind;
    size_t offset;
} agreed[] = {
    {"--epochs", AGREED_LONG, FIELD(epochs)},
    {"--seed", AGREED_LONG, FIELD(seed)},
    {"--max-steps", AGREED_LONG, FIELD(max_steps)},
    {"--synthetic", AGREED_LONG, FIELD(synthetic)},
    {"--data", AGREED_TEXT, FIELD(data_path)},
    {"--batch-size", AGREED_LONG, FIELD(batch_size)},
    {"--validation-split", AGREED_REAL, FIELD(validation_split)},
    {"--check-sync", AGREED_LONG, FIELD(check_sync)},
    {"--bucket-mb", AGREED_REAL, FIELD(bucket_mb)},
    {"--resume", AGREED_TEXT, FIELD(resume)},
    {"--init-weights", AGREED_TEXT, FIELD(init_weights)},
    {"--checkpoint-on-signal", AGREED_TEXT, FIELD(stop_path)},
    {"--write-data", AGREED_GIVEN, FIELD(data_out)},
    {"--trace", AGREED_GIVEN, FIELD(trace_path)},
    {"--dry-run", AGREED_FLAG, FIELD(dry_run)},
    {"--stop-signals", AGREED_SIGNALS, FIELD(stop_signals)},
};
#define N_AGREED (sizeof agreed / sizeof agreed[0])

/* --stop-signals as given: "TERM,INT,USR1" in the order given, or "none" */
static void format_signals(const mr_train_options *c, char *buf, size_t n) {
    snprintf(buf, n, "%s", c->n_stop_signals ? "" : "none");
    for (int i = 0; i < c->n_stop_signals; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", i ? "," : "", sigabbrev_np(c->stop_signals[i]));
    }
}

/* Option i as this process was given it: "--max-steps 5", "--dry-run",
 * "no --resume". exact: reals in hex, so that equal texts are equal values. */
static void format_option(const mr_train_options *c, size_t i, int exact, char *buf, size_t n) {
    const void *field = (const char *)c + agreed[i].offset;
    const char *name = agreed[i].name, *text = *(const char *const *)field;
    long long v = *(const long long *)field;
    char sigs[128];
    switch (agreed[i].kind) {
    case AGREED_LONG:
        if (v < 0 || (v == 0 && agreed[i].offset != FIELD(seed)))
            snprintf(buf, n, "no %s", name);
        else
            snprintf(buf, n, "%s %lld", name, v);
        return;
    case AGREED_REAL:
        if (*(const double *)field < 0.0)
            snprintf(buf, n, "no %s", name);
        else
            snprintf(buf, n, exact ? "%s %a" : "%s %g", name, *(const double *)field);
        return;
    case AGREED_TEXT:
        snprintf(buf, n, text ? "%s %s" : "no %s", name, text);
        return;
    case AGREED_GIVEN:
        snprintf(buf, n, text ? "%s" : "no %s", name);
        return;
    case AGREED_FLAG:
        snprintf(buf, n, *(const int *)field ? "%s" : "no %s", name);
        return;
    default: /* AGREED_SIGNALS */
        format_signals(c, sigs, sizeof sigs);
        snprintf(buf, n, "%s %s", name, sigs);
        return;
    }
}

/* What process p compares: the .cfg text's hash, each agreed option's. */
typedef struct job_fingerprint {
    uint64_t text, options[N_AGREED];
    char path[240]; /* its .cfg, for the message */
} job_fingerprint;

static void fingerprint(const mr_train_options *c, const mr_config *cfg, job_fingerprint *f) {
    memset(f, 0, sizeof *f);
    f->text = mr_fnv1a(cfg->text, strlen(cfg->text), MR_FNV1A_INIT);
    for (size_t i = 0; i < N_AGREED; i++) {
        char buf[MR_PATH_MAX + 64];
        format_option(c, i, 1, buf, sizeof buf);
        f->options[i] = mr_fnv1a(buf, strlen(buf), MR_FNV1A_INIT);
    }
    snprintf(f->path, sizeof f->path, "%s", c->cfg_path);
}

/* Option i differs between rank p and rank 0: every process gathers its
 * own text of it (a collective, as every process found the same p and i),
 * and the message names both. */
static mr_status differing_option(const mr_train_options *c, mr_job *job, int p, size_t i,
                                  mr_error *err) {
    typedef struct {
        char text[512];
    } option_text;
    option_text mine, *all = calloc((size_t)job->size, sizeof *all);
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    format_option(c, i, 0, mine.text, sizeof mine.text);
    mr_status st = mr_job_allgather(job, &mine, sizeof mine, all, err);
    if (st == MR_OK)
        st = mr_error_set(err, MR_ERR_USAGE,
                          "rank %d (%s) was started with %s and rank 0 (%s) with %s: every "
                          "process of a job must get the same options",
                          p, job->hosts[p], all[p].text, job->hosts[0], all[0].text);
    free(all);
    return st;
}

/* Every process must train the same model with the same settings (a .cfg
 * edited while mpirun started the processes, or different files on two
 * nodes, would train different models or wait in different collectives):
 * the .cfg text and the agreed options are hashed and compared, then the
 * kind of device. The same verdict on every process. */
mr_status mr_train_check_same_job(const mr_train_options *c, mr_job *job, const mr_config *cfg,
                                  const mr_strategy_opts *opts, mr_device_set *sets,
                                  mr_error *err) {
    sets[job->rank] = opts->devices;
    if (job->size == 1) return MR_OK;
    /* every process's devices, for rank 0's start line and summary */
    MR_CHECK(mr_job_allgather(job, &opts->devices, sizeof opts->devices, sets, err));
    job_fingerprint mine, *all = calloc((size_t)job->size, sizeof mine);
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    fingerprint(c, cfg, &mine);
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
        for (size_t i = 0; i < N_AGREED; i++)
            if (all[p].options[i] != all[0].options[i]) {
                free(all);
                return differing_option(c, job, p, i, err);
            }
        if (strcmp(sets[p].kind, sets[0].kind) != 0) /* one communicator joins them all */
            st = mr_error_set(err, MR_ERR_USAGE,
                              "rank %d (%s) trains on %s and rank 0 (%s) on %s: every process of "
                              "a job must use the same kind of device (--devices)",
                              p, job->hosts[p], plural(&sets[p]), job->hosts[0], plural(&sets[0]));
    }
    free(all);
    return st;
}
