/* test_fault.c: fault injection (strategies/fault.h): the parser of
 * MIRRORED_DEBUG_FAIL, each hook's decision and action, and a strategy
 * whose replica fails where the fault says. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/clock.h"
#include "strategies/fault.h"
#include "strategies/strategy.h"
#include "tests/strategyutil.h"
#include "tests/testutil.h"

START_TEST(parse_none) {
    mr_fault f = {.fail_step = 9, .staged = 1};
    mr_error err = {0};
    ck_assert_int_eq(mr_fault_parse(NULL, 0, &f, &err), MR_OK);
    ck_assert(f.fail_step == 0 && f.stall == 0 && f.perturb_step == 0 && f.staged == 0);
    ck_assert_int_eq(mr_fault_parse("", 0, &f, &err), MR_OK);
    ck_assert_int_eq(f.fail_step, 0);
}
END_TEST

START_TEST(parse_rank_step_stall) {
    mr_fault f;
    mr_error err = {0};
    ck_assert_int_eq(mr_fault_parse("1:3", 1, &f, &err), MR_OK);
    ck_assert_int_eq(f.fail_step, 3);
    ck_assert_int_eq(f.stall, 0);
    /* another rank's fault is none for this process */
    ck_assert_int_eq(mr_fault_parse("1:3", 0, &f, &err), MR_OK);
    ck_assert_int_eq(f.fail_step, 0);
    ck_assert_int_eq(mr_fault_parse("0:12:stall", 0, &f, &err), MR_OK);
    ck_assert_int_eq(f.fail_step, 12);
    ck_assert_int_eq(f.stall, 1);
    ck_assert_int_eq(mr_fault_parse("1:7:TERM", 1, &f, &err), MR_OK);
    ck_assert_int_eq(f.fail_step, 7);
    ck_assert_int_eq(f.raise_signal, SIGTERM);
    ck_assert_int_eq(mr_fault_parse("0:2:INT", 0, &f, &err), MR_OK);
    ck_assert_int_eq(f.raise_signal, SIGINT);
    ck_assert_int_eq(mr_fault_parse("0:2:USR1", 0, &f, &err), MR_OK);
    ck_assert_int_eq(f.raise_signal, SIGUSR1);
    ck_assert_int_eq(err.status, MR_OK);
}
END_TEST

static volatile sig_atomic_t raised;
static void note_signal(int sig) {
    raised = sig;
}

/* the signal hook raises its signal in this process, before the next
 * update reads the stop flag, on local replica 0 only; not after the
 * all-reduce */
START_TEST(step_raises_a_signal) {
    signal(SIGUSR1, note_signal);
    mr_error err = {0};
    mr_fault f = {.fail_step = 3, .raise_signal = SIGUSR1};
    ck_assert_int_eq(mr_fault_at_step(&f, 0, 3), MR_FAULT_NONE);
    ck_assert_int_eq(mr_fault_step(&f, 0, 0, 3, 1.0, &err), MR_OK);
    ck_assert_int_eq(raised, 0);
    mr_fault_before_stop_read(&f, 0, 3);
    ck_assert_int_eq(raised, 0);
    mr_fault_before_stop_read(&f, 1, 4); /* replica 0 only */
    ck_assert_int_eq(raised, 0);
    mr_fault_before_stop_read(NULL, 0, 4);
    ck_assert_int_eq(raised, 0);
    mr_fault_before_stop_read(&f, 0, 4);
    ck_assert_int_eq(raised, SIGUSR1);
    signal(SIGUSR1, SIG_DFL);
}
END_TEST

START_TEST(parse_malformed_is_one_line) {
    const char *bad[] = {
        "x",    "1",    "1:", "1:0",         "1:3:hang", "-1:3",          "1:-3",     " 1:3",
        "1:3 ", "1:3:", ":3", "1:3:stall:x", "1;3",      "99999999999:1", "1:3:KILL", "1:3:term"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        mr_fault f = {.fail_step = 5};
        mr_error err = {0};
        ck_assert_msg(mr_fault_parse(bad[i], 1, &f, &err) == MR_ERR_USAGE, "'%s' accepted", bad[i]);
        ck_assert_int_eq(f.fail_step, 0);
        char want[64];
        snprintf(want, sizeof want, "MIRRORED_DEBUG_FAIL=%s: expected RANK:STEP", bad[i]);
        ck_assert_msg(strstr(err.msg, want) == err.msg, "%s", err.msg);
        ck_assert_msg(strchr(err.msg, '\n') == NULL, "%s", err.msg);
    }
}
END_TEST

START_TEST(at_step_decides) {
    ck_assert_int_eq(mr_fault_at_step(NULL, 0, 1), MR_FAULT_NONE);
    mr_fault none = {0};
    ck_assert_int_eq(mr_fault_at_step(&none, 0, 1), MR_FAULT_NONE);
    mr_fault f = {.fail_step = 3};
    ck_assert_int_eq(mr_fault_at_step(&f, 0, 2), MR_FAULT_NONE);
    ck_assert_int_eq(mr_fault_at_step(&f, 0, 3), MR_FAULT_FAIL);
    ck_assert_int_eq(mr_fault_at_step(&f, 1, 3), MR_FAULT_NONE); /* replica 0 only */
    ck_assert_int_eq(mr_fault_at_step(&f, 0, 4), MR_FAULT_NONE);
    f.stall = 1;
    ck_assert_int_eq(mr_fault_at_step(&f, 0, 3), MR_FAULT_STALL);
}
END_TEST

START_TEST(step_fails_or_stalls) {
    mr_error err = {0};
    mr_fault f = {.fail_step = 3};
    ck_assert_int_eq(mr_fault_step(&f, 0, 4, 2, 1.0, &err), MR_OK);
    ck_assert_int_eq(mr_fault_step(NULL, 0, 4, 3, 1.0, &err), MR_OK);
    ck_assert_int_eq(mr_fault_step(&f, 0, 4, 3, 1.0, &err), MR_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "replica 4: injected failure at step 3 (MIRRORED_DEBUG_FAIL)");
    /* a stall lasts three timeouts, then the step goes on (one that did
     * not would end at the test case's timeout) */
    f.stall = 1;
    mr_error_clear(&err);
    double t0 = mr_now_s();
    ck_assert_int_eq(mr_fault_step(&f, 0, 4, 3, 0.05, &err), MR_OK);
    double t = mr_now_s() - t0;
    ck_assert_msg(t >= 0.15, "stalled %.3f s", t);
    ck_assert_int_eq(err.status, MR_OK);
}
END_TEST

/* A 2-float-input model on the context be (4 classes, params[0] first). */
static void small_model(mr_backend *be, mr_config *cfg, mr_model *m) {
    const char *text = "[net]\nbatch=2\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=2\n"
                       "[dense]\nunits=4\nactivation=softmax\n";
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(m, be, cfg, 2, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_model_init_weights(m, 3, &err), MR_OK);
}

static float first_param(const mr_model *m) {
    float v;
    ck_assert_int_eq(mr_backend_to_host(m->be, &v, m->params, sizeof v, NULL), MR_OK);
    return v;
}

START_TEST(perturb_last_replica_at_step) {
    for (int staged = 0; staged < 2; staged++) {
        mr_backend *be = NULL;
        ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, &be, NULL), MR_OK);
        be->host_memory = !staged;
        mr_config cfg;
        mr_model m;
        small_model(be, &cfg, &m);
        mr_error err = {0};
        const float before = first_param(&m);
        mr_fault f = {.perturb_step = 4};
        /* not due: another step, another replica, one replica, no fault */
        ck_assert_int_eq(mr_fault_perturb(&f, &m, 2, 3, 3, &err), MR_OK);
        ck_assert_int_eq(mr_fault_perturb(&f, &m, 1, 3, 4, &err), MR_OK);
        ck_assert_int_eq(mr_fault_perturb(&f, &m, 0, 1, 4, &err), MR_OK);
        ck_assert_int_eq(mr_fault_perturb(NULL, &m, 2, 3, 4, &err), MR_OK);
        ck_assert(first_param(&m) == before);
        /* due: replica R-1 of R at the step, its first parameter + 1 */
        ck_assert_int_eq(mr_fault_perturb(&f, &m, 2, 3, 4, &err), MR_OK);
        ck_assert(first_param(&m) == before + 1.0f);
        mr_model_free(&m);
        mr_config_free(&cfg);
        mr_backend_destroy(be);
    }
}
END_TEST

START_TEST(staged_flag) {
    ck_assert_int_eq(mr_fault_staged(NULL), 0);
    ck_assert_int_eq(mr_fault_staged(&(mr_fault){0}), 0);
    ck_assert_int_eq(mr_fault_staged(&(mr_fault){.staged = 1}), 1);
}
END_TEST

/* The strategy asks the fault after each update's all-reduce: replica 0
 * fails at the named update, and the fit reports it (not the others'
 * aborted echoes). */
START_TEST(strategy_fails_where_told) {
    char text[2048];
    snprintf(text, sizeof text, su_mlp_text, "");
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    cfg.net.batch = 4;
    mr_dataset ds;
    su_make_data(&ds, 64);
    mr_fault f;
    ck_assert_int_eq(mr_fault_parse("0:3", 0, &f, &err), MR_OK);
    mr_strategy_opts so = {.devices = {.kind = "cpu", .count = 2}, .seed = 5, .fault = &f};
    mr_strategy *s = NULL;
    ck_assert_msg(mr_strategy_create(&cfg, &so, 64, &s, &err) == MR_OK, "%s", err.msg);
    int64_t updates = 0;
    mr_status st = mr_strategy_fit(s, &ds, 64, 64, 0, 1, NULL, NULL, NULL, &err);
    ck_assert_int_eq(st, MR_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "replica 0: injected failure at step 3 (MIRRORED_DEBUG_FAIL)");
    /* two updates were applied, the third was not */
    updates = mr_strategy_state(s)->global_step;
    ck_assert_int_eq(updates, 2);
    mr_strategy_destroy(s);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("fault");
    TCase *tc = tcase_create("fault");
    tcase_add_test(tc, parse_none);
    tcase_add_test(tc, parse_rank_step_stall);
    tcase_add_test(tc, parse_malformed_is_one_line);
    tcase_add_test(tc, at_step_decides);
    tcase_add_test(tc, step_fails_or_stalls);
    tcase_add_test(tc, step_raises_a_signal);
    tcase_add_test(tc, perturb_last_replica_at_step);
    tcase_add_test(tc, staged_flag);
    tcase_add_test(tc, strategy_fails_where_told);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
