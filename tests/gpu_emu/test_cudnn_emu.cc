// test_cudnn_emu.cc - tests of the emulated cuDNN (cudnn_emu.cc) through the
// public cuDNN API, on emulated device memory (cudaMalloc of the emulated
// runtime):
//   - TensorFlow goldens (golden/, make_golden.py): forward, backward data,
//     backward filter, in NHWC/KRSC, NCHW/KCRS and mixed layouts, and
//     CUDNN_CONVOLUTION with the filter flipped
//   - random shapes against the direct-loop reference (conv_ref.cc)
//   - beta = 0 over NaN poison, alpha/beta blending
//   - the output-size formula, every argument check, the heuristics and
//     their override (cudnn_emu.h), workspace checks
// Usage: test_cudnn_emu [golden_dir]  (default: GOLDEN_DIR, set at build).
// Prints one line per failure and "N passed, M failed"; exits 1 on failure.
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/gpu_emu/conv_ref.h"
#include "tests/gpu_emu/cudnn_emu.h"

#ifndef GOLDEN_DIR
#define GOLDEN_DIR "tests/gpu_emu/golden"
#endif

static int passed, failed;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...) {
    if (ok) {
        passed++;
        return;
    }
    failed++;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudnnStatus_t st_ = (call);                                                                \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                                         \
            printf("FAIL: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudnnGetErrorString(st_));  \
            failed++;                                                                              \
        }                                                                                          \
    } while (0)

// ---- .npy (float32, little-endian, C order) ----

struct Npy {
    std::vector<int> shape;
    std::vector<float> data;
};

// Format: "\x93NUMPY", major, minor, header length (2 bytes in v1, 4 in
// v2/v3, little-endian), then a Python dict literal with 'descr',
// 'fortran_order' and 'shape', padded; then the raw data.
static bool read_npy(const std::string &path, Npy *out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (all.size() < 10 || all.compare(0, 6, "\x93NUMPY") != 0) return false;
    unsigned major = (unsigned char)all[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (unsigned char)all[8] | (unsigned char)all[9] << 8;
        hstart = 10;
    } else {
        hlen = (size_t)(unsigned char)all[8] | (size_t)(unsigned char)all[9] << 8 |
               (size_t)(unsigned char)all[10] << 16 | (size_t)(unsigned char)all[11] << 24;
        hstart = 12;
    }
    std::string h = all.substr(hstart, hlen);
    if (h.find("'descr': '<f4'") == std::string::npos) return false;
    if (h.find("'fortran_order': False") == std::string::npos) return false;
    size_t a = h.find("'shape': (");
    if (a == std::string::npos) return false;
    a += 10;
    size_t b = h.find(')', a);
    out->shape.clear();
    std::stringstream ss(h.substr(a, b - a));
    std::string tok;
    size_t count = 1;
    while (std::getline(ss, tok, ','))
        if (tok.find_first_not_of(' ') != std::string::npos) {
            out->shape.push_back(std::stoi(tok));
            count *= (size_t)out->shape.back();
        }
    size_t d = hstart + hlen;
    if (all.size() - d != count * 4) return false;
    out->data.resize(count);
    std::memcpy(out->data.data(), all.data() + d, count * 4);
    return true;
}

// ---- device buffers ----

struct Dev {
    float *p = nullptr;
    size_t n = 0;
    explicit Dev(size_t n_) : n(n_) {
        if (cudaMalloc((void **)&p, n * sizeof(float)) != cudaSuccess) {
            printf("cudaMalloc failed\n");
            exit(2);
        }
    }
    Dev(const std::vector<float> &v) : Dev(v.size()) { put(v); }
    ~Dev() { cudaFree(p); }
    Dev(const Dev &) = delete;
    Dev &operator=(const Dev &) = delete;
    void put(const std::vector<float> &v) {
        cudaMemcpy(p, v.data(), n * 4, cudaMemcpyHostToDevice);
    }
    std::vector<float> get() const {
        cudaDeviceSynchronize();
        std::vector<float> v(n);
        cudaMemcpy(v.data(), p, n * 4, cudaMemcpyDeviceToHost);
        return v;
    }
};

// max|a-b| / max(1, max|b|)
static double nerr(const std::vector<float> &a, const std::vector<float> &b) {
    if (a.size() != b.size()) return INFINITY;
    double m = 0, s = 1;
    for (size_t i = 0; i < a.size(); i++) {
        double d = std::fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d; // NaN propagates
        s = std::max(s, std::fabs((double)b[i]));
    }
    return m / s;
}

// ---- layouts ----

enum Layout { NHWC, NCHW };

static cudnnTensorFormat_t fmt(Layout l) {
    return l == NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

// canonical NHWC (n, h, w, c) -> layout l
static std::vector<float> from_nhwc(const std::vector<float> &v, int n, int h, int w, int c,
                                    Layout l) {
    if (l == NHWC) return v;
    std::vector<float> o(v.size());
    for (int a = 0; a < n; a++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int z = 0; z < c; z++)
                    o[(((size_t)a * c + z) * h + y) * w + x] =
                        v[(((size_t)a * h + y) * w + x) * c + z];
    return o;
}

static std::vector<float> to_nhwc(const std::vector<float> &v, int n, int h, int w, int c,
                                  Layout l) {
    if (l == NHWC) return v;
    std::vector<float> o(v.size());
    for (int a = 0; a < n; a++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int z = 0; z < c; z++)
                    o[(((size_t)a * h + y) * w + x) * c + z] =
                        v[(((size_t)a * c + z) * h + y) * w + x];
    return o;
}

// HWIO (r, s, c, k) -> KRSC (filter layout NHWC) or KCRS (NCHW); optionally
// flipped in both spatial dimensions
static std::vector<float> from_hwio(const std::vector<float> &v, int R, int S, int C, int K,
                                    Layout l, bool flip) {
    std::vector<float> o(v.size());
    for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++)
            for (int c = 0; c < C; c++)
                for (int k = 0; k < K; k++) {
                    int rr = flip ? R - 1 - r : r, ss = flip ? S - 1 - s : s;
                    size_t src = (((size_t)rr * S + ss) * C + c) * K + k;
                    size_t dst = l == NHWC ? (((size_t)k * R + r) * S + s) * C + c
                                           : (((size_t)k * C + c) * R + r) * S + s;
                    o[dst] = v[src];
                }
    return o;
}

// ---- one convolution's descriptors ----

struct Conv {
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
    ConvShape s;
    Conv(cudnnHandle_t h_, const ConvShape &s_, Layout xl, Layout wl) : h(h_), s(s_) {
        cudnnCreateTensorDescriptor(&x);
        cudnnCreateTensorDescriptor(&y);
        cudnnCreateFilterDescriptor(&w);
        cudnnCreateConvolutionDescriptor(&c);
        CK(cudnnSetTensor4dDescriptor(x, fmt(xl), CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w));
        CK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, fmt(wl), s.k, s.c, s.r, s.s));
        CK(cudnnSetConvolution2dDescriptor(c, s.pad_h, s.pad_w, s.str_h, s.str_w, s.dil_h, s.dil_w,
                                           s.flip ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION,
                                           CUDNN_DATA_FLOAT));
        CK(cudnnSetConvolutionMathType(c, CUDNN_FMA_MATH));
        int on, oc, oh, ow;
        CK(cudnnGetConvolution2dForwardOutputDim(c, x, w, &on, &oc, &oh, &ow));
        check(on == s.n && oc == s.k && oh == s.p && ow == s.q,
              "output dim (%d,%d,%d,%d) vs (%d,%d,%d,%d)", on, oc, oh, ow, s.n, s.k, s.p, s.q);
        CK(cudnnSetTensor4dDescriptor(y, fmt(xl), CUDNN_DATA_FLOAT, s.n, s.k, s.p, s.q));
    }
    ~Conv() {
        cudnnDestroyTensorDescriptor(x);
        cudnnDestroyTensorDescriptor(y);
        cudnnDestroyFilterDescriptor(w);
        cudnnDestroyConvolutionDescriptor(c);
    }
    Conv(const Conv &) = delete;
    Conv &operator=(const Conv &) = delete;
};

// Runs the three passes with the first successful FMA algorithm the
// heuristics give and its workspace.
struct Results {
    std::vector<float> y, dx, dw;
};

static Results run3(Conv &cv, const std::vector<float> &x, const std::vector<float> &w,
                    const std::vector<float> &dy, float alpha = 1, float beta = 0,
                    const Results *prior = nullptr) {
    const ConvShape &s = cv.s;
    Dev dx_(x), dw_(w), ddy(dy), y(prior ? prior->y : std::vector<float>(conv_y_size(s), NAN)),
        dx(prior ? prior->dx : std::vector<float>(conv_x_size(s), NAN)),
        dw(prior ? prior->dw : std::vector<float>(conv_w_size(s), NAN));
    cudnnConvolutionFwdAlgoPerf_t fp[8];
    cudnnConvolutionBwdDataAlgoPerf_t dp[8];
    cudnnConvolutionBwdFilterAlgoPerf_t wp[8];
    int nf = 0, nd = 0, nw = 0;
    CK(cudnnGetConvolutionForwardAlgorithm_v7(cv.h, cv.x, cv.w, cv.c, cv.y, 8, &nf, fp));
    CK(cudnnGetConvolutionBackwardDataAlgorithm_v7(cv.h, cv.w, cv.y, cv.c, cv.x, 8, &nd, dp));
    CK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(cv.h, cv.x, cv.y, cv.c, cv.w, 8, &nw, wp));
    int i = 0, j = 0, k = 0;
    while (i < nf && (fp[i].status || fp[i].mathType != CUDNN_FMA_MATH))
        i++;
    while (j < nd && (dp[j].status || dp[j].mathType != CUDNN_FMA_MATH))
        j++;
    while (k < nw && (wp[k].status || wp[k].mathType != CUDNN_FMA_MATH))
        k++;
    check(i < nf && j < nd && k < nw, "no FMA algorithm");
    size_t a = 0, b = 0, c = 0;
    CK(cudnnGetConvolutionForwardWorkspaceSize(cv.h, cv.x, cv.w, cv.c, cv.y, fp[i].algo, &a));
    CK(cudnnGetConvolutionBackwardDataWorkspaceSize(cv.h, cv.w, cv.y, cv.c, cv.x, dp[j].algo, &b));
    CK(cudnnGetConvolutionBackwardFilterWorkspaceSize(cv.h, cv.x, cv.y, cv.c, cv.w, wp[k].algo,
                                                      &c));
    size_t wsb = std::max(a, std::max(b, c));
    Dev ws(wsb / 4 + 1);
    CK(cudnnConvolutionForward(cv.h, &alpha, cv.x, dx_.p, cv.w, dw_.p, cv.c, fp[i].algo, ws.p, wsb,
                               &beta, cv.y, y.p));
    CK(cudnnConvolutionBackwardData(cv.h, &alpha, cv.w, dw_.p, cv.y, ddy.p, cv.c, dp[j].algo, ws.p,
                                    wsb, &beta, cv.x, dx.p));
    CK(cudnnConvolutionBackwardFilter(cv.h, &alpha, cv.x, dx_.p, cv.y, ddy.p, cv.c, wp[k].algo,
                                      ws.p, wsb, &beta, cv.w, dw.p));
    return Results{y.get(), dx.get(), dw.get()};
}

// ---- TensorFlow goldens ----

static void test_goldens(cudnnHandle_t h, const std::string &dir) {
    std::ifstream idx(dir + "/index.txt");
    check((bool)idx, "cannot open %s/index.txt", dir.c_str());
    std::string line;
    int cases = 0;
    while (std::getline(idx, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        std::string name;
        ConvShape s{};
        ls >> name >> s.pad_h >> s.pad_w >> s.str_h >> s.str_w >> s.dil_h >> s.dil_w;
        Npy x, w, dy, y, dx, dw;
        bool ok = read_npy(dir + "/" + name + "_x.npy", &x) &&
                  read_npy(dir + "/" + name + "_w.npy", &w) &&
                  read_npy(dir + "/" + name + "_dy.npy", &dy) &&
                  read_npy(dir + "/" + name + "_y.npy", &y) &&
                  read_npy(dir + "/" + name + "_dx.npy", &dx) &&
                  read_npy(dir + "/" + name + "_dw.npy", &dw);
        check(ok, "%s: reading the .npy files", name.c_str());
        if (!ok) continue;
        cases++;
        s.n = x.shape[0], s.h = x.shape[1], s.w = x.shape[2], s.c = x.shape[3];
        s.r = w.shape[0], s.s = w.shape[1], s.k = w.shape[3];
        for (int flip = 0; flip < 2; flip++) {
            s.flip = flip;
            conv_shape_finish(s);
            check(s.p == y.shape[1] && s.q == y.shape[2], "%s: output %dx%d, TF %dx%d",
                  name.c_str(), s.p, s.q, y.shape[1], y.shape[2]);
            // the direct-loop reference, on canonical layouts, against TF
            std::vector<float> wk = from_hwio(w.data, s.r, s.s, s.c, s.k, NHWC, flip);
            std::vector<float> ry(conv_y_size(s)), rdx(conv_x_size(s)), rdw(conv_w_size(s));
            conv_ref_forward(s, x.data.data(), wk.data(), ry.data());
            conv_ref_backward_data(s, wk.data(), dy.data.data(), rdx.data());
            conv_ref_backward_filter(s, x.data.data(), dy.data.data(), rdw.data());
            std::vector<float> tdw = from_hwio(dw.data, s.r, s.s, s.c, s.k, NHWC, flip);
            check(nerr(ry, y.data) < 1e-5 && nerr(rdx, dx.data) < 1e-5 && nerr(rdw, tdw) < 1e-5,
                  "%s flip=%d: reference vs TF: y %g dx %g dw %g", name.c_str(), flip,
                  nerr(ry, y.data), nerr(rdx, dx.data), nerr(rdw, tdw));
            const Layout L[3][2] = {{NHWC, NHWC}, {NCHW, NCHW}, {NHWC, NCHW}};
            for (auto &l : L) {
                Conv cv(h, s, l[0], l[1]);
                Results r = run3(cv, from_nhwc(x.data, s.n, s.h, s.w, s.c, l[0]),
                                 from_hwio(w.data, s.r, s.s, s.c, s.k, l[1], flip),
                                 from_nhwc(dy.data, s.n, s.p, s.q, s.k, l[0]));
                double ey = nerr(to_nhwc(r.y, s.n, s.p, s.q, s.k, l[0]), y.data);
                double ex = nerr(to_nhwc(r.dx, s.n, s.h, s.w, s.c, l[0]), dx.data);
                double ew = nerr(r.dw, from_hwio(dw.data, s.r, s.s, s.c, s.k, l[1], flip));
                check(ey < 1e-5 && ex < 1e-5 && ew < 1e-5, "%s %s/%s %s: y %g dx %g dw %g",
                      name.c_str(), l[0] == NHWC ? "NHWC" : "NCHW", l[1] == NHWC ? "KRSC" : "KCRS",
                      flip ? "CONVOLUTION" : "CROSS_CORRELATION", ey, ex, ew);
            }
        }
    }
    check(cases >= 8, "only %d golden cases", cases);
    printf("goldens: %d TensorFlow cases x 2 modes x 3 layouts\n", cases);
}

// ---- random shapes against the reference ----

static std::vector<float> rnd(std::mt19937 &g, size_t n) {
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> v(n);
    for (auto &x : v)
        x = u(g);
    return v;
}

static void test_random(cudnnHandle_t h) {
    std::mt19937 g(12345);
    auto ri = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); };
    int n_cases = 0;
    for (int t = 0; t < 40; t++) {
        ConvShape s{};
        s.n = ri(1, 3), s.c = ri(1, 5), s.k = ri(1, 6), s.r = ri(1, 4), s.s = ri(1, 4);
        s.str_h = ri(1, 3), s.str_w = ri(1, 3), s.dil_h = ri(1, 2), s.dil_w = ri(1, 2);
        s.pad_h = ri(0, 2), s.pad_w = ri(0, 2), s.flip = ri(0, 1);
        s.h = ri((s.r - 1) * s.dil_h + 1, 11), s.w = ri((s.s - 1) * s.dil_w + 1, 11);
        conv_shape_finish(s);
        Layout xl = ri(0, 1) ? NHWC : NCHW, wl = ri(0, 1) ? NHWC : NCHW;
        std::vector<float> x = rnd(g, conv_x_size(s)), w = rnd(g, conv_w_size(s)),
                           dy = rnd(g, conv_y_size(s));
        std::vector<float> ry(conv_y_size(s)), rdx(conv_x_size(s)), rdw(conv_w_size(s));
        conv_ref_forward(s, x.data(), w.data(), ry.data());
        conv_ref_backward_data(s, w.data(), dy.data(), rdx.data());
        conv_ref_backward_filter(s, x.data(), dy.data(), rdw.data());
        Conv cv(h, s, xl, wl);
        // w is canonical KRSC; KCRS wants it reordered
        std::vector<float> wl_data = w;
        if (wl == NCHW)
            for (int k = 0; k < s.k; k++)
                for (int r = 0; r < s.r; r++)
                    for (int q = 0; q < s.s; q++)
                        for (int c = 0; c < s.c; c++)
                            wl_data[(((size_t)k * s.c + c) * s.r + r) * s.s + q] =
                                w[(((size_t)k * s.r + r) * s.s + q) * s.c + c];
        Results r = run3(cv, from_nhwc(x, s.n, s.h, s.w, s.c, xl), wl_data,
                         from_nhwc(dy, s.n, s.p, s.q, s.k, xl));
        std::vector<float> gdw = r.dw;
        if (wl == NCHW)
            for (int k = 0; k < s.k; k++)
                for (int rr = 0; rr < s.r; rr++)
                    for (int q = 0; q < s.s; q++)
                        for (int c = 0; c < s.c; c++)
                            gdw[(((size_t)k * s.r + rr) * s.s + q) * s.c + c] =
                                r.dw[(((size_t)k * s.c + c) * s.r + rr) * s.s + q];
        double ey = nerr(to_nhwc(r.y, s.n, s.p, s.q, s.k, xl), ry);
        double ex = nerr(to_nhwc(r.dx, s.n, s.h, s.w, s.c, xl), rdx);
        double ew = nerr(gdw, rdw);
        check(ey < 1e-5 && ex < 1e-5 && ew < 1e-5,
              "random %d: n%d c%d %dx%d k%d %dx%d pad %d,%d str %d,%d dil %d,%d flip %d: y %g dx "
              "%g dw %g",
              t, s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.pad_h, s.pad_w, s.str_h, s.str_w, s.dil_h,
              s.dil_w, s.flip, ey, ex, ew);
        n_cases++;
    }
    // a batch big enough that the im2col buffer is built in chunks
    {
        ConvShape s{};
        s.n = 4, s.c = 64, s.h = 64, s.w = 64, s.k = 3, s.r = 3, s.s = 3;
        s.pad_h = s.pad_w = 1, s.str_h = s.str_w = 1, s.dil_h = s.dil_w = 1;
        conv_shape_finish(s);
        std::vector<float> x = rnd(g, conv_x_size(s)), w = rnd(g, conv_w_size(s)),
                           dy = rnd(g, conv_y_size(s));
        std::vector<float> ry(conv_y_size(s)), rdx(conv_x_size(s)), rdw(conv_w_size(s));
        conv_ref_forward(s, x.data(), w.data(), ry.data());
        conv_ref_backward_data(s, w.data(), dy.data(), rdx.data());
        conv_ref_backward_filter(s, x.data(), dy.data(), rdw.data());
        Conv cv(h, s, NHWC, NHWC);
        Results r = run3(cv, x, w, dy);
        check(nerr(r.y, ry) < 1e-5 && nerr(r.dx, rdx) < 1e-5 && nerr(r.dw, rdw) < 1e-5,
              "chunked batch: y %g dx %g dw %g", nerr(r.y, ry), nerr(r.dx, rdx), nerr(r.dw, rdw));
    }
    printf("random: %d shapes + 1 chunked batch against conv_ref\n", n_cases);
}

// ---- alpha / beta ----

static bool any_nan(const std::vector<float> &v) {
    for (float f : v)
        if (std::isnan(f)) return true;
    return false;
}

static void test_alpha_beta(cudnnHandle_t h) {
    std::mt19937 g(7);
    ConvShape s{};
    s.n = 2, s.c = 3, s.h = 6, s.w = 5, s.k = 4, s.r = 3, s.s = 2, s.pad_h = 1, s.pad_w = 0;
    s.str_h = s.str_w = s.dil_h = s.dil_w = 1;
    conv_shape_finish(s);
    std::vector<float> x = rnd(g, conv_x_size(s)), w = rnd(g, conv_w_size(s)),
                       dy = rnd(g, conv_y_size(s));
    for (Layout l : {NHWC, NCHW}) {
        Conv cv(h, s, l, l);
        std::vector<float> xl = from_nhwc(x, s.n, s.h, s.w, s.c, l),
                           dyl = from_nhwc(dy, s.n, s.p, s.q, s.k, l);
        std::vector<float> wl = l == NHWC ? w : std::vector<float>(w.size());
        if (l == NCHW)
            for (int k = 0; k < s.k; k++)
                for (int r = 0; r < s.r; r++)
                    for (int q = 0; q < s.s; q++)
                        for (int c = 0; c < s.c; c++)
                            wl[(((size_t)k * s.c + c) * s.r + r) * s.s + q] =
                                w[(((size_t)k * s.r + r) * s.s + q) * s.c + c];
        // beta = 0 over NaN: run3 poisons the outputs with NaN
        Results base = run3(cv, xl, wl, dyl);
        check(!any_nan(base.y) && !any_nan(base.dx) && !any_nan(base.dw),
              "beta=0 read NaN poison (layout %d)", l);
        // alpha = 0.5, beta = 2 over prior values
        Results prior{rnd(g, base.y.size()), rnd(g, base.dx.size()), rnd(g, base.dw.size())};
        Results r = run3(cv, xl, wl, dyl, 0.5f, 2.0f, &prior);
        auto expect = [](const std::vector<float> &b, const std::vector<float> &p) {
            std::vector<float> e(b.size());
            for (size_t i = 0; i < b.size(); i++)
                e[i] = 0.5f * b[i] + 2.0f * p[i];
            return e;
        };
        check(nerr(r.y, expect(base.y, prior.y)) < 1e-6 &&
                  nerr(r.dx, expect(base.dx, prior.dx)) < 1e-6 &&
                  nerr(r.dw, expect(base.dw, prior.dw)) < 1e-6,
              "alpha/beta blend (layout %d): y %g dx %g dw %g", l,
              nerr(r.y, expect(base.y, prior.y)), nerr(r.dx, expect(base.dx, prior.dx)),
              nerr(r.dw, expect(base.dw, prior.dw)));
        // beta = 1 accumulates (the project's gradients could); alpha = 0 keeps y
        float zero = 0, one = 1;
        Dev dx_(xl), dw_(wl), y(prior.y);
        CK(cudnnConvolutionForward(h, &zero, cv.x, dx_.p, cv.w, dw_.p, cv.c,
                                   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &one, cv.y,
                                   y.p));
        check(nerr(y.get(), prior.y) == 0, "alpha=0, beta=1 changed y");
    }
}

// ---- the output-size formula ----

static void test_output_dim(cudnnHandle_t) {
    struct {
        int in, pad, k, dil, str, want;
    } t[] = {
        {5, 0, 3, 1, 1, 3}, {5, 1, 3, 1, 1, 5},  {7, 0, 2, 1, 2, 3}, {8, 0, 3, 1, 2, 3},
        {8, 1, 3, 1, 2, 4}, {7, 2, 3, 2, 1, 7},  {7, 0, 3, 2, 1, 3}, {9, 0, 4, 1, 1, 6},
        {1, 0, 1, 1, 3, 1}, {10, 3, 5, 2, 3, 3},
    };
    cudnnTensorDescriptor_t x;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
    cudnnCreateTensorDescriptor(&x);
    cudnnCreateFilterDescriptor(&w);
    cudnnCreateConvolutionDescriptor(&c);
    for (auto &e : t) {
        // the same geometry in h and, transposed, in w (different values)
        CK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 3, 2, e.in,
                                      e.in + 1));
        CK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 5, 2, e.k, 1));
        CK(cudnnSetConvolution2dDescriptor(c, e.pad, 0, e.str, 1, e.dil, 1, CUDNN_CROSS_CORRELATION,
                                           CUDNN_DATA_FLOAT));
        int n = 0, ch = 0, oh = 0, ow = 0;
        CK(cudnnGetConvolution2dForwardOutputDim(c, x, w, &n, &ch, &oh, &ow));
        int want = 1 + (e.in + 2 * e.pad - (((e.k - 1) * e.dil) + 1)) / e.str;
        check(n == 3 && ch == 5 && oh == e.want && want == e.want && ow == e.in + 1,
              "output dim in %d pad %d k %d dil %d str %d: got (%d,%d,%d,%d), want h %d", e.in,
              e.pad, e.k, e.dil, e.str, n, ch, oh, ow, e.want);
    }
    // channel mismatch; filter larger than the padded input; NULL output
    CK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 3, 4, 4));
    CK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 2, 2, 3, 3));
    CK(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                       CUDNN_DATA_FLOAT));
    int n, ch, oh, ow;
    check(cudnnGetConvolution2dForwardOutputDim(c, x, w, &n, &ch, &oh, &ow) ==
              CUDNN_STATUS_BAD_PARAM,
          "output dim: feature map mismatch not refused");
    CK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 2, 3, 5, 3));
    check(cudnnGetConvolution2dForwardOutputDim(c, x, w, &n, &ch, &oh, &ow) ==
              CUDNN_STATUS_BAD_PARAM,
          "output dim: filter larger than input not refused");
    check(cudnnGetConvolution2dForwardOutputDim(c, x, w, nullptr, &ch, &oh, &ow) ==
              CUDNN_STATUS_BAD_PARAM,
          "output dim: NULL n not refused");
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(c);
}

// ---- argument checks ----

#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        cudnnStatus_t st_ = (call);                                                                \
        check(st_ == (want), "%s:%d: %s gave %s, want %s", __FILE__, __LINE__, #call,              \
              cudnnGetErrorString(st_), #want);                                                    \
    } while (0)

static void test_arg_checks(cudnnHandle_t h) {
    const cudnnStatus_t BAD = CUDNN_STATUS_BAD_PARAM, NS = CUDNN_STATUS_NOT_SUPPORTED,
                        OK = CUDNN_STATUS_SUCCESS;
    EXPECT(cudnnCreate(nullptr), BAD);
    EXPECT(cudnnSetStream(nullptr, nullptr), BAD);
    EXPECT(cudnnCreateTensorDescriptor(nullptr), BAD);
    EXPECT(cudnnCreateFilterDescriptor(nullptr), BAD);
    EXPECT(cudnnCreateConvolutionDescriptor(nullptr), BAD);
    check(std::strcmp(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM") == 0,
          "error string");
    check(cudnnGetVersion() == CUDNN_VERSION, "cudnnGetVersion");

    cudnnTensorDescriptor_t x, y, t2;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
    cudnnCreateTensorDescriptor(&x);
    cudnnCreateTensorDescriptor(&y);
    cudnnCreateTensorDescriptor(&t2);
    cudnnCreateFilterDescriptor(&w);
    cudnnCreateConvolutionDescriptor(&c);
    // tensors: negative dims, invalid enumerants
    EXPECT(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, -1, 3, 4, 4), BAD);
    EXPECT(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, 3, 0, 4), BAD);
    EXPECT(cudnnSetTensor4dDescriptor(x, (cudnnTensorFormat_t)7, CUDNN_DATA_FLOAT, 1, 3, 4, 4),
           BAD);
    EXPECT(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, (cudnnDataType_t)99, 1, 3, 4, 4), BAD);
    EXPECT(cudnnSetTensor4dDescriptor(nullptr, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, 3, 4, 4),
           BAD);
    EXPECT(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 65536, 65536, 2, 1),
           NS);
    // strides the format implies
    {
        cudnnDataType_t dt;
        int n, cc, hh, ww, ns, cs, hs, ws;
        CK(cudnnSetTensor4dDescriptor(t2, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 3, 4, 5));
        CK(cudnnGetTensor4dDescriptor(t2, &dt, &n, &cc, &hh, &ww, &ns, &cs, &hs, &ws));
        check(ns == 60 && cs == 1 && hs == 15 && ws == 3, "NHWC strides %d %d %d %d", ns, cs, hs,
              ws);
        CK(cudnnSetTensor4dDescriptor(t2, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 4, 5));
        CK(cudnnGetTensor4dDescriptor(t2, &dt, &n, &cc, &hh, &ww, &ns, &cs, &hs, &ws));
        check(ns == 60 && cs == 20 && hs == 5 && ws == 1, "NCHW strides %d %d %d %d", ns, cs, hs,
              ws);
    }
    // filters
    EXPECT(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, 4, -3, 3, 3), BAD);
    EXPECT(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, (cudnnTensorFormat_t)9, 4, 3, 3, 3),
           BAD);
    EXPECT(cudnnSetFilter4dDescriptor(w, (cudnnDataType_t)-1, CUDNN_TENSOR_NHWC, 4, 3, 3, 3), BAD);
    // convolutions
    EXPECT(cudnnSetConvolution2dDescriptor(c, -1, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                           CUDNN_DATA_FLOAT),
           BAD);
    EXPECT(cudnnSetConvolution2dDescriptor(c, 0, 0, 0, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                           CUDNN_DATA_FLOAT),
           BAD);
    EXPECT(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, -2, 1, 1, CUDNN_CROSS_CORRELATION,
                                           CUDNN_DATA_FLOAT),
           BAD);
    EXPECT(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 0, 1, CUDNN_CROSS_CORRELATION,
                                           CUDNN_DATA_FLOAT),
           BAD);
    EXPECT(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, -1, CUDNN_CROSS_CORRELATION,
                                           CUDNN_DATA_FLOAT),
           BAD);
    EXPECT(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 1, (cudnnConvolutionMode_t)2,
                                           CUDNN_DATA_FLOAT),
           BAD);
    EXPECT(cudnnSetConvolution2dDescriptor(nullptr, 0, 0, 1, 1, 1, 1, CUDNN_CONVOLUTION,
                                           CUDNN_DATA_FLOAT),
           BAD);
    EXPECT(cudnnSetConvolutionMathType(c, (cudnnMathType_t)17), BAD);
    EXPECT(cudnnSetConvolutionMathType(c, CUDNN_TENSOR_OP_MATH), OK);
    {
        cudnnMathType_t m;
        CK(cudnnGetConvolutionMathType(c, &m));
        check(m == CUDNN_TENSOR_OP_MATH, "math type not stored");
    }

    // a valid convolution: x (2, 3, 5, 5), w (4, 3, 3, 3), y (2, 4, 3, 3)
    CK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 3, 5, 5));
    CK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 4, 3, 3));
    CK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, 4, 3, 3, 3));
    CK(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                       CUDNN_DATA_FLOAT));
    Dev X(2 * 3 * 5 * 5), W(4 * 3 * 3 * 3), Y(2 * 4 * 3 * 3), WS(65536 / 4);
    float one = 1, zero = 0;
    const auto A0 = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
               A1 = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    const auto D1 = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    const auto F1 = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A0, nullptr, 0, &zero, y, Y.p), OK);
    // "At least one of the following is NULL: handle, xDesc, wDesc, convDesc,
    // yDesc, xData, w, yData, alpha, beta."
    EXPECT(cudnnConvolutionForward(nullptr, &one, x, X.p, w, W.p, c, A0, nullptr, 0, &zero, y, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, nullptr, x, X.p, w, W.p, c, A0, nullptr, 0, &zero, y, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, &one, nullptr, X.p, w, W.p, c, A0, nullptr, 0, &zero, y, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, &one, x, nullptr, w, W.p, c, A0, nullptr, 0, &zero, y, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, nullptr, W.p, c, A0, nullptr, 0, &zero, y, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, nullptr, c, A0, nullptr, 0, &zero, y, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, nullptr, A0, nullptr, 0, &zero, y, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A0, nullptr, 0, nullptr, y, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A0, nullptr, 0, &zero, nullptr, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A0, nullptr, 0, &zero, y, nullptr),
           BAD);
    // invalid algorithm; workspace too small, or NULL with a size
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, (cudnnConvolutionFwdAlgo_t)8, WS.p,
                                   65536, &zero, y, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A1, WS.p, 100, &zero, y, Y.p), BAD);
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A1, nullptr, 65536, &zero, y, Y.p),
           BAD);
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A1, WS.p, 65536, &zero, y, Y.p), OK);
    {
        size_t need = 0;
        CK(cudnnGetConvolutionForwardWorkspaceSize(h, x, w, c, y, A1, &need));
        check(need > 0 && need <= 65536, "PRECOMP workspace %zu", need);
        EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A1, WS.p, need, &zero, y, Y.p),
               OK);
        EXPECT(
            cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A1, WS.p, need - 1, &zero, y, Y.p),
            BAD);
        EXPECT(cudnnGetConvolutionForwardWorkspaceSize(h, x, w, c, y, A1, nullptr), BAD);
        EXPECT(cudnnGetConvolutionForwardWorkspaceSize(h, x, w, c, y, (cudnnConvolutionFwdAlgo_t)-1,
                                                       &need),
               BAD);
        EXPECT(cudnnGetConvolutionBackwardFilterWorkspaceSize(
                   h, x, y, c, w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, &need),
               NS);
    }
    // "xDesc and wDesc have a non-matching number of input feature maps"
    CK(cudnnSetTensor4dDescriptor(t2, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 2, 5, 5));
    EXPECT(cudnnConvolutionForward(h, &one, t2, X.p, w, W.p, c, A0, nullptr, 0, &zero, y, Y.p),
           BAD);
    EXPECT(
        cudnnConvolutionBackwardData(h, &one, w, W.p, y, Y.p, c, D1, WS.p, 65536, &zero, t2, X.p),
        BAD);
    EXPECT(
        cudnnConvolutionBackwardFilter(h, &one, t2, X.p, y, Y.p, c, F1, WS.p, 65536, &zero, w, W.p),
        BAD);
    // the output is not the convolution's (wrong K, wrong spatial size)
    CK(cudnnSetTensor4dDescriptor(t2, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 3, 3, 3));
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A0, nullptr, 0, &zero, t2, Y.p),
           BAD);
    CK(cudnnSetTensor4dDescriptor(t2, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 4, 3, 2));
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A0, nullptr, 0, &zero, t2, Y.p),
           BAD);
    // "dyDesc spatial sizes do not match with the expected size"
    EXPECT(
        cudnnConvolutionBackwardData(h, &one, w, W.p, t2, Y.p, c, D1, WS.p, 65536, &zero, x, X.p),
        BAD);
    EXPECT(
        cudnnConvolutionBackwardFilter(h, &one, x, X.p, t2, Y.p, c, F1, WS.p, 65536, &zero, w, W.p),
        BAD);
    // "xDesc, wDesc, and yDesc have a non-matching data type"
    CK(cudnnSetTensor4dDescriptor(t2, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, 2, 4, 3, 3));
    EXPECT(cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A0, nullptr, 0, &zero, t2, Y.p),
           BAD);
    // all half: valid, but not emulated
    {
        cudnnTensorDescriptor_t hx, hy;
        cudnnFilterDescriptor_t hw;
        cudnnCreateTensorDescriptor(&hx);
        cudnnCreateTensorDescriptor(&hy);
        cudnnCreateFilterDescriptor(&hw);
        CK(cudnnSetTensor4dDescriptor(hx, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, 2, 3, 5, 5));
        CK(cudnnSetTensor4dDescriptor(hy, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, 2, 4, 3, 3));
        CK(cudnnSetFilter4dDescriptor(hw, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, 4, 3, 3, 3));
        EXPECT(
            cudnnConvolutionForward(h, &one, hx, X.p, hw, W.p, c, A0, nullptr, 0, &zero, hy, Y.p),
            NS);
        cudnnDestroyTensorDescriptor(hx);
        cudnnDestroyTensorDescriptor(hy);
        cudnnDestroyFilterDescriptor(hw);
    }
    // "For some spatial dimension, wDesc has a spatial size that is larger
    // than the input spatial size (including zero-padding size)."
    {
        cudnnFilterDescriptor_t big;
        cudnnCreateFilterDescriptor(&big);
        CK(cudnnSetFilter4dDescriptor(big, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, 4, 3, 6, 3));
        EXPECT(cudnnConvolutionForward(h, &one, x, X.p, big, W.p, c, A0, nullptr, 0, &zero, y, Y.p),
               BAD);
        cudnnDestroyFilterDescriptor(big);
    }
    // a descriptor created but never set
    {
        cudnnConvolutionDescriptor_t unset;
        cudnnCreateConvolutionDescriptor(&unset);
        EXPECT(
            cudnnConvolutionForward(h, &one, x, X.p, w, W.p, unset, A0, nullptr, 0, &zero, y, Y.p),
            BAD);
        cudnnDestroyConvolutionDescriptor(unset);
    }
    // backward NULLs
    EXPECT(cudnnConvolutionBackwardData(h, &one, w, nullptr, y, Y.p, c, D1, WS.p, 65536, &zero, x,
                                        X.p),
           BAD);
    EXPECT(
        cudnnConvolutionBackwardData(h, &one, w, W.p, y, Y.p, c, D1, WS.p, 65536, nullptr, x, X.p),
        BAD);
    EXPECT(cudnnConvolutionBackwardFilter(h, &one, x, X.p, y, nullptr, c, F1, WS.p, 65536, &zero, w,
                                          W.p),
           BAD);
    EXPECT(cudnnConvolutionBackwardFilter(h, &one, x, X.p, y, Y.p, c, F1, WS.p, 65536, &zero,
                                          nullptr, W.p),
           BAD);
    EXPECT(cudnnConvolutionBackwardData(h, &one, w, W.p, y, Y.p, c, D1, WS.p, 65536, &zero, x, X.p),
           OK);
    EXPECT(
        cudnnConvolutionBackwardFilter(h, &one, x, X.p, y, Y.p, c, F1, WS.p, 65536, &zero, w, W.p),
        OK);
    EXPECT(cudnnConvolutionBackwardFilter(h, &one, x, X.p, y, Y.p, c,
                                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, WS.p, 65536,
                                          &zero, w, W.p),
           NS);
    // host memory, or a buffer too short, where device memory is expected
    {
        std::vector<float> host(2 * 3 * 5 * 5);
        Dev shortY(10);
        printf("(two cudnn_emu messages about bad pointers are expected next)\n");
        fflush(stdout);
        EXPECT(cudnnConvolutionForward(h, &one, x, host.data(), w, W.p, c, A0, nullptr, 0, &zero, y,
                                       Y.p),
               CUDNN_STATUS_EXECUTION_FAILED);
        EXPECT(
            cudnnConvolutionForward(h, &one, x, X.p, w, W.p, c, A0, nullptr, 0, &zero, y, shortY.p),
            CUDNN_STATUS_EXECUTION_FAILED);
    }
    // heuristics: "requestedAlgoCount is less than or equal to 0", NULLs,
    // mismatched feature maps
    {
        cudnnConvolutionFwdAlgoPerf_t p[8];
        int n = -1;
        EXPECT(cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, 0, &n, p), BAD);
        EXPECT(cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, 8, nullptr, p), BAD);
        EXPECT(cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, 8, &n, nullptr), BAD);
        EXPECT(cudnnGetConvolutionForwardAlgorithm_v7(nullptr, x, w, c, y, 8, &n, p), BAD);
        EXPECT(cudnnGetConvolutionForwardAlgorithm_v7(h, nullptr, w, c, y, 8, &n, p), BAD);
        CK(cudnnSetTensor4dDescriptor(t2, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 2, 5, 5));
        EXPECT(cudnnGetConvolutionForwardAlgorithm_v7(h, t2, w, c, y, 8, &n, p), BAD);
        cudnnConvolutionBwdDataAlgoPerf_t dp[8];
        EXPECT(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, y, c, x, -3, &n, dp), BAD);
        cudnnConvolutionBwdFilterAlgoPerf_t fp[8];
        EXPECT(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, c, w, 8, nullptr, fp), BAD);
    }
    cudaDeviceSynchronize(); // the calls above that ran still use X, W, Y, WS
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(t2);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(c);
}

// ---- heuristics and their override ----

struct Small {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
    Small() {
        cudnnCreateTensorDescriptor(&x);
        cudnnCreateTensorDescriptor(&y);
        cudnnCreateFilterDescriptor(&w);
        cudnnCreateConvolutionDescriptor(&c);
        cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 3, 5, 5);
        cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 4, 3, 3);
        cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, 4, 3, 3, 3);
        cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT);
        cudnnSetConvolutionMathType(c, CUDNN_FMA_MATH);
    }
    ~Small() {
        cudnnDestroyTensorDescriptor(x);
        cudnnDestroyTensorDescriptor(y);
        cudnnDestroyFilterDescriptor(w);
        cudnnDestroyConvolutionDescriptor(c);
    }
};

static void test_heuristics(cudnnHandle_t h) {
    Small d;
    mr_emu_cudnn_reset_perf();
    cudnnConvolutionFwdAlgoPerf_t p[8];
    cudnnConvolutionBwdDataAlgoPerf_t dp[8];
    cudnnConvolutionBwdFilterAlgoPerf_t fp[8];
    int n = 0, nd = 0, nf = 0;
    // the defaults: several entries, a tensor-op variant first, an FMA
    // deterministic one among them, each memory what the workspace query says
    CK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.c, d.y, 8, &n, p));
    CK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.c, d.x, 8, &nd, dp));
    CK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.c, d.w, 8, &nf, fp));
    check(n >= 3 && nd >= 3 && nf >= 3, "default lists %d %d %d", n, nd, nf);
    check(p[0].mathType == CUDNN_TENSOR_OP_MATH && dp[0].mathType == CUDNN_TENSOR_OP_MATH &&
              fp[0].mathType == CUDNN_TENSOR_OP_MATH,
          "defaults lead with a tensor-op variant");
    bool fma_det = false;
    for (int i = 0; i < n; i++) {
        fma_det |= p[i].mathType == CUDNN_FMA_MATH && p[i].determinism == CUDNN_DETERMINISTIC &&
                   !p[i].status;
        size_t ws = 1;
        if (p[i].status == CUDNN_STATUS_SUCCESS) {
            CK(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.c, d.y, p[i].algo, &ws));
            check(ws == p[i].memory, "fwd algo %d: memory %zu, workspace query %zu", p[i].algo,
                  p[i].memory, ws);
        }
        check(i == 0 || p[i].time >= p[i - 1].time, "fwd list not sorted by time");
    }
    check(fma_det, "no deterministic FMA forward algorithm by default");
    bool nondet = false;
    for (int i = 0; i < nf; i++)
        nondet |= fp[i].determinism == CUDNN_NON_DETERMINISTIC;
    check(nondet, "default backward-filter list has no non-deterministic algorithm");
    // "requestedAlgoCount": fewer asked, fewer returned
    CK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.c, d.y, 2, &n, p));
    check(n == 2, "requested 2, returned %d", n);

    // an override through the C hook
    cudnnConvolutionFwdAlgoPerf_t mine[3];
    std::memset(mine, 0, sizeof mine);
    mine[0] = {CUDNN_CONVOLUTION_FWD_ALGO_FFT,
               CUDNN_STATUS_NOT_SUPPORTED,
               0.5f,
               123,
               CUDNN_DETERMINISTIC,
               CUDNN_FMA_MATH,
               {0, 0, 0}};
    mine[1] = {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_STATUS_SUCCESS, 1.0f,     size_t(1) << 40,
               CUDNN_NON_DETERMINISTIC,         CUDNN_DEFAULT_MATH,   {0, 0, 0}};
    mine[2] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
               CUDNN_STATUS_SUCCESS,
               2.0f,
               0,
               CUDNN_DETERMINISTIC,
               CUDNN_FMA_MATH,
               {0, 0, 0}};
    mr_emu_cudnn_set_perf(MR_EMU_CUDNN_FWD, mine, 3);
    CK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.c, d.y, 8, &n, p));
    check(n == 3 && p[0].algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT &&
              p[0].status == CUDNN_STATUS_NOT_SUPPORTED && p[0].memory == 123 &&
              p[1].memory == (size_t(1) << 40) && p[1].determinism == CUDNN_NON_DETERMINISTIC &&
              p[1].mathType == CUDNN_DEFAULT_MATH &&
              p[2].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM && p[2].time == 2.0f,
          "override not returned as set");
    // the other kinds kept their defaults
    CK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.c, d.x, 8, &nd, dp));
    check(nd >= 3 && dp[0].mathType == CUDNN_TENSOR_OP_MATH,
          "bwd data list changed by a fwd override");
    // an algorithm listed only as failing fails when run
    {
        Dev X(2 * 3 * 5 * 5), W(4 * 27), Y(2 * 4 * 9), WS(65536 / 4);
        float one = 1, zero = 0;
        EXPECT(cudnnConvolutionForward(h, &one, d.x, X.p, d.w, W.p, d.c,
                                       CUDNN_CONVOLUTION_FWD_ALGO_FFT, WS.p, 65536, &zero, d.y,
                                       Y.p),
               CUDNN_STATUS_NOT_SUPPORTED);
        EXPECT(cudnnConvolutionForward(h, &one, d.x, X.p, d.w, W.p, d.c,
                                       CUDNN_CONVOLUTION_FWD_ALGO_GEMM, WS.p, 65536, &zero, d.y,
                                       Y.p),
               CUDNN_STATUS_SUCCESS);
        cudaDeviceSynchronize();
    }
    // no results at all
    mr_emu_cudnn_set_perf(MR_EMU_CUDNN_BWD_FILTER, nullptr, 0);
    CK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.c, d.w, 8, &nf, fp));
    check(nf == 0, "empty override returned %d", nf);
    // back to defaults, one kind and all
    mr_emu_cudnn_set_perf(MR_EMU_CUDNN_FWD, nullptr, -1);
    CK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.c, d.y, 8, &n, p));
    check(n >= 3 && p[0].mathType == CUDNN_TENSOR_OP_MATH, "fwd reset");
    CK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.c, d.w, 8, &nf, fp));
    check(nf == 0, "bwd filter override lost by a fwd reset");
    mr_emu_cudnn_reset_perf();
    CK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.c, d.w, 8, &nf, fp));
    check(nf >= 3, "reset_perf");

    // the environment variable
    setenv("MIRRORED_EMU_CUDNN_PERF",
           "fwd=1:tensor,1:fma:nondet:mem=4096,0:fma:time=7.5;bwd_filter=3:fma:nondet:notsup,1:"
           "tensor_conv;"
           "bwd_data=",
           1);
    mr_emu_cudnn_reset_perf();
    CK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.c, d.y, 8, &n, p));
    check(n == 3 && p[0].algo == 1 && p[0].mathType == CUDNN_TENSOR_OP_MATH &&
              p[0].determinism == CUDNN_DETERMINISTIC && p[1].mathType == CUDNN_FMA_MATH &&
              p[1].determinism == CUDNN_NON_DETERMINISTIC && p[1].memory == 4096 &&
              p[2].algo == 0 && p[2].time == 7.5f && p[2].memory == 0 &&
              p[2].status == CUDNN_STATUS_SUCCESS,
          "env fwd list");
    CK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.c, d.w, 8, &nf, fp));
    check(nf == 2 && fp[0].algo == 3 && fp[0].status == CUDNN_STATUS_NOT_SUPPORTED &&
              fp[1].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
              fp[1].mathType != CUDNN_DEFAULT_MATH,
          "env bwd_filter list");
    CK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.c, d.x, 8, &nd, dp));
    check(nd == 0, "env empty bwd_data list gave %d", nd);
    // the C hook wins over the environment
    mr_emu_cudnn_set_perf(MR_EMU_CUDNN_FWD, mine, 1);
    CK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.c, d.y, 8, &n, p));
    check(n == 1 && p[0].algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT, "hook over env");
    // a malformed spec aborts (in a child process)
    const char *bad[] = {"fwd=9", "fwd=1:fast", "conv=1", "fwd=1:mem=", "fwd=x", "fwd1"};
    for (const char *b : bad) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            freopen("/dev/null", "w", stderr);
            setenv("MIRRORED_EMU_CUDNN_PERF", b, 1);
            mr_emu_cudnn_reset_perf();
            int k;
            cudnnConvolutionFwdAlgoPerf_t q[8];
            cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.c, d.y, 8, &k, q);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        check(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "spec \"%s\" did not abort", b);
    }
    unsetenv("MIRRORED_EMU_CUDNN_PERF");
    mr_emu_cudnn_reset_perf();
}

int main(int argc, char **argv) {
    std::string dir = argc > 1 ? argv[1] : GOLDEN_DIR;
    cudnnHandle_t h;
    if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
        printf("cudnnCreate failed\n");
        return 1;
    }
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    CK(cudnnSetStream(h, stream));
    cudaStream_t got = nullptr;
    CK(cudnnGetStream(h, &got));
    check(got == stream, "cudnnGetStream");

    test_goldens(h, dir);
    test_random(h);
    test_alpha_beta(h);
    test_output_dim(h);
    test_arg_checks(h);
    test_heuristics(h);

    CK(cudnnDestroy(h));
    cudaStreamDestroy(stream);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
