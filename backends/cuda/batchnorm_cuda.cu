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
 * sync), and in backward the sums of dy and dy * xhat; batchnorm_stats.h's
 * tree (float partials of MR_BN_ROW_BLOCK rows, double runs of at most
 * MR_BN_FAN_IN values level by level), its levels computed in parallel:
 * one launch (sums_kernel) for all of them, the sums the CPU's bit for bit,
 * repeating, with no atomics on values (a counter says which block is
 * last). The per-element kernels finish their channels' statistics
 * themselves, so that a training step is 4 launches: forward sums_kernel
 * and normalize_kernel, backward sums_kernel and dx_kernel.
 * The tree and every formula are batchnorm_stats.h's, the functions
 * the CPU loops call; they round each product and sum once (__fmul_rn,
 * __fadd_rn, __dmul_rn, which nvcc never contracts into FMAs), so the
 * results match the CPU's rounding (a CPU build that contracts,
 * -march=native with FMA, differs in the last bits).
 * A ReLU [activation] after it may be fused in (layer.h, relu_fused;
 * the model decides): the apply writes relu(y), and backward masks dy by
 * y > 0 where it reads it (sums_kernel, dx_kernel), elementwise.h's
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
     * and the sums' shift */
    float *mean, *inv_std, *shift;
    double *s1, *s2;    /* (C) per-channel sums */
    double *tree;       /* (mr_bn_tree_slots(groups), 2, C) the sums' tree, at max_batch */
    unsigned *counters; /* (channel tiles) sums_kernel's blocks done, 0 between launches */
} bn_priv;

static int use_sync(const mr_layer *l, const mr_exec_ctx *run) {
    return l->cfg->sync && run->sync_sum != NULL;
}

/* ---- kernels ---- */

/* A block of the sums and the per-element kernels: BN_CT channels (the
 * fastest, so that a warp reads 4 rows of 8 adjacent channels: whole 32-byte
 * sectors) by BN_LANES lanes, and one level-1 group of MR_BN_GROUP_ROWS rows
 * (a block per (channel tile, group): grid (tiles, groups)). Each thread
 * takes 2 row blocks of the group (sums) or every BN_LANES-th row of it
 * (per-element kernels): at most 64 elements in sequence. */
#define BN_CT      8
#define BN_LANES   32
#define BN_THREADS (BN_CT * BN_LANES)

/* The sums of rows, one launch, batchnorm_stats.h's tree: block
 * (tile, g) sums its rows' float partials (level 0; thread (cl, lane) the
 * row blocks lane and lane + 32 of group g), in shared memory, then 2 * BN_CT
 * threads add the group's partials in order into its level-1 doubles in
 * tree (groups, 2, C); the last block of a tile to finish (a counter per
 * tile, after __threadfence: CUDA's "last block" pattern, which order of
 * arrival cannot change) computes the levels above, each level's runs in
 * parallel, and writes the totals s1, s2 (C). Where not NULL, it also adds
 * add1 += s1, add2 += s2 (backward: dbeta, dgamma), writes the sync buffer
 * buf (2C + 1) = (s1, s2, count) as floats, and shift_out = vb (forward).
 * The terms (mr_bn_sum_terms; ua NULL: 0, vs NULL: 1):
 *   forward:  u = v = x, ua = vb = the shift   (sums of x - s and (x - s)^2)
 *   backward: u = dy, v = x, vb = mean, vs = inv_std   (dy, dy * xhat)
 * [fused ReLU] mask: NULL, or the fused ReLU's output y (backward), by
 * whose relu' each u is masked as it is read (the activation's math). */
__global__ static void sums_kernel(const float *__restrict__ u, const float *__restrict__ mask,
                                   const float *__restrict__ ua, const float *__restrict__ v,
                                   const float *__restrict__ vb, const float *__restrict__ vs,
                                   int64_t rows, int C, double *tree, unsigned *counters,
                                   double *__restrict__ s1, double *__restrict__ s2,
                                   float *__restrict__ add1, float *__restrict__ add2,
                                   float *__restrict__ buf, float count,
                                   float *__restrict__ shift_out) {
    __shared__ float part[2][MR_BN_FAN_IN][BN_CT];
    __shared__ int last;
    const int t = threadIdx.x, cl = t % BN_CT, lane = t / BN_CT;
    const int c = blockIdx.x * BN_CT + cl;
    const int64_t g = blockIdx.y, nb = mr_bn_blocks(rows), ld = 2 * (int64_t)C;
    for (int h = 0; h < MR_BN_FAN_IN / BN_LANES; h++) {
        const int k = lane + h * BN_LANES; /* the group's row block k */
        const int64_t j = g * MR_BN_FAN_IN + k;
        float f1 = 0.0f, f2 = 0.0f;
        if (c < C && j < nb) {
            int64_t r0, r1;
            mr_bn_block(j, rows, &r0, &r1);
            const float uac = ua ? ua[c] : 0.0f, vbc = vb[c], vsc = vs ? vs[c] : 1.0f;
            for (int64_t r = r0; r < r1; r++)
                mr_bn_sum_terms(mask ? u[r * C + c] * mr_relu_grad(mask[r * C + c]) /* fused ReLU */
                                     : u[r * C + c],
                                uac, v[r * C + c], vbc, vsc, &f1, &f2);
        }
        part[0][k][cl] = f1;
        part[1][k][cl] = f2;
    }
    __syncthreads();
    /* level 1: thread (w, cl) adds the group's partials of sum w in order */
    const int w = t / BN_CT, cw = blockIdx.x * BN_CT + t % BN_CT;
    if (t < 2 * BN_CT && cw < C) {
        const int64_t n =
            nb - g * MR_BN_FAN_IN < MR_BN_FAN_IN ? nb - g * MR_BN_FAN_IN : MR_BN_FAN_IN;
        double sum = 0.0;
        for (int64_t k = 0; k < n; k++)
            sum += part[w][k][t % BN_CT];
        tree[g * ld + w * C + cw] = sum;
    }
    __threadfence(); /* the group's sums reach the last block before the count */
    __syncthreads();
    if (t == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    /* the levels above: thread (w, cl, lane2) the runs lane2, lane2 + 16 ... */
    const int slot = t % (2 * BN_CT), lanes = BN_THREADS / (2 * BN_CT), lane2 = t / (2 * BN_CT);
    const int cs = blockIdx.x * BN_CT + slot % BN_CT, ws = slot / BN_CT;
    volatile double *lv = tree + ws * C + cs; /* this slot's level values, stride 2C */
    int64_t n = gridDim.y;
    while (n > 1) {
        const int64_t m = mr_bn_runs(n);
        if (cs < C)
            for (int64_t r = lane2; r < m; r += lanes)
                lv[(n + r) * ld] = mr_bn_run_sum(lv, ld, n, r);
        __syncthreads();
        lv += n * ld;
        n = m;
    }
    if (t == 0) counters[blockIdx.x] = 0; /* for the next launch */
    if (lane2 != 0 || cs >= C) return;
    const double total = lv[0];
    (ws == 0 ? s1 : s2)[cs] = total;
    float *add = ws == 0 ? add1 : add2;
    if (add) add[cs] = __fadd_rn(add[cs], (float)total);
    if (buf) {
        buf[ws * C + cs] = (float)total;
        if (cs == 0 && ws == 0) buf[2 * C] = count;
    }
    if (shift_out && ws == 0) shift_out[cs] = vb[cs];
}

/* The sums and count of channel c: the replicas' (synced, 2C + 1 floats,
 * after sync_sum) or this replica's (s1, s2, count). */
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

/* y (M, C) = (x - mean) * scale + beta for block (tile, g)'s rows of group g,
 * [fused ReLU] then relu(y) where relu (the activation's mr_relu). Its
 * channels' mean and scale first, in shared memory:
 *   training (s1 not NULL): the statistics of the sums (mr_bn_stats; the
 *     replicas' with synced), which blocks (tile, 0) also store (mean,
 *     inv_std for backward) and fold into the moving averages mm, mv
 *     (Keras: moving = moving * momentum + batch * (1 - momentum));
 *     nothing when no rows were seen anywhere (the averages must not
 *     learn 0/0; there are no rows to normalise then);
 *   inference: the moving mean and gamma / sqrt(moving_var + eps). */
__global__ static void normalize_kernel(
    const float *__restrict__ x, const double *__restrict__ s1, const double *__restrict__ s2,
    const float *__restrict__ synced, double count_local, const float *__restrict__ shift,
    const float *__restrict__ gamma, const float *__restrict__ beta, float eps, float mom,
    float *__restrict__ mean, float *__restrict__ inv_std, float *__restrict__ mm,
    float *__restrict__ mv, int64_t M, int C, int relu, float *__restrict__ y) {
    __shared__ float sh_mean[BN_CT], sh_scale[BN_CT];
    __shared__ int sh_ok[BN_CT];
    const int t = threadIdx.x, cl = t % BN_CT, lane = t / BN_CT;
    const int c = blockIdx.x * BN_CT + cl;
    if (t < BN_CT && c < C) {
        sh_ok[t] = 1;
        if (s1 == NULL) {
            sh_mean[t] = mm[c];
            sh_scale[t] = mr_bn_infer_scale(gamma[c], mv[c], eps);
        } else {
            double a, b;
            const double count = sums_of(s1, s2, synced, count_local, C, c, &a, &b);
            const int store = blockIdx.y == 0;
            /* blocks other than (tile, 0) neither read nor write the averages */
            float mu, is, sc, m0 = store ? mm[c] : 0.0f, v0 = store ? mv[c] : 0.0f;
            sh_ok[t] = count > 0.0;
            if (count > 0.0) {
                mr_bn_stats(a, b, count, shift[c], gamma[c], eps, mom, &mu, &is, &sc, &m0, &v0);
                sh_mean[t] = mu;
                sh_scale[t] = sc;
                if (store) mean[c] = mu, inv_std[c] = is, mm[c] = m0, mv[c] = v0;
            }
        }
    }
    __syncthreads();
    if (c >= C || !sh_ok[cl]) return;
    const float mu = sh_mean[cl], sc = sh_scale[cl], be = beta[c];
    const int64_t r1 = ((int64_t)blockIdx.y + 1) * MR_BN_GROUP_ROWS < M
                           ? ((int64_t)blockIdx.y + 1) * MR_BN_GROUP_ROWS
                           : M;
    for (int64_t r = (int64_t)blockIdx.y * MR_BN_GROUP_ROWS + lane; r < r1; r += BN_LANES) {
        const float v = mr_bn_normalize(x[r * C + c], mu, sc, be);
        y[r * C + c] = relu ? mr_relu(v) : v;
    }
}

/* dx = fa * (dy - fm) - fb * (x - mean) for block (tile, g)'s rows of group
 * g, with its channels' factors (mr_bn_factors of the sums; the means over
 * every replica's rows with synced) first, in shared memory; [fused ReLU]
 * dy masked by relu'(mask) as it is read where mask (y) is not NULL. */
__global__ static void dx_kernel(const float *__restrict__ x, const float *__restrict__ dy,
                                 const float *__restrict__ mask, const double *__restrict__ s1,
                                 const double *__restrict__ s2, const float *__restrict__ synced,
                                 double count_local, const float *__restrict__ gamma,
                                 const float *__restrict__ mean, const float *__restrict__ inv_std,
                                 int64_t M, int C, float *__restrict__ dx) {
    __shared__ float sh_fa[BN_CT], sh_fb[BN_CT], sh_fm[BN_CT];
    __shared__ int sh_ok[BN_CT];
    const int t = threadIdx.x, cl = t % BN_CT, lane = t / BN_CT;
    const int c = blockIdx.x * BN_CT + cl;
    if (t < BN_CT && c < C) {
        double a, b;
        const double count = sums_of(s1, s2, synced, count_local, C, c, &a, &b);
        sh_ok[t] = count > 0.0;
        if (count > 0.0)
            mr_bn_factors(a, b, count, gamma[c], inv_std[c], &sh_fa[t], &sh_fb[t], &sh_fm[t]);
    }
    __syncthreads();
    if (c >= C || !sh_ok[cl]) return;
    const float fa = sh_fa[cl], fb = sh_fb[cl], fm = sh_fm[cl], mu = mean[c];
    const int64_t r1 = ((int64_t)blockIdx.y + 1) * MR_BN_GROUP_ROWS < M
                           ? ((int64_t)blockIdx.y + 1) * MR_BN_GROUP_ROWS
                           : M;
    for (int64_t r = (int64_t)blockIdx.y * MR_BN_GROUP_ROWS + lane; r < r1; r += BN_LANES) {
        const int64_t i = r * C + c;
        const float g = mask ? dy[i] * mr_relu_grad(mask[i]) : dy[i]; /* fused ReLU */
        dx[i] = mr_bn_dx(g, x[i], mu, fa, fb, fm);
    }
}

/* ---- host side ---- */

/* The grid of the kernels over M rows: (channel tiles, groups), at least
 * one group (the sums of no rows are zeros, and the averages' update with
 * sync is a block's). Fails past the grid's y limit (2^16 - 1 groups: 134M
 * rows on one replica). */
static mr_status bn_grid(const bn_priv *p, mr_backend *be, const mr_layer *l, int64_t M, dim3 *grid,
                         mr_error *err) {
    const int64_t groups = mr_bn_groups(M) > 0 ? mr_bn_groups(M) : 1;
    if (groups > 65535)
        return mr_error_set(err, MR_ERR_UNSUPPORTED,
                            "gpu:%d: [batchnorm] %s: %lld rows, over the %d a GPU sums",
                            be->ordinal, l->name, (long long)M, 65535 * MR_BN_GROUP_ROWS);
    *grid = dim3((unsigned)((p->C + BN_CT - 1) / BN_CT), (unsigned)groups);
    return MR_OK;
}

/* p->s1, p->s2 = the per-channel sums over M rows (sums_kernel's u, mask,
 * ua, v, vb, vs); add1 / add2 += them, buf = (s1, s2, count) and shift_out
 * = vb where not NULL. One launch. */
static mr_status channel_sums(bn_priv *p, mr_backend *be, const mr_layer *l, const float *u,
                              const float *mask, const float *ua, const float *v, const float *vb,
                              const float *vs, int64_t M, float *add1, float *add2, float *buf,
                              float *shift_out, mr_error *err) {
    dim3 grid;
    MR_CHECK(bn_grid(p, be, l, M, &grid, err));
    MR_CUDA_LAUNCH(sums_kernel, grid, BN_THREADS, mr_cuda(be)->stream, u, mask, ua, v, vb, vs, M,
                   p->C, p->tree, p->counters, p->s1, p->s2, add1, add2, buf, (float)M, shift_out);
    mr_cuda_launched(be, err, "sums_kernel");
    return MR_OK;
}

static mr_status bn_cuda_setup(mr_layer *l, mr_backend *be, int max_batch, mr_error *err) {
    const int C = l->in.d[l->in.rank - 1];
    bn_priv *p = (bn_priv *)calloc(1, sizeof *p);
    l->priv = p;
    if (p == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    p->C = C;
    /* the tree of max_batch's rows (at least one group): 2C doubles per value */
    const int64_t rows = (int64_t)(max_batch < 1 ? 1 : max_batch) * mr_shape_size(l->in) / C;
    const int64_t groups = mr_bn_groups(rows) > 0 ? mr_bn_groups(rows) : 1;
    const size_t slots = (size_t)mr_bn_tree_slots(groups), tiles = (size_t)(C + BN_CT - 1) / BN_CT;
    /* 3 float vectors; s1, s2 and the tree (doubles); a counter per tile: zeroed */
    p->mean = (float *)mr_backend_alloc(be, sizeof(float) * (size_t)C * 3);
    p->s1 = (double *)mr_backend_alloc(be, sizeof(double) * (size_t)C * (2 + 2 * slots));
    p->counters = (unsigned *)mr_backend_alloc(be, sizeof(unsigned) * tiles);
    if (p->mean == NULL || p->s1 == NULL || p->counters == NULL)
        return mr_error_set(err, MR_ERR_NOMEM,
                            "gpu:%d: out of memory for [batchnorm] %s's statistics", be->ordinal,
                            l->name);
    p->inv_std = p->mean + C;
    p->shift = p->mean + 2 * C;
    p->s2 = p->s1 + C;
    p->tree = p->s1 + 2 * C;
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
    cudaStream_t s = mr_cuda(be)->stream;
    const float *x = mr_dfloat_cptr(xd);
    float *y = mr_dfloat_ptr(yd);
    const float *gamma = mr_dfloat_cptr(l->w[MR_BN_GAMMA].data),
                *beta = mr_dfloat_cptr(l->w[MR_BN_BETA].data);
    float *mm = mr_dfloat_ptr(l->w[MR_BN_MOVING_MEAN].data),
          *mv = mr_dfloat_ptr(l->w[MR_BN_MOVING_VARIANCE].data);
    const float eps = l->cfg->epsilon, mom = l->cfg->momentum;
    dim3 grid;
    MR_CHECK(bn_grid(p, be, l, M, &grid, err));
    if (!run->training) {
        /* y = (x - moving_mean) * gamma / sqrt(moving_var + eps) + beta */
        if (M == 0) return MR_OK;
        MR_CUDA_LAUNCH(normalize_kernel, grid, BN_THREADS, s, x, (const double *)NULL,
                       (const double *)NULL, (const float *)NULL, 0.0, (const float *)NULL, gamma,
                       beta, eps, mom, (float *)NULL, (float *)NULL, mm, mv, M, C, l->relu_fused,
                       y);
        mr_cuda_launched(be, err, "normalize_kernel");
        return MR_OK;
    }
    const int sync = use_sync(l, run);
    /* no rows and no replicas to hear from: nothing to learn (the CPU's count 0) */
    if (M == 0 && !sync) return MR_OK;
    /* shifted sums s1 = sum (x - s), s2 = sum (x - s)^2 per channel, s the
     * moving mean or x's first row (mr_bn_shift_is_moving_mean), kept in
     * p->shift for the statistics */
    const float *sh = mr_bn_shift_is_moving_mean(sync, M) ? mm : x;
    float *buf = sync ? mr_dfloat_ptr(run->scratch) : NULL;
    MR_CHECK(channel_sums(p, be, l, x, NULL, sh, x, sh, NULL, M, NULL, NULL, buf, p->shift, err));
    /* with sync, the sums and count of every replica's batch */
    if (sync) MR_CHECK(run->sync_sum(run->sync_ctx, run->scratch, (size_t)mr_bn_sync_floats(C)));
    /* the statistics, the moving averages and y, in one launch */
    MR_CUDA_LAUNCH(normalize_kernel, grid, BN_THREADS, s, x, p->s1, p->s2, buf, (double)M, p->shift,
                   gamma, beta, eps, mom, p->mean, p->inv_std, mm, mv, M, C, l->relu_fused, y);
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
    cudaStream_t s = mr_cuda(be)->stream;
    const float *x = mr_dfloat_cptr(xd), *dy = mr_dfloat_cptr(dyd);
    /* [fused ReLU] dy is the ReLU's output gradient, masked by y > 0 as it is read */
    const float *mask = l->relu_fused ? mr_dfloat_cptr(yd) : NULL;
    const int sync = use_sync(l, run) && dxd != NULL; /* only dx needs the global means */
    if (M == 0 && !sync) return MR_OK;                /* adds nothing, writes nothing */
    /* s1 = sum dy, s2 = sum dy * xhat; this replica's into the weight
     * gradients (the strategy sums those) */
    float *buf = sync ? mr_dfloat_ptr(run->scratch) : NULL;
    MR_CHECK(channel_sums(p, be, l, dy, mask, NULL, x, p->mean, p->inv_std, M,
                          mr_dfloat_ptr(l->w[MR_BN_BETA].grad),
                          mr_dfloat_ptr(l->w[MR_BN_GAMMA].grad), buf, NULL, err));
    if (dxd == NULL) return MR_OK;
    if (sync) MR_CHECK(run->sync_sum(run->sync_ctx, run->scratch, (size_t)mr_bn_sync_floats(C)));
    if (M == 0) return MR_OK;
    dim3 grid;
    MR_CHECK(bn_grid(p, be, l, M, &grid, err));
    MR_CUDA_LAUNCH(dx_kernel, grid, BN_THREADS, s, x, dy, mask, p->s1, p->s2, buf, (double)M,
                   mr_dfloat_cptr(l->w[MR_BN_GAMMA].data), p->mean, p->inv_std, M, C,
                   mr_dfloat_ptr(dxd));
    mr_cuda_launched(be, err, "dx_kernel");
    return MR_OK;
}

static void bn_cuda_destroy(mr_layer *l, mr_backend *be) {
    bn_priv *p = (bn_priv *)l->priv;
    if (p)
        mr_backend_free(be, p->mean), mr_backend_free(be, p->s1), mr_backend_free(be, p->counters);
    free(p);
    l->priv = NULL;
}

const mr_layer_kernels mr_batchnorm_cuda = {
    .setup = bn_cuda_setup,
    .forward = bn_forward,
    .backward = bn_backward,
    .destroy = bn_cuda_destroy,
    .describe = NULL,
    .fuses_relu = 1, /* normalize_kernel, sums_kernel and dx_kernel honour relu_fused */
    .device_order = NULL,
};
