// conv_ref.h - 2-D convolution math of the cuDNN emulation (tests/gpu_emu).
//
// One geometry (ConvShape) and three passes on canonical layouts:
//   x: NHWC (n, h, w, c)   w: KRSC (k, r, s, c)   y: NPQK (n, p, q, k)
// cudnn_emu.cc converts whatever layout a descriptor names to these and
// back. Two independent implementations share the interface:
//   conv_ref_*   (conv_ref.cc) direct loops with double accumulation: slow,
//                obviously right; the tests' yardstick, not in the library
//   conv_gemm_*  (cudnn_emu_gemm.cc) im2col + OpenBLAS sgemm: what the
//                emulated cuDNN runs, fast enough for a few hundred training
//                steps of a small CNN
// Both compute out = result (no alpha/beta: the caller blends).
#pragma once

#include <cstddef>

struct ConvShape {
    int n, c, h, w;   // input: batch, channels, height, width
    int k, r, s;      // filters: count (output channels), rows, columns
    int pad_h, pad_w; // zero padding before and after, each dimension
    int str_h, str_w; // stride
    int dil_h, dil_w; // dilation
    bool flip;        // true: CUDNN_CONVOLUTION (the filter is flipped);
                      // false: CUDNN_CROSS_CORRELATION
    int p, q;         // output height, width (conv_out_dim)
};

// cuDNN's output size for one spatial dimension:
//   1 + (in + 2*pad - (((filter-1)*dilation)+1)) / stride
// (may be < 1 for a filter larger than the padded input: callers check)
// Integer division truncates toward zero, as in C (and so in cuDNN).
inline int conv_out_dim(int in, int pad, int filter, int dilation, int stride) {
    return 1 + (in + 2 * pad - (((filter - 1) * dilation) + 1)) / stride;
}

// Fills s.p and s.q from the rest of s.
inline void conv_shape_finish(ConvShape &s) {
    s.p = conv_out_dim(s.h, s.pad_h, s.r, s.dil_h, s.str_h);
    s.q = conv_out_dim(s.w, s.pad_w, s.s, s.dil_w, s.str_w);
}

inline size_t conv_x_size(const ConvShape &s) {
    return (size_t)s.n * s.h * s.w * s.c;
}
inline size_t conv_w_size(const ConvShape &s) {
    return (size_t)s.k * s.r * s.s * s.c;
}
inline size_t conv_y_size(const ConvShape &s) {
    return (size_t)s.n * s.p * s.q * s.k;
}

// y = x (*) w
void conv_ref_forward(const ConvShape &s, const float *x, const float *w, float *y);
// dx = dL/dx given dy = dL/dy
void conv_ref_backward_data(const ConvShape &s, const float *w, const float *dy, float *dx);
// dw = dL/dw given x and dy
void conv_ref_backward_filter(const ConvShape &s, const float *x, const float *dy, float *dw);

void conv_gemm_forward(const ConvShape &s, const float *x, const float *w, float *y);
void conv_gemm_backward_data(const ConvShape &s, const float *w, const float *dy, float *dx);
void conv_gemm_backward_filter(const ConvShape &s, const float *x, const float *dy, float *dw);
