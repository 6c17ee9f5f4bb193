/* loss.c: cross-entropy (sparse and one-hot), the regression losses: which
 * losses take logits, and the dispatch to the device's kernels (kernels.h). */
#include "models/loss.h"

#include "models/kernels.h"

int mr_loss_fuses_softmax(mr_loss_kind kind) {
    return kind == MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ||
           kind == MR_LOSS_CATEGORICAL_CROSSENTROPY;
}

int mr_loss_is_regression(mr_loss_kind kind) {
    return kind == MR_LOSS_MSE || kind == MR_LOSS_MAE || kind == MR_LOSS_HUBER;
}

/* The device's loss kernels with the queued pair, else NULL (*err set). */
static const mr_loss_kernels *queued_kernels(mr_backend *be, mr_error *err) {
    const mr_kernels *kern = mr_kernels_for(be);
    if (kern != NULL && kern->loss->compute_queued != NULL && kern->loss->take_sums != NULL)
        return kern->loss;
    mr_error_set(err, MR_ERR_UNSUPPORTED, "no queued %s loss sums", be->ops->name);
    return NULL;
}

mr_status mr_loss_compute_queued(mr_backend *be, mr_loss_kind kind, int fused_softmax,
                                 float smoothing, const mr_dfloat *out, const int32_t *labels,
                                 const mr_dfloat *class_weight, int batch, int k, float norm,
                                 mr_dfloat *dy, mr_error *err) {
    const mr_loss_kernels *q = queued_kernels(be, err);
    if (q == NULL) return MR_ERR_UNSUPPORTED;
    return q->compute_queued(be, kind, fused_softmax, smoothing, out, labels, class_weight, batch,
                             k, norm, dy, err);
}

mr_status mr_loss_take_sums(mr_backend *be, mr_dfloat *dst, mr_error *err) {
    const mr_loss_kernels *q = queued_kernels(be, err);
    if (q == NULL) return MR_ERR_UNSUPPORTED;
    return q->take_sums(be, dst, err);
}

mr_status mr_loss_compute(mr_backend *be, mr_loss_kind kind, int fused_softmax, float smoothing,
                          const mr_dfloat *out, const int32_t *labels,
                          const mr_dfloat *class_weight, int batch, int k, float norm,
                          mr_dfloat *dy, double *loss_sum, int64_t *correct, int top_k,
                          int64_t *in_top_k, mr_error *err) {
    const mr_kernels *kern = mr_kernels_for(be);
    if (kern == NULL)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "no %s loss kernels in this build",
                            be->ops->name);
    return kern->loss->compute(be, kind, fused_softmax, smoothing, out, labels, class_weight, batch,
                               k, norm, dy, loss_sum, correct, top_k, in_top_k, err);
}
