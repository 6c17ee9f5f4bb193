/* loss.h: losses over a batch of model outputs and integer class labels.
 *
 * The strategy's contract (docs/architecture.md, "The step", 3): a replica's loss is the SUM
 * of its per-example losses divided by the GLOBAL batch size `norm`, so the
 * SUM-all-reduced gradients are the gradient of the mean loss over the
 * global batch. Metrics come back as plain sums (loss, correct, in top k) so they can
 * be reduced with the gradients and divided once by the global count. */
#ifndef MR_LOSS_H
#define MR_LOSS_H

#include <stdint.h>

#include "runtime/backend.h"
#include "runtime/hd.h"
#include "models/config.h"

MR_C_BEGIN

/* out: (batch, k) model outputs (device memory): logits when
 * `fused_softmax` (softmax + cross-entropy computed together, stable
 * through log-sum-exp), otherwise the last layer's activations. labels:
 * (batch) in [0, k), host memory (a device implementation copies these few
 * integers over itself). class_weight: (k) device memory, or NULL (every
 * weight 1): each example's loss, and its dy, is multiplied by the weight of
 * its class (Keras fit's class_weight as sample weights; still divided by
 * norm, not by the sum of the weights). Adds the sum of per-example
 * (weighted) losses to *loss_sum and the number of correct argmax
 * predictions, unweighted, to *correct (host), and, when top_k > 0, the
 * number of rows whose label is among the top_k largest outputs (loss_row.h,
 * mr_in_top_k_row) to *in_top_k (host; NULL when top_k is 0). If dy is not
 * NULL, writes dy (batch, k) = d (sum of losses / norm) / d out (device).
 * smoothing: the cross-entropies' label smoothing (loss_row.h; 0: none).
 * binary_crossentropy: k = 1, labels 0 or 1, `fused_softmax` a fused
 * sigmoid (out: logits), correct counts p > 0.5 against the label; with k > 1 it is
 * multi-label: labels (batch, k) multi-hot 0/1, each example's loss the mean over its k outputs
 * (loss_row.h, mr_bce_multi_row), correct the matched outputs (0..k per example), no class
 * weights, no top k.
 * mse, mae, huber (the mean over the k outputs of (out - t)^2, |out - t|, Keras's Huber with
 * delta 1): `fused_softmax` says what the labels are. 0: class ids, t the one-hot of the label
 * (a softmax last layer), correct and top k as the cross-entropies'. MR_LOSS_FLOAT_TARGETS:
 * regression, labels (batch, k) float32 targets carried as bit patterns in the int32 words
 * (loss_row.h, mr_label_float), no class weights, correct and in_top_k add 0.
 * Runs on be's device (its kernels, models/kernels.h). */
mr_status mr_loss_compute(mr_backend *be, mr_loss_kind kind, int fused_softmax, float smoothing,
                          const mr_dfloat *out, const int32_t *labels,
                          const mr_dfloat *class_weight, int batch, int k, float norm,
                          mr_dfloat *dy, double *loss_sum, int64_t *correct, int top_k,
                          int64_t *in_top_k, mr_error *err);

/* mr_loss_compute without a host wait (a GPU's training step): the batch's
 * loss sum and correct count are added, in the same order and so to the same
 * bits as mr_loss_compute's host sums, to the device's step sums (two
 * doubles: loss, correct, as `*loss_sum += sum; *correct += (double)hits`
 * would), which mr_loss_take_sums hands over. No top k. MR_ERR_UNSUPPORTED
 * where the device has no queue (the CPU). */
mr_status mr_loss_compute_queued(mr_backend *be, mr_loss_kind kind, int fused_softmax,
                                 float smoothing, const mr_dfloat *out, const int32_t *labels,
                                 const mr_dfloat *class_weight, int batch, int k, float norm,
                                 mr_dfloat *dy, mr_error *err);
/* Queued: dst (3 floats of device memory) = the step sums as floats (loss,
 * correct) and 1.0 if the loss sum is NaN or +-Inf, else 0.0; the sums
 * start again from 0. */
mr_status mr_loss_take_sums(mr_backend *be, mr_dfloat *dst, mr_error *err);

/* A device kind's implementation of mr_loss_compute (same contract), and
 * (NULL on the CPU) of the queued pair. */
typedef struct mr_loss_kernels {
    mr_status (*compute)(mr_backend *be, mr_loss_kind kind, int fused_softmax, float smoothing,
                         const mr_dfloat *out, const int32_t *labels, const mr_dfloat *class_weight,
                         int batch, int k, float norm, mr_dfloat *dy, double *loss_sum,
                         int64_t *correct, int top_k, int64_t *in_top_k, mr_error *err);
    mr_status (*compute_queued)(mr_backend *be, mr_loss_kind kind, int fused_softmax,
                                float smoothing, const mr_dfloat *out, const int32_t *labels,
                                const mr_dfloat *class_weight, int batch, int k, float norm,
                                mr_dfloat *dy, mr_error *err);
    mr_status (*take_sums)(mr_backend *be, mr_dfloat *dst, mr_error *err);
} mr_loss_kernels;

/* mr_loss_compute's `fused_softmax` for mse, mae and huber on float targets. */
#define MR_LOSS_FLOAT_TARGETS 1

/* 1 when the loss takes logits from a final softmax (the cross-entropies). */
int mr_loss_fuses_softmax(mr_loss_kind kind);

/* 1 for mse, mae and huber (float targets unless the last layer is a softmax). */
int mr_loss_is_regression(mr_loss_kind kind);

MR_C_END

#endif
