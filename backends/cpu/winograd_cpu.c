/* winograd_cpu.c: F(2x2, 3x3) Winograd convolution, NHWC (winograd_cpu.h
 * says what it computes and why).
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   (input, 4x4 -> 4x4)
 *   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1] (kernel, 3x3 -> 4x4)
 *   A^T = [1 1 1 0; 0 1 -1 -1]                       (output, 4x4 -> 2x2)
 * and for the kernel's gradient their transposes: dM = A dY A^T (2x2 ->
 * 4x4), dW = G^T dU G (4x4 -> 3x3).
 * A tile's 16 values are numbered xi = 4 * row + column. The transforms
 * run over channels (NHWC: contiguous), eight at a time in GCC's vector
 * type (an AVX2 register; two SSE2 registers in the baseline clone): they
 * are additions and halvings only, the same bits in every clone.
 * Relies on: cpu_impl.h (mr_cpu_gemm, OpenBLAS row-major). */
#include <string.h>

#include "runtime/target_clones.h"
#include "backends/cpu/cpu_impl.h"
#include "backends/cpu/winograd_cpu.h"

/* V and M of a chunk, in floats: 512 KiB, an L2 cache (as conv2d_cpu.c's
 * CHUNK_BUDGET), so the GEMMs read V and the output transform reads M
 * from cache. */
#define WINO_BUDGET (128 << 10)
/* Tiles a GEMM at least, for wide layers whose budget would give fewer:
 * each GEMM reads its (C, F) slice of u, which the rows must outweigh. */
#define WINO_MIN_TILES 64
/* Floats between the V_xi (and the M_xi) past their T * C (T * F): with
 * T * C a multiple of 1024 (4 KiB), the 16 streams a tile's transform
 * writes or reads would fall into one set of the L1 cache and evict each
 * other; a cache line more each puts them in 16 sets. Without it,
 * bench_layers timed ResNet-20's 14x14x32 layers at 1.7 ms forward and
 * 3.7 backward at batch 64, against 1.4-1.6 and 2.6-3.1 with it. */
#define XI_PAD 16

/* Eight channels; may_alias and an alignment of one float, so that it
 * loads from and stores to any float array. */
typedef float vf __attribute__((vector_size(32), aligned(4), may_alias));
#define LANES  8
#define INLINE static inline __attribute__((always_inline))

/* The first n lanes from p, zeros after (vectors go by pointer: returned
 * by value, their ABI would differ between the clones). */
INLINE void load_n(vf *v, const float *p, int n) {
    float b[LANES] = {0};
    memcpy(b, p, sizeof(float) * (size_t)n);
    *v = *(const vf *)b;
}

INLINE void store_n(float *p, const vf *v, int n) {
    float b[LANES];
    *(vf *)b = *v;
    memcpy(p, b, sizeof(float) * (size_t)n);
}

/* d (4x4) becomes V = B^T d B, in place. */
INLINE void in_transform(vf d[16]) {
    vf t[16];
    for (int b = 0; b < 4; b++) { /* B^T d, down each column */
        t[b] = d[b] - d[8 + b];
        t[4 + b] = d[4 + b] + d[8 + b];
        t[8 + b] = d[8 + b] - d[4 + b];
        t[12 + b] = d[4 + b] - d[12 + b];
    }
    for (int a = 0; a < 4; a++) { /* (B^T d) B, along each row */
        const vf *r = t + 4 * a;
        d[4 * a] = r[0] - r[2];
        d[4 * a + 1] = r[1] + r[2];
        d[4 * a + 2] = r[2] - r[1];
        d[4 * a + 3] = r[1] - r[3];
    }
}

/* g (3x3, kernel taps ky * 3 + kx) -> U = G g G^T (4x4). */
INLINE void filter_transform(const vf g[9], vf u[16]) {
    const vf h = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    vf r[12]; /* G g (4x3) */
    for (int k = 0; k < 3; k++) {
        r[k] = g[k];
        r[3 + k] = h * (g[k] + g[3 + k] + g[6 + k]);
        r[6 + k] = h * (g[k] - g[3 + k] + g[6 + k]);
        r[9 + k] = g[6 + k];
    }
    for (int a = 0; a < 4; a++) { /* (G g) G^T */
        const vf *q = r + 3 * a;
        u[4 * a] = q[0];
        u[4 * a + 1] = h * (q[0] + q[1] + q[2]);
        u[4 * a + 2] = h * (q[0] - q[1] + q[2]);
        u[4 * a + 3] = q[2];
    }
}

/* m (4x4) -> Y = A^T m A (2x2: y[0], y[1] the first output row). */
INLINE void out_transform(const vf m[16], vf y[4]) {
    vf s[8]; /* A^T m (2x4) */
    for (int b = 0; b < 4; b++) {
        s[b] = m[b] + m[4 + b] + m[8 + b];
        s[4 + b] = m[4 + b] - m[8 + b] - m[12 + b];
    }
    for (int i = 0; i < 2; i++) {
        y[2 * i] = s[4 * i] + s[4 * i + 1] + s[4 * i + 2];
        y[2 * i + 1] = s[4 * i + 1] - s[4 * i + 2] - s[4 * i + 3];
    }
}

/* dy (2x2: dy[0], dy[1] the first row) -> dM = A dY A^T (4x4). */
INLINE void grad_out_transform(const vf dy[4], vf m[16]) {
    vf r[8]; /* A dY (4x2) */
    for (int j = 0; j < 2; j++) {
        r[j] = dy[j];
        r[2 + j] = dy[j] + dy[2 + j];
        r[4 + j] = dy[j] - dy[2 + j];
        r[6 + j] = -dy[2 + j];
    }
    for (int a = 0; a < 4; a++) { /* (A dY) A^T */
        m[4 * a] = r[2 * a];
        m[4 * a + 1] = r[2 * a] + r[2 * a + 1];
        m[4 * a + 2] = r[2 * a] - r[2 * a + 1];
        m[4 * a + 3] = -r[2 * a + 1];
    }
}

/* du (4x4) -> dg = G^T dU G (3x3, taps ky * 3 + kx). */
INLINE void grad_filter_transform(const vf du[16], vf dg[9]) {
    const vf h = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    vf r[12]; /* G^T dU (3x4) */
    for (int b = 0; b < 4; b++) {
        r[b] = du[b] + h * (du[4 + b] + du[8 + b]);
        r[4 + b] = h * (du[4 + b] - du[8 + b]);
        r[8 + b] = h * (du[4 + b] + du[8 + b]) + du[12 + b];
    }
    for (int a = 0; a < 3; a++) { /* (G^T dU) G */
        const vf *q = r + 4 * a;
        dg[3 * a] = q[0] + h * (q[1] + q[2]);
        dg[3 * a + 1] = h * (q[1] - q[2]);
        dg[3 * a + 2] = h * (q[1] + q[2]) + q[3];
    }
}

/* A tile of the batch: example b, tile row ty, tile column tx. */
typedef struct tile_at {
    int64_t b;
    int ty, tx;
} tile_at;

/* Tile t (numbered along the rows, then down, then across examples). */
INLINE tile_at tile_first(const mr_wino *p, int64_t t) {
    const int per_img = p->tiles_h * p->tiles_w, r = (int)(t % per_img);
    return (tile_at){t / per_img, r / p->tiles_w, r % p->tiles_w};
}

INLINE void tile_next(const mr_wino *p, tile_at *a) {
    if (++a->tx == p->tiles_w) {
        a->tx = 0;
        if (++a->ty == p->tiles_h) a->ty = 0, a->b++;
    }
}

mr_wino mr_wino_plan(int in_h, int in_w, int C, int out_h, int out_w, int F, int pad_t, int pad_l) {
    mr_wino p = {in_h, in_w, C, out_h, out_w, F, pad_t, pad_l, (out_h + 1) / 2, (out_w + 1) / 2, 0};
    int64_t t = WINO_BUDGET / (16 * ((int64_t)C + F));
    if (t < WINO_MIN_TILES) t = WINO_MIN_TILES;
    p.chunk = (int)(t - t % 8); /* GEMM-friendly row counts */
    return p;
}

size_t mr_wino_filter_floats(const mr_wino *p) {
    return (size_t)16 * (size_t)p->C * (size_t)p->F;
}

size_t mr_wino_work_floats(const mr_wino *p) {
    return ((size_t)p->chunk * ((size_t)p->C + (size_t)p->F) + 2 * XI_PAD) * 16 + (size_t)p->C +
           2 * (size_t)p->F;
}

MR_AVX2_CLONES void mr_wino_filter(const mr_wino *p, const float *w, float *u) {
    const int C = p->C, F = p->F;
    const int64_t CF = (int64_t)C * F;
    for (int c = 0; c < C; c++)
        for (int f = 0; f < F; f += LANES) {
            const int n = F - f < LANES ? F - f : LANES;
            vf g[9], v[16];
            for (int k = 0; k < 9; k++)
                load_n(&g[k], w + k * CF + (int64_t)c * F + f, n);
            filter_transform(g, v);
            for (int k = 0; k < 16; k++)
                store_n(u + k * CF + (int64_t)c * F + f, &v[k], n);
        }
}

/* V_xi (T, C) at v + xi * (T * C + XI_PAD) for tiles [t0, t0 + T) of x. */
MR_AVX2_CLONES static void input_tiles(const mr_wino *p, const float *x, int64_t t0, int T,
                                       const float *zero, float *v) {
    const int C = p->C, H = p->in_h, W = p->in_w;
    const int64_t ld = (int64_t)T * C + XI_PAD;
    tile_at at = tile_first(p, t0);
    for (int i = 0; i < T; i++, tile_next(p, &at)) {
        const int64_t b = at.b;
        const int iy0 = 2 * at.ty - p->pad_t, ix0 = 2 * at.tx - p->pad_l;
        const float *d[16];
        if (iy0 >= 0 && iy0 + 4 <= H && ix0 >= 0 && ix0 + 4 <= W) { /* inside */
            const float *base = x + ((b * H + iy0) * W + ix0) * C;
            for (int a = 0; a < 4; a++)
                for (int e = 0; e < 4; e++)
                    d[4 * a + e] = base + ((int64_t)a * W + e) * C;
        } else {
            for (int a = 0; a < 4; a++)
                for (int e = 0; e < 4; e++) {
                    const int iy = iy0 + a, ix = ix0 + e;
                    d[4 * a + e] = iy >= 0 && iy < H && ix >= 0 && ix < W
                                       ? x + ((b * H + iy) * W + ix) * C
                                       : zero;
                }
        }
        float *o = v + (int64_t)i * C;
        int c = 0;
        for (; c + LANES <= C; c += LANES) {
            vf q[16];
#pragma GCC unroll 16
            for (int k = 0; k < 16; k++)
                q[k] = *(const vf *)(d[k] + c);
            in_transform(q);
#pragma GCC unroll 16
            for (int k = 0; k < 16; k++)
                *(vf *)(o + k * ld + c) = q[k];
        }
        if (c < C) { /* the last C % 8 channels */
            vf q[16];
            for (int k = 0; k < 16; k++)
                load_n(&q[k], d[k] + c, C - c);
            in_transform(q);
            for (int k = 0; k < 16; k++)
                store_n(o + k * ld + c, &q[k], C - c);
        }
    }
}

/* y's pixels of tiles [t0, t0 + T) from M_xi (T, F) at m + xi * (T * F +
 * XI_PAD); the outputs of a tile past the bottom or right edge go to
 * `spill`. */
MR_AVX2_CLONES static void output_tiles(const mr_wino *p, const float *m, int64_t t0, int T,
                                        const float *bias, float *spill, float *y) {
    const int F = p->F;
    const int64_t ld = (int64_t)T * F + XI_PAD;
    tile_at at = tile_first(p, t0);
    for (int i = 0; i < T; i++, tile_next(p, &at)) {
        float *dst[4];
        for (int k = 0; k < 4; k++) {
            const int yy = 2 * at.ty + k / 2, xx = 2 * at.tx + k % 2;
            dst[k] = yy < p->out_h && xx < p->out_w
                         ? y + ((at.b * p->out_h + yy) * p->out_w + xx) * F
                         : spill;
        }
        const float *mi = m + (int64_t)i * F;
        int f = 0;
        for (; f + LANES <= F; f += LANES) {
            vf q[16], o[4];
#pragma GCC unroll 16
            for (int k = 0; k < 16; k++)
                q[k] = *(const vf *)(mi + k * ld + f);
            out_transform(q, o);
            if (bias) {
                const vf bv = *(const vf *)(bias + f);
                for (int k = 0; k < 4; k++)
                    o[k] += bv;
            }
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                *(vf *)(dst[k] + f) = o[k];
        }
        if (f < F) { /* the last F % 8 filters */
            vf q[16], o[4];
            for (int k = 0; k < 16; k++)
                load_n(&q[k], mi + k * ld + f, F - f);
            out_transform(q, o);
            if (bias) {
                vf bv;
                load_n(&bv, bias + f, F - f);
                for (int k = 0; k < 4; k++)
                    o[k] += bv;
            }
            for (int k = 0; k < 4; k++)
                store_n(dst[k] + f, &o[k], F - f);
        }
    }
}

void mr_wino_conv(const mr_wino *p, const float *x, int n, const float *u, const float *bias,
                  float *y, float *work) {
    const int C = p->C, F = p->F;
    const int64_t tiles = (int64_t)n * p->tiles_h * p->tiles_w;
    float *v = work, *m = v + ((size_t)p->chunk * C + XI_PAD) * 16;
    float *zero = m + ((size_t)p->chunk * F + XI_PAD) * 16;
    float *spill = zero + C;
    memset(zero, 0, sizeof(float) * (size_t)C);
    for (int64_t t0 = 0; t0 < tiles; t0 += p->chunk) {
        const int T = tiles - t0 < p->chunk ? (int)(tiles - t0) : p->chunk;
        input_tiles(p, x, t0, T, zero, v);
        for (int xi = 0; xi < 16; xi++) /* M_xi (T, F) = V_xi (T, C) U_xi (C, F) */
            mr_cpu_gemm(0, 0, T, F, C, 1.0f, v + xi * ((int64_t)T * C + XI_PAD), C,
                        u + (int64_t)xi * C * F, F, 0.0f, m + xi * ((int64_t)T * F + XI_PAD), F);
        output_tiles(p, m, t0, T, bias, spill, y);
    }
}

/* dM_xi (T, F) at m + xi * (T * F + XI_PAD) for tiles [t0, t0 + T) of dy;
 * a tile's outputs past the bottom or right edge read as zeros. */
MR_AVX2_CLONES static void grad_tiles(const mr_wino *p, const float *dy, int64_t t0, int T,
                                      const float *zero, float *m) {
    const int F = p->F;
    const int64_t ld = (int64_t)T * F + XI_PAD;
    tile_at at = tile_first(p, t0);
    for (int i = 0; i < T; i++, tile_next(p, &at)) {
        const float *src[4];
        for (int k = 0; k < 4; k++) {
            const int yy = 2 * at.ty + k / 2, xx = 2 * at.tx + k % 2;
            src[k] = yy < p->out_h && xx < p->out_w
                         ? dy + ((at.b * p->out_h + yy) * p->out_w + xx) * F
                         : zero;
        }
        float *mi = m + (int64_t)i * F;
        int f = 0;
        for (; f + LANES <= F; f += LANES) {
            vf d[4], q[16];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                d[k] = *(const vf *)(src[k] + f);
            grad_out_transform(d, q);
#pragma GCC unroll 16
            for (int k = 0; k < 16; k++)
                *(vf *)(mi + k * ld + f) = q[k];
        }
        if (f < F) { /* the last F % 8 filters */
            vf d[4], q[16];
            for (int k = 0; k < 4; k++)
                load_n(&d[k], src[k] + f, F - f);
            grad_out_transform(d, q);
            for (int k = 0; k < 16; k++)
                store_n(mi + k * ld + f, &q[k], F - f);
        }
    }
}

void mr_wino_filter_grad(const mr_wino *p, const float *x, const float *dy, int n, float *du,
                         float *work) {
    const int C = p->C, F = p->F;
    const int64_t tiles = (int64_t)n * p->tiles_h * p->tiles_w;
    float *v = work, *m = v + ((size_t)p->chunk * C + XI_PAD) * 16;
    float *zero = m + ((size_t)p->chunk * F + XI_PAD) * 16;
    memset(zero, 0, sizeof(float) * (size_t)(C > F ? C : F));
    if (tiles == 0) memset(du, 0, sizeof(float) * mr_wino_filter_floats(p));
    for (int64_t t0 = 0; t0 < tiles; t0 += p->chunk) {
        const int T = tiles - t0 < p->chunk ? (int)(tiles - t0) : p->chunk;
        input_tiles(p, x, t0, T, zero, v);
        grad_tiles(p, dy, t0, T, zero, m);
        for (int xi = 0; xi < 16; xi++) /* dU_xi (C, F) (+)= V_xi^T (C, T) dM_xi (T, F) */
            mr_cpu_gemm(1, 0, C, F, T, 1.0f, v + xi * ((int64_t)T * C + XI_PAD), C,
                        m + xi * ((int64_t)T * F + XI_PAD), F, t0 == 0 ? 0.0f : 1.0f,
                        du + (int64_t)xi * C * F, F);
    }
}

MR_AVX2_CLONES void mr_wino_filter_grad_add(const mr_wino *p, const float *du, float *dw) {
    const int C = p->C, F = p->F;
    const int64_t CF = (int64_t)C * F;
    for (int c = 0; c < C; c++)
        for (int f = 0; f < F; f += LANES) {
            const int n = F - f < LANES ? F - f : LANES;
            vf u[16], g[9];
            for (int k = 0; k < 16; k++)
                load_n(&u[k], du + k * CF + (int64_t)c * F + f, n);
            grad_filter_transform(u, g);
            for (int k = 0; k < 9; k++) {
                float *d = dw + k * CF + (int64_t)c * F + f;
                vf old;
                load_n(&old, d, n);
                old += g[k];
                store_n(d, &old, n);
            }
        }
}
