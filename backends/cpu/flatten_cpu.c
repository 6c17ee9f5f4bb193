/* flatten_cpu.c: Flatten on the CPU: a copy (the model skips even that,
 * flatten.c's .view; these serve callers with separate buffers). */
#include <string.h>

#include "backends/cpu/cpu_impl.h"

static mr_status flatten_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                 mr_dfloat *y) {
    (void)run;
    memcpy(mr_dfloat_ptr(y), mr_dfloat_cptr(x),
           sizeof(float) * (size_t)batch * (size_t)mr_shape_size(l->in));
    return MR_OK;
}

static mr_status flatten_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                  const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)run, (void)x, (void)y;
    if (dx)
        memcpy(mr_dfloat_ptr(dx), mr_dfloat_cptr(dy),
               sizeof(float) * (size_t)batch * (size_t)mr_shape_size(l->in));
    return MR_OK;
}

const mr_layer_kernels mr_flatten_cpu = {
    .forward = flatten_forward,
    .backward = flatten_backward,
};
