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
 * In a job of several processes every process runs this same sequence, and
 * at the end of each stage that can fail on one process alone (options and
 * .cfg, data files) they agree on the outcome (mr_job_agree), so a bad file
 * fails every process with one message and nobody waits in a collective.
 * Only the process of global replica 0 prints progress and writes output
 * files; the others print nothing but errors, prefixed "rank R (host): ".
 * A failure after training has started, which the other processes cannot
 * see, ends the whole job (mr_job_abort).
 *
 * This file is main() and its stages; beside it: the command line
 * (train_options.c), what the processes must agree on (train_job.c), the
 * start line and JSON summary (train_report.c), --write-data
 * (train_data.c), checkpoints (train_checkpoints.c), progress
 * (progress.c); the weights' hash is strategies/check_sync.h's. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/job.h"
#include "models/keras.h"
#include "models/model.h"
#include "runtime/clock.h"
#include "runtime/dataset.h"
#include "runtime/image_folder.h"
#include "runtime/trace.h"
#include "strategies/check_sync.h"
#include "strategies/devices.h"
#include "strategies/early_stop.h"
#include "strategies/fault.h"
#include "strategies/strategy.h"
#include "launch/cli.h"
#include "launch/progress.h"
#include "launch/train_checkpoints.h"
#include "launch/train_data.h"
#include "launch/train_job.h"
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

/* Installs on_stop_signal for the signals of --stop-signals. SA_RESTART:
 * the reads and collectives under way go on as if nothing came. */
static void install_stop_signals(const mr_train_options *c) {
    struct sigaction sa = {.sa_handler = on_stop_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < c->n_stop_signals; i++)
        sigaction(c->stop_signals[i], &sa, NULL);
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

/* Stage 1, on every process: the .cfg, the devices (in env: this process's
 * cores and GPUs, mr_devices_job_env), the model's shapes and (on the
 * writing process) the output files. No collective: it may return early on
 * one process. */
static mr_status prepare(const mr_train_options *c, const mr_job *job, const mr_device_env *env,
                         mr_config *cfg, mr_strategy_opts *opts, mr_fault *fault, int64_t *in_size,
                         int *classes, int *label_width, mr_error *err) {
    MR_CHECK(mr_config_load(c->cfg_path, cfg, err));
    if (c->epochs > 0) cfg->net.epochs = (int)c->epochs;
    if (c->seed >= 0) cfg->net.seed = c->seed;
    MR_CHECK(mr_devices_parse(c->devices_spec, env, &opts->devices, err));
    mr_device_set *d = &opts->devices;
    if (mr_train_numbered_across_job(d) && strcmp(c->devices_spec, "auto") == 0) {
        d->count = mr_train_auto_replicas(cfg, job->size, d->count);
        for (int i = 0; i < d->count; i++)
            d->ordinals[i] = i;
    }
    if (job->size > 1 && mr_train_numbered_across_job(d) && d->count > job->cores) {
        char why[128];
        if (job->bound || job->local_size == 1)
            snprintf(why, sizeof why, "its binding");
        else
            snprintf(why, sizeof why, "%d cores of the node shared by %d processes",
                     job->node_cores, job->local_size);
        return mr_error_set(err, MR_ERR_USAGE,
                            "--devices %s: this process has %d core%s (%s); use --devices auto, "
                            "at most cpu:%d, or fewer processes per node",
                            c->devices_spec, job->cores, job->cores == 1 ? "" : "s", why,
                            job->cores);
    }
    opts->seed = (uint64_t)cfg->net.seed;
    opts->check_sync = (int)c->check_sync;
    opts->max_steps = c->max_steps;
    opts->bucket_floats = (size_t)(c->bucket_mb * 1024 * 1024 / sizeof(float));
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
    if (job->rank == 0) {
        MR_CHECK(mr_cli_check_writable("--metrics", c->metrics_path, err));
        MR_CHECK(mr_cli_check_writable("--json", c->json_path, err));
        MR_CHECK(mr_cli_check_writable("--log", c->log_path, err));
        MR_CHECK(mr_cli_check_writable("--trace", c->trace_path, err));
        MR_CHECK(mr_cli_check_writable("--write-data", c->data_out, err));
    }
    return MR_OK;
}

/* What the class check names: the labels file, or the image folder whose
 * subfolders are the labels. */
static const char *labels_name(const char *labels, const char *images) {
    return labels[0] ? labels : images;
}

/* [data] <set>_images without <set>_labels is a folder of class folders,
 * or a missing key (the .cfg parser leaves that to the loader: the folder
 * need not exist where a .cfg is only read). */
static mr_status need_labels(const mr_config *cfg, const char *set, const char *images,
                             const char *labels, mr_error *err) {
    if (images[0] == '\0' || labels[0] != '\0' || mr_image_folder_is(images)) return MR_OK;
    return mr_error_set(err, MR_ERR_CONFIG,
                        "%s: [data] %s_labels is missing: %s_images %s is not a folder of class "
                        "folders, so its labels are needed",
                        cfg->path, set, set, images);
}

/* One set's images and labels: class ids, or multi-hot rows (n, label_width) for multi-label
 * binary_crossentropy. */
static mr_status load_set(mr_dataset *ds, const char *images, const char *labels, int rank,
                          const int *shape, int label_width, mr_error *err) {
    return label_width > 1 ? mr_dataset_load_multi_hot(ds, images, labels, label_width, err)
                           : mr_dataset_load_input(ds, images, labels, rank, shape, err);
}

/* Stage 2, on every process: the data, checked against the model. */
static mr_status load_data(const mr_config *cfg, int64_t in_size, int classes, int label_width,
                           mr_dataset *train, mr_dataset *test, int64_t *n_train, mr_error *err) {
    const mr_data_cfg *d = &cfg->data;
    /* an images path may be a folder of class folders, read at the [input]
     * shape; its labels are its subfolders, and the class check names it */
    const int rank = cfg->layers[0].shape_rank, *shape = cfg->layers[0].shape;
    MR_CHECK(need_labels(cfg, "train", d->train_images, d->train_labels, err));
    MR_CHECK(need_labels(cfg, "val", d->val_images, d->val_labels, err));
    MR_CHECK(need_labels(cfg, "test", d->test_images, d->test_labels, err));
    MR_CHECK(load_set(train, d->train_images, d->train_labels, rank, shape, label_width, err));
    MR_CHECK(mr_dataset_check_row(train, in_size, d->train_images, err));
    MR_CHECK(mr_dataset_check_labels(train, classes, labels_name(d->train_labels, d->train_images),
                                     err));
    if (d->test_images[0] != '\0') {
        MR_CHECK(load_set(test, d->test_images, d->test_labels, rank, shape, label_width, err));
        MR_CHECK(mr_dataset_check_row(test, in_size, d->test_images, err));
        MR_CHECK(mr_dataset_check_labels(test, classes, labels_name(d->test_labels, d->test_images),
                                         err));
    }
    if (d->val_images[0] != '\0') {
        /* Keras's validation_data: the validation rows follow the training
         * rows, and the fit validates on that range */
        mr_dataset val;
        MR_CHECK(load_set(&val, d->val_images, d->val_labels, rank, shape, label_width, err));
        mr_status st = mr_dataset_check_row(&val, in_size, d->val_images, err);
        if (st == MR_OK)
            st = mr_dataset_check_labels(&val, classes, labels_name(d->val_labels, d->val_images),
                                         err);
        *n_train = train->n;
        if (st == MR_OK) st = mr_dataset_append(train, &val, err);
        mr_dataset_free(&val);
        MR_CHECK(st);
    } else {
        /* Keras's validation_split: the last fraction, taken before shuffling */
        /* + 1e-4: 0.1f is not 0.1, and 60000 x (1 - 0.1f) must still give 54000 */
        *n_train = (int64_t)((double)train->n * (1.0 - (double)cfg->net.validation_split) + 1e-4);
        if (*n_train < 1)
            return mr_error_set(err, MR_ERR_CONFIG,
                                "%s: validation_split leaves no training examples", cfg->path);
        /* a folder's rows come class after class: the last fraction is
         * the last classes, which the user should hear of */
        const size_t used = strlen(train->note);
        if (train->classes > 0 && *n_train < train->n)
            snprintf(train->note + used, sizeof train->note - used,
                     "; validation_split holds out its last %lld files, of the last classes in "
                     "folder order: a val_images folder validates on every class",
                     (long long)(train->n - *n_train));
    }
    train->scale = test->scale = d->scale;
    if (d->standardize) {
        /* statistics of the training split only, applied to everything */
        MR_CHECK(mr_dataset_standardize(train, train, 0, *n_train, err));
        if (test->n > 0) MR_CHECK(mr_dataset_standardize(test, train, 0, *n_train, err));
    }
    return MR_OK;
}

/* --synthetic: n random examples of the model's input shape and classes,
 * the same on every process (keyed by the seed); the [data] files are not
 * read, and there is no test set. validation_split, scale and standardize
 * apply as to files. */
static mr_status synthetic_data(const mr_config *cfg, int64_t n, int classes, int label_width,
                                mr_dataset *train, int64_t *n_train, mr_error *err) {
    const mr_layer_cfg *in = &cfg->layers[0];
    if (label_width > 1)
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: --synthetic makes class ids, not the multi-hot labels of "
                            "multi-label binary_crossentropy: give [data] files",
                            cfg->path);
    MR_CHECK(mr_dataset_synthetic(train, n, in->shape_rank, in->shape, classes,
                                  (uint64_t)cfg->net.seed, err));
    train->scale = cfg->data.scale;
    /* validation_split as for files: the last fraction (load_data) */
    *n_train = (int64_t)((double)n * (1.0 - (double)cfg->net.validation_split) + 1e-4);
    if (*n_train < 1)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: validation_split leaves no training examples of the %lld "
                            "synthetic ones",
                            cfg->path, (long long)n);
    /* standardize: the statistics of these examples, as of a training set */
    if (cfg->data.standardize) MR_CHECK(mr_dataset_standardize(train, train, 0, *n_train, err));
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

int main(int argc, char **argv) {
    mr_error err = {0};
    mr_job job;
    if (mr_cli_job_init(&argc, &argv, &job, &err) != MR_OK) {
        int rc = mr_cli_die(prog, &err);
        mr_job_finalize(&job);
        return rc;
    }
    const int lead = job.rank == 0; /* the process of global replica 0 prints and writes */
    mr_train_options c;
    mr_status st = mr_train_parse_options(argc, argv, &c, &err);
    if (st == MR_OK && c.action != MR_TRAIN_RUN) {
        if (lead && c.action == MR_TRAIN_HELP) mr_train_usage(stdout, prog);
        if (lead && c.action == MR_TRAIN_VERSION) printf("mirrored %s\n", MR_VERSION);
        if (lead && c.action == MR_TRAIN_HELP_CONFIG) mr_config_write_reference(stdout, c.markdown);
        if (lead && c.action == MR_TRAIN_LIST)
            mr_devices_list(stdout, &(mr_device_env){.cores = job.cores,
                                                     .local_rank = job.local_rank,
                                                     .local_size = job.local_size});
        mr_job_finalize(&job);
        return MR_EXIT_OK;
    }
    if (c.timeout > 0) job.timeout_s = c.timeout;
    install_stop_signals(&c);

    int rc = MR_EXIT_OK;
    mr_config cfg = {0};
    mr_dataset train = {0}, test = {0};
    mr_strategy *strategy = NULL;
    mr_throughput tp = {0}; /* images/sec; freed at done: */
    int want_tp = 0;
    FILE *csv = NULL, *log = NULL;
    mr_checkpoint ck = {0};
    int resuming = 0;
    char ck_path[MR_PATH_MAX + 64] = "";
    mr_strategy_opts opts = {.job = &job};
    mr_fault fault = {0};       /* opts.fault: outlives the strategy */
    mr_trace *trace = NULL;     /* --trace (opts.trace): outlives the strategy */
    mr_device_set *sets = NULL; /* every process's devices (check_same_job) */
    double *test_conf = NULL;   /* [net] per_class: the test set's confusion matrix */
    int64_t in_size = 0, n_train = 0;
    int classes = 0, label_width = 1;
    /* what this process may use: its cores, and how its node's processes
     * share the GPUs they see (a collective, so on every process, before
     * prepare; a conflict there fails prepare only if GPUs are asked for) */
    mr_device_env env;
    char gpu_conflict[sizeof err.msg];
    /* err keeps the first message (error.h) */
    mr_status env_st = mr_devices_job_env(&job, &env, gpu_conflict, sizeof gpu_conflict, &err);
    if (st == MR_OK) st = env_st;
    /* stages that may fail on one process alone end with an agreement */
    if (st == MR_OK)
        st = prepare(&c, &job, &env, &cfg, &opts, &fault, &in_size, &classes, &label_width, &err);
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    sets = calloc((size_t)job.size, sizeof *sets);
    if (sets == NULL) st = mr_error_set(&err, MR_ERR_NOMEM, "out of memory");
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    if ((st = mr_train_check_same_job(c.cfg_path, &job, &cfg, &opts, sets, &err)) != MR_OK)
        goto agreed_failure;
    /* where a stop's checkpoint goes without [net] checkpoint */
    char stop_path[MR_PATH_MAX + 64];
    if (c.stop_path != NULL)
        snprintf(stop_path, sizeof stop_path, "%s", c.stop_path);
    else
        mr_ckpt_default_stop_path(c.save_path, c.json_path, stop_path, sizeof stop_path);
    const char *pattern = cfg.net.checkpoint[0] ? cfg.net.checkpoint : NULL;
    /* --resume: every process reads where the run stood, as it reads the .cfg
     * (--resume auto with no checkpoint yet: a first start, the same command) */
    if (c.resume != NULL) {
        st = mr_ckpt_resume_path(c.resume, pattern, stop_path[0] ? stop_path : NULL, ck_path,
                                 sizeof ck_path, &err);
        if (st == MR_OK && ck_path[0]) st = mr_checkpoint_load(ck_path, &ck, &err);
        if (st == MR_OK && ck_path[0])
            st = mr_ckpt_check_epochs(ck_path, &ck, cfg.net.epochs, &err);
        if (st == MR_OK && ck_path[0] && c.max_steps > 0 && ck.state.global_step >= c.max_steps)
            st =
                mr_error_set(&err, MR_ERR_USAGE,
                             "--resume %s: the checkpoint has done %lld updates, --max-steps %lld: "
                             "nothing to train",
                             ck_path, (long long)ck.state.global_step, c.max_steps);
        if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
        resuming = ck_path[0] != '\0';
        if (!resuming && lead)
            printf("--resume auto: no checkpoint yet (%s), starting from the beginning\n",
                   pattern ? pattern : stop_path);
    }
    /* save_best_only writes --save's file: without one it would do nothing */
    if (cfg.net.save_best_only != MR_MONITOR_NONE && c.save_path == NULL)
        st = mr_error_set(&err, MR_ERR_USAGE,
                          "%s: [net] save_best_only = %s writes the best epoch's model to --save "
                          "FILE.h5, and no --save was given",
                          c.cfg_path, mr_monitor_name(cfg.net.save_best_only));
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    if (job.rank == 0) {
        /* a dry run makes no checkpoint folder (it still checks --save) */
        mr_ckpt_run probe = {
            .pattern = cfg.net.checkpoint[0] && !c.dry_run ? cfg.net.checkpoint : NULL, .lead = 1};
        st = mr_ckpt_check_writable(&probe, c.save_path, &err);
        if (st == MR_OK && pattern == NULL && stop_path[0])
            st = mr_cli_check_writable("--checkpoint-on-signal", stop_path, &err);
    }
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    st = c.synthetic > 0
             ? synthetic_data(&cfg, c.synthetic, classes, label_width, &train, &n_train, &err)
             : load_data(&cfg, in_size, classes, label_width, &train, &test, &n_train, &err);
    /* a resumed run preprocesses with the statistics it trained with */
    if (st == MR_OK && resuming) st = mr_ckpt_apply_preprocessing(&ck, &train, &err);
    if (st == MR_OK && resuming && test.n) st = mr_ckpt_apply_preprocessing(&ck, &test, &err);
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    /* what the load converted: one-hot labels, float64 images */
    if (lead && !c.quiet && train.note[0]) fprintf(stderr, "%s: note: %s\n", prog, train.note);
    if (lead && !c.quiet && test.note[0]) fprintf(stderr, "%s: note: %s\n", prog, test.note);
    int64_t n_val = train.n - n_train;
    int has_test = test.n > 0;
    if (c.data_out != NULL) {
        st = lead ? mr_train_write_data(c.data_out, &cfg, &train, n_train, &test, &err) : MR_OK;
        if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
        goto done;
    }
    if (c.trace_path != NULL && !c.dry_run) {
        st = open_trace(c.trace_path, &job, &trace, &err);
        if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
        opts.trace = trace;
    }
    if (mr_strategy_create(&cfg, &opts, n_train, &strategy, &err) != MR_OK) goto agreed_failure;
    const mr_fit_plan *plan = mr_strategy_plan(strategy);
    mr_model *model0 = mr_strategy_replica(strategy, 0);

    /* weights from a file: every process reads them into its replica 0,
     * then replica 0 of the job hands its bits to all */
    if (resuming || c.init_weights != NULL) {
        if (resuming) {
            st = mr_checkpoint_load_model(ck_path, model0, mr_ckpt_compare_cfg(&ck, &cfg, NULL, 0),
                                          &err);
        } else {
            st = mr_keras_load(c.init_weights, model0, 0, NULL, &err);
        }
        if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
        if (mr_strategy_sync_model(strategy, &err) != MR_OK) goto alone_failure;
    } else {
        /* a fresh fit: [normalization] without .cfg statistics adapts to
         * the training rows, as a Keras user calls adapt(x_train) before
         * fit; every process computes the same bits from the same data,
         * and replica 0 of the job hands them to all */
        int adapted = 0;
        st = mr_model_adapt(model0, &train, n_train, &adapted, &err);
        if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
        if (adapted && mr_strategy_sync_model(strategy, &err) != MR_OK) goto alone_failure;
    }

    /* --synthetic: random examples, no augmentation (tf_cnn_benchmarks's
     * synthetic data has no preprocessing either): what is timed is the
     * training, and a GPU makes the batch itself (fit.c, load_shard) */
    mr_augment aug = {0}, *augp = NULL;
    if (c.synthetic == 0 && (cfg.augment.flip || cfg.augment.shift)) {
        const mr_layer_cfg *in = &cfg.layers[0];
        if (in->shape_rank != 3) {
            mr_error_set(&err, MR_ERR_CONFIG, "%s:%d: [augment] needs an image input shape H,W,C",
                         c.cfg_path, cfg.augment.line);
            goto agreed_failure; /* the same .cfg everywhere: the same verdict */
        }
        aug = (mr_augment){.flip = cfg.augment.flip,
                           .shift = cfg.augment.shift,
                           .h = in->shape[0],
                           .w = in->shape[1],
                           .c = in->shape[2],
                           .seed = opts.seed};
        augp = &aug;
    }
    if (lead && !c.dry_run && c.metrics_path != NULL &&
        (csv = fopen(c.metrics_path, "w")) == NULL) {
        mr_error_set(&err, MR_ERR_IO, "--metrics %s: cannot write: %s", c.metrics_path,
                     strerror(errno));
        goto alone_failure;
    }
    if (lead && !c.dry_run && c.log_path != NULL && (log = fopen(c.log_path, "w")) == NULL) {
        mr_error_set(&err, MR_ERR_IO, "--log %s: cannot write: %s", c.log_path, strerror(errno));
        goto alone_failure;
    }
    if (lead && !c.quiet) {
        char name[256];
        mr_train_model_name(c.cfg_path, name, sizeof name);
        mr_model_summary(model0, name, stdout);
        mr_train_print_plan(&job, strategy, sets, &cfg, n_train, n_val);
        if (resuming) {
            char changes[1024];
            mr_ckpt_compare_cfg(&ck, &cfg, changes, sizeof changes);
            mr_train_print_resume(ck_path, &ck, plan, cfg.net.epochs, changes);
        }
        if (c.init_weights) printf("Weights from %s\n", c.init_weights);
        if (c.n_stop_signals > 0 && pattern == NULL && !stop_path[0])
            printf("A stop signal (SIGTERM, Ctrl-C) will lose this run: set [net] checkpoint "
                   "or --checkpoint-on-signal PATH\n");
        else if (c.n_stop_signals > 0)
            printf("A stop signal saves %s (budget %.0f s); restart with --resume auto\n",
                   pattern ? "a checkpoint of [net] checkpoint" : stop_path, c.stop_budget);
        /* the resumed run's last save: a stop must fit it in its budget */
        if (c.n_stop_signals > 0 && resuming && ck.previous_save_s > c.stop_budget)
            printf("Warning: the last save of this model took %.2f s, more than --stop-budget %g "
                   "s: a stop on a signal may not fit\n",
                   ck.previous_save_s, c.stop_budget);
        /* before training: an error from it comes last, on stderr */
        fflush(stdout);
    }
    if (c.dry_run) {
        if (lead && !c.quiet)
            printf("Dry run: nothing trained or written (the data files were read in full: %lld "
                   "training, %lld validation, %lld test examples)\n",
                   (long long)n_train, (long long)n_val, (long long)test.n);
        goto done;
    }
    mr_ckpt_run ck_run = {.pattern = cfg.net.checkpoint[0] ? cfg.net.checkpoint : NULL,
                          .keep = (int)c.keep,
                          .lead = lead,
                          .out = lead && !c.quiet ? stdout : NULL,
                          .cfg = &cfg,
                          .cfg_path = c.cfg_path,
                          .plan = plan,
                          .processes = job.size,
                          .train = &train,
                          .stop_path = stop_path[0] ? stop_path : NULL,
                          .stop_budget = c.n_stop_signals > 0 ? c.stop_budget : 0.0,
                          .best_path =
                              cfg.net.save_best_only != MR_MONITOR_NONE ? c.save_path : NULL};
    mr_progress pg;
    mr_progress_init(&pg, stdout, c.quiet || !lead, cfg.net.epochs, csv);
    if (c.no_bar) pg.tty = 0;
    pg.log = log;
    pg.device = opts.devices.kind;
    pg.top_k = cfg.net.top_k;
    if (resuming) mr_progress_replay(&pg, ck.state.history, ck.state.n_history);
    /* images/sec (--synthetic, --display-every): lines instead of a bar */
    want_tp = c.synthetic > 0 || c.display_every > 0;
    mr_throughput_init(&tp, c.warmup_steps >= 0 ? c.warmup_steps : 10,
                       c.display_every > 0 ? c.display_every : 10, plan->global_batch,
                       plan->replicas, lead && !c.quiet ? stdout : NULL);
    if (want_tp) {
        pg.throughput = &tp;
        pg.tty = 0;
        if (lead && !c.quiet && c.synthetic > 0)
            printf("Synthetic data: %lld random examples of the input shape, labels uniform over "
                   "%d classes (the [data] files are not read); images/sec after %lld warm-up "
                   "updates\n",
                   c.synthetic, classes, (long long)tp.warmup);
    }
    mr_fit_callbacks cb = {
        .user = &pg, .on_step = mr_progress_on_step, .on_epoch_end = mr_progress_on_epoch_end};
    cb.save_user = &ck_run;
    if (ck_run.best_path != NULL) cb.save_best = mr_ckpt_on_save_best;
    if (c.n_stop_signals > 0) {
        cb.stop = &stop_signal;
        cb.on_stop = mr_ckpt_on_stop;
    }
    if (ck_run.pattern != NULL) {
        cb.save = mr_ckpt_on_save;
        if (cfg.net.checkpoint_every.steps)
            cb.every_steps = cfg.net.checkpoint_every.n;
        else
            cb.every_epochs = (int)cfg.net.checkpoint_every.n;
    }
    if (mr_strategy_fit(strategy, &train, n_train, n_train, n_val, cfg.net.epochs, augp,
                        resuming ? &ck.state : NULL, &cb, &err) != MR_OK)
        goto alone_failure;
    if (mr_strategy_stopped(strategy)) {
        /* a planned stop: the checkpoint is durable (or there was nowhere
         * to write it); the logs keep what finished, every process waits
         * for the writer before it exits, so mpirun kills nobody early */
        mr_progress_on_stop(&pg);
        if (csv != NULL && fclose(csv) != 0 && lead)
            fprintf(stderr, "%s: --metrics %s: cannot write\n", prog, c.metrics_path);
        csv = NULL;
        if ((st = mr_job_agree(&job, MR_OK, &err)) != MR_OK) goto agreed_failure;
        rc = report_stop(lead, &c, &ck_run, mr_strategy_state(strategy), plan->steps_per_epoch);
        goto done;
    }
    const mr_fit_state *stop = mr_strategy_state(strategy);
    const mr_fit_end fe = mr_strategy_fit_end(strategy);
    if (lead && !c.quiet && fe.early_stopped)
        printf("Epoch %d: early stopping (%s: best %.4f at epoch %d, no improvement by more than "
               "min_delta in the %d epoch%s after it)\n",
               fe.early_stopped, mr_monitor_name(cfg.net.early_stopping), fe.best, fe.best_epoch,
               fe.early_stopped - fe.best_epoch, fe.early_stopped - fe.best_epoch == 1 ? "" : "s");
    else if (lead && !c.quiet && stop->epoch < cfg.net.epochs && stop->step > 0)
        printf("%sStopped by --max-steps %lld: update %lld of epoch %d/%d\n", pg.tty ? "\n" : "",
               c.max_steps, (long long)stop->step, stop->epoch + 1, cfg.net.epochs);
    else if (lead && !c.quiet && stop->epoch < cfg.net.epochs)
        printf("Stopped by --max-steps %lld: after epoch %d/%d\n", c.max_steps, stop->epoch,
               cfg.net.epochs);
    if (want_tp && lead && !c.quiet) {
        const mr_throughput_figures f = mr_throughput_get(&tp);
        if (f.n > 0)
            printf("total images/sec: %.2f (%d replica%s: %.2f per replica; %lld updates after "
                   "%lld warm-up)\n",
                   f.total, plan->replicas, plan->replicas == 1 ? "" : "s",
                   f.total / plan->replicas, (long long)f.n, (long long)tp.warmup);
        else
            printf("total images/sec: not measured (no update after the %lld warm-up updates)\n",
                   (long long)tp.warmup);
    }
    if (lead && !c.quiet && fe.restored_epoch)
        printf("Restoring model weights from the end of the best epoch: %d.\n", fe.restored_epoch);
    if (lead && fe.best_lost)
        fprintf(stderr,
                "%s: note: restore_best_weights: the best epoch (%d) came before the checkpoint "
                "this run resumed from, which holds later weights: kept the last weights\n",
                prog, fe.best_epoch);
    double test_loss = 0.0, test_acc = 0.0;
    /* [net] top_k and per_class: their counts ride in the evaluation's all-reduce */
    mr_eval_detail test_detail = {.classes = classes};
    if (has_test && cfg.net.per_class) {
        test_conf = calloc((size_t)classes * (size_t)classes, sizeof(double));
        if (test_conf == NULL) {
            mr_error_set(&err, MR_ERR_NOMEM, "out of memory for the test set's per-class counts");
            goto alone_failure;
        }
        test_detail.confusion = test_conf;
    }
    if (has_test) {
        if (mr_strategy_evaluate_detail(strategy, &test, 0, test.n, &test_loss, &test_acc,
                                        &test_detail, &err) != MR_OK)
            goto alone_failure;
        if (lead) {
            printf("Test loss: %.4f - test accuracy: %.4f", test_loss, test_acc);
            if (cfg.net.top_k)
                printf(" - test_sparse_top_k_categorical_accuracy: %.4f",
                       test_detail.top_k_accuracy);
            printf("\n");
            if (test_conf) mr_progress_print_per_class(stdout, "test", test_conf, classes);
        }
    }
    if (csv != NULL) {
        int bad = fclose(csv) != 0;
        csv = NULL;
        if (bad) {
            mr_error_set(&err, MR_ERR_RUNTIME, "--metrics %s: cannot write", c.metrics_path);
            goto alone_failure;
        }
    }
    if (lead && ck_run.best_path != NULL && ck_run.best_saves == 0)
        fprintf(stderr,
                "%s: note: save_best_only: no epoch of this run improved %s (or none ended), so "
                "this run did not write %s\n",
                prog, mr_monitor_name(cfg.net.save_best_only), c.save_path);
    if (lead && c.save_path != NULL && ck_run.best_path == NULL) {
        /* (with save_best_only the file holds the best epoch's model already) */
        const mr_fit_state *end = mr_strategy_state(strategy);
        float lr = end->n_history ? end->history[end->n_history - 1].lr : plan->base_lr;
        if (mr_ckpt_write(&ck_run, c.save_path, end, model0, lr, &err) != MR_OK) goto alone_failure;
    }
    if (log != NULL && fclose(log) != 0) {
        log = NULL;
        mr_error_set(&err, MR_ERR_RUNTIME, "--log %s: cannot write", c.log_path);
        goto alone_failure;
    }
    log = NULL;
    uint64_t hash = 0;
    if (lead && c.json_path != NULL &&
        (mr_params_hash(mr_strategy_replica(strategy, 0), &hash, &err) != MR_OK ||
         mr_train_write_json(c.json_path, &pg, plan, &job, sets,
                             mr_comm_name(mr_strategy_comm(strategy)),
                             mr_strategy_replica(strategy, 0),
                             stop->epoch < cfg.net.epochs ? stop->epoch : cfg.net.epochs, has_test,
                             test_loss, test_acc, &test_detail, hash, &err) != MR_OK))
        goto alone_failure;
    goto done;
agreed_failure:
    rc = mr_cli_fail_agreed(prog, &job, &err);
    goto done;
alone_failure:
    rc = mr_cli_fail_alone(prog, &job, &err);
done:
    if (trace != NULL) {
        /* the whole run (a stop's update and checkpoint too); a failure
         * that aborted the job leaves the last epoch's file */
        mr_error terr = {0};
        if (mr_trace_write(trace, &terr) != MR_OK) {
            fprintf(stderr, "%s: %s\n", prog, terr.msg);
            if (rc == MR_EXIT_OK) rc = MR_EXIT_FAILURE;
        }
    }
    mr_throughput_free(&tp);
    if (csv) fclose(csv);
    if (log) fclose(log);
    mr_checkpoint_free(&ck);
    free(sets);
    free(test_conf);
    mr_strategy_destroy(strategy);
    mr_trace_destroy(trace); /* after the models that record into it */
    mr_dataset_free(&train);
    mr_dataset_free(&test);
    mr_config_free(&cfg);
    mr_job_finalize(&job);
    return rc;
}
