// cudnn_emu_gemm.cc - the convolution the emulated cuDNN runs (conv_ref.h's
// conv_gemm_*): im2col + OpenBLAS sgemm on canonical layouts (x NHWC,
// w KRSC, y NPQK). CUDNN_CONVOLUTION is handled by flipping the filter into
// a copy first, so the GEMMs only ever cross-correlate. The column matrix is
// built for a chunk of images at a time so memory stays bounded whatever
// the batch size.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tests/gpu_emu/conv_ref.h"

namespace {

// Column-buffer budget, in floats (32 MiB).
constexpr size_t kColFloats = size_t(8) << 20;

// wf = w with each filter's (r, s) plane flipped when s.flip, else a copy:
// flipping is its own inverse, so this also maps a flipped gradient back.
std::vector<float> flip_filter(const ConvShape &s, const float *w) {
    std::vector<float> wf(conv_w_size(s));
    const size_t C = s.c;
    for (int k = 0; k < s.k; k++)
        for (int r = 0; r < s.r; r++)
            for (int c = 0; c < s.s; c++) {
                int rr = s.flip ? s.r - 1 - r : r, cc = s.flip ? s.s - 1 - c : c;
                std::memcpy(&wf[(((size_t)k * s.r + r) * s.s + c) * C],
                            &w[(((size_t)k * s.r + rr) * s.s + cc) * C], C * sizeof(float));
            }
    return wf;
}

// Images per chunk: as many as keep the column matrix within budget.
int chunk_images(const ConvShape &s) {
    size_t per_image = (size_t)s.p * s.q * s.r * s.s * s.c;
    size_t nb = per_image ? kColFloats / per_image : (size_t)s.n;
    return (int)std::max<size_t>(1, std::min<size_t>(nb, (size_t)s.n));
}

// col (nb*P*Q, R*S*C): row (n, p, q) holds the input patch output (p, q)
// of image n0+n reads, in (r, s, c) order; zeros for padding.
void im2col(const ConvShape &s, const float *x, int n0, int nb, float *col) {
    const size_t C = s.c, RSC = (size_t)s.r * s.s * C;
    for (int n = 0; n < nb; n++) {
        const float *xn = x + (size_t)(n0 + n) * s.h * s.w * C;
        for (int p = 0; p < s.p; p++)
            for (int q = 0; q < s.q; q++) {
                float *row = col + (((size_t)n * s.p + p) * s.q + q) * RSC;
                for (int r = 0; r < s.r; r++) {
                    int iy = p * s.str_h - s.pad_h + r * s.dil_h;
                    for (int c = 0; c < s.s; c++) {
                        int ix = q * s.str_w - s.pad_w + c * s.dil_w;
                        float *dst = row + ((size_t)r * s.s + c) * C;
                        if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w)
                            std::memset(dst, 0, C * sizeof(float));
                        else
                            std::memcpy(dst, xn + ((size_t)iy * s.w + ix) * C, C * sizeof(float));
                    }
                }
            }
    }
}

// The adjoint of im2col: dx (images n0..n0+nb) += each patch row of dcol.
void col2im_add(const ConvShape &s, const float *dcol, int n0, int nb, float *dx) {
    const size_t C = s.c, RSC = (size_t)s.r * s.s * C;
    for (int n = 0; n < nb; n++) {
        float *dxn = dx + (size_t)(n0 + n) * s.h * s.w * C;
        for (int p = 0; p < s.p; p++)
            for (int q = 0; q < s.q; q++) {
                const float *row = dcol + (((size_t)n * s.p + p) * s.q + q) * RSC;
                for (int r = 0; r < s.r; r++) {
                    int iy = p * s.str_h - s.pad_h + r * s.dil_h;
                    if (iy < 0 || iy >= s.h) continue;
                    for (int c = 0; c < s.s; c++) {
                        int ix = q * s.str_w - s.pad_w + c * s.dil_w;
                        if (ix < 0 || ix >= s.w) continue;
                        const float *src = row + ((size_t)r * s.s + c) * C;
                        float *dst = dxn + ((size_t)iy * s.w + ix) * C;
                        for (size_t i = 0; i < C; i++)
                            dst[i] += src[i];
                    }
                }
            }
    }
}

} // namespace

// y (rows, K) = col (rows, RSC) wf^T, chunk by chunk
void conv_gemm_forward(const ConvShape &s, const float *x, const float *w, float *y) {
    const int RSC = s.r * s.s * s.c, PQ = s.p * s.q, nb_max = chunk_images(s);
    std::vector<float> wf = flip_filter(s, w);
    std::vector<float> col((size_t)nb_max * PQ * RSC);
    for (int n0 = 0; n0 < s.n; n0 += nb_max) {
        int nb = std::min(nb_max, s.n - n0), rows = nb * PQ;
        im2col(s, x, n0, nb, col.data());
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, s.k, RSC, 1.0f, col.data(), RSC,
                    wf.data(), RSC, 0.0f, y + (size_t)n0 * PQ * s.k, s.k);
    }
}

// dcol (rows, RSC) = dy (rows, K) wf (K, RSC), then scattered back into dx
void conv_gemm_backward_data(const ConvShape &s, const float *w, const float *dy, float *dx) {
    const int RSC = s.r * s.s * s.c, PQ = s.p * s.q, nb_max = chunk_images(s);
    std::vector<float> wf = flip_filter(s, w);
    std::vector<float> dcol((size_t)nb_max * PQ * RSC);
    std::fill(dx, dx + conv_x_size(s), 0.0f);
    for (int n0 = 0; n0 < s.n; n0 += nb_max) {
        int nb = std::min(nb_max, s.n - n0), rows = nb * PQ;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, RSC, s.k, 1.0f,
                    dy + (size_t)n0 * PQ * s.k, s.k, wf.data(), RSC, 0.0f, dcol.data(), RSC);
        col2im_add(s, dcol.data(), n0, nb, dx);
    }
}

// dwf (K, RSC) = sum over chunks of dy^T (K, rows) col (rows, RSC); then
// unflipped into dw
void conv_gemm_backward_filter(const ConvShape &s, const float *x, const float *dy, float *dw) {
    const int RSC = s.r * s.s * s.c, PQ = s.p * s.q, nb_max = chunk_images(s);
    std::vector<float> col((size_t)nb_max * PQ * RSC), dwf(conv_w_size(s), 0.0f);
    for (int n0 = 0; n0 < s.n; n0 += nb_max) {
        int nb = std::min(nb_max, s.n - n0), rows = nb * PQ;
        im2col(s, x, n0, nb, col.data());
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.k, RSC, rows, 1.0f,
                    dy + (size_t)n0 * PQ * s.k, s.k, col.data(), RSC, n0 == 0 ? 0.0f : 1.0f,
                    dwf.data(), RSC);
    }
    std::vector<float> out = flip_filter(s, dwf.data());
    std::copy(out.begin(), out.end(), dw);
}
