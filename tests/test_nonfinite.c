/* test_nonfinite.c: NaN and Inf as a user meets them in mirrored_train
 * ([net] on_nan, nan_patience; docs/usage.md): a diverging model stops
 * with exit 1 and one line naming the step, the epoch and the first layer
 * in backward order with non-finite gradients, and its newest checkpoint
 * holds finite weights (an update that overflows is never checkpointed);
 * on_nan = skip drops the steps whose loss is not finite, on 2 replicas
 * (threads, and processes under mpirun) alike, reports them per epoch and
 * gives up after nan_patience in a row; input with a NaN is refused at
 * load. With the argument `gpu` the same runs go to GPUs (nonfinite_gpu):
 * the check's CUDA kernel and the reads through staging. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/array.h"
#include "runtime/npy.h"
#include "backends/gpu_list.h"
#include "models/config.h"
#include "models/model.h"
#include "strategies/checkpoint.h"
#include "tests/testutil.h"

static char exe[4096];
static char dir[4096];
/* The devices of the runs: one replica, and two where there are two (the
 * CPU's; with the argument `gpu`, GPUs: the test is then `nonfinite_gpu`,
 * in the gpu suite, on emulated GPUs in an emulated build). */
static const char *one = "cpu:1", *two = "cpu:2";
static int two_n = 2; /* replicas of `two` */

/* Runs mirrored_train in dir with args; returns the exit status and the
 * output (stdout and stderr). */
static int run(const char *args, char **out) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s", dir, exe, args);
    return tu_run(cmd, out);
}

/* The error line: mirrored_train's one line on failure, the last one. */
static const char *error_line(const char *out) {
    const char *line = strstr(out, "mirrored_train: ");
    ck_assert_msg(line != NULL, "no error line in: %s", out);
    ck_assert_msg(strstr(line + 1, "mirrored_train: ") == NULL, "two error lines: %s", out);
    const char *nl = strchr(line, '\n');
    ck_assert_msg(nl != NULL && nl[1] == '\0', "the error is not one last line: %s", out);
    return line;
}

/* n examples of 4 float features in [0, 1) and their labels: float
 * targets (n, 3), the one-hot rows of 3 classes, for write_cfg's linear
 * regression (targets = 1), or the class ids (n) (targets = 0); the
 * examples listed in `huge` get one feature of 3e38 (finite, but its
 * squared error is not). */
static void write_features(const char *name_x, const char *name_y, int64_t n, const int *huge,
                           int n_huge, int targets) {
    mr_array x = {.dtype = MR_DTYPE_F32, .ndim = 2, .dims = {n, 4}};
    mr_array y = targets ? (mr_array){.dtype = MR_DTYPE_F32, .ndim = 2, .dims = {n, 3}}
                         : (mr_array){.dtype = MR_DTYPE_I32, .ndim = 1, .dims = {n}};
    float *px = malloc(sizeof(float) * (size_t)(n * 4));
    float *pt = calloc((size_t)(n * 3), sizeof(float));
    int32_t *pc = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        pt[i * 3 + i % 3] = 1.0f;
        pc[i] = (int32_t)(i % 3);
        for (int j = 0; j < 4; j++)
            px[i * 4 + j] = (float)((i * 7 + j * 13) % 17) / 17.0f;
    }
    for (int h = 0; h < n_huge; h++)
        px[huge[h] * 4 + 1] = 3e38f;
    x.data = px, y.data = targets ? (void *)pt : (void *)pc;
    char path[8192];
    mr_error err = {0};
    snprintf(path, sizeof path, "%s/%s", dir, name_x);
    ck_assert_msg(mr_npy_write(path, &x, &err) == MR_OK, "%s", err.msg);
    snprintf(path, sizeof path, "%s/%s", dir, name_y);
    ck_assert_msg(mr_npy_write(path, &y, &err) == MR_OK, "%s", err.msg);
    free(px), free(pt), free(pc);
}

/* A linear model with the squared error: nothing bounds its outputs.
 * Returns the line of its last layer, [dense] dense_1. */
static int write_cfg(const char *name, const char *net, const char *data) {
    char text[2048];
    snprintf(text, sizeof text,
             "[net]\nbatch=8\nepochs=2\noptimizer=sgd\nloss=mse\nshuffle=0\nseed=1\n%s"
             "[data]\n%s"
             "[input]\nshape=4\n[dense]\nunits=8\n[dense]\nunits=3\n",
             net, data);
    free(tu_write_text(dir, name, text));
    int line = 1;
    for (const char *c = text; c < strstr(text, "[dense]\nunits=3"); c++)
        line += *c == '\n';
    return line;
}

static void setup(void) {
    char *p = tu_build_path("launch/mirrored_train");
    snprintf(exe, sizeof exe, "%s", p);
    free(p);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    write_features("x.npy", "y.npy", 64, NULL, 0, 1);
}

/* A learning rate far too high with inputs x100 diverges within a few
 * steps: exit 1, the step, epoch and layer named, and the newest
 * checkpoint (one per step) is the step before, with finite weights. */
START_TEST(stop_names_step_and_layer) {
    int last =
        write_cfg("div.cfg", "learning_rate=10\ncheckpoint=ck/run.h5\ncheckpoint_every=1 steps\n",
                  "train_images=x.npy\ntrain_labels=y.npy\nscale=100\n");
    char *out;
    char args[256];
    snprintf(args, sizeof args, "--devices %s div.cfg", one);
    int rc = run(args, &out);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
    const char *line = error_line(out);
    long long step = 0, update = 0;
    int epoch = 0;
    const char *at = strstr(line, "NaN or Inf at step ");
    ck_assert_msg(at && sscanf(at, "NaN or Inf at step %lld of epoch %d (update %lld)", &step,
                               &epoch, &update) == 3,
                  "%s", line);
    ck_assert_msg(strstr(line, "div.cfg: ") == line + strlen("mirrored_train: "), "%s", line);
    /* the output layer is the first in backward order */
    char layer[64];
    snprintf(layer, sizeof layer, "in layer 'dense_1' (line %d)", last);
    ck_assert_msg(strstr(line, layer) && strstr(line, "on_nan = stop"), "%s", line);
    ck_assert_int_eq(epoch, 1);
    ck_assert_msg(update >= 2, "diverged at update %lld: no checkpoint before it", update);
    /* the newest checkpoint is the last good step's, and finite */
    char pattern[8192], newest[8192], want[8192];
    mr_error err = {0};
    snprintf(pattern, sizeof pattern, "%s/ck/run.h5", dir);
    ck_assert_msg(mr_checkpoint_newest(pattern, newest, sizeof newest, &err) == MR_OK, "%s",
                  err.msg);
    mr_checkpoint_name(pattern, update - 1, want, sizeof want);
    ck_assert_str_eq(newest, want);
    mr_checkpoint ck = {0};
    ck_assert_msg(mr_checkpoint_load(newest, &ck, &err) == MR_OK, "%s", err.msg);
    mr_config cfg;
    ck_assert_msg(mr_config_parse(ck.cfg_text, "div.cfg", NULL, &cfg, &err) == MR_OK, "%s",
                  err.msg);
    mr_model m;
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 8, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_checkpoint_load_model(newest, &m, 1, &err) == MR_OK, "%s", err.msg);
    int bad = -1;
    ck_assert_int_eq(mr_model_params_nonfinite(&m, &bad, &err), MR_OK);
    ck_assert_int_eq(bad, 0);
    mr_model_free(&m);
    mr_config_free(&cfg);
    mr_checkpoint_free(&ck);
    free(out);
}
END_TEST

/* Finite gradients whose update overflows: softmax cross-entropy keeps the
 * loss and the gradients finite for a feature of 1e38 at batch 1, but 10
 * times the gradient is past FLT_MAX. The step's check passes, the
 * checkpoint's does not: exit 1 and no checkpoint on disk. */
START_TEST(no_checkpoint_of_nonfinite_weights) {
    int huge[8];
    for (int i = 0; i < 8; i++)
        huge[i] = i;
    write_features("xo.npy", "yo.npy", 8, huge, 8, 0);
    /* 3e38 would overflow the logits: scale it to 1e38 */
    free(tu_write_text(dir, "over.cfg",
                       "[net]\nbatch=1\nepochs=1\noptimizer=sgd\nlearning_rate=10\nshuffle=0\n"
                       "checkpoint=ck2/run.h5\ncheckpoint_every=1 steps\n"
                       "[data]\ntrain_images=xo.npy\ntrain_labels=yo.npy\nscale=1/3\n"
                       "[input]\nshape=4\n[dense]\nunits=3\nactivation=softmax\n"));
    char *out;
    char args[256];
    snprintf(args, sizeof args, "--devices %s over.cfg", one);
    int rc = run(args, &out);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
    const char *line = error_line(out);
    ck_assert_msg(strstr(line, "over.cfg: the weights hold NaN or Inf after update 1; no "
                               "checkpoint written"),
                  "%s", line);
    char pattern[8192], newest[8192];
    mr_error err = {0};
    snprintf(pattern, sizeof pattern, "%s/ck2/run.h5", dir);
    ck_assert_int_eq(mr_checkpoint_newest(pattern, newest, sizeof newest, &err), MR_ERR_IO);
    free(out);
}
END_TEST

/* One example whose squared error overflows (example 20: step 3 of each
 * epoch at batch 8, no shuffling): skip drops that step on both replicas
 * (which stay identical), reports one skipped step per epoch and ends
 * well; stop ends at that step. */
START_TEST(skip_trains_on) {
    const int huge[] = {20};
    write_features("xh.npy", "yh.npy", 64, huge, 1, 1);
    write_cfg("skip.cfg", "learning_rate=0.01\non_nan=skip\n",
              "train_images=xh.npy\ntrain_labels=yh.npy\n");
    char *out;
    char args[256];
    snprintf(args, sizeof args, "--devices %s --check-sync 1 skip.cfg", two);
    int rc = run(args, &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    const char *e1 = strstr(out, "Epoch 1/2"), *e2 = strstr(out, "Epoch 2/2");
    ck_assert_msg(e1 && e2, "%s", out);
    ck_assert_msg(strstr(e1, "skipped: 1\n") && strstr(e2, "skipped: 1\n"), "%s", out);
    ck_assert_msg(strstr(out, "loss: nan") == NULL, "a skipped step's loss counted: %s", out);
    free(out);
    /* the same across 2 processes, where MPI is built (mpirun -q: no banners) */
    const char *mpirun = getenv("MR_MPIRUN");
    if (mpirun != NULL && mpirun[0] != '\0' && strcmp(one, "cpu:1") == 0) {
        char cmd[16384];
        snprintf(cmd, sizeof cmd, "cd %s && %s -q -np 2 %s --check-sync 1 skip.cfg", dir, mpirun,
                 exe);
        rc = tu_run(cmd, &out);
        ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
        const char *e = strstr(out, "skipped: 1");
        ck_assert_msg(e && strstr(e + 1, "skipped: 1"), "%s", out);
        free(out);
    }
    write_cfg("stop.cfg", "learning_rate=0.01\n", "train_images=xh.npy\ntrain_labels=yh.npy\n");
    snprintf(args, sizeof args, "--devices %s stop.cfg", two);
    rc = run(args, &out);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
    const char *line = error_line(out);
    /* batch 8 per replica: example 20 is in step 20 / (8 x replicas) + 1 */
    char at[64];
    snprintf(at, sizeof at, "at step %d of epoch 1 (update %d): loss inf", 20 / (8 * two_n) + 1,
             20 / (8 * two_n) + 1);
    ck_assert_msg(strstr(line, at) && strstr(line, "layer 'dense_1'"), "%s", line);
    free(out);
}
END_TEST

/* Two overflowing steps in a row (examples 0 and 8 at batch 8 on one
 * replica) with nan_patience = 2: exit 1 naming the patience; with 3 the
 * run ends well, 2 skipped in epoch 1 and 2 in epoch 2. */
START_TEST(skip_patience) {
    const int huge[] = {0, 8};
    write_features("xp.npy", "yp.npy", 64, huge, 2, 1);
    write_cfg("p2.cfg", "learning_rate=0.01\non_nan=skip\nnan_patience=2\n",
              "train_images=xp.npy\ntrain_labels=yp.npy\n");
    char *out;
    char args[256];
    snprintf(args, sizeof args, "--devices %s p2.cfg", one);
    int rc = run(args, &out);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
    const char *line = error_line(out);
    ck_assert_msg(strstr(line, "at step 2 of epoch 1 (update 2)") &&
                      strstr(line, "2 steps in a row, nan_patience = 2"),
                  "%s", line);
    free(out);
    write_cfg("p3.cfg", "learning_rate=0.01\non_nan=skip\nnan_patience=3\n",
              "train_images=xp.npy\ntrain_labels=yp.npy\n");
    snprintf(args, sizeof args, "--devices %s p3.cfg", one);
    rc = run(args, &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(strstr(out, "Epoch 1/2"), "skipped: 2\n"), "%s", out);
    free(out);
}
END_TEST

/* Gradients non-finite with a finite loss: a linear unit with the squared
 * error on a feature of 1.5e19 has a loss of about w^2 x 2.25e38 (finite
 * for every initial |w| <= 1.095, Glorot's limit here) and a kernel
 * gradient of 2 w x 2.25e38, past FLT_MAX for |w| > 0.76 (seed 2: 1.32e38
 * and an infinity at update 1). stop catches it in the update's own read
 * of the gradients: exit 1 naming the update, the finite loss and the
 * layer; skip checks before the update and drops it (update 1 again at
 * the next step, so nan_patience = 2 ends the run at update 2). */
START_TEST(gradients_alone_nonfinite) {
    mr_array x = {.dtype = MR_DTYPE_F32, .ndim = 2, .dims = {4, 4}};
    mr_array y = {.dtype = MR_DTYPE_I32, .ndim = 1, .dims = {4}};
    float px[16] = {0};
    int32_t py[4] = {0};
    for (int i = 0; i < 4; i++)
        px[i * 4] = 1.5e19f;
    x.data = px, y.data = py;
    char path[8192];
    mr_error err = {0};
    snprintf(path, sizeof path, "%s/xg.npy", dir);
    ck_assert_msg(mr_npy_write(path, &x, &err) == MR_OK, "%s", err.msg);
    snprintf(path, sizeof path, "%s/yg.npy", dir);
    ck_assert_msg(mr_npy_write(path, &y, &err) == MR_OK, "%s", err.msg);
    const char *cfg = "[net]\nbatch=1\nepochs=1\noptimizer=sgd\nlearning_rate=0.01\nloss=mse\n"
                      "shuffle=0\nseed=2\n%s"
                      "[data]\ntrain_images=xg.npy\ntrain_labels=yg.npy\n"
                      "[input]\nshape=4\n[dense]\nunits=1\nactivation=linear\n";
    char text[1024];
    snprintf(text, sizeof text, cfg, "");
    free(tu_write_text(dir, "g.cfg", text));
    snprintf(text, sizeof text, cfg, "on_nan=skip\nnan_patience=2\n");
    free(tu_write_text(dir, "gs.cfg", text));
    char *out;
    char args[256];
    snprintf(args, sizeof args, "--devices %s g.cfg", one);
    int rc = run(args, &out);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
    const char *line = error_line(out);
    ck_assert_msg(strstr(line, "at step 1 of epoch 1 (update 1): loss 1.3") &&
                      !strstr(line, "not finite on") &&
                      strstr(line, "first non-finite gradients (backward order) in layer 'dense' "
                                   "(line 14); stopped (on_nan = stop)"),
                  "%s", line);
    free(out);
    snprintf(args, sizeof args, "--devices %s gs.cfg", one);
    rc = run(args, &out);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
    line = error_line(out);
    ck_assert_msg(strstr(line, "at step 2 of epoch 1 (update 2): loss 1.3") &&
                      strstr(line, "2 steps in a row, nan_patience = 2"),
                  "%s", line);
    free(out);
}
END_TEST

/* A NaN in the training images: exit 2 at load, one line naming the file
 * and the example; a bad on_nan value names the .cfg line. */
START_TEST(refused_at_load) {
    mr_array x = {.dtype = MR_DTYPE_F32, .ndim = 2, .dims = {6, 4}};
    float v[24] = {0};
    v[3 * 4 + 2] = NAN;
    x.data = v;
    char path[8192];
    mr_error err = {0};
    snprintf(path, sizeof path, "%s/xn.npy", dir);
    ck_assert_msg(mr_npy_write(path, &x, &err) == MR_OK, "%s", err.msg);
    write_cfg("nan.cfg", "", "train_images=xn.npy\ntrain_labels=y.npy\n");
    char *out;
    int rc = run("nan.cfg", &out);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, out);
    const char *line = error_line(out);
    ck_assert_msg(strstr(line, "xn.npy: example 3 has a non-finite value (NaN) at element 2"), "%s",
                  line);
    free(out);
    write_cfg("bad.cfg", "on_nan=ignore\n", "train_images=x.npy\ntrain_labels=y.npy\n");
    rc = run("bad.cfg", &out);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, out);
    line = error_line(out);
    ck_assert_msg(strstr(line, "bad.cfg:8:") && strstr(line, "'ignore' is not one of: stop, skip"),
                  "%s", line);
    free(out);
}
END_TEST

int main(int argc, char **argv) {
    const int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    if (gpu) {
        const mr_gpu_list *gl = tu_gpus();
        if (gl->count == 0) {
            printf("SKIP: no GPU: %s\n", gl->reason[0] ? gl->reason : "none visible");
            return 77; /* meson's SKIP */
        }
        one = "gpu:0";
        two = gl->count >= 2 ? "gpu:0,1" : "gpu:0";
        two_n = gl->count >= 2 ? 2 : 1;
    }
    Suite *s = suite_create(gpu ? "nonfinite_gpu" : "nonfinite");
    TCase *tc = tcase_create("nonfinite");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, stop_names_step_and_layer);
    tcase_add_test(tc, no_checkpoint_of_nonfinite_weights);
    tcase_add_test(tc, skip_trains_on);
    tcase_add_test(tc, skip_patience);
    tcase_add_test(tc, gradients_alone_nonfinite);
    if (!gpu) tcase_add_test(tc, refused_at_load); /* the loader: no device in it */
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
