/* batchnorm_cuda.cu: BatchNormalization on a GPU, over the last axis
 * (batchnorm.c says what the layer computes; batchnorm_cpu.c is the
 * reference, whose math and order of operations this repeats).
 *   x, y: (M, C) rows of C channels, M = batch * H * W
 * Small deterministic kernels rather than cuDNN's fused batch norm: with
 * SyncBatchNormalization the per-channel sums must be added over the
 * replicas (run->sync_sum, on device memory) between computing and
 * applying them, which the fused call cannot do; the same kernels serve
 * every case, so there is one path.
 * Per-channel sums as the CPU takes them: around a shift s (sums of x - s
 * and (x - s)^2; s is the batch's first row, or the moving mean with
 * sync), and in backward the sums of dy and dy * xhat; float partials of
 * blocks of MR_BN_ROW_BLOCK rows, added in row order, then the blocks'
 * partials added in block order into doubles. One thread per (block,
 * channel) for the partials (adjacent threads take adjacent channels:
 * coalesced, NHWC has the channels fastest), one per channel for the
 * totals: the sums are the CPU's bit for bit, and repeat, without atomics.
 * The blocking and every formula are batchnorm_stats.h's, the functions
 * the CPU loops call; they round each product and sum once (__fmul_rn,
 * __fadd_rn, __dmul_rn, which nvcc never contracts into FMAs), so the
 * results match the CPU's rounding (a CPU build that contracts,
 * -march=native with FMA, differs in the last bits).
 * A ReLU [activation] after it may be fused in (layer.h, relu_fused;
 * the model decides): the apply writes relu(y), and backward masks dy by
 * y > 0 where it reads it (partials_kernel, dx_kernel), elementwise.h's
 * mr_relu and mr_relu_grad, the activation kernel's math: the bits of the
 * unfused layers, without the activation's own pass each way.
 * The edits for it are marked [fused ReLU].
 * Relies on: kernels_cuda.h, layer.h (mr_exec_ctx.sync_sum),
 * batchnorm_stats.h, runtime/elementwise.h (mr_relu, mr_relu_grad). */
#include <stdlib.h>

#include "runtime/elementwise.h"
#include "models/batchnorm_stats.h"
#include "backends/cuda/kernels_cuda.h"

typedef struct bn_priv {
    int C;
    /* (C) each: statistics of the last training forward (for backward),
     * the sums' shift, scale = gamma * inv_std, and backward's factors */
    float *mean, *inv_std, *shift, *scale, *fa, *fb, *fm;
    double *s1, *s2; /* (C) per-channel sums */
    float *part;     /* (blocks, 2, C) float partial sums of the row blocks, at max_batch */
} bn_priv;

static int use_sync(const mr_layer *l, const mr_exec_ctx *run) {
    return l->cfg->sync && run->sync_sum != NULL;
}

/* ---- kernels ---- */

/* shift (C) = the moving mean (mr_bn_shift_is_moving_mean) or the first row of x */
__global__ static void shift_kernel(const float *__restrict__ x, const float *__restrict__ mm,
                                    int use_mm, int C, float *__restrict__ shift) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
        shift[c] = use_mm ? mm[c] : x[c];
}

/* First pass, one thread per (row block j, channel c): part[j][0][c] and
 * part[j][1][c] = the float sums f1, f2 of mr_bn_sum_terms over the
 * block's rows in order (ua NULL: 0; vs NULL: 1):
 *   forward:  u = v = x, ua = vb = shift   (sums of x - s and (x - s)^2)
 *   backward: u = dy, v = x, vb = mean, vs = inv_std   (dy, dy * xhat)
 * [fused ReLU] mask: NULL, or the fused ReLU's output y (backward), by
 * whose relu' each u is masked as it is read (the activation's math). */
__global__ static void partials_kernel(const float *__restrict__ u, const float *__restrict__ mask,
                                       const float *__restrict__ ua, const float *__restrict__ v,
                                       const float *__restrict__ vb, const float *__restrict__ vs,
                                       int64_t rows, int C, float *__restrict__ part) {
    const int64_t n = mr_bn_blocks(rows) * C;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int c = (int)(t % C);
        const int64_t j = t / C;
        int64_t r0, r1;
        mr_bn_block(j, rows, &r0, &r1);
        const float uac = ua ? ua[c] : 0.0f, vbc = vb[c], vsc = vs ? vs[c] : 1.0f;
        float f1 = 0.0f, f2 = 0.0f;
        for (int64_t r = r0; r < r1; r++)
            mr_bn_sum_terms(mask ? u[r * C + c] * mr_relu_grad(mask[r * C + c]) /* fused ReLU */
                                 : u[r * C + c],
                            uac, v[r * C + c], vbc, vsc, &f1, &f2);
        part[j * 2 * C + c] = f1;
        part[j * 2 * C + C + c] = f2;
    }
}

/* Second pass, one thread per channel: s1, s2 = the blocks' partials
 * added in block order, in double. Then, where not NULL: add1 += s1,
 * add2 += s2 (backward: dbeta, dgamma), and the sync buffer buf (2C + 1)
 * = (s1, s2, count) as floats, to be summed over the replicas. */
__global__ static void totals_kernel(const float *__restrict__ part, int64_t blocks, int C,
                                     double *__restrict__ s1, double *__restrict__ s2,
                                     float *__restrict__ add1, float *__restrict__ add2,
                                     float *__restrict__ buf, float count) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        double t1 = 0.0, t2 = 0.0;
        for (int64_t j = 0; j < blocks; j++) {
            t1 += part[j * 2 * C + c];
            t2 += part[j * 2 * C + C + c];
        }
        s1[c] = t1;
        s2[c] = t2;
        if (add1) add1[c] = __fadd_rn(add1[c], (float)t1);
        if (add2) add2[c] = __fadd_rn(add2[c], (float)t2);
        if (buf) {
            buf[c] = (float)t1;
            buf[C + c] = (float)t2;
            if (c == 0) buf[2 * C] = count;
        }
    }
}

/* The sums and count: the replicas' (synced, 2C + 1 floats, after
 * sync_sum) or this replica's (s1, s2, count). */
__device__ static double sums_of(const double *s1, const double *s2, const float *synced,
                                 double count, int C, int c, double *a, double *b) {
    if (synced == NULL) {
        *a = s1[c];
        *b = s2[c];
        return count;
    }
    *a = synced[c];
    *b = synced[C + c];
    return synced[2 * C];
}

/* Training statistics per channel, and the moving averages (Keras:
 * moving = moving * momentum + batch * (1 - momentum)); nothing when no
 * rows were seen anywhere (the averages must not learn 0/0). */
__global__ static void stats_kernel(const double *__restrict__ s1, const double *__restrict__ s2,
                                    const float *__restrict__ synced, double count_local, int C,
                                    const float *__restrict__ shift,
                                    const float *__restrict__ gamma, float eps, float mom,
                                    float *__restrict__ mean, float *__restrict__ inv_std,
                                    float *__restrict__ scale, float *__restrict__ mm,
                                    float *__restrict__ mv) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        double a, b;
        const double count = sums_of(s1, s2, synced, count_local, C, c, &a, &b);
        if (count <= 0.0) return;
        mr_bn_stats(a, b, count, shift[c], gamma[c], eps, mom, &mean[c], &inv_std[c], &scale[c],
                    &mm[c], &mv[c]);
    }
}

/* Inference: scale (C) = gamma / sqrt(moving_var + eps) */
__global__ static void infer_scale_kernel(const float *__restrict__ gamma,
                                          const float *__restrict__ mv, float eps, int C,
                                          float *__restrict__ scale) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
        scale[c] = mr_bn_infer_scale(gamma[c], mv[c], eps);
}

/* y (n / C, C) = (x - mean) * scale + beta, per channel; [fused ReLU]
 * then relu(y) where relu (the activation's mr_relu, in the same pass) */
__global__ static void normalize_kernel(const float *__restrict__ x, const float *__restrict__ mean,
                                        const float *__restrict__ scale,
                                        const float *__restrict__ beta, size_t n, int C, int relu,
                                        float *__restrict__ y) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % C);
        const float v = mr_bn_normalize(x[i], mean[c], scale[c], beta[c]);
        y[i] = relu ? mr_relu(v) : v;
    }
}

/* Backward's factors per channel (mr_bn_factors; the means over every
 * replica's rows with sync); nothing when there are no rows anywhere. */
__global__ static void factors_kernel(const double *__restrict__ s1, const double *__restrict__ s2,
                                      const float *__restrict__ synced, double count_local, int C,
                                      const float *__restrict__ gamma,
                                      const float *__restrict__ inv_std, float *__restrict__ fa,
                                      float *__restrict__ fb, float *__restrict__ fm) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        double a, b;
        const double count = sums_of(s1, s2, synced, count_local, C, c, &a, &b);
        if (count <= 0.0) return;
        mr_bn_factors(a, b, count, gamma[c], inv_std[c], &fa[c], &fb[c], &fm[c]);
    }
}

/* dx = fa * (dy - fm) - fb * (x - mean), per channel; [fused ReLU] dy
 * masked by relu'(mask) as it is read where mask (y) is not NULL */
__global__ static void dx_kernel(const float *__restrict__ x, const float *__restrict__ dy,
                                 const float *__restrict__ mask, const float *__restrict__ mean,
                                 const float *__restrict__ fa, const float *__restrict__ fb,
                                 const float *__restrict__ fm, size_t n, int C,
                                 float *__restrict__ dx) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % C);
        const float g = mask ? dy[i] * mr_relu_grad(mask[i]) : dy[i]; /* fused ReLU */
        dx[i] = mr_bn_dx(g, x[i], mean[c], fa[c], fb[c], fm[c]);
    }
}

/* ---- host side ---- */

/* p->s1, p->s2 = the per-channel sums over M rows (partials_kernel's u,
 * mask, ua, v, vb, vs); add1 / add2 += them and buf = (s1, s2, count)
 * where not NULL (totals_kernel). */
static mr_status channel_sums(bn_priv *p, mr_backend *be, const float *u, const float *mask,
                              const float *ua, const float *v, const float *vb, const float *vs,
                              int64_t M, float *add1, float *add2, float *buf, mr_error *err) {
    const int C = p->C;
    const int64_t blocks = mr_bn_blocks(M);
    cudaStream_t s = mr_cuda(be)->stream;
    if (blocks > 0) {
        MR_CUDA_LAUNCH(partials_kernel, mr_cuda_blocks((size_t)(blocks * C)), MR_CUDA_THREADS, s, u,
                       mask, ua, v, vb, vs, M, C, p->part);
        mr_cuda_launched(be, err, "partials_kernel");
    }
    MR_CUDA_LAUNCH(totals_kernel, mr_cuda_blocks((size_t)C), MR_CUDA_THREADS, s, p->part, blocks, C,
                   p->s1, p->s2, add1, add2, buf, (float)M);
    mr_cuda_launched(be, err, "totals_kernel");
    return MR_OK;
}

static mr_status bn_cuda_setup(mr_layer *l, mr_backend *be, int max_batch, mr_error *err) {
    const int C = l->in.d[l->in.rank - 1];
    bn_priv *p = (bn_priv *)calloc(1, sizeof *p);
    l->priv = p;
    if (p == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    p->C = C;
    /* the partials of max_batch's rows: 2 floats per MR_BN_ROW_BLOCK rows and channel */
    const int64_t rows = (int64_t)(max_batch < 1 ? 1 : max_batch) * mr_shape_size(l->in) / C;
    const size_t blocks = (size_t)mr_bn_blocks(rows);
    /* 7 float vectors and the partials; s1, s2 (doubles): zeroed */
    p->mean = (float *)mr_backend_alloc(be, sizeof(float) * (size_t)C * (7 + 2 * blocks));
    p->s1 = (double *)mr_backend_alloc(be, sizeof(double) * (size_t)C * 2);
    if (p->mean == NULL || p->s1 == NULL)
        return mr_error_set(err, MR_ERR_NOMEM,
                            "gpu:%d: out of memory for [batchnorm] %s's statistics", be->ordinal,
                            l->name);
    p->inv_std = p->mean + C;
    p->shift = p->mean + 2 * C;
    p->scale = p->mean + 3 * C;
    p->fa = p->mean + 4 * C;
    p->fb = p->mean + 5 * C;
    p->fm = p->mean + 6 * C;
    p->part = p->mean + 7 * C;
    p->s2 = p->s1 + C;
    /* the sync buffer: 2C sums and a count */
    l->scratch_floats = (size_t)mr_bn_sync_floats(C);
    return MR_OK;
}

static mr_status bn_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                            mr_dfloat *yd) {
    mr_backend *be = run->be;
    mr_error *err = run->err;
    bn_priv *p = (bn_priv *)l->priv;
    const int C = p->C;
    const int64_t M = batch * mr_shape_size(l->in) / C; /* rows of C values */
    const size_t n = (size_t)M * C;
    cudaStream_t s = mr_cuda(be)->stream;
    const float *x = mr_dfloat_cptr(xd);
    float *y = mr_dfloat_ptr(yd);
    const float *gamma = mr_dfloat_cptr(l->w[MR_BN_GAMMA].data),
                *beta = mr_dfloat_cptr(l->w[MR_BN_BETA].data);
    float *mm = mr_dfloat_ptr(l->w[MR_BN_MOVING_MEAN].data),
          *mv = mr_dfloat_ptr(l->w[MR_BN_MOVING_VARIANCE].data);
    const float eps = l->cfg->epsilon, mom = l->cfg->momentum;
    const unsigned cb = mr_cuda_blocks((size_t)C);
    if (!run->training) {
        /* y = (x - moving_mean) * gamma / sqrt(moving_var + eps) + beta */
        if (n == 0) return MR_OK;
        MR_CUDA_LAUNCH(infer_scale_kernel, cb, MR_CUDA_THREADS, s, gamma, mv, eps, C, p->scale);
        mr_cuda_launched(be, err, "infer_scale_kernel");
        MR_CUDA_LAUNCH(normalize_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, s, x, mm, p->scale,
                       beta, n, C, l->relu_fused, y);
        mr_cuda_launched(be, err, "normalize_kernel");
        return MR_OK;
    }
    const int sync = use_sync(l, run);
    /* no rows and no replicas to hear from: nothing to learn (the CPU's count 0) */
    if (M == 0 && !sync) return MR_OK;
    /* shifted sums: s1 = sum (x - s), s2 = sum (x - s)^2 per channel */
    MR_CUDA_LAUNCH(shift_kernel, cb, MR_CUDA_THREADS, s, x, mm, mr_bn_shift_is_moving_mean(sync, M),
                   C, p->shift);
    mr_cuda_launched(be, err, "shift_kernel");
    float *buf = sync ? mr_dfloat_ptr(run->scratch) : NULL;
    MR_CHECK(channel_sums(p, be, x, NULL, p->shift, x, p->shift, NULL, M, NULL, NULL, buf, err));
    /* with sync, the sums and count of every replica's batch */
    if (sync) MR_CHECK(run->sync_sum(run->sync_ctx, run->scratch, (size_t)mr_bn_sync_floats(C)));
    MR_CUDA_LAUNCH(stats_kernel, cb, MR_CUDA_THREADS, s, p->s1, p->s2, buf, (double)M, C, p->shift,
                   gamma, eps, mom, p->mean, p->inv_std, p->scale, mm, mv);
    mr_cuda_launched(be, err, "stats_kernel");
    if (n == 0) return MR_OK;
    MR_CUDA_LAUNCH(normalize_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, s, x, p->mean, p->scale,
                   beta, n, C, l->relu_fused, y);
    mr_cuda_launched(be, err, "normalize_kernel");
    return MR_OK;
}

/* Training-mode backward with the statistics of the forward:
 *   xhat = (x - mean) * inv_std,  dgamma += sum dy * xhat,  dbeta += sum dy,
 *   dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)),
 * the means over the rows of the channel (of the global batch with sync). */
static mr_status bn_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                             const mr_dfloat *yd, mr_dfloat *dyd, mr_dfloat *dxd) {
    mr_backend *be = run->be;
    mr_error *err = run->err;
    bn_priv *p = (bn_priv *)l->priv;
    const int C = p->C;
    const int64_t M = batch * mr_shape_size(l->in) / C;
    const size_t n = (size_t)M * C;
    cudaStream_t s = mr_cuda(be)->stream;
    const float *x = mr_dfloat_cptr(xd), *dy = mr_dfloat_cptr(dyd);
    /* [fused ReLU] dy is the ReLU's output gradient, masked by y > 0 as it is read */
    const float *mask = l->relu_fused ? mr_dfloat_cptr(yd) : NULL;
    const int sync = use_sync(l, run) && dxd != NULL; /* only dx needs the global means */
    if (M == 0 && !sync) return MR_OK;                /* adds nothing, writes nothing */
    /* s1 = sum dy, s2 = sum dy * xhat; this replica's into the weight
     * gradients (the strategy sums those) */
    float *buf = sync ? mr_dfloat_ptr(run->scratch) : NULL;
    MR_CHECK(channel_sums(p, be, dy, mask, NULL, x, p->mean, p->inv_std, M,
                          mr_dfloat_ptr(l->w[MR_BN_BETA].grad),
                          mr_dfloat_ptr(l->w[MR_BN_GAMMA].grad), buf, err));
    if (dxd == NULL) return MR_OK;
    if (sync) MR_CHECK(run->sync_sum(run->sync_ctx, run->scratch, (size_t)mr_bn_sync_floats(C)));
    const unsigned cb = mr_cuda_blocks((size_t)C);
    MR_CUDA_LAUNCH(factors_kernel, cb, MR_CUDA_THREADS, s, p->s1, p->s2, buf, (double)M, C,
                   mr_dfloat_cptr(l->w[MR_BN_GAMMA].data), p->inv_std, p->fa, p->fb, p->fm);
    mr_cuda_launched(be, err, "factors_kernel");
    if (n == 0) return MR_OK;
    MR_CUDA_LAUNCH(dx_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, s, x, dy, mask, p->mean, p->fa,
                   p->fb, p->fm, n, C, mr_dfloat_ptr(dxd));
    mr_cuda_launched(be, err, "dx_kernel");
    return MR_OK;
}

static void bn_cuda_destroy(mr_layer *l, mr_backend *be) {
    bn_priv *p = (bn_priv *)l->priv;
    if (p) mr_backend_free(be, p->mean), mr_backend_free(be, p->s1);
    free(p);
    l->priv = NULL;
}

const mr_layer_kernels mr_batchnorm_cuda = {
    .setup = bn_cuda_setup,
    .forward = bn_forward,
    .backward = bn_backward,
    .destroy = bn_cuda_destroy,
    .describe = NULL,
    .fuses_relu = 1, /* normalize_kernel, partials_kernel and dx_kernel honour relu_fused */
};
