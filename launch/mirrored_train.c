/* mirrored_train: train a model defined in a .cfg file on every local device,
 * or, under mpirun, on the devices of every process of the job.
 *
 *   mirrored_train MODEL.cfg [options]
 *   mpirun -np 4 mirrored_train MODEL.cfg [options]
 *
 * The only place (with the other executables) that prints and exits: library
 * calls return a status with a one-line message, turned here into
 * "mirrored_train: message" on stderr and an exit code (see mr_train_usage()).
 *
 * A run is a table of named stages over one state (train_run, `stages`
 * below). In a job of several processes every process runs this same
 * sequence, and the table says of each stage how its outcome becomes the
 * same everywhere: after a stage that can fail on one process alone
 * (options and .cfg, data files) they agree on the outcome (mr_job_agree),
 * so a bad file fails every process with one message and nobody waits in a
 * collective. Only the process of global replica 0 prints progress and
 * writes output files; the others print nothing but errors, prefixed
 * "rank R (host): ". A failure after training has started, which the other
 * processes cannot see, ends the whole job (mr_job_abort).
 *
 * This file is main(), its stages and their helpers; beside it: the command line
 * (train_options.c), what the processes must agree on (train_job.c), the
 * start line and JSON summary (train_report.c), --write-data
 * (train_data.c), progress (progress.c); under them session/: the
 * devices, the data, checkpoints and resume (session_checkpoints.c), the
 * job; the weights' hash is strategies/check_sync.h's. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/h5_lock.h"
#include "collectives/job.h"
#include "models/keras_import.h"
#include "models/model.h"
#include "runtime/atomic_file.h"
#include "runtime/clock.h"
#include "runtime/dataset.h"
#include "runtime/paths.h"
#include "runtime/trace.h"
#include "strategies/check_sync.h"
#include "strategies/devices.h"
#include "strategies/early_stop.h"
#include "strategies/fault.h"
#include "strategies/strategy.h"
#include "launch/cli.h"
#include "launch/progress.h"
#include "session/session_checkpoints.h"
#include "launch/train_data.h"
#include "launch/train_job.h"
#include "session/session_data.h"
#include "session/session_devices.h"
#include "session/session_job.h"
#include "session/session_model.h"
#include "launch/train_options.h"
#include "launch/train_report.h"

static const char *prog = "mirrored_train";

/* A planned stop (preemption, Ctrl-C): the first stop signal's number, set
 * by the handler and read by the training step before each update
 * (mr_fit_callbacks.stop), and when it came (clock_gettime is
 * async-signal-safe). A second signal finds the flag set and changes
 * nothing: the save under way goes on (it is atomic anyway). */
static atomic_int stop_signal;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the stop flag is written by a signal handler");
static struct timespec stop_time;

static void on_stop_signal(int sig) {
    if (atomic_load(&stop_signal) != 0) return;
    clock_gettime(CLOCK_MONOTONIC, &stop_time);
    atomic_store(&stop_signal, sig);
}

/* Before training there is nothing to save: a stop signal ends the run at
 * once, whatever it waits for (an open() of a FIFO, a file reader's
 * child), with one line and exit 128 + the signal. The lines are made
 * when the handler is installed (snprintf is not async-signal-safe). */
static int early_signals[MR_TRAIN_MAX_STOP_SIGNALS];
static char early_lines[MR_TRAIN_MAX_STOP_SIGNALS][128];
/* 1 on a process that does not print the line (not the lead of a job of
 * processes: a Ctrl-C reaches them all), and once the stages have ended
 * (a failing job's processes are ended by mpirun's SIGTERM after the one
 * line that says why) */
static volatile sig_atomic_t early_quiet;

static void on_early_stop_signal(int sig) {
    for (int i = 0; i < MR_TRAIN_MAX_STOP_SIGNALS; i++)
        if (early_signals[i] == sig && !early_quiet) {
            ssize_t ignored = write(STDERR_FILENO, early_lines[i], strlen(early_lines[i]));
            (void)ignored;
        }
    _exit(128 + sig);
}

/* Installs `handler` for the signals of --stop-signals: on_early_stop_signal
 * until training starts, then on_stop_signal. SA_RESTART: the reads and
 * collectives under way go on as if nothing came. SIGPIPE is ignored:
 * progress on a closed stdout is best effort (progress.c), and the run
 * goes on to its files. */
static void install_stop_signals(const mr_train_options *c, void (*handler)(int)) {
    struct sigaction sa = {.sa_handler = handler, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < c->n_stop_signals; i++) {
        const int sig = c->stop_signals[i];
        early_signals[i] = sig;
        snprintf(early_lines[i], sizeof early_lines[i],
                 "%s: stopped by SIG%s before training: nothing trained or written\n", prog,
                 sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        sigaction(sig, &sa, NULL);
    }
    signal(SIGPIPE, SIG_IGN);
}

/* After a planned stop: one line (on the lead process) saying where the
 * run stopped, where its checkpoint is and how to go on; returns the exit
 * status, 128 + the signal (a process that got none itself was stopped
 * by another's SIGTERM, as mpirun or a scheduler sends it). */
static int report_stop(int lead, const mr_train_options *c, const mr_ckpt_run *r,
                       const mr_fit_state *at, int64_t steps) {
    int sig = atomic_load(&stop_signal) ? atomic_load(&stop_signal) : SIGTERM;
    if (!lead) return 128 + sig;
    char who[64];
    if (stop_signal)
        snprintf(who, sizeof who, "SIG%s", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    else
        snprintf(who, sizeof who, "a signal to another process");
    double since = stop_signal
                       ? mr_now_s() - ((double)stop_time.tv_sec + 1e-9 * (double)stop_time.tv_nsec)
                       : 0.0;
    char where[MR_PATH_MAX + 256], took[128] = "";
    if (stop_signal)
        snprintf(took, sizeof took, ", %.2f s after the signal%s", since,
                 since > c->stop_budget ? " (over --stop-budget)" : "");
    if (r->stopped_at[0])
        snprintf(where, sizeof where,
                 "checkpoint %s written in %.2f s%s; to go on, run the same command with "
                 "--resume auto",
                 r->stopped_at, r->last_save_s, took);
    else
        snprintf(where, sizeof where,
                 "no checkpoint written (no [net] checkpoint, --checkpoint-on-signal, --save "
                 "or --json): the run since the start is lost");
    fprintf(stderr, "%s: stopped by %s after update %lld (epoch %d, update %lld/%lld): %s\n", prog,
            who, (long long)at->global_step, at->epoch + 1, (long long)at->step, (long long)steps,
            where);
    return 128 + sig;
}

/* On every process: the .cfg, the devices (mr_session_choose_devices), the model's
 * shapes and (on the writing process) the output files. No collective: it
 * may return early on one process. */
static mr_status prepare(const mr_train_options *c, const mr_job *job, const mr_device_env *env,
                         mr_config *cfg, mr_strategy_opts *opts, mr_fault *fault, int64_t *in_size,
                         int *classes, int *label_width, int *regression, mr_error *err) {
    MR_CHECK(mr_path_check_regular(NULL, c->cfg_path, 0, err));
    mr_session_source source; /* the weights are --init-weights' or --resume's */
    MR_CHECK(mr_session_open(c->cfg_path, MR_SESSION_OPEN_CFG | MR_SESSION_OPEN_KERAS, cfg, NULL,
                             &source, err));
    MR_CHECK(mr_train_apply_options(c, cfg, job->rank == 0 && !c->quiet ? stdout : NULL, err));
    MR_CHECK(mr_train_check_paths(c, cfg, err));
    MR_CHECK(mr_session_choose_devices(c->devices_spec, job, env, cfg, &mr_cli_words,
                                       &opts->devices, err));
    if (c->batch_size > 0)
        MR_CHECK(
            mr_session_check_batch(c->batch_size, cfg, &opts->devices, job, &mr_cli_words, err));
    opts->seed = (uint64_t)cfg->net.seed;
    opts->check_sync = (int)c->check_sync;
    opts->max_steps = c->max_steps;
    /* not given: the default for the devices (strategy.h) */
    opts->bucket_floats =
        c->bucket_mb < 0.0 ? MR_BUCKETS_AUTO : (size_t)(c->bucket_mb * 1024 * 1024 / sizeof(float));
    opts->comm_timeout = c->timeout;
    /* the test hook: a fault for this process (strategies/fault.h) */
    MR_CHECK(mr_fault_parse(getenv(MR_FAULT_ENV), job->rank, fault, err));
    opts->fault = fault;
    /* the model's plan first: a .cfg mistake should not wait for the data */
    mr_model_plan plan;
    MR_CHECK(mr_model_plan_make(&plan, cfg, err));
    *in_size = plan.in_size;
    *classes = plan.classes;
    *label_width = plan.label_width;
    *regression = plan.regression;
    if (job->rank == 0) {
        MR_CHECK(mr_atomic_check_writable("--metrics", c->metrics_path, err));
        MR_CHECK(mr_atomic_check_writable("--json", c->json_path, err));
        MR_CHECK(mr_atomic_check_writable("--log", c->log_path, err));
        MR_CHECK(mr_atomic_check_writable("--trace", c->trace_path, err));
        MR_CHECK(mr_atomic_check_writable("--write-data", c->data_out, err));
    }
    return MR_OK;
}

/* --trace: this process's file (rank 0: the path; rank N: PATH.rankN.json,
 * PATH's ".json" dropped first), pid = the rank. A collective: the time
 * origin is when the processes leave an allgather, the same moment on
 * every rank to within the collective's latency, whatever their nodes'
 * clocks say (each measures from its own clock's reading then). */
static mr_status open_trace(const char *path, mr_job *job, mr_trace **out, mr_error *err) {
    int mine = job->rank, *all = calloc((size_t)job->size, sizeof(int));
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    mr_status st = mr_job_allgather(job, &mine, sizeof mine, all, err);
    const double origin = mr_now_s();
    free(all);
    MR_CHECK(st);
    char own[MR_PATH_MAX + 64];
    size_t n = strlen(path);
    if (job->rank == 0)
        snprintf(own, sizeof own, "%s", path);
    else if (n >= 5 && strcmp(path + n - 5, ".json") == 0)
        snprintf(own, sizeof own, "%.*s.rank%d.json", (int)(n - 5), path, job->rank);
    else
        snprintf(own, sizeof own, "%s.rank%d.json", path, job->rank);
    return mr_trace_create(own, job->rank, origin, out, err);
}

/* ---- the run: one state, a table of stages ---------------------------- */

/* Everything one run of mirrored_train holds, filled stage by stage and
 * freed by train_run_free. */
typedef struct train_run {
    mr_job job;
    int lead; /* the process of global replica 0 prints and writes */
    mr_train_options c;
    mr_status options_st; /* the command line's verdict, agreed by the first stage */
    mr_error err;         /* the first failure's message */
    int finished;         /* a stage ended the run early, with exit code rc */
    /* resume: the state --resume auto chose is this run's end (said in
     * end_note once the processes agree on it) */
    int ended_before;
    char end_note[2 * MR_PATH_MAX + 512];
    int rc;
    /* load config: the .cfg, the devices and the model's shapes */
    mr_config cfg;
    mr_strategy_opts opts;
    mr_fault fault; /* opts.fault: outlives the strategy */
    int64_t in_size;
    int classes, label_width, regression;
    mr_device_set *sets; /* every process's devices (check_same_job) */
    /* resume: where a stop's checkpoint goes without [net] checkpoint, and
     * the checkpoint this run goes on from (ck_path "": none) */
    char stop_path[MR_PATH_MAX + 64];
    char ck_path[MR_PATH_MAX + 64];
    mr_checkpoint ck;
    int resuming;
    char data_note[1536]; /* how the data differs from the checkpoint's ("": it does not) */
    /* load data */
    mr_dataset train, test;
    int64_t n_train, n_val; /* train's rows: [0, n_train) train, [n_train, +n_val) validate */
    /* build the strategy */
    mr_trace *trace; /* --trace (opts.trace): outlives the strategy */
    mr_strategy *strategy;
    const mr_fit_plan *plan;
    mr_model *model0;
    int share_weights; /* replica 0 of the job hands its weights to all */
    mr_augment aug, *augp;
    /* fit */
    FILE *csv, *log;
    mr_ckpt_run ck_run;
    mr_session_events saves; /* ck_run's lines: on stdout */
    mr_progress pg;
    mr_throughput tp; /* images/sec; freed by train_run_free */
    int want_tp;
    mr_fit_callbacks cb;
    /* evaluate: [net] top_k and per_class ride in the evaluation's all-reduce */
    double test_loss, test_acc;
    mr_eval_detail test_detail;
    double *test_conf; /* [net] per_class: the test set's confusion matrix */
} train_run;

typedef struct train_stage {
    const char *name;
    mr_status (*run)(train_run *r); /* may set r->finished (and r->rc) to end the run */
    mr_cli_stage_verdict verdict;
    /* NULL: always; else the stage runs where it says 1 (the same answer on
     * every process where the stage agrees) */
    int (*when)(const train_run *r);
} train_stage;

static const char *pattern_of(const train_run *r) {
    return r->cfg.net.checkpoint[0] ? r->cfg.net.checkpoint : NULL;
}

/* load config: the command line's verdict, this process's devices (a
 * collective, so on every process, before prepare; a GPU conflict fails
 * prepare only if GPUs are asked for), then prepare. */
static mr_status stage_load_config(train_run *r) {
    mr_device_env env;
    char gpu_conflict[sizeof r->err.msg];
    /* err keeps the first message (error.h) */
    mr_status env_st =
        mr_devices_job_env(&r->job, &env, gpu_conflict, sizeof gpu_conflict, &r->err);
    MR_CHECK(r->options_st);
    MR_CHECK(env_st);
    return prepare(&r->c, &r->job, &env, &r->cfg, &r->opts, &r->fault, &r->in_size, &r->classes,
                   &r->label_width, &r->regression, &r->err);
}

/* job table: room for every process's devices */
static mr_status stage_job_table(train_run *r) {
    r->sets = calloc((size_t)r->job.size, sizeof *r->sets);
    return r->sets ? MR_OK : mr_error_set(&r->err, MR_ERR_NOMEM, "out of memory");
}

/* check the job: every process trains the same .cfg the same way */
static mr_status stage_check_job(train_run *r) {
    return mr_train_check_same_job(&r->c, &r->job, &r->cfg, &r->opts, r->sets, &r->err);
}

static int wants_resume(const train_run *r) {
    return r->c.resume != NULL;
}

/* --resume auto's candidates beside the pattern: the stop's file, and
 * --save's unless it holds the best epoch (save_best_only), not the end
 * (its record of the run's end is read by best_ended) */
static const char *resume_save_path(const train_run *r) {
    return r->cfg.net.save_best_only == MR_MONITOR_NONE ? r->c.save_path : NULL;
}

/* --resume auto whose choice is where this run ends (its epochs, or
 * --max-steps): nothing to train, nothing written, exit 0 */
static int finished_before(train_run *r) {
    if (strcmp(r->c.resume, "auto") != 0 ||
        !mr_ckpt_finished(&r->ck, r->cfg.net.epochs, r->c.max_steps))
        return 0;
    char end[128];
    mr_ckpt_say_end(&r->ck, r->cfg.net.epochs, end, sizeof end);
    snprintf(r->end_note, sizeof r->end_note,
             "--resume auto: %s is the end of this run (%s): nothing to train, no file written",
             r->ck_path, end);
    r->ended_before = 1;
    return 1;
}

/* --resume auto with save_best_only: --save's file records that the run
 * ended (where this one ends, no later than the checkpoint chosen, if
 * any): nothing to train, nothing written, exit 0 */
static int best_ended(train_run *r) {
    if (strcmp(r->c.resume, "auto") != 0 || r->cfg.net.save_best_only == MR_MONITOR_NONE) return 0;
    mr_checkpoint b;
    const int64_t step = r->resuming ? r->ck.state.global_step : -1;
    if (!mr_ckpt_best_ended(r->c.save_path, step, r->cfg.net.epochs, r->c.max_steps, &b)) return 0;
    char end[128];
    mr_ckpt_say_end(&b, r->cfg.net.epochs, end, sizeof end);
    snprintf(r->end_note, sizeof r->end_note,
             "--resume auto: %s holds the best epoch (%d) of this run, which has ended (%s): "
             "nothing to train, no file written",
             r->c.save_path, b.state.epoch, end);
    mr_checkpoint_free(&b);
    r->ended_before = 1;
    return 1;
}

/* resume: every process reads where the run stood, as it reads the .cfg
 * (--resume auto with no checkpoint yet: a first start, the same command) */
static mr_status stage_resume(train_run *r) {
    const char *stop_path = r->stop_path[0] ? r->stop_path : NULL;
    MR_CHECK(mr_ckpt_check_pattern(pattern_of(r), &mr_cli_words, &r->err));
    const mr_session_events note = {.user = stderr, .line = r->lead ? mr_cli_line : NULL};
    MR_CHECK(mr_ckpt_resume_path(r->c.resume, pattern_of(r), stop_path, resume_save_path(r),
                                 r->ck_path, sizeof r->ck_path, &note, &mr_cli_words, &r->err));
    r->resuming = r->ck_path[0] != '\0';
    if (r->resuming) {
        MR_CHECK(mr_path_check_regular("--resume", r->ck_path, 0, &r->err));
        MR_CHECK(mr_checkpoint_load(r->ck_path, &r->ck, &r->err));
    }
    if ((r->resuming && finished_before(r)) || best_ended(r) || !r->resuming) return MR_OK;
    MR_CHECK(mr_ckpt_check_epochs(r->ck_path, &r->ck, r->cfg.net.epochs, &mr_cli_words, &r->err));
    if (r->c.max_steps > 0 && r->ck.state.global_step >= r->c.max_steps)
        return mr_error_set(&r->err, MR_ERR_USAGE,
                            "--resume %s: the checkpoint has done %lld updates, --max-steps %lld: "
                            "nothing to train",
                            r->ck_path, (long long)r->ck.state.global_step, r->c.max_steps);
    return MR_OK;
}

/* agree on the resume: every process chose the same state (a checkpoint
 * folder that is not the same on every node, or --save paths that differ,
 * would resume the replicas from different updates); where it is the
 * run's end, the run ends here with exit 0 on every process */
static mr_status stage_agree_resume(train_run *r) {
    struct {
        int64_t step;
        int resuming, ended;
        char what[240];
    } mine = {.step = r->resuming ? r->ck.state.global_step : -1,
              .resuming = r->resuming,
              .ended = r->ended_before},
      *all = NULL;
    if (r->resuming) /* "PATH (update N)", the path's last 200 bytes where it is long */
        snprintf(mine.what, sizeof mine.what, "%.200s (update %lld)",
                 r->ck_path + (strlen(r->ck_path) > 200 ? strlen(r->ck_path) - 200 : 0),
                 (long long)mine.step);
    else
        snprintf(mine.what, sizeof mine.what, "no checkpoint (a first start)");
    if (r->job.size > 1) {
        all = calloc((size_t)r->job.size, sizeof mine);
        if (all == NULL) return mr_error_set(&r->err, MR_ERR_NOMEM, "out of memory");
        mr_status st = mr_job_allgather(&r->job, &mine, sizeof mine, all, &r->err);
        for (int p = 1; st == MR_OK && p < r->job.size; p++)
            if (all[p].step != all[0].step || all[p].resuming != all[0].resuming ||
                all[p].ended != all[0].ended)
                st = mr_error_set(&r->err, MR_ERR_USAGE,
                                  "--resume %s: rank %d (%s) resumes from %s and rank 0 (%s) from "
                                  "%s: every process must see the same checkpoints (one folder "
                                  "shared by all nodes, the same --save)",
                                  r->c.resume, p, r->job.hosts[p], all[p].what, r->job.hosts[0],
                                  all[0].what);
        free(all);
        MR_CHECK(st);
    }
    if (!r->ended_before) return MR_OK;
    if (r->lead) printf("%s\n", r->end_note);
    r->finished = 1;
    r->rc = MR_EXIT_OK;
    return MR_OK;
}

static mr_status stage_report_fresh_start(train_run *r) {
    if (!r->resuming && r->lead)
        printf("--resume auto: no checkpoint yet (%s), starting from the beginning\n",
               pattern_of(r) ? pattern_of(r) : r->stop_path);
    return MR_OK;
}

/* save_best_only writes --save's file: without one it would do nothing */
static mr_status stage_check_save_best(train_run *r) {
    if (r->cfg.net.save_best_only == MR_MONITOR_NONE || r->c.save_path != NULL) return MR_OK;
    return mr_error_set(&r->err, MR_ERR_USAGE,
                        "%s: [net] save_best_only = %s writes the best epoch's model to --save "
                        "FILE.h5, and no --save was given",
                        r->c.cfg_path, mr_monitor_name(r->cfg.net.save_best_only));
}

/* check outputs: the checkpoint files can be written (by the writing process) */
static mr_status stage_check_outputs(train_run *r) {
    if (r->job.rank != 0) return MR_OK;
    /* a dry run makes no checkpoint folder (it still checks --save) */
    mr_ckpt_run probe = {.pattern = pattern_of(r) && !r->c.dry_run ? pattern_of(r) : NULL,
                         .lead = 1,
                         .words = &mr_cli_words};
    MR_CHECK(mr_ckpt_check_writable(&probe, r->c.save_path, &r->err));
    if (pattern_of(r) == NULL && r->stop_path[0])
        MR_CHECK(mr_atomic_check_writable("--checkpoint-on-signal", r->stop_path, &r->err));
    if (r->c.dry_run) return MR_OK;
    /* what killed writers left of this run's files */
    probe.stop_path = r->stop_path[0] ? r->stop_path : NULL;
    char first[MR_PATH_MAX + 64];
    int removed;
    MR_CHECK(mr_ckpt_remove_stale(&probe, r->c.save_path, &removed, first, sizeof first, &r->err));
    if (removed > 0 && !r->c.quiet)
        printf("Removed %d temporary file%s left by a killed run (%s%s)\n", removed,
               removed == 1 ? "" : "s", first, removed > 1 ? ", ..." : "");
    return MR_OK;
}

/* load data: the files (or --synthetic's examples), preprocessed */
static mr_status stage_load_data(train_run *r) {
    if (r->c.synthetic > 0)
        MR_CHECK(mr_session_synthetic_data(&r->cfg, r->c.synthetic, r->classes, r->label_width,
                                           r->regression, &r->train, &r->n_train, &mr_cli_words,
                                           &r->err));
    else
        MR_CHECK(mr_session_load_data(&r->cfg, r->in_size, r->classes, r->label_width,
                                      r->regression, &r->train, &r->test, &r->n_train, &r->err));
    /* a resumed run preprocesses with the statistics it trained with */
    if (r->resuming) MR_CHECK(mr_ckpt_apply_preprocessing(&r->ck, &r->train, &r->err));
    if (r->resuming && r->test.n) MR_CHECK(mr_ckpt_apply_preprocessing(&r->ck, &r->test, &r->err));
    r->n_val = r->train.n - r->n_train;
    return MR_OK;
}

/* what the load converted: one-hot labels, float64 images */
static mr_status stage_report_data(train_run *r) {
    if (r->lead && !r->c.quiet && r->train.note[0])
        fprintf(stderr, "%s: note: %s\n", prog, r->train.note);
    if (r->lead && !r->c.quiet && r->test.note[0])
        fprintf(stderr, "%s: note: %s\n", prog, r->test.note);
    return MR_OK;
}

static int wants_data_out(const train_run *r) {
    return r->c.data_out != NULL;
}

/* --write-data: the preprocessed data, and the run ends */
static mr_status stage_write_data(train_run *r) {
    r->finished = 1;
    if (!r->lead) return MR_OK;
    return mr_train_write_data(r->c.data_out, &r->cfg, &r->train, r->n_train, &r->test, &r->err);
}

static int wants_trace(const train_run *r) {
    return r->c.trace_path != NULL && !r->c.dry_run;
}

static mr_status stage_open_trace(train_run *r) {
    MR_CHECK(open_trace(r->c.trace_path, &r->job, &r->trace, &r->err));
    r->opts.trace = r->trace;
    return MR_OK;
}

static mr_status stage_build_strategy(train_run *r) {
    MR_CHECK(mr_strategy_create(&r->cfg, &r->opts, r->n_train, &r->strategy, &r->err));
    r->plan = mr_strategy_plan(r->strategy);
    r->model0 = mr_strategy_replica(r->strategy, 0);
    return MR_OK;
}

/* load weights: from a file, every process into its replica 0; or, in a
 * fresh fit, [normalization] without .cfg statistics adapts to the
 * training rows, as a Keras user calls adapt(x_train) before fit (every
 * process computes the same bits from the same data) */
static mr_status stage_load_weights(train_run *r) {
    /* the first weights load as the library's do (session_model.h): a
     * checkpoint's with its optimizer slots, a Keras file's */
    if (r->resuming) {
        MR_CHECK(mr_session_first_weights(r->ck_path, MR_SESSION_SOURCE_CKPT, &r->ck, &r->cfg,
                                          r->model0, &r->share_weights, &r->err));
        /* the checkpoint of this model: then, data it can go on with */
        return mr_ckpt_compare_data(r->ck_path, &r->ck, &r->cfg, r->n_train, r->data_note,
                                    sizeof r->data_note, &mr_cli_words, &r->err);
    }
    /* a Keras model file starts from its own weights unless --init-weights names others */
    const char *init = r->c.init_weights != NULL                 ? r->c.init_weights
                       : mr_keras_import_is_model(r->c.cfg_path) ? r->c.cfg_path
                                                                 : NULL;
    if (init != NULL)
        return mr_session_first_weights(init, MR_SESSION_SOURCE_KERAS, NULL, &r->cfg, r->model0,
                                        &r->share_weights, &r->err);
    return mr_model_adapt(r->model0, &r->train, r->n_train, &r->share_weights, &r->err);
}

static int wants_share_weights(const train_run *r) {
    return r->share_weights;
}

/* share weights: replica 0 of the job hands its bits to all */
static mr_status stage_share_weights(train_run *r) {
    return mr_strategy_sync_model(r->strategy, &r->err);
}

/* --synthetic: random examples, no augmentation (tf_cnn_benchmarks's
 * synthetic data has no preprocessing either): what is timed is the
 * training, and a GPU makes the batch itself (fit_step.c, load_shard) */
static int wants_augment(const train_run *r) {
    return r->c.synthetic == 0 && (r->cfg.augment.flip || r->cfg.augment.shift);
}

/* augment: [augment] on an image input (the same .cfg everywhere: the same verdict) */
static mr_status stage_augment(train_run *r) {
    MR_CHECK(mr_session_augment(&r->cfg, r->c.cfg_path, &r->aug, &r->err));
    r->augp = &r->aug;
    return MR_OK;
}

/* open logs: --metrics and --log, on the writing process (not in a dry run) */
static mr_status stage_open_logs(train_run *r) {
    const mr_train_options *c = &r->c;
    if (!r->lead || c->dry_run) return MR_OK;
    if (c->metrics_path != NULL && (r->csv = fopen(c->metrics_path, "w")) == NULL)
        return mr_error_set(&r->err, MR_ERR_IO, "--metrics %s: cannot write: %s", c->metrics_path,
                            strerror(errno));
    if (c->log_path != NULL && (r->log = fopen(c->log_path, "w")) == NULL)
        return mr_error_set(&r->err, MR_ERR_IO, "--log %s: cannot write: %s", c->log_path,
                            strerror(errno));
    return MR_OK;
}

/* What a stop signal will do: lose the run, or save where it stands. */
static void print_stop_plan(const train_run *r) {
    const mr_train_options *c = &r->c;
    if (c->n_stop_signals > 0 && pattern_of(r) == NULL && !r->stop_path[0])
        printf("A stop signal (SIGTERM, Ctrl-C) will lose this run: set [net] checkpoint "
               "or --checkpoint-on-signal PATH\n");
    else if (c->n_stop_signals > 0)
        printf("A stop signal saves %s (budget %.0f s); restart with --resume auto\n",
               pattern_of(r) ? "a checkpoint of [net] checkpoint" : r->stop_path, c->stop_budget);
    /* the resumed run's last save: a stop must fit it in its budget */
    if (c->n_stop_signals > 0 && r->resuming && r->ck.previous_save_s > c->stop_budget)
        printf("Warning: the last save of this model took %.2f s, more than --stop-budget %g "
               "s: a stop on a signal may not fit\n",
               r->ck.previous_save_s, c->stop_budget);
}

/* print plan: the model summary, the replicas, where the weights come from */
static mr_status stage_print_plan(train_run *r) {
    if (!r->lead || r->c.quiet) return MR_OK;
    char name[256];
    mr_train_model_name(r->c.cfg_path, name, sizeof name);
    mr_model_summary(r->model0, name, stdout);
    mr_train_print_plan(&r->job, r->strategy, r->sets, &r->cfg, r->n_train, r->n_val);
    if (r->resuming) {
        char changes[1024];
        mr_ckpt_compare_cfg(&r->ck, &r->cfg, changes, sizeof changes);
        mr_train_print_resume(r->ck_path, &r->ck, r->plan, r->cfg.net.epochs, changes);
        if (r->data_note[0]) printf("%s\n", r->data_note);
    }
    if (r->c.init_weights) printf("Weights from %s\n", r->c.init_weights);
    print_stop_plan(r);
    /* before training: an error from it comes last, on stderr */
    fflush(stdout);
    return MR_OK;
}

static int wants_dry_run(const train_run *r) {
    return r->c.dry_run;
}

/* --dry-run: everything but the training and the files, and the run ends */
static mr_status stage_dry_run(train_run *r) {
    if (r->lead && !r->c.quiet)
        printf("Dry run: nothing trained or written (the data files were read in full: %lld "
               "training, %lld validation, %lld test examples)\n",
               (long long)r->n_train, (long long)r->n_val, (long long)r->test.n);
    r->finished = 1;
    return MR_OK;
}

/* The checkpoints fit writes: [net] checkpoint, a stop's, the best epoch's. */
static void init_checkpoints(train_run *r) {
    const mr_train_options *c = &r->c;
    r->saves =
        (mr_session_events){.user = stdout, .line = r->lead && !c->quiet ? mr_cli_line : NULL};
    r->ck_run = (mr_ckpt_run){
        .pattern = pattern_of(r),
        .keep = (int)c->keep,
        .lead = r->lead,
        .events = &r->saves,
        .words = &mr_cli_words,
        .cfg = &r->cfg,
        .cfg_path = c->cfg_path,
        .plan = r->plan,
        .processes = r->job.size,
        .train = &r->train,
        .train_examples = r->n_train,
        .stop_path = r->stop_path[0] ? r->stop_path : NULL,
        .stop_budget = c->n_stop_signals > 0 ? c->stop_budget : 0.0,
        .max_steps = c->max_steps,
        .best_path = r->cfg.net.save_best_only != MR_MONITOR_NONE ? c->save_path : NULL};
}

/* The progress bar or lines, the metrics and log files, and images/sec
 * (--synthetic, --display-every: lines instead of a bar). */
static void init_progress(train_run *r) {
    const mr_train_options *c = &r->c;
    mr_progress *pg = &r->pg;
    mr_progress_init(pg, stdout, c->quiet || !r->lead, r->cfg.net.epochs, r->csv);
    if (c->no_bar) pg->tty = 0;
    pg->log = r->log;
    pg->device = r->opts.devices.kind;
    pg->top_k = r->cfg.net.top_k;
    pg->regression = r->regression;
    if (r->resuming) mr_progress_replay(pg, r->ck.state.history, r->ck.state.n_history);
    r->want_tp = c->synthetic > 0 || c->display_every > 0;
    mr_throughput_init(&r->tp, c->warmup_steps >= 0 ? c->warmup_steps : 10,
                       c->display_every > 0 ? c->display_every : 10, r->plan->global_batch,
                       r->plan->replicas, r->lead && !c->quiet ? stdout : NULL);
    if (!r->want_tp) return;
    pg->throughput = &r->tp;
    pg->tty = 0;
    if (r->lead && !c->quiet && c->synthetic > 0)
        printf("Synthetic data: %lld random examples of the input shape, labels uniform over "
               "%d classes (the [data] files are not read); images/sec after %lld warm-up "
               "updates\n",
               c->synthetic, r->classes, (long long)r->tp.warmup);
}

/* What fit calls back: progress, checkpoints, the stop flag. */
static void init_callbacks(train_run *r) {
    mr_fit_callbacks *cb = &r->cb;
    *cb = (mr_fit_callbacks){
        .user = &r->pg, .on_step = mr_progress_on_step, .on_epoch_end = mr_progress_on_epoch_end};
    cb->save_user = &r->ck_run;
    if (r->ck_run.best_path != NULL) cb->save_best = mr_ckpt_on_save_best;
    if (r->c.n_stop_signals > 0) {
        cb->stop = &stop_signal;
        cb->on_stop = mr_ckpt_on_stop;
    }
    if (r->ck_run.pattern != NULL) {
        cb->save = mr_ckpt_on_save;
        if (r->cfg.net.checkpoint_every.steps)
            cb->every_steps = r->cfg.net.checkpoint_every.n;
        else
            cb->every_epochs = (int)r->cfg.net.checkpoint_every.n;
    }
}

static mr_status stage_fit(train_run *r) {
    init_checkpoints(r);
    init_progress(r);
    init_callbacks(r);
    install_stop_signals(&r->c, on_stop_signal);
    return mr_strategy_fit(r->strategy, &r->train, r->n_train, r->n_train, r->n_val,
                           r->cfg.net.epochs, r->augp, r->resuming ? &r->ck.state : NULL, &r->cb,
                           &r->err);
}

static int was_stopped(const train_run *r) {
    return mr_strategy_stopped(r->strategy);
}

/* planned stop: the checkpoint is durable (or there was nowhere to write
 * it); the logs keep what finished, and every process waits for the
 * writer before it exits, so mpirun kills nobody early */
static mr_status stage_planned_stop(train_run *r) {
    mr_progress_on_stop(&r->pg);
    mr_error csv_err = {0}, log_err = {0};
    if (mr_progress_close_file(&r->csv, "--metrics", r->c.metrics_path, r->pg.csv_errno, &csv_err))
        fprintf(stderr, "%s: %s\n", prog, csv_err.msg);
    if (mr_progress_close_file(&r->log, "--log", r->c.log_path, r->pg.log_errno, &log_err))
        fprintf(stderr, "%s: %s\n", prog, log_err.msg);
    return MR_OK;
}

static mr_status stage_report_stop(train_run *r) {
    r->rc = report_stop(r->lead, &r->c, &r->ck_run, mr_strategy_state(r->strategy),
                        r->plan->steps_per_epoch);
    r->finished = 1;
    return MR_OK;
}

/* Why the fit ended before its last epoch, if it did. */
static void print_fit_end(const train_run *r) {
    const mr_train_options *c = &r->c;
    const mr_fit_state *stop = mr_strategy_state(r->strategy);
    const mr_fit_end fe = mr_strategy_fit_end(r->strategy);
    const int epochs = r->cfg.net.epochs;
    if (fe.early_stopped)
        printf("Epoch %d: early stopping (%s: best %.4f at epoch %d, no improvement by more than "
               "min_delta in the %d epoch%s after it)\n",
               fe.early_stopped, mr_monitor_name(r->cfg.net.early_stopping), fe.best, fe.best_epoch,
               fe.early_stopped - fe.best_epoch, fe.early_stopped - fe.best_epoch == 1 ? "" : "s");
    else if (stop->epoch < epochs && stop->step > 0)
        printf("%sStopped by --max-steps %lld: update %lld of epoch %d/%d\n", r->pg.tty ? "\n" : "",
               c->max_steps, (long long)stop->step, stop->epoch + 1, epochs);
    else if (stop->epoch < epochs)
        printf("Stopped by --max-steps %lld: after epoch %d/%d\n", c->max_steps, stop->epoch,
               epochs);
}

static void print_throughput(const train_run *r) {
    const mr_throughput_figures f = mr_throughput_get(&r->tp);
    const int replicas = r->plan->replicas;
    if (f.n > 0)
        printf("total images/sec: %.2f (%d replica%s: %.2f per replica; %lld updates after "
               "%lld warm-up)\n",
               f.total, replicas, replicas == 1 ? "" : "s", f.total / replicas, (long long)f.n,
               (long long)r->tp.warmup);
    else
        printf("total images/sec: not measured (no update after the %lld warm-up updates)\n",
               (long long)r->tp.warmup);
}

/* report fit: how it ended, images/sec, restore_best_weights */
static mr_status stage_report_fit(train_run *r) {
    const mr_fit_end fe = mr_strategy_fit_end(r->strategy);
    const int say = r->lead && !r->c.quiet;
    if (say) print_fit_end(r);
    if (say && r->want_tp) print_throughput(r);
    if (say && fe.restored_epoch)
        printf("Restoring model weights from the end of the best epoch: %d.\n", fe.restored_epoch);
    if (r->lead && fe.best_lost)
        fprintf(stderr,
                "%s: note: restore_best_weights: the best epoch (%d) came before the checkpoint "
                "this run resumed from, which holds later weights: kept the last weights\n",
                prog, fe.best_epoch);
    return MR_OK;
}

/* evaluate: the test set, if the .cfg names one */
static mr_status stage_evaluate(train_run *r) {
    const int classes = r->classes;
    r->test_detail = (mr_eval_detail){.classes = classes};
    if (r->test.n == 0) return MR_OK;
    if (r->cfg.net.per_class) {
        r->test_conf = calloc((size_t)classes * (size_t)classes, sizeof(double));
        if (r->test_conf == NULL)
            return mr_error_set(&r->err, MR_ERR_NOMEM,
                                "out of memory for the test set's per-class counts");
        r->test_detail.confusion = r->test_conf;
    }
    MR_CHECK(mr_strategy_evaluate_detail(r->strategy, &r->test, 0, r->test.n, &r->test_loss,
                                         &r->test_acc, &r->test_detail, &r->err));
    if (!r->lead) return MR_OK;
    printf("Test loss: %.4f - test %s: %.4f", r->test_loss, r->regression ? "mae" : "accuracy",
           r->test_acc);
    if (r->cfg.net.top_k)
        printf(" - test_sparse_top_k_categorical_accuracy: %.4f", r->test_detail.top_k_accuracy);
    printf("\n");
    if (r->test_conf) mr_progress_print_per_class(stdout, "test", r->test_conf, classes);
    return MR_OK;
}

/* Why the fit ended (not on a signal: a stop ends the run before). */
static mr_run_end run_end(const train_run *r) {
    if (mr_strategy_fit_end(r->strategy).early_stopped) return MR_RUN_END_EARLY_STOP;
    return mr_strategy_state(r->strategy)->epoch >= r->cfg.net.epochs ? MR_RUN_END_EPOCHS
                                                                      : MR_RUN_END_MAX_STEPS;
}

/* save: --metrics closed, --save written (recording why the run ended) (with save_best_only the
 * file holds the best epoch's model already) */
static mr_status stage_save(train_run *r) {
    const mr_train_options *c = &r->c;
    mr_progress_on_end(&r->pg);
    MR_CHECK(
        mr_progress_close_file(&r->csv, "--metrics", c->metrics_path, r->pg.csv_errno, &r->err));
    if (r->lead && r->ck_run.best_path != NULL && r->ck_run.best_saves == 0)
        fprintf(stderr,
                "%s: note: save_best_only: no epoch of this run improved %s (or none ended), so "
                "this run did not write %s\n",
                prog, mr_monitor_name(r->cfg.net.save_best_only), c->save_path);
    r->ck_run.ended = run_end(r);
    if (!r->lead || c->save_path == NULL || r->ck_run.best_path != NULL) return MR_OK;
    const mr_fit_state *end = mr_strategy_state(r->strategy);
    float lr = end->n_history ? end->history[end->n_history - 1].lr : r->plan->base_lr;
    return mr_ckpt_write(&r->ck_run, c->save_path, end, r->model0, lr, r->ck_run.ended, &r->err);
}

/* the end of a run (not a stop): the stop's file of an earlier stop is older
 * than this end, so it goes (a pattern's stop checkpoint is one of its
 * files and stays); save_best_only's file and the pattern's last file
 * record the end (after the report: model0's weights are read over) */
static mr_status stage_end(train_run *r) {
    MR_CHECK(mr_ckpt_record_end(&r->ck_run, mr_strategy_state(r->strategy), r->model0, &r->err));
    if (mr_ckpt_remove_stop(&r->ck_run, r->c.save_path) && !r->c.quiet)
        printf("Deleted %s, the stop's checkpoint: the run has ended\n", r->stop_path);
    return MR_OK;
}

/* report: --log closed, the --json summary written */
static mr_status stage_report(train_run *r) {
    const mr_train_options *c = &r->c;
    MR_CHECK(mr_progress_close_file(&r->log, "--log", c->log_path, r->pg.log_errno, &r->err));
    if (!r->lead || c->json_path == NULL) return MR_OK;
    const mr_fit_state *stop = mr_strategy_state(r->strategy);
    const int epochs = stop->epoch < r->cfg.net.epochs ? stop->epoch : r->cfg.net.epochs;
    const mr_model *m0 = mr_strategy_replica(r->strategy, 0);
    uint64_t hash = 0;
    MR_CHECK(mr_params_hash(m0, &hash, &r->err));
    return mr_train_write_json(c->json_path, &r->pg, r->plan, &r->job, r->sets,
                               mr_comm_name(mr_strategy_comm(r->strategy)), m0, epochs,
                               r->test.n > 0, r->test_loss, r->test_acc, &r->test_detail, hash,
                               &r->err);
}

/* The run, in order. Where a stage agrees is said here, once. */
static const train_stage stages[] = {
    {"load config", stage_load_config, MR_CLI_STAGE_AGREE, NULL},
    {"job table", stage_job_table, MR_CLI_STAGE_AGREE, NULL},
    {"check the job", stage_check_job, MR_CLI_STAGE_SAME, NULL},
    {"resume", stage_resume, MR_CLI_STAGE_AGREE, wants_resume},
    {"agree on the resume", stage_agree_resume, MR_CLI_STAGE_SAME, wants_resume},
    {"report a fresh start", stage_report_fresh_start, MR_CLI_STAGE_PRINT, wants_resume},
    {"check save_best_only", stage_check_save_best, MR_CLI_STAGE_AGREE, NULL},
    {"check outputs", stage_check_outputs, MR_CLI_STAGE_AGREE, NULL},
    {"load data", stage_load_data, MR_CLI_STAGE_AGREE, NULL},
    {"report data", stage_report_data, MR_CLI_STAGE_PRINT, NULL},
    {"write data", stage_write_data, MR_CLI_STAGE_AGREE, wants_data_out},
    {"open trace", stage_open_trace, MR_CLI_STAGE_AGREE, wants_trace},
    {"build the strategy", stage_build_strategy, MR_CLI_STAGE_SAME, NULL},
    {"load weights", stage_load_weights, MR_CLI_STAGE_AGREE, NULL},
    {"share weights", stage_share_weights, MR_CLI_STAGE_ALONE, wants_share_weights},
    {"augment", stage_augment, MR_CLI_STAGE_SAME, wants_augment},
    {"open logs", stage_open_logs, MR_CLI_STAGE_ALONE, NULL},
    {"print plan", stage_print_plan, MR_CLI_STAGE_PRINT, NULL},
    {"dry run", stage_dry_run, MR_CLI_STAGE_PRINT, wants_dry_run},
    {"fit", stage_fit, MR_CLI_STAGE_ALONE, NULL},
    {"planned stop", stage_planned_stop, MR_CLI_STAGE_AGREE, was_stopped},
    {"report stop", stage_report_stop, MR_CLI_STAGE_PRINT, was_stopped},
    {"report fit", stage_report_fit, MR_CLI_STAGE_PRINT, NULL},
    {"evaluate", stage_evaluate, MR_CLI_STAGE_ALONE, NULL},
    {"save", stage_save, MR_CLI_STAGE_ALONE, NULL},
    {"report", stage_report, MR_CLI_STAGE_ALONE, NULL},
    {"end", stage_end, MR_CLI_STAGE_ALONE, NULL},
};

/* Runs the stages until one fails (its verdict printed as the table says)
 * or ends the run; r->rc is the exit code. */
static void run_stages(train_run *r) {
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        const train_stage *s = &stages[i];
        if (s->when != NULL && !s->when(r)) continue;
        if (mr_cli_stage_failed(prog, &r->job, s->verdict, s->run(r), &r->err, &r->rc)) return;
        if (r->finished) return;
    }
}

/* Everything the stages made, in the reverse of their order (the trace
 * after the models that record into it), and the job. Returns the exit
 * code: r->rc, or a failure where the trace cannot be written. */
static int train_run_free(train_run *r) {
    int rc = r->rc;
    if (r->trace != NULL) {
        /* the whole run (a stop's update and checkpoint too); a failure
         * that aborted the job leaves the last epoch's file */
        mr_error terr = {0};
        if (mr_trace_write(r->trace, &terr) != MR_OK) {
            fprintf(stderr, "%s: %s\n", prog, terr.msg);
            if (rc == MR_EXIT_OK) rc = MR_EXIT_FAILURE;
        }
    }
    mr_throughput_free(&r->tp);
    if (r->csv) fclose(r->csv);
    if (r->log) fclose(r->log);
    mr_checkpoint_free(&r->ck);
    free(r->sets);
    free(r->test_conf);
    mr_strategy_destroy(r->strategy);
    mr_trace_destroy(r->trace);
    mr_dataset_free(&r->train);
    mr_dataset_free(&r->test);
    mr_config_free(&r->cfg);
    mr_job_finalize(&r->job);
    return rc;
}

/* --help, --version, --help-config, --list-devices: printed by the lead
 * process, no stage run. */
static int answer(train_run *r) {
    const mr_train_action a = r->c.action;
    if (r->lead && a == MR_TRAIN_HELP) mr_train_usage(stdout, prog);
    if (r->lead && a == MR_TRAIN_VERSION) printf("mirrored %s\n", MR_VERSION);
    if (r->lead && a == MR_TRAIN_HELP_CONFIG) mr_config_write_reference(stdout, r->c.markdown);
    if (r->lead && a == MR_TRAIN_LIST)
        mr_devices_list(stdout, &(mr_device_env){.cores = r->job.cores,
                                                 .local_rank = r->job.local_rank,
                                                 .local_size = r->job.local_size});
    mr_job_finalize(&r->job);
    return MR_EXIT_OK;
}

/* One run's state: large (the .cfg's layers), and one per process. */
static train_run run;

int main(int argc, char **argv) {
    mr_h5_no_exit_cleanup(); /* runtime/h5_lock.h */
    train_run *r = &run;
    if (mr_session_job_init(&argc, &argv, &r->job, &r->err) != MR_OK) {
        int rc = mr_cli_die(prog, &r->err);
        mr_job_finalize(&r->job);
        return rc;
    }
    r->lead = r->job.rank == 0;
    r->options_st = mr_train_parse_options(argc, argv, &r->c, &r->err);
    if (r->options_st == MR_OK && r->c.action != MR_TRAIN_RUN) return answer(r);
    if (r->c.timeout > 0) r->job.timeout_s = r->c.timeout;
    early_quiet = !r->lead;
    install_stop_signals(&r->c, on_early_stop_signal);
    r->opts.job = &r->job;
    r->label_width = 1;
    /* where a stop's checkpoint goes without [net] checkpoint */
    if (r->c.stop_path != NULL)
        snprintf(r->stop_path, sizeof r->stop_path, "%s", r->c.stop_path);
    else
        mr_ckpt_default_stop_path(r->c.save_path, r->c.json_path, r->stop_path,
                                  sizeof r->stop_path);
    run_stages(r);
    early_quiet = 1;
    return train_run_free(r);
}
