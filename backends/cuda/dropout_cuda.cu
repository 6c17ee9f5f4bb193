/* dropout_cuda.cu: Dropout on a GPU (dropout.c: the mask's definition;
 * dropout_cpu.c is the reference). One thread per group of 4 consecutive
 * elements of a row, which is one Philox call (elementwise.h's
 * mr_dropout_group, the CPU loop's very function):
 * the same mask bits on every device. The key is mr_rng_key's, computed
 * on the host (a C function) and passed by value.
 * Relies on: kernels_cuda.h, runtime/elementwise.h, runtime/rng.h. */
#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"
#include "runtime/rng.h"

/* out (batch, n) = in * mask / (1 - rate); thread t takes elements
 * 4*j4 .. 4*j4+3 of row i, t = i * n4 + j4, n4 = ceil(n / 4); in may be
 * out (each element is read, then written, by one thread) */
__global__ static void dropout_kernel(const float *in, float *out, int batch, int64_t n,
                                      uint32_t k0, uint32_t k1, int64_t step, int64_t sample_base,
                                      int layer, float rate, float scale,
                                      const mr_step_scalars *live) {
    const uint32_t key[2] = {k0, k1};
    if (live != NULL) step = live->step; /* a graph's replay: this step's */
    const int64_t n4 = (n + 3) / 4, total = n4 * batch;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = t / n4;
        mr_dropout_group(key, step, (uint64_t)(sample_base + i), layer, t % n4, n, rate, scale,
                         in + i * n, out + i * n);
    }
}

/* out = in, or masked and scaled in training at a nonzero rate */
static mr_status dropout_pass(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *in,
                              mr_dfloat *out) {
    mr_backend *be = run->be;
    const int64_t n = mr_shape_size(l->in);
    if (batch == 0 || n == 0) return MR_OK;
    if (!run->training || l->cfg->rate == 0.0f) {
        if (mr_dfloat_ptr(out) != mr_dfloat_cptr(in))
            MR_CUDA_TRY(be, run->err,
                        cudaMemcpyAsync(mr_dfloat_ptr(out), mr_dfloat_cptr(in),
                                        sizeof(float) * (size_t)batch * (size_t)n,
                                        cudaMemcpyDeviceToDevice, mr_cuda(be)->stream));
        return MR_OK;
    }
    const float rate = l->cfg->rate, scale = mr_dropout_scale(rate);
    uint32_t key[2];
    mr_rng_key(run->seed, MR_RNG_STREAM_DROPOUT, key);
    size_t threads = (size_t)batch * (size_t)((n + 3) / 4);
    MR_CUDA_LAUNCH(dropout_kernel, mr_cuda_blocks(threads), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   mr_dfloat_cptr(in), mr_dfloat_ptr(out), batch, n, key[0], key[1], run->step,
                   run->sample_base, l->index, rate, scale, mr_cuda_live(be));
    mr_cuda_launched(be, run->err, "dropout_kernel");
    return MR_OK;
}

static mr_status dropout_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                 mr_dfloat *y) {
    return dropout_pass(l, run, batch, x, y);
}

static mr_status dropout_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                  const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    (void)x, (void)y;
    if (dx == NULL) return MR_OK;
    /* the same mask and scale: d(y)/d(x) */
    return dropout_pass(l, run, batch, dy, dx);
}

const mr_layer_kernels mr_dropout_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,        .forward = dropout_forward, .backward = dropout_backward,
    .destroy = NULL,      .describe = NULL,           .fuses_relu = 0,
    .device_order = NULL,
};
