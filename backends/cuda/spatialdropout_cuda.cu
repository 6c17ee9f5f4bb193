/* spatialdropout_cuda.cu: SpatialDropout2D on a GPU (spatialdropout.c: the
 * mask's definition; spatialdropout_cpu.c is the reference). One thread per
 * element; each asks runtime/elementwise.h's mr_spatial_dropout_keep, the
 * CPU loop's very function, for its channel: the same channels dropped.
 * The key is mr_rng_key's, computed on the host and passed by value.
 * Relies on: kernels_cuda.h, runtime/elementwise.h, runtime/rng.h. */
#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"
#include "runtime/rng.h"

/* out (batch, hw, C) = in / (1 - rate) on kept channels, else 0; in may be out */
__global__ static void sdrop_kernel(const float *in, float *out, int batch, int64_t hw, int C,
                                    uint32_t k0, uint32_t k1, int64_t step, int64_t sample_base,
                                    int layer, float rate, float scale,
                                    const mr_step_scalars *live) {
    const uint32_t key[2] = {k0, k1};
    if (live != NULL) step = live->step; /* a graph's replay: this step's */
    const int64_t row = hw * C, total = row * batch;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = t / row;
        const int c = (int)(t % C);
        const int keep =
            mr_spatial_dropout_keep(key, step, (uint64_t)(sample_base + i), layer, c, rate);
        out[t] = keep ? mr_fmul(in[t], scale) : 0.0f;
    }
}

/* out = in, or masked and scaled in training at a nonzero rate */
static mr_status sdrop_pass(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *in,
                            mr_dfloat *out) {
    mr_backend *be = run->be;
    const int64_t hw = (int64_t)l->in.d[0] * l->in.d[1];
    const int C = l->in.d[2];
    const size_t n = (size_t)batch * (size_t)hw * (size_t)C;
    if (n == 0) return MR_OK;
    if (!run->training || l->cfg->rate == 0.0f) {
        if (mr_dfloat_ptr(out) != mr_dfloat_cptr(in))
            MR_CUDA_TRY(be, run->err,
                        cudaMemcpyAsync(mr_dfloat_ptr(out), mr_dfloat_cptr(in), sizeof(float) * n,
                                        cudaMemcpyDeviceToDevice, mr_cuda(be)->stream));
        return MR_OK;
    }
    const float rate = l->cfg->rate, scale = mr_dropout_scale(rate);
    uint32_t key[2];
    mr_rng_key(run->seed, MR_RNG_STREAM_DROPOUT, key);
    MR_CUDA_LAUNCH(sdrop_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_cptr(in), mr_dfloat_ptr(out), batch, hw, C, key[0], key[1], run->step,
                   run->sample_base, l->index, rate, scale, mr_cuda_live(be));
    mr_cuda_launched(be, run->err, "sdrop_kernel");
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

const mr_layer_kernels mr_spatialdropout_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,    .forward = sdrop_forward, .backward = sdrop_backward, .destroy = NULL,
    .describe = NULL, .fuses_relu = 0,          .device_order = NULL,
};
