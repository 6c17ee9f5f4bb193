/* relu_cpu.c: Keras's ReLU layer on the CPU (models/relu.c), a loop over
 * runtime/elementwise.h's mr_relu_layer, which the CUDA kernel shares.
 *   y = relu(x)    dx = dy * relu'(x) */
#include "runtime/elementwise.h"
#include "runtime/target_clones.h"
#include "backends/cpu/cpu_impl.h"

MR_AVX2_CLONES static mr_status relu_forward(mr_layer *l, mr_exec_ctx *run, int batch,
                                             const mr_dfloat *xd, mr_dfloat *yd) {
    (void)run;
    const float *x = mr_dfloat_cptr(xd);
    float *y = mr_dfloat_ptr(yd);
    const float mx = l->cfg->max_value, ns = l->cfg->negative_slope, t = l->cfg->threshold;
    const int64_t n = batch * mr_shape_size(l->in);
    for (int64_t i = 0; i < n; i++)
        y[i] = mr_relu_layer(x[i], mx, ns, t);
    return MR_OK;
}

MR_AVX2_CLONES static mr_status relu_backward(mr_layer *l, mr_exec_ctx *run, int batch,
                                              const mr_dfloat *xd, const mr_dfloat *y,
                                              mr_dfloat *dyd, mr_dfloat *dxd) {
    (void)run, (void)y;
    if (dxd == NULL) return MR_OK;
    const float *x = mr_dfloat_cptr(xd), *dy = mr_dfloat_cptr(dyd);
    float *dx = mr_dfloat_ptr(dxd);
    const float mx = l->cfg->max_value, ns = l->cfg->negative_slope, t = l->cfg->threshold;
    const int64_t n = batch * mr_shape_size(l->in);
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * mr_relu_layer_grad(x[i], mx, ns, t);
    return MR_OK;
}

const mr_layer_kernels mr_relu_cpu = {
    .forward = relu_forward,
    .backward = relu_backward,
};
