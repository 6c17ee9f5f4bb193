/* conv2d_cuda.cu: Conv2D on a GPU through cuDNN, NHWC (conv2d.c says what
 * the layer is; conv2d_cpu.c is the reference).
 *   x: (B, H, W, C)   kernel: (kh, kw, C, F)   bias: (F)   y: (B, OH, OW, F)
 * cuDNN's legacy convolution API on CUDNN_TENSOR_NHWC tensors. A cuDNN
 * filter is KCRS or, with CUDNN_TENSOR_NHWC, KRSC: (F, kh, kw, C). Keras's
 * HWIO kernel is neither, but read as a (K, F) matrix (K = kh*kw*C, in
 * KRSC's (ky, kx, c) order) it is the transpose of KRSC's (F, K). The
 * kernel, its gradient and its optimizer slots live on the device as KRSC
 * (conv_device_order: the all-reduce and the update are elementwise, so
 * they take any order), so no step transposes anything: cuDNN reads the
 * kernel in place and adds the filter gradient into its gradient (beta =
 * 1: backward accumulates). The weights cross to the host in Keras's HWIO
 * (model.c: checkpoints, params_hash, copies between models), the one
 * place that transposes. gelu and swish keep z (pre) from the same pass
 * that writes y.
 * cuDNN pads symmetrically, while Keras's SAME puts an odd padding row or
 * column at the bottom or right (conv_geometry.h): such a layer pads its
 * input into scratch itself (zeropad_cuda.cu's mr_cuda_pad2d) and has
 * cuDNN convolve that unpadded, and dx is cropped out of the padded
 * input's gradient (mr_cuda_crop2d).
 * Cross-correlation (Keras does not flip the kernel), float compute and
 * CUDNN_FMA_MATH (no TF32), so results match the CPU's to float rounding.
 * Algorithms come from cuDNN's heuristics (the _v7 queries) per batch
 * size, chosen once for max_batch in setup (and again for another batch
 * size when one comes): the first that fits MR_CUDA_WORKSPACE_LIMIT,
 * preferring FMA math and deterministic algorithms, so runs repeat bitwise.
 * Bias and activation follow the convolution in one elementwise pass
 * (activation_cuda.h, elementwise.h's math); the bias gradient is one GEMM with a ones
 * vector (cuBLAS: deterministic, no atomics).
 * Relies on: kernels_cuda.h, cuda_impl.h (the cuDNN handle on the compute
 * stream, mr_cuda_workspace), conv_geometry.h, runtime/elementwise.h. */
#include <stdlib.h>

#include "runtime/elementwise.h"
#include "backends/cuda/activation_cuda.h"
#include "models/conv_geometry.h"
#include "backends/cuda/kernels_cuda.h"

/* Algorithms for one batch size, and the workspace they need. */
typedef struct conv_algos {
    int batch; /* the batch size they were chosen for; 0: none yet */
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t workspace;  /* bytes: the largest need of the three */
    int deterministic; /* 1: all three are (cuDNN's perf results say so) */
} conv_algos;

typedef struct conv_priv {
    mr_window g;
    int C, F, K;      /* input channels, filters, K = kh*kw*C */
    int pad_b, pad_r; /* Keras's padding after the last row / column */
    /* 1: asymmetric SAME padding: x is padded into scratch (xp, the layout
     * pad) and cuDNN convolves it unpadded; 0: cuDNN pads (pad_t == pad_b,
     * pad_l == pad_r) */
    int explicit_pad;
    mr_pad2d pad;
    int cin_h, cin_w;  /* the input cuDNN sees: padded when explicit_pad, else (H, W) */
    size_t pad_floats; /* xp at max_batch: (max_batch, cin_h, cin_w, C) */
    int max_rows;      /* max_batch * OH * OW */
    float *ones;       /* (max_rows) ones: the bias gradient's GEMM */
    float *pre; /* gelu, swish: z (max_rows, F) before the activation, kept for backward; or NULL */
    cudnnTensorDescriptor_t x_desc, y_desc; /* set to the call's batch size */
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    conv_algos algos[2];  /* [0] for max_batch; [1] for the last other batch size */
    int nondeterministic; /* 1: some batch size ran a non-deterministic algorithm */
} conv_priv;

static conv_priv *priv(mr_layer *l) {
    return (conv_priv *)l->priv;
}

/* ---- kernels (grid-stride loops, on the compute stream) ---- */

__global__ static void fill_kernel(float *p, size_t n, float v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

/* ---- cuDNN plumbing ---- */

/* The x and y descriptors for batch size n (host-only calls). */
static mr_status set_batch(conv_priv *p, mr_backend *be, int n, mr_error *err) {
    MR_CUDNN_TRY(be, err,
                 cudnnSetTensor4dDescriptor(p->x_desc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, p->C,
                                            p->cin_h, p->cin_w));
    MR_CUDNN_TRY(be, err,
                 cudnnSetTensor4dDescriptor(p->y_desc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, p->F,
                                            p->g.out_h, p->g.out_w));
    return MR_OK;
}

/* Index of the algorithm to use among cuDNN's n heuristic results (best
 * first), or -1: the first that succeeded, fits the workspace limit and
 * runs in FMA math, preferring a deterministic one. The heuristics list
 * every math type's variants (cuDNN's _v7 documentation), and the
 * convolution descriptor says CUDNN_FMA_MATH (no TF32, so the CPU and the
 * GPU agree to float rounding): an entry of another math type would not
 * be the algorithm that runs, so none is taken. */
template <typename Perf> static int pick_algo(const Perf *perf, int n) {
    int best = -1, best_rank = -1;
    for (int i = 0; i < n; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > MR_CUDA_WORKSPACE_LIMIT ||
            perf[i].mathType != CUDNN_FMA_MATH)
            continue;
        int rank = perf[i].determinism == CUDNN_DETERMINISTIC;
        if (rank > best_rank) best = i, best_rank = rank;
    }
    return best;
}

static mr_status no_algo(const mr_layer *l, mr_backend *be, const char *what, int n,
                         mr_error *err) {
    return mr_error_set(err, MR_ERR_RUNTIME,
                        "gpu:%d: [conv2d] %s: cuDNN offers no %s algorithm in FMA math within %zu "
                        "MiB of workspace (batch %d)",
                        be->ordinal, l->name, what, MR_CUDA_WORKSPACE_LIMIT >> 20, n);
}

/* Chooses a's algorithms for batch size n (leaves the descriptors at n). */
static mr_status choose_algos(mr_layer *l, mr_backend *be, int n, conv_algos *a, mr_error *err) {
    conv_priv *p = priv(l);
    cudnnHandle_t h = mr_cuda(be)->cudnn;
    MR_CHECK(set_batch(p, be, n, err));
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t bwd_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int n_fwd = 0, n_data = 0, n_filter = 0;
    MR_CUDNN_TRY(be, err,
                 cudnnGetConvolutionForwardAlgorithm_v7(h, p->x_desc, p->w_desc, p->conv_desc,
                                                        p->y_desc, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                        &n_fwd, fwd));
    MR_CUDNN_TRY(be, err,
                 cudnnGetConvolutionBackwardDataAlgorithm_v7(
                     h, p->w_desc, p->y_desc, p->conv_desc, p->x_desc,
                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n_data, bwd_data));
    MR_CUDNN_TRY(be, err,
                 cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                     h, p->x_desc, p->y_desc, p->conv_desc, p->w_desc,
                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n_filter, bwd_filter));
    int i = pick_algo(fwd, n_fwd), j = pick_algo(bwd_data, n_data),
        k = pick_algo(bwd_filter, n_filter);
    if (i < 0) return no_algo(l, be, "forward", n, err);
    if (j < 0) return no_algo(l, be, "backward-data", n, err);
    if (k < 0) return no_algo(l, be, "backward-filter", n, err);
    a->fwd = fwd[i].algo;
    a->bwd_data = bwd_data[j].algo;
    a->bwd_filter = bwd_filter[k].algo;
    /* pick_algo prefers deterministic ones; where cuDNN offers none, the
     * run is not bit-reproducible, and describe says so */
    a->deterministic = fwd[i].determinism == CUDNN_DETERMINISTIC &&
                       bwd_data[j].determinism == CUDNN_DETERMINISTIC &&
                       bwd_filter[k].determinism == CUDNN_DETERMINISTIC;
    if (!a->deterministic) p->nondeterministic = 1;
    /* the heuristics' memory figures, and the workspace queries' own */
    size_t ws[6] = {fwd[i].memory, bwd_data[j].memory, bwd_filter[k].memory, 0, 0, 0};
    MR_CUDNN_TRY(be, err,
                 cudnnGetConvolutionForwardWorkspaceSize(h, p->x_desc, p->w_desc, p->conv_desc,
                                                         p->y_desc, a->fwd, &ws[3]));
    MR_CUDNN_TRY(be, err,
                 cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w_desc, p->y_desc, p->conv_desc,
                                                              p->x_desc, a->bwd_data, &ws[4]));
    MR_CUDNN_TRY(be, err,
                 cudnnGetConvolutionBackwardFilterWorkspaceSize(
                     h, p->x_desc, p->y_desc, p->conv_desc, p->w_desc, a->bwd_filter, &ws[5]));
    a->workspace = 0;
    for (int q = 0; q < 6; q++)
        if (ws[q] > a->workspace) a->workspace = ws[q];
    a->batch = n;
    return MR_OK;
}

/* The algorithms for batch size n, with the descriptors set to n, and the
 * workspace they need. */
static mr_status prepare(mr_layer *l, mr_backend *be, int n, const conv_algos **out, void **ws,
                         mr_error *err) {
    conv_priv *p = priv(l);
    conv_algos *a = n == p->algos[0].batch ? &p->algos[0] : &p->algos[1];
    if (a->batch == n)
        MR_CHECK(set_batch(p, be, n, err));
    else
        MR_CHECK(choose_algos(l, be, n, a, err));
    MR_CHECK(mr_cuda_workspace(be, a->workspace, ws, err));
    *out = a;
    return MR_OK;
}

/* The input cuDNN convolves: x itself, or x padded into xp (scratch). */
static mr_status conv_input(conv_priv *p, mr_backend *be, int n, const float *x, float *xp,
                            const float **in, mr_error *err) {
    *in = x;
    if (!p->explicit_pad) return MR_OK;
    MR_CHECK(mr_cuda_pad2d(be, &p->pad, n, p->C, x, xp, err));
    *in = xp;
    return MR_OK;
}

/* ---- the layer's kernels ---- */

static mr_status conv_cuda_setup(mr_layer *l, mr_backend *be, int max_batch, mr_error *err) {
    const mr_layer_cfg *c = l->cfg;
    conv_priv *p = (conv_priv *)calloc(1, sizeof *p);
    if (p == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    l->priv = p;
    MR_CHECK(mr_cuda_enter(be, err));
    if (max_batch < 1) max_batch = 1;
    const mr_window g = mr_window_make(l->in.d[0], l->in.d[1], c);
    p->g = g;
    p->C = l->in.d[2];
    p->F = c->filters;
    p->K = g.k_h * g.k_w * p->C;
    mr_window_pad_after(&g, &p->pad_b, &p->pad_r);
    p->explicit_pad = p->pad_b != g.pad_t || p->pad_r != g.pad_l;
    p->cin_h = p->explicit_pad ? g.in_h + g.pad_t + p->pad_b : g.in_h;
    p->cin_w = p->explicit_pad ? g.in_w + g.pad_l + p->pad_r : g.in_w;
    const mr_pad2d pad = {g.in_h, g.in_w, p->cin_h, p->cin_w, g.pad_t, g.pad_l};
    p->pad = pad;
    p->pad_floats = p->explicit_pad ? (size_t)max_batch * p->cin_h * p->cin_w * p->C : 0;
    p->max_rows = max_batch * g.out_h * g.out_w;
    /* scratch: xp, and dxp in backward */
    l->scratch_floats = 2 * p->pad_floats;

    MR_CUDNN_TRY(be, err, cudnnCreateTensorDescriptor(&p->x_desc));
    MR_CUDNN_TRY(be, err, cudnnCreateTensorDescriptor(&p->y_desc));
    MR_CUDNN_TRY(be, err, cudnnCreateFilterDescriptor(&p->w_desc));
    MR_CUDNN_TRY(be, err, cudnnCreateConvolutionDescriptor(&p->conv_desc));
    /* CUDNN_TENSOR_NHWC filter: dims given as (K, C, h, w), memory KRSC */
    MR_CUDNN_TRY(be, err,
                 cudnnSetFilter4dDescriptor(p->w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, p->F,
                                            p->C, g.k_h, g.k_w));
    MR_CUDNN_TRY(be, err,
                 cudnnSetConvolution2dDescriptor(p->conv_desc, p->explicit_pad ? 0 : g.pad_t,
                                                 p->explicit_pad ? 0 : g.pad_l, g.s_h, g.s_w, 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    /* no TF32: the heuristics then rank FMA algorithms, and the calls run them */
    MR_CUDNN_TRY(be, err, cudnnSetConvolutionMathType(p->conv_desc, CUDNN_FMA_MATH));

    /* cuDNN's output shape must be Keras's (a broken geometry is a bug) */
    MR_CHECK(set_batch(p, be, max_batch, err));
    int on, oc, oh, ow;
    MR_CUDNN_TRY(be, err,
                 cudnnGetConvolution2dForwardOutputDim(p->conv_desc, p->x_desc, p->w_desc, &on, &oc,
                                                       &oh, &ow));
    if (on != max_batch || oc != p->F || oh != g.out_h || ow != g.out_w)
        return mr_error_set(err, MR_ERR_RUNTIME,
                            "gpu:%d: [conv2d] %s: cuDNN's output (%d, %d, %d, %d) is not "
                            "Keras's (%d, %d, %d, %d)",
                            be->ordinal, l->name, on, oh, ow, oc, max_batch, g.out_h, g.out_w,
                            p->F);

    /* the ones of the bias gradient */
    mr_dfloat *ones = mr_backend_alloc_floats(be, (size_t)p->max_rows);
    p->ones = ones ? mr_dfloat_ptr(ones) : NULL;
    if (p->ones == NULL)
        return mr_error_set(err, MR_ERR_NOMEM, "gpu:%d: out of memory for [conv2d] %s's kernel",
                            be->ordinal, l->name);
    MR_CUDA_LAUNCH(fill_kernel, mr_cuda_blocks((size_t)p->max_rows), MR_CUDA_THREADS,
                   mr_cuda(be)->stream, p->ones, (size_t)p->max_rows, 1.0f);
    mr_cuda_launched(be, err, "fill_kernel");

    if (mr_activation_needs_input(l->cfg->activation)) {
        mr_dfloat *pre = mr_backend_alloc_floats(be, (size_t)p->max_rows * (size_t)p->F);
        if (pre == NULL)
            return mr_error_set(err, MR_ERR_NOMEM,
                                "gpu:%d: out of memory for [conv2d] %s's pre-activations",
                                be->ordinal, l->name);
        p->pre = mr_dfloat_ptr(pre);
    }
    MR_CHECK(choose_algos(l, be, max_batch, &p->algos[0], err));
    /* the workspace now, so a device too small for it fails here */
    void *ws;
    return mr_cuda_workspace(be, p->algos[0].workspace, &ws, err);
}

static mr_status conv_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                              mr_dfloat *yd) {
    if (batch == 0) return MR_OK; /* cuDNN takes no empty tensors */
    mr_backend *be = run->be;
    mr_error *err = run->err;
    conv_priv *p = priv(l);
    const conv_algos *a;
    void *ws;
    MR_CHECK(prepare(l, be, batch, &a, &ws, err));
    const float *in;
    MR_CHECK(conv_input(p, be, batch, mr_dfloat_cptr(xd), mr_dfloat_ptr(run->scratch), &in, err));
    float *y = mr_dfloat_ptr(yd);
    const float one = 1.0f, zero = 0.0f;
    /* y (batch, OH, OW, F) = x (*) kernel (KRSC) */
    MR_CUDNN_TRY(be, err,
                 cudnnConvolutionForward(mr_cuda(be)->cudnn, &one, p->x_desc, in, p->w_desc,
                                         mr_dfloat_cptr(l->w[0].data), p->conv_desc, a->fwd, ws,
                                         a->workspace, &zero, p->y_desc, y));
    /* y += bias, then the activation (activation_cuda.h) */
    const int rows = batch * p->g.out_h * p->g.out_w;
    const float *bias = l->n_weights > 1 ? mr_dfloat_cptr(l->w[1].data) : NULL;
    if (p->pre != NULL && mr_activation_needs_input(mr_layer_activation(l))) {
        /* gelu, swish: z = y + bias kept for backward, and y = act(z),
         * in one pass */
        return mr_cuda_activation_forward_to(be, mr_layer_activation(l), y, y, p->pre, bias, rows,
                                             p->F, err);
    }
    MR_CHECK(mr_cuda_bias_activation_forward(be, mr_layer_activation(l), y, bias, rows, p->F, err));
    return MR_OK;
}

static mr_status conv_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *xd,
                               const mr_dfloat *yd, mr_dfloat *dyd, mr_dfloat *dxd) {
    if (batch == 0) return MR_OK;
    mr_backend *be = run->be;
    mr_error *err = run->err;
    conv_priv *p = priv(l);
    const int64_t rows = (int64_t)batch * p->g.out_h * p->g.out_w;
    float *dy = mr_dfloat_ptr(dyd);

    /* dy becomes dL/dz through the activation (gelu, swish: through the
     * forward's z) */
    if (p->pre != NULL && mr_activation_needs_input(mr_layer_activation(l)))
        MR_CHECK(mr_cuda_activation_backward_x(be, mr_layer_activation(l), p->pre, dy,
                                               (size_t)rows * (size_t)p->F, err));
    else
        MR_CHECK(mr_cuda_activation_backward(be, mr_layer_activation(l), mr_dfloat_cptr(yd), dy,
                                             (int)rows, p->F, err));
    /* db (1, F) += ones (1, rows) dy (rows, F) */
    if (l->n_weights > 1)
        MR_CHECK(mr_gemm(be, 0, 0, 1, p->F, (int)rows, 1.0f, mr_dfloat_cof(p->ones), (int)rows, dyd,
                         p->F, 1.0f, l->w[1].grad, p->F, err));

    const conv_algos *a;
    void *ws;
    MR_CHECK(prepare(l, be, batch, &a, &ws, err));
    float *xp = mr_dfloat_ptr(run->scratch), *dxp = p->explicit_pad ? xp + p->pad_floats : NULL;
    const float *in;
    MR_CHECK(conv_input(p, be, batch, mr_dfloat_cptr(xd), xp, &in, err));
    const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = mr_cuda(be)->cudnn;
    /* dW (F, K) += dL/dW, KRSC as the gradient is kept (beta = 1: added
     * as the result, then the sum, the bits of a separate addition) */
    MR_CUDNN_TRY(be, err,
                 cudnnConvolutionBackwardFilter(h, &one, p->x_desc, in, p->y_desc, dy, p->conv_desc,
                                                a->bwd_filter, ws, a->workspace, &one, p->w_desc,
                                                mr_dfloat_ptr(l->w[0].grad)));
    if (dxd == NULL) return MR_OK;

    /* dx = dy (*)^T kernel (KRSC) */
    float *dx = mr_dfloat_ptr(dxd);
    MR_CUDNN_TRY(be, err,
                 cudnnConvolutionBackwardData(
                     h, &one, p->w_desc, mr_dfloat_cptr(l->w[0].data), p->y_desc, dy, p->conv_desc,
                     a->bwd_data, ws, a->workspace, &zero, p->x_desc, p->explicit_pad ? dxp : dx));
    if (p->explicit_pad) MR_CHECK(mr_cuda_crop2d(be, &p->pad, batch, p->C, dxp, dx, err));
    return MR_OK;
}

static void conv_cuda_destroy(mr_layer *l, mr_backend *be) {
    conv_priv *p = priv(l);
    if (p == NULL) return;
    if (p->x_desc) cudnnDestroyTensorDescriptor(p->x_desc);
    if (p->y_desc) cudnnDestroyTensorDescriptor(p->y_desc);
    if (p->w_desc) cudnnDestroyFilterDescriptor(p->w_desc);
    if (p->conv_desc) cudnnDestroyConvolutionDescriptor(p->conv_desc);
    mr_backend_free(be, p->ones);
    mr_backend_free(be, p->pre);
    free(p);
    l->priv = NULL;
}

/* cuDNN's algorithm names (cudnn_cnn.h's enums), for the start line */
static const char *fwd_name(cudnnConvolutionFwdAlgo_t a) {
    static const char *const n[] = {
        "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
        "WINOGRAD",      "WINOGRAD_NONFUSED"};
    return (int)a >= 0 && (size_t)a < sizeof n / sizeof n[0] ? n[a] : "?";
}

static const char *bwd_data_name(cudnnConvolutionBwdDataAlgo_t a) {
    static const char *const n[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                    "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    return (int)a >= 0 && (size_t)a < sizeof n / sizeof n[0] ? n[a] : "?";
}

static const char *bwd_filter_name(cudnnConvolutionBwdFilterAlgo_t a) {
    static const char *const n[] = {
        "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
    return (int)a >= 0 && (size_t)a < sizeof n / sizeof n[0] ? n[a] : "?";
}

/* The algorithms chosen for max_batch at setup; deterministic only if
 * every batch size so far ran deterministic ones. */
static int conv_describe(const mr_layer *l, char *buf, size_t n) {
    const conv_priv *p = (const conv_priv *)l->priv;
    const conv_algos *a = &p->algos[0];
    snprintf(buf, n, "fwd %s, bwd data %s, bwd filter %s", fwd_name(a->fwd),
             bwd_data_name(a->bwd_data), bwd_filter_name(a->bwd_filter));
    return !p->nondeterministic;
}

/* The kernel (weight 0) lives as KRSC (F, K), Keras's HWIO (K, F)
 * transposed (K = kh*kw*C); the bias in Keras's order. */
static int conv_device_order(const mr_layer *l, int w, int to_device, const float *src,
                             float *dst) {
    if (w != 0) return 0;
    if (src == NULL) return 1;
    const int64_t F = l->cfg->filters, K = l->w[0].size / F;
    for (int64_t k = 0; k < K; k++)
        for (int64_t f = 0; f < F; f++) {
            if (to_device)
                dst[f * K + k] = src[k * F + f];
            else
                dst[k * F + f] = src[f * K + k];
        }
    return 1;
}

const mr_layer_kernels mr_conv2d_cuda = {
    .setup = conv_cuda_setup,
    .forward = conv_forward,
    .backward = conv_backward,
    .destroy = conv_cuda_destroy,
    .describe = conv_describe,
    .fuses_relu = 0,
    .device_order = conv_device_order,
};
