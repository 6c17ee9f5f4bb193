/* synthetic_cuda.cu: a synthetic batch made on the GPU (models/kernels.h,
 * mr_input_kernels; synthetic_cpu.c is the reference). With --synthetic a
 * GPU replica gets only its shard's example ids from the host (8 bytes an
 * example, not its values): the benchmark measures training, not the copy
 * of random images (ResNet-50's are 602 KB each).
 *   rows: (count) example ids, device memory -> x: (count, row) floats
 * One thread per value; Philox (runtime/rng.h, mr_synthetic_byte) gives
 * the host's bytes, and (float)byte * scale its floats.
 * Relies on: kernels_cuda.h (the context's stream, the launch). */
#include "backends/cuda/kernels_cuda.h"
#include "runtime/rng.h"

/* x[b][j] = byte(rows[b] * row + j) * scale, over count x row values */
__global__ static void synthetic_kernel(size_t total, int64_t row, uint32_t k0, uint32_t k1,
                                        float scale, const int64_t *__restrict__ rows,
                                        float *__restrict__ x) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int64_t b = (int64_t)(i / (size_t)row), j = (int64_t)(i % (size_t)row);
        x[i] = __fmul_rn((float)mr_synthetic_byte(k0, k1, rows[b] * row + j), scale);
    }
}

static mr_status synthetic_cuda(mr_backend *be, mr_dfloat *x, const int64_t *rows, int count,
                                int64_t row, uint32_t k0, uint32_t k1, float scale, mr_error *err) {
    const size_t total = (size_t)count * (size_t)row;
    if (total == 0) return MR_OK;
    MR_CUDA_LAUNCH(synthetic_kernel, mr_cuda_blocks(total), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   total, row, k0, k1, scale, rows, mr_dfloat_ptr(x));
    mr_cuda_launched(be, err, "synthetic_kernel");
    return MR_OK;
}

const mr_input_kernels mr_input_cuda = {.synthetic = synthetic_cuda};
