/* randomflip_cuda.cu: RandomFlip on a GPU (randomflip.c; randomflip_cpu.c
 * is the reference). One thread per element gathers its source through
 * models/randomflip.h's draw and source index, the CPU loop's very
 * functions: the same examples flipped. The key is mr_rng_key's, computed
 * on the host and passed by value. Relies on: kernels_cuda.h,
 * models/randomflip.h. */
#include "backends/cuda/kernels_cuda.h"
#include "models/randomflip.h"

/* out (batch, H, W, C) = in flipped per example; out and in distinct */
__global__ static void randomflip_kernel(const float *in, float *out, int batch, int H, int W,
                                         int C, uint32_t k0, uint32_t k1, int64_t step,
                                         int64_t sample_base, int layer, int mode,
                                         const mr_step_scalars *live) {
    const uint32_t key[2] = {k0, k1};
    if (live != NULL) step = live->step; /* a graph's replay: this step's */
    const int64_t row = (int64_t)H * W * C, total = row * batch;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = t / row, p = (t % row) / C;
        const int c = (int)(t % C);
        const int axes = mr_randomflip_axes(key, step, (uint64_t)(sample_base + i), layer, mode);
        const int64_t src = mr_randomflip_source(axes, (int)(p / W), (int)(p % W), H, W);
        out[t] = in[i * row + src * C + c];
    }
}

/* out = in, or flipped in training */
static mr_status randomflip_pass(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *in,
                                 mr_dfloat *out) {
    mr_backend *be = run->be;
    const int H = l->in.d[0], W = l->in.d[1], C = l->in.d[2];
    const size_t n = (size_t)batch * (size_t)H * (size_t)W * (size_t)C;
    if (n == 0) return MR_OK;
    if (!run->training) {
        if (mr_dfloat_ptr(out) != mr_dfloat_cptr(in))
            MR_CUDA_TRY(be, run->err,
                        cudaMemcpyAsync(mr_dfloat_ptr(out), mr_dfloat_cptr(in), sizeof(float) * n,
                                        cudaMemcpyDeviceToDevice, mr_cuda(be)->stream));
        return MR_OK;
    }
    if (mr_dfloat_ptr(out) == mr_dfloat_cptr(in))
        return mr_error_set(run->err, MR_ERR_UNSUPPORTED, "[randomflip]: flips out of place only");
    uint32_t key[2];
    mr_rng_key(run->seed, MR_RNG_STREAM_DROPOUT, key);
    MR_CUDA_LAUNCH(randomflip_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_cptr(in), mr_dfloat_ptr(out), batch, H, W, C, key[0], key[1],
                   run->step, run->sample_base, l->index, l->cfg->flip_mode, mr_cuda_live(be));
    mr_cuda_launched(be, run->err, "randomflip_kernel");
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

const mr_layer_kernels mr_randomflip_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,
    .forward = randomflip_forward,
    .backward = randomflip_backward,
    .destroy = NULL,
    .describe = NULL,
    .fuses_relu = 0,
    .device_order = NULL,
};
