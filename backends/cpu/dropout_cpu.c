/* dropout_cpu.c: Dropout on the CPU (dropout.c: the mask's definition), a
 * loop over elementwise.h's single-source mask (mr_dropout_group, four
 * elements from one Philox call), which a CUDA kernel shares: the same bits.
 * Relies on: layer.h (mr_exec_ctx: seed, step, sample_base), rng.h (Philox). */
#include <string.h>

#include "runtime/elementwise.h"
#include "runtime/target_clones.h"
#include "runtime/rng.h"
#include "backends/cpu/cpu_impl.h"

/* y = x * mask / (1 - rate), row by row. */
MR_AVX2_CLONES static void apply_mask(const mr_layer *l, const mr_exec_ctx *run, int batch,
                                      const float *in, float *out) {
    const int64_t n = mr_shape_size(l->in);
    const float rate = l->cfg->rate, scale = mr_dropout_scale(rate);
    uint32_t key[2];
    mr_rng_key(run->seed, MR_RNG_STREAM_DROPOUT, key);
    for (int i = 0; i < batch; i++) {
        uint64_t sample = (uint64_t)(run->sample_base + i);
        const float *src = in + (int64_t)i * n;
        float *dst = out + (int64_t)i * n;
        for (int64_t j4 = 0; j4 < (n + 3) / 4; j4++)
            mr_dropout_group(key, run->step, sample, l->index, j4, n, rate, scale, src, dst);
    }
}

static mr_status dropout_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                 mr_dfloat *y) {
    if (!run->training || l->cfg->rate == 0.0f) {
        memcpy(mr_dfloat_ptr(y), mr_dfloat_cptr(x),
               sizeof(float) * (size_t)batch * (size_t)mr_shape_size(l->in));
        return MR_OK;
    }
    apply_mask(l, run, batch, mr_dfloat_cptr(x), mr_dfloat_ptr(y));
    return MR_OK;
}

static mr_status dropout_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                  const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    if (dx == NULL) return MR_OK;
    if (!run->training || l->cfg->rate == 0.0f) {
        memcpy(mr_dfloat_ptr(dx), mr_dfloat_cptr(dy),
               sizeof(float) * (size_t)batch * (size_t)mr_shape_size(l->in));
        return MR_OK;
    }
    /* the same mask and scale: d(y)/d(x) */
    apply_mask(l, run, batch, mr_dfloat_cptr(dy), mr_dfloat_ptr(dx));
    return MR_OK;
}

const mr_layer_kernels mr_dropout_cpu = {
    .forward = dropout_forward,
    .backward = dropout_backward,
};
