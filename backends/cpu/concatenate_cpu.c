/* concatenate_cpu.c: Concatenate on the CPU (models/concatenate.c says
 * what the layer is).
 *   x: (R, C1), x2: (R, C2) -> y: (R, C1 + C2), R = B x the other axes
 *   (B x H x W for an image): each row of y is x's row then x2's.
 *   backward: dx (R, C1) and dx2 (R, C2) are the two parts of dy's rows;
 *   either may be NULL (the model's input: no gradient wanted).
 * The rows and the two parts are copy_layout.h's mr_concat, the CUDA
 * kernels' layout too.
 * Relies on: layer.h (the layer contract, x2 and dx2), copy_layout.h. */
#include <string.h>

#include "models/copy_layout.h"
#include "backends/cpu/cpu_impl.h"

static mr_status concatenate_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                                     mr_dfloat *yd) {
    (void)run;
    const mr_concat g = mr_concat_layout(l, batch);
    const int64_t rows = g.rows;
    const int c1 = g.c1, c2 = g.c2;
    const float *x = mr_dfloat_cptr(xd), *x2 = mr_dfloat_cptr(l->x2);
    float *y = mr_dfloat_ptr(yd);
    for (int64_t i = 0; i < rows; i++) {
        memcpy(y + i * (c1 + c2), x + i * c1, sizeof(float) * (size_t)c1);
        memcpy(y + i * (c1 + c2) + c1, x2 + i * c2, sizeof(float) * (size_t)c2);
    }
    return MR_OK;
}

static mr_status concatenate_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                      const mr_dfloat *y, mr_dfloat *dyd, mr_dfloat *dxd) {
    (void)run, (void)x, (void)y;
    const mr_concat g = mr_concat_layout(l, batch);
    const int64_t rows = g.rows;
    const int c1 = g.c1, c2 = g.c2;
    const float *dy = mr_dfloat_cptr(dyd);
    float *dx = dxd ? mr_dfloat_ptr(dxd) : NULL, *dx2 = l->dx2 ? mr_dfloat_ptr(l->dx2) : NULL;
    for (int64_t i = 0; i < rows; i++) {
        if (dx) memcpy(dx + i * c1, dy + i * (c1 + c2), sizeof(float) * (size_t)c1);
        if (dx2) memcpy(dx2 + i * c2, dy + i * (c1 + c2) + c1, sizeof(float) * (size_t)c2);
    }
    return MR_OK;
}

const mr_layer_kernels mr_concatenate_cpu = {
    .forward = concatenate_forward,
    .backward = concatenate_backward,
};
