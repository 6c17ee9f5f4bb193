/* test_api_handle.c: the C API's model handle under misuse
 * (include/mirrored.h): a second call on a model while a fit runs, from
 * another thread or from the fit's own callback, is refused at once
 * naming the fit; a fit that fails after some updates (its stop's
 * checkpoint unwritable) reports the write error, and the model's counts
 * and the result follow the weights it left; a file loaded is the one
 * whose weights the model gets, whatever is renamed over its path before
 * their first use. Run under TSan too. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "include/mirrored.h"
#include "tests/testutil.h"

/* a tiny dense model of 8x8x1 images and 4 classes */
static const char *tiny_cfg = "[net]\nbatch=16\nepochs=1\nseed=3\nlearning_rate=0.01\n"
                              "[data]\ntrain_images =\nscale=1/255\n"
                              "[input]\nshape=8,8,1\n[flatten]\n[dense]\nunits=16\n"
                              "activation=relu\n[dense]\nunits=4\nactivation=softmax\n";

#define N 128
static uint8_t xs[N * 64];
static int32_t ys[N];

static void make_arrays(void) {
    for (int i = 0; i < N; i++) {
        ys[i] = i % 4;
        for (int j = 0; j < 64; j++)
            xs[i * 64 + j] = (uint8_t)((i * 31 + j * 17) % 100 + (j % 4 == ys[i] ? 120 : 0));
    }
}

static mirrored_array x_of(void) {
    return (mirrored_array){.dtype = MIRRORED_UINT8, .ndim = 4, .shape = {N, 8, 8, 1}, .data = xs};
}

static mirrored_array y_of(void) {
    return (mirrored_array){.dtype = MIRRORED_INT32, .ndim = 1, .shape = {N}, .data = ys};
}

static mirrored_model *tiny(void) {
    mirrored_model *m = NULL;
    mirrored_error err;
    ck_assert_msg(mirrored_model_from_config(tiny_cfg, "tiny", NULL, &m, &err) == MIRRORED_OK, "%s",
                  err.message);
    return m;
}

/* sem_wait with a 60 s bound (only to fail, not to hang); 0 if posted */
static int wait_60s(sem_t *s) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    int rc;
    while ((rc = sem_timedwait(s, &until)) != 0 && errno == EINTR)
        ;
    return rc;
}

/* ---- one call at a time ------------------------------------------------ */

typedef struct held_fit {
    mirrored_model *m;
    sem_t stepped, go;
    int steps, held_timed_out;
    mirrored_status from_callback; /* a summary asked from the step callback */
    mirrored_error callback_err;
    mirrored_status status;
    mirrored_fit_result r;
    char msg[1024];
} held_fit;

/* the first update: a call back into the model, then the fit held until
 * the main thread has tried its calls */
static void hold_first_step(void *user, const mirrored_step_logs *l) {
    (void)l;
    held_fit *h = user;
    if (h->steps++ > 0) return;
    char buf[256];
    h->from_callback = mirrored_model_summary(h->m, buf, sizeof buf, &h->callback_err);
    sem_post(&h->stepped);
    h->held_timed_out = wait_60s(&h->go) != 0;
}

static void *fit_thread(void *arg) {
    held_fit *h = arg;
    mirrored_error err;
    mirrored_fit_options o = mirrored_fit_options_default();
    mirrored_array x = x_of(), y = y_of();
    o.x = &x, o.y = &y, o.devices = "cpu:2";
    o.epochs = 1000; /* far more than the stop lets run */
    o.on_step = hold_first_step, o.user = h;
    h->status = mirrored_model_fit(h->m, &o, &h->r, &err);
    snprintf(h->msg, sizeof h->msg, "%s", err.message);
    return NULL;
}

/* status USAGE and a message naming the fit in progress */
static void assert_refused(mirrored_status st, const mirrored_error *err, const char *call) {
    ck_assert_msg(st == MIRRORED_ERR_USAGE, "%s during a fit: status %d (%s)", call, (int)st,
                  err->message);
    ck_assert_msg(strstr(err->message, "fit is in progress") && strstr(err->message, call), "%s",
                  err->message);
}

START_TEST(second_call_refused_during_fit) {
    held_fit h = {.m = tiny()};
    sem_init(&h.stepped, 0, 0);
    sem_init(&h.go, 0, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fit_thread, &h), 0);
    ck_assert_int_eq(wait_60s(&h.stepped), 0);
    mirrored_error err;
    char buf[256];
    float out[4];
    double loss, metric;
    mirrored_model_info info;
    mirrored_array x1 = x_of(), y1 = y_of();
    x1.shape[0] = 1, y1.shape[0] = 1;
    assert_refused(mirrored_model_evaluate(h.m, "cpu:1", 0, &x1, &y1, &loss, &metric, &err), &err,
                   "evaluate");
    assert_refused(mirrored_model_predict(h.m, "cpu:1", 0, &x1, out, 4, &err), &err, "predict");
    assert_refused(mirrored_model_summary(h.m, buf, sizeof buf, &err), &err, "summary");
    assert_refused(mirrored_model_get_info(h.m, &info, &err), &err, "get_info");
    char path[4096];
    snprintf(path, sizeof path, "%s/busy.keras", tu_tmpdir());
    assert_refused(mirrored_model_save(h.m, path, &err), &err, "save");
    mirrored_fit_options o = mirrored_fit_options_default();
    o.x = &x1, o.y = &y1, o.devices = "cpu:1";
    mirrored_fit_result r;
    assert_refused(mirrored_model_fit(h.m, &o, &r, &err), &err, "fit");
    mirrored_model_request_stop(h.m); /* the one call allowed meanwhile */
    sem_post(&h.go);
    pthread_join(t, NULL);
    ck_assert(!h.held_timed_out);
    assert_refused(h.from_callback, &h.callback_err, "summary");
    ck_assert_msg(h.status == MIRRORED_OK, "%s", h.msg);
    ck_assert_int_eq(h.r.stopped, 1);
    /* the fit over: the model is free again */
    ck_assert_msg(mirrored_model_get_info(h.m, &info, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(info.updates, h.r.updates);
    ck_assert_msg(mirrored_model_predict(h.m, "cpu:1", 0, &x1, out, 4, &err) == MIRRORED_OK, "%s",
                  err.message);
    mirrored_model_destroy(h.m);
    sem_destroy(&h.stepped);
    sem_destroy(&h.go);
}
END_TEST

/* ---- a failed fit's counts --------------------------------------------- */

/* counts the updates; asks for a stop after the third */
static void stop_after_three(void *user, const mirrored_step_logs *l) {
    (void)l;
    held_fit *h = user;
    if (++h->steps == 3) mirrored_model_request_stop(h->m);
}

START_TEST(failed_stop_checkpoint_keeps_counts) {
    held_fit h = {.m = tiny()};
    mirrored_error err;
    mirrored_array x = x_of(), y = y_of();
    mirrored_fit_options o = mirrored_fit_options_default();
    o.x = &x, o.y = &y, o.devices = "cpu:2", o.epochs = 1000;
    o.on_step = stop_after_three, o.user = &h;
    char bad[4096];
    snprintf(bad, sizeof bad, "%s/no/such/folder/stop.h5", tu_tmpdir());
    o.stop_checkpoint = bad;
    mirrored_fit_result r;
    const mirrored_status st = mirrored_model_fit(h.m, &o, &r, &err);
    /* the write error reaches the caller, naming the file */
    ck_assert_msg(st != MIRRORED_OK, "a stop checkpoint into no folder: OK");
    ck_assert_msg(strstr(err.message, "no/such/folder"), "%s", err.message);
    ck_assert_int_ge(h.steps, 3);
    /* the result and the model's counts are the weights' */
    ck_assert_int_eq(r.updates, h.steps);
    ck_assert_int_eq(r.stopped, 1);
    mirrored_model_info info;
    ck_assert_msg(mirrored_model_get_info(h.m, &info, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(info.updates, h.steps);
    /* the same updates on a fresh model: the same weights */
    mirrored_model *again = tiny();
    mirrored_fit_options o2 = mirrored_fit_options_default();
    o2.x = &x, o2.y = &y, o2.devices = "cpu:2", o2.epochs = 1000, o2.max_steps = h.steps;
    mirrored_fit_result r2;
    ck_assert_msg(mirrored_model_fit(again, &o2, &r2, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(r2.updates, h.steps);
    ck_assert_msg(r.params_hash == r2.params_hash, "failed fit's hash %llx, %d updates' %llx",
                  (unsigned long long)r.params_hash, h.steps, (unsigned long long)r2.params_hash);
    /* and the next fit goes on from there */
    o.on_step = NULL, o.stop_checkpoint = NULL, o.epochs = 1;
    ck_assert_msg(mirrored_model_fit(h.m, &o, &r, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_gt(r.updates, h.steps);
    mirrored_model_destroy(again);
    mirrored_model_destroy(h.m);
}
END_TEST

/* ---- load reads one file ---------------------------------------------- */

/* dir/name: the tiny model fitted `epochs` epochs, saved as a checkpoint */
static void fitted_checkpoint(const char *dir, const char *name, int epochs) {
    mirrored_model *m = tiny();
    mirrored_error err;
    mirrored_array x = x_of(), y = y_of();
    mirrored_fit_options o = mirrored_fit_options_default();
    o.x = &x, o.y = &y, o.devices = "cpu:1", o.epochs = epochs;
    ck_assert_msg(mirrored_model_fit(m, &o, NULL, &err) == MIRRORED_OK, "%s", err.message);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(mirrored_model_save(m, path, &err) == MIRRORED_OK, "%s", err.message);
    mirrored_model_destroy(m);
}

/* the predictions of m for 4 examples into p (16 floats); the status */
static mirrored_status predict4(mirrored_model *m, float *p, mirrored_error *err) {
    mirrored_array x = x_of();
    x.shape[0] = 4;
    return mirrored_model_predict(m, "cpu:1", 0, &x, p, 16, err);
}

static void predict_file(const char *path, float *p) {
    mirrored_model *m = NULL;
    mirrored_error err;
    ck_assert_msg(mirrored_model_load(path, &m, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_msg(predict4(m, p, &err) == MIRRORED_OK, "%s", err.message);
    mirrored_model_destroy(m);
}

/* A checkpoint loaded, then another renamed over its path, or its bytes
 * written over in place, before the model's first use: the model is the
 * file loaded, whole (its weights were read at the load). */
START_TEST(load_reads_one_file) {
    const char *dir = tu_tmpdir();
    fitted_checkpoint(dir, "a.h5", 1);
    fitted_checkpoint(dir, "b.h5", 3);
    char a[4200], b[4200], w[4200];
    snprintf(a, sizeof a, "%s/a.h5", dir);
    snprintf(b, sizeof b, "%s/b.h5", dir);
    size_t len;
    char *bytes = tu_read_file(a, &len);
    free(tu_write_file(dir, "w.h5", bytes, len));
    snprintf(w, sizeof w, "%s/w.h5", dir);
    float pa[16], pb[16], got[16];
    predict_file(a, pa);
    predict_file(b, pb);
    ck_assert_msg(memcmp(pa, pb, sizeof pa) != 0, "a.h5 and b.h5 predict alike");
    mirrored_model *m = NULL;
    mirrored_error err;
    ck_assert_msg(mirrored_model_load(w, &m, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_int_eq(rename(b, w), 0); /* b.h5 over w.h5 after the load */
    ck_assert_msg(predict4(m, got, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_msg(memcmp(got, pa, sizeof got) == 0, "the model is not the file loaded");
    mirrored_model_destroy(m);
    /* w.h5 is b's now: loaded, then written over in place with a's bytes */
    ck_assert_msg(mirrored_model_load(w, &m, &err) == MIRRORED_OK, "%s", err.message);
    FILE *f = fopen(w, "r+b");
    ck_assert(f != NULL);
    ck_assert_int_eq(fwrite(bytes, 1, len, f), len);
    fclose(f);
    ck_assert_msg(predict4(m, got, &err) == MIRRORED_OK, "%s", err.message);
    ck_assert_msg(memcmp(got, pb, sizeof got) == 0, "the model is not the file loaded");
    mirrored_model_destroy(m);
    free(bytes);
}
END_TEST

int main(void) {
    make_arrays();
    Suite *s = suite_create("api_handle");
    TCase *tc = tcase_create("api_handle");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, second_call_refused_during_fit);
    tcase_add_test(tc, failed_stop_checkpoint_keeps_counts);
    tcase_add_test(tc, load_reads_one_file);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* one process: the library's job is started once */
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    mirrored_finalize();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
