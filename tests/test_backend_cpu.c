/* test_backend_cpu.c: unit tests of the CPU backend (backends/cpu/backend_cpu.c)
 * through the wrappers of runtime/backend.h (runtime/backend.c): gemm in
 * every transpose combination against a naive double-precision loop, with
 * row strides wider than the rows (the padding holds NaN, so reading it
 * shows in the result, and C's padding must come back untouched); contexts
 * (one per replica, a CUDA one refused in a build without CUDA), memory,
 * copies, zero, scale, host views and staged reads and writes, scratch;
 * threads: OpenBLAS's count (OPENBLAS_NUM_THREADS, the cores granted) and
 * GEMM bits that do not follow the cores. */
#include <cblas.h>
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/backend.h"
#include "backends/gpu_list.h"
#include "runtime/rng.h"
#include "runtime/dmem_impl.h"
#include "backends/backends.h"
#include "tests/testutil.h"

/* ---- gemm ----------------------------------------------------------------- */

/* A (rows x cols) matrix stored with row stride ld >= cols; the padding
 * columns hold `pad`, the rest uniform [-1, 1) from the seed. */
static float *make_matrix(int rows, int cols, int ld, float pad, uint32_t seed) {
    float *m = malloc(sizeof(float) * (size_t)rows * (size_t)ld);
    float *vals = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
    mr_rng_uniform(77, MR_RNG_STREAM_INIT, seed, 0, -1.0f, 1.0f, vals, (int64_t)rows * cols);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < ld; c++)
            m[(size_t)r * ld + c] = c < cols ? vals[(size_t)r * cols + c] : pad;
    free(vals);
    return m;
}

/* C = alpha * op(A) op(B) + beta * C in double, row-major with strides. */
static void naive_gemm(int ta, int tb, int m, int n, int k, double alpha, const float *a, int lda,
                       const float *b, int ldb, double beta, const float *c_in, int ldc,
                       double *out /* (m, n) dense */) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int p = 0; p < k; p++) {
                double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                s += av * bv;
            }
            double prev = beta == 0.0 ? 0.0 : beta * c_in[(size_t)i * ldc + j];
            out[(size_t)i * n + j] = alpha * s + prev;
        }
}

/* Runs one gemm case and compares with the naive loop: normalised error
 * max|C - ref| / max|ref| < 1e-5. The float sum of k products carries a
 * relative error of about k * 6e-8 in the worst case (1e-5 at k = 160; the
 * errors being random, in practice sqrt(k) * 6e-8 ~ 1e-6), so 1e-5 passes a
 * correct gemm and fails a wrong layout, stride or transpose by far (those
 * give errors of order 1). */
static void check_gemm(int ta, int tb, int m, int n, int k, float alpha, float beta, int extra,
                       int nan_c) {
    mr_backend *be = tu_cpu_backend();
    const float NaN = nanf("");
    int a_rows = ta ? k : m, a_cols = ta ? m : k;
    int b_rows = tb ? n : k, b_cols = tb ? k : n;
    int lda = a_cols + extra, ldb = b_cols + extra + 1, ldc = n + extra + 2;
    float *a = make_matrix(a_rows, a_cols, lda, NaN, 1);
    float *b = make_matrix(b_rows, b_cols, ldb, NaN, 2);
    /* C's padding holds a sentinel that must survive */
    float *c = make_matrix(m, n, ldc, 12345.0f, 3);
    if (nan_c)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                c[(size_t)i * ldc + j] = NaN;
    double *ref = malloc(sizeof(double) * (size_t)m * n);
    naive_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ref);

    ck_assert_int_eq(mr_gemm(be, ta, tb, m, n, k, alpha, mr_dfloat_cof(a), lda, mr_dfloat_cof(b),
                             ldb, beta, mr_dfloat_of(c), ldc, NULL),
                     MR_OK);

    float *got = malloc(sizeof(float) * (size_t)m * n),
          *want = malloc(sizeof(float) * (size_t)m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            got[(size_t)i * n + j] = c[(size_t)i * ldc + j];
            want[(size_t)i * n + j] = (float)ref[(size_t)i * n + j];
            ck_assert_msg(isfinite(got[(size_t)i * n + j]),
                          "ta=%d tb=%d: C[%d][%d] not finite (padding or beta=0 C read?)", ta, tb,
                          i, j);
        }
    double e = tu_rel_diff(got, want, (size_t)m * n);
    ck_assert_msg(e < 1e-5, "gemm ta=%d tb=%d m=%d n=%d k=%d alpha=%g beta=%g: error %g", ta, tb, m,
                  n, k, alpha, beta, e);
    for (int i = 0; i < m; i++)
        for (int j = n; j < ldc; j++)
            ck_assert_msg(c[(size_t)i * ldc + j] == 12345.0f, "C padding [%d][%d] overwritten", i,
                          j);
    free(a), free(b), free(c), free(ref), free(got), free(want);
}

/* _i: trans_a = _i / 2, trans_b = _i % 2 */
START_TEST(test_gemm_transposes_small) {
    check_gemm(_i / 2, _i % 2, 7, 5, 9, 1.0f, 0.0f, 3, 0);
    check_gemm(_i / 2, _i % 2, 1, 13, 4, 1.0f, 0.0f, 1, 0);
    check_gemm(_i / 2, _i % 2, 6, 1, 11, 1.0f, 0.0f, 2, 0);
}
END_TEST

/* Big enough for OpenBLAS's blocked kernels and several threads. */
START_TEST(test_gemm_transposes_large) {
    check_gemm(_i / 2, _i % 2, 67, 45, 131, 1.0f, 0.0f, 5, 0);
}
END_TEST

START_TEST(test_gemm_alpha_beta) {
    int ta = _i / 2, tb = _i % 2;
    check_gemm(ta, tb, 9, 6, 8, 1.5f, 0.5f, 2, 0);   /* scale and accumulate */
    check_gemm(ta, tb, 9, 6, 8, -0.25f, 1.0f, 2, 0); /* add into C (gradient accumulation) */
    check_gemm(ta, tb, 9, 6, 8, 0.0f, 2.0f, 2, 0);   /* alpha 0: C = beta C */
    check_gemm(ta, tb, 33, 17, 21, 2.0f, -1.0f, 0, 0);
    /* beta 0: C is not read (BLAS contract), so garbage such as NaN in an
     * uninitialised output does not leak into the result */
    check_gemm(ta, tb, 9, 6, 8, 1.0f, 0.0f, 2, 1);
}
END_TEST

/* A hand-checked product, independent of the naive loop. */
/* mr_gemm on host arrays (CPU device memory is host memory) */
static void gemm(mr_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    ck_assert_int_eq(mr_gemm(be, ta, tb, m, n, k, alpha, mr_dfloat_cof(a), lda, mr_dfloat_cof(b),
                             ldb, beta, mr_dfloat_of(c), ldc, NULL),
                     MR_OK);
}

START_TEST(test_gemm_hand) {
    mr_backend *be = tu_cpu_backend();
    const float a[2 * 3] = {1, 2, 3, 4, 5, 6};    /* 2 x 3 */
    const float b[3 * 2] = {7, 8, 9, 10, 11, 12}; /* 3 x 2 */
    float c[2 * 2] = {1, 1, 1, 1};
    gemm(be, 0, 0, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
    ck_assert_float_eq(c[0], 58.0f);
    ck_assert_float_eq(c[1], 64.0f);
    ck_assert_float_eq(c[2], 139.0f);
    ck_assert_float_eq(c[3], 154.0f);
    /* A^T A (3 x 3) from the same storage: row 0 is (17, 22, 27) */
    float d[9];
    gemm(be, 1, 0, 3, 3, 2, 1.0f, a, 3, a, 3, 0.0f, d, 3);
    ck_assert_float_eq(d[0], 17.0f);
    ck_assert_float_eq(d[1], 22.0f);
    ck_assert_float_eq(d[2], 27.0f);
    ck_assert_float_eq(d[8], 45.0f);
    /* A A^T (2 x 2) = (14, 32; 32, 77), with beta = 1 on top of 1s */
    float e[4] = {1, 1, 1, 1};
    gemm(be, 0, 1, 2, 2, 3, 1.0f, a, 3, a, 3, 1.0f, e, 2);
    ck_assert_float_eq(e[0], 15.0f);
    ck_assert_float_eq(e[1], 33.0f);
    ck_assert_float_eq(e[2], 33.0f);
    ck_assert_float_eq(e[3], 78.0f);
}
END_TEST

/* ---- memory and copies ------------------------------------------------------ */

START_TEST(test_backend_identity) {
    mr_backend *be = NULL;
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 1, &be, NULL), MR_OK);
    ck_assert_ptr_nonnull(be);
    ck_assert_int_eq(be->ordinal, 1);
    ck_assert_int_eq(be->host_memory, 1);
    ck_assert_ptr_nonnull(be->ops);
    ck_assert_str_eq(be->ops->name, "cpu");
    ck_assert_ptr_nonnull(be->ops->alloc);
    ck_assert_ptr_nonnull(be->ops->free);
    ck_assert_ptr_nonnull(be->ops->alloc_host);
    ck_assert_ptr_nonnull(be->ops->free_host);
    ck_assert_ptr_nonnull(be->ops->to_device);
    ck_assert_ptr_nonnull(be->ops->to_host);
    ck_assert_ptr_nonnull(be->ops->zero);
    ck_assert_ptr_nonnull(be->ops->scale);
    ck_assert_ptr_nonnull(be->ops->gemm);
    ck_assert_ptr_nonnull(be->ops->destroy);
    char name[32];
    mr_backend_format(be, name, sizeof name);
    ck_assert_str_eq(name, "cpu:1");
    /* one context per replica: another create is another context */
    mr_backend *other = NULL;
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, &other, NULL), MR_OK);
    ck_assert_ptr_ne(be, other);
    mr_backend_destroy(other);
    mr_backend_destroy(be);
    mr_backend_destroy(NULL);
}
END_TEST

/* A GPU context on a machine without a GPU or driver is a clear error,
 * not a crash. (A build without a GPU backend has no "gpu" kind to ask:
 * test_backends, gpu_entry.) */
START_TEST(test_no_cuda) {
    const mr_gpu_list *gpus = tu_gpus();
    if (gpus->count > 0 || !tu_cuda_built()) return; /* a GPU machine: test_conformance */
    mr_backend *be = (mr_backend *)&be;
    mr_error err = {0};
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_find("gpu"), 0, &be, &err),
                     MR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(be);
    ck_assert_msg(strstr(err.msg, "gpu:0: no GPU available (") && strstr(err.msg, gpus->reason),
                  "%s", err.msg);
}
END_TEST

START_TEST(test_alloc_zeroed_aligned) {
    mr_backend *be = tu_cpu_backend();
    const size_t sizes[] = {1, 3, 63, 64, 65, 1000, 4096, 1 << 20};
    for (int host = 0; host < 2; host++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t n = sizes[s];
            /* dirty memory first, so a fresh block likely reuses it: an alloc
             * that does not zero shows */
            for (int round = 0; round < 2; round++) {
                unsigned char *p = host ? mr_backend_alloc_host(be, n) : mr_backend_alloc(be, n);
                ck_assert_ptr_nonnull(p);
                ck_assert_msg(((uintptr_t)p & 63u) == 0, "alloc(%zu) = %p not 64-byte aligned", n,
                              (void *)p);
                /* one assertion per block: Check's assertions are slow in loops */
                size_t bad = n;
                for (size_t i = 0; i < n && bad == n; i++)
                    if (p[i] != 0) bad = i;
                ck_assert_msg(bad == n, "alloc(%zu) byte %zu = %d", n, bad, bad < n ? p[bad] : 0);
                memset(p, 0xA5, n); /* the whole block is writable (ASan checks) */
                if (host)
                    mr_backend_free_host(be, p);
                else
                    mr_backend_free(be, p);
            }
        }
    /* n = 0 still gives a pointer that can be freed */
    void *z = mr_backend_alloc(be, 0);
    ck_assert_ptr_nonnull(z);
    ck_assert_uint_eq((uintptr_t)z & 63u, 0);
    mr_backend_free(be, z);
    mr_backend_free(be, NULL);
    mr_backend_free_host(be, NULL);
    mr_dfloat *f = mr_backend_alloc_floats(be, 17);
    ck_assert_ptr_nonnull(f);
    ck_assert_float_eq(mr_dfloat_ptr(f)[16], 0.0f);
    mr_backend_free(be, f);
}
END_TEST

START_TEST(test_copies) {
    mr_backend *be = tu_cpu_backend();
    enum { N = 1000 };
    float host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i * 0.5f - 3.0f;
    float *dev = mr_backend_alloc(be, sizeof host);
    ck_assert_int_eq(mr_backend_to_device(be, dev, host, sizeof host, NULL), MR_OK);
    ck_assert_mem_eq(dev, host, sizeof host);
    memset(back, 0, sizeof back);
    ck_assert_int_eq(mr_backend_to_host(be, back, dev, sizeof host, NULL), MR_OK);
    ck_assert_mem_eq(back, host, sizeof host);
    /* a partial copy touches only its bytes */
    memset(back, 0, sizeof back);
    mr_backend_to_host(be, back, dev + 10, 5 * sizeof(float), NULL);
    ck_assert_mem_eq(back, host + 10, 5 * sizeof(float));
    ck_assert_float_eq(back[5], 0.0f);
    /* n = 0 copies nothing */
    back[0] = 99.0f;
    mr_backend_to_host(be, back, dev, 0, NULL);
    mr_backend_to_device(be, dev, back, 0, NULL);
    ck_assert_float_eq(back[0], 99.0f);
    ck_assert_float_eq(dev[0], host[0]);
    mr_backend_free(be, dev);
}
END_TEST

/* zero and scale touch exactly their range; scale is x * alpha in float,
 * element by element (what the strategy's BN state averaging relied on) */
START_TEST(test_zero_scale) {
    mr_backend *be = tu_cpu_backend();
    enum { N = 301 };
    mr_dfloat *d = mr_backend_alloc_floats(be, N);
    float *x = mr_dfloat_ptr(d), want[N];
    mr_rng_uniform(5, 1, 0, 0, -3.0f, 3.0f, x, N);
    memcpy(want, x, sizeof want);
    const float alpha = 1.0f / 3.0f;
    ck_assert_int_eq(mr_backend_scale(be, mr_dfloat_at(d, 1), N - 2, alpha, NULL), MR_OK);
    for (int i = 1; i < N - 1; i++)
        want[i] *= alpha;
    ck_assert_mem_eq(x, want, sizeof want);
    ck_assert_int_eq(mr_backend_zero(be, mr_dfloat_at(d, 3), sizeof(float) * 5, NULL), MR_OK);
    for (int i = 3; i < 8; i++)
        want[i] = 0.0f;
    ck_assert_mem_eq(x, want, sizeof want);
    ck_assert_int_eq(mr_backend_zero(be, d, 0, NULL), MR_OK);
    ck_assert_int_eq(mr_backend_scale(be, d, 0, 2.0f, NULL), MR_OK);
    ck_assert_mem_eq(x, want, sizeof want);
    mr_backend_free(be, d);
}
END_TEST

/* A thread that entered a CPU context flushes denormals: before, a product
 * below 2^-126 is a denormal and a denormal input counts; after, both are
 * 0, as in TensorFlow's CPU threads (Adam's decaying slots, backend_cpu.c).
 * Each test runs in a process of its own (Check's fork), so the mode does
 * not leak into the others. */
START_TEST(test_enter_flushes_denormals) {
    volatile float tiny = 1e-30f, small = 1e-10f, denormal = 1e-40f;
    float before = tiny * small, in_before = denormal * 1.0f;
    ck_assert(before > 0.0f && before < 1.17549435e-38f);
    ck_assert(in_before > 0.0f);
    mr_backend *be = tu_cpu_backend();
    ck_assert_int_eq(mr_backend_enter(be, NULL), MR_OK);
    volatile float after = tiny * small, in_after = denormal * 1.0f;
    ck_assert_float_eq(after, 0.0f);
    ck_assert_float_eq(in_after, 0.0f);
    /* normal numbers are untouched */
    volatile float a = 1.5f, b = 1e-20f;
    ck_assert_float_eq(a * b, 1.5e-20f);
}
END_TEST

/* Host views: the CPU's device memory is host memory, so reads and writes
 * go in place; with host_memory cleared (a GPU's situation) they go through
 * the caller's staging buffer and copies, with the same result. */
START_TEST(test_host_views) {
    mr_backend *be = NULL;
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, &be, NULL), MR_OK);
    enum { N = 40 };
    mr_dfloat *d = mr_backend_alloc_floats(be, N);
    float staging[N], src[N];
    for (int i = 0; i < N; i++)
        src[i] = (float)i + 0.25f;
    for (int staged = 0; staged < 2; staged++) {
        be->host_memory = !staged;
        float *view = mr_backend_host_view(be, d);
        ck_assert(staged ? view == NULL : view == mr_dfloat_ptr(d));
        ck_assert(mr_backend_host_cview(be, d) == view);
        /* write: in place (no copy needed) or from a host buffer */
        float *into = view ? view : staging;
        mr_backend_zero(be, d, sizeof(float) * N, NULL);
        memcpy(into, src, sizeof src);
        ck_assert_int_eq(mr_backend_write(be, d, into, N, NULL), MR_OK);
        ck_assert_mem_eq(mr_dfloat_ptr(d), src, sizeof src);
        /* the queued write: the CPU has no queue, so it is the same copy */
        mr_backend_zero(be, d, sizeof(float) * N, NULL);
        memcpy(into, src, sizeof src);
        ck_assert_int_eq(mr_backend_write_queued(be, d, into, N, NULL), MR_OK);
        ck_assert_mem_eq(mr_dfloat_ptr(d), src, sizeof src);
        /* read: the view itself, or a copy in staging */
        memset(staging, 0, sizeof staging);
        const float *got = NULL;
        ck_assert_int_eq(mr_backend_read(be, d, N, staging, &got, NULL), MR_OK);
        ck_assert_ptr_eq(got, staged ? staging : mr_dfloat_ptr(d));
        ck_assert_mem_eq(got, src, sizeof src);
    }
    mr_backend_free(be, d);
    mr_backend_destroy(be);
}
END_TEST

/* The context's scratch grows to the largest reservation and stays. */
START_TEST(test_scratch) {
    mr_backend *be = NULL;
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, &be, NULL), MR_OK);
    ck_assert_ptr_null(mr_backend_scratch(be));
    ck_assert_int_eq(mr_backend_reserve_scratch(be, 100, NULL), MR_OK);
    mr_dfloat *s = mr_backend_scratch(be);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_ge(be->scratch_floats, 100);
    mr_dfloat_ptr(s)[99] = 1.0f; /* writable (ASan) */
    ck_assert_int_eq(mr_backend_reserve_scratch(be, 10, NULL), MR_OK);
    ck_assert_ptr_eq(mr_backend_scratch(be), s);
    ck_assert_int_eq(mr_backend_reserve_scratch(be, 5000, NULL), MR_OK);
    ck_assert_uint_ge(be->scratch_floats, 5000);
    mr_dfloat_ptr(mr_backend_scratch(be))[4999] = 1.0f;
    mr_backend_destroy(be); /* frees the scratch (ASan: no leak) */
}
END_TEST

/* ---- cores and threads ------------------------------------------------------ */

START_TEST(test_cpu_cores) {
    int n = mr_cpu_cores();
    ck_assert_int_ge(n, 1);
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    if (conf > 0) ck_assert_int_le(n, conf);
    ck_assert_int_eq(mr_cpu_cores(), n);
}
END_TEST

START_TEST(test_set_threads) {
    mr_backend *be = tu_cpu_backend();
    const int counts[] = {1, 0, -3, 2, mr_cpu_cores()};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        mr_backend_set_threads(be, counts[i]);
        /* gemm still right at each setting */
        check_gemm(0, 1, 67, 45, 131, 1.0f, 0.0f, 1, 0);
    }
    /* a backend without the optional slot: the wrapper skips it */
    mr_backend_ops ops = *be->ops;
    ops.set_threads = NULL;
    mr_backend other = {.ops = &ops, .ordinal = 0};
    mr_backend_set_threads(&other, 4);
}
END_TEST

/* Dense 784 -> 64 at batch 32, the shape of fashion_mlp-like first layers:
 * C (32 x 64) = A (32 x 784) B (784 x 64), whose K (784) OpenBLAS cuts into
 * blocks one way with one thread and another way with more. */
static void gemm_784(mr_backend *be, float *c) {
    float *a = make_matrix(32, 784, 784, 0.0f, 11), *b = make_matrix(784, 64, 64, 0.0f, 12);
    ck_assert_int_eq(mr_gemm(be, 0, 0, 32, 64, 784, 1.0f, mr_dfloat_cof(a), 784, mr_dfloat_cof(b),
                             64, 0.0f, mr_dfloat_of(c), 64, NULL),
                     MR_OK);
    free(a), free(b);
}

/* The same GEMM gives the same bits whatever cores a replica is granted
 * (1 here, every core of the process there): run under `taskset -c 0` or
 * not, a one-replica run trains bitwise alike. On a 1-core machine both
 * grants are 1 and the check is vacuous. */
START_TEST(test_threads_same_bits) {
    mr_backend *be = tu_cpu_backend();
    char *saved = getenv("OPENBLAS_NUM_THREADS") ? strdup(getenv("OPENBLAS_NUM_THREADS")) : NULL;
    unsetenv("OPENBLAS_NUM_THREADS");
    float *one = malloc(sizeof(float) * 32 * 64), *all = malloc(sizeof(float) * 32 * 64);
    mr_backend_set_threads(be, 1);
    gemm_784(be, one);
    mr_backend_set_threads(be, mr_cpu_cores() > 1 ? mr_cpu_cores() : 2);
    gemm_784(be, all);
    ck_assert_msg(memcmp(one, all, sizeof(float) * 32 * 64) == 0,
                  "GEMM bits follow the cores granted");
    free(one), free(all);
    if (saved) setenv("OPENBLAS_NUM_THREADS", saved, 1);
    free(saved);
}
END_TEST

/* OpenBLAS's threads: 1 whatever the cores, OPENBLAS_NUM_THREADS when the
 * user sets it (a positive integer), never more than the cores granted. */
START_TEST(test_threads_policy) {
    mr_backend *be = tu_cpu_backend();
    char *saved = getenv("OPENBLAS_NUM_THREADS") ? strdup(getenv("OPENBLAS_NUM_THREADS")) : NULL;
    const struct {
        const char *env; /* NULL: unset */
        int granted, want;
    } cases[] = {{NULL, 1, 1}, {NULL, 2, 1}, {NULL, 8, 1}, {"2", 2, 2}, {"2", 1, 1},
                 {"3", 2, 2},  {"1", 2, 1},  {"x", 2, 1},  {"0", 2, 1}, {"-2", 2, 1},
                 {"", 2, 1},   {"2x", 2, 1}, {"2", 0, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].env)
            setenv("OPENBLAS_NUM_THREADS", cases[i].env, 1);
        else
            unsetenv("OPENBLAS_NUM_THREADS");
        mr_backend_set_threads(be, cases[i].granted);
        ck_assert_msg(openblas_get_num_threads() == cases[i].want,
                      "OPENBLAS_NUM_THREADS=%s, %d cores: %d threads, want %d",
                      cases[i].env ? cases[i].env : "(unset)", cases[i].granted,
                      openblas_get_num_threads(), cases[i].want);
    }
    if (saved)
        setenv("OPENBLAS_NUM_THREADS", saved, 1);
    else
        unsetenv("OPENBLAS_NUM_THREADS");
    free(saved);
}
END_TEST

static Suite *backend_suite(void) {
    Suite *s = suite_create("backend_cpu");
    TCase *tc = tcase_create("gemm");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_gemm_transposes_small, 0, 4);
    tcase_add_loop_test(tc, test_gemm_transposes_large, 0, 4);
    tcase_add_loop_test(tc, test_gemm_alpha_beta, 0, 4);
    tcase_add_test(tc, test_gemm_hand);
    suite_add_tcase(s, tc);
    tc = tcase_create("memory");
    tcase_add_test(tc, test_backend_identity);
    tcase_add_test(tc, test_no_cuda);
    tcase_add_test(tc, test_alloc_zeroed_aligned);
    tcase_add_test(tc, test_copies);
    tcase_add_test(tc, test_zero_scale);
    tcase_add_test(tc, test_host_views);
    tcase_add_test(tc, test_scratch);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_cpu_cores);
    tcase_add_test(tc, test_set_threads);
    tcase_add_test(tc, test_threads_same_bits);
    tcase_add_test(tc, test_threads_policy);
    tcase_add_test(tc, test_enter_flushes_denormals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(backend_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
