/* globalmaxpool_cpu.c: GlobalMaxPooling2D on the CPU, NHWC
 * (models/globalmaxpool.c says what the layer is).
 *   x: (B, H, W, C) -> y: (B, C), y = max of x over H and W
 *   dx[b, h, w, c] = dy[b, c] / k where x[b, h, w, c] = y[b, c], k such
 *   pixels (ties share), else 0 */
#include "runtime/target_clones.h"
#include "backends/cpu/cpu_impl.h"

MR_AVX2_CLONES static mr_status gmp_forward(mr_layer *l, mr_exec_ctx *run, int batch,
                                            const mr_dfloat *xd, mr_dfloat *yd) {
    (void)run;
    const float *x = mr_dfloat_cptr(xd);
    float *y = mr_dfloat_ptr(yd);
    const int hw = l->in.d[0] * l->in.d[1], C = l->in.d[2];
    for (int b = 0; b < batch; b++) {
        float *o = y + (int64_t)b * C;
        const float *xb = x + (int64_t)b * hw * C;
        for (int c = 0; c < C; c++)
            o[c] = xb[c];
        for (int p = 1; p < hw; p++) /* pixel by pixel: C contiguous floats */
            for (int c = 0; c < C; c++)
                o[c] = xb[(int64_t)p * C + c] > o[c] ? xb[(int64_t)p * C + c] : o[c];
    }
    return MR_OK;
}

/* dx of one example (hw, C) from its y and dy (C). */
static void gmp_backward_one(int hw, int C, const float *x, const float *y, const float *dy,
                             float *dx) {
    for (int c = 0; c < C; c++) {
        int k = 0;
        for (int p = 0; p < hw; p++)
            k += x[(int64_t)p * C + c] == y[c];
        const float g = dy[c] / (float)(k > 0 ? k : 1);
        for (int p = 0; p < hw; p++)
            dx[(int64_t)p * C + c] = x[(int64_t)p * C + c] == y[c] ? g : 0.0f;
    }
}

static mr_status gmp_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                              const mr_dfloat *yd, mr_dfloat *dyd, mr_dfloat *dxd) {
    (void)run;
    if (dxd == NULL) return MR_OK;
    const float *x = mr_dfloat_cptr(xd), *y = mr_dfloat_cptr(yd), *dy = mr_dfloat_cptr(dyd);
    float *dx = mr_dfloat_ptr(dxd);
    const int hw = l->in.d[0] * l->in.d[1], C = l->in.d[2];
    for (int b = 0; b < batch; b++)
        gmp_backward_one(hw, C, x + (int64_t)b * hw * C, y + (int64_t)b * C, dy + (int64_t)b * C,
                         dx + (int64_t)b * hw * C);
    return MR_OK;
}

const mr_layer_kernels mr_globalmaxpool_cpu = {
    .forward = gmp_forward,
    .backward = gmp_backward,
};
