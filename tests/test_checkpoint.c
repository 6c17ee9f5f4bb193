/* test_checkpoint.c: training checkpoints: what /mirrored holds read back,
 * file names, --resume auto (past a damaged newest) and --keep, and the
 * central promise: training
 * that stops at a checkpoint and resumes from it ends with bitwise the
 * weights and the epoch metrics of the uninterrupted run (1 and 2
 * replicas; at an epoch's end and in the middle of one). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/h5file.h"
#include "runtime/dmem_impl.h"
#include "strategies/checkpoint.h"
#include "tests/strategyutil.h"
#include "tests/testutil.h"

static char dir[4096];

static void setup(void) {
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
}

/* The lines mr_checkpoint_skip_damaged says: how many, and the last. */
struct notes {
    int count;
    char last[8192];
};

static void take_note(void *user, const char *line) {
    struct notes *n = user;
    n->count++;
    snprintf(n->last, sizeof n->last, "%s", line);
}

START_TEST(names_newest_prune) {
    char pattern[4200], name[4400];
    snprintf(pattern, sizeof pattern, "%s/run.h5", dir);
    mr_checkpoint_name(pattern, 938, name, sizeof name);
    ck_assert(strstr(name, "/run-step000000938.h5") != NULL);
    mr_error err = {0};
    ck_assert_int_eq(mr_checkpoint_newest(pattern, name, sizeof name, &err), MR_ERR_IO);
    ck_assert_msg(strncmp(err.msg, "no checkpoint run-step*.h5 in ", 30) == 0, "%s", err.msg);
    const int64_t steps[] = {10, 2000, 300, 1999};
    for (int i = 0; i < 4; i++) {
        mr_checkpoint_name(pattern, steps[i], name, sizeof name);
        free(tu_write_text(dir, strrchr(name, '/') + 1, "x"));
    }
    free(tu_write_text(dir, "run-stepXX.h5", "x")); /* not ours */
    free(tu_write_text(dir, "other-step000000005.h5", "x"));
    ck_assert_int_eq(mr_checkpoint_newest(pattern, name, sizeof name, &err), MR_OK);
    ck_assert(strstr(name, "run-step000002000.h5") != NULL);
    ck_assert_int_eq(mr_checkpoint_prune(pattern, 2, &err), MR_OK);
    char p[4400];
    mr_checkpoint_name(pattern, 300, p, sizeof p);
    ck_assert(!tu_exists(p));
    mr_checkpoint_name(pattern, 10, p, sizeof p);
    ck_assert(!tu_exists(p));
    mr_checkpoint_name(pattern, 1999, p, sizeof p);
    ck_assert(tu_exists(p));
    snprintf(p, sizeof p, "%s/other-step000000005.h5", dir);
    ck_assert(tu_exists(p));
    /* a folder (a trailing slash): step<N>.h5 inside it */
    mr_checkpoint_name("ck/", 20, p, sizeof p);
    ck_assert_str_eq(p, "ck/step000000020.h5");
    mr_checkpoint_name("a/b//", 7, p, sizeof p);
    ck_assert_str_eq(p, "a/b/step000000007.h5");
    snprintf(pattern, sizeof pattern, "%s/", dir);
    free(tu_write_text(dir, "step000000030.h5", "x"));
    ck_assert_int_eq(mr_checkpoint_newest(pattern, name, sizeof name, &err), MR_OK);
    ck_assert_msg(strstr(name, "//") == NULL && strstr(name, "/step000000030.h5"), "%s", name);
}
END_TEST

/* A training run that saves checkpoints through the fit callbacks. */
typedef struct saver {
    const mr_config *cfg;
    const mr_fit_plan *plan;
    char pattern[4200];
    int saves;
} saver;

static mr_status save(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                      mr_error *err) {
    saver *sv = user;
    mr_checkpoint c = {.cfg_text = sv->cfg->text,
                       .replicas = sv->plan->replicas,
                       .processes = 1,
                       .global_batch = sv->plan->global_batch,
                       .seed = 5,
                       .lr = lr,
                       .state = *state,
                       .scale = 1.0f};
    snprintf(c.cfg_path, sizeof c.cfg_path, "t.cfg");
    char name[4400];
    mr_checkpoint_name(sv->pattern, state->global_step, name, sizeof name);
    sv->saves++;
    return mr_checkpoint_save(name, m, &c, err);
}

typedef struct run_result {
    float *weights; /* params then state */
    int64_t n;
    mr_epoch_logs logs[4];
    int n_logs;
} run_result;

static void keep(void *user, const mr_epoch_logs *l) {
    run_result *r = user;
    r->logs[r->n_logs++] = *l;
}

/* Trains `epochs` epochs of the BN+dropout model with R replicas, saving
 * every `every` (epochs, or steps with every_steps), from `resume` if set. */
static run_result train(int R, int epochs, int every, int every_steps, const char *resume,
                        saver *sv) {
    char text[2048];
    snprintf(text, sizeof text, su_bn_text, su_adam);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    cfg.net.global_batch = 8;
    mr_dataset ds;
    su_make_data(&ds, 100); /* 13 steps an epoch, the last one short */
    mr_strategy_opts so = {.devices = {.kind = "cpu", .count = R}, .seed = 5};
    mr_strategy *s;
    ck_assert_msg(mr_strategy_create(&cfg, &so, 100, &s, &err) == MR_OK, "%s", err.msg);
    run_result r = {0};
    mr_fit_callbacks cb = {.user = &r, .on_epoch_end = keep};
    if (sv != NULL) {
        sv->cfg = &cfg;
        sv->plan = mr_strategy_plan(s);
        cb.save = save;
        cb.save_user = sv;
        if (every_steps)
            cb.every_steps = every;
        else
            cb.every_epochs = every;
    }
    mr_checkpoint ck = {0};
    if (resume != NULL) {
        ck_assert_msg(mr_checkpoint_load(resume, &ck, &err) == MR_OK, "%s", err.msg);
        ck_assert_msg(mr_checkpoint_load_model(resume, mr_strategy_replica(s, 0), 1, &err) == MR_OK,
                      "%s", err.msg);
        ck_assert_int_eq(mr_strategy_sync_model(s, &err), MR_OK);
    }
    ck_assert_msg(mr_strategy_fit(s, &ds, 100, 80, 20, epochs, NULL, resume ? &ck.state : NULL, &cb,
                                  &err) == MR_OK,
                  "%s", err.msg);
    mr_model *m = mr_strategy_replica(s, 0);
    r.n = m->n_params + m->n_state;
    r.weights = malloc(sizeof(float) * (size_t)r.n);
    /* CPU device memory is host memory: read in place */
    memcpy(r.weights, mr_dfloat_ptr(m->params), sizeof(float) * (size_t)m->n_params);
    memcpy(r.weights + m->n_params, mr_dfloat_ptr(m->state), sizeof(float) * (size_t)m->n_state);
    mr_checkpoint_free(&ck);
    mr_strategy_destroy(s);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
    return r;
}

static int same_logs(const mr_epoch_logs *a, const mr_epoch_logs *b) {
    return a->epoch == b->epoch && a->loss == b->loss && a->accuracy == b->accuracy &&
           a->val_loss == b->val_loss && a->val_accuracy == b->val_accuracy && a->lr == b->lr;
}

/* Checkpoint after epoch 1 of 2 (every = 1 epoch), or after `every` steps. */
static void check_resume(int R, int every, int every_steps) {
    saver sv = {0};
    snprintf(sv.pattern, sizeof sv.pattern, "%s/r%d_%d_%d.h5", dir, R, every, every_steps);
    run_result full = train(R, 2, every, every_steps, NULL, &sv);
    ck_assert(sv.saves >= 1);
    char first[4400];
    /* the first checkpoint: after `every` updates, or after epoch 1 (13 updates) */
    mr_checkpoint_name(sv.pattern, every_steps ? every : 13, first, sizeof first);
    ck_assert_msg(tu_exists(first), "%s", first);
    run_result resumed = train(R, 2, every, every_steps, first, NULL);
    ck_assert_int_eq(full.n, resumed.n);
    ck_assert_msg(memcmp(full.weights, resumed.weights, sizeof(float) * (size_t)full.n) == 0,
                  "R=%d: resumed weights differ", R);
    /* the resumed run reports the epochs it trained (from the middle of the
     * first one, with the sums the checkpoint kept), and they are the same */
    ck_assert_int_eq(resumed.n_logs, every_steps ? 2 : 1);
    for (int i = 0; i < resumed.n_logs; i++) {
        const mr_epoch_logs *l = &resumed.logs[i];
        ck_assert_msg(same_logs(l, &full.logs[l->epoch]), "R=%d: epoch %d loss %.9g vs %.9g", R,
                      l->epoch + 1, l->loss, full.logs[l->epoch].loss);
    }
    free(full.weights), free(resumed.weights);
}

START_TEST(resume_after_an_epoch_is_bitwise) {
    check_resume(1, 1, 0);
    check_resume(2, 1, 0);
}
END_TEST

START_TEST(resume_inside_an_epoch_is_bitwise) {
    check_resume(1, 5, 1); /* after 5 of the first epoch's 13 updates */
    check_resume(2, 5, 1);
}
END_TEST

START_TEST(state_read_back) {
    saver sv = {0};
    snprintf(sv.pattern, sizeof sv.pattern, "%s/s.h5", dir);
    run_result full = train(2, 2, 1, 0, NULL, &sv);
    char name[4400];
    mr_checkpoint_name(sv.pattern, 26, name, sizeof name); /* after epoch 2 */
    mr_checkpoint c;
    mr_error err = {0};
    ck_assert_msg(mr_checkpoint_load(name, &c, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(c.replicas, 2);
    ck_assert_int_eq(c.global_batch, 8);
    ck_assert_int_eq(c.state.epoch, 2);
    ck_assert_int_eq(c.state.global_step, 26);
    ck_assert_int_eq(c.state.step, 0);
    ck_assert_int_eq(c.state.n_history, 2);
    ck_assert(same_logs(&c.state.history[0], &full.logs[0]));
    ck_assert(same_logs(&c.state.history[1], &full.logs[1]));
    ck_assert(strstr(c.cfg_text, "[batchnorm]") != NULL);
    ck_assert_ptr_null(c.mean);
    ck_assert_ptr_null(c.class_names); /* trained on files: no class folders to name */
    mr_checkpoint_free(&c);
    free(full.weights);
    /* --resume auto's fall-back: the newest damaged, the one before taken */
    char newest[4400], path[4400];
    ck_assert_int_eq(mr_checkpoint_newest(sv.pattern, newest, sizeof newest, &err), MR_OK);
    ck_assert_msg(mr_checkpoint_verify(newest, &err) == MR_OK, "%s", err.msg);
    snprintf(path, sizeof path, "%s", newest);
    ck_assert_int_eq(mr_checkpoint_skip_damaged(sv.pattern, path, sizeof path, NULL, NULL, &err),
                     MR_OK);
    ck_assert_str_eq(path, newest); /* intact: kept */
    size_t len;
    char *bytes = tu_read_file(newest, &len);
    bytes[len - 200] ^= 0x10; /* near the end: the last datasets or the table */
    free(tu_write_file(dir, strrchr(newest, '/') + 1, bytes, len));
    free(bytes);
    ck_assert_int_eq(mr_checkpoint_verify(newest, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "s-step000000026.h5: ") &&
                      strstr(err.msg, "(the file is damaged)"),
                  "%s", err.msg);
    mr_error_clear(&err);
    struct notes said = {0};
    ck_assert_int_eq(
        mr_checkpoint_skip_damaged(sv.pattern, path, sizeof path, take_note, &said, &err), MR_OK);
    ck_assert(strcmp(path, newest) < 0);
    ck_assert_int_eq(mr_checkpoint_verify(path, &err), MR_OK);
    /* one line, without its newline, naming no argument (the caller's face does) */
    ck_assert_int_eq(said.count, 1);
    ck_assert_msg(strstr(said.last, "s-step000000026.h5: ") &&
                      strstr(said.last, "; trying the previous checkpoint ") &&
                      strstr(said.last, strrchr(path, '/') + 1) && !strchr(said.last, '\n') &&
                      !strstr(said.last, "--") && !strstr(said.last, "resume"),
                  "%s", said.last);
    /* none intact: the newest's error */
    int k = 0;
    for (int64_t st = 0; st <= 26; st++) {
        char n[4400];
        mr_checkpoint_name(sv.pattern, st, n, sizeof n);
        if (tu_exists(n)) free(tu_write_text(dir, strrchr(n, '/') + 1, "not HDF5")), k++;
    }
    ck_assert_int_ge(k, 2);
    snprintf(path, sizeof path, "%s", newest);
    ck_assert_int_eq(mr_checkpoint_skip_damaged(sv.pattern, path, sizeof path, NULL, NULL, &err),
                     MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "s-step000000026.h5: not a readable HDF5 file"), "%s", err.msg);
    ck_assert_str_eq(path, newest);
    /* not a checkpoint: a plain HDF5 file without /mirrored */
    mr_h5 h;
    char plain[4200];
    snprintf(plain, sizeof plain, "%s/plain.h5", dir);
    ck_assert_int_eq(mr_h5_create(&h, plain, &err), MR_OK);
    ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
    ck_assert_int_eq(mr_checkpoint_load(plain, &c, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "plain.h5: no /mirrored group"), "%s", err.msg);
}
END_TEST

/* A .keras archive or a SavedModel folder where a checkpoint or a .cfg is read: the message says
 * what the file is and what to do, not HDF5's "file signature not found". */
START_TEST(model_files_named) {
    unsigned char zip[64] = {'P', 'K', 3, 4};
    zip[26] = 13;
    memcpy(zip + 30, "metadata.json", 13);
    char *keras = tu_write_file(dir, "m.keras", zip, sizeof zip);
    char saved[4200];
    snprintf(saved, sizeof saved, "%s/saved_model", dir);
    ck_assert_int_eq(mkdir(saved, 0755), 0);
    free(tu_write_text(saved, "saved_model.pb", "x"));
    mr_checkpoint c;
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_checkpoint_load(keras, &c, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg,
                         "m.keras: a Keras model archive (zip); not a mirrored checkpoint: "
                         "name its architecture with --cfg MODEL.cfg"),
                  "%s", err.msg);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_config_load(keras, &cfg, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "m.keras: a Keras model archive (zip); mirrored_train reads a "
                                  ".cfg: write the model as a .cfg (docs/keras.md)"),
                  "%s", err.msg);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_checkpoint_load(saved, &c, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "saved_model: a TensorFlow SavedModel folder;"), "%s", err.msg);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_config_load(saved, &cfg, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "saved_model: a TensorFlow SavedModel folder;"), "%s", err.msg);
    free(keras);
}
END_TEST

/* /mirrored/ended: absent from a file written during the fit; recorded
 * afterwards by mr_checkpoint_set_ended with everything else kept (a
 * resume from the file is bitwise one from the file before); a reason
 * this mirrored does not know is refused naming it. */
START_TEST(end_recorded) {
    saver sv = {0};
    snprintf(sv.pattern, sizeof sv.pattern, "%s/e.h5", dir);
    free(train(1, 2, 1, 0, NULL, &sv).weights);
    char name[4400], orig[4400];
    mr_checkpoint_name(sv.pattern, 26, name, sizeof name); /* after epoch 2 */
    snprintf(orig, sizeof orig, "%s/orig.h5", dir);
    size_t len;
    char *bytes = tu_read_file(name, &len);
    free(tu_write_file(dir, "orig.h5", bytes, len));
    free(bytes);
    mr_checkpoint c;
    mr_error err = {0};
    ck_assert_msg(mr_checkpoint_load(name, &c, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(c.ended.why, MR_RUN_END_NONE);
    mr_checkpoint_free(&c);
    /* a model of the run's, to read the file's weights into */
    char text[2048];
    snprintf(text, sizeof text, su_bn_text, su_adam);
    mr_config cfg;
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    cfg.net.global_batch = 8;
    mr_strategy_opts so = {.devices = {.kind = "cpu", .count = 1}, .seed = 5};
    mr_strategy *s;
    ck_assert_msg(mr_strategy_create(&cfg, &so, 100, &s, &err) == MR_OK, "%s", err.msg);
    const mr_checkpoint_end e = {
        .why = MR_RUN_END_EARLY_STOP, .epoch = 2, .step = 0, .global_step = 26};
    ck_assert_msg(mr_checkpoint_set_ended(name, &e, mr_strategy_replica(s, 0), &err) == MR_OK, "%s",
                  err.msg);
    ck_assert_msg(mr_checkpoint_load(name, &c, &err) == MR_OK, "%s", err.msg);
    ck_assert(c.ended.why == e.why && c.ended.epoch == 2 && c.ended.step == 0 &&
              c.ended.global_step == 26);
    ck_assert(c.state.epoch == 2 && c.state.global_step == 26 && c.state.n_history == 2);
    mr_checkpoint_free(&c);
    ck_assert_str_eq(mr_run_end_name(MR_RUN_END_EARLY_STOP), "early_stopping");
    ck_assert_str_eq(mr_run_end_name(MR_RUN_END_EPOCHS), "epochs");
    ck_assert_str_eq(mr_run_end_name(MR_RUN_END_MAX_STEPS), "max_steps");
    ck_assert_str_eq(mr_run_end_name(MR_RUN_END_NONE), "");
    run_result a = train(1, 3, 0, 0, name, NULL), b = train(1, 3, 0, 0, orig, NULL);
    ck_assert(a.n == b.n && memcmp(a.weights, b.weights, sizeof(float) * (size_t)a.n) == 0);
    free(a.weights), free(b.weights);
    /* an unknown reason (written here as ""): refused, naming the record */
    const mr_checkpoint_end odd = {.why = (mr_run_end)9, .epoch = 2, .global_step = 26};
    ck_assert_int_eq(mr_checkpoint_set_ended(name, &odd, mr_strategy_replica(s, 0), &err), MR_OK);
    ck_assert_int_eq(mr_checkpoint_load(name, &c, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "e-step000000026.h5: /mirrored/ended/reason ''"), "%s", err.msg);
    mr_strategy_destroy(s);
    mr_config_free(&cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, names_newest_prune);
    tcase_add_test(tc, resume_after_an_epoch_is_bitwise);
    tcase_add_test(tc, resume_inside_an_epoch_is_bitwise);
    tcase_add_test(tc, state_read_back);
    tcase_add_test(tc, model_files_named);
    tcase_add_test(tc, end_recorded);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
