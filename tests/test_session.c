/* test_session.c: session/ one function at a time, in both faces' words:
 * an argument named with its value and alone (session_events.h), a batch
 * that does not divide over the replicas (session_devices.h), the
 * arguments over a .cfg (session_overrides.h), the one loader
 * (session_model.h) and [augment] (session_data.h). The faces end to end:
 * test_cli.c, test_api.c, tests/python/test_errors.py. */
#include <check.h>
#include <string.h>

#include "launch/cli.h"
#include "session/session_data.h"
#include "session/session_devices.h"
#include "session/session_events.h"
#include "session/session_model.h"
#include "session/session_job.h"
#include "session/session_overrides.h"
#include "session/session_replicas.h"
#include "strategies/check_sync.h"
#include "tests/testutil.h"

static const char *cfg_text = "[net]\nglobal_batch=64\nseed=1\n[input]\nshape=8,8,1\n[flatten]\n"
                              "[dense]\nunits=4\nactivation=softmax\n";

static void parse(mr_config *cfg, const char *text) {
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "m.cfg", ".", cfg, &err) == MR_OK, "%s", err.msg);
}

/* the lines a session says, kept */
typedef struct heard {
    int n;
    char last[512];
} heard;

static void hear(void *user, mr_session_line kind, const char *text) {
    heard *h = user;
    (void)kind;
    h->n++;
    snprintf(h->last, sizeof h->last, "%s", text);
}

START_TEST(words_of_each_face) {
    char buf[128];
    ck_assert_str_eq(mr_session_word(NULL, MR_SESSION_ARG_DEVICES, "gpu", buf, sizeof buf),
                     "devices='gpu'");
    ck_assert_str_eq(mr_session_word(&mr_cli_words, MR_SESSION_ARG_DEVICES, "gpu", buf, sizeof buf),
                     "--devices gpu");
    ck_assert_str_eq(mr_session_word(NULL, MR_SESSION_ARG_BATCH_SIZE, "64", buf, sizeof buf),
                     "batch_size=64");
    ck_assert_str_eq(mr_session_name(&mr_cli_words, MR_SESSION_ARG_STOP_BUDGET), "--stop-budget");
    ck_assert_str_eq(mr_session_name(NULL, MR_SESSION_ARG_SAVE), "save()");
    /* every argument is named by both faces */
    for (int a = 0; a < MR_SESSION_ARG_COUNT; a++) {
        ck_assert_ptr_nonnull(mr_session_keras_words.arg[a]);
        ck_assert_ptr_nonnull(mr_session_keras_words.name[a]);
        ck_assert_ptr_nonnull(mr_cli_words.arg[a]);
        ck_assert_ptr_nonnull(mr_cli_words.name[a]);
        ck_assert_msg(strstr(mr_session_keras_words.arg[a], "--") == NULL, "%d", a);
    }
    heard h = {0};
    const mr_session_events ev = {.user = &h, .line = hear};
    mr_session_say(&ev, MR_SESSION_LINE_INFO, "Saved %s", "m.h5");
    mr_session_say(NULL, MR_SESSION_LINE_INFO, "nobody hears %d", 1);
    ck_assert_int_eq(h.n, 1);
    ck_assert_str_eq(h.last, "Saved m.h5");
}
END_TEST

START_TEST(batch_over_the_replicas) {
    mr_config cfg;
    parse(&cfg, cfg_text);
    const mr_job job = {.rank = 0, .size = 1};
    const mr_device_set three = {.kind = "cpu", .count = 3};
    mr_error err = {0};
    ck_assert_int_eq(mr_session_check_batch(63, &cfg, &three, &job, NULL, &err), MR_OK);
    ck_assert_int_eq(mr_session_check_batch(64, &cfg, &three, &job, NULL, &err), MR_ERR_USAGE);
    ck_assert_str_eq(err.msg, "batch_size=64 does not divide evenly over 3 replicas");
    mr_error_clear(&err);
    ck_assert_int_eq(mr_session_check_batch(64, &cfg, &three, &job, &mr_cli_words, &err),
                     MR_ERR_USAGE);
    ck_assert_str_eq(err.msg, "--batch-size 64 does not divide evenly over 3 replicas");
    mr_error_clear(&err);
    ck_assert_int_eq(mr_session_check_batch(2, &cfg, &three, &job, NULL, &err), MR_ERR_USAGE);
    ck_assert_str_eq(err.msg, "batch_size=2 is smaller than 3 replicas: each replica needs at "
                              "least one example");
    mr_error_clear(&err);
    /* several processes: the strategy checks the job's total */
    const mr_job two = {.rank = 0, .size = 2};
    ck_assert_int_eq(mr_session_check_batch(64, &cfg, &three, &two, NULL, &err), MR_OK);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(overrides_in_keras_words) {
    mr_config cfg;
    parse(&cfg, "[net]\nepochs=2\nearly_stopping=val_loss\n[data]\ntrain_images=x.npy\n"
                "train_labels=y.npy\nval_images=v.npy\nval_labels=w.npy\n[input]\nshape=4\n"
                "[dense]\nunits=2\nactivation=softmax\n");
    mr_session_overrides o = MR_SESSION_OVERRIDES_NONE;
    mr_error err = {0};
    o.epochs = 5, o.batch_size = 32, o.seed = 7;
    ck_assert_int_eq(mr_session_apply_overrides(&o, &cfg, NULL, NULL, &err), MR_OK);
    ck_assert(cfg.net.epochs == 5 && cfg.net.global_batch == 32 && cfg.net.seed == 7);
    /* a split beside the .cfg's validation set: refused in the face's words */
    o.validation_split = 0.25;
    ck_assert_int_eq(mr_session_apply_overrides(&o, &cfg, NULL, NULL, &err), MR_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "validation_split=0.25: [data] val_images of m.cfg"), "%s",
                  err.msg);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_session_apply_overrides(&o, &cfg, &mr_cli_words, NULL, &err), MR_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "--validation-split 0.25: [data] val_images"), "%s", err.msg);
    mr_error_clear(&err);
    /* the caller's arrays bring their own validation: the split is theirs */
    o.arrays = 1;
    ck_assert_int_eq(mr_session_apply_overrides(&o, &cfg, NULL, NULL, &err), MR_OK);
    ck_assert(cfg.net.validation_split == 0.25f);
    /* an archive that is no .npz */
    o = MR_SESSION_OVERRIDES_NONE;
    o.data = "d.npy";
    ck_assert_int_eq(mr_session_apply_overrides(&o, &cfg, NULL, NULL, &err), MR_ERR_USAGE);
    ck_assert_msg(strncmp(err.msg, "data='d.npy': expected an .npz", 30) == 0, "%s", err.msg);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(one_loader) {
    const char *dir = tu_tmpdir();
    char *cfg_path = tu_write_text(dir, "m.cfg", cfg_text);
    mr_config cfg;
    mr_checkpoint ck = {0};
    mr_session_source src = MR_SESSION_SOURCE_CKPT;
    mr_error err = {0};
    ck_assert_int_eq(mr_session_open(cfg_path, MR_SESSION_OPEN_ANY, &cfg, &ck, &src, &err), MR_OK);
    ck_assert_int_eq(src, MR_SESSION_SOURCE_CFG);
    ck_assert_int_eq(cfg.net.global_batch, 64);
    mr_config_free(&cfg);
    /* a .cfg is no file of weights: a face that needs weights is refused */
    ck_assert_int_ne(mr_session_open(cfg_path, MR_SESSION_OPEN_CKPT | MR_SESSION_OPEN_KERAS, &cfg,
                                     &ck, &src, &err),
                     MR_OK);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_session_open("/no/such/m.cfg", MR_SESSION_OPEN_ANY, &cfg, &ck, &src, &err),
                     MR_ERR_NOT_FOUND);
    ck_assert_str_eq(err.msg, "/no/such/m.cfg: cannot open: no such file");
    /* a folder is named as one (it was "no such file") */
    mr_error_clear(&err);
    ck_assert_int_eq(mr_session_open("/tmp", MR_SESSION_OPEN_ANY, &cfg, &ck, &src, &err),
                     MR_ERR_IO);
    ck_assert_str_eq(err.msg, "/tmp: a folder, not a model file (.cfg, .keras, .h5)");
    /* a .cfg's first weights are the seed's: nothing read */
    int loaded = 1;
    ck_assert_int_eq(
        mr_session_first_weights(cfg_path, MR_SESSION_SOURCE_CFG, NULL, NULL, NULL, &loaded, &err),
        MR_OK);
    ck_assert_int_eq(loaded, 0);
    free(cfg_path);
}
END_TEST

START_TEST(augment_needs_an_image) {
    mr_config cfg;
    parse(&cfg, "[net]\nseed=1\n[augment]\nflip=1\n[input]\nshape=4\n[dense]\nunits=2\n"
                "activation=softmax\n");
    mr_augment aug;
    mr_error err = {0};
    ck_assert_int_eq(mr_session_augment(&cfg, "m.cfg", &aug, &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "m.cfg:3: [augment] needs an image input"), "%s", err.msg);
    mr_config_free(&cfg);
    parse(&cfg, "[net]\nseed=9\n[augment]\nflip=1\n[input]\nshape=8,6,3\n[flatten]\n[dense]\n"
                "units=2\nactivation=softmax\n");
    ck_assert_int_eq(mr_session_augment(&cfg, "m.cfg", &aug, &err), MR_OK);
    ck_assert(aug.flip == 1 && aug.h == 8 && aug.w == 6 && aug.c == 3 && aug.seed == 9);
    mr_config_free(&cfg);
}
END_TEST

/* replicas are kept for their key and made anew for another, the weights
 * moving over once a fit has trained them */
START_TEST(replicas_for_a_key) {
    mr_config cfg;
    parse(&cfg, cfg_text);
    mr_job job;
    mr_error err = {0};
    ck_assert_msg(mr_session_job_init(NULL, NULL, &job, &err) == MR_OK, "%s", err.msg);
    const mr_device_set one = {.kind = "cpu", .count = 1, .ordinals = {0}},
                        two = {.kind = "cpu", .count = 2, .ordinals = {0, 1}};
    ck_assert(mr_session_same_devices(&one, &one) && !mr_session_same_devices(&one, &two));
    mr_session_replicas r = {0};
    mr_session_key key = {.devices = one, .global_batch = 64, .seed = 1};
    ck_assert_msg(mr_session_replicas_make(&r, &cfg, &key, &job, "", MR_SESSION_SOURCE_CFG, NULL,
                                           &err) == MR_OK,
                  "%s", err.msg);
    mr_strategy *first = r.s;
    ck_assert_ptr_nonnull(first);
    ck_assert_int_eq(
        mr_session_replicas_make(&r, &cfg, &key, &job, "", MR_SESSION_SOURCE_CFG, NULL, &err),
        MR_OK);
    ck_assert_ptr_eq(r.s, first);
    uint64_t h1, h2;
    ck_assert_int_eq(mr_params_hash(mr_strategy_replica(r.s, 0), &h1, &err), MR_OK);
    /* other devices (and another seed, whose own weights differ): other
     * replicas; fitted, they take the last weights, not the seed's */
    r.fitted = 1;
    key.devices = two;
    key.seed = 2;
    ck_assert_msg(mr_session_replicas_make(&r, &cfg, &key, &job, "", MR_SESSION_SOURCE_CFG, NULL,
                                           &err) == MR_OK,
                  "%s", err.msg);
    ck_assert_int_eq(mr_strategy_plan(r.s)->replicas, 2);
    ck_assert_int_eq(mr_params_hash(mr_strategy_replica(r.s, 0), &h2, &err), MR_OK);
    ck_assert(h1 == h2);
    mr_session_replicas_free(&r);
    ck_assert_ptr_null(r.s);
    mr_job_finalize(&job);
    mr_config_free(&cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("session");
    TCase *tc = tcase_create("session");
    tcase_add_test(tc, words_of_each_face);
    tcase_add_test(tc, batch_over_the_replicas);
    tcase_add_test(tc, overrides_in_keras_words);
    tcase_add_test(tc, one_loader);
    tcase_add_test(tc, augment_needs_an_image);
    tcase_add_test(tc, replicas_for_a_key);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
