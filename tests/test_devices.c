/* test_devices.c: device spec parsing and listing, on this machine's devices
 * and on made-up GPU lists (the GPU forms: selection, the node's processes
 * sharing the GPUs by local rank or each with its own, the errors). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "strategies/devices.h"
#include "tests/testutil.h"

static mr_status parse(const char *spec, mr_device_set *set, mr_error *err) {
    mr_error_clear(err);
    return mr_devices_parse(spec, NULL, NULL, set, err);
}

START_TEST(valid_specs) {
    mr_device_set set;
    mr_error err = {0};
    ck_assert_int_eq(parse("cpu", &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 1);
    ck_assert_str_eq(set.kind, "cpu");
    ck_assert_int_eq(parse("cpu:3", &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 3);
    ck_assert_int_eq(set.ordinals[2], 2);
    ck_assert_int_eq(parse("auto", &set, &err), MR_OK);
    /* no GPU here: one CPU replica per usable core */
    ck_assert_int_eq(set.count, mr_gpu_count() > 0 ? mr_gpu_count() : mr_cpu_cores());
    ck_assert_int_eq(set.cores, mr_cpu_cores());
    /* a process's share of the node (under mpirun): auto takes that many */
    mr_device_env three = {.cores = 3};
    ck_assert_int_eq(mr_devices_parse("auto", &three, NULL, &set, &err), MR_OK);
    ck_assert_int_eq(set.count, mr_gpu_count() > 0 ? mr_gpu_count() : 3);
    ck_assert_int_eq(set.cores, 3);
    mr_device_env one = {.cores = 1};
    ck_assert_int_eq(mr_devices_parse("cpu:2", &one, NULL, &set, &err),
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
        /* named as the caller names the argument (NULL: devices 'SPEC'), never by a flag */
        char start[64];
        snprintf(start, sizeof start, "devices '%s': ", bad[i]);
        ck_assert_msg(strncmp(err.msg, start, strlen(start)) == 0, "%s", err.msg);
        ck_assert_msg(strstr(err.msg, "--") == NULL, "%s", err.msg);
        mr_error_clear(&err);
        ck_assert_int_eq(mr_devices_parse(bad[i], NULL, "devices='%s'", &set, &err), MR_ERR_USAGE);
        snprintf(start, sizeof start, "devices='%s': ", bad[i]);
        ck_assert_msg(strncmp(err.msg, start, strlen(start)) == 0, "%s", err.msg);
    }
}
END_TEST

/* TensorFlow's /CPU:0 habit: the answer says that cpu:N counts replica threads and gpu:N names
 * a GPU, not only the range. */
START_TEST(cpu_index_habit) {
    const char *habit[] = {"cpu:0", "/CPU:0", "cpu:100000"};
    for (size_t i = 0; i < sizeof habit / sizeof habit[0]; i++) {
        mr_device_set set;
        mr_error err = {0};
        ck_assert_int_eq(parse(habit[i], &set, &err), MR_ERR_USAGE);
        ck_assert_msg(strstr(err.msg, "count of replica threads") != NULL, "%s", err.msg);
        ck_assert_msg(strstr(err.msg, "gpu:N") != NULL, "%s", err.msg);
    }
}
END_TEST

/* On this machine (no GPU in CI): the GPU forms fail with the reason. */
START_TEST(gpu_fails_clearly) {
    if (mr_gpu_count() > 0) return; /* a GPU machine: the made-up lists below cover it */
    mr_device_set set;
    mr_error err = {0};
    ck_assert_int_eq(parse("gpu", &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "devices 'gpu': no GPU available (") &&
                      strstr(err.msg, tu_gpus()->reason) &&
                      strstr(err.msg, "; use devices 'cpu' or cpu:N"),
                  "%s", err.msg);
    /* the caller's words name the spec and the one suggested instead */
    mr_error_clear(&err);
    ck_assert_int_eq(mr_devices_parse("gpu", NULL, "--devices %s", &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strncmp(err.msg, "--devices gpu: no GPU available (", 33) == 0 &&
                      strstr(err.msg, "; use --devices cpu or cpu:N"),
                  "%s", err.msg);
    ck_assert_int_eq(parse("gpu:0,2", &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "no GPU"), "%s", err.msg);
    /* auto: the CPU, never an error */
    ck_assert_int_eq(parse("auto", &set, &err), MR_OK);
    ck_assert_str_eq(set.kind, "cpu");
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
    ck_assert_int_eq(mr_devices_parse("auto", &env, NULL, &set, &err), MR_OK);
    ck_assert_str_eq(set.kind, "gpu");
    ck_assert_int_eq(set.count, 4);
    ck_assert_int_eq(mr_devices_parse("gpu", &env, NULL, &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 4);
    ck_assert_int_eq(mr_devices_parse("gpu:0,2", &env, NULL, &set, &err), MR_OK);
    mr_devices_format(&set, buf, sizeof buf);
    ck_assert_str_eq(buf, "gpu:0, gpu:2");
    /* cpu stays the CPU where there are GPUs */
    ck_assert_int_eq(mr_devices_parse("cpu:2", &env, NULL, &set, &err), MR_OK);
    ck_assert_str_eq(set.kind, "cpu");
    /* bad lists */
    const char *usage[] = {"gpu:", "gpu:a", "gpu:0,", "gpu:1,1", "gpu:-1", "gpu:0;1"};
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        mr_error_clear(&err);
        ck_assert_msg(mr_devices_parse(usage[i], &env, NULL, &set, &err) == MR_ERR_USAGE, "%s: %s",
                      usage[i], err.msg);
        ck_assert_msg(strstr(err.msg, usage[i]) != NULL, "%s", err.msg);
    }
    mr_error_clear(&err);
    ck_assert_int_eq(mr_devices_parse("gpu:1,4", &env, NULL, &set, &err), MR_ERR_UNSUPPORTED);
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
        ck_assert_int_eq(mr_devices_parse("auto", &env, NULL, &set, &err), MR_OK);
        ck_assert_int_eq(set.count, 1);
        ck_assert_int_eq(set.ordinals[0], r);
    }
    mr_device_env env = {.local_rank = 1, .local_size = 2, .gpus = &gpus};
    ck_assert_int_eq(mr_devices_parse("gpu", &env, NULL, &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 2);
    ck_assert_int_eq(set.ordinals[0], 2);
    ck_assert_int_eq(set.ordinals[1], 3);
    ck_assert_int_eq(mr_devices_parse("gpu:3,1", &env, NULL, &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 1);
    ck_assert_int_eq(set.ordinals[0], 1);
    /* too few GPUs for the node's processes */
    mr_device_env crowded = {.local_rank = 0, .local_size = 8, .gpus = &gpus};
    ck_assert_int_eq(mr_devices_parse("gpu", &crowded, NULL, &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "8 processes on this node but 4 GPUs"), "%s", err.msg);
}
END_TEST

/* A made-up list of GPUs with these bus ids (NULL-terminated). */
static mr_gpu_list gpus_at(const char *const *bus_ids) {
    mr_gpu_list l = {.driver_version = 13000, .runtime_version = 13000};
    for (; bus_ids[l.count] != NULL; l.count++) {
        l.gpu[l.count].ordinal = l.count;
        snprintf(l.gpu[l.count].name, sizeof l.gpu[l.count].name, "Test GPU %d", l.count);
        snprintf(l.gpu[l.count].pci_bus_id, sizeof l.gpu[l.count].pci_bus_id, "%s",
                 bus_ids[l.count]);
    }
    return l;
}

#define BUS_A "0000:3b:00.0"
#define BUS_B "0000:5e:00.0"
#define BUS_C "0000:86:00.0"
#define BUS_D "0000:af:00.0"

/* How the processes of a node share its GPUs, from what each sees. */
static mr_status sharing(const mr_gpu_list *lists, int n, int *own, mr_error *err) {
    const mr_gpu_list *p[8];
    for (int k = 0; k < n; k++)
        p[k] = &lists[k];
    mr_error_clear(err);
    *own = -1;
    return mr_devices_gpu_sharing(p, n, own, err);
}

/* Every process sees all the node's GPUs, in whatever order: they split them. */
START_TEST(gpu_sharing_same_set) {
    mr_gpu_list l[3] = {gpus_at((const char *[]){BUS_A, BUS_B, BUS_C, NULL}),
                        gpus_at((const char *[]){BUS_C, BUS_A, BUS_B, NULL}),
                        gpus_at((const char *[]){BUS_B, BUS_C, BUS_A, NULL})};
    mr_error err;
    int own;
    ck_assert_int_eq(sharing(l, 3, &own, &err), MR_OK);
    ck_assert_int_eq(own, 0);
    /* one process alone, none at all, and all seeing no GPU: nothing to share out */
    ck_assert_int_eq(sharing(l, 1, &own, &err), MR_OK);
    ck_assert_int_eq(own, 0);
    ck_assert_int_eq(sharing(l, 0, &own, &err), MR_OK);
    ck_assert_int_eq(own, 0);
    mr_gpu_list none[2] = {gpus_at((const char *[]){NULL}), gpus_at((const char *[]){NULL})};
    ck_assert_int_eq(sharing(none, 2, &own, &err), MR_OK);
    ck_assert_int_eq(own, 0);
    /* the same single GPU for two processes: "same set", which parse refuses (too few) */
    mr_gpu_list one[2] = {gpus_at((const char *[]){BUS_A, NULL}),
                          gpus_at((const char *[]){BUS_A, NULL})};
    ck_assert_int_eq(sharing(one, 2, &own, &err), MR_OK);
    ck_assert_int_eq(own, 0);
    mr_device_env env = {.local_rank = 1, .local_size = 2, .gpus = &one[1]};
    mr_device_set set;
    ck_assert_int_eq(mr_devices_parse("gpu", &env, NULL, &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "devices 'gpu': 2 processes on this node but 1 GPU for them"),
                  "%s", err.msg);
}
END_TEST

/* SLURM --gpus-per-task, or CUDA_VISIBLE_DEVICES per local rank: each its own. */
START_TEST(gpu_sharing_own) {
    mr_gpu_list l[4] = {
        gpus_at((const char *[]){BUS_A, NULL}), gpus_at((const char *[]){BUS_B, NULL}),
        gpus_at((const char *[]){BUS_D, BUS_C, NULL}), gpus_at((const char *[]){BUS_C, NULL})};
    mr_error err;
    int own;
    ck_assert_int_eq(sharing(l, 3, &own, &err), MR_OK);
    ck_assert_int_eq(own, 1);
    ck_assert_int_eq(sharing(l, 2, &own, &err), MR_OK);
    ck_assert_int_eq(own, 1);
    /* process 3 sees GPU C, which process 2 also sees among others */
    ck_assert_int_eq(sharing(l, 4, &own, &err), MR_ERR_UNSUPPORTED);
    ck_assert_int_eq(own, 0);
    ck_assert_str_eq(err.msg, "processes 2 and 3 of this node both see GPU " BUS_C
                              " but not the same GPUs: give every process all the node's GPUs "
                              "or each its own (CUDA_VISIBLE_DEVICES)");
}
END_TEST

/* Neither the same GPUs nor each its own. */
START_TEST(gpu_sharing_conflicts) {
    mr_error err;
    int own;
    /* a partial overlap: the first pair that shares a GPU, and that GPU */
    mr_gpu_list part[3] = {gpus_at((const char *[]){BUS_A, BUS_B, NULL}),
                           gpus_at((const char *[]){BUS_C, NULL}),
                           gpus_at((const char *[]){BUS_D, BUS_B, NULL})};
    ck_assert_int_eq(sharing(part, 3, &own, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "processes 0 and 2 of this node both see GPU " BUS_B
                                  " but not the same GPUs"),
                  "%s", err.msg);
    /* a subset is an overlap too */
    mr_gpu_list sub[2] = {gpus_at((const char *[]){BUS_A, BUS_B, NULL}),
                          gpus_at((const char *[]){BUS_B, NULL})};
    ck_assert_int_eq(sharing(sub, 2, &own, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "processes 0 and 1 of this node both see GPU " BUS_B), "%s",
                  err.msg);
    /* some see none, others some */
    mr_gpu_list mixed[3] = {gpus_at((const char *[]){BUS_A, NULL}), gpus_at((const char *[]){NULL}),
                            gpus_at((const char *[]){BUS_B, BUS_C, NULL})};
    ck_assert_int_eq(sharing(mixed, 3, &own, &err), MR_ERR_UNSUPPORTED);
    ck_assert_int_eq(own, 0);
    ck_assert_msg(strstr(err.msg, "process 1 of this node sees no GPU while process 0 sees 1: "
                                  "give every process"),
                  "%s", err.msg);
    ck_assert_int_eq(sharing(mixed + 1, 2, &own, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "process 0 of this node sees no GPU while process 1 sees 2"),
                  "%s", err.msg);
}
END_TEST

/* parse with gpus_own: each process takes every GPU it sees; a conflict
 * fails the GPU forms (auto too, where this process sees GPUs), not the CPU's. */
START_TEST(gpus_own_parse) {
    mr_gpu_list mine = gpus_at((const char *[]){BUS_B, NULL});
    mr_device_set set;
    mr_error err = {0};
    for (int r = 0; r < 2; r++) {
        mr_device_env env = {.local_rank = r, .local_size = 2, .gpus = &mine, .gpus_own = 1};
        const char *specs[] = {"gpu", "auto", "gpu:0"};
        for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
            mr_error_clear(&err);
            ck_assert_msg(mr_devices_parse(specs[i], &env, NULL, &set, &err) == MR_OK, "%s: %s",
                          specs[i], err.msg);
            ck_assert_str_eq(set.kind, "gpu");
            ck_assert_int_eq(set.count, 1);
            ck_assert_int_eq(set.ordinals[0], 0);
        }
        mr_error_clear(&err);
        ck_assert_int_eq(mr_devices_parse("gpu:1", &env, NULL, &set, &err), MR_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err.msg, "no GPU 1 (1 visible: 0..0)"), "%s", err.msg);
        /* without gpus_own, the same is too few GPUs for the node's processes */
        env.gpus_own = 0;
        mr_error_clear(&err);
        ck_assert_int_eq(mr_devices_parse("gpu", &env, NULL, &set, &err), MR_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err.msg, "2 processes on this node but 1 GPU for them"), "%s",
                      err.msg);
    }
    /* two GPUs of its own: both, in order, whatever its local rank */
    mr_gpu_list two = gpus_at((const char *[]){BUS_C, BUS_D, NULL});
    mr_device_env env = {.local_rank = 1, .local_size = 2, .gpus = &two, .gpus_own = 1};
    ck_assert_int_eq(mr_devices_parse("gpu", &env, NULL, &set, &err), MR_OK);
    ck_assert_int_eq(set.count, 2);
    ck_assert_int_eq(set.ordinals[0], 0);
    ck_assert_int_eq(set.ordinals[1], 1);
    /* a conflict on the node */
    const char *why = "processes 0 and 1 of this node both see GPU " BUS_C " but not the same";
    mr_device_env bad = {.local_rank = 1, .local_size = 2, .gpus = &two, .gpus_conflict = why};
    const char *gpu_specs[] = {"gpu", "gpu:0", "auto"};
    for (size_t i = 0; i < sizeof gpu_specs / sizeof gpu_specs[0]; i++) {
        mr_error_clear(&err);
        ck_assert_int_eq(mr_devices_parse(gpu_specs[i], &bad, NULL, &set, &err),
                         MR_ERR_UNSUPPORTED);
        char want[256];
        snprintf(want, sizeof want, "devices '%s': %s", gpu_specs[i], why);
        ck_assert_str_eq(err.msg, want);
    }
    /* ... which a process that sees no GPU reports too for the GPU forms, not for auto */
    mr_gpu_list none = gpus_at((const char *[]){NULL});
    bad.gpus = &none;
    mr_error_clear(&err);
    ck_assert_int_eq(mr_devices_parse("gpu", &bad, NULL, &set, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, why), "%s", err.msg);
    ck_assert_int_eq(mr_devices_parse("auto", &bad, NULL, &set, &err), MR_OK);
    ck_assert_str_eq(set.kind, "cpu");
    /* the CPU forms ignore it */
    bad.gpus = &two;
    ck_assert_int_eq(mr_devices_parse("cpu:2", &bad, NULL, &set, &err), MR_OK);
    ck_assert_str_eq(set.kind, "cpu");
    ck_assert_int_eq(set.count, 2);
}
END_TEST

/* A one-process job: the plain environment, no collective. */
START_TEST(job_env_alone) {
    mr_job job = {.rank = 0, .size = 1, .local_size = 1, .n_nodes = 1, .cores = 3};
    mr_device_env env;
    char conflict[64] = "stale";
    mr_error err = {0};
    ck_assert_int_eq(mr_devices_job_env(&job, &env, conflict, sizeof conflict, &err), MR_OK);
    ck_assert_int_eq(env.cores, 3);
    ck_assert_int_eq(env.local_size, 1);
    ck_assert_int_eq(env.gpus_own, 0);
    ck_assert_ptr_null(env.gpus_conflict);
    ck_assert_ptr_null(env.gpus);
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
        ck_assert_msg(strstr(buf, "gpu: none (") && strstr(buf, tu_gpus()->reason) &&
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
    tcase_add_test(tc, cpu_index_habit);
    tcase_add_test(tc, gpu_fails_clearly);
    tcase_add_test(tc, gpu_selection);
    tcase_add_test(tc, gpus_by_local_rank);
    tcase_add_test(tc, gpu_sharing_same_set);
    tcase_add_test(tc, gpu_sharing_own);
    tcase_add_test(tc, gpu_sharing_conflicts);
    tcase_add_test(tc, gpus_own_parse);
    tcase_add_test(tc, job_env_alone);
    tcase_add_test(tc, list_devices);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
