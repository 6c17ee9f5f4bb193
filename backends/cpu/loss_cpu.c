/* loss_cpu.c: the losses on the CPU (loss.h's contract): cross-entropy from
 * logits (fused softmax, through log-sum-exp) or from probabilities
 * (clipped as Keras does), binary cross-entropy, mean squared error; one pass over the batch
 * with loss_row.h's per-example math, which the CUDA kernel shares. */
#include <math.h>

#include "runtime/target_clones.h"
#include "backends/cpu/cpu_impl.h"
#include "models/loss_row.h"

MR_AVX2_CLONES static mr_status cpu_loss(mr_backend *be, mr_loss_kind kind, int fused_softmax,
                                         float ls, const mr_dfloat *outd, const int32_t *labels,
                                         const mr_dfloat *cwd, int batch, int k, float norm,
                                         mr_dfloat *dyd, double *loss_sum, int64_t *correct,
                                         int top_k, int64_t *in_top_k, mr_error *err) {
    (void)be, (void)err;
    const float *out = mr_dfloat_cptr(outd);
    float *dy = mr_dfloat_ptr(dyd);
    const float *cw = cwd ? mr_dfloat_cptr(cwd) : NULL; /* (k) or none */
    float inv = 1.0f / norm;
    double total = 0.0;
    int64_t right = 0, top = 0;
    if (kind == MR_LOSS_BINARY_CROSSENTROPY && k > 1) {
        /* multi-label: labels (batch, k) multi-hot; right counts matched outputs */
        for (int i = 0; i < batch; i++) {
            const float *z = out + (int64_t)i * k;
            const int32_t *t = labels + (int64_t)i * k;
            right += mr_bce_multi_hits(fused_softmax, z, t, k);
            total +=
                mr_bce_multi_row(fused_softmax, ls, z, t, k, inv, dy ? dy + (int64_t)i * k : NULL);
        }
        *loss_sum += total;
        *correct += right;
        return MR_OK;
    }
    for (int i = 0; i < batch; i++) {
        const float *z = out + (int64_t)i * k;
        right += mr_hit_row(kind, fused_softmax, z, labels[i], k);
        if (top_k > 0) top += mr_in_top_k_row(z, labels[i], k, top_k);
        const float w = mr_class_weight(cw, labels[i]);
        const double l = mr_loss_row(kind, fused_softmax, ls, z, labels[i], k, inv * w,
                                     dy ? dy + (int64_t)i * k : NULL);
        total += cw ? w * l : l;
    }
    *loss_sum += total;
    *correct += right;
    if (top_k > 0) *in_top_k += top;
    return MR_OK;
}

const mr_loss_kernels mr_loss_cpu = {.compute = cpu_loss};
