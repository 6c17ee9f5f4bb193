/* test_error.c: unit tests of runtime/error.c (first-error-wins messages,
 * status names) and of the MR_CHECK / MR_CHECK_GOTO macros of error.h. */
#include <check.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

/* ---- mr_error_set / mr_error_clear ------------------------------------ */

START_TEST(test_set_records_status_and_message) {
    mr_error err = {0};
    mr_status st = mr_error_set(&err, MR_ERR_IO, "%s: cannot open: %s (%d)", "a.idx", "gone", 2);
    ck_assert_int_eq(st, MR_ERR_IO);
    ck_assert_int_eq(err.status, MR_ERR_IO);
    ck_assert_str_eq(err.msg, "a.idx: cannot open: gone (2)");
}
END_TEST

START_TEST(test_first_error_wins) {
    mr_error err = {0};
    mr_error_set(&err, MR_ERR_DATA, "first %d", 1);
    /* the later error still returns its own status to the caller ... */
    ck_assert_int_eq(mr_error_set(&err, MR_ERR_CONFIG, "second %d", 2), MR_ERR_CONFIG);
    ck_assert_int_eq(mr_error_set(&err, MR_ERR_RUNTIME, "third"), MR_ERR_RUNTIME);
    /* ... but the record keeps the first, nearest the cause */
    ck_assert_int_eq(err.status, MR_ERR_DATA);
    ck_assert_str_eq(err.msg, "first 1");
}
END_TEST

START_TEST(test_set_ok_is_not_an_error) {
    mr_error err = {0};
    ck_assert_int_eq(mr_error_set(&err, MR_OK, "nothing"), MR_OK);
    ck_assert_int_eq(err.status, MR_OK);
    ck_assert_str_eq(err.msg, "");
    /* and MR_OK does not count as "already set": a real error still lands */
    ck_assert_int_eq(mr_error_set(&err, MR_ERR_USAGE, "bad option"), MR_ERR_USAGE);
    ck_assert_int_eq(err.status, MR_ERR_USAGE);
    ck_assert_str_eq(err.msg, "bad option");
}
END_TEST

START_TEST(test_null_err_is_ok) {
    ck_assert_int_eq(mr_error_set(NULL, MR_ERR_NOMEM, "out of memory: %zu bytes", (size_t)42),
                     MR_ERR_NOMEM);
    ck_assert_int_eq(mr_error_set(NULL, MR_OK, "fine"), MR_OK);
    mr_error_clear(NULL);
}
END_TEST

START_TEST(test_clear) {
    mr_error err = {0};
    mr_error_set(&err, MR_ERR_CONFIG, "x.cfg:3: unknown key 'foo'");
    mr_error_clear(&err);
    ck_assert_int_eq(err.status, MR_OK);
    ck_assert_str_eq(err.msg, "");
    /* after a clear the next error is recorded again */
    mr_error_set(&err, MR_ERR_IO, "y: unreadable");
    ck_assert_int_eq(err.status, MR_ERR_IO);
    ck_assert_str_eq(err.msg, "y: unreadable");
}
END_TEST

START_TEST(test_long_message_truncated) {
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mr_error err;
    memset(&err, 0, sizeof err);
    mr_error_set(&err, MR_ERR_DATA, "%s", big);
    ck_assert_int_eq(err.status, MR_ERR_DATA);
    /* NUL-terminated within the buffer, and as much kept as fits */
    ck_assert_uint_eq(strnlen(err.msg, sizeof err.msg), sizeof err.msg - 1);
    ck_assert_int_eq(err.msg[0], 'x');
}
END_TEST

/* ---- mr_status_name ----------------------------------------------------- */

START_TEST(test_status_names) {
    static const struct {
        mr_status st;
        const char *name;
    } want[] = {
        {MR_OK, "ok"},
        {MR_ERR_USAGE, "usage error"},
        {MR_ERR_CONFIG, "config error"},
        {MR_ERR_IO, "I/O error"},
        {MR_ERR_DATA, "data error"},
        {MR_ERR_NOMEM, "out of memory"},
        {MR_ERR_UNSUPPORTED, "unsupported"},
        {MR_ERR_RUNTIME, "runtime error"},
        {MR_ERR_ABORTED, "aborted"},
        {MR_ERR_NOT_FOUND, "file not found"},
    };
    const int n = (int)(sizeof want / sizeof want[0]);
    /* the table above must cover every status */
    ck_assert_int_eq(n, MR_ERR_NOT_FOUND + 1);
    for (int i = 0; i < n; i++) {
        const char *name = mr_status_name(want[i].st);
        ck_assert_ptr_nonnull(name);
        ck_assert_str_eq(name, want[i].name);
        /* short, one line, lowercase apart from the "I/O" acronym */
        ck_assert_ptr_null(strchr(name, '\n'));
        ck_assert_uint_lt(strlen(name), 32);
        if (want[i].st != MR_ERR_IO)
            for (const char *c = name; *c; c++)
                ck_assert_msg(!isupper((unsigned char)*c), "'%s' is not lowercase", name);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(name, mr_status_name(want[j].st));
    }
    /* a value outside the enum still gives a printable name */
    const char *unknown = mr_status_name((mr_status)1234);
    ck_assert_ptr_nonnull(unknown);
    ck_assert_uint_gt(strlen(unknown), 0);
}
END_TEST

/* ---- MR_CHECK / MR_CHECK_GOTO -------------------------------------------- */

static int after_check; /* how often the code after a check ran */

static mr_status give(mr_status st) {
    return st;
}

static mr_status use_check(mr_status inner) {
    MR_CHECK(give(inner));
    after_check++;
    return MR_OK;
}

/* Evaluates its argument exactly once. */
static int evaluations;
static mr_status counted(mr_status st) {
    evaluations++;
    return st;
}

static mr_status use_check_counted(mr_status inner) {
    MR_CHECK(counted(inner));
    return MR_OK;
}

START_TEST(test_check_propagates) {
    after_check = 0;
    ck_assert_int_eq(use_check(MR_OK), MR_OK);
    ck_assert_int_eq(after_check, 1);
    ck_assert_int_eq(use_check(MR_ERR_DATA), MR_ERR_DATA);
    ck_assert_int_eq(after_check, 1); /* returned before the rest */
    ck_assert_int_eq(use_check(MR_ERR_RUNTIME), MR_ERR_RUNTIME);
    ck_assert_int_eq(after_check, 1);

    evaluations = 0;
    ck_assert_int_eq(use_check_counted(MR_ERR_IO), MR_ERR_IO);
    ck_assert_int_eq(use_check_counted(MR_OK), MR_OK);
    ck_assert_int_eq(evaluations, 2);
}
END_TEST

/* Two steps with one cleanup label, the NCCL pattern. Returns the status;
 * *cleaned is set by the cleanup, *reached counts the steps that ran. */
static mr_status use_check_goto(mr_status first, mr_status second, int *reached, int *cleaned) {
    mr_status st = MR_OK;
    *reached = 0;
    *cleaned = 0;
    MR_CHECK_GOTO(give(first), st, done);
    (*reached)++;
    MR_CHECK_GOTO(give(second), st, done);
    (*reached)++;
done:
    (*cleaned)++;
    return st;
}

START_TEST(test_check_goto_propagates) {
    int reached, cleaned;
    ck_assert_int_eq(use_check_goto(MR_OK, MR_OK, &reached, &cleaned), MR_OK);
    ck_assert_int_eq(reached, 2);
    ck_assert_int_eq(cleaned, 1);
    ck_assert_int_eq(use_check_goto(MR_ERR_CONFIG, MR_OK, &reached, &cleaned), MR_ERR_CONFIG);
    ck_assert_int_eq(reached, 0);
    ck_assert_int_eq(cleaned, 1);
    ck_assert_int_eq(use_check_goto(MR_OK, MR_ERR_NOMEM, &reached, &cleaned), MR_ERR_NOMEM);
    ck_assert_int_eq(reached, 1);
    ck_assert_int_eq(cleaned, 1);
}
END_TEST

/* A library-style function: sets the message and propagates through MR_CHECK;
 * the caller sees the innermost message. */
static mr_status inner_fail(mr_error *err) {
    return mr_error_set(err, MR_ERR_IO, "data.idx: truncated");
}
static mr_status outer(mr_error *err) {
    MR_CHECK(inner_fail(err));
    return mr_error_set(err, MR_ERR_RUNTIME, "not reached");
}
static mr_status outermost(mr_error *err) {
    mr_status st = outer(err);
    if (st != MR_OK) mr_error_set(err, MR_ERR_CONFIG, "while loading the model");
    return st;
}

START_TEST(test_message_through_layers) {
    mr_error err = {0};
    ck_assert_int_eq(outermost(&err), MR_ERR_IO);
    ck_assert_int_eq(err.status, MR_ERR_IO);
    ck_assert_str_eq(err.msg, "data.idx: truncated");
}
END_TEST

static Suite *error_suite(void) {
    Suite *s = suite_create("error");
    TCase *tc = tcase_create("error");
    tcase_add_test(tc, test_set_records_status_and_message);
    tcase_add_test(tc, test_first_error_wins);
    tcase_add_test(tc, test_set_ok_is_not_an_error);
    tcase_add_test(tc, test_null_err_is_ok);
    tcase_add_test(tc, test_clear);
    tcase_add_test(tc, test_long_message_truncated);
    tcase_add_test(tc, test_status_names);
    suite_add_tcase(s, tc);
    tc = tcase_create("check_macros");
    tcase_add_test(tc, test_check_propagates);
    tcase_add_test(tc, test_check_goto_propagates);
    tcase_add_test(tc, test_message_through_layers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(error_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
