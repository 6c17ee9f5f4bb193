/* train_options.c: mirrored_train's command line (train_options.h). */
#include "launch/train_options.h"

#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm.h"
#include "launch/cli.h"

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
            "  --epochs N         override [net] epochs\n"
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
            "                     (default 0: one all-reduce after backward)\n"
            "  --save FILE.h5     write the trained model (Keras .h5 layout, with what\n"
            "                     resuming needs) after training\n"
            "  --resume FILE|auto go on from a checkpoint (auto: the newest of [net]\n"
            "                     checkpoint); the rest of the run is bitwise the\n"
            "                     uninterrupted one with the same replica count\n"
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
            ".cfg file, data files); 128+N stopped by signal N (143: SIGTERM, 130: SIGINT,\n"
            "138: SIGUSR1) with a checkpoint: the same command with --resume auto goes on.\n"
            "\n"
            "Multi-process: mpirun -np N %s MODEL.cfg trains one job over N processes\n"
            "(each takes its share of its node's cores: --devices auto; cpu:N may not ask for\n"
            "more). Environment: MIRRORED_COMM_TIMEOUT (seconds), MIRRORED_RANKS_PER_NODE=K\n"
            "(treat K consecutive ranks as one node, to exercise the cross-node path on one\n"
            "machine).\n",
            prog, prog);
}

mr_status mr_train_parse_options(int argc, char **argv, mr_train_options *c, mr_error *err) {
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
        OPT_WARMUP_STEPS
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
        {NULL, 0, NULL, 0},
    };
    *c = (mr_train_options){.action = MR_TRAIN_RUN,
                            .epochs = -1,
                            .seed = -1,
                            .devices_spec = "auto",
                            .display_every = -1,
                            .warmup_steps = -1,
                            .stop_signals = {SIGTERM, SIGINT, SIGUSR1},
                            .n_stop_signals = 3,
                            .stop_budget = 25.0};
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
        case OPT_MAX_STEPS:
            if (!mr_cli_parse_long("--max-steps", optarg, 1, INT64_MAX, &c->max_steps, err))
                return err->status;
            break;
        case OPT_DRY_RUN:
            c->dry_run = 1;
            break;
        case OPT_SYNTHETIC:
            if (!mr_cli_parse_long("--synthetic", optarg, 1, 1LL << 31, &c->synthetic, err))
                return err->status;
            break;
        case OPT_DISPLAY_EVERY:
            if (!mr_cli_parse_long("--display-every", optarg, 1, 1000000000, &c->display_every,
                                   err))
                return err->status;
            break;
        case OPT_WARMUP_STEPS:
            if (!mr_cli_parse_long("--warmup-steps", optarg, 0, 1000000000, &c->warmup_steps, err))
                return err->status;
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
        case OPT_TRACE:
            c->trace_path = optarg;
            break;
        case OPT_WRITE_DATA:
            c->data_out = optarg;
            break;
        case OPT_STOP_SIGNALS:
            MR_CHECK(mr_train_parse_stop_signals(optarg, c->stop_signals, &c->n_stop_signals, err));
            break;
        case OPT_STOP_PATH:
            c->stop_path = optarg;
            break;
        case OPT_STOP_BUDGET: {
            char *end;
            c->stop_budget = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(c->stop_budget > 0.0) || c->stop_budget > 86400)
                return mr_error_set(err, MR_ERR_USAGE,
                                    "--stop-budget %s: expected a number of seconds in (0, 86400]",
                                    optarg);
            break;
        }
        case OPT_JSON:
            c->json_path = optarg;
            break;
        case OPT_QUIET:
            c->quiet = 1;
            break;
        case OPT_VERBOSE: {
            long long v;
            if (!mr_cli_parse_long("--verbose", optarg, 0, 2, &v, err)) return err->status;
            c->quiet = v == 0;
            c->no_bar = v == 2;
            break;
        }
        case OPT_DEVICES:
            c->devices_spec = optarg;
            break;
        case 'h':
        case OPT_HELP:
            c->action = MR_TRAIN_HELP;
            return MR_OK;
        case OPT_VERSION:
            c->action = MR_TRAIN_VERSION;
            return MR_OK;
        case OPT_HELP_CONFIG:
            if (optarg != NULL && strcmp(optarg, "markdown") != 0)
                return mr_error_set(err, MR_ERR_USAGE,
                                    "--help-config=%s: the only format is 'markdown'", optarg);
            c->action = MR_TRAIN_HELP_CONFIG;
            c->markdown = optarg != NULL;
            return MR_OK;
        case OPT_LIST:
            c->action = MR_TRAIN_LIST;
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
    if (c->dry_run && c->data_out)
        return mr_error_set(err, MR_ERR_USAGE,
                            "--dry-run and --write-data: a dry run writes nothing");
    return MR_OK;
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
