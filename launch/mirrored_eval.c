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
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/h5_lock.h"
#include "backends/backends.h"
#include "models/keras.h"
#include "models/keras_import.h"
#include "models/model.h"
#include "runtime/array.h"
#include "runtime/image_folder.h"
#include "runtime/npz.h"
#include "strategies/checkpoint.h"
#include "strategies/devices.h"
#include "strategies/strategy.h"
#include "session/session_checkpoints.h"
#include "session/session_devices.h"
#include "session/session_job.h"
#include "session/session_model.h"
#include "launch/cli.h"
#include "runtime/atomic_file.h"
#include "runtime/paths.h"
#include "runtime/json.h"

static const char *prog = "mirrored_eval";

static void usage(FILE *out) {
    fprintf(out,
            "Usage: %s CHECKPOINT.h5 [options]\n"
            "       %s MODEL.keras [options]   (or a Keras MODEL.h5)\n"
            "Evaluate a trained model: loss, accuracy, per-class accuracy and the confusion\n"
            "matrix (a regression loss: loss and mae, Keras's mean absolute error), on the\n"
            "test set its .cfg names or on --data. A model Keras saved\n"
            "needs no --cfg: its layers (%s)\n"
            "and compile() settings are read from it, with its weights.\n"
            "\n"
            "Options:\n"
            "  --data IMAGES[,LABELS]  evaluate on these files (IDX, .npy, file.h5:/dataset,\n"
            "                     file.npz:NAME) or a folder of class folders; F.npz alone:\n"
            "                     its x_test and y_test; IMAGES alone, with --predict:\n"
            "                     the probabilities only (IMAGES may be a folder of images)\n"
            "  --batch N          rows per replica per batch (default 256)\n"
            "  --devices SPEC     auto (default), cpu, cpu:N (as mirrored_train)\n"
            "  --json FILE        write test_loss, test_accuracy, per_class and the confusion\n"
            "                     matrix as JSON (a regression: test_loss and test_mae)\n"
            "  --predict OUT.npy  write the class probabilities, (examples, classes) float32\n"
            "                     (a folder of images: its files' names in OUT.txt)\n"
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
            prog, prog, mr_keras_import_classes());
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
 * folder the .cfg was read from) or a Keras model file's, through the one
 * loader (session/session_model.h); or --cfg's for weights Keras wrote. */
static mr_status load_config(const eval_cli *c, mr_checkpoint *ck, int *has_ck, mr_config *cfg,
                             mr_error *err) {
    mr_session_source source = MR_SESSION_SOURCE_CFG;
    if (c->cfg != NULL) {
        mr_error ck_err = {0};
        *has_ck = mr_checkpoint_load(c->checkpoint, ck, &ck_err) == MR_OK;
        return mr_session_open(c->cfg, MR_SESSION_OPEN_CFG | MR_SESSION_OPEN_KERAS, cfg, NULL,
                               &source, err);
    }
    mr_error e = {0};
    const mr_status st = mr_session_open(
        c->checkpoint, MR_SESSION_OPEN_CKPT | MR_SESSION_OPEN_KERAS, cfg, ck, &source, &e);
    *has_ck = st == MR_OK && source == MR_SESSION_SOURCE_CKPT;
    if (st == MR_ERR_DATA && strstr(e.msg, "no /mirrored group"))
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: not a mirrored checkpoint (no /mirrored group); for weights "
                            "Keras wrote, name the architecture with --cfg MODEL.cfg",
                            c->checkpoint);
    return st == MR_OK ? MR_OK : mr_error_set(err, st, "%s", e.msg);
}

/* --predict: an NPY 1.0 header for (n, k) float32, then rows written by
 * each replica at their offsets (pwrite: threads need no lock). */
typedef struct predictions {
    int fd;
    off_t data_start;
    int k;
    int failed;  /* the errno of the first failed write (0: none) */
    int regular; /* a regular file, removed on a failure (never a device such as /dev/full) */
} predictions;

/* Removes a failed --predict file where it is a regular one. */
static void predictions_remove(const predictions *p, const char *path) {
    if (p->regular) unlink(path);
}

/* "--predict PATH: cannot write: REASON": the path was checked before the
 * work, so this is a failure while running (exit 1). */
static mr_status predictions_failed(const char *path, int e, mr_error *err) {
    return mr_error_set(err, MR_ERR_RUNTIME, "--predict %s: cannot write: %s", path,
                        strerror(e ? e : EIO));
}

static mr_status open_predictions(predictions *p, const char *path, int64_t n, int k,
                                  mr_error *err) {
    p->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    p->k = k;
    p->failed = 0;
    if (p->fd < 0) return predictions_failed(path, errno, err);
    struct stat sb;
    p->regular = fstat(p->fd, &sb) == 0 && S_ISREG(sb.st_mode);
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
        int e = errno;
        close(p->fd);
        p->fd = -1;
        predictions_remove(p, path);
        return predictions_failed(path, e, err);
    }
    return MR_OK;
}

static void write_probs(void *user, int64_t row, int n, const float *probs) {
    predictions *p = user;
    size_t bytes = sizeof(float) * (size_t)n * (size_t)p->k;
    off_t at = p->data_start + (off_t)(sizeof(float) * (size_t)row * (size_t)p->k);
    if (pwrite(p->fd, probs, bytes, at) != (ssize_t)bytes && !p->failed)
        p->failed = errno ? errno : ENOSPC;
}

/* names: the k classes' names, or NULL (none known); acc_key: what acc is, test_accuracy or
 * (regression) test_mae */
static mr_status write_json(const char *path, double loss, const char *acc_key, double acc,
                            int top_k, double top_k_acc, int64_t n, const double *conf, int k,
                            char *const *names, mr_error *err) {
    mr_atomic_file af;
    mr_error why = {0};
    /* the path was checked before the work: a failure now is one while running */
    if (mr_atomic_file_open(&af, path, &why) != MR_OK)
        return mr_error_set(err, MR_ERR_RUNTIME, "--json %s", why.msg);
    mr_json j;
    mr_json_init(&j, af.f, 2);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_key(&j, "examples"), mr_json_int(&j, (long long)n);
    mr_json_key(&j, "test_loss"), mr_json_double(&j, loss, "%.6f");
    mr_json_key(&j, acc_key), mr_json_double(&j, acc, "%.6f");
    if (top_k > 0) {
        mr_json_key(&j, "top_k"), mr_json_int(&j, top_k);
        mr_json_key(&j, "test_sparse_top_k_categorical_accuracy");
        mr_json_double(&j, top_k_acc, "%.6f");
    }
    if (names != NULL) {
        mr_json_key(&j, "class_names");
        mr_json_begin_array(&j, MR_JSON_INLINE);
        for (int c = 0; c < k; c++)
            mr_json_string(&j, names[c]);
        mr_json_end_array(&j);
    }
    mr_json_key(&j, "per_class");
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    for (int c = 0; c < k; c++) {
        double count = 0.0;
        for (int q = 0; q < k; q++)
            count += conf[c * k + q];
        mr_json_begin_object(&j, MR_JSON_INLINE);
        mr_json_key(&j, "class"), mr_json_int(&j, c);
        if (names != NULL) mr_json_key(&j, "name"), mr_json_string(&j, names[c]);
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
        return mr_error_set(err, MR_ERR_RUNTIME, "--json %s: cannot write: %s", path,
                            strerror(errno));
    }
    if (mr_atomic_file_commit(&af, &why) != MR_OK)
        return mr_error_set(err, MR_ERR_RUNTIME, "--json %s", why.msg);
    return MR_OK;
}

/* Labels per example of the .cfg's model (mr_model_label_width: k for multi-label
 * binary_crossentropy), from its plan: multi-hot labels are read as they are, so their width is
 * needed before the data. */
static mr_status label_width_of(const mr_config *cfg, int *width, int *regression, mr_error *err) {
    mr_model_plan plan;
    MR_CHECK(mr_model_plan_make(&plan, cfg, err));
    *width = plan.label_width;
    *regression = plan.regression;
    return MR_OK;
}

/* conf NULL and k < 0: regression; conf NULL: multi-label, k sigmoid outputs, whose labels are no
 * classes to tabulate; names: the classes' names, printed after each row of the tables, or NULL */
static void print_report(double loss, double acc, int top_k, double top_k_acc, const double *conf,
                         int k, char *const *names, int quiet, int per_class_only) {
    if (k < 0)
        printf("Test loss: %.4f - test mae: %.4f", loss, acc); /* regression: Keras's mae */
    else
        printf("Test loss: %.4f - test accuracy: %.4f", loss, acc);
    if (top_k > 0) printf(" - test_sparse_top_k_categorical_accuracy: %.4f", top_k_acc);
    printf("\n");
    if (quiet) return;
    if (conf == NULL && k < 0) {
        printf("regression on float targets: mae is the mean absolute error over every output; "
               "no per-class table or confusion matrix\n");
        return;
    }
    if (conf == NULL) {
        printf("multi-label: the accuracy is binary accuracy over the %d outputs of every "
               "example; no per-class table or confusion matrix\n",
               k);
        return;
    }
    printf("\nclass  examples  accuracy%s\n", names ? "  name" : "");
    for (int c = 0; c < k; c++) {
        double count = 0.0;
        for (int j = 0; j < k; j++)
            count += conf[c * k + j];
        printf("%5d  %8.0f  %8.4f", c, count, count > 0 ? conf[c * k + c] / count : 0.0);
        printf(names ? "  %s\n" : "\n", names ? names[c] : "");
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
        printf(names ? "  %s\n" : "\n", names ? names[c] : "");
    }
}

/* ---- the run: one state, a table of stages ---------------------------- */

/* Everything one run of mirrored_eval holds, filled stage by stage and
 * freed by eval_run_free. */
typedef struct eval_run {
    mr_job job;
    int lead; /* the process of global replica 0 prints and writes */
    eval_cli c;
    mr_status options_st; /* the command line's verdict, agreed by the first stage */
    mr_error err;         /* the first failure's message */
    int rc;
    /* load: the checkpoint, its .cfg, the devices and the data */
    mr_checkpoint ck;
    int has_ck; /* a mirrored checkpoint (else weights Keras wrote, with --cfg) */
    mr_config cfg;
    mr_strategy_opts opts;
    char images[MR_PATH_MAX], labels[MR_PATH_MAX]; /* labels "": none */
    int flat; /* --data a folder of images without class folders: predictions only */
    mr_dataset ds;
    char **names;     /* the k classes' names (the checkpoint's, or the class folders'), or NULL */
    char *names_text; /* what names point into */
    char files_path[MR_PATH_MAX + 16]; /* a flat folder's file names beside --predict's file */
    /* build the strategy, load weights */
    mr_strategy *s;
    mr_model *m;  /* replica 0 */
    int k;        /* the model's classes (outputs) */
    int labelled; /* a labels file, or class folders */
    /* evaluate */
    int multi;    /* multi-hot labels: no confusion matrix */
    double *conf; /* (k, k) confusion counts */
    predictions pred;
    mr_eval_detail detail;
    double loss, acc;
} eval_run;

typedef struct eval_stage {
    const char *name;
    mr_status (*run)(eval_run *r);
    mr_cli_stage_verdict verdict;
} eval_stage;

/* The data: --data IMAGES[,LABELS], or the test set of the .cfg. */
static mr_status choose_data(eval_run *r) {
    const eval_cli *c = &r->c;
    if (c->data == NULL) {
        if (r->cfg.data.test_images[0] == '\0')
            return mr_error_set(&r->err, MR_ERR_CONFIG,
                                "%s: its .cfg names no test set: give --data IMAGES,LABELS",
                                c->checkpoint);
        /* test_images = f.npz: its x_test and y_test (runtime/npz.h) */
        return mr_npz_data_paths(r->cfg.data.test_images, r->cfg.data.test_labels, "test",
                                 r->images, r->labels, sizeof r->images, &r->err);
    }
    /* --data f.npz: the archive's x_test and y_test, as keras.datasets holds them */
    if (mr_npz_is_archive(c->data))
        return mr_npz_data_paths(c->data, "", "test", r->images, r->labels, sizeof r->images,
                                 &r->err);
    const char *comma = strchr(c->data, ',');
    /* a folder of class folders brings its labels (its subfolders); a folder of images
     * alone is new images to predict */
    const int is_dir = comma == NULL && mr_image_folder_is(c->data);
    const int folder = is_dir && mr_image_folder_has_classes(c->data);
    r->flat = is_dir && !folder;
    if (comma == c->data || (comma != NULL && comma[1] == '\0'))
        return mr_error_set(&r->err, MR_ERR_USAGE, "--data %s: expected IMAGES,LABELS or IMAGES",
                            c->data);
    if (comma == NULL && !folder && c->predict == NULL)
        return mr_error_set(&r->err, MR_ERR_USAGE,
                            "--data %s: no labels, so nothing to score: add --predict "
                            "OUT.npy to write the class probabilities",
                            c->data);
    if (comma == NULL && !folder && c->json != NULL)
        return mr_error_set(&r->err, MR_ERR_USAGE,
                            "--json %s: needs labels (--data IMAGES,LABELS); --data %s has "
                            "none",
                            c->json, c->data);
    if (comma == NULL) {
        snprintf(r->images, sizeof r->images, "%s", c->data);
    } else {
        snprintf(r->images, sizeof r->images, "%.*s", (int)(comma - c->data), c->data);
        snprintf(r->labels, sizeof r->labels, "%s", comma + 1);
    }
    return MR_OK;
}

/* Evaluation batches of --batch rows on every replica, and the data read
 * as the model takes it. */
static mr_status load_data(eval_run *r) {
    mr_config *cfg = &r->cfg;
    cfg->net.global_batch = 0;
    cfg->net.batch = (int)r->c.batch;
    cfg->net.accumulate = 1;
    r->opts.seed = (uint64_t)cfg->net.seed;
    const mr_layer_cfg *in = &cfg->layers[0];
    const char *labels = r->labels[0] ? r->labels : NULL;
    /* multi-label binary_crossentropy reads multi-hot rows (n, k) as they are */
    int width = 1, regression = 0;
    MR_CHECK(label_width_of(cfg, &width, &regression, &r->err));
    if (r->flat)
        return mr_dataset_load_images(&r->ds, r->images, in->shape_rank, in->shape, &r->err);
    if (regression) return mr_dataset_load_targets(&r->ds, r->images, labels, width, &r->err);
    if (width > 1) return mr_dataset_load_multi_hot(&r->ds, r->images, labels, width, &r->err);
    return mr_dataset_load_input(&r->ds, r->images, labels, in->shape_rank, in->shape, &r->err);
}

/* The data files are regular files (or folders of class folders), and
 * no output overwrites an input or the other output (runtime/paths.h). */
static mr_status check_paths(eval_run *r) {
    const eval_cli *c = &r->c;
    MR_CHECK(mr_path_check_regular(NULL, r->images, 1, &r->err));
    MR_CHECK(mr_path_check_regular(NULL, r->labels, 0, &r->err));
    const mr_path_use uses[] = {
        {"CHECKPOINT.h5", c->checkpoint, 0}, {"--cfg", c->cfg, 0},   {"the images", r->images, 0},
        {"the labels", r->labels, 0},        {"--json", c->json, 1}, {"--predict", c->predict, 1}};
    return mr_path_check_distinct(uses, sizeof uses / sizeof uses[0], &r->err);
}

/* load: the command line's verdict, this node's GPUs shared out (a
 * collective, so on every process before anything that may fail on one
 * alone), the .cfg, the devices, the output file and the data. */
static mr_status stage_load(eval_run *r) {
    mr_device_env env;
    char gpu_conflict[sizeof r->err.msg];
    /* err keeps the first message (error.h) */
    mr_status env_st =
        mr_devices_job_env(&r->job, &env, gpu_conflict, sizeof gpu_conflict, &r->err);
    MR_CHECK(r->options_st);
    MR_CHECK(env_st);
    MR_CHECK(mr_path_check_regular(NULL, r->c.checkpoint, 0, &r->err));
    MR_CHECK(mr_path_check_regular("--cfg", r->c.cfg, 0, &r->err));
    MR_CHECK(load_config(&r->c, &r->ck, &r->has_ck, &r->cfg, &r->err));
    MR_CHECK(
        mr_session_parse_devices(r->c.devices, &env, &mr_cli_words, &r->opts.devices, &r->err));
    if (r->lead) MR_CHECK(mr_atomic_check_writable("--json", r->c.json, &r->err));
    if (r->lead) MR_CHECK(mr_atomic_check_writable("--predict", r->c.predict, &r->err));
    MR_CHECK(choose_data(r));
    MR_CHECK(check_paths(r));
    return load_data(r);
}

static mr_status stage_report_data(eval_run *r) {
    if (r->lead && !r->c.quiet && r->ds.note[0])
        fprintf(stderr, "%s: note: %s\n", prog, r->ds.note);
    return MR_OK;
}

static mr_status stage_build_strategy(eval_run *r) {
    MR_CHECK(mr_strategy_create(&r->cfg, &r->opts, 0, &r->s, &r->err));
    r->m = mr_strategy_replica(r->s, 0);
    r->k = mr_model_classes(r->m);
    return MR_OK;
}

/* The data against the model: its rows, --top-k, its labels; and the
 * preprocessing training used. */
static mr_status check_data(eval_run *r) {
    const eval_cli *c = &r->c;
    mr_config *cfg = &r->cfg;
    const mr_layer_cfg *in = &cfg->layers[0];
    MR_CHECK(mr_dataset_check_shape(&r->ds, in->shape_rank, in->shape, r->images, &r->err));
    MR_CHECK(mr_dataset_check_row(&r->ds, r->m->in_size, r->images, &r->err));
    /* --top-k: in the .cfg every replica's model reads (creation checked [net] top_k) */
    if (c->top_k > 0 && cfg->net.loss == MR_LOSS_BINARY_CROSSENTROPY)
        return mr_error_set(&r->err, MR_ERR_USAGE,
                            "--top-k %lld: does not apply to loss = binary_crossentropy", c->top_k);
    if (c->top_k >= r->k)
        return mr_error_set(&r->err, MR_ERR_USAGE, "--top-k %lld: must be below the %d classes",
                            c->top_k, r->k);
    if (c->top_k >= 0) cfg->net.top_k = (int)c->top_k;
    r->labelled = r->labels[0] || r->ds.classes > 0;
    if (r->labelled)
        MR_CHECK(
            mr_dataset_check_labels(&r->ds, r->k, r->labels[0] ? r->labels : r->images, &r->err));
    /* preprocessing: what training used */
    if (r->has_ck) return mr_ckpt_apply_preprocessing(&r->ck, &r->ds, &r->err);
    r->ds.scale = cfg->data.scale;
    if (cfg->data.standardize)
        return mr_error_set(&r->err, MR_ERR_UNSUPPORTED,
                            "%s: [data] standardize needs the training statistics, which only "
                            "a mirrored checkpoint carries",
                            c->cfg);
    return MR_OK;
}

/* The classes' names: the checkpoint's (the class folders training read), else the class
 * folders' of --data; none when neither names the model's k classes. */
static mr_status split_class_names(eval_run *r) {
    const char *text = r->has_ck && r->ck.class_names ? r->ck.class_names : r->ds.class_names;
    if (text == NULL || mr_model_label_width(r->m) > 1) return MR_OK;
    int lines = 1;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    if (lines != r->k) return MR_OK;
    r->names_text = strdup(text);
    r->names = calloc((size_t)r->k, sizeof *r->names);
    if (r->names_text == NULL || r->names == NULL)
        return mr_error_set(&r->err, MR_ERR_NOMEM, "out of memory");
    char *p = r->names_text;
    for (int c = 0; c < r->k; c++) {
        r->names[c] = p;
        p += strcspn(p, "\n");
        if (*p) *p++ = '\0';
    }
    return MR_OK;
}

/* --predict of a folder of images: their names, one per line in the rows' order, in OUT.txt
 * (OUT.npy's name with .txt for .npy) */
static mr_status write_file_names(eval_run *r) {
    const char *predict = r->c.predict;
    const size_t n = strlen(predict);
    const int npy = n > 4 && strcmp(predict + n - 4, ".npy") == 0;
    snprintf(r->files_path, sizeof r->files_path, "%.*s.txt", (int)(npy ? n - 4 : n), predict);
    mr_atomic_file af;
    mr_error why = {0};
    if (mr_atomic_file_open(&af, r->files_path, &why) != MR_OK)
        return mr_error_set(&r->err, MR_ERR_IO, "--predict %s", why.msg);
    fprintf(af.f, "%s\n", r->ds.file_names);
    if (mr_atomic_file_commit(&af, &why) != MR_OK)
        return mr_error_set(&r->err, MR_ERR_IO, "--predict %s", why.msg);
    return MR_OK;
}

/* load weights: every process reads them into its replica 0 (after the
 * data's checks against the model) */
static mr_status stage_load_weights(eval_run *r) {
    MR_CHECK(check_data(r));
    MR_CHECK(split_class_names(r));
    return mr_keras_load(r->c.checkpoint, r->m, r->has_ck, NULL, &r->err);
}

/* share weights: replica 0 of the job hands them to all */
static mr_status stage_share_weights(eval_run *r) {
    return mr_strategy_sync_model(r->s, &r->err);
}

/* evaluate: loss, accuracy and the confusion counts, --predict's
 * probabilities written as the batches go */
static mr_status stage_evaluate(eval_run *r) {
    const char *predict = r->c.predict;
    /* multi-hot labels or float targets: no classes to tabulate */
    r->multi = mr_model_label_width(r->m) > 1 || mr_model_regression(r->m);
    r->conf = calloc((size_t)r->k * (size_t)r->k, sizeof(double));
    if (r->conf == NULL) return mr_error_set(&r->err, MR_ERR_NOMEM, "out of memory");
    if (predict) MR_CHECK(open_predictions(&r->pred, predict, r->ds.n, r->k, &r->err));
    r->detail = (mr_eval_detail){.classes = r->k,
                                 .confusion = r->multi ? NULL : r->conf,
                                 .on_probs = predict ? write_probs : NULL,
                                 .user = &r->pred};
    MR_CHECK(mr_strategy_evaluate_detail(r->s, &r->ds, 0, r->ds.n, &r->loss, &r->acc, &r->detail,
                                         &r->err));
    if (r->pred.fd < 0) return MR_OK;
    int e = r->pred.failed;
    if (close(r->pred.fd) != 0 && e == 0) e = errno;
    r->pred.fd = -1;
    if (e == 0) return r->ds.file_names ? write_file_names(r) : MR_OK;
    predictions_remove(&r->pred, predict);
    return predictions_failed(predict, e, &r->err);
}

/* report: the scores (or where the probabilities went) and --json */
static mr_status stage_report(eval_run *r) {
    const eval_cli *c = &r->c;
    const int replicas = mr_strategy_plan(r->s)->replicas;
    if (!r->lead) return MR_OK;
    if (!r->labelled) { /* no labels: the probabilities are the result */
        printf("%s: %lld examples of %s, %d replica%s: class probabilities (%lld, %d) in %s",
               c->checkpoint, (long long)r->ds.n, r->images, replicas, replicas > 1 ? "s" : "",
               (long long)r->ds.n, r->k, c->predict);
        printf(r->files_path[0] ? ", their files' names in %s\n" : "\n", r->files_path);
        return MR_OK;
    }
    if (!c->quiet)
        printf("%s: %lld examples of %s, %d replica%s\n", c->checkpoint, (long long)r->ds.n,
               r->images, replicas, replicas > 1 ? "s" : "");
    print_report(r->loss, r->acc, r->cfg.net.top_k, r->detail.top_k_accuracy,
                 r->multi ? NULL : r->conf, mr_model_regression(r->m) ? -1 : r->k, r->names,
                 c->quiet, c->per_class);
    /* multi-label: per_class and confusion are empty lists */
    if (c->json == NULL) return MR_OK;
    const char *acc_key = mr_model_regression(r->m) ? "test_mae" : "test_accuracy";
    return write_json(c->json, r->loss, acc_key, r->acc, r->cfg.net.top_k, r->detail.top_k_accuracy,
                      r->ds.n, r->conf, r->multi ? 0 : r->k, r->names, &r->err);
}

/* The run, in order. Where a stage agrees is said here, once. */
static const eval_stage stages[] = {
    {"load config and data", stage_load, MR_CLI_STAGE_AGREE},
    {"report data", stage_report_data, MR_CLI_STAGE_PRINT},
    {"build the strategy", stage_build_strategy, MR_CLI_STAGE_SAME},
    {"load weights", stage_load_weights, MR_CLI_STAGE_AGREE},
    {"share weights", stage_share_weights, MR_CLI_STAGE_ALONE},
    {"evaluate", stage_evaluate, MR_CLI_STAGE_ALONE},
    {"report", stage_report, MR_CLI_STAGE_ALONE},
};

/* Runs the stages until one fails (its verdict printed as the table
 * says); r->rc is the exit code. */
static void run_stages(eval_run *r) {
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        const eval_stage *s = &stages[i];
        if (mr_cli_stage_failed(prog, &r->job, s->verdict, s->run(r), &r->err, &r->rc)) return;
    }
}

/* Everything the stages made (a --predict file left half written is
 * removed), and the job; returns the exit code. */
static int eval_run_free(eval_run *r) {
    if (r->pred.fd >= 0)
        close(r->pred.fd), r->pred.fd = -1, predictions_remove(&r->pred, r->c.predict);
    free(r->conf);
    free(r->names), free(r->names_text);
    mr_strategy_destroy(r->s);
    mr_dataset_free(&r->ds);
    mr_config_free(&r->cfg);
    mr_checkpoint_free(&r->ck);
    mr_job_finalize(&r->job);
    return r->rc;
}

/* One run's state: large (the .cfg's layers), and one per process. */
static eval_run run = {.pred = {.fd = -1}};

int main(int argc, char **argv) {
    mr_h5_no_exit_cleanup(); /* runtime/h5_lock.h */
    eval_run *r = &run;
    if (mr_session_job_init(&argc, &argv, &r->job, &r->err) != MR_OK) {
        int rc = mr_cli_die(prog, &r->err);
        mr_job_finalize(&r->job);
        return rc;
    }
    r->lead = r->job.rank == 0;
    r->options_st = parse(argc, argv, &r->c, &r->err);
    if (r->options_st == MR_OK && (r->c.help || r->c.version)) {
        if (r->lead && r->c.help) usage(stdout);
        if (r->lead && r->c.version) printf("mirrored %s\n", MR_VERSION);
        mr_job_finalize(&r->job);
        return MR_EXIT_OK;
    }
    if (r->options_st == MR_OK && r->c.predict && r->job.size > 1)
        r->options_st =
            mr_error_set(&r->err, MR_ERR_USAGE, "--predict: run mirrored_eval as one process");
    r->opts.job = &r->job;
    run_stages(r);
    return eval_run_free(r);
}
