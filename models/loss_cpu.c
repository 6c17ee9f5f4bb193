/* loss_cpu.c: the losses on the CPU (loss.h's contract): cross-entropy from
 * logits (fused softmax, through log-sum-exp) or from probabilities
 * (clipped as Keras does), mean squared error; one pass over the batch. */
#include <math.h>

#include "../runtime/hot.h"
#include "kernels_cpu.h"

/* Keras clips probabilities to [eps, 1 - eps] before the log when the
 * cross-entropy gets probabilities rather than logits. */
#define CLIP_EPS 1e-7f

static int argmax(const float *row, int k) {
    int best = 0;
    for (int j = 1; j < k; j++)
        if (row[j] > row[best]) best = j;
    return best;
}

MR_HOT static mr_status cpu_loss(mr_backend *be, mr_loss_kind kind, int fused_softmax,
                                 const mr_dfloat *outd, const int32_t *labels, int batch, int k,
                                 float norm, mr_dfloat *dyd, double *loss_sum, int64_t *correct,
                                 mr_error *err) {
    (void)be, (void)err;
    const float *out = mr_dfloat_cptr(outd);
    float *dy = mr_dfloat_ptr(dyd);
    float inv = 1.0f / norm;
    double total = 0.0;
    int64_t right = 0;
    for (int i = 0; i < batch; i++) {
        const float *z = out + (int64_t)i * k;
        float *d = dy ? dy + (int64_t)i * k : NULL;
        int y = labels[i];
        right += argmax(z, k) == y;
        if (kind == MR_LOSS_MSE) {
            /* mean over the k outputs of (out - onehot)^2, as Keras */
            double s = 0.0;
            for (int j = 0; j < k; j++) {
                float e = z[j] - (j == y ? 1.0f : 0.0f);
                s += (double)e * e;
                if (d) d[j] = 2.0f * e / (float)k * inv;
            }
            total += s / k;
        } else if (fused_softmax) {
            /* loss = logsumexp(z) - z_y; dz = softmax(z) - onehot */
            float mx = z[0];
            for (int j = 1; j < k; j++)
                mx = z[j] > mx ? z[j] : mx;
            float sum = 0.0f;
            for (int j = 0; j < k; j++)
                sum += expf(z[j] - mx);
            float lse = mx + logf(sum);
            total += (double)(lse - z[y]);
            if (d) {
                float is = 1.0f / sum;
                for (int j = 0; j < k; j++)
                    d[j] = (expf(z[j] - mx) * is - (j == y)) * inv;
            }
        } else {
            /* probabilities in: -log(clip(p_y)) */
            float p = z[y];
            float pc = p < CLIP_EPS ? CLIP_EPS : (p > 1.0f - CLIP_EPS ? 1.0f - CLIP_EPS : p);
            total += -log((double)pc);
            if (d) {
                for (int j = 0; j < k; j++)
                    d[j] = 0.0f;
                if (p == pc) d[y] = -1.0f / p * inv;
            }
        }
    }
    *loss_sum += total;
    *correct += right;
    return MR_OK;
}

const mr_loss_kernels mr_loss_cpu = {.compute = cpu_loss};
