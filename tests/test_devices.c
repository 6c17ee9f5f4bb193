/* test_devices.c: --devices parsing and listing, on this machine's devices
 * and on made-up GPU lists (the GPU forms: selection, the node's processes
 * sharing the GPUs by local rank, the errors). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../strategies/devices.h"
#include "testutil.h"

static mr_status parse(const char *spec, mr_device_set *set, mr_error *err) {
    mr_error_clear(err);
    return mr_devices_parse(spec, NULL, set, err);
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
    mr_device_env three = {.cores = 3};
    ck_assert_int_eq(mr_devices_parse("auto", &three, &set, &err), MR_OK);
    ck_assert_int_eq(set.count, mr_gpu_count() > 0 ? mr_gpu_count() : 3);
    ck_assert_int_eq(set.cores, 3);
    mr_device_env one = {.cores = 1};
    ck_assert_int_eq(mr_devices_parse("cpu:2", &one, &set, &err),
                     MR_OK); /* checked by the caller */
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

/* On this machine (no GPU in CI): the GPU forms fail with the reason. */
START_TEST(gpu_fails_clearly) {
    if (mr_gpu_count() > 0) return; /* a GPU machine: the made-up lists below cover it */
    mr_device_set set;
    mr_error err = {0};
    ck_assert_int_eq(parse("gpu", &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "--devices gpu: no GPU available (") &&
                      strstr(err.msg, mr_gpu_discover()->reason),
                  "%s", err.msg);
    ck_assert_int_eq(parse("gpu:0,2", &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "no GPU"), "%s", err.msg);
    /* auto: the CPU, never an error */
    ck_assert_int_eq(parse("auto", &set, &err), MR_OK);
    ck_assert_int_eq(set.kind, MR_DEVICE_CPU);
}
END_TEST

/* Four made-up GPUs. */
static mr_gpu_list four_gpus(void) {
    mr_gpu_list l = {.count = 4, .driver_version = 13000, .runtime_version = 13000};
    for (int i = 0; i < 4; i++) {
        l.gpu[i].ordinal = i;
        snprintf(l.gpu[i].name, sizeof l.gpu[i].name, "Test GPU %d", i);
        l.gpu[i].total_bytes = (size_t)80 << 30;
        l.gpu[i].cc_major = 9;
        snprintf(l.gpu[i].pci_bus_id, sizeof l.gpu[i].pci_bus_id, "0000:%02x:00.0", 16 + i);
    }
    return l;
}

START_TEST(gpu_selection) {
    mr_gpu_list gpus = four_gpus();
    mr_device_env env = {.cores = 2, .gpus = &gpus};
    mr_device_set set;
    mr_error err = {0};
    char buf[256];
    ck_assert_int_eq(mr_devices_parse("auto", &env, &set, &err), MR_OK);
    ck_assert_int_eq(set.kind, MR_DEVICE_CUDA);
    ck_assert_int_eq(set.count, 4);
    ck_assert_int_eq(mr_devices_parse("gpu", &env, &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 4);
    ck_assert_int_eq(mr_devices_parse("gpu:0,2", &env, &set, &err), MR_OK);
    mr_devices_format(&set, buf, sizeof buf);
    ck_assert_str_eq(buf, "gpu:0, gpu:2");
    /* cpu stays the CPU where there are GPUs */
    ck_assert_int_eq(mr_devices_parse("cpu:2", &env, &set, &err), MR_OK);
    ck_assert_int_eq(set.kind, MR_DEVICE_CPU);
    /* bad lists */
    const char *usage[] = {"gpu:", "gpu:a", "gpu:0,", "gpu:1,1", "gpu:-1", "gpu:0;1"};
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        mr_error_clear(&err);
        ck_assert_msg(mr_devices_parse(usage[i], &env, &set, &err) == MR_ERR_USAGE, "%s: %s",
                      usage[i], err.msg);
        ck_assert_msg(strstr(err.msg, usage[i]) != NULL, "%s", err.msg);
    }
    mr_error_clear(&err);
    ck_assert_int_eq(mr_devices_parse("gpu:1,4", &env, &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "no GPU 4 (4 visible: 0..3)"), "%s", err.msg);
}
END_TEST

/* mpirun with several processes on a node: each takes its part by local rank. */
START_TEST(gpus_by_local_rank) {
    mr_gpu_list gpus = four_gpus();
    mr_device_set set;
    mr_error err = {0};
    for (int r = 0; r < 4; r++) {
        mr_device_env env = {.local_rank = r, .local_size = 4, .gpus = &gpus};
        ck_assert_int_eq(mr_devices_parse("auto", &env, &set, &err), MR_OK);
        ck_assert_int_eq(set.count, 1);
        ck_assert_int_eq(set.ordinals[0], r);
    }
    mr_device_env env = {.local_rank = 1, .local_size = 2, .gpus = &gpus};
    ck_assert_int_eq(mr_devices_parse("gpu", &env, &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 2);
    ck_assert_int_eq(set.ordinals[0], 2);
    ck_assert_int_eq(set.ordinals[1], 3);
    ck_assert_int_eq(mr_devices_parse("gpu:3,1", &env, &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 1);
    ck_assert_int_eq(set.ordinals[0], 1);
    /* too few GPUs for the node's processes */
    mr_device_env crowded = {.local_rank = 0, .local_size = 8, .gpus = &gpus};
    ck_assert_int_eq(mr_devices_parse("gpu", &crowded, &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "8 processes on this node but 4 GPUs"), "%s", err.msg);
}
END_TEST

static char *list_of(const mr_device_env *env) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mr_devices_list(f, env);
    fclose(f);
    return buf;
}

START_TEST(list_devices) {
    /* this machine: the CPU, and the GPUs or why there are none */
    char *buf = list_of(&(mr_device_env){.cores = 3});
    ck_assert_msg(strstr(buf, "cpu:") && strstr(buf, "3 cores usable"), "%s", buf);
    if (mr_gpu_count() == 0)
        ck_assert_msg(strstr(buf, "gpu: none (") && strstr(buf, mr_gpu_discover()->reason) &&
                          strstr(buf, "auto: up to 3 CPU replicas"),
                      "%s", buf);
    free(buf);
    /* four GPUs: a line each, the versions, what auto takes */
    mr_gpu_list gpus = four_gpus();
    buf = list_of(&(mr_device_env){.cores = 2, .gpus = &gpus});
    ck_assert_msg(strstr(buf, "gpu:2: Test GPU 2, 80.0 GiB, compute capability 9.0, PCI "
                              "0000:12:00.0") &&
                      strstr(buf, "cuda: driver 13.0, runtime 13.0") &&
                      strstr(buf, "auto: 4 GPU replicas"),
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
    tcase_add_test(tc, gpu_selection);
    tcase_add_test(tc, gpus_by_local_rank);
    tcase_add_test(tc, list_devices);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
