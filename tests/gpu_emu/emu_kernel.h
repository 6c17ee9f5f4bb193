// emu_kernel.h - what a CUDA kernel source needs to compile and run as host
// C++ (g++) against the emulator. Force-included (-include) before anything
// else when a project .cu file is built as C++ (meson: emu_kernel_args).
//
// - __global__, __device__, __host__: the real crt/host_defines.h (through
//   cuda_runtime_api.h) already makes them empty for a compiler that is not
//   nvcc (__location__ -> __annotate__, empty without __CUDACC__), and
//   __forceinline__ `__inline__ __attribute__((always_inline))`;
//   __restrict__ is g++'s own. So this header includes the real header and
//   defines none of them. __CUDACC__ stays undefined: the project's MR_HD
//   and MR_CUDA_LAUNCH take their host branches.
// - threadIdx, blockIdx, blockDim, gridDim: thread-local variables, set by
//   the launcher on the stream's worker thread. The real
//   device_launch_parameters.h (extern const declarations, included by
//   cuda_runtime.h) is kept out by defining its include guard.
// - the device intrinsics the kernels use (__fadd_rn ...): the host
//   operations; with -ffp-contract=off, a*b+c is not fused, as __fmul_rn
//   and __fadd_rn promise.
// - mr_emu_launch: the launch (kernels_cuda.h's MR_CUDA_LAUNCH without nvcc).
// - __shared__: `static thread_local`. A block's threads run on its
//   stream's worker thread (emu_block.h: fibers that switch at barriers)
//   and blocks run one after another there, so one instance per worker is
//   one per block; blocks of other streams run on their own workers. As on
//   a GPU, nothing clears it between blocks: a block reads what the
//   previous block left, never zeros it may rely on (except the very
//   first). Dynamic shared memory (extern __shared__) is not supported.
// - __syncthreads, __syncwarp, the warp shuffles: emu_block.h's barriers;
//   __threadfence a fence.
// - atomicAdd: std::atomic_ref (blocks of other streams may run at the
//   same time). On hardware a float atomicAdd's order of arrival varies
//   from run to run, so the sum's rounding does; the project uses it only
//   where the order cannot change a bit (integers, or one adder per
//   address), and the emulator, which adds in thread order, cannot show
//   such a nondeterminism.
// Relies on: emu_block.cc (libmr_emu_cudart) for the block's threads.
#pragma once

#ifdef __CUDACC__
#error "emu_kernel.h is for building CUDA sources as host C++, not for nvcc"
#endif

#define __DEVICE_LAUNCH_PARAMETERS_H__ /* its extern const builtins: ours below */

#include <cuda_runtime_api.h>
#include <math.h>

#include <cmath>
#include <functional>
#include <tuple>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <utility>

#include "tests/gpu_emu/emu.h"
#include "tests/gpu_emu/emu_block.h"

// Per block (see above); the real header makes it an empty annotation.
#undef __shared__
#define __shared__ static thread_local

// The built-in index variables of the thread being emulated.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;

// Device intrinsics: IEEE round-to-nearest arithmetic, which the host's
// float and double operations are.
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
// The fast approximations: the accurate host functions (within their error
// bounds). __expf, __logf, __powf, __sinf, __cosf, __tanf need nothing:
// glibc's <math.h> declares them (its own names of expf ...).
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

// __syncthreads(): every thread of the block waits here for the others.
static inline void __syncthreads() { emu_block_barrier(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    (void)mask;  // every lane of the warp that has not returned takes part
    emu_warp_barrier();
}

// __threadfence(): this thread's writes are seen by the device before
// its later ones (a "last block" reads what the others wrote). A seq_cst
// read-modify-write orders them as a fence does, and ThreadSanitizer
// understands it (GCC refuses std::atomic_thread_fence under -fsanitize=thread).
static inline void __threadfence() {
    static std::atomic<unsigned> fence;
    fence.fetch_add(1, std::memory_order_seq_cst);
}

// The warp shuffles: each lane puts var in its slot, the warp meets, each
// reads its source lane's slot, and the warp meets again (so that no lane
// overwrites its slot before all have read). As documented ("Threads may
// only read data from another thread which is actively participating in
// the __shfl_sync() command"), mask must name every lane of the warp that
// has not returned; a source lane outside the caller's group of width
// lanes gives the caller its own var.
template <class T> static inline T emu_shfl(T var, int src, bool own) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a shuffle of a scalar");
    uint64_t *slots = emu_block_slots();
    unsigned t = emu_block_thread();
    memcpy(&slots[t], &var, sizeof var);
    emu_warp_barrier();
    T out = var;
    if (!own) memcpy(&out, &slots[t - t % warpSize + (unsigned)src], sizeof out);
    emu_warp_barrier();
    return out;
}
template <class T> static inline T __shfl_sync(unsigned mask, T var, int src, int width = 32) {
    (void)mask;
    int lane = (int)(emu_block_thread() % warpSize);
    return emu_shfl(var, lane - lane % width + src % width, false);
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    (void)mask;
    int lane = (int)(emu_block_thread() % warpSize);
    int src = lane + (int)delta;
    return emu_shfl(var, src, src / width != lane / width);
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    (void)mask;
    int lane = (int)(emu_block_thread() % warpSize);
    int src = lane - (int)delta;
    return emu_shfl(var, src, src < 0 || src / width != lane / width);
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
    (void)mask;
    int lane = (int)(emu_block_thread() % warpSize);
    int src = lane ^ lane_mask;
    return emu_shfl(var, src, src / width != lane / width);
}

// atomicAdd (int, unsigned, unsigned long long, float, double): returns the
// old value. See the header comment on the order of float additions.
template <class T> static inline T atomicAdd(T *address, T val) {
    static_assert(std::is_arithmetic_v<T>, "atomicAdd of a number");
    return std::atomic_ref<T>(*address).fetch_add(val);
}

// Checks a launch configuration and stream (cudart_emu.cc); false after
// recording the launch error for cudaGetLastError.
bool emu_launch_check(dim3 grid, dim3 block, cudaStream_t s);

// Counts a kernel launch on s (cudart_emu.cc; emu_counters.h).
void emu_count_launch(cudaStream_t s);

// One launch's kernel body and block shape, for emu_block_run.
template <class F> struct EmuLaunch {
    const F *f;
    dim3 block;
    static void index(void *ctx, unsigned t) {
        const dim3 &b = static_cast<EmuLaunch *>(ctx)->block;
        threadIdx = uint3{t % b.x, t / b.x % b.y, t / (b.x * b.y)};
    }
    static void run(void *ctx, unsigned t) {
        index(ctx, t);
        (*static_cast<EmuLaunch *>(ctx)->f)();
    }
};

// Runs f once for every (block, thread) index of a launch on s, blocks in
// order, each block's threads as emu_block_run schedules them (in order
// unless they meet at barriers), with the built-in variables set (a task
// of s's worker).
template <class F> void mr_emu_launch_task(dim3 grid, dim3 block, cudaStream_t s, F f) {
    if (!emu_launch_check(grid, block, s)) return;
    emu_count_launch(s);
    emu_enqueue(s, [grid, block, f] {
        gridDim = grid;
        blockDim = block;
        EmuLaunch<F> l{&f, block};
        EmuBlockFns fns{EmuLaunch<F>::index, EmuLaunch<F>::run, &l};
        unsigned threads = block.x * block.y * block.z;
        for (unsigned bz = 0; bz < grid.z; bz++)
            for (unsigned by = 0; by < grid.y; by++)
                for (unsigned bx = 0; bx < grid.x; bx++) {
                    blockIdx = uint3{bx, by, bz};
                    emu_block_run(fns, threads);
                }
    });
}

// kernel<<<grid, block, 0, s>>>(args...): the arguments are evaluated and
// converted to the kernel's parameter types now, at the launch, as CUDA
// does ("the arguments are copied at the launch"), not when s's worker runs
// the kernel: an argument read through a pointer (run->step) may have
// changed, or gone out of scope, by then. A lambda capturing the argument
// expressions would read them late and hide such a race from the test.
template <class... P, class... A>
void mr_emu_launch(dim3 grid, dim3 block, cudaStream_t s, void (*kernel)(P...), A &&...args) {
    static_assert(sizeof...(P) == sizeof...(A), "a kernel launch with the wrong argument count");
    std::tuple<std::decay_t<P>...> params(static_cast<P>(std::forward<A>(args))...);
    mr_emu_launch_task(grid, block, s, [kernel, params] { std::apply(kernel, params); });
}
