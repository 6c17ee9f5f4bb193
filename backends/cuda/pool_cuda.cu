/* pool_cuda.cu: MaxPooling2D and AveragePooling2D on a GPU, NHWC (pool.c
 * says what the layers are; pool_cpu.c is the reference).
 *   x: (B, H, W, C) -> y: (B, OH, OW, C)
 * Small kernels of our own rather than cuDNN's pooling, because they must
 * compute exactly what pool_cpu.c does, and cuDNN differs in three ways:
 * it pads symmetrically (Keras's SAME puts an odd padding row or column
 * at the bottom or right), its max backward does not promise to route a
 * tie to the first maximal cell of the window, and its average with
 * padding excluded would still need the asymmetric padding emulated.
 * Each window is clipped to the input (the cells of Keras's padding are
 * neither maxima nor counted in the average) by conv_geometry.h's
 * mr_window_clip, the function pool_cpu.c calls.
 * Forward: one thread per output element, visiting the window's cells in
 * the CPU's order (row-major, strict > so the first maximum stays).
 * Backward: one thread per input element, gathering from the outputs
 * whose windows cover it, in the order the CPU scatters them (oy, ox
 * ascending), so no atomics and the same sums; a max window's dy goes to
 * its first cell equal to its output, found again from x and y as the CPU
 * does. Products and sums go through __fmul_rn / __fadd_rn, which nvcc
 * never contracts into FMAs, so the results are the CPU's bit for bit
 * (the sign of a zero gradient aside).
 * Relies on: kernels_cuda.h, conv_geometry.h (the window, the cells it
 * reads and the windows that read a cell). */
#include "models/conv_geometry.h"
#include "backends/cuda/kernels_cuda.h"

/* y (n, OH, OW, C): the max or the mean of each clipped window of x */
__global__ static void pool_forward_kernel(mr_window g, int C, int n, int is_max,
                                           const float *__restrict__ x, float *__restrict__ y) {
    const size_t total = (size_t)n * g.out_h * g.out_w * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / C;
        const int c = (int)(i % C), ox = (int)(t % g.out_w);
        t /= g.out_w;
        const int oy = (int)(t % g.out_h);
        const float *xb = x + (t / g.out_h) * g.in_h * g.in_w * C + c;
        const mr_rect w = mr_window_clip(&g, oy, ox);
        const int y0 = w.y0, y1 = w.y1, x0 = w.x0, x1 = w.x1;
        /* from the first cell of the window, as the CPU */
        float o = xb[((size_t)y0 * g.in_w + x0) * C];
        for (int iy = y0; iy < y1; iy++)
            for (int ix = (iy == y0 ? x0 + 1 : x0); ix < x1; ix++) {
                const float v = xb[((size_t)iy * g.in_w + ix) * C];
                o = is_max ? (v > o ? v : o) : __fadd_rn(o, v);
            }
        if (!is_max) o = __fmul_rn(o, mr_rect_inv_area(w));
        y[i] = o;
    }
}

/* dx (n, H, W, C): for each input cell, the sum over the windows that
 * cover it of what each routes to it: max, dy where the cell is the
 * window's first cell equal to y; average, dy / (the window's cells). */
__global__ static void pool_backward_kernel(mr_window g, int C, int n, int is_max,
                                            const float *__restrict__ x,
                                            const float *__restrict__ y,
                                            const float *__restrict__ dy, float *__restrict__ dx) {
    const size_t total = (size_t)n * g.in_h * g.in_w * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / C;
        const int c = (int)(i % C), ix = (int)(t % g.in_w);
        t /= g.in_w;
        const int iy = (int)(t % g.in_h);
        const size_t b = t / g.in_h;
        const float *xb = x + b * g.in_h * g.in_w * C + c;
        const size_t ob = b * g.out_h * g.out_w * C + c;
        /* the outputs whose window holds the cell, in the CPU's scatter order */
        const mr_rect cover = mr_window_covering(&g, iy, ix);
        const float v = xb[((size_t)iy * g.in_w + ix) * C];
        float sum = 0.0f;
        for (int oy = cover.y0; oy < cover.y1; oy++)
            for (int ox = cover.x0; ox < cover.x1; ox++) {
                const size_t o = ob + ((size_t)oy * g.out_w + ox) * C;
                const mr_rect w = mr_window_clip(&g, oy, ox);
                if (!is_max) {
                    sum = __fadd_rn(sum, __fmul_rn(dy[o], mr_rect_inv_area(w)));
                    continue;
                }
                const float m = y[o];
                if (v != m) continue;
                /* the first cell of the window equal to m takes dy: none before this one */
                int first = 1;
                for (int yy = w.y0; yy <= iy && first; yy++)
                    for (int xx = w.x0; xx < w.x1; xx++) {
                        if (yy == iy && xx == ix) break;
                        if (xb[((size_t)yy * g.in_w + xx) * C] == m) {
                            first = 0;
                            break;
                        }
                    }
                if (first) sum = __fadd_rn(sum, dy[o]);
            }
        dx[i] = sum;
    }
}

static mr_status pool_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                              mr_dfloat *y) {
    if (batch == 0) return MR_OK;
    const mr_window g = mr_window_make(l->in.d[0], l->in.d[1], l->cfg);
    const int C = l->in.d[2];
    const size_t total = (size_t)batch * g.out_h * g.out_w * C;
    MR_CUDA_LAUNCH(pool_forward_kernel, mr_cuda_blocks(total), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, g, C, batch, l->cfg->kind == MR_LAYER_MAXPOOL,
                   mr_dfloat_cptr(x), mr_dfloat_ptr(y));
    mr_cuda_launched(run->be, run->err, "pool_forward_kernel");
    return MR_OK;
}

static mr_status pool_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                               const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    if (dx == NULL || batch == 0) return MR_OK;
    const mr_window g = mr_window_make(l->in.d[0], l->in.d[1], l->cfg);
    const int C = l->in.d[2];
    const size_t total = (size_t)batch * g.in_h * g.in_w * C;
    MR_CUDA_LAUNCH(pool_backward_kernel, mr_cuda_blocks(total), MR_CUDA_THREADS,
                   mr_cuda(run->be)->stream, g, C, batch, l->cfg->kind == MR_LAYER_MAXPOOL,
                   mr_dfloat_cptr(x), mr_dfloat_cptr(y), mr_dfloat_cptr(dy), mr_dfloat_ptr(dx));
    mr_cuda_launched(run->be, run->err, "pool_backward_kernel");
    return MR_OK;
}

/* No state: the window comes from the layer's shape and .cfg each call. */
const mr_layer_kernels mr_pool_cuda = {
    .setup = NULL,
    .forward = pool_forward,
    .backward = pool_backward,
    .destroy = NULL,
    .describe = NULL,
    .fuses_relu = 0,
    .device_order = NULL,
};
