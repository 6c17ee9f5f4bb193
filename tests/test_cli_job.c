/* test_cli_job.c: unit tests of launch/cli_job.c's stage verdicts
 * (mr_cli_stage_failed) in a job of one process, where an agreement is the
 * process's own outcome and a failure is printed once, to stderr. */
#include <check.h>

#include "launch/cli.h"

static const mr_cli_stage_verdict verdicts[] = {MR_CLI_STAGE_AGREE, MR_CLI_STAGE_SAME,
                                                MR_CLI_STAGE_ALONE, MR_CLI_STAGE_PRINT};

/* a stage that succeeded goes on, whatever its verdict, and sets no exit code */
START_TEST(test_ok_goes_on) {
    mr_job job = {.rank = 0, .size = 1, .local_size = 1, .n_nodes = 1, .cores = 1};
    for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++) {
        mr_error err = {0};
        int rc = -1;
        ck_assert_int_eq(mr_cli_stage_failed("test", &job, verdicts[i], MR_OK, &err, &rc), 0);
        ck_assert_int_eq(rc, -1);
    }
}
END_TEST

/* a failure ends the run with the exit code of its status: 2 for bad
 * input, 1 for a failure while running, under every verdict */
START_TEST(test_failure_sets_exit_code) {
    mr_job job = {.rank = 0, .size = 1, .local_size = 1, .n_nodes = 1, .cores = 1};
    for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++) {
        mr_error err = {0};
        int rc = -1;
        mr_status st = mr_error_set(&err, MR_ERR_CONFIG, "m.cfg:3: bad");
        ck_assert_int_eq(mr_cli_stage_failed("test", &job, verdicts[i], st, &err, &rc), 1);
        ck_assert_int_eq(rc, MR_EXIT_BAD_INPUT);
        mr_error_clear(&err);
        st = mr_error_set(&err, MR_ERR_RUNTIME, "device lost");
        ck_assert_int_eq(mr_cli_stage_failed("test", &job, verdicts[i], st, &err, &rc), 1);
        ck_assert_int_eq(rc, MR_EXIT_FAILURE);
    }
}
END_TEST

static Suite *cli_job_suite(void) {
    Suite *s = suite_create("cli_job");
    TCase *tc = tcase_create("stage_verdicts");
    tcase_add_test(tc, test_ok_goes_on);
    tcase_add_test(tc, test_failure_sets_exit_code);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(cli_job_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
