// test_kernel.cu - a CUDA source built as host C++ with emu_kernel.h
// force-included (meson: emu_kernel_args), launching kernels through
// MR_CUDA_LAUNCH as the project's .cu files do: results, the index
// variables, ordering on the stream, launch errors.
// Relies on: emu_kernel.h (mr_emu_launch), the emulated runtime, Check.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>

#include <atomic>
#include <thread>
#include <vector>

#include <check.h>

// As in the project's backends/cuda/kernels_cuda.h.
#ifdef __CUDACC__
#define MR_CUDA_LAUNCH(kernel, grid, block, stream, ...)                                           \
    kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#else
#define MR_CUDA_LAUNCH(kernel, grid, block, stream, ...)                                           \
    mr_emu_launch((grid), (block), (stream), kernel, __VA_ARGS__)
#endif

#define CU(call) ck_assert_int_eq((call), cudaSuccess)

// y = a x + y over n, grid-stride (the project's kernels' shape)
__global__ static void saxpy_kernel(float a, const float *__restrict__ x, float *__restrict__ y,
                                    int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);
}

__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

__global__ void math_kernel(float *y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = (sigmoid((float)i) + sqrtf((float)i)) * (float)__dmul_rn(2.0, 0.5) + tanhf(0.0f) +
               fmaxf(-1.0f, 0.0f);
}

// counts every (block, thread) index of a 3-D launch
__global__ void index_kernel(int *count, dim3 g, dim3 b) {
    unsigned block = (blockIdx.z * g.y + blockIdx.y) * g.x + blockIdx.x;
    unsigned thread = (threadIdx.z * b.y + threadIdx.y) * b.x + threadIdx.x;
    if (gridDim.x == g.x && gridDim.y == g.y && gridDim.z == g.z && blockDim.x == b.x &&
        blockDim.y == b.y && blockDim.z == b.z)
        count[block * b.x * b.y * b.z + thread]++;
}

START_TEST(saxpy) {
    const int n = 100000;
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *x, *y;
    CU(cudaMalloc((void **)&x, n * sizeof(float)));
    CU(cudaMalloc((void **)&y, n * sizeof(float)));
    std::vector<float> hx(n), hy(n);
    for (int i = 0; i < n; i++) {
        hx[i] = (float)i;
        hy[i] = 1.0f;
    }
    CU(cudaMemcpyAsync(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
    CU(cudaMemcpyAsync(y, hy.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
    // few blocks: each thread takes several elements
    MR_CUDA_LAUNCH(saxpy_kernel, 7u, 256, s, 2.0f, x, y, n);
    CU(cudaGetLastError());
    MR_CUDA_LAUNCH(saxpy_kernel, (n + 255) / 256, 256, s, 1.0f, x, y, n);
    CU(cudaGetLastError());
    CU(cudaMemcpyAsync(hy.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    for (int i = 0; i < n; i++)
        ck_assert_float_eq(hy[i], 3.0f * (float)i + 1.0f);
    MR_CUDA_LAUNCH(math_kernel, 4u, 128, s, y, 1000);
    CU(cudaMemcpyAsync(hy.data(), y, 1000 * sizeof(float), cudaMemcpyDeviceToHost, s));
    for (int i = 0; i < 1000; i++)
        ck_assert_float_eq(hy[i], 1.0f / (1.0f + expf(-(float)i)) + sqrtf((float)i));
    CU(cudaFree(x));
    CU(cudaFree(y));
    CU(cudaStreamDestroy(s));
}
END_TEST

__global__ static void store_kernel(int *out, int v) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *out = v;
}

// The arguments are taken at the launch, as CUDA copies them then: the
// stream is held busy, the variable an argument came from changes after the
// launch, and the kernel still sees the value it had at the launch.
START_TEST(arguments_taken_at_launch) {
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int *d;
    CU(cudaMalloc((void **)&d, sizeof(int)));
    std::atomic<int> release{0};
    emu_enqueue(s, [&release] {
        while (!release.load())
            std::this_thread::yield();
    });
    struct {
        int step;
    } run = {7}, *p = &run;
    MR_CUDA_LAUNCH(store_kernel, 1, 32, s, d, p->step);
    run.step = 8; /* after the launch, before the kernel runs */
    release.store(1);
    /* s does not block the legacy stream that cudaMemcpy uses: wait for it */
    CU(cudaStreamSynchronize(s));
    int h = 0;
    CU(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    ck_assert_int_eq(h, 7);
    CU(cudaFree(d));
    CU(cudaStreamDestroy(s));
}
END_TEST

START_TEST(indices) {
    dim3 g(3, 2, 2), b(4, 2, 3);
    const int total = 3 * 2 * 2 * 4 * 2 * 3;
    int *count;
    CU(cudaMalloc((void **)&count, total * sizeof(int)));
    CU(cudaMemsetAsync(count, 0, total * sizeof(int), 0));
    MR_CUDA_LAUNCH(index_kernel, g, b, 0, count, g, b);
    CU(cudaGetLastError());
    std::vector<int> h(total);
    CU(cudaMemcpyAsync(h.data(), count, total * sizeof(int), cudaMemcpyDeviceToHost, 0));
    for (int i = 0; i < total; i++)
        ck_assert_int_eq(h[i], 1);
    CU(cudaFree(count));
}
END_TEST

START_TEST(launch_errors) {
    float *y;
    CU(cudaMalloc((void **)&y, 4));
    MR_CUDA_LAUNCH(math_kernel, 0u, 256, 0, y, 1);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    MR_CUDA_LAUNCH(math_kernel, 1u, 1025, 0, y, 1);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    MR_CUDA_LAUNCH(math_kernel, 1u, dim3(32, 32, 2), 0, y, 1);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    MR_CUDA_LAUNCH(math_kernel, 1u, 0, 0, y, 1);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    int bogus;
    MR_CUDA_LAUNCH(math_kernel, 1u, 32, (cudaStream_t)&bogus, y, 1);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    // nothing of the failed launches ran: y is still poison
    float h = 0;
    CU(cudaMemcpyAsync(&h, y, 4, cudaMemcpyDeviceToHost, 0));
    ck_assert(isnan(h));
    CU(cudaFree(y));
}
END_TEST

int main(void) {
    Suite *s = suite_create("gpu_emu_kernel");
    TCase *tc = tcase_create("kernel");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, saxpy);
    tcase_add_test(tc, indices);
    tcase_add_test(tc, arguments_taken_at_launch);
    tcase_add_test(tc, launch_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
