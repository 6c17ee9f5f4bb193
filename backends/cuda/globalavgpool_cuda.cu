/* globalavgpool_cuda.cu: GlobalAveragePooling2D on a GPU, NHWC
 * (models/globalavgpool.c says what the layer is; globalavgpool_cpu.c is
 * the reference).
 *   x: (B, H, W, C) -> y: (B, C), y = mean of x over H and W
 *   dx[b, h, w, c] = dy[b, c] / (H W)
 * Forward: one thread per (b, c), summing the pixels in the CPU's order,
 * then times 1 / (H W) as the CPU; __fadd_rn / __fmul_rn keep nvcc from
 * contracting them into FMAs, so the bits are the CPU's.
 * Relies on: kernels_cuda.h (the context's stream, the launch). */
#include "backends/cuda/kernels_cuda.h"

__global__ static void gap_forward_kernel(int n, int hw, int C, float inv,
                                          const float *__restrict__ x, float *__restrict__ y) {
    const size_t total = (size_t)n * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t b = i / C, c = i % C;
        const float *xb = x + b * hw * C + c;
        float s = 0.0f;
        for (int p = 0; p < hw; p++)
            s = __fadd_rn(s, xb[(size_t)p * C]);
        y[i] = __fmul_rn(s, inv);
    }
}

__global__ static void gap_backward_kernel(int n, int hw, int C, float inv,
                                           const float *__restrict__ dy, float *__restrict__ dx) {
    const size_t total = (size_t)n * hw * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t c = i % C, b = i / ((size_t)hw * C);
        dx[i] = __fmul_rn(dy[b * C + c], inv);
    }
}

static mr_status gap_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                             mr_dfloat *y) {
    if (batch == 0) return MR_OK;
    const int hw = l->in.d[0] * l->in.d[1], C = l->in.d[2];
    const float inv = 1.0f / (float)hw;
    MR_CUDA_LAUNCH(gap_forward_kernel, mr_cuda_blocks((size_t)batch * C), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, batch, hw, C, inv, mr_dfloat_cptr(x),
                   mr_dfloat_ptr(y));
    mr_cuda_launched(run->be, run->err, "gap_forward_kernel");
    return MR_OK;
}

static mr_status gap_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                              const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    if (dx == NULL || batch == 0) return MR_OK;
    const int hw = l->in.d[0] * l->in.d[1], C = l->in.d[2];
    const float inv = 1.0f / (float)hw;
    MR_CUDA_LAUNCH(gap_backward_kernel, mr_cuda_blocks((size_t)batch * hw * C), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, batch, hw, C, inv, mr_dfloat_cptr(dy),
                   mr_dfloat_ptr(dx));
    mr_cuda_launched(run->be, run->err, "gap_backward_kernel");
    return MR_OK;
}

const mr_layer_kernels mr_globalavgpool_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,    .forward = gap_forward, .backward = gap_backward, .destroy = NULL,
    .describe = NULL, .fuses_relu = 0,        .device_order = NULL,
};
