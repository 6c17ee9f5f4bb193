/* dense_cpu.c: Dense on the CPU (dense.c says what the layer is).
 *   x: (B, in)   W "kernel": (in, units)   b "bias": (units)   y: (B, units)
 * Forward and both backward products are single SGEMM calls; the bias and
 * the activation are loops around them. */
#include <string.h>

#include "backends/cpu/cpu_impl.h"
#include "runtime/target_clones.h"

/* y (B, units) = x W + b, before the activation */
static void dense_linear(const mr_layer *l, int batch, const float *x, float *y) {
    const float *w = mr_dfloat_cptr(l->w[0].data);
    int in = l->in.d[0], out = l->out.d[0];
    if (l->n_weights > 1) {
        /* y = bias broadcast, then y += x W (beta = 1): saves a pass over y */
        const float *b = mr_dfloat_cptr(l->w[1].data);
        for (int i = 0; i < batch; i++)
            memcpy(y + (int64_t)i * out, b, sizeof(float) * (size_t)out);
        mr_cpu_gemm(0, 0, batch, out, in, 1.0f, x, in, w, out, 1.0f, y, out);
    } else {
        mr_cpu_gemm(0, 0, batch, out, in, 1.0f, x, in, w, out, 0.0f, y, out);
    }
}

MR_AVX2_CLONES static mr_status dense_forward(mr_layer *l, mr_exec_ctx *run, int batch,
                                              const mr_dfloat *xd, mr_dfloat *yd) {
    (void)run;
    float *y = mr_dfloat_ptr(yd);
    dense_linear(l, batch, mr_dfloat_cptr(xd), y);
    mr_cpu_activation_forward(mr_layer_activation(l), y, y, batch, l->out.d[0]);
    return MR_OK;
}

MR_AVX2_CLONES static mr_status dense_backward(mr_layer *l, mr_exec_ctx *run, int batch,
                                               const mr_dfloat *xd, const mr_dfloat *yd,
                                               mr_dfloat *dyd, mr_dfloat *dxd) {
    const float *x = mr_dfloat_cptr(xd), *y = mr_dfloat_cptr(yd), *w = mr_dfloat_cptr(l->w[0].data);
    float *dy = mr_dfloat_ptr(dyd), *dx = mr_dfloat_ptr(dxd);
    int in = l->in.d[0], out = l->out.d[0];
    /* dy (B, units) becomes dL/dz through the activation (gelu, swish:
     * through z, recomputed into scratch (B, units)) */
    if (mr_activation_needs_input(mr_layer_activation(l))) {
        float *z = mr_dfloat_ptr(run->scratch);
        dense_linear(l, batch, x, z);
        mr_cpu_activation_backward_x(mr_layer_activation(l), z, dy, dy, (int64_t)batch * out);
    } else {
        mr_cpu_activation_backward(mr_layer_activation(l), y, dy, dy, batch, out);
    }
    /* dW (in, units) += x^T (in, B) dz (B, units) */
    mr_cpu_gemm(1, 0, in, out, batch, 1.0f, x, in, dy, out, 1.0f, mr_dfloat_ptr(l->w[0].grad), out);
    if (l->n_weights > 1) {
        float *db = mr_dfloat_ptr(l->w[1].grad);
        for (int i = 0; i < batch; i++) {
            const float *row = dy + (int64_t)i * out;
            for (int j = 0; j < out; j++)
                db[j] += row[j];
        }
    }
    /* dx (B, in) = dz (B, units) W^T (units, in) */
    if (dx) {
        /* zero dx ourselves and accumulate (beta = 1): OpenBLAS's own beta = 0
         * pass over C is slower than memset */
        memset(dx, 0, sizeof(float) * (size_t)batch * (size_t)in);
        mr_cpu_gemm(0, 1, batch, in, out, 1.0f, dy, out, w, out, 1.0f, dx, in);
    }
    return MR_OK;
}

const mr_layer_kernels mr_dense_cpu = {
    .forward = dense_forward,
    .backward = dense_backward,
};
