/* test_isolate.c: a reader's trial run in a child process (isolate.h): a
 * child that returns (an error or not) lets the caller go on; one that
 * crashes is a one-line refusal naming the file; the child's writes never
 * reach the parent. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/isolate.h"
#include "tests/testutil.h"

static mr_status returns_ok(void *arg) {
    *(int *)arg = 1; /* the child's copy */
    return MR_OK;
}

static mr_status returns_error(void *arg) {
    (void)arg;
    return MR_ERR_DATA;
}

static mr_status crashes(void *arg) {
    (void)arg;
    raise(SIGSEGV);
    return MR_OK;
}

static mr_status aborts(void *arg) {
    (void)arg;
    abort();
}

START_TEST(child_outcomes) {
    mr_error err = {0};
    int touched = 0;
    ck_assert_int_eq(mr_isolate("f.h5", "the reader", returns_ok, &touched, &err), MR_OK);
    ck_assert_int_eq(touched, 0);
    ck_assert_int_eq(mr_isolate("f.h5", "the reader", returns_error, NULL, &err), MR_OK);
    ck_assert_int_eq(mr_isolate("f.h5", "the reader", crashes, NULL, &err), MR_ERR_DATA);
    ck_assert_str_eq(err.msg, "f.h5: the reader crashed reading it (SIGSEGV): the file is damaged");
    mr_error_clear(&err);
    ck_assert_int_eq(mr_isolate("g.h5", "HDF5", aborts, NULL, &err), MR_ERR_DATA);
    ck_assert_str_eq(err.msg, "g.h5: HDF5 crashed reading it (SIGABRT): the file is damaged");
}
END_TEST

int main(void) {
    Suite *s = suite_create("isolate");
    TCase *tc = tcase_create("isolate");
    tcase_add_test(tc, child_outcomes);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
