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
// Relies on: the project's kernels being grid-stride loops without
// __shared__ memory or __syncthreads, so that running the threads one after
// another is a valid schedule.
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
#include <type_traits>
#include <utility>

#include "tests/gpu_emu/emu.h"

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

// Checks a launch configuration and stream (cudart_emu.cc); false after
// recording the launch error for cudaGetLastError.
bool emu_launch_check(dim3 grid, dim3 block, cudaStream_t s);

// Runs f once for every (block, thread) index of a launch on s, blocks and
// threads in order, with the built-in variables set (a task of s's worker).
template <class F>
void mr_emu_launch_task(dim3 grid, dim3 block, cudaStream_t s, F f) {
    if (!emu_launch_check(grid, block, s)) return;
    emu_enqueue(s, [grid, block, f] {
        gridDim = grid;
        blockDim = block;
        for (unsigned bz = 0; bz < grid.z; bz++)
            for (unsigned by = 0; by < grid.y; by++)
                for (unsigned bx = 0; bx < grid.x; bx++) {
                    blockIdx = uint3{bx, by, bz};
                    for (unsigned tz = 0; tz < block.z; tz++)
                        for (unsigned ty = 0; ty < block.y; ty++)
                            for (unsigned tx = 0; tx < block.x; tx++) {
                                threadIdx = uint3{tx, ty, tz};
                                f();
                            }
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
