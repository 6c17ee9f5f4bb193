/* zeropad_cuda.cu: ZeroPadding2D on a GPU, NHWC (models/zeropad.c says
 * what the layer is; zeropad_cpu.c is the reference), and the padding and
 * cropping of images that conv2d_cuda.cu runs for Keras's asymmetric SAME
 * padding (kernels_cuda.h: mr_cuda_pad2d, mr_cuda_crop2d).
 *   x: (B, H, W, C) -> y: (B, H + 2 ph, W + 2 pw, C), zeros around x
 *   dx = the inner (H, W) window of dy
 * One thread per output element forward (a copy or a zero), one per input
 * element backward: copies only, at the places of copy_layout.h's
 * mr_pad2d, the CPU's layout: the CPU's bits.
 * Relies on: kernels_cuda.h (the context's stream, the launch),
 * copy_layout.h. */
#include "backends/cuda/kernels_cuda.h"
#include "models/copy_layout.h"

/* y (n, out_h, out_w, C) = x (n, in_h, in_w, C) inside p's zero border */
__global__ static void pad2d_kernel(mr_pad2d p, int n, int C, const float *__restrict__ x,
                                    float *__restrict__ y) {
    const size_t total = (size_t)n * p.out_h * p.out_w * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / C;
        const int c = (int)(i % C), ox = (int)(t % p.out_w);
        t /= p.out_w;
        const int oy = (int)(t % p.out_h);
        const size_t b = t / p.out_h;
        const int64_t src = mr_pad2d_inner(&p, oy, ox);
        y[i] = src >= 0 ? x[(b * p.in_h * p.in_w + (size_t)src) * C + c] : 0.0f;
    }
}

/* dx (n, in_h, in_w, C) = the image inside p's border of dy (n, out_h, out_w, C) */
__global__ static void crop2d_kernel(mr_pad2d p, int n, int C, const float *__restrict__ dy,
                                     float *__restrict__ dx) {
    const size_t total = (size_t)n * p.in_h * p.in_w * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / C;
        const int c = (int)(i % C), ix = (int)(t % p.in_w);
        t /= p.in_w;
        const int iy = (int)(t % p.in_h);
        const size_t b = t / p.in_h;
        dx[i] = dy[(b * p.out_h * p.out_w + (size_t)mr_pad2d_outer(&p, iy, ix)) * C + c];
    }
}

mr_status mr_cuda_pad2d(mr_backend *be, const mr_pad2d *p, int n, int C, const float *x, float *y,
                        mr_error *err) {
    const size_t total = (size_t)n * p->out_h * p->out_w * C;
    if (total == 0) return MR_OK;
    MR_CUDA_LAUNCH(pad2d_kernel, mr_cuda_blocks(total), MR_CUDA_THREADS, mr_cuda(be)->stream, *p, n,
                   C, x, y);
    mr_cuda_launched(be, err, "pad2d_kernel");
    return MR_OK;
}

mr_status mr_cuda_crop2d(mr_backend *be, const mr_pad2d *p, int n, int C, const float *dy,
                         float *dx, mr_error *err) {
    const size_t total = (size_t)n * p->in_h * p->in_w * C;
    if (total == 0) return MR_OK;
    MR_CUDA_LAUNCH(crop2d_kernel, mr_cuda_blocks(total), MR_CUDA_THREADS, mr_cuda(be)->stream, *p,
                   n, C, dy, dx);
    mr_cuda_launched(be, err, "crop2d_kernel");
    return MR_OK;
}

static mr_status zeropad_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                 mr_dfloat *y) {
    const mr_pad2d p = mr_zeropad_layout(l);
    return mr_cuda_pad2d(run->be, &p, batch, l->in.d[2], mr_dfloat_cptr(x), mr_dfloat_ptr(y),
                         run->err);
}

static mr_status zeropad_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                  const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    if (dx == NULL) return MR_OK;
    const mr_pad2d p = mr_zeropad_layout(l);
    return mr_cuda_crop2d(run->be, &p, batch, l->in.d[2], mr_dfloat_cptr(dy), mr_dfloat_ptr(dx),
                          run->err);
}

const mr_layer_kernels mr_zeropad_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,        .forward = zeropad_forward, .backward = zeropad_backward,
    .destroy = NULL,      .describe = NULL,           .fuses_relu = 0,
    .device_order = NULL,
};
