/* mirrored_train: train a model defined in a .cfg file on every local device.
 *
 *   mirrored_train MODEL.cfg [options]
 *
 * The only place (with the other executables) that prints and exits: library
 * calls return a status with a one-line message, turned here into
 * "mirrored_train: message" on stderr and an exit code (see usage()). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../models/model.h"
#include "../runtime/dataset.h"
#include "../strategies/devices.h"
#include "../strategies/strategy.h"
#include "progress.h"

enum { EXIT_OK = 0, EXIT_FAILURE_RUN = 1, EXIT_BAD_INPUT = 2 };

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
            "  --quiet            print only the final test result\n"
            "  --help-config[=markdown]  print every .cfg section and key with defaults and\n"
            "                     ranges (markdown: the README's table)\n"
            "  --help             this text\n"
            "  --version          print the version\n"
            "\n"
            "Exit status: 0 success; 1 failure while running (out of memory, a replica or\n"
            "collective failed, an output file could not be written); 2 bad input (options,\n"
            ".cfg file, data files).\n",
            prog);
}

static int exit_code(mr_status st) {
    switch (st) {
    case MR_OK:
        return EXIT_OK;
    case MR_ERR_USAGE:
    case MR_ERR_CONFIG:
    case MR_ERR_IO:
    case MR_ERR_DATA:
    case MR_ERR_UNSUPPORTED:
        return EXIT_BAD_INPUT;
    default:
        return EXIT_FAILURE_RUN;
    }
}

static int die(const mr_error *err) {
    fprintf(stderr, "%s: %s\n", prog, err->msg);
    return exit_code(err->status);
}

static int parse_long(const char *opt, const char *s, long long lo, long long hi, long long *out,
                      mr_error *err) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno || v < lo || v > hi) {
        mr_error_set(err, MR_ERR_USAGE, "%s %s: expected an integer in [%lld, %lld]", opt, s, lo,
                     hi);
        return 0;
    }
    *out = v;
    return 1;
}

/* Writes the JSON summary via a temporary file renamed into place. */
static mr_status write_json(const char *path, const mr_progress *pg, const mr_fit_plan *plan,
                            const mr_device_set *devs, int epochs, int has_test, double test_loss,
                            double test_acc, uint64_t weights_hash, mr_error *err) {
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
    fprintf(f, "  \"replicas\": %d,\n  \"devices\": [", plan->replicas);
    for (int i = 0; i < devs->count; i++)
        fprintf(f, "%s\"%s:%d\"", i ? ", " : "", devs->kind == MR_DEVICE_CPU ? "cpu" : "gpu",
                devs->ordinals[i]);
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

/* Fails early (before hours of training) if an output path cannot be created. */
static mr_status check_writable(const char *opt, const char *path, mr_error *err) {
    if (path == NULL) return MR_OK;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_IO, "%s %s: cannot write: %s", opt, path, strerror(errno));
    fclose(f);
    unlink(tmp);
    return MR_OK;
}

/* FNV-1a of the final weights and state: two runs are bitwise identical iff equal. */
static uint64_t params_hash(const mr_model *m) {
    uint64_t h = 0xCBF29CE484222325ull;
    const unsigned char *b = (const unsigned char *)m->params;
    for (size_t i = 0; i < sizeof(float) * (size_t)m->n_params; i++)
        h = (h ^ b[i]) * 0x100000001B3ull;
    b = (const unsigned char *)m->state;
    for (size_t i = 0; m->state && i < sizeof(float) * (size_t)m->n_state; i++)
        h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

static void model_name(const char *cfg_path, char *buf, size_t n) {
    const char *base = strrchr(cfg_path, '/');
    base = base ? base + 1 : cfg_path;
    snprintf(buf, n, "%s", base);
    char *dot = strrchr(buf, '.');
    if (dot) *dot = '\0';
}

int main(int argc, char **argv) {
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
        OPT_HELP_CONFIG
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
        {"help-config", optional_argument, NULL, OPT_HELP_CONFIG},
        {NULL, 0, NULL, 0},
    };
    mr_error err = {0};
    long long epochs = -1, seed = -1, check_sync = 0;
    double bucket_mb = 0.0;
    const char *metrics_path = NULL, *json_path = NULL, *devices_spec = "auto";
    int quiet = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_EPOCHS:
            if (!parse_long("--epochs", optarg, 1, 100000, &epochs, &err)) return die(&err);
            break;
        case OPT_SEED:
            if (!parse_long("--seed", optarg, 0, INT64_MAX, &seed, &err)) return die(&err);
            break;
        case OPT_CHECK_SYNC:
            if (!parse_long("--check-sync", optarg, 1, 1000000000, &check_sync, &err))
                return die(&err);
            break;
        case OPT_BUCKET: {
            char *end;
            bucket_mb = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(bucket_mb >= 0.0) || bucket_mb > 4096) {
                mr_error_set(&err, MR_ERR_USAGE,
                             "--bucket-mb %s: expected a number of MiB in [0, 4096]", optarg);
                return die(&err);
            }
            break;
        }
        case OPT_METRICS:
            metrics_path = optarg;
            break;
        case OPT_JSON:
            json_path = optarg;
            break;
        case OPT_QUIET:
            quiet = 1;
            break;
        case OPT_DEVICES:
            devices_spec = optarg;
            break;
        case 'h':
        case OPT_HELP:
            usage(stdout);
            return EXIT_OK;
        case OPT_VERSION:
            printf("mirrored %s\n", MR_VERSION);
            return EXIT_OK;
        case OPT_HELP_CONFIG:
            if (optarg != NULL && strcmp(optarg, "markdown") != 0) {
                mr_error_set(&err, MR_ERR_USAGE, "--help-config=%s: the only format is 'markdown'",
                             optarg);
                return die(&err);
            }
            mr_config_write_reference(stdout, optarg != NULL);
            return EXIT_OK;
        case OPT_LIST:
            mr_devices_list(stdout);
            return EXIT_OK;
        default:
            /* getopt sets optopt to the short option, or to a long option's code */
            if (optopt > 0 && optopt < 256)
                fprintf(stderr, "%s: -%c: unknown option or missing value (see --help)\n", prog,
                        optopt);
            else
                fprintf(stderr, "%s: %s: unknown option or missing value (see --help)\n", prog,
                        argv[optind - 1]);
            return EXIT_BAD_INPUT;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "%s: %s (see --help)\n", prog,
                optind == argc ? "missing MODEL.cfg" : "more than one MODEL.cfg given");
        return EXIT_BAD_INPUT;
    }
    const char *cfg_path = argv[optind];

    mr_config cfg;
    if (mr_config_load(cfg_path, &cfg, &err) != MR_OK) return die(&err);
    int rc = EXIT_OK;
    mr_dataset train = {0}, test = {0};
    mr_strategy *strategy = NULL;
    FILE *csv = NULL;
    mr_strategy_opts opts = {0};
    if (mr_devices_parse(devices_spec, &opts.devices, &err) != MR_OK) goto fail;
    if (epochs > 0) cfg.net.epochs = (int)epochs;
    if (seed >= 0) cfg.net.seed = seed;
    opts.seed = (uint64_t)cfg.net.seed;
    opts.check_sync = (int)check_sync;
    opts.bucket_floats = (size_t)(bucket_mb * 1024 * 1024 / sizeof(float));

    /* the model's shapes first: a .cfg mistake should not wait for the data */
    mr_model probe;
    if (mr_model_init(&probe, &cfg, 1, 0, &err) != MR_OK) goto fail;
    int64_t in_size = probe.in_size;
    int classes = mr_model_classes(&probe);
    mr_model_free(&probe);
    if (check_writable("--metrics", metrics_path, &err) != MR_OK) goto fail;
    if (check_writable("--json", json_path, &err) != MR_OK) goto fail;

    const mr_data_cfg *d = &cfg.data;
    if (mr_dataset_load(&train, d->train_images, d->train_labels, &err) != MR_OK) goto fail;
    if (mr_dataset_check_row(&train, in_size, d->train_images, &err) != MR_OK) goto fail;
    if (mr_dataset_check_labels(&train, classes, d->train_labels, &err) != MR_OK) goto fail;
    int has_test = d->test_images[0] != '\0';
    if (has_test) {
        if (mr_dataset_load(&test, d->test_images, d->test_labels, &err) != MR_OK) goto fail;
        if (mr_dataset_check_row(&test, in_size, d->test_images, &err) != MR_OK) goto fail;
        if (mr_dataset_check_labels(&test, classes, d->test_labels, &err) != MR_OK) goto fail;
    }
    /* Keras's validation_split: the last fraction, taken before shuffling */
    /* + 1e-4: 0.1f is not 0.1, and 60000 x (1 - 0.1f) must still give 54000 */
    int64_t n_train = (int64_t)((double)train.n * (1.0 - (double)cfg.net.validation_split) + 1e-4);
    int64_t n_val = train.n - n_train;
    if (n_train < 1) {
        mr_error_set(&err, MR_ERR_CONFIG, "%s: validation_split leaves no training examples",
                     cfg_path);
        goto fail;
    }
    train.scale = test.scale = d->scale;
    if (d->standardize) {
        /* statistics of the training split only, applied to everything */
        if (mr_dataset_standardize(&train, &train, 0, n_train, &err) != MR_OK) goto fail;
        if (has_test && mr_dataset_standardize(&test, &train, 0, n_train, &err) != MR_OK) goto fail;
    }
    if (mr_strategy_create(&cfg, &opts, n_train, &strategy, &err) != MR_OK) goto fail;
    const mr_fit_plan *plan = mr_strategy_plan(strategy);
    if (metrics_path != NULL && (csv = fopen(metrics_path, "w")) == NULL) {
        mr_error_set(&err, MR_ERR_IO, "--metrics %s: cannot write: %s", metrics_path,
                     strerror(errno));
        goto fail;
    }

    if (!quiet) {
        char name[256], devs[512];
        model_name(cfg_path, name, sizeof name);
        mr_model_summary(mr_strategy_replica(strategy, 0), name, stdout);
        mr_devices_format(&opts.devices, devs, sizeof devs);
        printf("%d replica%s (%s), batch %d/replica", plan->replicas, plan->replicas > 1 ? "s" : "",
               devs, plan->batch);
        if (plan->accumulate > 1) printf(" x %d accumulated", plan->accumulate);
        printf(" = %d global, learning rate %g x %g = %g (%s scaling", plan->global_batch,
               plan->base_lr, plan->lr_factor, plan->base_lr * plan->lr_factor,
               cfg.net.lr_scaling == MR_LR_SCALING_LINEAR ? "linear" : "no");
        if (plan->warmup_epochs > 0)
            printf(", %g warmup epoch%s", plan->warmup_epochs, plan->warmup_epochs == 1 ? "" : "s");
        if (plan->schedule == MR_LR_SCHEDULE_COSINE)
            printf(", cosine decay to %g at epoch %d",
                   plan->base_lr * plan->lr_factor * plan->lr_alpha, cfg.net.epochs);
        printf(")\n");
        printf("Train on %lld samples", (long long)n_train);
        if (n_val) printf(", validate on %lld samples", (long long)n_val);
        printf(", %lld steps per epoch\n", (long long)plan->steps_per_epoch);
        fflush(stdout);
    }
    mr_progress pg;
    mr_progress_init(&pg, stdout, quiet, cfg.net.epochs, csv);
    mr_fit_callbacks cb = {
        .user = &pg, .on_step = mr_progress_on_step, .on_epoch_end = mr_progress_on_epoch_end};
    mr_augment aug = {0}, *augp = NULL;
    if (cfg.augment.flip || cfg.augment.shift) {
        const mr_layer_cfg *in = &cfg.layers[0];
        if (in->shape_rank != 3) {
            mr_error_set(&err, MR_ERR_CONFIG, "%s:%d: [augment] needs an image input shape H,W,C",
                         cfg_path, in->line);
            goto fail;
        }
        aug = (mr_augment){.flip = cfg.augment.flip,
                           .shift = cfg.augment.shift,
                           .h = in->shape[0],
                           .w = in->shape[1],
                           .c = in->shape[2],
                           .seed = opts.seed};
        augp = &aug;
    }
    if (mr_strategy_fit(strategy, &train, n_train, n_train, n_val, cfg.net.epochs, augp, &cb,
                        &err) != MR_OK)
        goto fail;
    double test_loss = 0.0, test_acc = 0.0;
    if (has_test) {
        if (mr_strategy_evaluate(strategy, &test, 0, test.n, &test_loss, &test_acc, &err) != MR_OK)
            goto fail;
        printf("Test loss: %.4f - test accuracy: %.4f\n", test_loss, test_acc);
    }
    if (csv != NULL) {
        int bad = fclose(csv) != 0;
        csv = NULL;
        if (bad) {
            mr_error_set(&err, MR_ERR_RUNTIME, "--metrics %s: cannot write", metrics_path);
            goto fail;
        }
    }
    if (json_path != NULL &&
        write_json(json_path, &pg, plan, &opts.devices, cfg.net.epochs, has_test, test_loss,
                   test_acc, params_hash(mr_strategy_replica(strategy, 0)), &err) != MR_OK)
        goto fail;
    goto done;
fail:
    rc = die(&err);
done:
    if (csv) fclose(csv);
    mr_strategy_destroy(strategy);
    mr_dataset_free(&train);
    mr_dataset_free(&test);
    mr_config_free(&cfg);
    return rc;
}
