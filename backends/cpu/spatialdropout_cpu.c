/* spatialdropout_cpu.c: SpatialDropout2D on the CPU (spatialdropout.c: the
 * mask's definition), over elementwise.h's mr_spatial_dropout_keep, which
 * the CUDA kernel shares: the same channels dropped on every device.
 *   y[b, h, w, c] = x[b, h, w, c] / (1 - rate) if channel c of b is kept, else 0
 * Backward applies the same mask to dy. */
#include <string.h>

#include "runtime/elementwise.h"
#include "runtime/rng.h"
#include "backends/cpu/cpu_impl.h"

/* out = in masked by channel, row by row. */
static void apply_channel_mask(const mr_layer *l, const mr_exec_ctx *run, int batch,
                               const float *in, float *out) {
    const int hw = l->in.d[0] * l->in.d[1], C = l->in.d[2];
    const float rate = l->cfg->rate, scale = mr_dropout_scale(rate);
    uint32_t key[2];
    mr_rng_key(run->seed, MR_RNG_STREAM_DROPOUT, key);
    for (int i = 0; i < batch; i++) {
        const uint64_t sample = (uint64_t)(run->sample_base + i);
        const int64_t row = (int64_t)i * hw * C;
        for (int c = 0; c < C; c++) {
            const int keep = mr_spatial_dropout_keep(key, run->step, sample, l->index, c, rate);
            for (int p = 0; p < hw; p++) {
                const int64_t j = row + (int64_t)p * C + c;
                out[j] = keep ? in[j] * scale : 0.0f;
            }
        }
    }
}

static mr_status sdrop_pass(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *in,
                            mr_dfloat *out) {
    if (!run->training || l->cfg->rate == 0.0f) {
        if (mr_dfloat_ptr(out) != mr_dfloat_cptr(in))
            memcpy(mr_dfloat_ptr(out), mr_dfloat_cptr(in),
                   sizeof(float) * (size_t)batch * (size_t)mr_shape_size(l->in));
        return MR_OK;
    }
    apply_channel_mask(l, run, batch, mr_dfloat_cptr(in), mr_dfloat_ptr(out));
    return MR_OK;
}

static mr_status sdrop_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                               mr_dfloat *y) {
    return sdrop_pass(l, run, batch, x, y);
}

static mr_status sdrop_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    if (dx == NULL) return MR_OK;
    /* the same mask and scale: d(y)/d(x) */
    return sdrop_pass(l, run, batch, dy, dx);
}

const mr_layer_kernels mr_spatialdropout_cpu = {
    .forward = sdrop_forward,
    .backward = sdrop_backward,
};
