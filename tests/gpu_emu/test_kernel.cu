// test_kernel.cu - a CUDA source built as host C++ with emu_kernel.h
// force-included (meson: emu_kernel_args), launching kernels through
// MR_CUDA_LAUNCH as the project's .cu files do: results, the index
// variables, ordering on the stream, launch errors; cooperating threads
// (__shared__ memory and __syncthreads, warp shuffles, atomicAdd).
// Relies on: emu_kernel.h (mr_emu_launch), the emulated runtime, Check.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>

#include <atomic>
#include <thread>
#include <vector>

#include <signal.h>

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

// Sums each block's 256 elements of x (grid-stride blocks) by a tree in
// shared memory: every step reads what other threads wrote before the
// barrier, so running the threads one after another would be wrong.
// sums: (gridDim.x,)
__global__ void block_sum_kernel(const float *x, int n, float *sums) {
    __shared__ float buf[256];
    unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
    unsigned i = blockIdx.x * 256 + t;
    buf[t] = i < (unsigned)n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned half = 128; half > 0; half /= 2) {
        if (t < half) buf[t] += buf[t + half];
        __syncthreads();
    }
    if (t == 0) sums[blockIdx.x] = buf[0];
}

// Threads past `live` return at once; the others meet at barriers, which
// count only the threads that have not returned (as on hardware).
__global__ void early_exit_kernel(int live, int *out) {
    __shared__ int buf[128];
    int t = threadIdx.x;
    if (t >= live) return;
    buf[t] = t + 1;
    __syncthreads();
    if (t == 0) {
        int sum = 0;
        for (int k = 0; k < live; k++)
            sum += buf[k];
        *out = sum;
    }
}

// Per warp: a sum by __shfl_down_sync (lane 0 holds it), a sum by
// __shfl_xor_sync (every lane holds it), lane 3's value by __shfl_sync,
// and a sum over groups of 8 lanes (width 8). out: (blockDim.x, 4)
__global__ void shuffle_kernel(int *out) {
    int t = threadIdx.x, lane = t % 32;
    int v = t * t + 1;
    int down = v, xr = v, grp = v;
    for (int d = 16; d > 0; d /= 2)
        down += __shfl_down_sync(0xffffffffu, down, d);
    for (int m = 16; m > 0; m /= 2)
        xr += __shfl_xor_sync(0xffffffffu, xr, m);
    for (int m = 4; m > 0; m /= 2)
        grp += __shfl_xor_sync(0xffffffffu, grp, m, 8);
    int bc = __shfl_sync(0xffffffffu, v, 3);
    out[t * 4 + 0] = lane == 0 ? down : 0;
    out[t * 4 + 1] = xr;
    out[t * 4 + 2] = bc;
    out[t * 4 + 3] = grp;
}

// Every thread adds 1 to an int and a float counter and keeps the int's
// old value. olds: (threads,)
__global__ void atomic_kernel(int *count, float *fcount, int *olds) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    olds[i] = atomicAdd(count, 1);
    atomicAdd(fcount, 1.0f);
}

// Thread 0 waits for the block, thread 1 for its warp: neither barrier can
// open (barrier divergence), which the emulator reports and aborts.
__global__ void divergent_kernel(int *out) {
    if (threadIdx.x == 0) __syncthreads();
    if (threadIdx.x == 1) __syncwarp();
    *out = 1;
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

START_TEST(shared_memory_and_barriers) {
    const int n = 1000, blocks = 4;
    std::vector<float> hx(n);
    for (int i = 0; i < n; i++)
        hx[i] = (float)(i % 97);
    float *x, *sums;
    CU(cudaMalloc((void **)&x, n * sizeof(float)));
    CU(cudaMalloc((void **)&sums, blocks * sizeof(float)));
    CU(cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    // as 256 threads in a row and as a 16 x 16 block: the same linear order
    for (dim3 b : {dim3(256), dim3(16, 16)}) {
        MR_CUDA_LAUNCH(block_sum_kernel, blocks, b, 0, x, n, sums);
        CU(cudaGetLastError());
        float h[blocks];
        CU(cudaMemcpy(h, sums, sizeof h, cudaMemcpyDeviceToHost));
        for (int k = 0; k < blocks; k++) {
            float want = 0; // integers below 2^24: exact in any order
            for (int i = k * 256; i < (k + 1) * 256 && i < n; i++)
                want += hx[i];
            ck_assert_float_eq(h[k], want);
        }
    }
    int *out, h = 0;
    CU(cudaMalloc((void **)&out, sizeof(int)));
    MR_CUDA_LAUNCH(early_exit_kernel, 1, 128, 0, 37, out);
    CU(cudaMemcpy(&h, out, sizeof h, cudaMemcpyDeviceToHost));
    ck_assert_int_eq(h, 37 * 38 / 2);
    CU(cudaFree(out));
    CU(cudaFree(x));
    CU(cudaFree(sums));
}
END_TEST

START_TEST(warp_shuffles) {
    const int threads = 96; // three warps
    int *out;
    CU(cudaMalloc((void **)&out, threads * 4 * sizeof(int)));
    MR_CUDA_LAUNCH(shuffle_kernel, 1, threads, 0, out);
    std::vector<int> h(threads * 4);
    CU(cudaMemcpy(h.data(), out, h.size() * sizeof(int), cudaMemcpyDeviceToHost));
    auto v = [](int t) { return t * t + 1; };
    for (int t = 0; t < threads; t++) {
        int w = t / 32 * 32, g = t / 8 * 8;
        int warp_sum = 0, group_sum = 0;
        for (int k = 0; k < 32; k++)
            warp_sum += v(w + k);
        for (int k = 0; k < 8; k++)
            group_sum += v(g + k);
        ck_assert_int_eq(h[t * 4 + 0], t % 32 == 0 ? warp_sum : 0);
        ck_assert_int_eq(h[t * 4 + 1], warp_sum);
        ck_assert_int_eq(h[t * 4 + 2], v(w + 3));
        ck_assert_int_eq(h[t * 4 + 3], group_sum);
    }
    CU(cudaFree(out));
}
END_TEST

START_TEST(atomics) {
    const int blocks = 8, threads = 256, total = blocks * threads;
    int *count, *olds;
    float *fcount;
    CU(cudaMalloc((void **)&count, sizeof(int)));
    CU(cudaMalloc((void **)&fcount, sizeof(float)));
    CU(cudaMalloc((void **)&olds, total * sizeof(int)));
    CU(cudaMemset(count, 0, sizeof(int)));
    CU(cudaMemset(fcount, 0, sizeof(float)));
    MR_CUDA_LAUNCH(atomic_kernel, blocks, threads, 0, count, fcount, olds);
    int hc = 0;
    float hf = 0;
    std::vector<int> ho(total);
    CU(cudaMemcpy(&hc, count, sizeof hc, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(&hf, fcount, sizeof hf, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(ho.data(), olds, total * sizeof(int), cudaMemcpyDeviceToHost));
    ck_assert_int_eq(hc, total);
    ck_assert_float_eq(hf, (float)total);
    // each thread saw a different old value: 0 .. total-1 once each
    std::vector<int> seen(total, 0);
    for (int o : ho) {
        ck_assert(o >= 0 && o < total);
        seen[o]++;
    }
    for (int k = 0; k < total; k++)
        ck_assert_int_eq(seen[k], 1);
    CU(cudaFree(count));
    CU(cudaFree(fcount));
    CU(cudaFree(olds));
}
END_TEST

// Barrier divergence aborts the process (the test expects SIGABRT).
START_TEST(barrier_divergence) {
    int *out;
    CU(cudaMalloc((void **)&out, sizeof(int)));
    MR_CUDA_LAUNCH(divergent_kernel, 1, 32, 0, out);
    cudaDeviceSynchronize();
}
END_TEST

// A kernel launched into a capture runs at each launch of the graph, with
// the arguments of the capture (not run by the capture itself).
START_TEST(captured_kernel) {
    const int n = 1000;
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *x, *y;
    CU(cudaMalloc((void **)&x, n * sizeof(float)));
    CU(cudaMalloc((void **)&y, n * sizeof(float)));
    std::vector<float> hx(n), hy(n);
    for (int i = 0; i < n; i++)
        hx[i] = (float)i, hy[i] = 1.0f;
    CU(cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(y, hy.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    float a = 2.0f;
    MR_CUDA_LAUNCH(saxpy_kernel, 4, 256, s, a, x, y, n);
    a = 100.0f;  // after the launch: the graph keeps 2
    cudaGraph_t g;
    CU(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ex;
    CU(cudaGraphInstantiate(&ex, g, 0));
    CU(cudaStreamSynchronize(s));
    CU(cudaMemcpy(hy.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    ck_assert_float_eq(hy[7], 1.0f);  // not run by the capture
    for (int k = 1; k <= 2; k++) {
        CU(cudaGraphLaunch(ex, s));
        CU(cudaStreamSynchronize(s));
        CU(cudaMemcpy(hy.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            ck_assert_float_eq(hy[i], 1.0f + (float)k * 2.0f * (float)i);
    }
    CU(cudaGraphExecDestroy(ex));
    CU(cudaGraphDestroy(g));
    CU(cudaFree(x));
    CU(cudaFree(y));
    CU(cudaStreamDestroy(s));
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
    tcase_add_test(tc, shared_memory_and_barriers);
    tcase_add_test(tc, warp_shuffles);
    tcase_add_test(tc, atomics);
    tcase_add_test(tc, captured_kernel);
    tcase_add_test_raise_signal(tc, barrier_divergence, SIGABRT);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
