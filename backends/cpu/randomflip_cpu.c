/* randomflip_cpu.c: RandomFlip on the CPU (randomflip.c), over
 * models/randomflip.h's draw and source index, which the CUDA kernel
 * shares: the same examples flipped on every device.
 *   y[b, h, w, c] = x[b, h', w', c], (h', w') = (h, w) flipped as b's draw says
 * in training; y = x otherwise. Backward is the same flip of dy. */
#include <string.h>

#include "models/randomflip.h"
#include "backends/cpu/cpu_impl.h"

/* out (batch, H, W, C) = in flipped per example; out and in distinct. */
static void flip_rows(const mr_layer *l, const mr_exec_ctx *run, int batch, const float *in,
                      float *out) {
    const int H = l->in.d[0], W = l->in.d[1], C = l->in.d[2];
    const int64_t row = (int64_t)H * W * C;
    uint32_t key[2];
    mr_rng_key(run->seed, MR_RNG_STREAM_DROPOUT, key);
    for (int i = 0; i < batch; i++) {
        const int axes = mr_randomflip_axes(key, run->step, (uint64_t)(run->sample_base + i),
                                            l->index, l->cfg->flip_mode);
        const float *x = in + i * row;
        float *y = out + i * row;
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++)
                memcpy(y + ((int64_t)h * W + w) * C, x + mr_randomflip_source(axes, h, w, H, W) * C,
                       sizeof(float) * (size_t)C);
    }
}

static mr_status randomflip_pass(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *in,
                                 mr_dfloat *out) {
    const float *x = mr_dfloat_cptr(in);
    float *y = mr_dfloat_ptr(out);
    if (!run->training) {
        if (y != x) memcpy(y, x, sizeof(float) * (size_t)batch * (size_t)mr_shape_size(l->in));
        return MR_OK;
    }
    if (y == x)
        return mr_error_set(run->err, MR_ERR_UNSUPPORTED, "[randomflip]: flips out of place only");
    flip_rows(l, run, batch, x, y);
    return MR_OK;
}

static mr_status randomflip_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                    mr_dfloat *y) {
    return randomflip_pass(l, run, batch, x, y);
}

static mr_status randomflip_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                     const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    if (dx == NULL) return MR_OK;
    /* a flip is its own inverse: dx is dy flipped by the same draw */
    return randomflip_pass(l, run, batch, dy, dx);
}

const mr_layer_kernels mr_randomflip_cpu = {
    .forward = randomflip_forward,
    .backward = randomflip_backward,
};
