/* add_cuda.cu: Add on a GPU (models/add.c says what the layer is;
 * add_cpu.c is the reference).
 *   x, x2: (B, S) -> y: (B, S); dx = dx2 = dy
 * (with relu_fused, layer.h: y = relu(x + x2), dx = dx2 = dy * relu'(y),
 * elementwise.h's mr_relu and mr_relu_grad: the activation kernel's math,
 * so the bits are those of the unfused layers).
 * y may be x (in place): the model sums gradients with it (model.c). The
 * sum goes through __fadd_rn, the CPU's bits. Backward writes both
 * gradients in one pass over dy, no copies.
 * Relies on: kernels_cuda.h (the context's stream, the launch). */
#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"

/* y (n) = a + b, elementwise, through a ReLU where relu; y may be a */
__global__ static void add_kernel(size_t n, const float *a, const float *b, float *y, int relu) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float v = __fadd_rn(a[i], b[i]);
        y[i] = relu ? mr_relu(v) : v;
    }
}

/* dx, dx2 (n) = dy, masked by relu'(y) where y is not NULL (a fused
 * ReLU's output); either may be NULL (not wanted) */
__global__ static void add_backward_kernel(size_t n, const float *dy, const float *y, float *dx,
                                           float *dx2) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float g = y != NULL ? dy[i] * mr_relu_grad(y[i]) : dy[i];
        if (dx != NULL) dx[i] = g;
        if (dx2 != NULL) dx2[i] = g;
    }
}

static mr_status add_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                             mr_dfloat *y) {
    const size_t n = (size_t)batch * (size_t)mr_shape_size(l->out);
    if (n == 0) return MR_OK;
    MR_CUDA_LAUNCH(add_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(run->be)->stream, n,
                   mr_dfloat_cptr(x), mr_dfloat_cptr(l->x2), mr_dfloat_ptr(y), l->relu_fused);
    mr_cuda_launched(run->be, run->err, "add_kernel");
    return MR_OK;
}

static mr_status add_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                              const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x;
    const size_t n = (size_t)batch * (size_t)mr_shape_size(l->out);
    float *g = dx != NULL ? mr_dfloat_ptr(dx) : NULL;
    float *g2 = l->dx2 != NULL ? mr_dfloat_ptr(l->dx2) : NULL;
    /* a gradient that is dy's own buffer already holds it (unfused) */
    if (!l->relu_fused && g == mr_dfloat_cptr(dy)) g = NULL;
    if (!l->relu_fused && g2 == mr_dfloat_cptr(dy)) g2 = NULL;
    if (n == 0 || (g == NULL && g2 == NULL)) return MR_OK;
    MR_CUDA_LAUNCH(add_backward_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, n, mr_dfloat_cptr(dy),
                   l->relu_fused ? mr_dfloat_cptr(y) : NULL, g, g2);
    mr_cuda_launched(run->be, run->err, "add_backward_kernel");
    return MR_OK;
}

const mr_layer_kernels mr_add_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,    .forward = add_forward, .backward = add_backward, .destroy = NULL,
    .describe = NULL, .fuses_relu = 1,        .device_order = NULL,
};
