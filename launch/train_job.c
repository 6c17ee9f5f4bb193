/* train_job.c: the options every process of a job must get alike
 * (train_job.h); session/session_job.c compares them. */
#include "launch/train_job.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "launch/cli.h"
#include "session/session_job.h"

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
    {"--no-cuda-graphs", AGREED_FLAG, FIELD(no_cuda_graphs)},
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
    const char *name = agreed[i].name, *text = NULL;
    long long v = 0;
    char sigs[128];
    /* each field read as its kind's type only: a flag is an int, and an int
     * read as a pointer is a misaligned load (UBSan) */
    if (agreed[i].kind == AGREED_TEXT || agreed[i].kind == AGREED_GIVEN)
        text = *(const char *const *)field;
    if (agreed[i].kind == AGREED_LONG) v = *(const long long *)field;
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

/* mr_session_agreed.format over the table: option i of c */
static void format_agreed(const void *user, size_t i, int exact, char *buf, size_t n) {
    format_option(user, i, exact, buf, n);
}

mr_status mr_train_check_same_job(const mr_train_options *c, mr_job *job, const mr_config *cfg,
                                  const mr_strategy_opts *opts, mr_device_set *sets,
                                  mr_error *err) {
    const mr_session_agreed options = {
        .n = N_AGREED, .user = c, .format = format_agreed, .words = &mr_cli_words};
    return mr_session_check_same_job(job, cfg, c->cfg_path, &options, &opts->devices, sets, err);
}
