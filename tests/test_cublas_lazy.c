/* test_cublas_lazy.c: backends/cuda/cublas_lazy.c (CUDA builds only; needs no
 * GPU: loading a library and asking it for a status string does not touch
 * the device). cuBLAS is not in the process until the first load, the load
 * finds every entry point the backend calls, and a second load (from
 * several threads at once) is the same one. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"

/* 1 if a file whose name contains `lib` is mapped into this process. */
static int mapped(const char *lib) {
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, lib) != NULL;
    fclose(f);
    return found;
}

static void *load_in_thread(void *arg) {
    mr_error err = {0};
    *(mr_status *)arg = mr_cublas_load(&err);
    return NULL;
}

START_TEST(loaded_on_demand) {
    /* linked, it would be mapped from the start (and cost ~210 MB) */
    ck_assert_msg(!mapped("libcublas"), "cuBLAS is linked into the process");
    pthread_t t[4];
    mr_status st[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, load_in_thread, &st[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(st[i], MR_OK);
    }
    /* the toolkit's copy (MR_CUDA_LIBDIR), which pulls in cuBLASLt; on the
     * emulated GPUs (-Dgpu_emulation=true) MR_CUDA_LIBDIR is the emulator's
     * folder, whose libcublas.so.13 needs no cuBLASLt */
    char *dir = realpath(MR_CUDA_LIBDIR, NULL), lib[4200];
    ck_assert_msg(dir != NULL, "%s", MR_CUDA_LIBDIR);
    snprintf(lib, sizeof lib, "%s/libcublas.so", dir); /* /proc/self/maps names real paths */
    free(dir);
    ck_assert_msg(mapped(lib), "not loaded from %s", MR_CUDA_LIBDIR);
    if (strstr(MR_CUDA_LIBDIR, "gpu_emu") == NULL) ck_assert(mapped("libcublasLt"));
    ck_assert(mr_cublas.create && mr_cublas.destroy && mr_cublas.set_stream &&
              mr_cublas.set_math_mode && mr_cublas.sscal && mr_cublas.sgemm &&
              mr_cublas.status_string);
    /* a real call into the library, no device needed */
    const char *ok = mr_cublas.status_string(CUBLAS_STATUS_SUCCESS);
    const char *bad = mr_cublas.status_string(CUBLAS_STATUS_INVALID_VALUE);
    ck_assert_msg(ok && strcasestr(ok, "success"), "%s", ok ? ok : "NULL");
    ck_assert_msg(bad && bad[0] && strcmp(ok, bad) != 0, "%s", bad ? bad : "NULL");
    mr_error err = {0};
    ck_assert_int_eq(mr_cublas_load(&err), MR_OK);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cublas_lazy");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, loaded_on_demand);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
