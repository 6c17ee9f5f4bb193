/* zeropad_cpu.c: ZeroPadding2D on the CPU, NHWC (models/zeropad.c says
 * what the layer is).
 *   x: (B, H, W, C) -> y: (B, H + 2 ph, W + 2 pw, C), zeros around x
 *   dx = the inner (H, W) window of dy */
#include <string.h>

#include "backends/cpu/cpu_impl.h"

static mr_status zeropad_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                                 mr_dfloat *yd) {
    (void)run;
    const float *x = mr_dfloat_cptr(xd);
    float *y = mr_dfloat_ptr(yd);
    const int H = l->in.d[0], W = l->in.d[1], C = l->in.d[2];
    const int OH = l->out.d[0], OW = l->out.d[1], ph = l->cfg->pad[0], pw = l->cfg->pad[1];
    const size_t row = sizeof(float) * (size_t)W * (size_t)C;
    for (int b = 0; b < batch; b++) {
        float *yb = y + (int64_t)b * OH * OW * C;
        const float *xb = x + (int64_t)b * H * W * C;
        memset(yb, 0, sizeof(float) * (size_t)OH * (size_t)OW * (size_t)C);
        for (int h = 0; h < H; h++)
            memcpy(yb + ((int64_t)(h + ph) * OW + pw) * C, xb + (int64_t)h * W * C, row);
    }
    return MR_OK;
}

static mr_status zeropad_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                  const mr_dfloat *y, mr_dfloat *dyd, mr_dfloat *dxd) {
    (void)run, (void)x, (void)y;
    if (dxd == NULL) return MR_OK;
    const float *dy = mr_dfloat_cptr(dyd);
    float *dx = mr_dfloat_ptr(dxd);
    const int H = l->in.d[0], W = l->in.d[1], C = l->in.d[2];
    const int OH = l->out.d[0], OW = l->out.d[1], ph = l->cfg->pad[0], pw = l->cfg->pad[1];
    const size_t row = sizeof(float) * (size_t)W * (size_t)C;
    for (int b = 0; b < batch; b++) {
        const float *db = dy + (int64_t)b * OH * OW * C;
        float *xb = dx + (int64_t)b * H * W * C;
        for (int h = 0; h < H; h++)
            memcpy(xb + (int64_t)h * W * C, db + ((int64_t)(h + ph) * OW + pw) * C, row);
    }
    return MR_OK;
}

const mr_layer_kernels mr_zeropad_cpu = {
    .forward = zeropad_forward,
    .backward = zeropad_backward,
};
