// conv_ref.cc - the direct-loop convolution reference (conv_ref.h): the
// definition of the math, written for reading, not speed. Used only by the
// tests, to check the emulator's im2col path; TensorFlow's goldens check
// this file and that path alike.
#include "tests/gpu_emu/conv_ref.h"

#include <vector>

namespace {

// Where tap (r, col) of filter k, channel c is stored. Cross-correlation
// reads the filter as stored; convolution reads it flipped in both spatial
// dimensions (cuDNN's CUDNN_CONVOLUTION).
size_t w_index(const ConvShape &s, int k, int r, int col, int c) {
    int rr = s.flip ? s.r - 1 - r : r, ss = s.flip ? s.s - 1 - col : col;
    return (((size_t)k * s.r + rr) * s.s + ss) * s.c + c;
}

size_t x_index(const ConvShape &s, int n, int y, int x, int c) {
    return (((size_t)n * s.h + y) * s.w + x) * s.c + c;
}

size_t y_index(const ConvShape &s, int n, int p, int q, int k) {
    return (((size_t)n * s.p + p) * s.q + q) * s.k + k;
}

} // namespace

// y[n,p,q,k] = sum_{r,s,c} x[n, p*str - pad + r*dil, q*str - pad + s*dil, c] * w[k,r,s,c]
// (out-of-range input positions are the zero padding)
void conv_ref_forward(const ConvShape &s, const float *x, const float *w, float *y) {
    for (int n = 0; n < s.n; n++)
        for (int p = 0; p < s.p; p++)
            for (int q = 0; q < s.q; q++)
                for (int k = 0; k < s.k; k++) {
                    double acc = 0;
                    for (int r = 0; r < s.r; r++) {
                        int iy = p * s.str_h - s.pad_h + r * s.dil_h;
                        if (iy < 0 || iy >= s.h) continue;
                        for (int col = 0; col < s.s; col++) {
                            int ix = q * s.str_w - s.pad_w + col * s.dil_w;
                            if (ix < 0 || ix >= s.w) continue;
                            for (int c = 0; c < s.c; c++)
                                acc += (double)x[x_index(s, n, iy, ix, c)] *
                                       w[w_index(s, k, r, col, c)];
                        }
                    }
                    y[y_index(s, n, p, q, k)] = (float)acc;
                }
}

// The adjoint of forward in x: every (output, tap) pair that read x[...]
// sends dy * w back to it.
void conv_ref_backward_data(const ConvShape &s, const float *w, const float *dy, float *dx) {
    std::vector<double> acc(conv_x_size(s), 0.0);
    for (int n = 0; n < s.n; n++)
        for (int p = 0; p < s.p; p++)
            for (int q = 0; q < s.q; q++)
                for (int k = 0; k < s.k; k++) {
                    double g = dy[y_index(s, n, p, q, k)];
                    for (int r = 0; r < s.r; r++) {
                        int iy = p * s.str_h - s.pad_h + r * s.dil_h;
                        if (iy < 0 || iy >= s.h) continue;
                        for (int col = 0; col < s.s; col++) {
                            int ix = q * s.str_w - s.pad_w + col * s.dil_w;
                            if (ix < 0 || ix >= s.w) continue;
                            for (int c = 0; c < s.c; c++)
                                acc[x_index(s, n, iy, ix, c)] += g * w[w_index(s, k, r, col, c)];
                        }
                    }
                }
    for (size_t i = 0; i < acc.size(); i++)
        dx[i] = (float)acc[i];
}

// The adjoint of forward in w, summed over the batch.
void conv_ref_backward_filter(const ConvShape &s, const float *x, const float *dy, float *dw) {
    std::vector<double> acc(conv_w_size(s), 0.0);
    for (int n = 0; n < s.n; n++)
        for (int p = 0; p < s.p; p++)
            for (int q = 0; q < s.q; q++)
                for (int k = 0; k < s.k; k++) {
                    double g = dy[y_index(s, n, p, q, k)];
                    for (int r = 0; r < s.r; r++) {
                        int iy = p * s.str_h - s.pad_h + r * s.dil_h;
                        if (iy < 0 || iy >= s.h) continue;
                        for (int col = 0; col < s.s; col++) {
                            int ix = q * s.str_w - s.pad_w + col * s.dil_w;
                            if (ix < 0 || ix >= s.w) continue;
                            for (int c = 0; c < s.c; c++)
                                acc[w_index(s, k, r, col, c)] += g * x[x_index(s, n, iy, ix, c)];
                        }
                    }
                }
    for (size_t i = 0; i < acc.size(); i++)
        dw[i] = (float)acc[i];
}
