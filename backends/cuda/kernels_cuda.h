/* kernels_cuda.h: the CUDA kernels of models/ (kernels.h): one table per
 * layer kind, the loss, the optimizer and the synthetic input, each in
 * backends/cuda/<name>_cuda.cu, gathered by kernels_cuda.c. Their tensors
 * are device memory of a CUDA context (backends/cuda/cuda_impl.h): a .cu
 * file turns its mr_dfloat * arguments into float * (runtime/dmem_impl.h)
 * for its kernels, queues everything on the context's compute stream and
 * checks every call (MR_CUDA_TRY; a kernel launch by mr_cuda_launched).
 * Per-element math comes from runtime/elementwise.h, shared with the CPU
 * loops. Only kernels_cuda.c and the *_cuda.cu files include this header. */
#ifndef MR_KERNELS_CUDA_H
#define MR_KERNELS_CUDA_H

#include "backends/cuda/cuda_impl.h"
#include "runtime/hd.h"
#include "runtime/dmem_impl.h"
#include "models/copy_layout.h"
#include "models/kernels.h"

MR_C_BEGIN

/* Each layer kind's kernels, mr_<kernels>_cuda of each line of
 * models/layer_kinds.def, in backends/cuda/<kernels>_cuda.cu (a table two kinds
 * share is declared twice, which C allows). */
#define MR_LAYER_KIND(ENUM, section, kernels) extern const mr_layer_kernels mr_##kernels##_cuda;
#include "models/layer_kinds.def"
#undef MR_LAYER_KIND

extern const mr_loss_kernels mr_loss_cuda;           /* loss_cuda.cu */
extern const mr_optimizer_kernels mr_optimizer_cuda; /* optimizer_cuda.cu */
extern const mr_input_kernels mr_input_cuda;         /* synthetic_cuda.cu */

/* y (n, out_h, out_w, C) = x (n, in_h, in_w, C) inside p's zero border,
 * and its gradient's way back: dx (n, in_h, in_w, C) = the image part of
 * dy (n, out_h, out_w, C). On be's compute stream (zeropad_cuda.cu:
 * [zeropad], and conv2d_cuda.cu's own padding). */
mr_status mr_cuda_pad2d(mr_backend *be, const mr_pad2d *p, int n, int C, const float *x, float *y,
                        mr_error *err);
mr_status mr_cuda_crop2d(mr_backend *be, const mr_pad2d *p, int n, int C, const float *dy,
                         float *dx, mr_error *err);

/* Launches __global__ `kernel` over `grid` blocks of `block` threads on
 * `stream`, with the kernel's arguments after. Under nvcc it is the
 * <<<grid, block, 0, stream>>> launch; compiled as C++ for the emulated
 * GPUs of the tests (meson -Dgpu_emulation=true, tests/gpu_emu/) it is the
 * emulator's launcher, which queues the kernel on the stream's worker
 * thread. The only place a kernel launch is spelt. */
#ifdef __CUDACC__
#define MR_CUDA_LAUNCH(kernel, grid, block, stream, ...)                                           \
    kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#else
#define MR_CUDA_LAUNCH(kernel, grid, block, stream, ...)                                           \
    mr_emu_launch((grid), (block), (stream), kernel, __VA_ARGS__)
#endif

/* Threads per block of the elementwise kernels, and the blocks of a
 * grid-stride loop over n elements (capped: each thread then takes
 * several elements, and a grid never exceeds the device's limit). */
#define MR_CUDA_THREADS 256
static inline unsigned mr_cuda_blocks(size_t n) {
    size_t b = (n + MR_CUDA_THREADS - 1) / MR_CUDA_THREADS;
    return b == 0 ? 1u : b > 65536 ? 65536u : (unsigned)b;
}

/* After a kernel launch: the launch's own error (bad configuration), or
 * MR_OK. Errors during the kernel surface at the next synchronising call. */
#define mr_cuda_launched(be, err, what)                                                            \
    do {                                                                                           \
        cudaError_t mr_e_ = cudaGetLastError();                                                    \
        if (mr_e_ != cudaSuccess) return mr_cuda_fail((be), (err), mr_e_, (what));                 \
    } while (0)

MR_C_END

#endif
