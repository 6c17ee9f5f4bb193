/* test_train.c: mirrored_train's modules and session/'s one function at a time (the
 * executable end to end: test_cli.c, test_resume.c, test_mpirun.c): the
 * command line (train_options.h), what a job's processes agree on
 * (train_job.h), the model's name and the JSON summary (train_report.h),
 * the options applied to the .cfg and --write-data (train_data.h), and a planned stop's parts:
 * --stop-signals, where its checkpoint goes, --resume auto's choice (session_checkpoints.h) and the
 * --metrics file it leaves (progress.h). */
#include <check.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zip.h>

#include "launch/cli.h"
#include "launch/progress.h"
#include "launch/throughput.h"
#include "session/session_checkpoints.h"
#include "session/session_devices.h"
#include "launch/train_data.h"
#include "launch/train_job.h"
#include "launch/train_options.h"
#include "launch/train_report.h"
#include "runtime/array.h"
#include "runtime/npy.h"
#include "runtime/h5file.h"
#include "tests/testutil.h"

/* mr_train_parse_options over a NULL-terminated list of arguments. */
static mr_status parse(mr_train_options *o, mr_error *err, ...) {
    char *argv[32] = {"mirrored_train"};
    int argc = 1;
    va_list ap;
    va_start(ap, err);
    for (char *a; (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    optind = 0; /* getopt_long starts over */
    mr_error_clear(err);
    return mr_train_parse_options(argc, argv, o, err);
}

START_TEST(options_parsed) {
    mr_train_options o;
    mr_error err = {0};
    ck_assert_int_eq(parse(&o, &err, "m.cfg", NULL), MR_OK);
    ck_assert_int_eq(o.action, MR_TRAIN_RUN);
    ck_assert_str_eq(o.cfg_path, "m.cfg");
    ck_assert_str_eq(o.devices_spec, "auto");
    ck_assert(o.epochs == -1 && o.seed == -1 && o.check_sync == 0 && o.keep == 0);
    ck_assert(o.bucket_mb < 0.0); /* not given: the devices' default */
    ck_assert_int_eq(parse(&o, &err, "--epochs", "3", "--seed", "0", "--check-sync", "2",
                           "--bucket-mb", "0.5", "--collective-timeout", "7", "--devices", "cpu:2",
                           "--json", "s.json", "--metrics", "m.csv", "--log", "l.jsonl", "--save",
                           "w.h5", "--keep", "2", "--quiet", "m.cfg", NULL),
                     MR_OK);
    ck_assert(o.epochs == 3 && o.seed == 0 && o.check_sync == 2 && o.keep == 2 && o.quiet == 1);
    ck_assert(o.bucket_mb == 0.5 && o.timeout == 7.0);
    ck_assert_str_eq(o.devices_spec, "cpu:2");
    ck_assert_str_eq(o.json_path, "s.json");
    ck_assert_str_eq(o.metrics_path, "m.csv");
    ck_assert_str_eq(o.log_path, "l.jsonl");
    ck_assert_str_eq(o.save_path, "w.h5");
    /* --verbose as Keras's: 0 quiet, 1 the default, 2 no bar */
    ck_assert_int_eq(parse(&o, &err, "--verbose", "2", "m.cfg", NULL), MR_OK);
    ck_assert(o.no_bar == 1 && o.quiet == 0);
    ck_assert_int_eq(parse(&o, &err, "--verbose", "0", "m.cfg", NULL), MR_OK);
    ck_assert(o.no_bar == 0 && o.quiet == 1);
    ck_assert_int_eq(parse(&o, &err, "m.cfg", NULL), MR_OK);
    ck_assert(o.no_bar == 0 && o.quiet == 0);
    /* actions that stop the parse */
    ck_assert_int_eq(parse(&o, &err, "--help", NULL), MR_OK);
    ck_assert_int_eq(o.action, MR_TRAIN_HELP);
    ck_assert_int_eq(parse(&o, &err, "--version", NULL), MR_OK);
    ck_assert_int_eq(o.action, MR_TRAIN_VERSION);
    ck_assert_int_eq(parse(&o, &err, "--list-devices", NULL), MR_OK);
    ck_assert_int_eq(o.action, MR_TRAIN_LIST);
    ck_assert_int_eq(parse(&o, &err, "--help-config=markdown", NULL), MR_OK);
    ck_assert(o.action == MR_TRAIN_HELP_CONFIG && o.markdown == 1);
}
END_TEST

/* Refused with MR_ERR_USAGE and a one-line message holding `part`. */
#define REFUSED(part, ...)                                                                         \
    do {                                                                                           \
        mr_train_options o;                                                                        \
        mr_error err = {0};                                                                        \
        ck_assert_int_eq(parse(&o, &err, __VA_ARGS__, NULL), MR_ERR_USAGE);                        \
        ck_assert_msg(strstr(err.msg, part) && !strchr(err.msg, '\n'), "%s", err.msg);             \
    } while (0)

START_TEST(options_refused) {
    REFUSED("missing MODEL.cfg", "--epochs", "2");
    REFUSED("more than one MODEL.cfg", "a.cfg", "b.cfg");
    REFUSED("--epochs", "--epochs", "0", "m.cfg");
    REFUSED("--bucket-mb x: expected a number of MiB", "--bucket-mb", "x", "m.cfg");
    REFUSED("--collective-timeout 0: expected a number of seconds", "--collective-timeout", "0",
            "m.cfg");
    REFUSED("the only format is 'markdown'", "--help-config=html");
    REFUSED("--bogus", "--bogus", "m.cfg");
    REFUSED("--verbose", "--verbose", "3", "m.cfg");
    REFUSED("--resume and --init-weights", "--resume", "auto", "--init-weights", "w.h5", "m.cfg");
    REFUSED("--synthetic", "--synthetic", "0", "m.cfg");
    REFUSED("--display-every", "--display-every", "0", "m.cfg");
    REFUSED("--warmup-steps", "--warmup-steps", "-1", "m.cfg");
}
END_TEST

/* The benchmark options: off unless given; values as given. */
START_TEST(benchmark_options) {
    mr_train_options o;
    mr_error err = {0};
    ck_assert_int_eq(parse(&o, &err, "m.cfg", NULL), MR_OK);
    ck_assert(o.synthetic == 0 && o.display_every == -1 && o.warmup_steps == -1);
    ck_assert_int_eq(parse(&o, &err, "--synthetic", "512", "--display-every", "5", "--warmup-steps",
                           "0", "m.cfg", NULL),
                     MR_OK);
    ck_assert(o.synthetic == 512 && o.display_every == 5 && o.warmup_steps == 0);
}
END_TEST

/* Keras fit's arguments: --data, --batch-size, --validation-split; not given: -1 and NULL. */
START_TEST(fit_options) {
    mr_train_options o;
    mr_error err = {0};
    ck_assert_int_eq(parse(&o, &err, "m.cfg", NULL), MR_OK);
    ck_assert(o.data_path == NULL && o.batch_size == -1 && o.validation_split == -1.0);
    ck_assert_int_eq(parse(&o, &err, "--data", "d.npz", "--batch-size", "128", "--validation-split",
                           "0.1", "m.cfg", NULL),
                     MR_OK);
    ck_assert_str_eq(o.data_path, "d.npz");
    ck_assert(o.batch_size == 128 && o.validation_split == 0.1);
    ck_assert_int_eq(parse(&o, &err, "--validation-split", "0", "m.cfg", NULL), MR_OK);
    ck_assert(o.validation_split == 0.0);
    REFUSED("--batch-size 0", "--batch-size", "0", "m.cfg");
    REFUSED("--validation-split 1: expected a fraction in [0, 1)", "--validation-split", "1",
            "m.cfg");
    REFUSED("--validation-split -0.1", "--validation-split", "-0.1", "m.cfg");
    REFUSED("--validation-split x", "--validation-split", "x", "m.cfg");
    REFUSED("--synthetic and --data", "--synthetic", "10", "--data", "d.npz", "m.cfg");
}
END_TEST

/* An .npz of the members named (each a 2-value uint8 array), stored. */
static char *write_npz(const char *dir, const char *name, const char *const *members, int n) {
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    mr_array a = {.dtype = MR_DTYPE_U8, .ndim = 1, .dims = {2}, .data = (uint8_t[]){1, 2}};
    mr_error err = {0};
    char npy[8192];
    snprintf(npy, sizeof npy, "%s/member.npy", dir);
    ck_assert_int_eq(mr_npy_write(npy, &a, &err), MR_OK);
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, NULL);
    ck_assert_ptr_nonnull(za);
    for (int i = 0; i < n; i++) {
        char m[64];
        snprintf(m, sizeof m, "%s.npy", members[i]);
        ck_assert_int_ge(zip_file_add(za, m, zip_source_file(za, npy, 0, -1), 0), 0);
    }
    ck_assert_int_eq(zip_close(za), 0);
    return path;
}

/* The .cfg text of a small model with these [net] and [data] lines. */
static void apply_cfg(mr_config *cfg, const char *net, const char *data) {
    char text[2048];
    snprintf(text, sizeof text,
             "[net]\n%s[data]\n%s[input]\nshape=2\n[dense]\nunits=2\nactivation=softmax\n", net,
             data);
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "m.cfg", ".", cfg, &err) == MR_OK, "%s", err.msg);
}

/* mr_train_apply_options: the options into the .cfg, and whole archives into members. */
START_TEST(options_applied) {
    const char *dir = tu_tmpdir();
    const char *const all[] = {"x_train", "y_train", "x_test", "y_test"};
    char *full = write_npz(dir, "k.npz", all, 4), *half = write_npz(dir, "h.npz", all, 2);
    char *wrong = write_npz(dir, "w.npz", (const char *const[]){"a", "b"}, 2);
    mr_train_options o;
    mr_error err = {0};
    mr_config cfg;
    char want[8192];
    /* nothing given: the .cfg as it is, but [data]'s whole archives take x_<set>, y_<set> */
    ck_assert_int_eq(parse(&o, &err, "m.cfg", NULL), MR_OK);
    apply_cfg(&cfg, "batch=8\n", "train_images=k.npz\ntest_images=t.npz\ntest_labels=t.npz\n");
    ck_assert_int_eq(mr_train_apply_options(&o, &cfg, NULL, &err), MR_OK);
    ck_assert(cfg.net.batch == 8 && cfg.net.global_batch == 0 && cfg.net.validation_split == 0.0f);
    ck_assert_int_eq(cfg.net.cuda_graphs, 1); /* the default, untouched */
    ck_assert(strstr(cfg.data.train_images, "k.npz:x_train") &&
              strstr(cfg.data.train_labels, "k.npz:y_train") &&
              strstr(cfg.data.test_images, "t.npz:x_test") &&
              strstr(cfg.data.test_labels, "t.npz:y_test"));
    mr_config_free(&cfg);
    /* --data, --batch-size, --validation-split, --epochs over the .cfg's */
    ck_assert_int_eq(parse(&o, &err, "--data", full, "--batch-size", "64", "--validation-split",
                           "0.25", "--epochs", "3", "m.cfg", NULL),
                     MR_OK);
    apply_cfg(&cfg, "batch=8\nepochs=9\n",
              "train_images=a.npy\ntrain_labels=b.npy\n"
              "val_images=v.npy\nval_labels=vl.npy\n");
    ck_assert_int_eq(mr_train_apply_options(&o, &cfg, NULL, &err), MR_OK);
    ck_assert(cfg.net.global_batch == 64 && cfg.net.epochs == 3 &&
              cfg.net.validation_split == 0.25f);
    snprintf(want, sizeof want, "%s:x_train", full);
    ck_assert_str_eq(cfg.data.train_images, want);
    snprintf(want, sizeof want, "%s:y_test", full);
    ck_assert_str_eq(cfg.data.test_labels, want);
    ck_assert(cfg.data.val_images[0] == '\0' && cfg.data.val_labels[0] == '\0');
    mr_config_free(&cfg);
    /* --no-cuda-graphs: [net] cuda_graphs = 0 whatever the .cfg says */
    ck_assert_int_eq(parse(&o, &err, "--no-cuda-graphs", "m.cfg", NULL), MR_OK);
    ck_assert_int_eq(o.no_cuda_graphs, 1);
    apply_cfg(&cfg, "cuda_graphs=1\n", "train_images=k.npz\n");
    ck_assert_int_eq(mr_train_apply_options(&o, &cfg, NULL, &err), MR_OK);
    ck_assert_int_eq(cfg.net.cuda_graphs, 0);
    mr_config_free(&cfg);
    /* no x_test/y_test: no test set, and one line says so */
    ck_assert_int_eq(parse(&o, &err, "--data", half, "m.cfg", NULL), MR_OK);
    apply_cfg(&cfg, "",
              "train_images=a.npy\ntrain_labels=b.npy\ntest_images=t.npy\n"
              "test_labels=tl.npy\n");
    FILE *say = tmpfile();
    ck_assert_int_eq(mr_train_apply_options(&o, &cfg, say, &err), MR_OK);
    ck_assert(cfg.data.test_images[0] == '\0' && cfg.data.test_labels[0] == '\0');
    char line[8400] = "";
    rewind(say);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, say));
    fclose(say);
    snprintf(want, sizeof want, "%s has no x_test and y_test: no test evaluation\n", half);
    ck_assert_str_eq(line, want);
    mr_config_free(&cfg);
    /* wrong names, a file that is no archive, a second validation set, a watcher left blind */
    ck_assert_int_eq(parse(&o, &err, "--data", wrong, "m.cfg", NULL), MR_OK);
    apply_cfg(&cfg, "", "train_images=a.npy\ntrain_labels=b.npy\n");
    ck_assert_int_eq(mr_train_apply_options(&o, &cfg, NULL, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "no x_train and y_train") &&
                      strstr(err.msg, "the archive has: a, b"),
                  "%s", err.msg);
    ck_assert_int_eq(parse(&o, &err, "--data", "d.npy", "m.cfg", NULL), MR_OK);
    ck_assert_int_eq(mr_train_apply_options(&o, &cfg, NULL, &err), MR_ERR_USAGE);
    mr_config_free(&cfg);
    ck_assert_int_eq(parse(&o, &err, "--validation-split", "0.1", "m.cfg", NULL), MR_OK);
    apply_cfg(&cfg, "",
              "train_images=a.npy\ntrain_labels=b.npy\nval_images=v.npy\n"
              "val_labels=vl.npy\n");
    ck_assert_int_eq(mr_train_apply_options(&o, &cfg, NULL, &err), MR_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "val_images of m.cfg is the validation set already"), "%s",
                  err.msg);
    mr_config_free(&cfg);
    ck_assert_int_eq(parse(&o, &err, "--validation-split", "0", "m.cfg", NULL), MR_OK);
    apply_cfg(&cfg, "validation_split=0.2\nearly_stopping=val_loss\n",
              "train_images=a.npy\ntrain_labels=b.npy\n");
    ck_assert_int_eq(mr_train_apply_options(&o, &cfg, NULL, &err), MR_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "[net] early_stopping watches the validation set"), "%s",
                  err.msg);
    mr_config_free(&cfg);
    free(full), free(half), free(wrong);
}
END_TEST

/* images/sec (throughput.h) on made-up update times, global batch 10:
 * two warm-up updates left out (their times would move every figure),
 * then 0.5 s, 0.25 s, 1 s: speeds 20, 40, 10; mean 23.33, sample sd
 * 15.275 so standard error 8.819; median 20, absolute deviations 0, 20,
 * 10 so jitter 1.4826 x 10; total 30 images / 1.75 s = 17.14. A line
 * every 3 counted updates, naming the update. */
START_TEST(throughput_figures) {
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    mr_throughput t;
    mr_throughput_init(&t, 2, 3, 10, 2, out);
    mr_throughput_figures f = mr_throughput_get(&t);
    ck_assert(f.n == 0 && f.total == 0.0 && f.mean == 0.0);
    const double secs[5] = {100.0, 100.0, 0.5, 0.25, 1.0};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(mr_throughput_step(&t, 41 + i, secs[i]), 0);
    f = mr_throughput_get(&t);
    ck_assert_int_eq(f.n, 3);
    ck_assert(fabs(f.mean - 70.0 / 3.0) < 1e-9);
    ck_assert(fabs(f.stderr_ - sqrt(700.0 / 3.0) / sqrt(3.0)) < 1e-9);
    ck_assert(fabs(f.jitter - 14.826) < 1e-9);
    ck_assert(fabs(f.total - 30.0 / 1.75) < 1e-9);
    fclose(out);
    ck_assert_str_eq(buf, "Step 45: images/sec: 23.3 +/- 8.8 (jitter = 14.8)\n");
    free(buf);
    mr_throughput_free(&t);
}
END_TEST

START_TEST(usage_names_the_program) {
    const char *dir = tu_tmpdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/usage.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    mr_train_usage(f, "prog_x");
    fclose(f);
    char *text = tu_read_file(path, NULL);
    ck_assert_msg(strstr(text, "Usage: prog_x MODEL.cfg [options]") &&
                      strstr(text, "mpirun -np N prog_x MODEL.cfg") && strstr(text, "--write-data"),
                  "%s", text);
    free(text);
}
END_TEST

static void config(mr_config *cfg, const char *net) {
    char text[1024];
    snprintf(text, sizeof text,
             "[net]\n%s\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=2,2,1\n"
             "[flatten]\n[dense]\nunits=2\nactivation=softmax\n",
             net);
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, cfg, &err) == MR_OK, "%s", err.msg);
}

START_TEST(job_rules) {
    mr_device_set cpu = {.kind = "cpu", .count = 2};
    ck_assert_int_eq(mr_session_numbered_across_job(&cpu), 1);
    mr_device_set none = {.kind = "tpu", .count = 1};
    ck_assert_int_eq(mr_session_numbered_across_job(&none), 0);
    mr_config cfg;
    config(&cfg, "batch=4");
    ck_assert_int_eq(mr_session_auto_replicas(&cfg, 2, 6),
                     6); /* no fixed global batch: every core */
    mr_config_free(&cfg);
    config(&cfg, "global_batch=24\naccumulate=2");
    /* 12 per micro-batch: the most replicas per process, of 5 cores, that 2 processes divide */
    ck_assert_int_eq(mr_session_auto_replicas(&cfg, 2, 5), 3);
    ck_assert_int_eq(mr_session_auto_replicas(&cfg, 1, 5), 4);
    ck_assert_int_eq(mr_session_auto_replicas(&cfg, 5, 5), 1);
    /* one process: its devices, nothing to compare */
    int argc = 1;
    char *args[] = {"test_train", NULL}, **argv = args;
    mr_job job;
    mr_error err = {0};
    ck_assert_int_eq(mr_job_init(&argc, &argv, 0, 30.0, &job, &err), MR_OK);
    mr_strategy_opts opts = {.devices = cpu};
    mr_device_set sets[1] = {{.count = 0}};
    mr_train_options c = {.cfg_path = "t.cfg"};
    ck_assert_int_eq(mr_train_check_same_job(&c, &job, &cfg, &opts, sets, &err), MR_OK);
    ck_assert_str_eq(sets[0].kind, "cpu");
    ck_assert_int_eq(sets[0].count, 2);
    mr_job_finalize(&job);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(model_name_and_json_summary) {
    char name[64];
    mr_train_model_name("models/fashion_cnn.cfg", name, sizeof name);
    ck_assert_str_eq(name, "fashion_cnn");
    mr_train_model_name("plain", name, sizeof name);
    ck_assert_str_eq(name, "plain");
    const char *dir = tu_tmpdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/s.json", dir);
    mr_progress pg = {.train_seconds = 2.0,
                      .train_samples = 1000.0,
                      .last = {.loss = 0.5, .accuracy = 0.75, .has_val = 1, .val_loss = 0.25}};
    mr_fit_plan plan = {.replicas = 2, .global_batch = 16, .base_lr = 0.01f, .lr_factor = 2.0f};
    int replicas[1] = {2}, first[1] = {0};
    char hosts[1][MR_HOST_MAX] = {"h0"};
    mr_job job = {.size = 1, .n_nodes = 1, .hosts = hosts, .replicas = replicas, .first = first};
    mr_device_set sets[1] = {{.kind = "cpu", .count = 2}};
    mr_error err = {0};
    ck_assert_int_eq(mr_train_write_json(path, &pg, &plan, &job, sets, "local", NULL, 3, 1, 0.125,
                                         0.5, NULL, 0xABCDEF0123456789ull, &err),
                     MR_OK);
    char *text = tu_read_file(path, NULL);
    const char *want[] = {"\"epochs\": 3,",
                          "\"train_samples_per_sec\": 500.0,",
                          "\"test_loss\": 0.125000,",
                          "\"loss\": 0.500000,",
                          "\"val_loss\": 0.250000,",
                          "\"replicas\": 2,",
                          "\"communicator\": \"local\",",
                          "\"devices\": [\"cpu:0\", \"cpu:1\"],",
                          "\"ranks\": [{\"rank\": 0, \"host\": \"h0\", \"replicas\": 2}],",
                          "\"global_batch\": 16,",
                          "\"learning_rate\": 0.02,",
                          "\"params_hash\": \"abcdef0123456789\",",
                          "\"kernels\": {},",
                          "\"deterministic\": true,",
                          "\"train_seconds\": 2.000\n}\n"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_msg(strstr(text, want[i]), "no %s in %s", want[i], text);
    free(text);
    /* a folder that does not exist (the path is checked before training,
     * so this is a failure while running): one line, the file named */
    snprintf(path, sizeof path, "%s/no/s.json", dir);
    ck_assert_int_eq(
        mr_train_write_json(path, &pg, &plan, &job, sets, "local", NULL, 3, 0, 0, 0, NULL, 0, &err),
        MR_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "--json ") == err.msg && strstr(err.msg, "s.json: cannot write"),
                  "%s", err.msg);
}
END_TEST

START_TEST(write_data_preprocessed) {
    const char *dir = tu_tmpdir();
    tu_write_image_data(dir, "x.npy", "y.npy", 6, 3);
    char cfg_text[18000], x[4200], y[4200], out[4200];
    snprintf(x, sizeof x, "%s/x.npy", dir);
    snprintf(y, sizeof y, "%s/y.npy", dir);
    snprintf(out, sizeof out, "%s/d.h5", dir);
    snprintf(cfg_text, sizeof cfg_text,
             "[net]\nbatch=2\n[data]\ntrain_images=%s\ntrain_labels=%s\n[input]\nshape=8,8,1\n"
             "[flatten]\n"
             "[dense]\nunits=3\nactivation=softmax\n",
             x, y);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(cfg_text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    mr_dataset train = {0}, test = {0};
    ck_assert_int_eq(mr_dataset_load(&train, x, y, &err), MR_OK);
    train.scale = 0.5f;
    ck_assert_msg(mr_train_write_data(out, &cfg, &train, 6, &test, &err) == MR_OK, "%s", err.msg);
    /* the examples as the model sees them: scaled, float32, with int64 labels */
    mr_dataset back = {0};
    char bx[4300], by[4300];
    snprintf(bx, sizeof bx, "%s:/train_images", out);
    snprintf(by, sizeof by, "%s:/train_labels", out);
    ck_assert_msg(mr_dataset_load(&back, bx, by, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(back.n, 6);
    int64_t rows[6] = {0, 1, 2, 3, 4, 5};
    float a[6 * 64], b[6 * 64];
    int32_t la[6], lb[6];
    mr_dataset_fill(&train, rows, 6, NULL, a, la);
    mr_dataset_fill(&back, rows, 6, NULL, b, lb);
    ck_assert(memcmp(a, b, sizeof a) == 0 && memcmp(la, lb, sizeof la) == 0);
    mr_dataset_free(&back);
    mr_config_free(&cfg);
    /* with val_images: the rows after n_train are the validation set,
     * written apart (here the same 6 examples again) */
    snprintf(cfg_text, sizeof cfg_text,
             "[net]\nbatch=2\n[data]\ntrain_images=%s\ntrain_labels=%s\nval_images=%s\n"
             "val_labels=%s\n[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=3\n"
             "activation=softmax\n",
             x, y, x, y);
    ck_assert_msg(mr_config_parse(cfg_text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    mr_dataset val = {0};
    ck_assert_int_eq(mr_dataset_load(&val, x, y, &err), MR_OK);
    ck_assert_int_eq(mr_dataset_append(&train, &val, &err), MR_OK);
    ck_assert_int_eq(train.n, 12);
    ck_assert_msg(mr_train_write_data(out, &cfg, &train, 6, &test, &err) == MR_OK, "%s", err.msg);
    snprintf(bx, sizeof bx, "%s:/val_images", out);
    snprintf(by, sizeof by, "%s:/val_labels", out);
    ck_assert_msg(mr_dataset_load(&back, bx, by, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(back.n, 6);
    int64_t later[6] = {6, 7, 8, 9, 10, 11};
    mr_dataset_fill(&train, later, 6, NULL, a, la);
    mr_dataset_fill(&back, rows, 6, NULL, b, lb);
    ck_assert(memcmp(a, b, sizeof a) == 0 && memcmp(la, lb, sizeof la) == 0);
    mr_dataset_free(&back);
    mr_dataset_free(&val);
    mr_dataset_free(&train);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(stop_signals_parsed) {
    mr_train_options o;
    mr_error err = {0};
    ck_assert_int_eq(parse(&o, &err, "m.cfg", NULL), MR_OK);
    ck_assert_int_eq(o.n_stop_signals, 3);
    ck_assert(o.stop_signals[0] == SIGTERM && o.stop_signals[1] == SIGINT &&
              o.stop_signals[2] == SIGUSR1);
    ck_assert(o.stop_budget == 25.0 && o.stop_path == NULL);
    ck_assert_int_eq(parse(&o, &err, "--stop-signals", "SIGUSR2,hup", "m.cfg", NULL), MR_ERR_USAGE);
    ck_assert_str_eq(err.msg, "--stop-signals SIGUSR2,hup: 'hup' is not a signal that can stop "
                              "training (TERM, INT, USR1, USR2, HUP, QUIT, XCPU, ALRM)");
    ck_assert_int_eq(parse(&o, &err, "--stop-signals", "SIGUSR2,HUP,USR2,15", "--stop-budget",
                           "9.5", "--checkpoint-on-signal", "s.h5", "m.cfg", NULL),
                     MR_OK);
    ck_assert_int_eq(o.n_stop_signals, 3); /* USR2 once */
    ck_assert(o.stop_signals[0] == SIGUSR2 && o.stop_signals[1] == SIGHUP &&
              o.stop_signals[2] == SIGTERM);
    ck_assert(o.stop_budget == 9.5);
    ck_assert_str_eq(o.stop_path, "s.h5");
    ck_assert_int_eq(parse(&o, &err, "--stop-signals", "none", "m.cfg", NULL), MR_OK);
    ck_assert_int_eq(o.n_stop_signals, 0);
    const char *bad[] = {"", "TERM,", ",INT", "KILL", "STOP", "9", "TERM INT"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(parse(&o, &err, "--stop-signals", bad[i], "m.cfg", NULL) == MR_ERR_USAGE,
                      "'%s' accepted", bad[i]);
        ck_assert_msg(strncmp(err.msg, "--stop-signals ", 15) == 0 && !strchr(err.msg, '\n'), "%s",
                      err.msg);
    }
    ck_assert_int_eq(parse(&o, &err, "--stop-budget", "0", "m.cfg", NULL), MR_ERR_USAGE);
    ck_assert_str_eq(err.msg, "--stop-budget 0: expected a number of seconds in (0, 86400]");
    ck_assert_int_eq(parse(&o, &err, "--stop-budget", "x", "m.cfg", NULL), MR_ERR_USAGE);
}
END_TEST

/* [net] checkpoint: the root folder alone is refused; when a checkpoint
 * is the end of the run (--resume auto then does nothing). */
START_TEST(checkpoint_pattern_and_end) {
    mr_error err = {0};
    ck_assert_int_eq(mr_ckpt_check_pattern(NULL, &mr_cli_words, &err), MR_OK);
    ck_assert_int_eq(mr_ckpt_check_pattern("ck/", &mr_cli_words, &err), MR_OK);
    ck_assert_int_eq(mr_ckpt_check_pattern("/tmp/ck/run.h5", &mr_cli_words, &err), MR_OK);
    ck_assert_int_eq(mr_ckpt_check_pattern("//", &mr_cli_words, &err), MR_ERR_CONFIG);
    ck_assert_msg(strncmp(err.msg, "[net] checkpoint //: the root folder", 36) == 0, "%s", err.msg);
    mr_error_clear(&err);
    mr_checkpoint c = {.state = {.epoch = 2, .step = 0, .global_step = 40}};
    ck_assert(mr_ckpt_finished(&c, 2, 0));
    ck_assert(!mr_ckpt_finished(&c, 3, 0));
    ck_assert(mr_ckpt_finished(&c, 3, 40));
    ck_assert(!mr_ckpt_finished(&c, 3, 41));
    ck_assert(!mr_ckpt_finished(&c, 1, 0)); /* beyond: mr_ckpt_check_epochs refuses it */
    c.state.step = 5;
    ck_assert(!mr_ckpt_finished(&c, 2, 0));
    /* a file that records its run's end (save_best_only's: an older state)
     * is judged by that end */
    c.state = (mr_fit_state){.epoch = 1, .global_step = 20};
    c.ended = (mr_checkpoint_end){.why = MR_RUN_END_EPOCHS, .epoch = 2, .global_step = 40};
    char said[128];
    ck_assert(mr_ckpt_finished(&c, 2, 0));
    ck_assert(!mr_ckpt_finished(&c, 3, 0));
    mr_ckpt_say_end(&c, 2, said, sizeof said);
    ck_assert_str_eq(said, "epoch 2/2, 40 updates");
    c.ended =
        (mr_checkpoint_end){.why = MR_RUN_END_MAX_STEPS, .epoch = 1, .step = 5, .global_step = 25};
    ck_assert(mr_ckpt_finished(&c, 3, 25));
    ck_assert(!mr_ckpt_finished(&c, 3, 30));
    ck_assert(!mr_ckpt_finished(&c, 3, 0));
    /* early stopping ended it: whatever the epochs asked for now */
    c.ended = (mr_checkpoint_end){.why = MR_RUN_END_EARLY_STOP, .epoch = 2, .global_step = 40};
    ck_assert(mr_ckpt_finished(&c, 5, 0));
    ck_assert(mr_ckpt_finished(&c, 9, 100));
    mr_ckpt_say_end(&c, 5, said, sizeof said);
    ck_assert_str_eq(said, "early stopping after epoch 2/5, 40 updates");
}
END_TEST

START_TEST(where_a_stop_checkpoint_goes) {
    char p[256];
    mr_ckpt_default_stop_path("out/model.h5", "s.json", p, sizeof p);
    ck_assert_str_eq(p, "out/model-stopped.h5");
    mr_ckpt_default_stop_path(NULL, "run.v2/s.json", p, sizeof p);
    ck_assert_str_eq(p, "run.v2/s-stopped.h5");
    mr_ckpt_default_stop_path(NULL, "run.v2/summary", p, sizeof p);
    ck_assert_str_eq(p, "run.v2/summary-stopped.h5");
    mr_ckpt_default_stop_path(NULL, NULL, p, sizeof p);
    ck_assert_str_eq(p, "");
    /* --resume auto: the pattern's newest, else the stop's file, else fresh */
    const char *d = tu_tmpdir();
    char pattern[4096], stop[4096], path[8192];
    mr_error err = {0};
    snprintf(pattern, sizeof pattern, "%s/ck/run.h5", d);
    snprintf(stop, sizeof stop, "%s/s-stopped.h5", d);
    ck_assert_int_eq(
        mr_ckpt_resume_path("f.h5", NULL, NULL, NULL, path, sizeof path, NULL, &mr_cli_words, &err),
        MR_OK);
    ck_assert_str_eq(path, "f.h5");
    ck_assert_int_eq(
        mr_ckpt_resume_path("auto", NULL, NULL, NULL, path, sizeof path, NULL, &mr_cli_words, &err),
        MR_ERR_USAGE);
    ck_assert_msg(strncmp(err.msg, "--resume auto: the .cfg has no [net] checkpoint", 47) == 0,
                  "%s", err.msg);
    /* the library's words (NULL) name its calls and arguments, no flag */
    mr_error_clear(&err);
    ck_assert_int_eq(
        mr_ckpt_resume_path("auto", NULL, NULL, NULL, path, sizeof path, NULL, NULL, &err),
        MR_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "load('auto'): the .cfg has no [net] checkpoint") &&
                      strstr(err.msg, "no stop_checkpoint, save() or json") &&
                      !strstr(err.msg, "--"),
                  "%s", err.msg);
    mr_error_clear(&err);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_ckpt_resume_path("auto", pattern, stop, NULL, path, sizeof path, NULL,
                                         &mr_cli_words, &err),
                     MR_OK);
    ck_assert_str_eq(path, ""); /* no folder yet */
    ck_assert_int_eq(
        mr_ckpt_resume_path("auto", NULL, stop, NULL, path, sizeof path, NULL, &mr_cli_words, &err),
        MR_OK);
    ck_assert_str_eq(path, "");
    /* a stop's file that is no checkpoint is skipped (a good one:
     * test_resume.c, which also has --save's file) */
    free(tu_write_text(d, "s-stopped.h5", "x"));
    ck_assert_int_eq(
        mr_ckpt_resume_path("auto", NULL, stop, NULL, path, sizeof path, NULL, &mr_cli_words, &err),
        MR_OK);
    ck_assert_str_eq(path, "");
    char ck[4096];
    snprintf(ck, sizeof ck, "%s/ck", d);
    ck_assert_int_eq(mkdir(ck, 0777), 0);
    free(tu_write_text(ck, "run-step000000007.h5", "x"));
    /* the pattern's file comes first, and it is verified: this one is no
     * checkpoint (a good one: test_signals.c), and there is none older */
    ck_assert_int_eq(mr_ckpt_resume_path("auto", pattern, stop, NULL, path, sizeof path, NULL,
                                         &mr_cli_words, &err),
                     MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "/ck/run-step000000007.h5") != NULL, "%s", err.msg);
    mr_error_clear(&err);
    /* a stop with nowhere to write, or on a process that does not write:
     * nothing written, no error (the writes themselves: test_signals.c) */
    mr_ckpt_run r = {.lead = 1};
    mr_fit_state st = {.global_step = 3};
    snprintf(r.stopped_at, sizeof r.stopped_at, "old");
    ck_assert_int_eq(mr_ckpt_on_stop(&r, &st, NULL, 0.1f, &err), MR_OK);
    ck_assert_str_eq(r.stopped_at, "");
    mr_ckpt_run other = {.lead = 0, .pattern = pattern, .stop_path = stop};
    ck_assert_int_eq(mr_ckpt_on_stop(&other, &st, NULL, 0.1f, &err), MR_OK);
    ck_assert_str_eq(other.stopped_at, "");
    ck_assert(other.last_save_s == 0.0);
}
END_TEST

/* A stop in the first epoch leaves the CSV's header, not an empty file. */
START_TEST(stop_keeps_the_metrics_header) {
    const char *d = tu_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/m.csv", d);
    FILE *csv = fopen(path, "w");
    ck_assert(csv != NULL);
    mr_progress pg;
    mr_progress_init(&pg, stdout, 1, 3, csv);
    mr_progress_on_stop(&pg);
    mr_progress_on_stop(&pg); /* once */
    fclose(csv);
    char *got = tu_read_in(d, "m.csv");
    ck_assert_str_eq(got, "epoch,accuracy,loss,val_accuracy,val_loss,learning_rate,"
                          "samples_per_sec,seconds\n");
    free(got);
}
END_TEST

/* [net] per_class's line from a confusion matrix (a class without examples
 * shows 0); [net] top_k's CSV column, empty in the rows a resume replays */
START_TEST(per_class_line_and_top_k_column) {
    const char *d = tu_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/pc.txt", d);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    const double conf[9] = {3, 1, 0, /* class 0: 3 of 4 */
                            0, 0, 0, /* class 1: none */
                            1, 1, 2};
    mr_progress_print_per_class(f, "val", conf, 3);
    fclose(f);
    char *got = tu_read_in(d, "pc.txt");
    ck_assert_str_eq(got, "val per-class accuracy: 0 0.7500 (4) | 1 0.0000 (0) | 2 0.5000 (4)\n");
    free(got);
    snprintf(path, sizeof path, "%s/tk.csv", d);
    FILE *csv = fopen(path, "w");
    ck_assert(csv != NULL);
    mr_progress pg;
    mr_progress_init(&pg, stdout, 1, 3, csv);
    pg.top_k = 5;
    mr_epoch_logs l = {.epoch = 0,
                       .loss = 1,
                       .accuracy = 0.5,
                       .has_val = 1,
                       .val_loss = 2,
                       .val_accuracy = 0.25,
                       .val_top_k = 0.75,
                       .lr = 0.5f};
    mr_progress_replay(&pg, &l, 1);
    l.epoch = 1;
    mr_progress_on_epoch_end(&pg, &l);
    fclose(csv);
    got = tu_read_in(d, "tk.csv");
    ck_assert_str_eq(got, "epoch,accuracy,loss,val_accuracy,val_loss,val_sparse_top_k_categorical_"
                          "accuracy,learning_rate,samples_per_sec,seconds\n"
                          "0,0.500000,1.000000,0.250000,2.000000,,0.5,0.0,0.000\n"
                          "1,0.500000,1.000000,0.250000,2.000000,0.750000,0.5,0.0,0.000\n");
    free(got);
}
END_TEST

int main(void) {
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("train");
    tcase_add_test(tc, options_parsed);
    tcase_add_test(tc, options_refused);
    tcase_add_test(tc, benchmark_options);
    tcase_add_test(tc, throughput_figures);
    tcase_add_test(tc, usage_names_the_program);
    tcase_add_test(tc, job_rules);
    tcase_add_test(tc, model_name_and_json_summary);
    tcase_add_test(tc, write_data_preprocessed);
    tcase_add_test(tc, stop_signals_parsed);
    tcase_add_test(tc, fit_options);
    tcase_add_test(tc, options_applied);
    tcase_add_test(tc, where_a_stop_checkpoint_goes);
    tcase_add_test(tc, checkpoint_pattern_and_end);
    tcase_add_test(tc, stop_keeps_the_metrics_header);
    tcase_add_test(tc, per_class_line_and_top_k_column);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
