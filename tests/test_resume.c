/* test_resume.c: checkpoints as a user runs them: a run resumed from
 * a checkpoint ends bitwise as the uninterrupted one (1 and 2 replicas, and
 * under mpirun -np 2, where one process alone creates the files),
 * mirrored_eval reports what training reported, the file has Keras's
 * layout for h5py, and every bad checkpoint or unwritable place fails with
 * one line, the right exit status and the old files untouched. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/array.h"
#include "runtime/npy.h"
#include "runtime/h5file.h"
#include "tests/testutil.h"

static char train_exe[4096], eval_exe[4096], export_exe[4096], dir[4096];

/* A small CNN with BN and dropout: every kind of state a resume restores. */
static const char *model_cfg =
    "[net]\nglobal_batch=16\nepochs=2\nvalidation_split=0.2\nseed=3\ncheckpoint=ck/run.h5\n"
    "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\ntest_images=x.npy\ntest_labels=y.npy\n"
    "scale=1/255\n"
    "[input]\nshape=8,8,1\n[conv2d]\nfilters=4\nsize=3\n[batchnorm]\n[activation]\n"
    "activation=relu\n[maxpool]\nsize=2\n[flatten]\n[dense]\nunits=16\nactivation=relu\n"
    "[dropout]\nrate=0.3\n[dense]\nunits=4\nactivation=softmax\n";
/* 320 training examples / 16 = 20 updates an epoch */
#define FIRST "ck/run-step000000020.h5"

static void setup(void) {
    char *p = tu_build_path("launch/mirrored_train");
    snprintf(train_exe, sizeof train_exe, "%s", p);
    free(p);
    p = tu_build_path("launch/mirrored_eval");
    snprintf(eval_exe, sizeof eval_exe, "%s", p);
    free(p);
    p = tu_build_path("launch/mirrored_export");
    snprintf(export_exe, sizeof export_exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    tu_write_image_data(dir, "x.npy", "y.npy", 400, 4);
    free(tu_write_text(dir, "m.cfg", model_cfg));
}

/* Runs `cmd` in dir (prefix $T: mirrored_train, $E: mirrored_eval, $X:
 * mirrored_export). */
static int run(const char *cmd, char **out) {
    char full[40000];
    snprintf(full, sizeof full,
             "cd %s && T=%s E=%s X=%s OMPI_ALLOW_RUN_AS_ROOT=1 "
             "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 sh -c '%s'",
             dir, train_exe, eval_exe, export_exe, cmd);
    return tu_run(full, out);
}

static void run_ok(const char *cmd) {
    char *out;
    int rc = run(cmd, &out);
    ck_assert_msg(rc == 0, "'%s' exited %d: %s", cmd, rc, out);
    free(out);
}

static char *read_in_dir(const char *name) {
    return tu_read_in(dir, name);
}

static void resume_with(const char *launcher, const char *devices) {
    char cmd[4096];
    run_ok("rm -rf ck");
    snprintf(cmd, sizeof cmd, "%s $T m.cfg %s --quiet --json full.json --metrics full.csv",
             launcher, devices);
    run_ok(cmd);
    /* from the checkpoint after epoch 1 of 2 */
    snprintf(cmd, sizeof cmd,
             "%s $T m.cfg %s --quiet --resume " FIRST " --json res.json --metrics res.csv",
             launcher, devices);
    run_ok(cmd);
    tu_same_run(dir, "full.json", "full.csv", "res.json", "res.csv");
}

START_TEST(resume_is_bitwise) {
    resume_with("", "--devices cpu");
    resume_with("", "--devices cpu:2");
    /* --resume auto takes the newest: the end of epoch 2, nothing left to
     * train: one line, no file written */
    char *out;
    int rc = run("$T m.cfg --devices cpu:2 --quiet --resume auto --json auto.json --metrics "
                 "auto.csv",
                 &out);
    ck_assert_msg(rc == 0 &&
                      strstr(out, "--resume auto: ck/run-step000000040.h5 is the end of "
                                  "this run (epoch 2/2, 40 updates): nothing to train") &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
    ck_assert_int_ne(run("test -e auto.json || test -e auto.csv", NULL), 0);
}
END_TEST

/* Every optimizer's state survives a resume bitwise, with the options
 * that act in the update (weight decay, each kind of clipping): RMSprop's
 * two slots, AdamW's moments, SGD's velocity. */
START_TEST(resume_is_bitwise_every_optimizer) {
    const char *nets[] = {
        "optimizer=rmsprop\nmomentum=0.5\nweight_decay=0.01\nclipnorm=0.05\n",
        "optimizer=adamw\nglobal_clipnorm=0.1\n",
        "optimizer=sgd\nlearning_rate=0.05\nmomentum=0.9\nnesterov=1\nclipvalue=0.01\n",
    };
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        char text[4096];
        snprintf(text, sizeof text, "[net]\n%s%s", nets[i], model_cfg + strlen("[net]\n"));
        free(tu_write_text(dir, "o.cfg", text));
        run_ok("rm -rf ck && $T o.cfg --devices cpu:2 --quiet --json full.json --metrics full.csv");
        run_ok("$T o.cfg --devices cpu:2 --quiet --resume " FIRST
               " --json res.json --metrics res.csv");
        tu_same_run(dir, "full.json", "full.csv", "res.json", "res.csv");
    }
    /* the clipping acts: without clipvalue, the last one ends elsewhere */
    char plain[32], other[32], text[4096];
    snprintf(text, sizeof text,
             "[net]\noptimizer=sgd\nlearning_rate=0.05\nmomentum=0.9\n"
             "nesterov=1\n%s",
             model_cfg + strlen("[net]\n"));
    free(tu_write_text(dir, "o.cfg", text));
    run_ok("rm -rf ck && $T o.cfg --devices cpu:2 --quiet --json p.json");
    tu_params_hash(dir, "p.json", plain);
    tu_params_hash(dir, "full.json", other);
    ck_assert_str_ne(plain, other);
}
END_TEST

/* Under mpirun one process writes: watch the folder for every file made. */
START_TEST(resume_under_mpirun_one_writer) {
    run_ok("rm -rf ck && mkdir ck");
    char ckdir[8192];
    snprintf(ckdir, sizeof ckdir, "%s/ck", dir);
    int fd = inotify_init1(IN_NONBLOCK);
    ck_assert(fd >= 0);
    ck_assert(inotify_add_watch(fd, ckdir, IN_CREATE) >= 0);
    run_ok("mpirun -q -np 2 $T m.cfg --quiet --json full.json --metrics full.csv");
    char buf[65536], first_pid[32] = "";
    int creates = 0, writers_differ = 0;
    ssize_t len;
    while ((len = read(fd, buf, sizeof buf)) > 0)
        for (char *p = buf; p < buf + len;) {
            struct inotify_event *e = (struct inotify_event *)p;
            const char *tmp = e->len ? strstr(e->name, ".tmp.") : NULL;
            if (tmp != NULL) { /* "run-stepN.h5.tmp.<pid>": one per file written */
                creates++;
                if (first_pid[0] == '\0')
                    snprintf(first_pid, sizeof first_pid, "%s", tmp + 5);
                else if (strcmp(first_pid, tmp + 5) != 0)
                    writers_differ = 1;
            }
            p += sizeof *e + e->len;
        }
    close(fd);
    /* two checkpoints (after each epoch), by one process; the probe of the
     * folder before training is a third file of the same process */
    ck_assert_msg(creates == 3 && !writers_differ, "%d files created, by %s process", creates,
                  writers_differ ? "more than one" : "one");
    run_ok("mpirun -q -np 2 $T m.cfg --quiet --resume " FIRST " --json res.json --metrics res.csv");
    tu_same_run(dir, "full.json", "full.csv", "res.json", "res.csv");
}
END_TEST

START_TEST(eval_reports_what_training_did) {
    char *out;
    int rc = run("$T m.cfg --devices cpu:2 --save model.h5", &out);
    ck_assert_msg(rc == 0, "%s", out);
    char *line = strstr(out, "Test loss: ");
    ck_assert_ptr_nonnull(line);
    char want[64];
    snprintf(want, sizeof want, "%.*s", (int)strcspn(line, "\n"), line);
    free(out);
    /* another device count */
    rc = run("$E model.h5 --devices cpu --batch 7 --json e.json", &out);
    ck_assert_msg(rc == 0 && strstr(out, want) && strstr(out, "confusion matrix"), "want %s: %s",
                  want, out);
    free(out);
    char *j = read_in_dir("e.json");
    ck_assert_msg(j && strstr(j, "\"test_accuracy\"") && strstr(j, "\"per_class\"") &&
                      strstr(j, "\"confusion\""),
                  "%s", j);
    free(j);
    /* --top-k (Keras's name) and --per-class: the table without the matrix;
     * a K not below the 4 classes is refused */
    rc = run("$E model.h5 --devices cpu:2 --top-k 2 --per-class --json e2.json", &out);
    ck_assert_msg(rc == 0 && strstr(out, " - test_sparse_top_k_categorical_accuracy: ") &&
                      strstr(out, "class  examples  accuracy") && !strstr(out, "confusion matrix"),
                  "%s", out);
    free(out);
    j = read_in_dir("e2.json");
    ck_assert_msg(j && strstr(j, "\"top_k\": 2,") &&
                      strstr(j, "\"test_sparse_top_k_categorical_accuracy\": "),
                  "%s", j);
    free(j);
    rc = run("$E model.h5 --top-k 4", &out);
    ck_assert_msg(rc == 2 && strstr(out, "--top-k 4: must be below the 4 classes") &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
    /* the layout h5py and Keras read (skips only without python3-h5py) */
    char cmd[8192], *script = tu_source_path("tests/h5_layout.py");
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s model.h5 conv2d:Conv2D:3x3x1x4\\;4 "
             "batch_normalization:BatchNormalization:4\\;4\\;4\\;4 activation:Activation "
             "max_pooling2d:MaxPooling2D flatten:Flatten dense:Dense:36x16\\;16 "
             "dropout:Dropout dense_1:Dense:16x4\\;4",
             script);
    free(script);
    rc = run(cmd, &out);
    printf("%s", out);
    ck_assert_msg(rc == 0 || (rc == 77 && strstr(out, "SKIPPED")), "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* loss = binary_crossentropy: a run resumed from its checkpoint ends bitwise as the
 * uninterrupted one (the epoch logs hold binary accuracies); mirrored_eval reports the
 * training's test line, its 2 x 2 confusion matrix, predictions (n, 2) = (1 - p, p), and
 * refuses --top-k */
START_TEST(binary_crossentropy_eval_and_resume) {
    tu_write_image_data(dir, "x2.npy", "y2.npy", 400, 2);
    free(tu_write_text(dir, "b.cfg",
                       "[net]\nglobal_batch=16\nepochs=2\nvalidation_split=0.2\nseed=3\n"
                       "checkpoint=ckb/run.h5\nloss=binary_crossentropy\nlabel_smoothing=0.1\n"
                       "[data]\ntrain_images=x2.npy\ntrain_labels=y2.npy\ntest_images=x2.npy\n"
                       "test_labels=y2.npy\nscale=1/255\n[input]\nshape=8,8,1\n[flatten]\n"
                       "[dense]\nunits=8\nactivation=relu\n[dense]\nunits=1\n"
                       "activation=sigmoid\n"));
    run_ok("rm -rf ckb");
    char *out;
    int rc = run("$T b.cfg --devices cpu:2 --json full.json --metrics full.csv --save b.h5", &out);
    ck_assert_msg(rc == 0, "%s", out);
    char *line = strstr(out, "Test loss: ");
    ck_assert_ptr_nonnull(line);
    char want[64];
    snprintf(want, sizeof want, "%.*s", (int)strcspn(line, "\n"), line);
    free(out);
    run_ok("$T b.cfg --devices cpu:2 --quiet --resume ckb/run-step000000020.h5 --json res.json "
           "--metrics res.csv");
    tu_same_run(dir, "full.json", "full.csv", "res.json", "res.csv");
    rc = run("$E b.h5 --devices cpu --batch 7 --predict bp.npy", &out);
    ck_assert_msg(rc == 0 && strstr(out, want) && strstr(out, "confusion matrix"), "want %s: %s",
                  want, out);
    free(out);
    rc = run("$E b.h5 --devices cpu --data x2.npy --predict bp2.npy", &out);
    ck_assert_msg(rc == 0 && strstr(out, "class probabilities (400, 2) in bp2.npy"), "%s", out);
    free(out);
    rc = run("$E b.h5 --top-k 1", &out);
    ck_assert_msg(rc == 2 && strstr(out, "--top-k 1: does not apply to loss = binary") &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* Multi-label binary_crossentropy (3 sigmoid outputs, multi-hot labels (n, 3)): a run resumed
 * from its checkpoint ends bitwise as the uninterrupted one (the epoch logs hold binary
 * accuracies over examples x 3); mirrored_eval reports the training's test line, says there is
 * no confusion matrix, writes empty per_class and confusion lists in --json, (n, 3) sigmoid
 * probabilities with --predict (each in (0, 1)), and refuses --top-k */
START_TEST(multi_label_bce_eval_and_resume) {
    tu_write_image_data(dir, "xm.npy", "ym_ids.npy", 400, 4);
    tu_write_multi_hot_labels(dir, "ym.npy", 400);
    free(tu_write_text(dir, "mlab.cfg",
                       "[net]\nglobal_batch=16\nepochs=2\nvalidation_split=0.2\nseed=3\n"
                       "checkpoint=ckm/run.h5\nloss=binary_crossentropy\nlabel_smoothing=0.1\n"
                       "[data]\ntrain_images=xm.npy\ntrain_labels=ym.npy\ntest_images=xm.npy\n"
                       "test_labels=ym.npy\nscale=1/255\n[input]\nshape=8,8,1\n[flatten]\n"
                       "[dense]\nunits=8\nactivation=relu\n[dense]\nunits=3\n"
                       "activation=sigmoid\n"));
    run_ok("rm -rf ckm");
    char *out;
    int rc =
        run("$T mlab.cfg --devices cpu:2 --json full.json --metrics full.csv --save mlab.h5", &out);
    ck_assert_msg(rc == 0, "%s", out);
    char *line = strstr(out, "Test loss: ");
    ck_assert_ptr_nonnull(line);
    char want[64];
    snprintf(want, sizeof want, "%.*s", (int)strcspn(line, "\n"), line);
    free(out);
    run_ok("$T mlab.cfg --devices cpu:2 --quiet --resume ckm/run-step000000020.h5 --json res.json "
           "--metrics res.csv");
    tu_same_run(dir, "full.json", "full.csv", "res.json", "res.csv");
    rc = run("$E mlab.h5 --devices cpu --batch 7 --predict mp.npy --json me.json", &out);
    ck_assert_msg(rc == 0 && strstr(out, want) && strstr(out, "no per-class table or confusion") &&
                      !strstr(out, "confusion matrix ("),
                  "want %s: %s", want, out);
    free(out);
    char *json = tu_read_in(dir, "me.json");
    ck_assert_msg(json && strstr(json, "\"per_class\": []") && strstr(json, "\"confusion\": []"),
                  "%s", json);
    free(json);
    char p[8192];
    snprintf(p, sizeof p, "%s/mp.npy", dir);
    mr_array a = {0};
    mr_error err = {0};
    ck_assert_msg(mr_array_read(p, &a, &err) == MR_OK, "%s", err.msg);
    ck_assert(a.dtype == MR_DTYPE_F32 && a.ndim == 2 && a.dims[0] == 400 && a.dims[1] == 3);
    for (int64_t i = 0; i < 1200; i++) {
        const float v = ((const float *)a.data)[i];
        ck_assert_msg(v > 0.0f && v < 1.0f, "probability %lld: %g", (long long)i, v);
    }
    mr_array_free(&a);
    rc = run("$E mlab.h5 --devices cpu --data xm.npy --predict mp2.npy", &out);
    ck_assert_msg(rc == 0 && strstr(out, "class probabilities (400, 3) in mp2.npy"), "%s", out);
    free(out);
    rc = run("$E mlab.h5 --devices cpu --data xm.npy,ym_ids.npy", &out);
    ck_assert_msg(rc == 2 && strstr(out, "ym_ids.npy") && strstr(out, "multi-hot labels must be"),
                  "exit %d: %s", rc, out);
    free(out);
    /* --write-data: the labels as they are, (n, 3) */
    rc = run("$T mlab.cfg --write-data mlab_pre.h5", &out);
    ck_assert_msg(rc == 0 && strstr(out, "train_labels = mlab_pre.h5:/train_labels"), "%s", out);
    free(out);
    snprintf(p, sizeof p, "%s/mlab_pre.h5:/train_labels", dir);
    ck_assert_msg(mr_array_read(p, &a, &err) == MR_OK, "%s", err.msg);
    ck_assert(a.ndim == 2 && a.dims[0] == 400 && a.dims[1] == 3 && a.dtype == MR_DTYPE_I64);
    for (int64_t i = 0; i < 400; i++) {
        const int64_t *r = (const int64_t *)a.data + i * 3, c = i % 4;
        ck_assert_msg(r[0] == (c & 1) && r[1] == (c >> 1) && r[2] == (c == 3), "row %lld",
                      (long long)i);
    }
    mr_array_free(&a);
    rc = run("$E mlab.h5 --top-k 1", &out);
    ck_assert_msg(rc == 2 && strstr(out, "--top-k 1: does not apply to loss = binary") &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* A failure: exit `code`, one line with both strings, no output files. */
static void expect_fail(const char *cmd, int code, const char *want1, const char *want2) {
    run_ok("rm -f out.csv out.json");
    char *out;
    int rc = run(cmd, &out);
    const char *nl = strchr(out, '\n');
    ck_assert_msg(rc == code && nl && nl[1] == '\0' && strstr(out, want1) && strstr(out, want2),
                  "'%s': exit %d, want %d '%s' '%s': %s", cmd, rc, code, want1, want2, out);
    free(out);
    char *f = read_in_dir("out.csv");
    ck_assert_msg(f == NULL, "'%s' left a metrics file", cmd);
}

/* mirrored_eval --data IMAGES without labels: the class probabilities
 * only, the same bytes as with labels; without --predict, or with --json
 * (a score needs labels), one line and exit 2. */
START_TEST(predict_without_labels) {
    run_ok("$T m.cfg --devices cpu --epochs 1 --quiet --save p.h5");
    run_ok("$E p.h5 --devices cpu --data x.npy,y.npy --predict with.npy --quiet");
    char *out;
    int rc = run("$E p.h5 --devices cpu --data x.npy --predict alone.npy", &out);
    ck_assert_msg(rc == 0 && strstr(out, "class probabilities (400, 4) in alone.npy") &&
                      strstr(out, "Test loss") == NULL,
                  "exit %d: %s", rc, out);
    free(out);
    rc = run("cmp with.npy alone.npy && test -s alone.npy", &out);
    ck_assert_msg(rc == 0, "the predictions differ: %s", out);
    free(out);
    expect_fail("$E p.h5 --data x.npy", 2, "x.npy: no labels", "--predict");
    expect_fail("$E p.h5 --data x.npy --predict none.npy --json j.json", 2, "--json j.json",
                "needs labels");
    expect_fail("$E p.h5 --data ,y.npy --predict none.npy", 2, "expected IMAGES,LABELS", "IMAGES");
    char *f = read_in_dir("none.npy");
    ck_assert_msg(f == NULL, "a refused run left its --predict file");
}
END_TEST

/* The first line of `cmd`'s output that starts with `prefix` (malloc'd). */
static char *line_of(const char *cmd, const char *prefix) {
    char *out;
    int rc = run(cmd, &out);
    ck_assert_msg(rc == 0, "'%s' exited %d: %s", cmd, rc, out);
    char *at = strstr(out, prefix);
    ck_assert_msg(at != NULL, "'%s' printed no '%s': %s", cmd, prefix, out);
    char *line = strndup(at, strcspn(at, "\n"));
    free(out);
    return line;
}

/* Keras 3's own formats as --init-weights and mirrored_eval read them: a
 * .keras archive (here mirrored_export's, which Keras loads) and the
 * model.weights.h5 inside it (the layout model.save_weights writes) give
 * the checkpoint's test loss; a model they do not fit, and archives that
 * are not Keras's, are one-line refusals naming the file. */
START_TEST(keras3_weights_and_archives) {
    run_ok("$T m.cfg --devices cpu --epochs 1 --quiet --save k.h5 && $X k.h5 k.keras && "
           "rm -f model.weights.h5 && /usr/bin/python3 -c \"import zipfile; "
           "zipfile.ZipFile(\\\"k.keras\\\").extract(\\\"model.weights.h5\\\")\"");
    char *want = line_of("$E k.h5 --devices cpu --quiet", "Test loss: ");
    char *archive = line_of("$E k.keras --cfg m.cfg --devices cpu --quiet", "Test loss: ");
    char *weights = line_of("$E model.weights.h5 --cfg m.cfg --devices cpu --quiet", "Test loss: ");
    ck_assert_str_eq(archive, want);
    ck_assert_str_eq(weights, want);
    free(archive), free(weights), free(want);
    /* --init-weights: the same start as from the checkpoint */
    want = line_of("$T m.cfg --devices cpu --epochs 1 --quiet --init-weights k.h5", "Test loss: ");
    archive =
        line_of("$T m.cfg --devices cpu --epochs 1 --quiet --init-weights k.keras", "Test loss: ");
    weights = line_of("$T m.cfg --devices cpu --epochs 1 --quiet --init-weights model.weights.h5",
                      "Test loss: ");
    ck_assert_str_eq(archive, want);
    ck_assert_str_eq(weights, want);
    free(archive), free(weights), free(want);
    /* another model: the archive and the group are named */
    run_ok("sed s/units=16/units=8/ m.cfg > m8.cfg");
    expect_fail("$E k.keras --cfg m8.cfg --devices cpu", 2, "k.keras:model.weights.h5:",
                "/layers/dense/vars/0 has shape (36, 16), the model needs (36, 8)");
    expect_fail("$E model.weights.h5 --cfg m8.cfg --devices cpu", 2,
                "model.weights.h5:", "/layers/dense/vars/0");
    /* zip archives that are not Keras's, and a cut one */
    run_ok("/usr/bin/python3 -c \"import zipfile; z = zipfile.ZipFile(\\\"nw.keras\\\", "
           "\\\"w\\\"); z.writestr(\\\"config.json\\\", \\\"{}\\\"); z.close()\" && "
           "head -c 300 k.keras > cut.keras");
    expect_fail("$E nw.keras --cfg m.cfg", 2, "nw.keras", "without model.weights.h5");
    expect_fail("$E cut.keras --cfg m.cfg", 2, "cut.keras", "not a readable .keras archive");
    /* an archive whose weights are an archive: read as HDF5, not unpacked
     * again (a zip quine would unpack forever) */
    run_ok("/usr/bin/python3 -c \"import zipfile; z = zipfile.ZipFile(\\\"in.keras\\\", "
           "\\\"w\\\"); z.write(\\\"k.keras\\\", \\\"model.weights.h5\\\"); z.close()\"");
    expect_fail("$E in.keras --cfg m.cfg", 2, "in.keras:model.weights.h5", "HDF5");
}
END_TEST

START_TEST(bad_checkpoints) {
    run_ok("rm -rf ck && $T m.cfg --epochs 1 --quiet --save good.h5");
    const char *use = "--metrics out.csv --json out.json --quiet";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "$T m.cfg --resume missing.h5 %s", use);
    expect_fail(cmd, 2, "missing.h5: cannot open", "No such file");
    free(tu_write_text(dir, "text.h5", "not HDF5\n"));
    snprintf(cmd, sizeof cmd, "$T m.cfg --resume text.h5 %s", use);
    expect_fail(cmd, 2, "text.h5", "not a readable HDF5 file");
    run_ok("head -c 3000 good.h5 > cut.h5");
    snprintf(cmd, sizeof cmd, "$T m.cfg --resume cut.h5 %s", use);
    expect_fail(cmd, 2, "cut.h5", "");
    expect_fail("$E cut.h5", 2, "cut.h5", "");
    expect_fail("$E text.h5", 2, "text.h5", "not a readable HDF5 file");
    /* HDF5, but not ours: named, with what to do */
    mr_h5 h;
    mr_error err = {0};
    char p[8192];
    snprintf(p, sizeof p, "%s/plain.h5", dir);
    ck_assert_int_eq(mr_h5_create(&h, p, &err), MR_OK);
    ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
    snprintf(cmd, sizeof cmd, "$T m.cfg --resume plain.h5 %s", use);
    expect_fail(cmd, 2, "plain.h5", "no /mirrored group");
    expect_fail("$E plain.h5", 2, "plain.h5", "--cfg");
    expect_fail("$E plain.h5 --cfg m.cfg", 2, "plain.h5", "neither a Keras .h5 model");
    /* another model's checkpoint */
    free(tu_write_text(dir, "other.cfg",
                       "[net]\nglobal_batch=16\n[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
                       "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=4\nactivation=softmax\n"));
    snprintf(cmd, sizeof cmd, "$T other.cfg --resume good.h5 %s", use);
    expect_fail(cmd, 2, "good.h5", "another model");
    /* weights of the right layers but other shapes (Dense 16 -> 8) */
    free(tu_write_text(dir, "wide.cfg",
                       "[net]\nglobal_batch=16\n[data]\ntrain_images=x.npy\ntrain_labels=y.npy\n"
                       "[input]\nshape=8,8,1\n[conv2d]\nfilters=4\nsize=3\n[batchnorm]\n"
                       "[activation]\nactivation=relu\n[maxpool]\nsize=2\n[flatten]\n[dense]\n"
                       "units=8\nactivation=relu\n[dropout]\nrate=0.3\n[dense]\nunits=4\n"
                       "activation=softmax\n"));
    snprintf(cmd, sizeof cmd, "$T wide.cfg --init-weights good.h5 %s", use);
    expect_fail(cmd, 2, "/model_weights/dense/sequential/dense/kernel", "(36, 16)");
}
END_TEST

START_TEST(unwritable_places) {
    /* a checkpoint folder that cannot be made: refused before training */
    free(tu_write_text(dir, "afile", "x"));
    char text[4096];
    const char *c = strstr(model_cfg, "checkpoint=ck/run.h5");
    snprintf(text, sizeof text, "%.*scheckpoint=afile/r.h5%s", (int)(c - model_cfg), model_cfg,
             c + strlen("checkpoint=ck/run.h5"));
    free(tu_write_text(dir, "bad_ck.cfg", text));
    expect_fail("$T bad_ck.cfg --metrics out.csv", 2, "[net] checkpoint afile/", "");
    expect_fail("$T m.cfg --save nowhere/m.h5 --metrics out.csv", 2, "--save nowhere/m.h5",
                "cannot write");
    /* a full disk while saving (a file size limit): exit 1, the old file whole */
    run_ok("rm -rf ck && $T m.cfg --epochs 1 --quiet --save keep.h5 && cp keep.h5 before.h5");
    char *out;
    int rc = run("trap \"\" XFSZ; ulimit -f 8; exec $T m.cfg --epochs 1 --quiet --save keep.h5 "
                 "--metrics out.csv",
                 &out);
    ck_assert_msg(rc == 1 && (strstr(out, "keep.h5") || strstr(out, "ck/run")), "exit %d: %s", rc,
                  out);
    free(out);
    ck_assert_int_eq(run("cmp keep.h5 before.h5 && ! ls | grep -q tmp", NULL), 0);
}
END_TEST

/* Another replica count: weights and optimizer restored, training goes on
 * from the same example, and the run says what changed. */
START_TEST(resume_with_other_replicas) {
    run_ok("rm -rf ck && $T m.cfg --devices cpu:2 --epochs 1 --quiet");
    char *out;
    int rc = run("$T m.cfg --devices cpu --resume " FIRST, &out);
    ck_assert_msg(rc == 0 && strstr(out, "Resuming from " FIRST) &&
                      strstr(out, "It was trained with 2 replicas") && strstr(out, "Epoch 2/2") &&
                      !strstr(out, "Epoch 1/2"),
                  "%s", out);
    free(out);
}
END_TEST

/* A checkpoint that finished its epochs says there is nothing to
 * train; one beyond the epochs asked for is refused before anything is
 * written. */
START_TEST(resume_finished_or_beyond) {
    run_ok("rm -rf ck && $T m.cfg --quiet");
    char *out;
    int rc = run("$T m.cfg --resume ck/run-step000000040.h5 --metrics done.csv", &out);
    ck_assert_msg(rc == 0 && strstr(out, "nothing to train") && !strstr(out, "Epoch 2/2 -") &&
                      !strstr(out, "epoch 2/2, 0 updates"),
                  "exit %d: %s", rc, out);
    free(out);
    char *csv = read_in_dir("done.csv");
    ck_assert_ptr_nonnull(csv);
    free(csv);
    /* --epochs 1 on a 2-epoch checkpoint, and on one 5 updates into epoch 2 */
    expect_fail("$T m.cfg --epochs 1 --resume ck/run-step000000040.h5 --metrics e1.csv", 2,
                "ck/run-step000000040.h5", "beyond the 1 epoch");
    run_ok("rm -rf ck && sed \"s/^checkpoint_every.*//; s/^checkpoint=.*/&\\ncheckpoint_every=25 "
           "steps/\" m.cfg > s25.cfg && $T s25.cfg --quiet");
    expect_fail("$T s25.cfg --epochs 1 --resume ck/run-step000000025.h5 --metrics e1.csv", 2,
                "epoch 2", "beyond the 1 epoch");
    ck_assert_int_ne(run("test -e e1.csv", NULL), 0);
}
END_TEST

/* Resuming with an edited [net] says what changed and whether the
 * optimizer state was kept. */
START_TEST(resume_with_edited_cfg) {
    run_ok("rm -rf ck && $T m.cfg --epochs 1 --quiet");
    char text[4096], *out;
    /* the learning rate only: the optimizer state is kept */
    snprintf(text, sizeof text, "[net]\nlearning_rate=0.01\n%s", model_cfg + strlen("[net]\n"));
    free(tu_write_text(dir, "lr.cfg", text));
    int rc = run("$T lr.cfg --resume " FIRST, &out);
    ck_assert_msg(rc == 0 && strstr(out, "learning_rate 0.001 -> 0.01") &&
                      strstr(out, "optimizer state (adam) kept") && !strstr(out, "optimizer adam"),
                  "exit %d: %s", rc, out);
    free(out);
    /* class weights added: said, the optimizer state kept; the plan line shows them */
    snprintf(text, sizeof text, "[net]\nclass_weight=1,2,0.5,1\n%s", model_cfg + strlen("[net]\n"));
    free(tu_write_text(dir, "cw.cfg", text));
    rc = run("$T cw.cfg --resume " FIRST, &out);
    ck_assert_msg(rc == 0 && strstr(out, "class_weight none -> 1,2,0.5,1") &&
                      strstr(out, "optimizer state (adam) kept") &&
                      strstr(out, ", class weights 1,2,0.5,1\n"),
                  "exit %d: %s", rc, out);
    free(out);
    /* adam -> sgd with momentum: adam's slots dropped, said so */
    snprintf(text, sizeof text, "[net]\noptimizer=sgd\nmomentum=0.9\n%s",
             model_cfg + strlen("[net]\n"));
    free(tu_write_text(dir, "sgd.cfg", text));
    rc = run("$T sgd.cfg --resume " FIRST, &out);
    ck_assert_msg(rc == 0 && strstr(out, "optimizer adam -> sgd") &&
                      strstr(out, "momentum 0 -> 0.9") && strstr(out, "dropped") &&
                      strstr(out, "Epoch 2/2"),
                  "exit %d: %s", rc, out);
    free(out);
    /* adam -> rmsprop: its mean squares start from zero */
    snprintf(text, sizeof text, "[net]\noptimizer=rmsprop\n%s", model_cfg + strlen("[net]\n"));
    free(tu_write_text(dir, "rms.cfg", text));
    rc = run("$T rms.cfg --resume " FIRST, &out);
    ck_assert_msg(rc == 0 && strstr(out, "optimizer adam -> rmsprop") &&
                      strstr(out, "optimizer state (adam moments) dropped") &&
                      strstr(out, "rmsprop starts from zero mean squares") &&
                      strstr(out, "Epoch 2/2"),
                  "exit %d: %s", rc, out);
    free(out);
    /* the same .cfg: nothing said */
    rc = run("$T m.cfg --resume " FIRST, &out);
    ck_assert_msg(rc == 0 && !strstr(out, "differs"), "exit %d: %s", rc, out);
    free(out);
    /* sgd with momentum -> adam: adam's bias correction counts the 20 updates */
    run_ok("rm -rf ck && $T sgd.cfg --epochs 1 --quiet");
    rc = run("$T m.cfg --resume " FIRST, &out);
    ck_assert_msg(rc == 0 && strstr(out, "optimizer sgd -> adam") &&
                      strstr(out, "optimizer state (sgd momentum) dropped") &&
                      strstr(out, "bias correction at update 21") && strstr(out, "Epoch 2/2"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* --write-data: the preprocessed examples, which train to the same bits. */
START_TEST(write_data_trains_the_same) {
    char *out;
    int rc = run("$T m.cfg --write-data pre.h5", &out);
    ck_assert_msg(rc == 0 && strstr(out, "train_images = pre.h5:/train_images"), "%s", out);
    free(out);
    free(tu_write_text(dir, "pre.cfg",
                       "[net]\nglobal_batch=16\nepochs=2\nvalidation_split=0.2\nseed=3\n"
                       "[data]\ntrain_images=pre.h5:/train_images\n"
                       "train_labels=pre.h5:/train_labels\ntest_images=pre.h5:/test_images\n"
                       "test_labels=pre.h5:/test_labels\nscale=1\n"
                       "[input]\nshape=8,8,1\n[conv2d]\nfilters=4\nsize=3\n[batchnorm]\n"
                       "[activation]\nactivation=relu\n[maxpool]\nsize=2\n[flatten]\n[dense]\n"
                       "units=16\nactivation=relu\n[dropout]\nrate=0.3\n[dense]\nunits=4\n"
                       "activation=softmax\n"));
    run_ok("rm -rf ck && $T m.cfg --devices cpu:2 --quiet --json raw.json --metrics raw.csv");
    run_ok("$T pre.cfg --devices cpu:2 --quiet --json pre.json --metrics pre.csv");
    tu_same_run(dir, "raw.json", "raw.csv", "pre.json", "pre.csv");
}
END_TEST

/* --log: one JSON object per update with the fields the issue names. */
START_TEST(step_log) {
    run_ok("rm -rf ck && $T m.cfg --quiet --log steps.jsonl");
    char *log = read_in_dir("steps.jsonl");
    ck_assert_ptr_nonnull(log);
    int lines = 0;
    for (char *p = log; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    ck_assert_int_eq(lines, 40); /* 2 epochs of 20 updates */
    const char *keys[] = {"{\"step\": 1, \"epoch\": 0, \"loss\": ",
                          "\"learning_rate\": 0.001",
                          "\"step_seconds\": ",
                          "\"compute_seconds\": ",
                          "\"comm_seconds\": ",
                          "\"data_seconds\": ",
                          "\"device\": \"cpu\"}",
                          "{\"step\": 40, \"epoch\": 1,"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(log, keys[i]) != NULL, "no %s in %s", keys[i], log);
    free(log);
}
END_TEST

/* --init-weights: training starts from the file's weights. */
START_TEST(init_weights) {
    run_ok("rm -rf ck && $T m.cfg --epochs 1 --quiet --save start.h5 --metrics a.csv");
    char *out;
    int rc = run("$T m.cfg --epochs 1 --init-weights start.h5 --metrics b.csv", &out);
    ck_assert_msg(rc == 0 && strstr(out, "Weights from start.h5"), "%s", out);
    free(out);
    /* the first epoch from trained weights has a lower loss than from scratch */
    char *a = read_in_dir("a.csv"), *b = read_in_dir("b.csv");
    double la = atof(strchr(strchr(strchr(a, '\n') + 1, ',') + 1, ',') + 1);
    double lb = atof(strchr(strchr(strchr(b, '\n') + 1, ',') + 1, ',') + 1);
    ck_assert_msg(lb < 0.9 * la, "loss from the file %g, from scratch %g", lb, la);
    free(a), free(b);
    expect_fail("$T m.cfg --init-weights start.h5 --resume start.h5", 2, "--resume",
                "--init-weights");
}
END_TEST

START_TEST(augment_error_names_its_line) {
    /* flat examples (400, 64) for the flat input */
    static uint8_t flat[400 * 64];
    mr_array xf = {.dtype = MR_DTYPE_U8, .ndim = 2, .dims = {400, 64}, .data = flat};
    char p[8192];
    mr_error err = {0};
    snprintf(p, sizeof p, "%s/xf.npy", dir);
    ck_assert_msg(mr_npy_write(p, &xf, &err) == MR_OK, "%s", err.msg);
    free(tu_write_text(
        dir, "aug.cfg",
        "[net]\nbatch=8\n[data]\ntrain_images=xf.npy\ntrain_labels=y.npy\n"
        "[augment]\nflip=1\n[input]\nshape=64\n[dense]\nunits=4\nactivation=softmax\n"));
    expect_fail("$T aug.cfg --metrics out.csv", 2, "aug.cfg:6: [augment]", "H,W,C");
}
END_TEST

/* model_cfg with its line `from` replaced by `to` ("" drops it), as dir/name. */
static void edit_cfg(const char *name, const char *from, const char *to) {
    char text[4096];
    const char *at = strstr(model_cfg, from);
    ck_assert_ptr_nonnull(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - model_cfg), model_cfg, to,
             at + strlen(from));
    free(tu_write_text(dir, name, text));
}

/* Without [net] checkpoint: a stop writes m-stopped.h5 beside --save; the
 * resumed run deletes it at its end; the same command again, even with
 * another learning rate, finds --save's file finished and writes nothing;
 * --save's finished file alone is found too; a --save file that is no
 * checkpoint is said to be replaced. */
START_TEST(resume_auto_keeps_finished_work) {
    edit_cfg("nock.cfg", "checkpoint=ck/run.h5\n", "");
    edit_cfg("nock_lr.cfg", "checkpoint=ck/run.h5\n", "learning_rate=0.05\n");
    run_ok("rm -f m.h5 m-stopped.h5 f.h5");
    const char *cmd = "$T nock.cfg --devices cpu --resume auto --save m.h5 --json j.json";
    char *out, full[512];
    snprintf(full, sizeof full, "MIRRORED_DEBUG_FAIL=0:25:INT %s", cmd);
    int rc = run(full, &out);
    ck_assert_msg(rc == 130 && strstr(out, "checkpoint m-stopped.h5 written"), "exit %d: %s", rc,
                  out);
    free(out);
    rc = run(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "Resuming from m-stopped.h5") &&
                      strstr(out, "Deleted m-stopped.h5, the stop's checkpoint: the run has ended"),
                  "exit %d: %s", rc, out);
    free(out);
    ck_assert_int_ne(run("test -e m-stopped.h5", NULL), 0);
    run_ok("cp m.h5 m0.h5 && rm -f j.json");
    rc = run("$T nock_lr.cfg --devices cpu --resume auto --save m.h5 --json j.json", &out);
    ck_assert_msg(rc == 0 &&
                      strstr(out, "--resume auto: m.h5 is the end of this run (epoch 2/2, "
                                  "40 updates): nothing to train, no file written\n") &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
    ck_assert_int_eq(run("cmp m.h5 m0.h5 && ! test -e j.json", NULL), 0);
    /* a stale stop's file older than --save's: --save's wins */
    run_ok("MIRRORED_DEBUG_FAIL=0:25:INT $T nock.cfg --devices cpu --quiet --save x.h5; "
           "mv x-stopped.h5 m-stopped.h5");
    rc = run(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "m.h5 is the end of this run"), "exit %d: %s", rc, out);
    free(out);
    ck_assert_int_eq(run("cmp m.h5 m0.h5", NULL), 0);
    /* --save's file alone, finished: nothing to do */
    run_ok("rm -f m-stopped.h5 && cp m0.h5 f.h5");
    rc = run("$T nock.cfg --devices cpu --resume auto --save f.h5", &out);
    ck_assert_msg(rc == 0 && strstr(out, "f.h5 is the end of this run"), "exit %d: %s", rc, out);
    free(out);
    ck_assert_int_eq(run("cmp f.h5 m0.h5", NULL), 0);
    /* --save's file is no checkpoint: said, then a fresh start replaces it */
    free(tu_write_text(dir, "f.h5", "not a checkpoint\n"));
    rc = run("$T nock.cfg --devices cpu --epochs 1 --quiet --resume auto --save f.h5", &out);
    ck_assert_msg(rc == 0 && strstr(out, "f.h5") &&
                      strstr(out, "--save's file is no checkpoint to resume from: skipped, and "
                                  "this run replaces it when it ends") &&
                      strstr(out, "no checkpoint yet"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* "REASON EPOCH GLOBAL_STEP\n" of a file's /mirrored/ended, as h5py reads
 * it, or "none\n" (a static buffer). */
static const char *ended_record(const char *file) {
    static char said[256];
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import h5py; g = h5py.File(\\\"%s\\\", "
             "\\\"r\\\")[\\\"mirrored\\\"]; "
             "e = g.get(\\\"ended\\\"); print(\\\"none\\\" if e is None else "
             "\\\"%%s %%d %%d\\\" %% (e[\\\"reason\\\"][()].decode(), e[\\\"epoch\\\"][()], "
             "e[\\\"global_step\\\"][()]))\"",
             file);
    int rc = run(cmd, &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    snprintf(said, sizeof said, "%s", out);
    free(out);
    return said;
}

/* A run that early stopping ended: the same command with --resume auto
 * finds its --save file, and without --save its last checkpoint, marked
 * as the run's end (/mirrored/ended), and writes nothing; an explicit
 * --resume still reads it. */
START_TEST(resume_auto_after_early_stopping) {
    /* epoch 1 is the best; no later epoch improves by 100: it stops after 2 */
    edit_cfg("es.cfg", "epochs=2\n",
             "epochs=5\nearly_stopping=val_loss\npatience=1\nmin_delta=100\n");
    run_ok("rm -rf ck m.h5 j.json");
    const char *cmd = "$T es.cfg --devices cpu --resume auto --save m.h5 --json j.json";
    char *out;
    int rc = run(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "Epoch 2: early stopping"), "exit %d: %s", rc, out);
    free(out);
    run_ok("cp m.h5 m0.h5 && rm -rf j.json ck");
    rc = run(cmd, &out);
    ck_assert_msg(rc == 0 &&
                      strstr(out, "--resume auto: m.h5 is the end of this run (early stopping "
                                  "after epoch 2/5, 40 updates): nothing to train, no file "
                                  "written\n") &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
    ck_assert_int_eq(run("cmp m.h5 m0.h5 && ! test -e j.json", NULL), 0);
    /* no --save: the pattern's last checkpoint is the end */
    run_ok("rm -rf ck && $T es.cfg --devices cpu --quiet");
    run_ok("cp ck/run-step000000040.h5 c0.h5");
    rc = run("$T es.cfg --devices cpu --resume auto --json j.json", &out);
    ck_assert_msg(rc == 0 &&
                      strstr(out, "--resume auto: ck/run-step000000040.h5 is the end of this run "
                                  "(early stopping after epoch 2/5, 40 updates)") &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
    ck_assert_int_eq(run("cmp ck/run-step000000040.h5 c0.h5 && ! test -e j.json", NULL), 0);
    ck_assert_str_eq(ended_record("m.h5"), "early_stopping 2 40\n");
    ck_assert_str_eq(ended_record("ck/run-step000000040.h5"), "early_stopping 2 40\n");
    ck_assert_str_eq(ended_record("ck/run-step000000020.h5"), "none\n");
}
END_TEST

/* save_best_only: --save's file holds the best epoch; once the run has
 * ended it carries the record, and --resume auto with no other file says
 * the run has ended and writes nothing. A best file of a run that did not
 * end (a stop) has no record: --resume auto starts from the beginning. */
START_TEST(resume_auto_save_best_only) {
    edit_cfg("sb.cfg", "epochs=2\n", "epochs=2\nsave_best_only=val_loss\n");
    run_ok("rm -rf ck best.h5 best-stopped.h5 j.json");
    run_ok("$T sb.cfg --devices cpu --quiet --save best.h5");
    /* the last checkpoint is the end by its epochs: recorded as it was written */
    ck_assert_str_eq(ended_record("ck/run-step000000040.h5"), "epochs 2 40\n");
    run_ok("cp best.h5 b0.h5 && rm -rf ck");
    char *out;
    int rc = run("$T sb.cfg --devices cpu --resume auto --save best.h5 --json j.json", &out);
    ck_assert_msg(rc == 0 && strstr(out, "--resume auto: best.h5 holds the best epoch (") &&
                      strstr(out, ") of this run, which has ended (epoch 2/2, 40 updates): "
                                  "nothing to train, no file written\n") &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
    ck_assert_int_eq(run("cmp best.h5 b0.h5 && ! test -e j.json", NULL), 0);
    ck_assert(strncmp(ended_record("best.h5"), "epochs 2 40\n", 12) == 0);
    /* stopped in epoch 2: the best file (epoch 1) has no record */
    run_ok("rm -rf ck best.h5");
    rc = run("MIRRORED_DEBUG_FAIL=0:25:INT $T sb.cfg --devices cpu --quiet --save best.h5", &out);
    ck_assert_msg(rc == 130, "exit %d: %s", rc, out);
    free(out);
    ck_assert_str_eq(ended_record("best.h5"), "none\n");
    run_ok("rm -rf ck best-stopped.h5");
    rc = run("$T sb.cfg --devices cpu --quiet --resume auto --save best.h5 --epochs 1", &out);
    ck_assert_msg(rc == 0 && strstr(out, "no checkpoint yet"), "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* A pid that no process has now: a child's, waited for. */
static int dead_pid(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    ck_assert(pid > 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    return (int)pid;
}

/* The temporaries a killed writer left of the run's checkpoints go at its
 * start; a live writer's and another file's stay. */
START_TEST(stale_temporaries_removed) {
    run_ok("rm -rf ck && mkdir ck");
    const int dead = dead_pid();
    char name[128];
    snprintf(name, sizeof name, "ck/run-step000000020.h5.tmp.%d", dead);
    free(tu_write_text(dir, name, "half"));
    snprintf(name, sizeof name, "ck/run-step000000021.h5.tmp.%d", (int)getpid());
    free(tu_write_text(dir, name, "alive"));
    snprintf(name, sizeof name, "ck/other.h5.tmp.%d", dead);
    free(tu_write_text(dir, name, "not ours"));
    snprintf(name, sizeof name, "s.h5.tmp.%d", dead);
    free(tu_write_text(dir, name, "half"));
    char *out;
    int rc = run("$T m.cfg --devices cpu --epochs 1 --save s.h5", &out);
    ck_assert_msg(rc == 0 && strstr(out, "Removed 2 temporary files left by a killed run"),
                  "exit %d: %s", rc, out);
    free(out);
    rc = run("ls ck; ls | grep tmp", &out);
    ck_assert_msg(!strstr(out, "run-step000000020.h5.tmp") &&
                      strstr(out, "run-step000000021.h5.tmp") && strstr(out, "other.h5.tmp") &&
                      !strstr(out, "s.h5.tmp"),
                  "%s", out);
    free(out);
}
END_TEST

/* An edited [data]: preprocessing is refused; other examples go on from
 * an epoch's end, said so, and are refused into an epoch. */
START_TEST(resume_with_edited_data) {
    run_ok("rm -rf ck && sed \"s/^checkpoint=.*/&\\ncheckpoint_every=25 steps/\" m.cfg > s25.cfg "
           "&& $T s25.cfg --devices cpu --quiet && $T m.cfg --devices cpu --quiet "
           "--epochs 1");
    tu_write_image_data(dir, "xs.npy", "ys.npy", 200, 4);
    edit_cfg("scale.cfg", "scale=1/255", "scale=1");
    edit_cfg("small.cfg", "train_images=x.npy\ntrain_labels=y.npy",
             "train_images=xs.npy\ntrain_labels=ys.npy");
    expect_fail("$T scale.cfg --resume " FIRST " --metrics out.csv", 2,
                "--resume " FIRST ": [data] scale 0.00392157 -> 1", "--init-weights");
    expect_fail("$T small.cfg --resume ck/run-step000000025.h5 --metrics out.csv", 2,
                "ck/run-step000000025.h5: the checkpoint is 5 updates into epoch 2 of 320 "
                "training examples, and the data has 160 now: train_images",
                "xs.npy");
    char *out;
    int rc = run("$T small.cfg --devices cpu --resume " FIRST, &out);
    ck_assert_msg(rc == 0 &&
                      strstr(out, "The training data differs from the checkpoint's (320 "
                                  "examples then, 160 now; train_images ") &&
                      strstr(out, "from the start of epoch 2") && strstr(out, "Epoch 2/2"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

/* [net] checkpoint: a folder (ck/) holds ck/step<N>.h5, missing parents
 * are made, the root folder alone is refused. */
START_TEST(checkpoint_folders) {
    run_ok("rm -rf ckd a");
    edit_cfg("dir.cfg", "checkpoint=ck/run.h5", "checkpoint=ckd/");
    edit_cfg("deep.cfg", "checkpoint=ck/run.h5", "checkpoint=a/b/c/run.h5");
    edit_cfg("root.cfg", "checkpoint=ck/run.h5", "checkpoint=/");
    run_ok("$T dir.cfg --devices cpu --epochs 1 --quiet && test -f ckd/step000000020.h5");
    run_ok("$T dir.cfg --devices cpu --quiet --resume auto && test -f ckd/step000000040.h5");
    run_ok("$T deep.cfg --devices cpu --epochs 1 --quiet && test -f a/b/c/run-step000000020.h5");
    expect_fail("$T root.cfg --metrics out.csv", 2, "[net] checkpoint /: the root folder",
                "ck/step<N>.h5");
    expect_fail("$T root.cfg --resume auto --metrics out.csv", 2,
                "[net] checkpoint /: the root folder", "");
}
END_TEST

int main(void) {
    Suite *s = suite_create("checkpoints");
    TCase *tc = tcase_create("checkpoints");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, resume_is_bitwise);
    tcase_add_test(tc, resume_is_bitwise_every_optimizer);
    tcase_add_test(tc, resume_under_mpirun_one_writer);
    tcase_add_test(tc, eval_reports_what_training_did);
    tcase_add_test(tc, binary_crossentropy_eval_and_resume);
    tcase_add_test(tc, multi_label_bce_eval_and_resume);
    tcase_add_test(tc, predict_without_labels);
    tcase_add_test(tc, keras3_weights_and_archives);
    tcase_add_test(tc, bad_checkpoints);
    tcase_add_test(tc, unwritable_places);
    tcase_add_test(tc, resume_with_other_replicas);
    tcase_add_test(tc, resume_finished_or_beyond);
    tcase_add_test(tc, resume_with_edited_cfg);
    tcase_add_test(tc, write_data_trains_the_same);
    tcase_add_test(tc, step_log);
    tcase_add_test(tc, init_weights);
    tcase_add_test(tc, augment_error_names_its_line);
    tcase_add_test(tc, resume_auto_keeps_finished_work);
    tcase_add_test(tc, resume_auto_after_early_stopping);
    tcase_add_test(tc, resume_auto_save_best_only);
    tcase_add_test(tc, stale_temporaries_removed);
    tcase_add_test(tc, resume_with_edited_data);
    tcase_add_test(tc, checkpoint_folders);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
