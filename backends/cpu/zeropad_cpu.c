/* zeropad_cpu.c: ZeroPadding2D on the CPU, NHWC (models/zeropad.c says
 * what the layer is).
 *   x: (B, H, W, C) -> y: (B, top + H + bottom, left + W + right, C), zeros around x
 *   dx = the inner (H, W) window of dy
 * Where each row of x goes is copy_layout.h's mr_pad2d, the CUDA kernels'
 * layout too.
 * Relies on: layer.h (the layer contract), copy_layout.h. */
#include <string.h>

#include "models/copy_layout.h"
#include "backends/cpu/cpu_impl.h"

static mr_status zeropad_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                                 mr_dfloat *yd) {
    (void)run;
    const float *x = mr_dfloat_cptr(xd);
    float *y = mr_dfloat_ptr(yd);
    const mr_pad2d p = mr_zeropad_layout(l);
    const int C = l->in.d[2];
    const int64_t in_per = (int64_t)p.in_h * p.in_w * C, out_per = (int64_t)p.out_h * p.out_w * C;
    const size_t row = sizeof(float) * (size_t)p.in_w * (size_t)C;
    for (int b = 0; b < batch; b++) {
        float *yb = y + b * out_per;
        const float *xb = x + b * in_per;
        memset(yb, 0, sizeof(float) * (size_t)out_per);
        for (int h = 0; h < p.in_h; h++)
            memcpy(yb + mr_pad2d_outer(&p, h, 0) * C, xb + (int64_t)h * p.in_w * C, row);
    }
    return MR_OK;
}

static mr_status zeropad_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                  const mr_dfloat *y, mr_dfloat *dyd, mr_dfloat *dxd) {
    (void)run, (void)x, (void)y;
    if (dxd == NULL) return MR_OK;
    const float *dy = mr_dfloat_cptr(dyd);
    float *dx = mr_dfloat_ptr(dxd);
    const mr_pad2d p = mr_zeropad_layout(l);
    const int C = l->in.d[2];
    const int64_t in_per = (int64_t)p.in_h * p.in_w * C, out_per = (int64_t)p.out_h * p.out_w * C;
    const size_t row = sizeof(float) * (size_t)p.in_w * (size_t)C;
    for (int b = 0; b < batch; b++) {
        const float *db = dy + b * out_per;
        float *xb = dx + b * in_per;
        for (int h = 0; h < p.in_h; h++)
            memcpy(xb + (int64_t)h * p.in_w * C, db + mr_pad2d_outer(&p, h, 0) * C, row);
    }
    return MR_OK;
}

const mr_layer_kernels mr_zeropad_cpu = {
    .forward = zeropad_forward,
    .backward = zeropad_backward,
};
