// test_cublas.cc - tests of the cuBLAS emulation (cublas_emu.cc): SGEMM in
// every transpose combination and with leading dimensions above the
// minimum, against a naive triple loop and against cblas_sgemm; beta == 0
// never reads C; the documented argument checks; SSCAL; work ordered on the
// handle's stream; the library loads by its soname as cublas_lazy.c does.
// Relies on: Check, OpenBLAS, the emulated runtime, EMU_LIBDIR (meson).
#include <cblas.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu_emu/emu.h"
#include "tests/gpu_emu/emu_counters.h"

#include <check.h>  // last: it defines a macro `fail`

#define CU(call) ck_assert_int_eq((call), cudaSuccess)
#define CB(call) ck_assert_int_eq((call), CUBLAS_STATUS_SUCCESS)

namespace {

float *to_device(const std::vector<float> &h) {
    float *d;
    ck_assert_int_eq(cudaMalloc((void **)&d, h.size() * sizeof(float)), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice),
                     cudaSuccess);
    return d;
}

std::vector<float> to_host(const float *d, size_t n) {
    std::vector<float> h(n);
    ck_assert_int_eq(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
}

std::vector<float> random_vec(size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto &x : v)
        x = u(g);
    return v;
}

// One column-major GEMM case: C (m x n, ldc) = alpha op(A) op(B) + beta C.
void check_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                int pad, float alpha, float beta) {
    bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
    int ar = na ? m : k, ac = na ? k : m, br = nb ? k : n, bc = nb ? n : k;
    int lda = std::max(1, ar) + pad, ldb = std::max(1, br) + pad, ldc = m + pad;
    auto A = random_vec((size_t)lda * ac, 1), B = random_vec((size_t)ldb * bc, 2),
         C = random_vec((size_t)ldc * n, 3);
    float *dA = to_device(A), *dB = to_device(B), *dC = to_device(C);
    CB(cublasSgemm_v2(h, ta, tb, m, n, k, &alpha, dA, lda, dB, ldb, &beta, dC, ldc));
    auto got = to_host(dC, C.size());
    // OpenBLAS itself: the emulator calls it, so the same bits
    auto want = C;
    cblas_sgemm(CblasColMajor, na ? CblasNoTrans : CblasTrans, nb ? CblasNoTrans : CblasTrans, m, n, k,
                alpha, A.data(), lda, B.data(), ldb, beta, want.data(), ldc);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            size_t at = (size_t)j * ldc + i;
            ck_assert_float_eq(got[at], want[at]);
            // the naive triple loop, in double
            double s = 0;
            for (int p = 0; p < k; p++) {
                double a = na ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                double b = nb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                s += a * b;
            }
            double ref = alpha * s + beta * C[at];
            ck_assert_double_eq_tol(got[at], ref, 1e-5 * (1 + std::fabs(ref)));
        }
    // the padding between columns is untouched
    for (int j = 0; j < n; j++)
        for (int i = m; i < ldc; i++)
            ck_assert_float_eq(got[(size_t)j * ldc + i], C[(size_t)j * ldc + i]);
    CU(cudaFree(dA));
    CU(cudaFree(dB));
    CU(cudaFree(dC));
}

}  // namespace

START_TEST(gemm_transposes) {
    cublasHandle_t h;
    CB(cublasCreate_v2(&h));
    CB(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));
    cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T};
    for (auto ta : ops)
        for (auto tb : ops)
            for (int pad : {0, 3}) {
                check_gemm(h, ta, tb, 5, 7, 3, pad, 1.0f, 0.0f);
                check_gemm(h, ta, tb, 13, 4, 9, pad, 0.5f, 2.0f);
                check_gemm(h, ta, tb, 1, 1, 1, pad, -1.0f, 1.0f);
                check_gemm(h, ta, tb, 8, 3, 0, pad, 1.0f, 0.5f);  // k = 0: C = beta C
            }
    CB(cublasDestroy_v2(h));
}
END_TEST

START_TEST(gemm_beta_zero_ignores_nan) {
    cublasHandle_t h;
    CB(cublasCreate_v2(&h));
    const int m = 6, n = 5, k = 4, ldc = 8;
    float *dA = to_device(random_vec(m * k, 4)), *dB = to_device(random_vec(k * n, 5));
    float *dC;
    CU(cudaMalloc((void **)&dC, ldc * n * sizeof(float)));  // poison: NaN
    float one = 1.0f, zero = 0.0f;
    CB(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, m, dB, k, &zero, dC, ldc));
    auto c = to_host(dC, ldc * n);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++)
            ck_assert(std::isfinite(c[(size_t)j * ldc + i]));
    ck_assert(std::isnan(c[m]));  // the padding is not written
    // alpha = 0 and beta = 0: zeros, the NaN not propagated
    CU(cudaMemset(dC, 0xFF, ldc * n * sizeof(float)));
    CB(cublasSgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &zero, dA, k, dB, k, &zero, dC, ldc));
    c = to_host(dC, ldc * n);
    ck_assert_float_eq(c[0], 0.0f);
    ck_assert_float_eq(c[(size_t)(n - 1) * ldc + m - 1], 0.0f);
    CB(cublasDestroy_v2(h));
}
END_TEST

START_TEST(gemm_invalid_values) {
    cublasHandle_t h;
    CB(cublasCreate_v2(&h));
    float *d;
    CU(cudaMalloc((void **)&d, 1024));
    float one = 1.0f;
    auto g = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *al,
                 int lda, int ldb, const float *be, int ldc) {
        return cublasSgemm_v2(h, ta, tb, m, n, k, al, d, lda, d, ldb, be, d, ldc);
    };
    const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
    const auto INV = CUBLAS_STATUS_INVALID_VALUE;
    ck_assert_int_eq(g(N, N, -1, 2, 2, &one, 2, 2, &one, 2), INV);
    ck_assert_int_eq(g(N, N, 2, -1, 2, &one, 2, 2, &one, 2), INV);
    ck_assert_int_eq(g(N, N, 2, 2, -1, &one, 2, 2, &one, 2), INV);
    ck_assert_int_eq(g((cublasOperation_t)7, N, 2, 2, 2, &one, 2, 2, &one, 2), INV);
    ck_assert_int_eq(g(N, N, 3, 2, 2, &one, 2, 2, &one, 3), INV);  // lda < m (N)
    ck_assert_int_eq(g(T, N, 3, 2, 4, &one, 3, 4, &one, 3), INV);  // lda < k (T)
    ck_assert_int_eq(g(N, N, 2, 2, 3, &one, 2, 2, &one, 2), INV);  // ldb < k (N)
    ck_assert_int_eq(g(N, T, 2, 3, 2, &one, 2, 2, &one, 2), INV);  // ldb < n (T)
    ck_assert_int_eq(g(N, N, 3, 2, 2, &one, 3, 2, &one, 2), INV);  // ldc < m
    ck_assert_int_eq(g(N, N, 0, 0, 0, &one, 0, 1, &one, 1), INV);  // lda < max(1, m)
    ck_assert_int_eq(g(N, N, 2, 2, 2, nullptr, 2, 2, &one, 2), INV);
    ck_assert_int_eq(g(N, N, 2, 2, 2, &one, 2, 2, nullptr, 2), INV);
    ck_assert_int_eq(cublasSgemm_v2(nullptr, N, N, 1, 1, 1, &one, d, 1, d, 1, &one, d, 1),
                     CUBLAS_STATUS_NOT_INITIALIZED);
    CB(g(T, T, 2, 2, 2, &one, 2, 2, &one, 2));  // the minimum is fine
    CB(g(N, N, 0, 5, 3, &one, 1, 3, &one, 1));  // an empty C: nothing to do
    ck_assert_str_eq(cublasGetStatusName(INV), "CUBLAS_STATUS_INVALID_VALUE");
    ck_assert_ptr_nonnull(cublasGetStatusString(INV));
    ck_assert_int_eq(cublasSetMathMode(h, (cublasMath_t)99), INV);
    CU(cudaFree(d));
    CB(cublasDestroy_v2(h));
}
END_TEST

START_TEST(scal_on_stream) {
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cublasHandle_t h;
    CB(cublasCreate_v2(&h));
    CB(cublasSetStream_v2(h, s));
    std::vector<float> v(100);
    for (int i = 0; i < 100; i++)
        v[i] = (float)i;
    float *d = to_device(v);
    // held stream: the product waits for it, alpha read at the call
    auto mu = std::make_shared<std::mutex>();
    auto cv = std::make_shared<std::condition_variable>();
    auto open = std::make_shared<bool>(false);
    emu_enqueue(s, [=] {
        std::unique_lock lk(*mu);
        cv->wait(lk, [&] { return *open; });
    });
    float alpha = 3.0f;
    CB(cublasSscal_v2(h, 50, &alpha, d, 2));  // every other element
    alpha = 100.0f;
    std::vector<float> r(100);
    CU(cudaMemcpy(r.data(), d, sizeof(float), cudaMemcpyDeviceToHost));  // stream 0: not ordered
    ck_assert_float_eq(r[0], 0.0f);
    {
        std::lock_guard lk(*mu);
        *open = true;
    }
    cv->notify_all();
    CU(cudaStreamSynchronize(s));
    r = to_host(d, 100);
    for (int i = 0; i < 100; i++)
        ck_assert_float_eq(r[i], i % 2 == 0 ? 3.0f * (float)i : (float)i);
    CU(cudaFree(d));
    CB(cublasDestroy_v2(h));
    CU(cudaStreamDestroy(s));
}
END_TEST

// cublasSetWorkspace: a 256-byte aligned device buffer, or NULL with size
// 0; cublasSetStream goes back to the library's pool; the counters tell
// calls on the pool from calls on the caller's buffer.
START_TEST(workspace_rules_and_counts) {
    cublasHandle_t h;
    CB(cublasCreate_v2(&h));
    void *ws;
    CU(cudaMalloc(&ws, 1 << 20));
    ck_assert_int_eq(cublasSetWorkspace_v2(nullptr, ws, 1 << 20), CUBLAS_STATUS_NOT_INITIALIZED);
    ck_assert_int_eq(cublasSetWorkspace_v2(h, nullptr, 256), CUBLAS_STATUS_INVALID_VALUE);
    ck_assert_int_eq(cublasSetWorkspace_v2(h, (char *)ws + 8, 256), CUBLAS_STATUS_INVALID_VALUE);
    ck_assert_int_eq(cublasSetWorkspace_v2(h, ws, 2 << 20), CUBLAS_STATUS_INVALID_VALUE);
    std::vector<float> v(8, 1.0f);
    float *d = to_device(v), alpha = 2.0f;
    mr_emu_counters c;
    mr_emu_counters_reset();
    CB(cublasSscal_v2(h, 8, &alpha, d, 1));  // the pool
    CB(cublasSetWorkspace_v2(h, ws, 1 << 20));
    CB(cublasSscal_v2(h, 8, &alpha, d, 1));  // the caller's
    CB(cublasSetStream_v2(h, nullptr));      // back to the pool
    CB(cublasSscal_v2(h, 8, &alpha, d, 1));
    CB(cublasSetWorkspace_v2(h, nullptr, 0));  // none: not the pool
    CB(cublasSscal_v2(h, 8, &alpha, d, 1));
    mr_emu_counters_get(-1, &c);
    ck_assert_uint_eq(c.blas_calls, 4);
    ck_assert_uint_eq(c.blas_pool_calls, 2);
    CU(cudaDeviceSynchronize());
    ck_assert_float_eq(to_host(d, 8)[0], 16.0f);
    CU(cudaFree(d));
    CU(cudaFree(ws));
    CB(cublasDestroy_v2(h));
}
END_TEST

START_TEST(outside_allocation_faults) {
    cublasHandle_t h;
    CB(cublasCreate_v2(&h));
    float *d;
    CU(cudaMalloc((void **)&d, 4 * sizeof(float)));
    float one = 1.0f;
    // a 3 x 3 C in a 4-float buffer: an illegal address when it runs
    CB(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 3, 3, 1, &one, d, 3, d, 1, &one, d, 3));
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    CB(cublasDestroy_v2(h));
}
END_TEST

START_TEST(loads_by_soname) {
    const char *dir = getenv("EMU_LIBDIR");
    std::string path = dir ? std::string(dir) + "/libcublas.so.13" : "libcublas.so.13";
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != nullptr, "%s", dlerror());
    for (const char *sym : {"cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2",
                            "cublasSetWorkspace_v2",
                            "cublasSetMathMode", "cublasSscal_v2", "cublasSgemm_v2",
                            "cublasGetStatusString"})
        ck_assert_msg(dlsym(lib, sym) != nullptr, "no %s", sym);
    // the same library as the one linked
    ck_assert_ptr_eq(dlsym(lib, "cublasSgemm_v2"), (void *)&cublasSgemm_v2);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gpu_emu_cublas");
    TCase *tc = tcase_create("cublas");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gemm_transposes);
    tcase_add_test(tc, workspace_rules_and_counts);
    tcase_add_test(tc, gemm_beta_zero_ignores_nan);
    tcase_add_test(tc, gemm_invalid_values);
    tcase_add_test(tc, scal_on_stream);
    tcase_add_test(tc, outside_allocation_faults);
    tcase_add_test(tc, loads_by_soname);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
