/* mirrored_train: train a model defined in a .cfg file on every local device,
 * or, under mpirun, on the devices of every process of the job.
 *
 *   mirrored_train MODEL.cfg [options]
 *   mpirun -np 4 mirrored_train MODEL.cfg [options]
 *
 * The only place (with the other executables) that prints and exits: library
 * calls return a status with a one-line message, turned here into
 * "mirrored_train: message" on stderr and an exit code (see usage()).
 *
 * In a job of several processes every process runs this same sequence, and
 * at the end of each stage that can fail on one process alone (options and
 * .cfg, data files) they agree on the outcome (mr_job_agree), so a bad file
 * fails every process with one message and nobody waits in a collective.
 * Only the process of global replica 0 prints progress and writes output
 * files; the others print nothing but errors, prefixed "rank R (host): ".
 * A failure after training has started, which the other processes cannot
 * see, ends the whole job (mr_job_abort). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "collectives/hierarchical.h"
#include "collectives/job.h"
#include "models/model.h"
#include "runtime/hash.h"
#include "runtime/dataset.h"
#include "strategies/devices.h"
#include "strategies/strategy.h"
#include "models/keras.h"
#include "launch/train_checkpoints.h"
#include "launch/cli.h"
#include "launch/progress.h"

static const char *prog = "mirrored_train";

static void usage(FILE *out) {
    fprintf(out,
            "Usage: %s MODEL.cfg [options]\n"
            "Train the model of MODEL.cfg on every local device (TensorFlow MirroredStrategy\n"
            "semantics: the global batch is split over the replicas, gradients are summed).\n"
            "\n"
            "Options:\n"
            "  --devices SPEC     auto (default: every GPU, else one CPU replica per core),\n"
            "                     cpu (one replica), cpu:N (N CPU replicas), gpu, gpu:0,2\n"
            "  --list-devices     print the devices the runtime sees and exit\n"
            "  --epochs N         override [net] epochs\n"
            "  --seed N           override [net] seed\n"
            "  --metrics FILE     write per-epoch metrics as CSV (Keras CSVLogger columns:\n"
            "                     epoch,accuracy,loss,val_accuracy,val_loss)\n"
            "  --json FILE        write a JSON summary at the end\n"
            "  --check-sync K     every K steps verify all replicas hold identical weights\n"
            "  --bucket-mb X      all-reduce gradients in buckets of X MiB during backward\n"
            "                     (default 0: one all-reduce after backward)\n"
            "  --save FILE.h5     write the trained model (Keras .h5 layout, with what\n"
            "                     resuming needs) after training\n"
            "  --resume FILE|auto go on from a checkpoint (auto: the newest of [net]\n"
            "                     checkpoint); the rest of the run is bitwise the\n"
            "                     uninterrupted one with the same replica count\n"
            "  --keep N           keep only the newest N checkpoints of [net] checkpoint\n"
            "  --init-weights F.h5  start from these weights (ours, or Keras's model.save)\n"
            "  --log FILE.jsonl   one JSON line per update: loss, learning rate, timings\n"
            "  --write-data F.h5  write the preprocessed data to F.h5 and exit (a later\n"
            "                     job reads it instead of the raw files)\n"
            "  --collective-timeout S  fail a collective that waits more than S seconds for\n"
            "                     another replica or process (default: MIRRORED_COMM_TIMEOUT\n"
            "                     or 600)\n"
            "  --quiet            print only the final test result\n"
            "  --help-config[=markdown]  print every .cfg section and key with defaults and\n"
            "                     ranges (markdown: the README's table)\n"
            "  --help             this text\n"
            "  --version          print the version\n"
            "\n"
            "Exit status: 0 success; 1 failure while running (out of memory, a replica or\n"
            "collective failed, an output file could not be written); 2 bad input (options,\n"
            ".cfg file, data files).\n"
            "\n"
            "Multi-process: mpirun -np N %s MODEL.cfg trains one job over N processes\n"
            "(each takes its share of its node's cores: --devices auto; cpu:N may not ask for\n"
            "more). Environment: MIRRORED_COMM_TIMEOUT (seconds), MIRRORED_RANKS_PER_NODE=K\n"
            "(treat K consecutive ranks as one node, to exercise the cross-node path on one\n"
            "machine).\n",
            prog, prog);
}

/* 1: the replicas of set's kind are threads on the cores (the CPU), so
 * they are numbered across the job, in rank order; 0: they are devices,
 * named by their ordinal on their node (GPUs). */
static int numbered_across_job(const mr_device_set *set) {
    const mr_backend_kind *kind = mr_devices_kind(set);
    return kind != NULL && kind->discover == NULL;
}

/* "GPUs", "CPUs" */
static const char *plural(const mr_device_set *set) {
    const mr_backend_kind *kind = mr_devices_kind(set);
    return kind != NULL ? kind->plural : set->kind;
}

/* Process p's devices (`sets`: every process's, check_same_job), as
 * "cpu:2,3" or "gpu:0,1". */
static void rank_devices(const mr_job *job, const mr_device_set *sets, int p, char *buf, size_t n) {
    mr_device_set set = sets[p];
    if (numbered_across_job(&set)) {
        set.count = job->replicas[p];
        for (int i = 0; i < set.count && i < MR_MAX_REPLICAS; i++)
            set.ordinals[i] = job->first[p] + i;
    }
    mr_devices_format(&set, buf, n);
}

/* Writes the JSON summary via a temporary file renamed into place. */
static mr_status write_json(const char *path, const mr_progress *pg, const mr_fit_plan *plan,
                            const mr_job *job, const mr_device_set *sets, const char *comm,
                            int epochs, int has_test, double test_loss, double test_acc,
                            uint64_t weights_hash, mr_error *err) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "{\n  \"epochs\": %d,\n", epochs);
    fprintf(f, "  \"train_samples_per_sec\": %.1f,\n",
            pg->train_seconds > 0 ? pg->train_samples / pg->train_seconds : 0.0);
    if (has_test)
        fprintf(f, "  \"test_loss\": %.6f,\n  \"test_accuracy\": %.6f,\n", test_loss, test_acc);
    else
        fprintf(f, "  \"test_loss\": null,\n  \"test_accuracy\": null,\n");
    fprintf(f, "  \"loss\": %.6f,\n  \"accuracy\": %.6f,\n", pg->last.loss, pg->last.accuracy);
    if (pg->last.has_val)
        fprintf(f, "  \"val_loss\": %.6f,\n  \"val_accuracy\": %.6f,\n", pg->last.val_loss,
                pg->last.val_accuracy);
    fprintf(f, "  \"replicas\": %d,\n  \"processes\": %d,\n  \"nodes\": %d,\n", plan->replicas,
            job->size, job->n_nodes);
    fprintf(f, "  \"communicator\": \"%s\",\n  \"devices\": [", comm);
    /* CPU replicas numbered across the job; GPUs by their ordinal on their node */
    for (int p = 0, k = 0; p < job->size; p++)
        for (int i = 0; i < job->replicas[p]; i++, k++)
            fprintf(f, "%s\"%s:%d\"", k ? ", " : "", sets[p].kind,
                    numbered_across_job(&sets[p]) ? job->first[p] + i : sets[p].ordinals[i]);
    fprintf(f, "],\n  \"ranks\": [");
    for (int p = 0; p < job->size; p++)
        fprintf(f, "%s{\"rank\": %d, \"host\": \"%s\", \"replicas\": %d}", p ? ", " : "", p,
                job->hosts[p], job->replicas[p]);
    fprintf(f, "],\n  \"global_batch\": %d,\n  \"learning_rate\": %.8g,\n", plan->global_batch,
            plan->base_lr * plan->lr_factor);
    fprintf(f, "  \"params_hash\": \"%016llx\",\n", (unsigned long long)weights_hash);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(f, "  \"max_rss_mb\": %.1f,\n", (double)ru.ru_maxrss / 1024.0);
    fprintf(f, "  \"train_seconds\": %.3f\n}\n", pg->train_seconds);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return mr_error_set(err, MR_ERR_RUNTIME, "%s: cannot write: %s", path, strerror(errno));
    }
    return MR_OK;
}

/* FNV-1a over n floats of the model's device memory p, read in pieces the
 * model's host staging holds (at once where its memory is host memory). */
static mr_status hash_floats(const mr_model *m, const mr_dfloat *p, int64_t n, uint64_t *h,
                             mr_error *err) {
    int64_t step = m->be->host_memory ? n : (int64_t)m->host_floats;
    for (int64_t i = 0; i < n; i += step) {
        int64_t k = n - i < step ? n - i : step;
        const float *host;
        MR_CHECK(mr_model_read(m, mr_dfloat_at_c(p, i), (size_t)k, &host, err));
        *h = mr_fnv1a(host, sizeof(float) * (size_t)k, *h);
    }
    return MR_OK;
}

/* FNV-1a of the final weights and state: two runs are bitwise identical iff equal. */
static mr_status params_hash(const mr_model *m, uint64_t *h, mr_error *err) {
    *h = MR_FNV1A_INIT;
    MR_CHECK(hash_floats(m, m->params, m->n_params, h, err));
    if (m->state) MR_CHECK(hash_floats(m, m->state, m->n_state, h, err));
    return MR_OK;
}

static void model_name(const char *cfg_path, char *buf, size_t n) {
    const char *base = strrchr(cfg_path, '/');
    base = base ? base + 1 : cfg_path;
    snprintf(buf, n, "%s", base);
    char *dot = strrchr(buf, '.');
    if (dot) *dot = '\0';
}

/* What the command line asks for. */
typedef struct cli {
    enum { RUN_TRAIN, RUN_HELP, RUN_VERSION, RUN_HELP_CONFIG, RUN_LIST } action;
    int markdown; /* --help-config=markdown */
    long long epochs, seed, check_sync, keep;
    double bucket_mb, timeout;
    const char *metrics_path, *json_path, *devices_spec, *cfg_path;
    const char *save_path, *resume, *init_weights, *log_path, *data_out;
    int quiet;
} cli;

static mr_status parse_cli(int argc, char **argv, cli *c, mr_error *err) {
    enum {
        OPT_EPOCHS = 1000,
        OPT_SEED,
        OPT_METRICS,
        OPT_JSON,
        OPT_QUIET,
        OPT_HELP,
        OPT_VERSION,
        OPT_DEVICES,
        OPT_LIST,
        OPT_CHECK_SYNC,
        OPT_BUCKET,
        OPT_TIMEOUT,
        OPT_HELP_CONFIG,
        OPT_SAVE,
        OPT_RESUME,
        OPT_KEEP,
        OPT_INIT,
        OPT_LOG,
        OPT_WRITE_DATA
    };
    static const struct option longopts[] = {
        {"epochs", required_argument, NULL, OPT_EPOCHS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"metrics", required_argument, NULL, OPT_METRICS},
        {"json", required_argument, NULL, OPT_JSON},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, OPT_VERSION},
        {"devices", required_argument, NULL, OPT_DEVICES},
        {"list-devices", no_argument, NULL, OPT_LIST},
        {"check-sync", required_argument, NULL, OPT_CHECK_SYNC},
        {"bucket-mb", required_argument, NULL, OPT_BUCKET},
        {"collective-timeout", required_argument, NULL, OPT_TIMEOUT},
        {"help-config", optional_argument, NULL, OPT_HELP_CONFIG},
        {"save", required_argument, NULL, OPT_SAVE},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"keep", required_argument, NULL, OPT_KEEP},
        {"init-weights", required_argument, NULL, OPT_INIT},
        {"log", required_argument, NULL, OPT_LOG},
        {"write-data", required_argument, NULL, OPT_WRITE_DATA},
        {NULL, 0, NULL, 0},
    };
    *c = (cli){.action = RUN_TRAIN, .epochs = -1, .seed = -1, .devices_spec = "auto"};
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (o) {
        case OPT_EPOCHS:
            if (!mr_cli_parse_long("--epochs", optarg, 1, 100000, &c->epochs, err))
                return err->status;
            break;
        case OPT_SEED:
            if (!mr_cli_parse_long("--seed", optarg, 0, INT64_MAX, &c->seed, err))
                return err->status;
            break;
        case OPT_CHECK_SYNC:
            if (!mr_cli_parse_long("--check-sync", optarg, 1, 1000000000, &c->check_sync, err))
                return err->status;
            break;
        case OPT_BUCKET: {
            char *end;
            c->bucket_mb = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(c->bucket_mb >= 0.0) || c->bucket_mb > 4096)
                return mr_error_set(err, MR_ERR_USAGE,
                                    "--bucket-mb %s: expected a number of MiB in [0, 4096]",
                                    optarg);
            break;
        }
        case OPT_TIMEOUT:
            c->timeout = mr_comm_parse_timeout(optarg);
            if (c->timeout <= 0.0)
                return mr_error_set(err, MR_ERR_USAGE,
                                    "--collective-timeout %s: expected a number of seconds > 0",
                                    optarg);
            break;
        case OPT_METRICS:
            c->metrics_path = optarg;
            break;
        case OPT_SAVE:
            c->save_path = optarg;
            break;
        case OPT_RESUME:
            c->resume = optarg;
            break;
        case OPT_KEEP:
            if (!mr_cli_parse_long("--keep", optarg, 1, 1000000, &c->keep, err)) return err->status;
            break;
        case OPT_INIT:
            c->init_weights = optarg;
            break;
        case OPT_LOG:
            c->log_path = optarg;
            break;
        case OPT_WRITE_DATA:
            c->data_out = optarg;
            break;
        case OPT_JSON:
            c->json_path = optarg;
            break;
        case OPT_QUIET:
            c->quiet = 1;
            break;
        case OPT_DEVICES:
            c->devices_spec = optarg;
            break;
        case 'h':
        case OPT_HELP:
            c->action = RUN_HELP;
            return MR_OK;
        case OPT_VERSION:
            c->action = RUN_VERSION;
            return MR_OK;
        case OPT_HELP_CONFIG:
            if (optarg != NULL && strcmp(optarg, "markdown") != 0)
                return mr_error_set(err, MR_ERR_USAGE,
                                    "--help-config=%s: the only format is 'markdown'", optarg);
            c->action = RUN_HELP_CONFIG;
            c->markdown = optarg != NULL;
            return MR_OK;
        case OPT_LIST:
            c->action = RUN_LIST;
            return MR_OK;
        default:
            return mr_cli_bad_option(argv, err);
        }
    }
    if (optind != argc - 1)
        return mr_error_set(err, MR_ERR_USAGE, "%s (see --help)",
                            optind == argc ? "missing MODEL.cfg" : "more than one MODEL.cfg given");
    c->cfg_path = argv[optind];
    if (c->resume && c->init_weights)
        return mr_error_set(err, MR_ERR_USAGE,
                            "--resume and --init-weights: a resumed run has its weights already");
    return MR_OK;
}

/* --devices auto with a global batch fixed by the .cfg: the most replicas,
 * up to one per core, over which the global batch divides evenly (on every
 * process alike, so that the job's total divides too). */
static int auto_replicas(const mr_config *cfg, int processes, int cores) {
    const mr_net_cfg *net = &cfg->net;
    if (net->global_batch <= 0 || net->global_batch % net->accumulate != 0) return cores;
    int per = net->global_batch / net->accumulate;
    for (int c = cores; c > 1; c--)
        if (per % (c * processes) == 0) return c;
    return 1;
}

/* Stage 1, on every process: the .cfg, the devices (in env: this process's
 * cores and GPUs, mr_devices_job_env), the model's shapes and (on the
 * writing process) the output files. No collective: it may return early on
 * one process. */
static mr_status prepare(const cli *c, const mr_job *job, const mr_device_env *env, mr_config *cfg,
                         mr_strategy_opts *opts, mr_fault *fault, int64_t *in_size, int *classes,
                         mr_error *err) {
    MR_CHECK(mr_config_load(c->cfg_path, cfg, err));
    if (c->epochs > 0) cfg->net.epochs = (int)c->epochs;
    if (c->seed >= 0) cfg->net.seed = c->seed;
    MR_CHECK(mr_devices_parse(c->devices_spec, env, &opts->devices, err));
    mr_device_set *d = &opts->devices;
    if (numbered_across_job(d) && strcmp(c->devices_spec, "auto") == 0) {
        d->count = auto_replicas(cfg, job->size, d->count);
        for (int i = 0; i < d->count; i++)
            d->ordinals[i] = i;
    }
    if (job->size > 1 && numbered_across_job(d) && d->count > job->cores) {
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
    opts->bucket_floats = (size_t)(c->bucket_mb * 1024 * 1024 / sizeof(float));
    opts->comm_timeout = c->timeout;
    /* the test hook: a fault for this process (strategies/fault.h) */
    MR_CHECK(mr_fault_parse(getenv(MR_FAULT_ENV), job->rank, fault, err));
    opts->fault = fault;
    /* the model's shapes first: a .cfg mistake should not wait for the data
     * (built on a CPU context: only the shapes are wanted) */
    mr_model probe;
    mr_backend *be;
    MR_CHECK(mr_backend_create(mr_backend_kind_cpu(), 0, &be, err));
    mr_status st = mr_model_init(&probe, be, cfg, 1, 0, err);
    if (st == MR_OK) {
        *in_size = probe.in_size;
        *classes = mr_model_classes(&probe);
        mr_model_free(&probe);
    }
    mr_backend_destroy(be);
    MR_CHECK(st);
    if (job->rank == 0) {
        MR_CHECK(mr_cli_check_writable("--metrics", c->metrics_path, err));
        MR_CHECK(mr_cli_check_writable("--json", c->json_path, err));
        MR_CHECK(mr_cli_check_writable("--log", c->log_path, err));
        MR_CHECK(mr_cli_check_writable("--write-data", c->data_out, err));
    }
    return MR_OK;
}

/* --write-data: the examples as the model sees them (scaled, standardised),
 * float32, with their labels, for a later job to read with scale = 1 and no
 * standardize: a CPU job and a GPU job then train on the same bits. */
static mr_status write_data(const char *path, const mr_config *cfg, const mr_dataset *train,
                            const mr_dataset *test, mr_error *err) {
    const mr_layer_cfg *in = &cfg->layers[0];
    mr_h5 h;
    MR_CHECK(mr_h5_create(&h, path, err));
    mr_status st = MR_OK;
    const mr_dataset *sets[2] = {train, test};
    const char *names[2] = {"train", "test"};
    for (int k = 0; k < 2 && st == MR_OK; k++) {
        const mr_dataset *ds = sets[k];
        if (ds->n == 0) continue;
        float *x = malloc(sizeof(float) * (size_t)(ds->n * ds->row));
        int32_t *y = malloc(sizeof(int32_t) * (size_t)ds->n);
        int64_t *rows = malloc(sizeof(int64_t) * (size_t)ds->n), *labels = NULL;
        if (x && y && rows) labels = malloc(sizeof(int64_t) * (size_t)ds->n);
        if (labels == NULL) {
            st = mr_error_set(err, MR_ERR_NOMEM, "--write-data: out of memory");
        } else {
            for (int64_t i = 0; i < ds->n; i++)
                rows[i] = i;
            for (int64_t i = 0; i < ds->n; i += 1 << 20) /* fill takes an int count */
                mr_dataset_fill(ds, rows + i, (int)(ds->n - i < (1 << 20) ? ds->n - i : 1 << 20),
                                NULL, x + i * ds->row, y + i);
            for (int64_t i = 0; i < ds->n; i++)
                labels[i] = y[i];
            int64_t dims[4] = {ds->n, in->shape[0], in->shape[1], in->shape[2]};
            char name[32];
            snprintf(name, sizeof name, "%s_images", names[k]);
            st = mr_h5_write(&h, h.file, name, MR_H5_F32, 1 + in->shape_rank, dims, x, err);
            snprintf(name, sizeof name, "%s_labels", names[k]);
            if (st == MR_OK) st = mr_h5_write(&h, h.file, name, MR_H5_I64, 1, &ds->n, labels, err);
        }
        free(x), free(y), free(rows), free(labels);
    }
    if (st != MR_OK) {
        mr_h5_discard(&h);
        return st;
    }
    MR_CHECK(mr_h5_commit(&h, err));
    printf("Wrote %s: %lld training and %lld test examples, preprocessed. To train on them:\n"
           "[data]\ntrain_images = %s:/train_images\ntrain_labels = %s:/train_labels\n",
           path, (long long)train->n, (long long)test->n, path, path);
    if (test->n)
        printf("test_images = %s:/test_images\ntest_labels = %s:/test_labels\n", path, path);
    printf("scale = 1\n");
    return MR_OK;
}

/* Every process must train the same model with the same settings (a .cfg
 * edited while mpirun started the processes, or different files on two
 * nodes, would train different models or wait in different collectives):
 * the .cfg text and the options that change the model or the sequence of
 * collectives are hashed and compared. The same verdict on every process. */
static mr_status check_same_job(const cli *c, mr_job *job, const mr_config *cfg,
                                const mr_strategy_opts *opts, mr_device_set *sets, mr_error *err) {
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
    snprintf(mine.path, sizeof mine.path, "%s", c->cfg_path);
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

/* Stage 2, on every process: the data, checked against the model. */
static mr_status load_data(const mr_config *cfg, int64_t in_size, int classes, mr_dataset *train,
                           mr_dataset *test, int64_t *n_train, mr_error *err) {
    const mr_data_cfg *d = &cfg->data;
    MR_CHECK(mr_dataset_load(train, d->train_images, d->train_labels, err));
    MR_CHECK(mr_dataset_check_row(train, in_size, d->train_images, err));
    MR_CHECK(mr_dataset_check_labels(train, classes, d->train_labels, err));
    if (d->test_images[0] != '\0') {
        MR_CHECK(mr_dataset_load(test, d->test_images, d->test_labels, err));
        MR_CHECK(mr_dataset_check_row(test, in_size, d->test_images, err));
        MR_CHECK(mr_dataset_check_labels(test, classes, d->test_labels, err));
    }
    /* Keras's validation_split: the last fraction, taken before shuffling */
    /* + 1e-4: 0.1f is not 0.1, and 60000 x (1 - 0.1f) must still give 54000 */
    *n_train = (int64_t)((double)train->n * (1.0 - (double)cfg->net.validation_split) + 1e-4);
    if (*n_train < 1)
        return mr_error_set(err, MR_ERR_CONFIG, "%s: validation_split leaves no training examples",
                            cfg->path);
    train->scale = test->scale = d->scale;
    if (d->standardize) {
        /* statistics of the training split only, applied to everything */
        MR_CHECK(mr_dataset_standardize(train, train, 0, *n_train, err));
        if (test->n > 0) MR_CHECK(mr_dataset_standardize(test, train, 0, *n_train, err));
    }
    return MR_OK;
}

/* The start-up line: replicas and where they run, the communicator, the
 * batch, and the learning rate with the rule that made it. */
static void print_plan(const mr_job *job, mr_strategy *strategy, const mr_device_set *sets,
                       const mr_config *cfg, int64_t n_train, int64_t n_val) {
    const mr_fit_plan *plan = mr_strategy_plan(strategy);
    const mr_comm *comm = mr_strategy_comm(strategy);
    char buf[512];
    printf("%d replica%s", plan->replicas, plan->replicas > 1 ? "s" : "");
    if (job->size > 1) {
        printf(" on %d processes (", job->size);
        for (int p = 0; p < job->size; p++) {
            rank_devices(job, sets, p, buf, sizeof buf);
            printf("%s%s: rank %d %s", p ? "; " : "", job->hosts[p], p, buf);
        }
        printf(")");
    } else {
        rank_devices(job, sets, 0, buf, sizeof buf);
        printf(" (%s)", buf);
    }
    if (plan->replicas > 1) {
        if (strcmp(mr_comm_name(comm), "hierarchical") == 0) {
            mr_comm_hierarchical_describe(comm, buf, sizeof buf);
            printf(", hierarchical all-reduce (%s)", buf);
        } else if (strcmp(mr_comm_name(comm), "mpi") == 0) {
            printf(", MPI all-reduce (mpi)");
        } else if (strcmp(mr_comm_name(comm), "nccl") == 0) {
            printf(", NCCL all-reduce (nccl)");
        } else {
            printf(", shared-memory all-reduce (local)");
        }
    }
    if (!numbered_across_job(&sets[job->rank])) {
        /* after the models are built: what each of this process's GPUs holds */
        printf(", device memory in use");
        for (int r = 0; r < plan->local_replicas; r++) {
            mr_backend *be = mr_strategy_replica(strategy, r)->be;
            size_t used = 0, total = 0;
            char dev[32];
            mr_backend_format(be, dev, sizeof dev);
            if (mr_backend_memory(be, &used, &total, NULL) == MR_OK && total > 0)
                printf("%s %s %.2f of %.1f GiB", r ? "," : "", dev, (double)used / 1073741824.0,
                       (double)total / 1073741824.0);
        }
    }
    printf(", batch %d/replica", plan->batch);
    if (plan->accumulate > 1) printf(" x %d accumulated", plan->accumulate);
    float lr = plan->base_lr * plan->lr_factor;
    printf(" = %d global, learning rate ", plan->global_batch);
    if (plan->fixed_global)
        printf("%g (global batch fixed by the .cfg: the same on any replica count", lr);
    else if (plan->lr_factor != 1.0f)
        printf("%g x %g = %g (linear scaling: global batch %d / batch %d", plan->base_lr,
               plan->lr_factor, lr, plan->global_batch, plan->batch);
    else
        printf("%g (%s", lr,
               cfg->net.lr_scaling == MR_LR_SCALING_LINEAR ? "linear scaling, one replica"
                                                           : "no scaling");
    if (plan->warmup_epochs > 0)
        printf(", %g warmup epoch%s from %g", plan->warmup_epochs,
               plan->warmup_epochs == 1 ? "" : "s", plan->base_lr);
    if (plan->schedule == MR_LR_SCHEDULE_COSINE)
        printf(", cosine decay to %g at epoch %d", lr * plan->lr_alpha, cfg->net.epochs);
    printf(")\n");
    printf("Train on %lld samples", (long long)n_train);
    if (n_val) printf(", validate on %lld samples", (long long)n_val);
    printf(", %lld steps per epoch\n", (long long)plan->steps_per_epoch);
    fflush(stdout);
}

/* "Resuming from ...": where the run stood and, with another replica count,
 * what changes. */
static void print_resume(const char *path, const mr_checkpoint *ck, const mr_fit_plan *plan,
                         int epochs) {
    const mr_fit_state *s = &ck->state;
    printf("Resuming from %s: epoch %d/%d, %lld updates into it, %lld in all\n", path,
           s->epoch + 1 > epochs ? epochs : s->epoch + 1, epochs, (long long)s->step,
           (long long)s->global_step);
    if (ck->replicas != plan->replicas || ck->global_batch != plan->global_batch)
        printf("It was trained with %d replica%s and a global batch of %d; now %d and %d: training "
               "goes on from example %lld of the epoch's order, with the learning rate of this "
               "run (above); the rest of the run is not bitwise the uninterrupted one\n",
               ck->replicas, ck->replicas == 1 ? "" : "s", ck->global_batch, plan->replicas,
               plan->global_batch, (long long)s->position);
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
    cli c;
    mr_status st = parse_cli(argc, argv, &c, &err);
    if (st == MR_OK && c.action != RUN_TRAIN) {
        if (lead && c.action == RUN_HELP) usage(stdout);
        if (lead && c.action == RUN_VERSION) printf("mirrored %s\n", MR_VERSION);
        if (lead && c.action == RUN_HELP_CONFIG) mr_config_write_reference(stdout, c.markdown);
        if (lead && c.action == RUN_LIST)
            mr_devices_list(stdout, &(mr_device_env){.cores = job.cores,
                                                     .local_rank = job.local_rank,
                                                     .local_size = job.local_size});
        mr_job_finalize(&job);
        return MR_EXIT_OK;
    }
    if (c.timeout > 0) job.timeout_s = c.timeout;

    int rc = MR_EXIT_OK;
    mr_config cfg = {0};
    mr_dataset train = {0}, test = {0};
    mr_strategy *strategy = NULL;
    FILE *csv = NULL, *log = NULL;
    mr_checkpoint ck = {0};
    int resuming = 0;
    char ck_path[MR_PATH_MAX + 64] = "";
    mr_strategy_opts opts = {.job = &job};
    mr_fault fault = {0};       /* opts.fault: outlives the strategy */
    mr_device_set *sets = NULL; /* every process's devices (check_same_job) */
    int64_t in_size = 0, n_train = 0;
    int classes = 0;
    /* what this process may use: its cores, and how its node's processes
     * share the GPUs they see (a collective, so on every process, before
     * prepare; a conflict there fails prepare only if GPUs are asked for) */
    mr_device_env env;
    char gpu_conflict[sizeof err.msg];
    /* err keeps the first message (error.h) */
    mr_status env_st = mr_devices_job_env(&job, &env, gpu_conflict, sizeof gpu_conflict, &err);
    if (st == MR_OK) st = env_st;
    /* stages that may fail on one process alone end with an agreement */
    if (st == MR_OK) st = prepare(&c, &job, &env, &cfg, &opts, &fault, &in_size, &classes, &err);
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    sets = calloc((size_t)job.size, sizeof *sets);
    if (sets == NULL) st = mr_error_set(&err, MR_ERR_NOMEM, "out of memory");
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    if ((st = check_same_job(&c, &job, &cfg, &opts, sets, &err)) != MR_OK) goto agreed_failure;
    /* --resume: every process reads where the run stood, as it reads the .cfg */
    if (c.resume != NULL) {
        st = mr_ckpt_resume_path(c.resume, cfg.net.checkpoint[0] ? cfg.net.checkpoint : NULL,
                                 ck_path, sizeof ck_path, &err);
        if (st == MR_OK) st = mr_checkpoint_load(ck_path, &ck, &err);
        if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
        resuming = 1;
    }
    if (job.rank == 0) {
        mr_ckpt_run probe = {.pattern = cfg.net.checkpoint[0] ? cfg.net.checkpoint : NULL,
                             .lead = 1};
        st = mr_ckpt_check_writable(&probe, c.save_path, &err);
    }
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    st = load_data(&cfg, in_size, classes, &train, &test, &n_train, &err);
    /* a resumed run preprocesses with the statistics it trained with */
    if (st == MR_OK && resuming) st = mr_ckpt_apply_preprocessing(&ck, &train, &err);
    if (st == MR_OK && resuming && test.n) st = mr_ckpt_apply_preprocessing(&ck, &test, &err);
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    int64_t n_val = train.n - n_train;
    int has_test = test.n > 0;
    if (c.data_out != NULL) {
        st = lead ? write_data(c.data_out, &cfg, &train, &test, &err) : MR_OK;
        if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
        goto done;
    }
    if (mr_strategy_create(&cfg, &opts, n_train, &strategy, &err) != MR_OK) goto agreed_failure;
    const mr_fit_plan *plan = mr_strategy_plan(strategy);
    mr_model *model0 = mr_strategy_replica(strategy, 0);

    /* weights from a file: every process reads them into its replica 0,
     * then replica 0 of the job hands its bits to all */
    if (resuming || c.init_weights != NULL) {
        if (resuming) {
            st = mr_checkpoint_load_model(ck_path, model0, 1, &err);
        } else {
            mr_h5 h;
            st = mr_h5_open(&h, c.init_weights, &err);
            if (st == MR_OK) {
                st = mr_keras_read_weights(&h, model0, 0, &err);
                mr_h5_close(&h);
            }
        }
        if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
        if (mr_strategy_sync_model(strategy, &err) != MR_OK) goto alone_failure;
    }

    mr_augment aug = {0}, *augp = NULL;
    if (cfg.augment.flip || cfg.augment.shift) {
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
    if (lead && c.metrics_path != NULL && (csv = fopen(c.metrics_path, "w")) == NULL) {
        mr_error_set(&err, MR_ERR_IO, "--metrics %s: cannot write: %s", c.metrics_path,
                     strerror(errno));
        goto alone_failure;
    }
    if (lead && c.log_path != NULL && (log = fopen(c.log_path, "w")) == NULL) {
        mr_error_set(&err, MR_ERR_IO, "--log %s: cannot write: %s", c.log_path, strerror(errno));
        goto alone_failure;
    }
    if (lead && !c.quiet) {
        char name[256];
        model_name(c.cfg_path, name, sizeof name);
        mr_model_summary(model0, name, stdout);
        print_plan(&job, strategy, sets, &cfg, n_train, n_val);
        if (resuming) print_resume(ck_path, &ck, plan, cfg.net.epochs);
        if (c.init_weights) printf("Weights from %s\n", c.init_weights);
    }
    mr_ckpt_run ck_run = {.pattern = cfg.net.checkpoint[0] ? cfg.net.checkpoint : NULL,
                          .keep = (int)c.keep,
                          .lead = lead,
                          .out = lead && !c.quiet ? stdout : NULL,
                          .cfg = &cfg,
                          .cfg_path = c.cfg_path,
                          .plan = plan,
                          .processes = job.size,
                          .train = &train};
    mr_progress pg;
    mr_progress_init(&pg, stdout, c.quiet || !lead, cfg.net.epochs, csv);
    pg.log = log;
    pg.device = opts.devices.kind;
    if (resuming) mr_progress_replay(&pg, ck.state.history, ck.state.n_history);
    mr_fit_callbacks cb = {
        .user = &pg, .on_step = mr_progress_on_step, .on_epoch_end = mr_progress_on_epoch_end};
    if (ck_run.pattern != NULL) {
        cb.save = mr_ckpt_on_save;
        cb.save_user = &ck_run;
        if (cfg.net.checkpoint_every.steps)
            cb.every_steps = cfg.net.checkpoint_every.n;
        else
            cb.every_epochs = (int)cfg.net.checkpoint_every.n;
    }
    if (mr_strategy_fit(strategy, &train, n_train, n_train, n_val, cfg.net.epochs, augp,
                        resuming ? &ck.state : NULL, &cb, &err) != MR_OK)
        goto alone_failure;
    double test_loss = 0.0, test_acc = 0.0;
    if (has_test) {
        if (mr_strategy_evaluate(strategy, &test, 0, test.n, &test_loss, &test_acc, &err) != MR_OK)
            goto alone_failure;
        if (lead) printf("Test loss: %.4f - test accuracy: %.4f\n", test_loss, test_acc);
    }
    if (csv != NULL) {
        int bad = fclose(csv) != 0;
        csv = NULL;
        if (bad) {
            mr_error_set(&err, MR_ERR_RUNTIME, "--metrics %s: cannot write", c.metrics_path);
            goto alone_failure;
        }
    }
    if (lead && c.save_path != NULL) {
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
        (params_hash(mr_strategy_replica(strategy, 0), &hash, &err) != MR_OK ||
         write_json(c.json_path, &pg, plan, &job, sets, mr_comm_name(mr_strategy_comm(strategy)),
                    cfg.net.epochs, has_test, test_loss, test_acc, hash, &err) != MR_OK))
        goto alone_failure;
    goto done;
agreed_failure:
    rc = mr_cli_fail_agreed(prog, &job, &err);
    goto done;
alone_failure:
    rc = mr_cli_fail_alone(prog, &job, &err);
done:
    if (csv) fclose(csv);
    if (log) fclose(log);
    mr_checkpoint_free(&ck);
    free(sets);
    mr_strategy_destroy(strategy);
    mr_dataset_free(&train);
    mr_dataset_free(&test);
    mr_config_free(&cfg);
    mr_job_finalize(&job);
    return rc;
}
