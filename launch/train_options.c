/* train_options.c: mirrored_train's command line (train_options.h). */
#include "launch/train_options.h"
#include "models/keras_archive.h"
#include "models/keras_import.h"

#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm.h"
#include "launch/cli.h"
#include "runtime/paths.h"

void mr_train_usage(FILE *out, const char *prog) {
    fprintf(out,
            "Usage: %s MODEL.cfg [options]\n"
            "Train the model of MODEL.cfg on every local device (TensorFlow MirroredStrategy\n"
            "semantics: the global batch is split over the replicas, gradients are summed).\n"
            "\n"
            "Options:\n"
            "  --devices SPEC     auto (default: every GPU, else one CPU replica per core),\n"
            "                     cpu (one replica), cpu:N (N CPU replicas), gpu, gpu:0,2\n"
            "  --list-devices     print the devices the runtime sees and exit\n"
            "  --data F.npz       train on the arrays of a NumPy archive as keras.datasets\n"
            "                     holds them (x_train, y_train; x_test, y_test if there)\n"
            "                     instead of the [data] files\n"
            "  --epochs N         override [net] epochs\n"
            "  --batch-size N     the global batch (Keras fit's batch_size), split over the\n"
            "                     replicas: overrides [net] batch and global_batch\n"
            "  --validation-split F  hold out the last fraction F of the training arrays for\n"
            "                     validation (Keras's validation_split; overrides [net])\n"
            "  --seed N           override [net] seed\n"
            "  --max-steps N      stop after N updates in all (counted from the start of\n"
            "                     training, through a resume), or at the last epoch if sooner;\n"
            "                     --save and [net] checkpoint write the state where it stopped\n"
            "  --synthetic N      train on N random examples of the model's input shape and\n"
            "                     classes instead of the [data] files (a benchmark of\n"
            "                     training alone, as tf_cnn_benchmarks without data):\n"
            "                     no [augment]; a GPU makes its batches itself\n"
            "  --display-every N  print images/sec every N updates (default 10 with\n"
            "                     --synthetic, else off) and the total at the end\n"
            "  --warmup-steps N   updates left out of images/sec (default 10)\n"
            "  --dry-run          read the .cfg and the data, build the replicas, print the\n"
            "                     summary and the replica plan, and exit: nothing is trained\n"
            "                     or written\n"
            "  --metrics FILE     write per-epoch metrics as CSV (Keras CSVLogger columns:\n"
            "                     epoch,accuracy,loss,val_accuracy,val_loss)\n"
            "  --json FILE        write a JSON summary at the end\n"
            "  --check-sync K     every K steps verify all replicas hold identical weights\n"
            "  --bucket-mb X      all-reduce gradients in buckets of X MiB during backward\n"
            "                     (default: 25 on 2 or more GPUs, else 0: one\n"
            "                     all-reduce after backward)\n"
            "  --save FILE.h5     write the trained model (Keras .h5 layout, with what\n"
            "                     resuming needs) after training; FILE.keras: a Keras 3\n"
            "                     archive (keras.models.load_model), not resumed from\n"
            "  --resume FILE|auto go on from a checkpoint (auto: the most advanced of\n"
            "                     [net] checkpoint's, the stop's and --save's; one that\n"
            "                     is the run's end: nothing done); the rest of the run\n"
            "                     is bitwise the uninterrupted one with the same\n"
            "                     replica count\n"
            "  --keep N           keep only the newest N checkpoints of [net] checkpoint\n"
            "  --init-weights F.h5  start from these weights (ours, or Keras's model.save)\n"
            "  --log FILE.jsonl   one JSON line per update: loss, learning rate, timings\n"
            "  --trace FILE.json  a Chrome trace (Perfetto, chrome://tracing): each replica's\n"
            "                     steps, layers, all-reduces, data and checkpoints; under\n"
            "                     mpirun rank N>0 writes FILE.rankN.json\n"
            "  --write-data F.h5  write the preprocessed data to F.h5 and exit (a later\n"
            "                     job reads it instead of the raw files)\n"
            "  --collective-timeout S  fail a collective that waits more than S seconds for\n"
            "                     another replica or process (default: MIRRORED_COMM_TIMEOUT\n"
            "                     or 600)\n"
            "  --stop-signals LIST  signals that stop training cleanly (default TERM,INT,USR1;\n"
            "                     none: die at once): the job finishes the update in flight,\n"
            "                     writes a checkpoint of it and exits 128+signal (143, 130)\n"
            "  --checkpoint-on-signal F.h5  where that checkpoint goes when the .cfg has no\n"
            "                     [net] checkpoint (default: beside --save or --json,\n"
            "                     NAME-stopped.h5)\n"
            "  --stop-budget S    seconds the stop may take (default 25, under GCP's 30 s):\n"
            "                     a warning when the update plus the save do not fit\n"
            "  --no-cuda-graphs   on GPUs, queue every call of every step instead of\n"
            "                     replaying the step as a CUDA graph ([net] cuda_graphs = 0)\n"
            "  --quiet            print only the final test result (--verbose 0)\n"
            "  --verbose N        as Keras's verbose: 0 --quiet, 1 a progress bar on a\n"
            "                     terminal (default), 2 one line per epoch only\n"
            "  --help-config[=markdown]  print every .cfg section and key with defaults and\n"
            "                     ranges (markdown: docs/usage.md's table)\n"
            "  --help             this text\n"
            "  --version          print the version\n"
            "\n"
            "Exit status: 0 success; 1 failure while running (out of memory, a replica or\n"
            "collective failed, an output file could not be written); 2 bad input (options,\n"
            ".cfg file, data files, an input that is not a regular file, an output that\n"
            "would overwrite an input or another output); 128+N stopped by signal N (143:\n"
            "SIGTERM, 130: SIGINT, 138: SIGUSR1), with a checkpoint once training started:\n"
            "the same command with --resume auto goes on.\n"
            "\n"
            "Multi-process: mpirun -np N %s MODEL.cfg trains one job over N processes\n"
            "(each takes its share of its node's cores: --devices auto; cpu:N may not ask for\n"
            "more). Environment: MIRRORED_COMM_TIMEOUT (seconds), MIRRORED_RANKS_PER_NODE=K\n"
            "(treat K consecutive ranks as one node, to exercise the cross-node path on one\n"
            "machine).\n"
            "\n"
            "MODEL may also be a model Keras saved (MODEL.keras, or a Keras MODEL.h5): its\n"
            "layers, its compile() settings (optimizer, loss, metrics) and its weights as\n"
            "the start; give the data with --synthetic N or the data options. Keras classes\n"
            "taken: %s;\n"
            "anything else, or an argument without an exact counterpart, is refused (exit 2).\n",
            prog, prog, mr_keras_import_classes());
}

/* getopt_long's codes for the long options (above any short option's) */
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
    OPT_TRACE,
    OPT_WRITE_DATA,
    OPT_STOP_SIGNALS,
    OPT_STOP_PATH,
    OPT_STOP_BUDGET,
    OPT_MAX_STEPS,
    OPT_DRY_RUN,
    OPT_VERBOSE,
    OPT_SYNTHETIC,
    OPT_DISPLAY_EVERY,
    OPT_WARMUP_STEPS,
    OPT_DATA,
    OPT_BATCH_SIZE,
    OPT_VALIDATION_SPLIT,
    OPT_NO_CUDA_GRAPHS
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
    {"trace", required_argument, NULL, OPT_TRACE},
    {"write-data", required_argument, NULL, OPT_WRITE_DATA},
    {"stop-signals", required_argument, NULL, OPT_STOP_SIGNALS},
    {"checkpoint-on-signal", required_argument, NULL, OPT_STOP_PATH},
    {"stop-budget", required_argument, NULL, OPT_STOP_BUDGET},
    {"max-steps", required_argument, NULL, OPT_MAX_STEPS},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"synthetic", required_argument, NULL, OPT_SYNTHETIC},
    {"display-every", required_argument, NULL, OPT_DISPLAY_EVERY},
    {"warmup-steps", required_argument, NULL, OPT_WARMUP_STEPS},
    {"verbose", required_argument, NULL, OPT_VERBOSE},
    {"data", required_argument, NULL, OPT_DATA},
    {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
    {"validation-split", required_argument, NULL, OPT_VALIDATION_SPLIT},
    {"no-cuda-graphs", no_argument, NULL, OPT_NO_CUDA_GRAPHS},
    {NULL, 0, NULL, 0},
};

#define OPT_FIELD(f) offsetof(mr_train_options, f)

/* The options that take an integer: its allowed range and its field (a long long). */
static const struct {
    int code;
    const char *name;
    long long lo, hi;
    size_t offset;
} int_options[] = {
    {OPT_EPOCHS, "--epochs", 1, 100000, OPT_FIELD(epochs)},
    {OPT_SEED, "--seed", 0, INT64_MAX, OPT_FIELD(seed)},
    {OPT_CHECK_SYNC, "--check-sync", 1, 1000000000, OPT_FIELD(check_sync)},
    {OPT_MAX_STEPS, "--max-steps", 1, INT64_MAX, OPT_FIELD(max_steps)},
    {OPT_SYNTHETIC, "--synthetic", 1, 1LL << 31, OPT_FIELD(synthetic)},
    {OPT_DISPLAY_EVERY, "--display-every", 1, 1000000000, OPT_FIELD(display_every)},
    {OPT_WARMUP_STEPS, "--warmup-steps", 0, 1000000000, OPT_FIELD(warmup_steps)},
    {OPT_KEEP, "--keep", 1, 1000000, OPT_FIELD(keep)},
    {OPT_BATCH_SIZE, "--batch-size", 1, 1 << 24, OPT_FIELD(batch_size)},
};

/* The options whose value is kept as given (a path, a spec): their field (a const char *). */
static const struct {
    int code;
    size_t offset;
} text_options[] = {
    {OPT_METRICS, OPT_FIELD(metrics_path)}, {OPT_SAVE, OPT_FIELD(save_path)},
    {OPT_RESUME, OPT_FIELD(resume)},        {OPT_INIT, OPT_FIELD(init_weights)},
    {OPT_LOG, OPT_FIELD(log_path)},         {OPT_TRACE, OPT_FIELD(trace_path)},
    {OPT_WRITE_DATA, OPT_FIELD(data_out)},  {OPT_STOP_PATH, OPT_FIELD(stop_path)},
    {OPT_JSON, OPT_FIELD(json_path)},       {OPT_DEVICES, OPT_FIELD(devices_spec)},
    {OPT_DATA, OPT_FIELD(data_path)},
};

/* The options that take a number of MiB or seconds, or a fraction. */
static mr_status parse_real_option(int o, const char *arg, mr_train_options *c, mr_error *err) {
    char *end;
    switch (o) {
    case OPT_BUCKET:
        c->bucket_mb = strtod(arg, &end);
        if (end == arg || *end != '\0' || !(c->bucket_mb >= 0.0) || c->bucket_mb > 4096)
            return mr_error_set(err, MR_ERR_USAGE,
                                "--bucket-mb %s: expected a number of MiB in [0, 4096]", arg);
        return MR_OK;
    case OPT_TIMEOUT:
        c->timeout = mr_comm_parse_timeout(arg);
        if (c->timeout <= 0.0)
            return mr_error_set(err, MR_ERR_USAGE,
                                "--collective-timeout %s: expected a number of seconds > 0", arg);
        return MR_OK;
    case OPT_VALIDATION_SPLIT:
        c->validation_split = strtod(arg, &end);
        if (end == arg || *end != '\0' || !(c->validation_split >= 0.0) ||
            !(c->validation_split < 1.0))
            return mr_error_set(err, MR_ERR_USAGE,
                                "--validation-split %s: expected a fraction in [0, 1)", arg);
        return MR_OK;
    default: /* OPT_STOP_BUDGET */
        c->stop_budget = strtod(arg, &end);
        if (end == arg || *end != '\0' || !(c->stop_budget > 0.0) || c->stop_budget > 86400)
            return mr_error_set(err, MR_ERR_USAGE,
                                "--stop-budget %s: expected a number of seconds in (0, 86400]",
                                arg);
        return MR_OK;
    }
}

/* The options that ask for something else than training (c->action). */
static mr_status parse_action_option(int o, const char *arg, mr_train_options *c, mr_error *err) {
    switch (o) {
    case OPT_VERSION:
        c->action = MR_TRAIN_VERSION;
        return MR_OK;
    case OPT_HELP_CONFIG:
        if (arg != NULL && strcmp(arg, "markdown") != 0)
            return mr_error_set(err, MR_ERR_USAGE,
                                "--help-config=%s: the only format is 'markdown'", arg);
        c->action = MR_TRAIN_HELP_CONFIG;
        c->markdown = arg != NULL;
        return MR_OK;
    case OPT_LIST:
        c->action = MR_TRAIN_LIST;
        return MR_OK;
    default: /* 'h', OPT_HELP */
        c->action = MR_TRAIN_HELP;
        return MR_OK;
    }
}

/* One option that getopt_long returned (o), with its value optarg. */
static mr_status parse_option(int o, char **argv, mr_train_options *c, mr_error *err) {
    for (size_t i = 0; i < sizeof int_options / sizeof int_options[0]; i++) {
        if (int_options[i].code != o) continue;
        long long *v = (long long *)((char *)c + int_options[i].offset);
        if (!mr_cli_parse_long(int_options[i].name, optarg, int_options[i].lo, int_options[i].hi, v,
                               err))
            return err->status;
        return MR_OK;
    }
    for (size_t i = 0; i < sizeof text_options / sizeof text_options[0]; i++)
        if (text_options[i].code == o) {
            *(const char **)((char *)c + text_options[i].offset) = optarg;
            return MR_OK;
        }
    switch (o) {
    case OPT_BUCKET:
    case OPT_TIMEOUT:
    case OPT_STOP_BUDGET:
    case OPT_VALIDATION_SPLIT:
        return parse_real_option(o, optarg, c, err);
    case OPT_DRY_RUN:
        c->dry_run = 1;
        return MR_OK;
    case OPT_NO_CUDA_GRAPHS:
        c->no_cuda_graphs = 1;
        return MR_OK;
    case OPT_STOP_SIGNALS:
        return mr_train_parse_stop_signals(optarg, c->stop_signals, &c->n_stop_signals, err);
    case OPT_QUIET:
        c->quiet = 1;
        return MR_OK;
    case OPT_VERBOSE: {
        long long v;
        if (!mr_cli_parse_long("--verbose", optarg, 0, 2, &v, err)) return err->status;
        c->quiet = v == 0;
        c->no_bar = v == 2;
        return MR_OK;
    }
    case 'h':
    case OPT_HELP:
    case OPT_VERSION:
    case OPT_HELP_CONFIG:
    case OPT_LIST:
        return parse_action_option(o, optarg, c, err);
    default:
        return mr_cli_bad_option(argv, err);
    }
}

/* After the options: one MODEL.cfg, and no options that contradict each other. */
static mr_status check_operands(int argc, char **argv, mr_train_options *c, mr_error *err) {
    if (optind != argc - 1)
        return mr_error_set(err, MR_ERR_USAGE, "%s (see --help)",
                            optind == argc ? "missing MODEL.cfg" : "more than one MODEL.cfg given");
    c->cfg_path = argv[optind];
    if (c->resume && c->init_weights)
        return mr_error_set(err, MR_ERR_USAGE,
                            "--resume and --init-weights: a resumed run has its weights already");
    if (c->synthetic > 0 && c->data_path)
        return mr_error_set(err, MR_ERR_USAGE,
                            "--synthetic and --data: the synthetic examples replace the data");
    if (c->dry_run && c->data_out)
        return mr_error_set(err, MR_ERR_USAGE,
                            "--dry-run and --write-data: a dry run writes nothing");
    return MR_OK;
}

mr_status mr_train_parse_options(int argc, char **argv, mr_train_options *c, mr_error *err) {
    *c = (mr_train_options){.action = MR_TRAIN_RUN,
                            .epochs = -1,
                            .seed = -1,
                            .devices_spec = "auto",
                            .display_every = -1,
                            .warmup_steps = -1,
                            .batch_size = -1,
                            .validation_split = -1.0,
                            .bucket_mb = -1.0, /* the devices' default */
                            .stop_signals = {SIGTERM, SIGINT, SIGUSR1},
                            .n_stop_signals = 3,
                            .stop_budget = 25.0};
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        MR_CHECK(parse_option(o, argv, c, err));
        /* --help, --version, --help-config, --list-devices: nothing else is read */
        if (c->action != MR_TRAIN_RUN) return MR_OK;
    }
    return check_operands(argc, argv, c, err);
}

mr_status mr_train_parse_stop_signals(const char *list, int *sigs, int *n, mr_error *err) {
    /* the signals a batch system or a VM's shutdown may send first */
    static const struct {
        const char *name;
        int sig;
    } known[] = {{"TERM", SIGTERM}, {"INT", SIGINT},   {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
                 {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"XCPU", SIGXCPU}, {"ALRM", SIGALRM}};
    *n = 0;
    if (strcmp(list, "none") == 0) return MR_OK;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        char word[32];
        if (len == 0 || len >= sizeof word)
            return mr_error_set(
                err, MR_ERR_USAGE,
                "--stop-signals %s: expected a list such as TERM,INT,USR1 (or none)", list);
        memcpy(word, p, len);
        word[len] = '\0';
        const char *name = strncmp(word, "SIG", 3) == 0 ? word + 3 : word;
        int sig = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strcmp(name, known[i].name) == 0) sig = known[i].sig;
        char *end;
        long v = strtol(word, &end, 10);
        if (sig == 0 && end != word && *end == '\0') {
            for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
                if (v == known[i].sig) sig = known[i].sig;
        }
        if (sig == 0)
            return mr_error_set(err, MR_ERR_USAGE,
                                "--stop-signals %s: '%s' is not a signal that can stop training "
                                "(TERM, INT, USR1, USR2, HUP, QUIT, XCPU, ALRM)",
                                list, word);
        int dup = 0;
        for (int i = 0; i < *n; i++)
            dup |= sigs[i] == sig;
        if (!dup) {
            if (*n == MR_TRAIN_MAX_STOP_SIGNALS)
                return mr_error_set(err, MR_ERR_USAGE, "--stop-signals %s: too many signals", list);
            sigs[(*n)++] = sig;
        }
        if (p[len] == '\0') break;
        p += len + 1;
    }
    return MR_OK;
}

/* The [data] files the run reads, as "[data] KEY" uses (none with --synthetic). */
static size_t data_uses(const mr_train_options *c, const mr_config *cfg, mr_path_use *u) {
    const mr_data_cfg *d = &cfg->data;
    if (c->synthetic > 0) return 0;
    const mr_path_use all[] = {
        {"[data] train_images", d->train_images, 0}, {"[data] train_labels", d->train_labels, 0},
        {"[data] val_images", d->val_images, 0},     {"[data] val_labels", d->val_labels, 0},
        {"[data] test_images", d->test_images, 0},   {"[data] test_labels", d->test_labels, 0}};
    memcpy(u, all, sizeof all);
    return sizeof all / sizeof all[0];
}

/* A run with no training data: a Keras model file holds none, a .cfg without [data]. */
static mr_status check_has_data(const mr_train_options *c, const mr_config *cfg, mr_error *err) {
    if (c->synthetic > 0 || cfg->data.train_images[0] != '\0') return MR_OK;
    if (mr_keras_import_is_model(c->cfg_path))
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: a Keras model file holds no data: give --data FILE.npz (x_train, "
                            "y_train, x_test, y_test) or --synthetic N",
                            c->cfg_path);
    return mr_error_set(err, MR_ERR_CONFIG,
                        "%s: no [data] train_images: give them there, --data FILE.npz or "
                        "--synthetic N",
                        c->cfg_path);
}

mr_status mr_train_check_paths(const mr_train_options *c, const mr_config *cfg, mr_error *err) {
    MR_CHECK(check_has_data(c, cfg, err));
    mr_path_use u[32];
    size_t n = 0;
    u[n++] = (mr_path_use){"MODEL.cfg", c->cfg_path, 0};
    n += data_uses(c, cfg, u + n);
    if (c->synthetic <= 0) u[n++] = (mr_path_use){"--data", c->data_path, 0};
    const size_t data_end = n;
    u[n++] = (mr_path_use){"--init-weights", c->init_weights, 0};
    const size_t resume = n;
    const int resume_file = c->resume && strcmp(c->resume, "auto") != 0;
    u[n++] = (mr_path_use){"--resume", resume_file ? c->resume : NULL, 0};
    /* the outputs, from the table of options that name files; the
     * checkpoints last */
    const struct {
        const char *opt;
        const char *path;
        int hdf5; /* HDF5 writes it: it must be a regular file */
    } outs[] = {{"--json", c->json_path, 0},
                {"--metrics", c->metrics_path, 0},
                {"--log", c->log_path, 0},
                {"--trace", c->trace_path, 0},
                {"--write-data", c->data_out, 1},
                {"--save", c->save_path, 1},
                {"--checkpoint-on-signal", c->stop_path, 1}};
    /* a stop's checkpoint is resumed from: HDF5, not a Keras archive */
    if (c->stop_path != NULL && mr_keras_archive_named(c->stop_path))
        return mr_error_set(err, MR_ERR_USAGE,
                            "--checkpoint-on-signal %s: a checkpoint is an HDF5 file (.h5); a "
                            ".keras archive holds no training state to resume from",
                            c->stop_path);
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        if (outs[i].hdf5) MR_CHECK(mr_path_check_regular(outs[i].opt, outs[i].path, 0, err));
        u[n++] = (mr_path_use){outs[i].opt, outs[i].path, 1};
    }
    for (size_t i = 0; i <= resume; i++)
        MR_CHECK(mr_path_check_regular(u[i].opt, u[i].path, i > 0 && i < data_end, err));
    /* a checkpoint (--save, a stop's) may replace the --resume file it went
     * on from, as --resume auto's do (the write is atomic, after the read):
     * --resume is checked against the other outputs alone */
    const char *resume_path = u[resume].path;
    u[resume].path = NULL;
    MR_CHECK(mr_path_check_distinct(u, n, err));
    u[resume].path = resume_path;
    return mr_path_check_distinct(u + resume, n - resume - 2, err);
}
