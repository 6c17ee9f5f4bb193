/* add_cpu.c: Add on the CPU (models/add.c says what the layer is).
 *   x, x2: (B, S) -> y: (B, S); dx = dx2 = dy
 * (with relu_fused, layer.h: y = relu(x + x2), dx = dx2 = dy * relu'(y)).
 * y may be x (in place): the model sums gradients with it (model.c). */
#include <string.h>

#include "runtime/elementwise.h"
#include "runtime/target_clones.h"
#include "backends/cpu/cpu_impl.h"

MR_AVX2_CLONES static mr_status add_forward(mr_layer *l, mr_exec_ctx *run, int batch,
                                            const mr_dfloat *xd, mr_dfloat *yd) {
    (void)run;
    const float *x = mr_dfloat_cptr(xd), *x2 = mr_dfloat_cptr(l->x2);
    float *y = mr_dfloat_ptr(yd);
    const int64_t n = (int64_t)batch * mr_shape_size(l->out);
    if (l->relu_fused) /* the ReLU [activation] after it, in this pass */
        for (int64_t i = 0; i < n; i++)
            y[i] = mr_relu(x[i] + x2[i]);
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] + x2[i];
    return MR_OK;
}

MR_AVX2_CLONES static mr_status add_backward(mr_layer *l, mr_exec_ctx *run, int batch,
                                             const mr_dfloat *x, const mr_dfloat *yd,
                                             mr_dfloat *dyd, mr_dfloat *dxd) {
    (void)run, (void)x;
    const int64_t n = (int64_t)batch * mr_shape_size(l->out);
    const size_t bytes = sizeof(float) * (size_t)n;
    const float *dy = mr_dfloat_cptr(dyd);
    float *dx = mr_dfloat_ptr(dxd), *dx2 = mr_dfloat_ptr(l->dx2);
    if (l->relu_fused) {
        /* a fused ReLU: dy masked by y > 0 into dx (or dx2), then copied
         * to the other, as the unfused layers would */
        const float *y = mr_dfloat_cptr(yd);
        float *g = dx != NULL ? dx : dx2 != NULL ? dx2 : NULL;
        if (g == NULL) return MR_OK;
        for (int64_t i = 0; i < n; i++)
            g[i] = dy[i] * mr_relu_grad(y[i]);
        if (dx2 != NULL && dx2 != g) memcpy(dx2, g, bytes);
        return MR_OK;
    }
    if (dx) memcpy(dx, dy, bytes);
    if (dx2) memcpy(dx2, dy, bytes);
    return MR_OK;
}

const mr_layer_kernels mr_add_cpu = {
    .forward = add_forward,
    .backward = add_backward,
    .fuses_relu = 1,
};
