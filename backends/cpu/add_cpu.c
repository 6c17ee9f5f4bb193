/* add_cpu.c: Add on the CPU (models/add.c says what the layer is).
 *   x, x2: (B, S) -> y: (B, S); dx = dx2 = dy
 * y may be x (in place): the model sums gradients with it (model.c). */
#include <string.h>

#include "runtime/target_clones.h"
#include "backends/cpu/cpu_impl.h"

MR_AVX2_CLONES static mr_status add_forward(mr_layer *l, mr_exec_ctx *run, int batch,
                                            const mr_dfloat *xd, mr_dfloat *yd) {
    (void)run;
    const float *x = mr_dfloat_cptr(xd), *x2 = mr_dfloat_cptr(l->x2);
    float *y = mr_dfloat_ptr(yd);
    const int64_t n = (int64_t)batch * mr_shape_size(l->out);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] + x2[i];
    return MR_OK;
}

static mr_status add_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                              const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)run, (void)x, (void)y;
    const size_t bytes = sizeof(float) * (size_t)batch * (size_t)mr_shape_size(l->out);
    if (dx) memcpy(mr_dfloat_ptr(dx), mr_dfloat_cptr(dy), bytes);
    if (l->dx2) memcpy(mr_dfloat_ptr(l->dx2), mr_dfloat_cptr(dy), bytes);
    return MR_OK;
}

const mr_layer_kernels mr_add_cpu = {
    .forward = add_forward,
    .backward = add_backward,
};
