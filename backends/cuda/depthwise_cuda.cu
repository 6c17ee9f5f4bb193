/* depthwise_cuda.cu: DepthwiseConv2D on a GPU, NHWC (depthwise.c says what
 * the layer is; depthwise_cpu.c is the reference).
 *   x: (B, H, W, C)   kernel: (kh, kw, C*M)   bias: (C*M)   y: (B, OH, OW, C*M)
 * Direct kernels, no cuDNN: one thread per output element forward (its
 * window's taps in the CPU's order, then activation_cuda.h's pass), one per
 * input element for dx (the outputs whose window holds it,
 * conv_geometry.h's mr_window_covering), and dW and db as sums over the
 * B*OH*OW output pixels: each thread sums one weight over one of up to
 * DW_CHUNKS runs of pixels into scratch, then one thread per weight adds
 * the runs in order. No atomics: the same bits run after run.
 * Relies on: kernels_cuda.h, activation_cuda.h, conv_geometry.h. */
#include "backends/cuda/activation_cuda.h"
#include "backends/cuda/kernels_cuda.h"
#include "models/conv_geometry.h"

/* Runs of output pixels the weight gradients are split into. */
#define DW_CHUNKS 32

/* z (n, OH, OW, C*M) = the depthwise convolution of x plus the bias */
__global__ static void dw_forward_kernel(mr_window g, int n, int C, int M,
                                         const float *__restrict__ x, const float *__restrict__ k,
                                         const float *__restrict__ bias, float *__restrict__ z) {
    const int CM = C * M;
    const size_t total = (size_t)n * g.out_h * g.out_w * CM;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / CM;
        const int o = (int)(i % CM), ox = (int)(t % g.out_w);
        t /= g.out_w;
        const int oy = (int)(t % g.out_h);
        const size_t b = t / g.out_h;
        const mr_rect r = mr_window_clip(&g, oy, ox);
        float acc = bias != NULL ? bias[o] : 0.0f;
        for (int iy = r.y0; iy < r.y1; iy++)
            for (int ix = r.x0; ix < r.x1; ix++) {
                const int tap =
                    (iy - (oy * g.s_h - g.pad_t)) * g.k_w + (ix - (ox * g.s_w - g.pad_l));
                acc += x[((b * g.in_h + iy) * g.in_w + ix) * C + o / M] * k[(size_t)tap * CM + o];
            }
        z[i] = acc;
    }
}

/* dx (n, H, W, C) = sum over the outputs whose window holds the pixel and
 * over m of dz (n, OH, OW, C*M) times the kernel tap that met it */
__global__ static void dw_dx_kernel(mr_window g, int n, int C, int M, const float *__restrict__ dz,
                                    const float *__restrict__ k, float *__restrict__ dx) {
    const int CM = C * M;
    const size_t total = (size_t)n * g.in_h * g.in_w * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / C;
        const int c = (int)(i % C), ix = (int)(t % g.in_w);
        t /= g.in_w;
        const int iy = (int)(t % g.in_h);
        const size_t b = t / g.in_h;
        const mr_rect r = mr_window_covering(&g, iy, ix);
        float acc = 0.0f;
        for (int oy = r.y0; oy < r.y1; oy++)
            for (int ox = r.x0; ox < r.x1; ox++) {
                const int tap =
                    (iy - (oy * g.s_h - g.pad_t)) * g.k_w + (ix - (ox * g.s_w - g.pad_l));
                const float *d = dz + ((b * g.out_h + oy) * g.out_w + ox) * CM + (size_t)c * M;
                const float *kr = k + (size_t)tap * CM + (size_t)c * M;
                for (int m = 0; m < M; m++)
                    acc += d[m] * kr[m];
            }
        dx[i] = acc;
    }
}

/* part (chunks, kh*kw + 1, C*M): run q's share of dW (taps 0..kh*kw-1)
 * and of db (the last row), over output pixels [q * per, (q+1) * per) */
__global__ static void dw_partial_kernel(mr_window g, int n, int C, int M, int chunks, int per,
                                         const float *__restrict__ x, const float *__restrict__ dz,
                                         float *__restrict__ part) {
    const int CM = C * M, taps = g.k_h * g.k_w;
    const size_t rows = (size_t)n * g.out_h * g.out_w;
    const size_t total = (size_t)chunks * (taps + 1) * CM;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int o = (int)(i % CM), tap = (int)(i / CM % (taps + 1));
        const size_t q = i / CM / (taps + 1);
        const int ky = tap / g.k_w, kx = tap % g.k_w;
        float acc = 0.0f;
        for (size_t row = q * per; row < (q + 1) * per && row < rows; row++) {
            const float d = dz[row * CM + o];
            if (tap == taps) {
                acc += d;
                continue;
            }
            const int ox = (int)(row % g.out_w), oy = (int)(row / g.out_w % g.out_h);
            const size_t b = row / g.out_w / g.out_h;
            const int iy = oy * g.s_h - g.pad_t + ky, ix = ox * g.s_w - g.pad_l + kx;
            if (iy < 0 || iy >= g.in_h || ix < 0 || ix >= g.in_w) continue;
            acc += x[((b * g.in_h + iy) * g.in_w + ix) * C + o / M] * d;
        }
        part[i] = acc;
    }
}

/* dk (taps, C*M) += the runs' dW, db (C*M) += their db (db NULL: none) */
__global__ static void dw_sum_kernel(int chunks, int taps, int CM, const float *__restrict__ part,
                                     float *__restrict__ dk, float *__restrict__ db) {
    const size_t total = (size_t)(taps + 1) * CM;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int q = 0; q < chunks; q++)
            acc += part[(size_t)q * total + i];
        if (i < (size_t)taps * CM)
            dk[i] += acc;
        else if (db != NULL)
            db[i - (size_t)taps * CM] += acc;
    }
}

static mr_window geometry(const mr_layer *l) {
    return mr_window_make(l->in.d[0], l->in.d[1], l->cfg);
}

/* The scratch: z (max_batch, OH, OW, C*M) for gelu and swish, then the
 * weight gradients' runs (DW_CHUNKS, kh*kw + 1, C*M). */
static size_t z_floats(const mr_layer *l, int max_batch) {
    return mr_activation_needs_input(l->cfg->activation)
               ? (size_t)max_batch * (size_t)mr_shape_size(l->out)
               : 0;
}

static mr_status depthwise_cuda_setup(mr_layer *l, mr_backend *be, int max_batch, mr_error *err) {
    (void)be, (void)err;
    const mr_window g = geometry(l);
    l->scratch_floats = z_floats(l, max_batch) +
                        (size_t)DW_CHUNKS * (size_t)(g.k_h * g.k_w + 1) * (size_t)l->out.d[2];
    return MR_OK;
}

/* z = the convolution plus the bias, before the activation */
static mr_status dw_linear(mr_layer *l, mr_backend *be, int batch, const float *x, float *z,
                           mr_error *err) {
    const size_t total = (size_t)batch * mr_shape_size(l->out);
    if (total == 0) return MR_OK;
    const float *bias = l->n_weights > 1 ? mr_dfloat_cptr(l->w[1].data) : NULL;
    MR_CUDA_LAUNCH(dw_forward_kernel, mr_cuda_blocks(total), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   geometry(l), batch, l->in.d[2], l->cfg->depth_multiplier, x,
                   mr_dfloat_cptr(l->w[0].data), bias, z);
    mr_cuda_launched(be, err, "dw_forward_kernel");
    return MR_OK;
}

static mr_status depthwise_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                   mr_dfloat *y) {
    if (batch == 0) return MR_OK;
    MR_CHECK(dw_linear(l, run->be, batch, mr_dfloat_cptr(x), mr_dfloat_ptr(y), run->err));
    return mr_cuda_activation_forward(run->be, mr_layer_activation(l), mr_dfloat_ptr(y),
                                      batch * l->out.d[0] * l->out.d[1], l->out.d[2], run->err);
}

/* dW and db (through runs of pixels), dx (NULL: not wanted) of dz */
static mr_status dw_grads(mr_layer *l, mr_exec_ctx *run, int batch, const float *x, const float *dz,
                          float *dx) {
    mr_backend *be = run->be;
    const mr_window g = geometry(l);
    const int C = l->in.d[2], M = l->cfg->depth_multiplier, CM = C * M, taps = g.k_h * g.k_w;
    const int rows = batch * g.out_h * g.out_w;
    const int chunks = rows < DW_CHUNKS ? rows : DW_CHUNKS, per = (rows + chunks - 1) / chunks;
    float *part = mr_dfloat_ptr(run->scratch) + z_floats(l, batch);
    const size_t n_part = (size_t)chunks * (taps + 1) * CM, n_sum = (size_t)(taps + 1) * CM;
    MR_CUDA_LAUNCH(dw_partial_kernel, mr_cuda_blocks(n_part), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   g, batch, C, M, chunks, per, x, dz, part);
    mr_cuda_launched(be, run->err, "dw_partial_kernel");
    float *db = l->n_weights > 1 ? mr_dfloat_ptr(l->w[1].grad) : NULL;
    MR_CUDA_LAUNCH(dw_sum_kernel, mr_cuda_blocks(n_sum), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   chunks, taps, CM, (const float *)part, mr_dfloat_ptr(l->w[0].grad), db);
    mr_cuda_launched(be, run->err, "dw_sum_kernel");
    if (dx == NULL) return MR_OK;
    const size_t n_dx = (size_t)batch * mr_shape_size(l->in);
    MR_CUDA_LAUNCH(dw_dx_kernel, mr_cuda_blocks(n_dx), MR_CUDA_THREADS, mr_cuda(be)->stream, g,
                   batch, C, M, dz, mr_dfloat_cptr(l->w[0].data), dx);
    mr_cuda_launched(be, run->err, "dw_dx_kernel");
    return MR_OK;
}

static mr_status depthwise_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                                    const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    mr_backend *be = run->be;
    if (batch == 0) return MR_OK;
    const int rows = batch * l->out.d[0] * l->out.d[1], CM = l->out.d[2];
    /* dy becomes dL/dz through the activation (gelu, swish: through z,
     * recomputed into scratch) */
    if (mr_activation_needs_input(mr_layer_activation(l))) {
        float *z = mr_dfloat_ptr(run->scratch);
        MR_CHECK(dw_linear(l, be, batch, mr_dfloat_cptr(x), z, run->err));
        MR_CHECK(mr_cuda_activation_backward_x(be, mr_layer_activation(l), z, mr_dfloat_ptr(dy),
                                               (size_t)rows * CM, run->err));
    } else {
        MR_CHECK(mr_cuda_activation_backward(be, mr_layer_activation(l), mr_dfloat_cptr(y),
                                             mr_dfloat_ptr(dy), rows, CM, run->err));
    }
    return dw_grads(l, run, batch, mr_dfloat_cptr(x), mr_dfloat_cptr(dy),
                    dx != NULL ? mr_dfloat_ptr(dx) : NULL);
}

const mr_layer_kernels mr_depthwise_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = depthwise_cuda_setup,
    .forward = depthwise_forward,
    .backward = depthwise_backward,
    .destroy = NULL,
    .describe = NULL,
    .fuses_relu = 0,
    .device_order = NULL,
};
