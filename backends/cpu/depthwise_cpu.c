/* depthwise_cpu.c: DepthwiseConv2D on the CPU, NHWC (depthwise.c says what
 * the layer is).
 *   x: (B, H, W, C)   kernel: (kh, kw, C, M), read as (kh, kw, C*M)
 *   bias: (C*M)       y: (B, OH, OW, C*M)
 * The kernel's last two axes flattened are the output channel order
 * (c * M + m), so each window tap is one row of C*M weights against one
 * input pixel's C channels: direct loops over NHWC, channels innermost
 * (vectorised where M is 1, MobileNet's case), no im2col or GEMM.
 * Backward walks the same taps: dW[tap] += x pixel * dz, dx pixel += dz *
 * kernel[tap] (a scatter into dx, zeroed first).
 * Relies on: layer.h, conv_geometry.h (Keras/TF output size and padding). */
#include <string.h>

#include "runtime/target_clones.h"
#include "models/conv_geometry.h"
#include "backends/cpu/cpu_impl.h"

/* acc (C*M) += xp (C) against kr (C*M): acc[c*M+m] += xp[c] * kr[c*M+m] */
static inline void tap_forward(float *restrict acc, const float *restrict xp,
                               const float *restrict kr, int C, int M) {
    if (M == 1) {
        for (int c = 0; c < C; c++)
            acc[c] += xp[c] * kr[c];
        return;
    }
    for (int c = 0; c < C; c++)
        for (int m = 0; m < M; m++)
            acc[c * M + m] += xp[c] * kr[c * M + m];
}

/* dw (C*M) += xp (C) x dz (C*M); dxp (C) += sum_m dz * kr */
static inline void tap_backward(float *restrict dw, float *restrict dxp, const float *restrict xp,
                                const float *restrict dz, const float *restrict kr, int C, int M) {
    if (M == 1) {
        for (int c = 0; c < C; c++)
            dw[c] += xp[c] * dz[c];
        if (dxp != NULL)
            for (int c = 0; c < C; c++)
                dxp[c] += dz[c] * kr[c];
        return;
    }
    for (int c = 0; c < C; c++) {
        float s = 0.0f;
        for (int m = 0; m < M; m++) {
            dw[c * M + m] += xp[c] * dz[c * M + m];
            s += dz[c * M + m] * kr[c * M + m];
        }
        if (dxp != NULL) dxp[c] += s;
    }
}

/* z (B, OH, OW, C*M) = the depthwise convolution of x plus the bias, before
 * the activation */
MR_AVX2_CLONES static void depthwise_linear(const mr_layer *l, int batch, const float *x,
                                            float *z) {
    const mr_window g = mr_window_make(l->in.d[0], l->in.d[1], l->cfg);
    const int C = l->in.d[2], M = l->cfg->depth_multiplier, CM = C * M;
    const float *k = mr_dfloat_cptr(l->w[0].data);
    const float *bias = l->n_weights > 1 ? mr_dfloat_cptr(l->w[1].data) : NULL;
    for (int b = 0; b < batch; b++)
        for (int oy = 0; oy < g.out_h; oy++)
            for (int ox = 0; ox < g.out_w; ox++) {
                float *restrict acc = z + (((int64_t)b * g.out_h + oy) * g.out_w + ox) * CM;
                if (bias != NULL)
                    memcpy(acc, bias, sizeof(float) * (size_t)CM);
                else
                    memset(acc, 0, sizeof(float) * (size_t)CM);
                const mr_rect r = mr_window_clip(&g, oy, ox);
                for (int iy = r.y0; iy < r.y1; iy++)
                    for (int ix = r.x0; ix < r.x1; ix++) {
                        const int tap =
                            (iy - (oy * g.s_h - g.pad_t)) * g.k_w + (ix - (ox * g.s_w - g.pad_l));
                        tap_forward(acc, x + (((int64_t)b * g.in_h + iy) * g.in_w + ix) * C,
                                    k + (int64_t)tap * CM, C, M);
                    }
            }
}

static mr_status depthwise_cpu_setup(mr_layer *l, mr_backend *be, int max_batch, mr_error *err) {
    (void)be, (void)err;
    /* gelu, swish: the backward recomputes z into scratch (B, OH, OW, C*M) */
    l->scratch_floats = mr_activation_needs_input(l->cfg->activation)
                            ? (size_t)max_batch * (size_t)mr_shape_size(l->out)
                            : 0;
    return MR_OK;
}

static mr_status depthwise_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                                   mr_dfloat *yd) {
    (void)run;
    float *y = mr_dfloat_ptr(yd);
    depthwise_linear(l, batch, mr_dfloat_cptr(xd), y);
    mr_cpu_activation_forward(mr_layer_activation(l), y, y, batch * l->out.d[0] * l->out.d[1],
                              l->out.d[2]);
    return MR_OK;
}

/* dW and dx of dz (B, OH, OW, C*M); dx (may be NULL) already zeroed */
MR_AVX2_CLONES static void depthwise_grads(const mr_layer *l, int batch, const float *x,
                                           const float *dz, float *dx) {
    const mr_window g = mr_window_make(l->in.d[0], l->in.d[1], l->cfg);
    const int C = l->in.d[2], M = l->cfg->depth_multiplier, CM = C * M;
    const float *k = mr_dfloat_cptr(l->w[0].data);
    float *dk = mr_dfloat_ptr(l->w[0].grad);
    for (int b = 0; b < batch; b++)
        for (int oy = 0; oy < g.out_h; oy++)
            for (int ox = 0; ox < g.out_w; ox++) {
                const float *d = dz + (((int64_t)b * g.out_h + oy) * g.out_w + ox) * CM;
                const mr_rect r = mr_window_clip(&g, oy, ox);
                for (int iy = r.y0; iy < r.y1; iy++)
                    for (int ix = r.x0; ix < r.x1; ix++) {
                        const int tap =
                            (iy - (oy * g.s_h - g.pad_t)) * g.k_w + (ix - (ox * g.s_w - g.pad_l));
                        const int64_t px = (((int64_t)b * g.in_h + iy) * g.in_w + ix) * C;
                        tap_backward(dk + (int64_t)tap * CM, dx != NULL ? dx + px : NULL, x + px, d,
                                     k + (int64_t)tap * CM, C, M);
                    }
            }
}

MR_AVX2_CLONES static mr_status depthwise_backward(mr_layer *l, mr_exec_ctx *run, int batch,
                                                   const mr_dfloat *xd, const mr_dfloat *yd,
                                                   mr_dfloat *dyd, mr_dfloat *dxd) {
    const float *x = mr_dfloat_cptr(xd), *y = mr_dfloat_cptr(yd);
    float *dy = mr_dfloat_ptr(dyd), *dx = mr_dfloat_ptr(dxd);
    const int rows = batch * l->out.d[0] * l->out.d[1], CM = l->out.d[2];
    /* dy becomes dL/dz through the activation (gelu, swish: through z,
     * recomputed into scratch) */
    if (mr_activation_needs_input(mr_layer_activation(l))) {
        float *z = mr_dfloat_ptr(run->scratch);
        depthwise_linear(l, batch, x, z);
        mr_cpu_activation_backward_x(mr_layer_activation(l), z, dy, dy, (int64_t)rows * CM);
    } else {
        mr_cpu_activation_backward(mr_layer_activation(l), y, dy, dy, rows, CM);
    }
    if (l->n_weights > 1) {
        float *db = mr_dfloat_ptr(l->w[1].grad);
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < CM; j++)
                db[j] += dy[(int64_t)i * CM + j];
    }
    if (dx != NULL) memset(dx, 0, sizeof(float) * (size_t)batch * (size_t)mr_shape_size(l->in));
    depthwise_grads(l, batch, x, dy, dx);
    return MR_OK;
}

const mr_layer_kernels mr_depthwise_cpu = {
    .setup = depthwise_cpu_setup,
    .forward = depthwise_forward,
    .backward = depthwise_backward,
};
