/* dense_cuda.cu: Dense on a GPU (dense.c says what the layer is;
 * dense_cpu.c is the reference).
 *   x: (B, in)   W "kernel": (in, units)   b "bias": (units)   y: (B, units)
 * The three products are mr_gemm (cuBLAS, row-major: backend_cuda.c); the
 * bias and the activation are activation_cuda.h's one pass, the bias
 * gradient a small kernel that also takes dy through an activation that
 * needs only y (relu...: one pass, not two). The bias gradient sums each
 * column of dy row by row in one thread (no atomics), so it repeats
 * bitwise and adds in the CPU's order.
 * Relies on: kernels_cuda.h, activation_cuda.h, runtime/backend.h (mr_gemm). */
#include "backends/cuda/activation_cuda.h"
#include "backends/cuda/kernels_cuda.h"

/* db (out) += column sums of dy (rows, out): one thread per column,
 * rows in order (y NULL); with y (rows, out), the layer's output, dy
 * first becomes dy * act'(y) in place (activation_cuda.h's formula) and
 * its column sums are of that */
__global__ static void bias_grad_kernel(float *__restrict__ db, float *__restrict__ dy,
                                        const float *__restrict__ y, mr_activation act, int rows,
                                        int out) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < out; j += gridDim.x * blockDim.x) {
        float acc = db[j];
        for (int i = 0; i < rows; i++) {
            const int64_t k = (int64_t)i * out + j;
            if (y != NULL) dy[k] = dy[k] * mr_cuda_act_grad_y(act, y[k]);
            acc += dy[k];
        }
        db[j] = acc;
    }
}

/* 1 where act's gradient reads only y and may ride along the bias
 * gradient's pass (not linear: nothing to do; not softmax: per row; not
 * gelu, swish: through x) */
static int grad_through_y(mr_activation act) {
    return act != MR_ACTIVATION_LINEAR && act != MR_ACTIVATION_SOFTMAX &&
           !mr_activation_needs_input(act);
}

static mr_status dense_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                               mr_dfloat *y) {
    mr_backend *be = run->be;
    int in = l->in.d[0], out = l->out.d[0];
    if (batch == 0) return MR_OK;
    /* y (B, units) = x (B, in) W (in, units), then + bias and the
     * activation in one pass (cuBLAS with beta = 1 would add the bias
     * after the product too: the same sums) */
    MR_CHECK(
        mr_gemm(be, 0, 0, batch, out, in, 1.0f, x, in, l->w[0].data, out, 0.0f, y, out, run->err));
    const float *bias = l->n_weights > 1 ? mr_dfloat_cptr(l->w[1].data) : NULL;
    return mr_cuda_bias_activation_forward(be, mr_layer_activation(l), mr_dfloat_ptr(y), bias,
                                           batch, out, run->err);
}

static mr_status dense_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    mr_backend *be = run->be;
    int in = l->in.d[0], out = l->out.d[0];
    if (batch == 0) return MR_OK;
    /* dy (B, units) becomes dL/dz through the activation (gelu, swish:
     * through z = x W + b, recomputed into scratch (B, units) as forward
     * computes it; relu and the like: in the bias gradient's pass, where
     * there is a bias) */
    const mr_activation act = mr_layer_activation(l);
    const int fused = l->n_weights > 1 && grad_through_y(act);
    if (mr_activation_needs_input(act)) {
        MR_CHECK(mr_gemm(be, 0, 0, batch, out, in, 1.0f, x, in, l->w[0].data, out, 0.0f,
                         run->scratch, out, run->err));
        const float *bias = l->n_weights > 1 ? mr_dfloat_cptr(l->w[1].data) : NULL;
        MR_CHECK(mr_cuda_bias_activation_forward(
            be, MR_ACTIVATION_LINEAR, mr_dfloat_ptr(run->scratch), bias, batch, out, run->err));
        MR_CHECK(mr_cuda_activation_backward_x(be, mr_layer_activation(l),
                                               mr_dfloat_cptr(run->scratch), mr_dfloat_ptr(dy),
                                               (size_t)batch * out, run->err));
    } else if (!fused) {
        MR_CHECK(mr_cuda_activation_backward(be, act, mr_dfloat_cptr(y), mr_dfloat_ptr(dy), batch,
                                             out, run->err));
    }
    if (l->n_weights > 1) { /* before dW's product: it reads dz */
        MR_CUDA_LAUNCH(bias_grad_kernel, mr_cuda_blocks((size_t)out), MR_CUDA_THREADS,
                       mr_cuda(be)->stream, mr_dfloat_ptr(l->w[1].grad), mr_dfloat_ptr(dy),
                       fused ? mr_dfloat_cptr(y) : NULL, act, batch, out);
        mr_cuda_launched(be, run->err, "bias_grad_kernel");
    }
    /* dW (in, units) += x^T (in, B) dz (B, units) */
    MR_CHECK(
        mr_gemm(be, 1, 0, in, out, batch, 1.0f, x, in, dy, out, 1.0f, l->w[0].grad, out, run->err));
    /* dx (B, in) = dz (B, units) W^T (units, in); cuBLAS never reads C
     * with beta 0, so dx needs no zeroing first */
    if (dx)
        MR_CHECK(mr_gemm(be, 0, 1, batch, in, out, 1.0f, dy, out, l->w[0].data, out, 0.0f, dx, in,
                         run->err));
    return MR_OK;
}

const mr_layer_kernels mr_dense_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,    .forward = dense_forward, .backward = dense_backward, .destroy = NULL,
    .describe = NULL, .fuses_relu = 0,          .device_order = NULL,
};
