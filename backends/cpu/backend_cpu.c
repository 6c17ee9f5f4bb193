/* backend_cpu.c: the CPU backend over OpenBLAS (runtime/backend.h) and its
 * entry in the table of device kinds (backends/backends.h). Its device
 * memory is host memory (64-byte aligned blocks), so host code uses it in
 * place and the copies are memcpy. A context holds no state of its own
 * besides the scratch that runtime/backend.c keeps in every context.
 * Relies on: OpenBLAS (cblas_sgemm; openblas_set_num_threads, global to the
 * process: one thread per replica unless OPENBLAS_NUM_THREADS says more). */
#include "backends/backends.h"
#include "backends/cpu/cpu_impl.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

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

static mr_status cpu_copy(mr_backend *be, void *dst, const void *src, size_t n, mr_error *err) {
    (void)be, (void)err;
    if (n) memcpy(dst, src, n);
    return MR_OK;
}

static mr_status cpu_zero(mr_backend *be, void *dst, size_t n, mr_error *err) {
    (void)be, (void)err;
    if (n) memset(dst, 0, n);
    return MR_OK;
}

static mr_status cpu_scale(mr_backend *be, mr_dfloat *xd, size_t n, float alpha, mr_error *err) {
    (void)be, (void)err;
    float *x = mr_dfloat_ptr(xd);
    for (size_t i = 0; i < n; i++)
        x[i] *= alpha;
    return MR_OK;
}

void mr_cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static mr_status cpu_gemm(mr_backend *be, int trans_a, int trans_b, int m, int n, int k,
                          float alpha, const mr_dfloat *a, int lda, const mr_dfloat *b, int ldb,
                          float beta, mr_dfloat *c, int ldc, mr_error *err) {
    (void)be, (void)err;
    mr_cpu_gemm(trans_a, trans_b, m, n, k, alpha, mr_dfloat_cptr(a), lda, mr_dfloat_cptr(b), ldb,
                beta, mr_dfloat_ptr(c), ldc);
    return MR_OK;
}

/* OpenBLAS's threads for a replica that owns `cores` cores: 1, unless the
 * user's OPENBLAS_NUM_THREADS (a positive integer; anything else is
 * ignored, as OpenBLAS ignores it) asks for more, and never more than the
 * cores the replica owns.
 *
 * Why 1 by default: OpenBLAS's threaded SGEMM driver (its level3_thread)
 * cuts K into blocks differently from its one-thread driver: for
 * GEMM_Q < K < 2 GEMM_Q it halves K, where the one-thread driver rounds the
 * half up to the kernel's unroll (K = 784 on SkylakeX, GEMM_Q 448: blocks
 * 392 + 392 against 400 + 384; at M 32, N 128 every K from 449 to 1200 sums
 * differently but those whose half, rounded up, is a multiple of 16), and C
 * is rounded to float between K blocks. So a Dense layer with 784 inputs
 * sums differently on 2 threads than on 1, and a thread count that followed
 * the process's affinity mask would let `taskset -c 0` change the weights.
 * With one thread per replica the sums are the same whatever the cores; a
 * user who sets OPENBLAS_NUM_THREADS trades that for BLAS threads
 * (docs/usage.md, "Environment variables"). */
static int blas_threads(int cores) {
    int want = 1;
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (env != NULL && *env != '\0') {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v > 0 && v <= 1024) want = (int)v;
    }
    if (cores < 1) cores = 1;
    return want < cores ? want : cores;
}

/* `threads`: the cores each replica owns (all the process's for one
 * replica, 1 with a replica per core). */
static void cpu_set_threads(mr_backend *be, int threads) {
    (void)be;
    openblas_set_num_threads(blas_threads(threads));
}

/* A replica's thread computes with flush-to-zero and denormals-are-zero,
 * as TensorFlow's CPU threads do: a float below 2^-126 reads and writes as
 * 0. Without it, arithmetic on denormals runs an order of magnitude
 * slower, and they do come: Adam's m of a weight whose gradient stays 0 (a
 * pixel that is 0 in every image) decays by beta1 each update and reaches
 * them after some 700 updates (docs/performance.md, "Denormal numbers").
 * No weight moves by so little that its bits would change. MXCSR bits 15
 * (FTZ) and 6 (DAZ); other CPUs keep their default. */
static mr_status cpu_enter(mr_backend *be, mr_error *err) {
    (void)be, (void)err;
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(_mm_getcsr() | 0x8040u);
#endif
    return MR_OK;
}

static void cpu_destroy(mr_backend *be) {
    free(be);
}

static const mr_backend_ops cpu_ops = {
    .name = "cpu",
    .kernels = &mr_cpu_kernels,
    .cache_passes = 1,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .alloc_host = cpu_alloc,
    .free_host = cpu_free,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .zero = cpu_zero,
    .scale = cpu_scale,
    .gemm = cpu_gemm,
    .set_threads = cpu_set_threads,
    .enter = cpu_enter,
    .destroy = cpu_destroy,
};

static mr_status cpu_create(int ordinal, mr_backend **out, mr_error *err) {
    *out = NULL;
    mr_backend *be = calloc(1, sizeof *be);
    if (be == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory for a CPU context");
    be->ops = &cpu_ops;
    be->ordinal = ordinal;
    be->host_memory = 1;
    *out = be;
    return MR_OK;
}

const mr_backend_kind mr_cpu_kind = {
    .name = "cpu",
    .plural = "CPUs",
    .ops = &cpu_ops,
    .create = cpu_create,
    .discover = NULL, /* its devices are the cores: --devices cpu:N */
    .pin_threads = 1,
    .comm_create = NULL, /* local threads, hierarchical over MPI */
};
