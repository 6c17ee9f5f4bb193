/* globalmaxpool_cuda.cu: GlobalMaxPooling2D on a GPU, NHWC
 * (models/globalmaxpool.c says what the layer is; globalmaxpool_cpu.c is
 * the reference).
 *   x: (B, H, W, C) -> y: (B, C), y = max of x over H and W
 *   dx[b, h, w, c] = dy[b, c] / k where x = y (k such pixels), else 0
 * One thread per (b, c) for both: a maximum is exact in any order, and
 * backward counts the ties before it writes, as the CPU.
 * Relies on: kernels_cuda.h (the context's stream, the launch). */
#include "backends/cuda/kernels_cuda.h"

__global__ static void gmp_forward_kernel(int n, int hw, int C, const float *__restrict__ x,
                                          float *__restrict__ y) {
    const size_t total = (size_t)n * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t b = i / C, c = i % C;
        const float *xb = x + b * hw * C + c;
        float m = xb[0];
        for (int p = 1; p < hw; p++)
            m = xb[(size_t)p * C] > m ? xb[(size_t)p * C] : m;
        y[i] = m;
    }
}

__global__ static void gmp_backward_kernel(int n, int hw, int C, const float *__restrict__ x,
                                           const float *__restrict__ y,
                                           const float *__restrict__ dy, float *__restrict__ dx) {
    const size_t total = (size_t)n * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t b = i / C, c = i % C;
        const float *xb = x + b * hw * C + c;
        float *db = dx + b * hw * C + c;
        int k = 0;
        for (int p = 0; p < hw; p++)
            k += xb[(size_t)p * C] == y[i];
        const float g = __fdiv_rn(dy[i], (float)(k > 0 ? k : 1));
        for (int p = 0; p < hw; p++)
            db[(size_t)p * C] = xb[(size_t)p * C] == y[i] ? g : 0.0f;
    }
}

static mr_status gmp_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                             mr_dfloat *y) {
    if (batch == 0) return MR_OK;
    const int hw = l->in.d[0] * l->in.d[1], C = l->in.d[2];
    MR_CUDA_LAUNCH(gmp_forward_kernel, mr_cuda_blocks((size_t)batch * C), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, batch, hw, C, mr_dfloat_cptr(x), mr_dfloat_ptr(y));
    mr_cuda_launched(run->be, run->err, "gmp_forward_kernel");
    return MR_OK;
}

static mr_status gmp_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                              const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    if (dx == NULL || batch == 0) return MR_OK;
    const int hw = l->in.d[0] * l->in.d[1], C = l->in.d[2];
    MR_CUDA_LAUNCH(gmp_backward_kernel, mr_cuda_blocks((size_t)batch * C), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, batch, hw, C, mr_dfloat_cptr(x), mr_dfloat_cptr(y),
                   mr_dfloat_cptr(dy), mr_dfloat_ptr(dx));
    mr_cuda_launched(run->be, run->err, "gmp_backward_kernel");
    return MR_OK;
}

const mr_layer_kernels mr_globalmaxpool_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,    .forward = gmp_forward, .backward = gmp_backward, .destroy = NULL,
    .describe = NULL, .fuses_relu = 0,        .device_order = NULL,
};
