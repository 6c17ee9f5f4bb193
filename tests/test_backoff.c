/* test_backoff.c: unit tests of runtime/backoff.h, the host's pauses
 * between two questions to the device or to NCCL: yields while the wait is
 * young, then sleeps that double from 1 us up to 64 us, and the elapsed
 * time that the callers' timeouts compare against. Elapsed times are
 * checked against the test's own clock readings around them, never
 * against a guess at the machine's speed. */
#include <check.h>
#include <stdlib.h>

#include "runtime/backoff.h"

START_TEST(yields_while_young) {
    mr_backoff b;
    double before = mr_now_s();
    mr_backoff_begin(&b, 1e6); /* young for the whole test, however slow */
    double e = mr_backoff_elapsed(&b);
    ck_assert(e >= 0.0 && e <= mr_now_s() - before);
    for (int i = 0; i < 100; i++)
        mr_backoff_pause(&b);
    ck_assert_int_eq(b.nap_ns, 1000); /* no sleep yet */
}
END_TEST

START_TEST(sleeps_double_up_to_the_cap) {
    mr_backoff b;
    mr_backoff_begin(&b, 0.0);
    const long want[] = {2000, 4000, 8000, 16000, 32000, 64000, 64000, 64000};
    for (int i = 0; i < 8; i++) {
        mr_backoff_pause(&b);
        ck_assert_int_eq(b.nap_ns, want[i]);
    }
    /* the eight sleeps took at least their sum: 1+2+4+8+16+32+64+64 us */
    ck_assert(mr_backoff_elapsed(&b) >= 191e-6);
}
END_TEST

START_TEST(elapsed_grows) {
    mr_backoff b;
    mr_backoff_begin(&b, 0.0);
    double before = mr_now_s();
    double t0 = mr_backoff_elapsed(&b);
    struct timespec ms = {0, 2000000};
    nanosleep(&ms, NULL);
    double t1 = mr_backoff_elapsed(&b);
    ck_assert(t1 >= t0 + 2e-3);
    ck_assert(t1 - t0 <= mr_now_s() - before);
}
END_TEST

int main(void) {
    Suite *s = suite_create("backoff");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, yields_while_young);
    tcase_add_test(tc, sleeps_double_up_to_the_cap);
    tcase_add_test(tc, elapsed_grows);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
