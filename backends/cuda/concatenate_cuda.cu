/* concatenate_cuda.cu: Concatenate on a GPU (models/concatenate.c says
 * what the layer is; concatenate_cpu.c is the reference).
 *   x: (R, C1), x2: (R, C2) -> y: (R, C1 + C2), R = B x the other axes.
 * One thread per element of y (forward) or of dy (backward, which writes
 * it to dx or dx2, either of which may be NULL): copies only, so the bits
 * are the CPU's, at the places of copy_layout.h's mr_concat, the CPU's
 * layout.
 * Relies on: kernels_cuda.h (the context's stream, the launch),
 * copy_layout.h. */
#include "backends/cuda/kernels_cuda.h"
#include "models/copy_layout.h"

/* y (rows, c1 + c2) from x (rows, c1) and x2 (rows, c2) */
__global__ static void concatenate_kernel(size_t n, int c1, int c2, const float *x, const float *x2,
                                          float *y) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / (size_t)(c1 + c2);
        const int c = (int)(i % (size_t)(c1 + c2));
        y[i] = c < c1 ? x[row * c1 + c] : x2[row * c2 + (c - c1)];
    }
}

/* dx (rows, c1) and dx2 (rows, c2) from dy (rows, c1 + c2); NULL: skipped */
__global__ static void split_kernel(size_t n, int c1, int c2, const float *dy, float *dx,
                                    float *dx2) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / (size_t)(c1 + c2);
        const int c = (int)(i % (size_t)(c1 + c2));
        if (c < c1) {
            if (dx) dx[row * c1 + c] = dy[i];
        } else if (dx2) {
            dx2[row * c2 + (c - c1)] = dy[i];
        }
    }
}

static mr_status concatenate_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                     mr_dfloat *y) {
    const mr_concat g = mr_concat_layout(l, batch);
    const size_t n = (size_t)g.rows * (size_t)(g.c1 + g.c2);
    if (n == 0) return MR_OK;
    MR_CUDA_LAUNCH(concatenate_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(run->be)->stream,
                   n, g.c1, g.c2, mr_dfloat_cptr(x), mr_dfloat_cptr(l->x2), mr_dfloat_ptr(y));
    mr_cuda_launched(run->be, run->err, "concatenate_kernel");
    return MR_OK;
}

static mr_status concatenate_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                      const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    const mr_concat g = mr_concat_layout(l, batch);
    const size_t n = (size_t)g.rows * (size_t)(g.c1 + g.c2);
    if (n == 0 || (dx == NULL && l->dx2 == NULL)) return MR_OK;
    MR_CUDA_LAUNCH(split_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(run->be)->stream, n,
                   g.c1, g.c2, mr_dfloat_cptr(dy), dx ? mr_dfloat_ptr(dx) : NULL,
                   l->dx2 ? mr_dfloat_ptr(l->dx2) : NULL);
    mr_cuda_launched(run->be, run->err, "concatenate_split_kernel");
    return MR_OK;
}

const mr_layer_kernels mr_concatenate_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,
    .forward = concatenate_forward,
    .backward = concatenate_backward,
    .destroy = NULL,
    .describe = NULL,
    .fuses_relu = 0,
    .device_order = NULL,
};
