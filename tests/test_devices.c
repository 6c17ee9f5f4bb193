/* test_devices.c: --devices parsing and listing. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../strategies/devices.h"
#include "testutil.h"

static mr_status parse(const char *spec, mr_device_set *set, mr_error *err) {
    mr_error_clear(err);
    return mr_devices_parse(spec, 0, set, err);
}

START_TEST(valid_specs) {
    mr_device_set set;
    mr_error err = {0};
    ck_assert_int_eq(parse("cpu", &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 1);
    ck_assert_int_eq(set.kind, MR_DEVICE_CPU);
    ck_assert_int_eq(parse("cpu:3", &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 3);
    ck_assert_int_eq(set.ordinals[2], 2);
    ck_assert_int_eq(parse("auto", &set, &err), MR_OK);
    /* no GPU here: one CPU replica per usable core */
    ck_assert_int_eq(set.count, mr_gpu_count() > 0 ? mr_gpu_count() : mr_cpu_cores());
    ck_assert_int_eq(set.cores, mr_cpu_cores());
    /* a process's share of the node (under mpirun): auto takes that many */
    ck_assert_int_eq(mr_devices_parse("auto", 3, &set, &err), MR_OK);
    ck_assert_int_eq(set.count, mr_gpu_count() > 0 ? mr_gpu_count() : 3);
    ck_assert_int_eq(set.cores, 3);
    ck_assert_int_eq(mr_devices_parse("cpu:2", 1, &set, &err), MR_OK); /* checked by the caller */
    ck_assert_int_eq(set.count, 2);
    char buf[256];
    ck_assert_int_eq(parse("cpu:2", &set, &err), MR_OK);
    mr_devices_format(&set, buf, sizeof buf);
    ck_assert_str_eq(buf, "cpu:0, cpu:1");
}
END_TEST

START_TEST(bad_specs) {
    const char *bad[] = {"cpu:0", "cpu:-1", "cpu:abc", "cpu:", "cpu:2x", "tpu", "cpu:100000", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mr_device_set set;
        mr_error err = {0};
        ck_assert_msg(parse(bad[i], &set, &err) == MR_ERR_USAGE, "%s accepted", bad[i]);
        ck_assert_msg(strstr(err.msg, "--devices") != NULL, "%s", err.msg);
    }
}
END_TEST

START_TEST(gpu_fails_clearly) {
    mr_device_set set;
    mr_error err = {0};
    ck_assert_int_eq(parse("gpu", &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "no GPU"), "%s", err.msg);
    ck_assert_int_eq(parse("gpu:0,2", &set, &err), MR_ERR_UNSUPPORTED);
}
END_TEST

START_TEST(list_devices) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mr_devices_list(f, 3);
    fclose(f);
    ck_assert_msg(strstr(buf, "cpu:") && strstr(buf, "3 cores usable") && strstr(buf, "gpu:"),
                  "%s", buf);
    free(buf);
}
END_TEST

int main(void) {
    Suite *s = suite_create("devices");
    TCase *tc = tcase_create("devices");
    tcase_add_test(tc, valid_specs);
    tcase_add_test(tc, bad_specs);
    tcase_add_test(tc, gpu_fails_clearly);
    tcase_add_test(tc, list_devices);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
