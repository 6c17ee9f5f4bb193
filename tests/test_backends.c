/* test_backends.c: the table of device kinds (backends/backends.h): what
 * every entry must provide, the order --devices auto relies on, finding a
 * kind by name, and what a build without a GPU backend says. */
#include <check.h>
#include <string.h>

#include "backends/backends.h"
#include "models/kernels.h"
#include "tests/testutil.h"

/* Every layer kind, the loss and the optimizer have kernels in k. */
static void check_kernels(const mr_kernels *k, const char *kind) {
    ck_assert_ptr_nonnull(k);
    ck_assert_str_eq(k->device, kind);
    for (int l = MR_LAYER_INPUT + 1; l < MR_LAYER_KIND_COUNT; l++)
        ck_assert_msg(k->layer[l] && k->layer[l]->forward && k->layer[l]->backward,
                      "%s: no kernels for [%s]", kind, mr_layer_kind_name(l));
    ck_assert(k->loss && k->loss->compute);
    ck_assert(k->optimizer && k->optimizer->adam && k->optimizer->sgd);
}

START_TEST(every_entry_is_complete) {
    int n = 0;
    const mr_backend_kind *const *kinds = mr_backend_kinds(&n);
    ck_assert_int_ge(n, 1);
    for (int i = 0; i < n; i++) {
        const mr_backend_kind *k = kinds[i];
        ck_assert_msg(k->name && k->name[0] && strlen(k->name) < 8, "entry %d: name", i);
        ck_assert_msg(k->plural && k->create, "%s: no plural or create", k->name);
        ck_assert_ptr_eq(mr_backend_kind_find(k->name), k);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(kinds[j]->name, k->name);
    }
}
END_TEST

/* --devices auto takes the first kind whose devices are present: the CPU,
 * always present, must come last, and a GPU kind before it. */
START_TEST(cpu_is_last) {
    int n = 0;
    const mr_backend_kind *const *kinds = mr_backend_kinds(&n);
    ck_assert_ptr_eq(kinds[n - 1], mr_backend_kind_cpu());
    ck_assert_str_eq(mr_backend_kind_cpu()->name, "cpu");
    ck_assert_int_eq(n, tu_cuda_built() ? 2 : 1);
    if (tu_cuda_built()) ck_assert_str_eq(kinds[0]->name, "gpu");
}
END_TEST

START_TEST(find_by_name) {
    ck_assert_ptr_null(mr_backend_kind_find("tpu"));
    ck_assert_ptr_null(mr_backend_kind_find(""));
    ck_assert_ptr_null(mr_backend_kind_find("CPU"));
    ck_assert_ptr_nonnull(mr_backend_kind_find("cpu"));
}
END_TEST

/* The CPU's entry: threads pinned to cores, host-memory communicators,
 * contexts whose memory is host memory, cache-sized passes, its kernels. */
START_TEST(cpu_entry) {
    const mr_backend_kind *cpu = mr_backend_kind_cpu();
    ck_assert_int_eq(cpu->pin_threads, 1);
    ck_assert_ptr_null(cpu->comm_create);
    ck_assert_ptr_null(cpu->discover);
    ck_assert_ptr_null(mr_backend_kind_devices(cpu));
    mr_backend *be = NULL;
    mr_error err = {0};
    ck_assert_int_eq(mr_backend_create(cpu, 3, &be, &err), MR_OK);
    ck_assert_str_eq(be->ops->name, "cpu");
    ck_assert_int_eq(be->ordinal, 3);
    ck_assert_int_eq(be->host_memory, 1);
    ck_assert_int_eq(be->ops->cache_passes, 1);
    ck_assert_ptr_eq(be->ops, cpu->ops);
    char name[32];
    mr_backend_format(be, name, sizeof name);
    ck_assert_str_eq(name, "cpu:3");
    check_kernels(mr_kernels_for(be), "cpu");
    mr_backend_destroy(be);
}
END_TEST

/* A GPU kind: devices discovered, its own communicator, its kernels; a
 * build without one has no entry and says why there are no GPUs. */
START_TEST(gpu_entry) {
    const mr_backend_kind *gpu = mr_backend_kind_find("gpu");
    const mr_gpu_list *gpus = mr_backend_kind_devices(gpu);
    ck_assert_ptr_nonnull(gpus);
    if (gpu == NULL) {
        ck_assert_int_eq(gpus->count, 0);
        ck_assert_msg(strstr(gpus->reason, "this build has no GPU backend"), "%s", gpus->reason);
        return;
    }
    ck_assert_ptr_nonnull(gpu->discover);
    ck_assert_ptr_nonnull(gpu->comm_create);
    ck_assert_int_eq(gpu->pin_threads, 0);
    ck_assert_str_eq(gpu->plural, "GPUs");
    ck_assert_ptr_eq(gpus, gpu->discover());
    ck_assert_str_eq(gpu->ops->name, "gpu");
    ck_assert_int_eq(gpu->ops->cache_passes, 0);
    check_kernels(gpu->ops->kernels, "gpu");
    /* no context without a GPU: an error with the reason, not a crash */
    if (gpus->count == 0) {
        mr_backend *be = NULL;
        mr_error err = {0};
        ck_assert_int_eq(mr_backend_create(gpu, 0, &be, &err), MR_ERR_UNSUPPORTED);
        ck_assert_ptr_null(be);
        ck_assert_msg(strncmp(err.msg, "gpu:0: ", 7) == 0, "%s", err.msg);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("backends");
    TCase *tc = tcase_create("backends");
    tcase_add_test(tc, every_entry_is_complete);
    tcase_add_test(tc, cpu_is_last);
    tcase_add_test(tc, find_by_name);
    tcase_add_test(tc, cpu_entry);
    tcase_add_test(tc, gpu_entry);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
