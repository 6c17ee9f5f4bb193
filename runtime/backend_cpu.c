/* backend_cpu.c: the CPU backend over OpenBLAS (see backend.h). */
#include "backend.h"

#include <cblas.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

static void *cpu_alloc(mr_backend *be, size_t n) {
    (void)be;
    /* 64-byte alignment: a cache line, and whole AVX-512 vectors */
    void *p = NULL;
    size_t rounded = (n + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) return NULL;
    memset(p, 0, rounded ? rounded : 64);
    return p;
}

static void cpu_free(mr_backend *be, void *p) {
    (void)be;
    free(p);
}

static void cpu_copy(mr_backend *be, void *dst, const void *src, size_t n) {
    (void)be;
    if (n) memcpy(dst, src, n);
}

static void cpu_gemm(mr_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc) {
    (void)be;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_set_threads(mr_backend *be, int threads) {
    (void)be;
    openblas_set_num_threads(threads < 1 ? 1 : threads);
}

static const mr_backend_ops cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .gemm = cpu_gemm,
    .set_threads = cpu_set_threads,
};

static mr_backend cpu_backend = {.ops = &cpu_ops, .kind = MR_DEVICE_CPU, .ordinal = 0};

mr_backend *mr_backend_cpu(void) {
    return &cpu_backend;
}

int mr_cpu_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    return 1;
}

void mr_backend_set_threads(mr_backend *be, int threads) {
    if (be->ops->set_threads != NULL) be->ops->set_threads(be, threads);
}
