/* globalavgpool_cpu.c: GlobalAveragePooling2D on the CPU, NHWC
 * (models/globalavgpool.c says what the layer is).
 *   x: (B, H, W, C) -> y: (B, C), y = mean of x over H and W
 *   dx[b, h, w, c] = dy[b, c] / (H W) */
#include "runtime/target_clones.h"
#include "backends/cpu/cpu_impl.h"

MR_AVX2_CLONES static mr_status gap_forward(mr_layer *l, mr_exec_ctx *run, int batch,
                                            const mr_dfloat *xd, mr_dfloat *yd) {
    (void)run;
    const float *x = mr_dfloat_cptr(xd);
    float *y = mr_dfloat_ptr(yd);
    const int hw = l->in.d[0] * l->in.d[1], C = l->in.d[2];
    const float inv = 1.0f / (float)hw;
    for (int b = 0; b < batch; b++) {
        float *o = y + (int64_t)b * C;
        const float *xb = x + (int64_t)b * hw * C;
        for (int c = 0; c < C; c++)
            o[c] = 0.0f;
        for (int p = 0; p < hw; p++) /* pixel by pixel: C contiguous floats */
            for (int c = 0; c < C; c++)
                o[c] += xb[(int64_t)p * C + c];
        for (int c = 0; c < C; c++)
            o[c] *= inv;
    }
    return MR_OK;
}

MR_AVX2_CLONES static mr_status gap_backward(mr_layer *l, mr_exec_ctx *run, int batch,
                                             const mr_dfloat *x, const mr_dfloat *y, mr_dfloat *dyd,
                                             mr_dfloat *dxd) {
    (void)run, (void)x, (void)y;
    if (dxd == NULL) return MR_OK;
    const float *dy = mr_dfloat_cptr(dyd);
    float *dx = mr_dfloat_ptr(dxd);
    const int hw = l->in.d[0] * l->in.d[1], C = l->in.d[2];
    const float inv = 1.0f / (float)hw;
    for (int b = 0; b < batch; b++) {
        const float *g = dy + (int64_t)b * C;
        float *db = dx + (int64_t)b * hw * C;
        for (int p = 0; p < hw; p++)
            for (int c = 0; c < C; c++)
                db[(int64_t)p * C + c] = g[c] * inv;
    }
    return MR_OK;
}

const mr_layer_kernels mr_globalavgpool_cpu = {
    .forward = gap_forward,
    .backward = gap_backward,
};
