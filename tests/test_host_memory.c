/* test_host_memory.c: MemAvailable plus SwapFree, in bytes, from a
 * meminfo file; -1 without one. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/host_memory.h"
#include "tests/testutil.h"

static const char *write_meminfo(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/mr_meminfo_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

START_TEST(reads_available_and_swap) {
    const char *p = write_meminfo("MemTotal:       24000000 kB\nMemFree:  100 kB\n"
                                  "MemAvailable:   1000 kB\nSwapTotal: 9 kB\nSwapFree: 24 kB\n");
    ck_assert_int_eq(mr_host_memory_available(p), (1000 + 24) * 1024);
    remove(p);
    p = write_meminfo("MemTotal: 5 kB\nMemAvailable: 7 kB\n");
    ck_assert_int_eq(mr_host_memory_available(p), 7 * 1024);
    remove(p);
}
END_TEST

START_TEST(unknown_is_minus_one) {
    ck_assert_int_eq(mr_host_memory_available("/nonexistent/meminfo"), -1);
    const char *p = write_meminfo("MemTotal: 5 kB\nSwapFree: 3 kB\n");
    ck_assert_int_eq(mr_host_memory_available(p), -1);
    remove(p);
}
END_TEST

/* this machine: some memory is left */
START_TEST(this_machine) {
    const int64_t b = mr_host_memory_available("/proc/meminfo");
    ck_assert_int_gt(b, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("host_memory");
    TCase *tc = tcase_create("host_memory");
    tcase_add_test(tc, reads_available_and_swap);
    tcase_add_test(tc, unknown_is_minus_one);
    tcase_add_test(tc, this_machine);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
