/* zeropad_cuda.cu: ZeroPadding2D on a GPU, NHWC (models/zeropad.c says
 * what the layer is; zeropad_cpu.c is the reference).
 *   x: (B, H, W, C) -> y: (B, H + 2 ph, W + 2 pw, C), zeros around x
 *   dx = the inner (H, W) window of dy
 * One thread per output element forward (a copy or a zero), one per input
 * element backward: copies only, the CPU's bits.
 * Relies on: kernels_cuda.h (the context's stream, the launch). */
#include "backends/cuda/kernels_cuda.h"

__global__ static void zeropad_forward_kernel(int n, int H, int W, int C, int ph, int pw,
                                              const float *__restrict__ x, float *__restrict__ y) {
    const int OH = H + 2 * ph, OW = W + 2 * pw;
    const size_t total = (size_t)n * OH * OW * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / C;
        const int c = (int)(i % C), ox = (int)(t % OW);
        t /= OW;
        const int oy = (int)(t % OH), b = (int)(t / OH);
        const int iy = oy - ph, ix = ox - pw;
        y[i] = iy >= 0 && iy < H && ix >= 0 && ix < W ? x[(((size_t)b * H + iy) * W + ix) * C + c]
                                                      : 0.0f;
    }
}

__global__ static void zeropad_backward_kernel(int n, int H, int W, int C, int ph, int pw,
                                               const float *__restrict__ dy,
                                               float *__restrict__ dx) {
    const int OH = H + 2 * ph, OW = W + 2 * pw;
    const size_t total = (size_t)n * H * W * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / C;
        const int c = (int)(i % C), ix = (int)(t % W);
        t /= W;
        const int iy = (int)(t % H), b = (int)(t / H);
        dx[i] = dy[(((size_t)b * OH + iy + ph) * OW + ix + pw) * C + c];
    }
}

static mr_status zeropad_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                 mr_dfloat *y) {
    if (batch == 0) return MR_OK;
    const int H = l->in.d[0], W = l->in.d[1], C = l->in.d[2];
    const size_t total = (size_t)batch * mr_shape_size(l->out);
    MR_CUDA_LAUNCH(zeropad_forward_kernel, mr_cuda_blocks(total), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, batch, H, W, C, l->cfg->pad[0], l->cfg->pad[1],
                   mr_dfloat_cptr(x), mr_dfloat_ptr(y));
    mr_cuda_launched(run->be, run->err, "zeropad_forward_kernel");
    return MR_OK;
}

static mr_status zeropad_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                  const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    if (dx == NULL || batch == 0) return MR_OK;
    const int H = l->in.d[0], W = l->in.d[1], C = l->in.d[2];
    const size_t total = (size_t)batch * mr_shape_size(l->in);
    MR_CUDA_LAUNCH(zeropad_backward_kernel, mr_cuda_blocks(total), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, batch, H, W, C, l->cfg->pad[0], l->cfg->pad[1],
                   mr_dfloat_cptr(dy), mr_dfloat_ptr(dx));
    mr_cuda_launched(run->be, run->err, "zeropad_backward_kernel");
    return MR_OK;
}

const mr_layer_kernels mr_zeropad_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,   .forward = zeropad_forward, .backward = zeropad_backward,
    .destroy = NULL, .describe = NULL,
    .fuses_relu = 0,
};
