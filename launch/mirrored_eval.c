/* mirrored_eval: evaluate a trained model on any machine's CPUs (or, later,
 * GPUs), from the checkpoint alone.
 *
 *   mirrored_eval CHECKPOINT.h5 [--data IMAGES[,LABELS]] [--batch N] [--devices SPEC]
 *                 [--json FILE] [--predict OUT.npy] [--cfg MODEL.cfg] [--top-k K]
 *                 [--per-class] [--quiet]
 *
 * The model is rebuilt from the .cfg text the checkpoint carries, its weights
 * read, and the data preprocessed with the statistics training used (also
 * stored). The default data is the test set the .cfg names. Batches of N
 * rows per replica go through the replicas (a checkpoint trained on any
 * device count or kind evaluates on any other); memory follows the batch,
 * and --predict writes each batch's class probabilities as it goes (with
 * --data IMAGES alone, no labels, that is all it does). A model
 * that Keras wrote (model.save("x.h5"), no /mirrored group) evaluates with
 * --cfg naming a .cfg of the same architecture. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backends.h"
#include "models/keras.h"
#include "models/model.h"
#include "runtime/array.h"
#include "runtime/image_folder.h"
#include "strategies/checkpoint.h"
#include "strategies/devices.h"
#include "strategies/strategy.h"
#include "launch/train_checkpoints.h"
#include "launch/cli.h"
#include "runtime/atomic_file.h"
#include "runtime/json.h"

static const char *prog = "mirrored_eval";

static void usage(FILE *out) {
    fprintf(out,
            "Usage: %s CHECKPOINT.h5 [options]\n"
            "Evaluate a trained model: loss, accuracy, per-class accuracy and the confusion\n"
            "matrix, on the test set its .cfg names or on --data.\n"
            "\n"
            "Options:\n"
            "  --data IMAGES[,LABELS]  evaluate on these files (IDX, .npy, file.h5:/dataset);\n"
            "                     IMAGES alone, with --predict: the probabilities only\n"
            "  --batch N          rows per replica per batch (default 256)\n"
            "  --devices SPEC     auto (default), cpu, cpu:N (as mirrored_train)\n"
            "  --json FILE        write test_loss, test_accuracy, per_class and the confusion\n"
            "                     matrix as JSON\n"
            "  --predict OUT.npy  write the class probabilities, (examples, classes) float32\n"
            "  --cfg MODEL.cfg    the architecture, for a model Keras wrote (no /mirrored):\n"
            "                     x.h5, x.keras or x.weights.h5\n"
            "  --top-k K          also the top-K accuracy, Keras's\n"
            "                     sparse_top_k_categorical_accuracy (default: [net] top_k;\n"
            "                     0: none)\n"
            "  --per-class        the per-class table without the confusion matrix\n"
            "  --quiet            print only the loss and accuracy line\n"
            "  --help, --version\n"
            "\n"
            "Exit status: 0 success; 1 failure while running; 2 bad input.\n",
            prog);
}

typedef struct eval_cli {
    const char *checkpoint, *data, *devices, *json, *predict, *cfg;
    long long batch;
    long long top_k; /* -1: [net] top_k */
    int per_class, quiet, help, version;
} eval_cli;

static mr_status parse(int argc, char **argv, eval_cli *c, mr_error *err) {
    enum {
        O_DATA = 1000,
        O_BATCH,
        O_DEVICES,
        O_JSON,
        O_PREDICT,
        O_CFG,
        O_TOP_K,
        O_PER_CLASS,
        O_QUIET,
        O_HELP,
        O_VER
    };
    static const struct option opts[] = {{"data", required_argument, NULL, O_DATA},
                                         {"batch", required_argument, NULL, O_BATCH},
                                         {"devices", required_argument, NULL, O_DEVICES},
                                         {"json", required_argument, NULL, O_JSON},
                                         {"predict", required_argument, NULL, O_PREDICT},
                                         {"cfg", required_argument, NULL, O_CFG},
                                         {"top-k", required_argument, NULL, O_TOP_K},
                                         {"per-class", no_argument, NULL, O_PER_CLASS},
                                         {"quiet", no_argument, NULL, O_QUIET},
                                         {"help", no_argument, NULL, O_HELP},
                                         {"version", no_argument, NULL, O_VER},
                                         {NULL, 0, NULL, 0}};
    *c = (eval_cli){.devices = "auto", .batch = 256, .top_k = -1};
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case O_DATA:
            c->data = optarg;
            break;
        case O_BATCH:
            if (!mr_cli_parse_long("--batch", optarg, 1, 1 << 20, &c->batch, err))
                return err->status;
            break;
        case O_DEVICES:
            c->devices = optarg;
            break;
        case O_JSON:
            c->json = optarg;
            break;
        case O_PREDICT:
            c->predict = optarg;
            break;
        case O_CFG:
            c->cfg = optarg;
            break;
        case O_TOP_K:
            if (!mr_cli_parse_long("--top-k", optarg, 0, 1 << 20, &c->top_k, err))
                return err->status;
            break;
        case O_PER_CLASS:
            c->per_class = 1;
            break;
        case O_QUIET:
            c->quiet = 1;
            break;
        case 'h':
        case O_HELP:
            c->help = 1;
            return MR_OK;
        case O_VER:
            c->version = 1;
            return MR_OK;
        default:
            return mr_error_set(err, MR_ERR_USAGE,
                                "%s: unknown option or missing value (see --help)",
                                optopt > 0 && optopt < 256 ? "option" : argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return mr_error_set(err, MR_ERR_USAGE, "%s (see --help)",
                            optind == argc ? "missing CHECKPOINT.h5" : "more than one checkpoint");
    c->checkpoint = argv[optind];
    return MR_OK;
}

/* The model's .cfg: the checkpoint's own (its data paths start from the
 * folder the .cfg was read from), or --cfg's for a file Keras wrote. */
static mr_status load_config(const eval_cli *c, mr_checkpoint *ck, int *has_ck, mr_config *cfg,
                             mr_error *err) {
    mr_error ck_err = {0};
    mr_status st = mr_checkpoint_load(c->checkpoint, ck, &ck_err);
    *has_ck = st == MR_OK;
    if (c->cfg != NULL) return mr_config_load(c->cfg, cfg, err);
    if (st != MR_OK) {
        if (st == MR_ERR_DATA && strstr(ck_err.msg, "no /mirrored group"))
            return mr_error_set(err, MR_ERR_DATA,
                                "%s: not a mirrored checkpoint (no /mirrored group); for weights "
                                "Keras wrote, name the architecture with --cfg MODEL.cfg",
                                c->checkpoint);
        return mr_error_set(err, st, "%s", ck_err.msg);
    }
    char folder[MR_PATH_MAX];
    snprintf(folder, sizeof folder, "%s", ck->cfg_path);
    return mr_config_parse(ck->cfg_text, ck->cfg_path, dirname(folder), cfg, err);
}

/* --predict: an NPY 1.0 header for (n, k) float32, then rows written by
 * each replica at their offsets (pwrite: threads need no lock). */
typedef struct predictions {
    int fd;
    off_t data_start;
    int k;
    int failed;
} predictions;

static mr_status open_predictions(predictions *p, const char *path, int64_t n, int k,
                                  mr_error *err) {
    p->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    p->k = k;
    p->failed = 0;
    if (p->fd < 0)
        return mr_error_set(err, MR_ERR_IO, "--predict %s: cannot write: %s", path,
                            strerror(errno));
    char header[128];
    int len = snprintf(header, sizeof header,
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %d), }",
                       (long long)n, k);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    int hlen = len + pad + 1;
    pre[8] = (unsigned char)(hlen & 0xff), pre[9] = (unsigned char)(hlen >> 8);
    char full[256];
    memcpy(full, pre, 10);
    memcpy(full + 10, header, (size_t)len);
    memset(full + 10 + len, ' ', (size_t)pad);
    full[10 + len + pad] = '\n';
    p->data_start = 10 + hlen;
    if (write(p->fd, full, (size_t)p->data_start) != p->data_start) {
        close(p->fd);
        unlink(path);
        return mr_error_set(err, MR_ERR_IO, "--predict %s: cannot write: %s", path,
                            strerror(errno));
    }
    return MR_OK;
}

static void write_probs(void *user, int64_t row, int n, const float *probs) {
    predictions *p = user;
    size_t bytes = sizeof(float) * (size_t)n * (size_t)p->k;
    off_t at = p->data_start + (off_t)(sizeof(float) * (size_t)row * (size_t)p->k);
    if (pwrite(p->fd, probs, bytes, at) != (ssize_t)bytes) p->failed = 1;
}

static mr_status write_json(const char *path, double loss, double acc, int top_k, double top_k_acc,
                            int64_t n, const double *conf, int k, mr_error *err) {
    mr_atomic_file af;
    mr_error why = {0};
    if (mr_atomic_file_open(&af, path, &why) != MR_OK)
        return mr_error_set(err, MR_ERR_IO, "--json %s", why.msg);
    mr_json j;
    mr_json_init(&j, af.f, 2);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_key(&j, "examples"), mr_json_int(&j, (long long)n);
    mr_json_key(&j, "test_loss"), mr_json_double(&j, loss, "%.6f");
    mr_json_key(&j, "test_accuracy"), mr_json_double(&j, acc, "%.6f");
    if (top_k > 0) {
        mr_json_key(&j, "top_k"), mr_json_int(&j, top_k);
        mr_json_key(&j, "test_sparse_top_k_categorical_accuracy");
        mr_json_double(&j, top_k_acc, "%.6f");
    }
    mr_json_key(&j, "per_class");
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    for (int c = 0; c < k; c++) {
        double count = 0.0;
        for (int q = 0; q < k; q++)
            count += conf[c * k + q];
        mr_json_begin_object(&j, MR_JSON_INLINE);
        mr_json_key(&j, "class"), mr_json_int(&j, c);
        mr_json_key(&j, "examples"), mr_json_double(&j, count, "%.0f");
        mr_json_key(&j, "accuracy");
        mr_json_double(&j, count > 0 ? conf[c * k + c] / count : 0.0, "%.6f");
        mr_json_end_object(&j);
    }
    mr_json_end_array(&j);
    mr_json_key(&j, "confusion");
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    for (int c = 0; c < k; c++) {
        mr_json_begin_array(&j, MR_JSON_INLINE);
        for (int q = 0; q < k; q++)
            mr_json_double(&j, conf[c * k + q], "%.0f");
        mr_json_end_array(&j);
    }
    mr_json_end_array(&j);
    mr_json_end_object(&j);
    if (mr_json_finish(&j) != 0) {
        mr_atomic_file_abort(&af);
        return mr_error_set(err, MR_ERR_IO, "--json %s: cannot write: %s", path, strerror(errno));
    }
    if (mr_atomic_file_commit(&af, &why) != MR_OK)
        return mr_error_set(err, MR_ERR_IO, "--json %s", why.msg);
    return MR_OK;
}

/* Labels per example of the .cfg's model (mr_model_label_width: k for multi-label
 * binary_crossentropy), from its plan: multi-hot labels are read as they are, so their width is
 * needed before the data. */
static mr_status label_width_of(const mr_config *cfg, int *width, mr_error *err) {
    mr_model_plan plan;
    MR_CHECK(mr_model_plan_make(&plan, cfg, err));
    *width = plan.label_width;
    return MR_OK;
}

/* conf NULL: multi-label, k sigmoid outputs, whose labels are no classes to tabulate */
static void print_report(double loss, double acc, int top_k, double top_k_acc, const double *conf,
                         int k, int quiet, int per_class_only) {
    printf("Test loss: %.4f - test accuracy: %.4f", loss, acc);
    if (top_k > 0) printf(" - test_sparse_top_k_categorical_accuracy: %.4f", top_k_acc);
    printf("\n");
    if (quiet) return;
    if (conf == NULL) {
        printf("multi-label: the accuracy is binary accuracy over the %d outputs of every "
               "example; no per-class table or confusion matrix\n",
               k);
        return;
    }
    printf("\nclass  examples  accuracy\n");
    for (int c = 0; c < k; c++) {
        double count = 0.0;
        for (int j = 0; j < k; j++)
            count += conf[c * k + j];
        printf("%5d  %8.0f  %8.4f\n", c, count, count > 0 ? conf[c * k + c] / count : 0.0);
    }
    if (per_class_only) return;
    printf("\nconfusion matrix (rows: true class, columns: predicted)\n      ");
    for (int j = 0; j < k; j++)
        printf(" %6d", j);
    printf("\n");
    for (int c = 0; c < k; c++) {
        printf("%5d ", c);
        for (int j = 0; j < k; j++)
            printf(" %6.0f", conf[c * k + j]);
        printf("\n");
    }
}

int main(int argc, char **argv) {
    mr_error err = {0};
    mr_job job;
    if (mr_cli_job_init(&argc, &argv, &job, &err) != MR_OK) {
        int rc = mr_cli_die(prog, &err);
        mr_job_finalize(&job);
        return rc;
    }
    const int lead = job.rank == 0;
    eval_cli c;
    mr_status st = parse(argc, argv, &c, &err);
    if (st == MR_OK && (c.help || c.version)) {
        if (lead && c.help) usage(stdout);
        if (lead && c.version) printf("mirrored %s\n", MR_VERSION);
        mr_job_finalize(&job);
        return MR_EXIT_OK;
    }
    int rc = MR_EXIT_OK, has_ck = 0;
    mr_checkpoint ck = {0};
    mr_config cfg = {0};
    mr_dataset ds = {0};
    mr_strategy *s = NULL;
    double *conf = NULL;
    predictions pred = {.fd = -1};
    if (st == MR_OK && c.predict && job.size > 1)
        st = mr_error_set(&err, MR_ERR_USAGE, "--predict: run mirrored_eval as one process");
    /* how this node's processes share the GPUs they see: a collective, so
     * on every process before anything that may fail on one alone */
    mr_device_env env;
    char gpu_conflict[sizeof err.msg];
    /* err keeps the first message (error.h) */
    mr_status env_st = mr_devices_job_env(&job, &env, gpu_conflict, sizeof gpu_conflict, &err);
    if (st == MR_OK) st = env_st;
    if (st == MR_OK) st = load_config(&c, &ck, &has_ck, &cfg, &err);
    mr_strategy_opts opts = {.job = &job};
    if (st == MR_OK) st = mr_devices_parse(c.devices, &env, &opts.devices, &err);
    if (st == MR_OK && lead) st = mr_cli_check_writable("--json", c.json, &err);
    /* the data: --data, or the test set of the .cfg */
    char images[MR_PATH_MAX] = "", labels[MR_PATH_MAX] = "";
    if (st == MR_OK) {
        if (c.data != NULL) {
            const char *comma = strchr(c.data, ',');
            /* a folder of class folders brings its labels (its subfolders) */
            const int folder = comma == NULL && mr_image_folder_is(c.data);
            if (comma == c.data || (comma != NULL && comma[1] == '\0'))
                st = mr_error_set(&err, MR_ERR_USAGE, "--data %s: expected IMAGES,LABELS or IMAGES",
                                  c.data);
            else if (comma == NULL && !folder && c.predict == NULL)
                st = mr_error_set(&err, MR_ERR_USAGE,
                                  "--data %s: no labels, so nothing to score: add --predict "
                                  "OUT.npy to write the class probabilities",
                                  c.data);
            else if (comma == NULL && !folder && c.json != NULL)
                st = mr_error_set(&err, MR_ERR_USAGE,
                                  "--json %s: needs labels (--data IMAGES,LABELS); --data %s has "
                                  "none",
                                  c.json, c.data);
            else if (comma == NULL)
                snprintf(images, sizeof images, "%s", c.data);
            else
                snprintf(images, sizeof images, "%.*s", (int)(comma - c.data), c.data),
                    snprintf(labels, sizeof labels, "%s", comma + 1);
        } else if (cfg.data.test_images[0] == '\0') {
            st = mr_error_set(&err, MR_ERR_CONFIG,
                              "%s: its .cfg names no test set: give --data IMAGES,LABELS",
                              c.checkpoint);
        } else {
            snprintf(images, sizeof images, "%s", cfg.data.test_images);
            snprintf(labels, sizeof labels, "%s", cfg.data.test_labels);
        }
    }
    /* evaluation batches: --batch rows on every replica */
    if (st == MR_OK) {
        cfg.net.global_batch = 0;
        cfg.net.batch = (int)c.batch;
        cfg.net.accumulate = 1;
        opts.seed = (uint64_t)cfg.net.seed;
        const mr_layer_cfg *in = &cfg.layers[0];
        /* multi-label binary_crossentropy reads multi-hot rows (n, k) as they are */
        int width = 1;
        st = label_width_of(&cfg, &width, &err);
        if (st == MR_OK && width > 1)
            st = mr_dataset_load_multi_hot(&ds, images, labels[0] ? labels : NULL, width, &err);
        else if (st == MR_OK)
            st = mr_dataset_load_input(&ds, images, labels[0] ? labels : NULL, in->shape_rank,
                                       in->shape, &err);
    }
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    if (lead && !c.quiet && ds.note[0]) fprintf(stderr, "%s: note: %s\n", prog, ds.note);
    st = mr_strategy_create(&cfg, &opts, 0, &s, &err);
    if (st != MR_OK) goto agreed_failure;
    mr_model *m = mr_strategy_replica(s, 0);
    const int k = mr_model_classes(m);
    st = mr_dataset_check_row(&ds, m->in_size, images, &err);
    /* --top-k: in the .cfg every replica's model reads (creation checked [net] top_k) */
    if (st == MR_OK && c.top_k > 0 && cfg.net.loss == MR_LOSS_BINARY_CROSSENTROPY)
        st = mr_error_set(&err, MR_ERR_USAGE,
                          "--top-k %lld: does not apply to loss = binary_crossentropy", c.top_k);
    else if (st == MR_OK && c.top_k >= k)
        st = mr_error_set(&err, MR_ERR_USAGE, "--top-k %lld: must be below the %d classes", c.top_k,
                          k);
    else if (c.top_k >= 0)
        cfg.net.top_k = (int)c.top_k;
    const int labelled = labels[0] || ds.classes > 0; /* a labels file, or class folders */
    if (st == MR_OK && labelled)
        st = mr_dataset_check_labels(&ds, k, labels[0] ? labels : images, &err);
    /* preprocessing: what training used */
    if (st == MR_OK && has_ck) st = mr_ckpt_apply_preprocessing(&ck, &ds, &err);
    if (st == MR_OK && !has_ck) {
        ds.scale = cfg.data.scale;
        if (cfg.data.standardize)
            st = mr_error_set(&err, MR_ERR_UNSUPPORTED,
                              "%s: [data] standardize needs the training statistics, which only "
                              "a mirrored checkpoint carries",
                              c.cfg);
    }
    /* the weights: every process reads them, replica 0 of the job hands them on */
    if (st == MR_OK) {
        st = mr_keras_load(c.checkpoint, m, has_ck, NULL, &err);
    }
    if ((st = mr_job_agree(&job, st, &err)) != MR_OK) goto agreed_failure;
    if (mr_strategy_sync_model(s, &err) != MR_OK) goto alone_failure;
    const int multi = mr_model_label_width(m) > 1; /* multi-hot labels: no confusion matrix */
    conf = calloc((size_t)k * (size_t)k, sizeof(double));
    if (conf == NULL) {
        mr_error_set(&err, MR_ERR_NOMEM, "out of memory");
        goto alone_failure;
    }
    if (c.predict && open_predictions(&pred, c.predict, ds.n, k, &err) != MR_OK) goto alone_failure;
    mr_eval_detail detail = {.classes = k,
                             .confusion = multi ? NULL : conf,
                             .on_probs = c.predict ? write_probs : NULL,
                             .user = &pred};
    double loss, acc;
    if (mr_strategy_evaluate_detail(s, &ds, 0, ds.n, &loss, &acc, &detail, &err) != MR_OK)
        goto alone_failure;
    if (pred.fd >= 0) {
        int bad = pred.failed | (close(pred.fd) != 0);
        pred.fd = -1;
        if (bad) {
            unlink(c.predict);
            mr_error_set(&err, MR_ERR_IO, "--predict %s: cannot write", c.predict);
            goto alone_failure;
        }
    }
    if (lead && !labelled) { /* no labels: the probabilities are the result */
        printf("%s: %lld examples of %s, %d replica%s: class probabilities (%lld, %d) in %s\n",
               c.checkpoint, (long long)ds.n, images, mr_strategy_plan(s)->replicas,
               mr_strategy_plan(s)->replicas > 1 ? "s" : "", (long long)ds.n, k, c.predict);
    } else if (lead) {
        if (!c.quiet)
            printf("%s: %lld examples of %s, %d replica%s\n", c.checkpoint, (long long)ds.n, images,
                   mr_strategy_plan(s)->replicas, mr_strategy_plan(s)->replicas > 1 ? "s" : "");
        print_report(loss, acc, cfg.net.top_k, detail.top_k_accuracy, multi ? NULL : conf, k,
                     c.quiet, c.per_class);
        /* multi-label: per_class and confusion are empty lists */
        if (c.json && write_json(c.json, loss, acc, cfg.net.top_k, detail.top_k_accuracy, ds.n,
                                 conf, multi ? 0 : k, &err) != MR_OK)
            goto alone_failure;
    }
    goto done;
agreed_failure:
    rc = mr_cli_fail_agreed(prog, &job, &err);
    goto done;
alone_failure:
    rc = mr_cli_fail_alone(prog, &job, &err);
    if (pred.fd >= 0) close(pred.fd), pred.fd = -1, unlink(c.predict);
done:
    free(conf);
    mr_strategy_destroy(s);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
    mr_checkpoint_free(&ck);
    mr_job_finalize(&job);
    return rc;
}
