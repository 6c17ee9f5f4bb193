/* loss_cpu.c: the losses on the CPU (loss.h's contract): cross-entropy from
 * logits (fused softmax, through log-sum-exp) or from probabilities
 * (clipped as Keras does), binary cross-entropy, mean squared error; one pass over the batch
 * with loss_row.h's per-example math (mr_loss_example), which the CUDA kernel shares, summed in
 * row order. */
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
    for (int i = 0; i < batch; i++) {
        int hit, in_top;
        total += mr_loss_example(kind, fused_softmax, ls, out, labels, cw, i, k, inv, top_k, dy,
                                 &hit, &in_top);
        right += hit;
        top += in_top;
    }
    *loss_sum += total;
    *correct += right;
    if (top_k > 0) *in_top_k += top;
    return MR_OK;
}

const mr_loss_kernels mr_loss_cpu = {.compute = cpu_loss};
