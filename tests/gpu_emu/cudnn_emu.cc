// cudnn_emu.cc - the emulated cuDNN (libmr_emu_cudnn): the legacy
// convolution API the project uses (backends/cuda/conv2d_cuda.cu,
// backends/cuda/backend_cuda.c), implemented on the CPU against the real
// /usr/local/cuda/include/cudnn*.h declarations, so the project's CUDA host
// code runs unchanged on a machine without a GPU.
//
// - Descriptors hold what was set, checked as cuDNN documents.
// - The convolutions check their arguments at the call (the documented
//   status codes), then run on the handle's stream (emu_enqueue, emu.h):
//   ordered with the runtime's other work, asynchronous to the caller.
//   The math is conv_gemm_* (cudnn_emu_gemm.cc) on canonical layouts;
//   this file converts NCHW/NHWC tensors and KCRS/KRSC filters to and from
//   them and applies alpha/beta.
// - Float data only; other types are CUDNN_STATUS_NOT_SUPPORTED.
// - The _v7 heuristics report a configurable list (cudnn_emu.h).
// - Pointers are checked against the emulated device memory (emu.h): a host
//   pointer, or a tensor running past its allocation, fails the call with
//   CUDNN_STATUS_EXECUTION_FAILED and a message on stderr, where a GPU
//   would fault.
// Documentation quotes are from the cuDNN API reference (cudnn_ops /
// cudnn_cnn libraries, and its "Scaling Parameters" section). Checked
// against copies of the reference text in public sources: scaling
// parameters, the output-size formula, cudnnSetTensor4dDescriptor's and
// cudnnSetConvolution2dDescriptor's errors, cudnnConvolutionForward's and
// cudnnConvolutionBackwardData's BAD_PARAM lists, the _v7 description. The
// others are quoted from memory of the reference and are not re-checked.
#include <cudnn.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "tests/gpu_emu/conv_ref.h"
#include "tests/gpu_emu/cudnn_emu.h"
#include "tests/gpu_emu/emu.h"

// ---- the opaque structures of cudnn.h ----

struct cudnnContext {
    cudaStream_t stream;
};

struct cudnnTensorStruct {
    bool set;
    cudnnDataType_t type;
    cudnnTensorFormat_t format; // informative: the strides say where elements are
    int n, c, h, w;
    int ns, cs, hs, ws; // element strides
};

struct cudnnFilterStruct {
    bool set;
    cudnnDataType_t type;
    cudnnTensorFormat_t format; // NCHW: KCRS; NHWC: KRSC
    int k, c, r, s;
};

struct cudnnConvolutionStruct {
    bool set;
    int pad_h, pad_w, u, v, dil_h, dil_w;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    cudnnMathType_t math;
};

namespace {

// ---- errors ----

thread_local std::string last_error;

// Records why a call failed, for cudnnGetLastErrorString, and returns st.
cudnnStatus_t fail(cudnnStatus_t st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudnnStatus_t fail(cudnnStatus_t st, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    last_error = buf;
    return st;
}

bool valid_type(cudnnDataType_t t) {
    return (int)t >= (int)CUDNN_DATA_FLOAT && (int)t <= (int)CUDNN_DATA_INT4;
}

bool valid_format(cudnnTensorFormat_t f) {
    return f == CUDNN_TENSOR_NCHW || f == CUDNN_TENSOR_NHWC || f == CUDNN_TENSOR_NCHW_VECT_C;
}

// ---- layouts ----

size_t t_off(const cudnnTensorStruct &t, int n, int c, int h, int w) {
    return (size_t)n * t.ns + (size_t)c * t.cs + (size_t)h * t.hs + (size_t)w * t.ws;
}

// Elements from the tensor's first to its last, inclusive.
size_t t_span(const cudnnTensorStruct &t) {
    return t_off(t, t.n - 1, t.c - 1, t.h - 1, t.w - 1) + 1;
}

bool is_packed_nhwc(const cudnnTensorStruct &t) {
    return t.cs == 1 && t.ws == t.c && t.hs == t.w * t.c && t.ns == t.h * t.w * t.c;
}

size_t f_off(const cudnnFilterStruct &f, int k, int c, int r, int s) {
    if (f.format == CUDNN_TENSOR_NHWC) return (((size_t)k * f.r + r) * f.s + s) * f.c + c;
    return (((size_t)k * f.c + c) * f.r + r) * f.s + s;
}

size_t f_size(const cudnnFilterStruct &f) {
    return (size_t)f.k * f.c * f.r * f.s;
}

// t (any strides) -> canonical NHWC
void gather_tensor(const cudnnTensorStruct &t, const float *src, float *dst) {
    for (int n = 0; n < t.n; n++)
        for (int h = 0; h < t.h; h++)
            for (int w = 0; w < t.w; w++)
                for (int c = 0; c < t.c; c++)
                    *dst++ = src[t_off(t, n, c, h, w)];
}

// t = alpha * canonical NHWC + beta * t. "When beta is zero, the output is
// not read and may contain uninitialized data (including NaN)." (Scaling
// Parameters): so beta == 0 never reads dst.
void blend_tensor(const cudnnTensorStruct &t, const float *src, float alpha, float beta,
                  float *dst) {
    for (int n = 0; n < t.n; n++)
        for (int h = 0; h < t.h; h++)
            for (int w = 0; w < t.w; w++)
                for (int c = 0; c < t.c; c++) {
                    float *d = &dst[t_off(t, n, c, h, w)];
                    float v = alpha * *src++;
                    *d = beta == 0.0f ? v : v + beta * *d;
                }
}

// f (KCRS or KRSC) -> canonical KRSC
void gather_filter(const cudnnFilterStruct &f, const float *src, float *dst) {
    for (int k = 0; k < f.k; k++)
        for (int r = 0; r < f.r; r++)
            for (int s = 0; s < f.s; s++)
                for (int c = 0; c < f.c; c++)
                    *dst++ = src[f_off(f, k, c, r, s)];
}

void blend_filter(const cudnnFilterStruct &f, const float *src, float alpha, float beta,
                  float *dst) {
    for (int k = 0; k < f.k; k++)
        for (int r = 0; r < f.r; r++)
            for (int s = 0; s < f.s; s++)
                for (int c = 0; c < f.c; c++) {
                    float *d = &dst[f_off(f, k, c, r, s)];
                    float v = alpha * *src++;
                    *d = beta == 0.0f ? v : v + beta * *d;
                }
}

// ---- workspace ----

enum Kind {
    FWD = MR_EMU_CUDNN_FWD,
    BWD_DATA = MR_EMU_CUDNN_BWD_DATA,
    BWD_FILTER = MR_EMU_CUDNN_BWD_FILTER
};

const int kAlgoCount[3] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                           CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
const char *const kKindName[3] = {"forward", "backward data", "backward filter"};

// The workspace each algorithm asks for. The emulation computes in host
// memory of its own and needs none; these small, algorithm-dependent sizes
// exist so the project's workspace plumbing is exercised (a call given less
// fails). Indexed by the algorithm enum's value.
const size_t kFwdWs[CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {0,     4096,  16384, 0,
                                                         65536, 65536, 32768, 65536};
const size_t kBwdDataWs[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT] = {0,     4096,  65536,
                                                                  65536, 32768, 65536};
const size_t kBwdFilterWs[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT] = {0, 4096,  65536, 8192,
                                                                      0, 65536, 65536};

size_t algo_ws(Kind kind, int algo) {
    return kind == FWD ? kFwdWs[algo] : kind == BWD_DATA ? kBwdDataWs[algo] : kBwdFilterWs[algo];
}

// ---- the heuristics' lists ----

// The three cudnnConvolution*AlgoPerf_t share this layout (cudnn_cnn.h);
// one entry type serves all, converted field by field.
struct Perf {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
};

struct PerfState {
    std::mutex mu;
    bool loaded = false; // env/defaults read into lists
    bool overridden[3] = {false, false, false};
    std::vector<Perf> lists[3];
};

PerfState &perf_state() {
    static PerfState *s = new PerfState; // never destroyed: usable from atexit paths
    return *s;
}

Perf mk(Kind kind, int algo, cudnnMathType_t math, bool det,
        cudnnStatus_t st = CUDNN_STATUS_SUCCESS) {
    return Perf{
        algo, st, 0.0f, algo_ws(kind, algo), det ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC,
        math};
}

// A plausible float list, best first, as cuDNN lists every math type's
// variants: a TF32 tensor-op variant leads (what an Ampere GPU would rank
// first), FMA variants follow, the non-deterministic atomics-based
// backward algorithms among them, and algorithms that do not apply at the
// end with CUDNN_STATUS_NOT_SUPPORTED.
std::vector<Perf> default_list(Kind kind) {
    const cudnnMathType_t T = CUDNN_TENSOR_OP_MATH, F = CUDNN_FMA_MATH;
    const cudnnStatus_t NS = CUDNN_STATUS_NOT_SUPPORTED;
    std::vector<Perf> v;
    switch (kind) {
    case FWD:
        v = {mk(kind, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, T, true),
             mk(kind, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, F, true),
             mk(kind, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, F, true),
             mk(kind, CUDNN_CONVOLUTION_FWD_ALGO_GEMM, F, true),
             mk(kind, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, F, true),
             mk(kind, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, F, true),
             mk(kind, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, F, true, NS)};
        break;
    case BWD_DATA:
        v = {mk(kind, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, T, true),
             mk(kind, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, F, true),
             mk(kind, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, F, false),
             mk(kind, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, F, true),
             mk(kind, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, F, true, NS)};
        break;
    case BWD_FILTER:
        v = {mk(kind, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, T, true),
             mk(kind, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, F, false),
             mk(kind, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, F, true),
             mk(kind, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, F, false),
             mk(kind, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, F, true),
             mk(kind, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, F, true, NS)};
        break;
    }
    for (size_t i = 0; i < v.size(); i++)
        v[i].time = 0.1f * (float)(i + 1);
    return v;
}

[[noreturn]] void bad_spec(const std::string &spec, const std::string &why) {
    fprintf(stderr, "cudnn_emu: MIRRORED_EMU_CUDNN_PERF=\"%s\": %s\n", spec.c_str(), why.c_str());
    abort();
}

// One entry of the spec (cudnn_emu.h): algo{:attr}.
Perf parse_entry(const std::string &spec, Kind kind, const std::string &e, size_t pos) {
    std::vector<std::string> f;
    size_t a = 0;
    for (;;) {
        size_t b = e.find(':', a);
        f.push_back(e.substr(a, b == std::string::npos ? std::string::npos : b - a));
        if (b == std::string::npos) break;
        a = b + 1;
    }
    char *end;
    long algo = strtol(f[0].c_str(), &end, 10);
    if (f[0].empty() || *end || algo < 0 || algo >= kAlgoCount[kind])
        bad_spec(spec, "bad " + std::string(kKindName[kind]) + " algorithm \"" + f[0] + "\"");
    Perf p{(int)algo,
           CUDNN_STATUS_SUCCESS,
           0.1f * (float)(pos + 1),
           algo_ws(kind, (int)algo),
           CUDNN_DETERMINISTIC,
           CUDNN_DEFAULT_MATH};
    for (size_t i = 1; i < f.size(); i++) {
        const std::string &t = f[i];
        if (t == "default")
            p.math = CUDNN_DEFAULT_MATH;
        else if (t == "tensor")
            p.math = CUDNN_TENSOR_OP_MATH;
        else if (t == "tensor_conv")
            p.math = CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        else if (t == "fma")
            p.math = CUDNN_FMA_MATH;
        else if (t == "det")
            p.determinism = CUDNN_DETERMINISTIC;
        else if (t == "nondet")
            p.determinism = CUDNN_NON_DETERMINISTIC;
        else if (t == "notsup")
            p.status = CUDNN_STATUS_NOT_SUPPORTED;
        else if (t.rfind("status=", 0) == 0)
            p.status = (cudnnStatus_t)strtol(t.c_str() + 7, &end, 10);
        else if (t.rfind("mem=", 0) == 0)
            p.memory = strtoull(t.c_str() + 4, &end, 10);
        else if (t.rfind("time=", 0) == 0)
            p.time = strtof(t.c_str() + 5, &end);
        else
            bad_spec(spec, "unknown attribute \"" + t + "\"");
        if (t.find('=') != std::string::npos && (*end || t.back() == '='))
            bad_spec(spec, "bad number in \"" + t + "\"");
    }
    return p;
}

// Fills lists the spec names; returns which it named.
void parse_spec(const std::string &spec, std::vector<Perf> lists[3], bool named[3]) {
    size_t a = 0;
    while (a <= spec.size()) {
        size_t b = spec.find(';', a);
        std::string sec = spec.substr(a, b == std::string::npos ? std::string::npos : b - a);
        a = b == std::string::npos ? spec.size() + 1 : b + 1;
        if (sec.empty()) continue;
        size_t eq = sec.find('=');
        if (eq == std::string::npos) bad_spec(spec, "section \"" + sec + "\" has no '='");
        std::string k = sec.substr(0, eq), body = sec.substr(eq + 1);
        Kind kind = k == "fwd"          ? FWD
                    : k == "bwd_data"   ? BWD_DATA
                    : k == "bwd_filter" ? BWD_FILTER
                                        : (Kind)-1;
        if ((int)kind < 0) bad_spec(spec, "unknown kind \"" + k + "\"");
        named[kind] = true;
        lists[kind].clear();
        size_t c = 0;
        while (!body.empty() && c <= body.size()) {
            size_t d = body.find(',', c);
            std::string e = body.substr(c, d == std::string::npos ? std::string::npos : d - c);
            lists[kind].push_back(parse_entry(spec, kind, e, lists[kind].size()));
            c = d == std::string::npos ? body.size() + 1 : d + 1;
        }
    }
}

// The active list of kind (a copy: callers use it without the lock).
std::vector<Perf> active_list(Kind kind) {
    PerfState &st = perf_state();
    std::lock_guard<std::mutex> lock(st.mu);
    if (!st.loaded) {
        std::vector<Perf> lists[3];
        bool named[3] = {false, false, false};
        const char *env = getenv("MIRRORED_EMU_CUDNN_PERF");
        if (env && *env) parse_spec(env, lists, named);
        for (int k = 0; k < 3; k++)
            if (!st.overridden[k]) st.lists[k] = named[k] ? lists[k] : default_list((Kind)k);
        st.loaded = true;
    }
    return st.lists[kind];
}

// ---- argument checks shared by the calls ----

// xDesc, wDesc, convDesc (and yDesc when given) describe one float 2-D
// convolution; s gets its geometry. Follows the documented BAD_PARAM
// conditions of the convolution calls (quoted at each call).
cudnnStatus_t check_geometry(const cudnnTensorStruct *x, const cudnnFilterStruct *w,
                             const cudnnConvolutionStruct *conv, const cudnnTensorStruct *y,
                             bool check_y_dims, ConvShape *s) {
    if (!x || !w || !conv || !y) return fail(CUDNN_STATUS_BAD_PARAM, "a descriptor is NULL");
    if (!x->set || !w->set || !conv->set || !y->set)
        return fail(CUDNN_STATUS_BAD_PARAM, "a descriptor was created but never set");
    if (x->type != w->type || x->type != y->type)
        return fail(CUDNN_STATUS_BAD_PARAM, "tensor and filter data types differ (%d, %d, %d)",
                    (int)x->type, (int)w->type, (int)y->type);
    if (x->c != w->c)
        return fail(CUDNN_STATUS_BAD_PARAM, "input has %d feature maps, the filter %d", x->c, w->c);
    ConvShape g{};
    g.n = x->n, g.c = x->c, g.h = x->h, g.w = x->w;
    g.k = w->k, g.r = w->r, g.s = w->s;
    g.pad_h = conv->pad_h, g.pad_w = conv->pad_w, g.str_h = conv->u, g.str_w = conv->v;
    g.dil_h = conv->dil_h, g.dil_w = conv->dil_w;
    g.flip = conv->mode == CUDNN_CONVOLUTION;
    conv_shape_finish(g);
    if (g.p < 1 || g.q < 1)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "the (dilated) filter %dx%d is larger than the padded input %dx%d",
                    (w->r - 1) * conv->dil_h + 1, (w->s - 1) * conv->dil_w + 1,
                    x->h + 2 * conv->pad_h, x->w + 2 * conv->pad_w);
    if (check_y_dims && (y->n != g.n || y->c != g.k || y->h != g.p || y->w != g.q))
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "output tensor is (%d, %d, %d, %d), the convolution gives (%d, %d, %d, %d)",
                    y->n, y->c, y->h, y->w, g.n, g.k, g.p, g.q);
    if (x->type != CUDNN_DATA_FLOAT || conv->compute != CUDNN_DATA_FLOAT)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "the emulation computes float data only");
    if (x->format == CUDNN_TENSOR_NCHW_VECT_C || y->format == CUDNN_TENSOR_NCHW_VECT_C ||
        w->format == CUDNN_TENSOR_NCHW_VECT_C)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_TENSOR_NCHW_VECT_C is not emulated");
    *s = g;
    return CUDNN_STATUS_SUCCESS;
}

// p must be emulated device memory with at least `bytes` from p on, on the
// stream's device: on a GPU anything else faults, here the call fails
// loudly.
cudnnStatus_t check_device(cudaStream_t stream, const void *p, size_t bytes, const char *what,
                           const char *call) {
    size_t left = 0;
    int dev = emu_device_of(p, &left);
    int sdev = emu_stream_device(stream);
    const char *why = dev < 0                    ? "is not device memory"
                      : left < bytes             ? "runs past the end of its allocation"
                      : sdev >= 0 && dev != sdev ? "is on another device than the handle's stream"
                                                 : nullptr;
    if (!why) return CUDNN_STATUS_SUCCESS;
    fprintf(stderr, "cudnn_emu: %s: %s %p (%zu bytes) %s\n", call, what, p, bytes, why);
    return fail(CUDNN_STATUS_EXECUTION_FAILED, "%s: %s %p %s", call, what, p, why);
}

// The algorithm must be a valid enumerant, not one the active list names
// only as failing (cudnn_emu.h), and the workspace must be big enough.
cudnnStatus_t check_algo_ws(cudnnHandle_t h, Kind kind, int algo, const void *ws, size_t ws_bytes,
                            const char *call) {
    if (algo < 0 || algo >= kAlgoCount[kind])
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: invalid algorithm %d", call, algo);
    // CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD is "not implemented"
    // (cudnn_ops.h)
    if (kind == BWD_FILTER && algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD",
                    call);
    std::vector<Perf> list = active_list(kind);
    bool named = false, ok = false;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    for (const Perf &p : list)
        if (p.algo == algo) {
            named = true;
            if (p.status == CUDNN_STATUS_SUCCESS)
                ok = true;
            else
                st = p.status;
        }
    if (named && !ok)
        return fail(st, "%s: algorithm %d is listed as failing by the heuristics", call, algo);
    size_t need = algo_ws(kind, algo);
    if (ws_bytes < need || (need > 0 && ws == nullptr))
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "%s: algorithm %d needs %zu bytes of workspace, given %zu%s", call, algo, need,
                    ws_bytes, ws == nullptr ? " (NULL)" : "");
    if (need > 0) return check_device(h->stream, ws, need, "workspace", call);
    return CUDNN_STATUS_SUCCESS;
}

} // namespace

extern "C" {

// ---- test hooks (cudnn_emu.h) ----

void mr_emu_cudnn_set_perf(int which, const void *results, int count) {
    if (which < 0 || which > 2) return;
    PerfState &st = perf_state();
    std::lock_guard<std::mutex> lock(st.mu);
    if (count < 0) {
        st.overridden[which] = false;
        st.loaded = false; // the next use re-reads the environment
        return;
    }
    // the three perf structs have one layout; read through the forward one
    static_assert(
        sizeof(cudnnConvolutionFwdAlgoPerf_t) == sizeof(cudnnConvolutionBwdDataAlgoPerf_t) &&
            sizeof(cudnnConvolutionFwdAlgoPerf_t) == sizeof(cudnnConvolutionBwdFilterAlgoPerf_t),
        "perf structs differ");
    const cudnnConvolutionFwdAlgoPerf_t *r = (const cudnnConvolutionFwdAlgoPerf_t *)results;
    std::vector<Perf> v;
    for (int i = 0; i < count; i++)
        v.push_back(Perf{(int)r[i].algo, r[i].status, r[i].time, r[i].memory, r[i].determinism,
                         r[i].mathType});
    st.lists[which] = v;
    st.overridden[which] = true;
}

void mr_emu_cudnn_reset_perf(void) {
    PerfState &st = perf_state();
    std::lock_guard<std::mutex> lock(st.mu);
    for (int k = 0; k < 3; k++)
        st.overridden[k] = false;
    st.loaded = false;
}

// ---- library ----

size_t cudnnGetVersion(void) {
    return CUDNN_VERSION;
}

size_t cudnnGetCudartVersion(void) {
    return CUDART_VERSION;
}

const char *cudnnGetErrorString(cudnnStatus_t status) {
#define S(x)                                                                                       \
    case x:                                                                                        \
        return #x;
    switch (status) {
        S(CUDNN_STATUS_SUCCESS)
        S(CUDNN_STATUS_NOT_INITIALIZED)
        S(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
        S(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
        S(CUDNN_STATUS_DEPRECATED)
        S(CUDNN_STATUS_LICENSE_ERROR)
        S(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
        S(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
        S(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
        S(CUDNN_STATUS_BAD_PARAM)
        S(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
        S(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
        S(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
        S(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
        S(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        S(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
        S(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
        S(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
        S(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
        S(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
        S(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
        S(CUDNN_STATUS_INVALID_VALUE)
        S(CUDNN_STATUS_NOT_SUPPORTED)
        S(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
        S(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
        S(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
        S(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
        S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
        S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
        S(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
        S(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
        S(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
        S(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
        S(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
        S(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
        S(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
        S(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE)
        S(CUDNN_STATUS_INTERNAL_ERROR)
        S(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
        S(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
        S(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
        S(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        S(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
        S(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
        S(CUDNN_STATUS_EXECUTION_FAILED)
        S(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
        S(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
        S(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
        S(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
    }
#undef S
    return "CUDNN_UNKNOWN_STATUS_FOUND";
}

// "This function retrieves the last encountered cuDNN error message."
// Here: why this thread's last failing call failed.
void cudnnGetLastErrorString(char *message, size_t max_size) {
    if (!message || max_size == 0) return;
    snprintf(message, max_size, "%s", last_error.c_str());
    last_error.clear();
}

// "This function initializes the cuDNN library and creates a handle to an
// opaque structure holding the cuDNN library context." Returns
// CUDNN_STATUS_BAD_PARAM for "Invalid (NULL) pointer supplied", and
// CUDNN_STATUS_NOT_INITIALIZED when no GPU is found.
cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
    if (!handle) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreate: handle is NULL");
    if (emu_device_count() < 1) return fail(CUDNN_STATUS_NOT_INITIALIZED, "cudnnCreate: no device");
    *handle = new cudnnContext{nullptr};
    return CUDNN_STATUS_SUCCESS;
}

// "This function releases the resources used by the cuDNN handle." cuDNN's
// reference adds that releasing them "will implicitly call
// cudaDeviceSynchronize", which is done here too.
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    if (!handle) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy: handle is NULL");
    cudaDeviceSynchronize();
    delete handle;
    return CUDNN_STATUS_SUCCESS;
}

// "This function sets the user's CUDA stream in the cuDNN handle. The new
// stream will be used to launch cuDNN GPU kernels or to synchronize to this
// stream when cuDNN kernels are launched in the internal streams."
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
    if (!handle) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: handle is NULL");
    if (streamId && emu_stream_device(streamId) < 0)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: unknown stream %p", (void *)streamId);
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *streamId) {
    if (!handle || !streamId) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetStream: NULL argument");
    *streamId = handle->stream;
    return CUDNN_STATUS_SUCCESS;
}

// ---- tensor descriptors ----

// "This function creates a generic tensor descriptor object by allocating
// the memory needed to hold its opaque structure. The data is initialized
// to all zeros."
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *tensorDesc) {
    if (!tensorDesc) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreateTensorDescriptor: NULL");
    *tensorDesc = new cudnnTensorStruct{};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
    delete tensorDesc; // "If the descriptor is NULL, ... no operation"
    return CUDNN_STATUS_SUCCESS;
}

// The strides of a packed n,c,h,w tensor in format f.
static void packed_strides(cudnnTensorFormat_t f, int c, int h, int w, int st[4]) {
    if (f == CUDNN_TENSOR_NHWC) {
        st[0] = h * w * c, st[1] = 1, st[2] = w * c, st[3] = c;
    } else {
        st[0] = c * h * w, st[1] = h * w, st[2] = w, st[3] = 1;
    }
}

static cudnnStatus_t set_tensor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                cudnnDataType_t type, int n, int c, int h, int w, const int st[4],
                                const char *call) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, "%s: descriptor is NULL", call);
    // "CUDNN_STATUS_BAD_PARAM: At least one of the parameters n, c, h, w
    // was negative or format has an invalid enumerant value or dataType has
    // an invalid enumerant value." Zero is refused too: cuDNN computes on
    // no empty tensor (the project skips batch 0 for that reason).
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: dimensions (%d, %d, %d, %d)", call, n, c, h, w);
    if (!valid_format(format) || !valid_type(type))
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: invalid format %d or data type %d", call,
                    (int)format, (int)type);
    for (int i = 0; i < 4; i++)
        if (st[i] <= 0) return fail(CUDNN_STATUS_BAD_PARAM, "%s: stride %d is %d", call, i, st[i]);
    // "CUDNN_STATUS_NOT_SUPPORTED: The total size of the tensor descriptor
    // exceeds the maximum limit of 2 Giga-elements."
    if ((double)n * c * h * w > 2147483647.0)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: more than 2 Giga-elements", call);
    *d = cudnnTensorStruct{true, type, format, n, c, h, w, st[0], st[1], st[2], st[3]};
    return CUDNN_STATUS_SUCCESS;
}

// "This function initializes a previously created generic tensor descriptor
// object into a 4D tensor. The strides of the four dimensions are inferred
// from the format parameter and set in such a way that the data is
// contiguous in memory with no padding between dimensions."
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                         cudnnTensorFormat_t format, cudnnDataType_t dataType,
                                         int n, int c, int h, int w) {
    int st[4];
    packed_strides(format, c, h, w, st);
    if (!valid_format(format)) st[0] = st[1] = st[2] = st[3] = 1; // reported as the format
    return set_tensor(tensorDesc, format, dataType, n, c, h, w, st, "cudnnSetTensor4dDescriptor");
}

// "This function initializes a previously created generic tensor descriptor
// object into a 4D tensor, similarly to cudnnSetTensor4dDescriptor() but
// with the strides explicitly passed as parameters."
cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t tensorDesc,
                                           cudnnDataType_t dataType, int n, int c, int h, int w,
                                           int nStride, int cStride, int hStride, int wStride) {
    int st[4] = {nStride, cStride, hStride, wStride};
    cudnnTensorFormat_t f = cStride == 1 && c > 1 ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    return set_tensor(tensorDesc, f, dataType, n, c, h, w, st, "cudnnSetTensor4dDescriptorEx");
}

cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t d, cudnnDataType_t *dataType,
                                         int *n, int *c, int *h, int *w, int *nStride, int *cStride,
                                         int *hStride, int *wStride) {
    if (!d || !d->set || !dataType || !n || !c || !h || !w || !nStride || !cStride || !hStride ||
        !wStride)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetTensor4dDescriptor: NULL or unset");
    *dataType = d->type, *n = d->n, *c = d->c, *h = d->h, *w = d->w;
    *nStride = d->ns, *cStride = d->cs, *hStride = d->hs, *wStride = d->ws;
    return CUDNN_STATUS_SUCCESS;
}

// ---- filter descriptors ----

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *filterDesc) {
    if (!filterDesc) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreateFilterDescriptor: NULL");
    *filterDesc = new cudnnFilterStruct{};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
    delete filterDesc;
    return CUDNN_STATUS_SUCCESS;
}

// "format: Input. Type of the filter layout format. If this input is set to
// CUDNN_TENSOR_NCHW ... then the layout of the filter is in the form of
// KCRS ... If this input is set to CUDNN_TENSOR_NHWC, then the layout of
// the filter is in the form of KRSC."
// "CUDNN_STATUS_BAD_PARAM: At least one of the parameters k, c, h, or w is
// negative or dataType or format has an invalid enumerant value."
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t dataType, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
    if (!filterDesc) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetFilter4dDescriptor: NULL");
    if (k <= 0 || c <= 0 || h <= 0 || w <= 0)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "cudnnSetFilter4dDescriptor: dimensions (%d, %d, %d, %d)", k, c, h, w);
    if (!valid_format(format) || !valid_type(dataType))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetFilter4dDescriptor: format %d, data type %d",
                    (int)format, (int)dataType);
    *filterDesc = cudnnFilterStruct{true, dataType, format, k, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t d, cudnnDataType_t *dataType,
                                         cudnnTensorFormat_t *format, int *k, int *c, int *h,
                                         int *w) {
    if (!d || !d->set || !dataType || !format || !k || !c || !h || !w)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetFilter4dDescriptor: NULL or unset");
    *dataType = d->type, *format = d->format, *k = d->k, *c = d->c, *h = d->r, *w = d->s;
    return CUDNN_STATUS_SUCCESS;
}

// ---- convolution descriptors ----

// A new descriptor is cross-correlation, no padding, unit stride and
// dilation, float, CUDNN_DEFAULT_MATH, but not set: the convolutions refuse
// it until cudnnSetConvolution2dDescriptor.
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *convDesc) {
    if (!convDesc) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreateConvolutionDescriptor: NULL");
    *convDesc = new cudnnConvolutionStruct{
        false, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
    delete convDesc;
    return CUDNN_STATUS_SUCCESS;
}

// "CUDNN_STATUS_BAD_PARAM: At least one of the following conditions are
// met: The descriptor convDesc is nil. One of the parameters pad_h, pad_w
// is strictly negative. One of the parameters u, v is negative or zero. One
// of the parameters dilation_h, dilation_w is negative or zero. The
// parameter mode has an invalid enumerant value."
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
    if (!convDesc) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolution2dDescriptor: NULL");
    if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0)
        return fail(
            CUDNN_STATUS_BAD_PARAM,
            "cudnnSetConvolution2dDescriptor: pad (%d, %d), stride (%d, %d), dilation (%d, %d)",
            pad_h, pad_w, u, v, dilation_h, dilation_w);
    if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolution2dDescriptor: mode %d", (int)mode);
    if (!valid_type(computeType))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolution2dDescriptor: computeType %d",
                    (int)computeType);
    convDesc->set = true;
    convDesc->pad_h = pad_h, convDesc->pad_w = pad_w, convDesc->u = u, convDesc->v = v;
    convDesc->dil_h = dilation_h, convDesc->dil_w = dilation_w;
    convDesc->mode = mode, convDesc->compute = computeType;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t d, int *pad_h,
                                              int *pad_w, int *u, int *v, int *dilation_h,
                                              int *dilation_w, cudnnConvolutionMode_t *mode,
                                              cudnnDataType_t *computeType) {
    if (!d || !pad_h || !pad_w || !u || !v || !dilation_h || !dilation_w || !mode || !computeType)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolution2dDescriptor: NULL");
    *pad_h = d->pad_h, *pad_w = d->pad_w, *u = d->u, *v = d->v;
    *dilation_h = d->dil_h, *dilation_w = d->dil_w, *mode = d->mode, *computeType = d->compute;
    return CUDNN_STATUS_SUCCESS;
}

// "This function allows the user to specify whether or not the use of
// tensor op is permitted in the library routines associated with a given
// convolution descriptor." Stored (the emulation computes in float FMA
// whatever it says). "CUDNN_STATUS_BAD_PARAM: The math type is invalid."
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t mathType) {
    if (!convDesc) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType: NULL");
    if (mathType != CUDNN_DEFAULT_MATH && mathType != CUDNN_TENSOR_OP_MATH &&
        mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && mathType != CUDNN_FMA_MATH)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType: %d", (int)mathType);
    convDesc->math = mathType;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t *mathType) {
    if (!convDesc || !mathType)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolutionMathType: NULL");
    *mathType = convDesc->math;
    return CUDNN_STATUS_SUCCESS;
}

// "Each dimension h and w of the output images is computed as follows:
//   outputDim = 1 + ( inputDim + 2*pad - (((filterDim-1)*dilation)+1) )/convolutionStride;"
// "CUDNN_STATUS_BAD_PARAM: At least one of the following conditions are
// met: One or more of the descriptors has not been created correctly.
// There is a mismatch between the feature maps of inputTensorDesc and
// filterDesc."
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc,
                                                    int *n, int *c, int *h, int *w) {
    if (!convDesc || !inputTensorDesc || !filterDesc || !n || !c || !h || !w)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolution2dForwardOutputDim: NULL argument");
    if (!convDesc->set || !inputTensorDesc->set || !filterDesc->set)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "cudnnGetConvolution2dForwardOutputDim: unset descriptor");
    if (inputTensorDesc->c != filterDesc->c)
        return fail(
            CUDNN_STATUS_BAD_PARAM,
            "cudnnGetConvolution2dForwardOutputDim: input has %d feature maps, the filter %d",
            inputTensorDesc->c, filterDesc->c);
    int oh = conv_out_dim(inputTensorDesc->h, convDesc->pad_h, filterDesc->r, convDesc->dil_h,
                          convDesc->u);
    int ow = conv_out_dim(inputTensorDesc->w, convDesc->pad_w, filterDesc->s, convDesc->dil_w,
                          convDesc->v);
    if (oh < 1 || ow < 1)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "cudnnGetConvolution2dForwardOutputDim: filter larger than the padded input");
    *n = inputTensorDesc->n, *c = filterDesc->k, *h = oh, *w = ow;
    return CUDNN_STATUS_SUCCESS;
}

// ---- heuristics ----

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
    if (!handle || !count) return fail(CUDNN_STATUS_BAD_PARAM, "MaxCount: NULL");
    *count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
    if (!handle || !count) return fail(CUDNN_STATUS_BAD_PARAM, "MaxCount: NULL");
    *count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
    if (!handle || !count) return fail(CUDNN_STATUS_BAD_PARAM, "MaxCount: NULL");
    *count = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    return CUDNN_STATUS_SUCCESS;
}

} // extern "C"

namespace {

// The _v7 heuristics, for all three kinds. "This function serves as a
// heuristic for obtaining the best suited algorithm for
// cudnnConvolutionForward() for the given layer specifications. This
// function will return all algorithms (including CUDNN_TENSOR_OP_MATH and
// CUDNN_DEFAULT_MATH versions of algorithms where CUDNN_TENSOR_OP_MATH may
// be available) sorted by expected (based on internal heuristic) relative
// performance with the fastest being index 0 of perfResults."
// "returnedAlgoCount: Output. The number of output elements stored in
// perfResults." "perfResults: Output. A user-allocated array to store
// performance metrics sorted ascending by compute time."
// "CUDNN_STATUS_BAD_PARAM: At least one of the following conditions are
// met: One of the parameters handle, xDesc, wDesc, convDesc, yDesc,
// perfResults, returnedAlgoCount is NULL. Either yDesc or wDesc have
// different dimensions from xDesc. The data types of tensors xDesc, yDesc
// or wDesc are not all the same. The number of feature maps in xDesc and
// wDesc differs. The tensor xDesc has a dimension smaller than 3.
// requestedAlgoCount is less than or equal to 0."
// (4-D descriptors only exist here, so the dimension-count conditions hold.)
template <typename PerfT>
cudnnStatus_t heuristics(Kind kind, cudnnHandle_t handle, const cudnnTensorStruct *x,
                         const cudnnFilterStruct *w, const cudnnConvolutionStruct *conv,
                         const cudnnTensorStruct *y, int requested, int *returned, PerfT *out) {
    if (!handle || !returned || !out)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s _v7: NULL argument", kKindName[kind]);
    if (requested <= 0)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s _v7: requestedAlgoCount %d", kKindName[kind],
                    requested);
    ConvShape s;
    // The heuristics do not check the output's spatial size (the calls do).
    cudnnStatus_t st = check_geometry(x, w, conv, y, false, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    std::vector<Perf> list = active_list(kind);
    int n = std::min<int>(requested, (int)list.size());
    for (int i = 0; i < n; i++) {
        PerfT p;
        std::memset(&p, 0, sizeof p);
        p.algo = (decltype(p.algo))list[i].algo;
        p.status = list[i].status;
        p.time = list[i].time;
        p.memory = list[i].memory;
        p.determinism = list[i].determinism;
        p.mathType = list[i].math;
        out[i] = p;
    }
    *returned = n;
    return CUDNN_STATUS_SUCCESS;
}

// The workspace queries, for all three kinds. "This function returns the
// amount of GPU memory workspace the user needs to allocate to be able to
// call cudnnConvolutionForward() with the specified algorithm."
// "CUDNN_STATUS_BAD_PARAM: At least one of the following conditions are
// met: One of the parameters handle, xDesc, wDesc, convDesc, yDesc is NULL.
// The tensor yDesc or wDesc are not of the same dimension as xDesc. The
// tensor xDesc, yDesc or wDesc are not of the same data type. The numbers
// of feature maps of the tensor xDesc and wDesc differ. The tensor xDesc
// has a dimension smaller than 3."
// "CUDNN_STATUS_NOT_SUPPORTED: The combination of the tensor descriptors,
// filter descriptor and convolution descriptor is not supported for the
// specified algorithm."
cudnnStatus_t workspace_size(Kind kind, cudnnHandle_t handle, const cudnnTensorStruct *x,
                             const cudnnFilterStruct *w, const cudnnConvolutionStruct *conv,
                             const cudnnTensorStruct *y, int algo, size_t *bytes) {
    if (!handle || !bytes)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s workspace: NULL", kKindName[kind]);
    ConvShape s;
    cudnnStatus_t st = check_geometry(x, w, conv, y, true, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (algo < 0 || algo >= kAlgoCount[kind])
        return fail(CUDNN_STATUS_BAD_PARAM, "%s workspace: invalid algorithm %d", kKindName[kind],
                    algo);
    if (kind == BWD_FILTER && algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD");
    *bytes = algo_ws(kind, algo);
    return CUDNN_STATUS_SUCCESS;
}

float scalar(const void *p) {
    // "The storage data types for alpha and beta are: float for HALF and
    // FLOAT tensors, and double for DOUBLE tensors." (Scaling Parameters)
    return *(const float *)p;
}

} // namespace

extern "C" {

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perfResults) {
    return heuristics(FWD, handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount,
                      returnedAlgoCount, perfResults);
}

// Backward data's heuristic: filterDesc, diffDesc (dy), gradDesc (dx).
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perfResults) {
    return heuristics(BWD_DATA, handle, gradDesc, filterDesc, convDesc, diffDesc,
                      requestedAlgoCount, returnedAlgoCount, perfResults);
}

// Backward filter's heuristic: srcDesc (x), diffDesc (dy), gradDesc (dw).
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfResults) {
    return heuristics(BWD_FILTER, handle, srcDesc, gradDesc, convDesc, diffDesc, requestedAlgoCount,
                      returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes) {
    return workspace_size(FWD, handle, xDesc, wDesc, convDesc, yDesc, (int)algo, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
    cudnnConvolutionBwdDataAlgo_t algo, size_t *sizeInBytes) {
    return workspace_size(BWD_DATA, handle, dxDesc, wDesc, convDesc, dyDesc, (int)algo,
                          sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t *sizeInBytes) {
    return workspace_size(BWD_FILTER, handle, xDesc, gradDesc, convDesc, dyDesc, (int)algo,
                          sizeInBytes);
}

// ---- the convolutions ----

// "This function executes convolutions or cross-correlations over x using
// filters specified with w, returning results in y. Scaling factors alpha
// and beta can be used to scale the input tensor and the output tensor
// respectively." (y = alpha * conv(x, w) + beta * y)
// "CUDNN_STATUS_BAD_PARAM: At least one of the following conditions are
// met: At least one of the following is NULL: handle, xDesc, wDesc,
// convDesc, yDesc, xData, w, yData, alpha, beta. xDesc and yDesc have a
// non-matching number of dimensions. xDesc and wDesc have a non-matching
// number of dimensions. xDesc has fewer than three number of dimensions.
// xDesc's number of dimensions is not equal to convDesc array length + 2.
// xDesc and wDesc have a non-matching number of input feature maps per
// image (or group in case of grouped convolutions). yDesc or wDesc
// indicate an output channel count that isn't a multiple of group count (if
// group count has been set in convDesc). xDesc, wDesc, and yDesc have a
// non-matching data type. For some spatial dimension, wDesc has a spatial
// size that is larger than the input spatial size (including zero-padding
// size)."
// yDesc must also be the output cudnnGetConvolution2dForwardOutputDim
// gives (BackwardData documents the same for its dyDesc), and the workspace
// at least what cudnnGetConvolutionForwardWorkspaceSize reports for algo
// ("workSpace: ... a workspace needed to be able to execute the specified
// algorithm. If no workspace is needed for a particular algorithm, that
// pointer can be nil."), else CUDNN_STATUS_BAD_PARAM.
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                      size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y) {
    static const char *call = "cudnnConvolutionForward";
    if (!handle || !alpha || !beta || !x || !w || !y)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: NULL argument", call);
    ConvShape s;
    cudnnStatus_t st = check_geometry(xDesc, wDesc, convDesc, yDesc, true, &s);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_algo_ws(handle, FWD, (int)algo, workSpace, workSpaceSizeInBytes, call);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_device(handle->stream, x, t_span(*xDesc) * 4, "x", call);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_device(handle->stream, w, f_size(*wDesc) * 4, "w", call);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_device(handle->stream, y, t_span(*yDesc) * 4, "y", call);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    const cudnnTensorStruct xd = *xDesc, yd = *yDesc;
    const cudnnFilterStruct wd = *wDesc;
    const float a = scalar(alpha), b = scalar(beta);
    const float *xp = (const float *)x, *wp = (const float *)w;
    float *yp = (float *)y;
    emu_count_library(handle->stream, EmuLibrary::dnn);
    emu_enqueue(handle->stream, [=] {
        std::vector<float> xc, wc, yc(conv_y_size(s));
        const float *xin = xp, *win = wp;
        if (!is_packed_nhwc(xd))
            xc.resize(conv_x_size(s)), gather_tensor(xd, xp, xc.data()), xin = xc.data();
        if (wd.format != CUDNN_TENSOR_NHWC)
            wc.resize(conv_w_size(s)), gather_filter(wd, wp, wc.data()), win = wc.data();
        conv_gemm_forward(s, xin, win, yc.data());
        blend_tensor(yd, yc.data(), a, b, yp);
    });
    return CUDNN_STATUS_SUCCESS;
}

// "This function computes the convolution data gradient of the tensor dy,
// where y is the output of the forward convolution in
// cudnnConvolutionForward(). It uses the specified algo, and returns the
// results in the output tensor dx. Scaling factors alpha and beta can be
// used to scale the computed result or accumulate with the current dx."
// "CUDNN_STATUS_BAD_PARAM: At least one of the following conditions are
// met: At least one of the following is NULL: handle, dyDesc, wDesc,
// convDesc, dxDesc, dy, w, dx, alpha, beta. wDesc and dyDesc have a
// non-matching number of dimensions. wDesc and dxDesc have a non-matching
// number of dimensions. wDesc has fewer than three number of dimensions.
// wDesc, dxDesc, and dyDesc have a non-matching data type. wDesc and
// dxDesc have a non-matching number of input feature maps per image (or
// group in case of grouped convolutions). dyDesc spatial sizes do not
// match with the expected size as determined by
// cudnnGetConvolutionNdForwardOutputDim()."
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx) {
    static const char *call = "cudnnConvolutionBackwardData";
    if (!handle || !alpha || !beta || !w || !dy || !dx)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: NULL argument", call);
    ConvShape s;
    cudnnStatus_t st = check_geometry(dxDesc, wDesc, convDesc, dyDesc, true, &s);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_algo_ws(handle, BWD_DATA, (int)algo, workSpace, workSpaceSizeInBytes, call);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_device(handle->stream, w, f_size(*wDesc) * 4, "w", call);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_device(handle->stream, dy, t_span(*dyDesc) * 4, "dy", call);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_device(handle->stream, dx, t_span(*dxDesc) * 4, "dx", call);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    const cudnnTensorStruct dxd = *dxDesc, dyd = *dyDesc;
    const cudnnFilterStruct wd = *wDesc;
    const float a = scalar(alpha), b = scalar(beta);
    const float *wp = (const float *)w, *dyp = (const float *)dy;
    float *dxp = (float *)dx;
    emu_count_library(handle->stream, EmuLibrary::dnn);
    emu_enqueue(handle->stream, [=] {
        std::vector<float> dyc, wc, dxc(conv_x_size(s));
        const float *dyin = dyp, *win = wp;
        if (!is_packed_nhwc(dyd))
            dyc.resize(conv_y_size(s)), gather_tensor(dyd, dyp, dyc.data()), dyin = dyc.data();
        if (wd.format != CUDNN_TENSOR_NHWC)
            wc.resize(conv_w_size(s)), gather_filter(wd, wp, wc.data()), win = wc.data();
        conv_gemm_backward_data(s, win, dyin, dxc.data());
        blend_tensor(dxd, dxc.data(), a, b, dxp);
    });
    return CUDNN_STATUS_SUCCESS;
}

// "This function computes the convolution weight (filter) gradient of the
// tensor dy, where y is the output of the forward convolution in
// cudnnConvolutionForward(). It uses the specified algo, and returns the
// results in the output tensor dw. Scaling factors alpha and beta can be
// used to scale the computed result or accumulate with the current dw."
// "CUDNN_STATUS_BAD_PARAM: At least one of the following conditions are
// met: At least one of the following is NULL: handle, xDesc, dyDesc,
// convDesc, dwDesc, xData, dyData, dwData, alpha, beta. xDesc and dyDesc
// have a non-matching number of dimensions. xDesc and dwDesc have a
// non-matching number of dimensions. xDesc has fewer than three number of
// dimensions. xDesc, dyDesc, and dwDesc have a non-matching data type.
// xDesc and dwDesc have a non-matching number of input feature maps per
// image (or group in case of grouped convolutions). yDesc or dwDesc
// indicate an output channel count that isn't a multiple of group count
// (if group count has been set in convDesc)."
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                             size_t workSpaceSizeInBytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw) {
    static const char *call = "cudnnConvolutionBackwardFilter";
    if (!handle || !alpha || !beta || !x || !dy || !dw)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: NULL argument", call);
    ConvShape s;
    cudnnStatus_t st = check_geometry(xDesc, dwDesc, convDesc, dyDesc, true, &s);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_algo_ws(handle, BWD_FILTER, (int)algo, workSpace, workSpaceSizeInBytes, call);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_device(handle->stream, x, t_span(*xDesc) * 4, "x", call);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_device(handle->stream, dy, t_span(*dyDesc) * 4, "dy", call);
    if (st == CUDNN_STATUS_SUCCESS)
        st = check_device(handle->stream, dw, f_size(*dwDesc) * 4, "dw", call);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    const cudnnTensorStruct xd = *xDesc, dyd = *dyDesc;
    const cudnnFilterStruct wd = *dwDesc;
    const float a = scalar(alpha), b = scalar(beta);
    const float *xp = (const float *)x, *dyp = (const float *)dy;
    float *dwp = (float *)dw;
    emu_count_library(handle->stream, EmuLibrary::dnn);
    emu_enqueue(handle->stream, [=] {
        std::vector<float> xc, dyc, dwc(conv_w_size(s));
        const float *xin = xp, *dyin = dyp;
        if (!is_packed_nhwc(xd))
            xc.resize(conv_x_size(s)), gather_tensor(xd, xp, xc.data()), xin = xc.data();
        if (!is_packed_nhwc(dyd))
            dyc.resize(conv_y_size(s)), gather_tensor(dyd, dyp, dyc.data()), dyin = dyc.data();
        conv_gemm_backward_filter(s, xin, dyin, dwc.data());
        blend_filter(wd, dwc.data(), a, b, dwp);
    });
    return CUDNN_STATUS_SUCCESS;
}

} // extern "C"
