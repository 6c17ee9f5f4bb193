/* normalization_cuda.cu: Normalization on a GPU (models/normalization.c
 * says what the layer is; normalization_cpu.c is the reference).
 *   x: (B, ..., C) -> y = (x - mean[c]) / std[c];  dx = dy / std[c]
 *   std[c] = max(sqrt(variance[c]), 1e-7); mean, variance: state (C)
 * One thread per element, over elementwise.h's mr_normalize (IEEE sqrtf,
 * __fsub_rn, __fdiv_rn): the CPU's bits.
 * Relies on: kernels_cuda.h (the context's stream, the launch). */
#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"

/* y (total) from x; mean NULL: the backward, dx = dy / std */
__global__ static void normalization_kernel(size_t total, int C, const float *__restrict__ mean,
                                            const float *__restrict__ var,
                                            const float *__restrict__ in, float *__restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % C);
        const float std = mr_normalize_std(var[c]);
        out[i] = mean ? mr_normalize(in[i], mean[c], std) : mr_normalize_grad(in[i], std);
    }
}

static mr_status normalization_pass(mr_layer *l, mr_exec_ctx *run, int batch, const float *mean,
                                    const mr_dfloat *in, mr_dfloat *out) {
    const size_t total = (size_t)batch * (size_t)mr_shape_size(l->in);
    if (total == 0) return MR_OK;
    MR_CUDA_LAUNCH(normalization_kernel, mr_cuda_blocks(total), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, total, (int)l->w[0].size, mean,
                   mr_dfloat_cptr(l->w[1].data), mr_dfloat_cptr(in), mr_dfloat_ptr(out));
    mr_cuda_launched(run->be, run->err, "normalization_kernel");
    return MR_OK;
}

static mr_status normalization_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                       mr_dfloat *y) {
    return normalization_pass(l, run, batch, mr_dfloat_cptr(l->w[0].data), x, y);
}

static mr_status normalization_backward(mr_layer *l, mr_exec_ctx *run, int batch,
                                        const mr_dfloat *x, const mr_dfloat *y, mr_dfloat *dy,
                                        mr_dfloat *dx) {
    (void)x, (void)y;
    if (dx == NULL) return MR_OK;
    return normalization_pass(l, run, batch, NULL, dy, dx);
}

const mr_layer_kernels mr_normalization_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,
    .forward = normalization_forward,
    .backward = normalization_backward,
    .destroy = NULL,
    .describe = NULL,
    .fuses_relu = 0,
    .device_order = NULL,
};
