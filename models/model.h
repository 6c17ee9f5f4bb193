/* model.h: the layers built from a .cfg (a chain, or a graph: see graph
 * below), with flat buffers.
 *
 * One mr_model is one replica's copy. All trainable weights live in ONE
 * buffer `params`, their gradients in ONE buffer `grads` of the same layout,
 * each optimizer slot likewise, non-trainable state (BN moving statistics) in
 * `state`; layers hold views. Weights are laid out in REVERSE layer order, so
 * the gradients backward produces first are contiguous at the front and can
 * be reduced while backward goes on. Consequences: all-reduce is one call (or
 * a few buckets), the optimizer one pass, replicas compare with one memcmp.
 *
 * Device-independent: the buffers are the replica's device memory, the
 * layers, loss and optimizer run on its kernels (kernels.h), and what the
 * host reads or writes (a batch, the outputs, the weights' initial values,
 * the metrics after the gradients) goes through the backend, in place where
 * its memory is host memory. */
#ifndef MR_MODEL_H
#define MR_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "models/config.h"
#include "models/layer.h"
#include "models/model_plan.h"
#include "models/optimizer.h"

struct mr_trace_lane;   /* runtime/trace.h */
struct mr_device_trace; /* runtime/device_trace.h */

typedef struct mr_model {
    const mr_config *cfg;
    int n_layers;                   /* layers after [input] */
    mr_layer layers[MR_MAX_LAYERS]; /* layers[0] is the first after [input] */
    mr_shape in_shape;              /* one example */
    int64_t in_size, out_size;      /* floats per example in / out */
    int max_batch;
    int fused_softmax;        /* output is logits; loss applies the softmax */
    int classes, label_width; /* the plan's: mr_model_classes, mr_model_label_width */
    int regression;           /* the plan's: mr_model_regression */
    /* Training runs forward+backward in passes of at most `pass_rows` rows, so
     * that a pass's activations are still in cache when its backward reads
     * them; with 2 replicas on 2 cores that decides the scaling, since the
     * cores share the last-level cache and memory bandwidth. Set by
     * mr_model_init from the floats one row touches (model.c); max_batch
     * (one pass) when a layer needs the whole batch (BatchNormalization).
     * Tests may lower it. The gradients are the same sums in another order. */
    int pass_rows;
    mr_backend *be; /* the replica's backend context (the caller's: not freed here) */
    mr_optimizer opt;

    int64_t n_params;   /* trainable floats */
    int64_t n_state;    /* non-trainable floats */
    size_t grads_extra; /* floats after the gradients (metrics ride along) */
    /* Device memory (runtime/dmem.h): read and written by the kernels
     * only; host code goes through the functions below or the backend. */
    mr_dfloat *params;   /* (n_params) */
    mr_dfloat *grads;    /* (n_params + grads_extra) */
    mr_dfloat *slots[2]; /* optimizer slots, (n_params) each, or NULL */
    mr_dfloat *state;    /* (n_state) or NULL */
    /* (out_size): [net] class_weight for the training loss, or NULL */
    mr_dfloat *class_weight;

    mr_dfloat *input; /* (max_batch, in_size): the batch the layers run on */
    /* Where the context's memory is not host memory, two device buffers
     * and two pinned host buffers (max_batch, in_size) used in turn: the
     * loader fills input_host[next_input] while the device still computes
     * on `input`, the other one (mr_model_input_upload). On the CPU,
     * inputs[0] is `input` and the loader fills it in place. */
    mr_dfloat *inputs[2];
    float *input_host[2];
    int next_input;
    /* (max_batch) int64 example ids on the device, one per inputs[i], for a
     * synthetic batch made there (mr_model_input_synthetic); NULL where the
     * memory is host memory */
    void *input_rows[2];
    mr_dfloat *acts[MR_MAX_LAYERS]; /* layer i's output, (max_batch, out of layer i) */
    mr_dfloat *dbuf[2];             /* ping-pong gradients w.r.t. activations */
    /* Host staging for what host code reads or writes of those buffers (a
     * batch of output, one weight; the input has input_host), where the
     * context's memory is not host memory; NULL where it is (the CPU),
     * which is used in place. */
    float *host;
    size_t host_floats;
    mr_exec_ctx run; /* this replica's execution context */
    /* --trace: this replica's lane, where training records each layer's
     * forward and backward (host time: on a GPU, the time to queue the
     * layer's kernels); NULL (the default): not tracing */
    struct mr_trace_lane *trace;
    /* --trace on a GPU: the same spans in device time on a lane of their
     * own (runtime/device_trace.h), owned by the model (mr_model_free
     * destroys it); NULL: none (the CPU, or not tracing) */
    struct mr_device_trace *dtrace;
    /* where each layer's trainable weights start in params, in floats; a layer's
     * gradients are complete (for bucketing) once its backward has run */
    int64_t param_offset[MR_MAX_LAYERS];
    /* A graph (cfg->graph: a layer takes an earlier output than the one
     * just before it, or merges two with [add]): layer i takes the outputs
     * of layers src[i][0] and, for [add], src[i][1] (-1: the model's input;
     * src[i][1] -1 otherwise); the layers still run in the file's order.
     * An output that feeds several layers gets the SUM of their gradients,
     * so each layer's output has its gradient buffer dacts[i] (max_batch,
     * out of layer i), and dbuf[] hold the gradients still to be added.
     * Views are copies in a graph. A chain (graph 0) uses none of this: it
     * keeps the ping-pong dbuf[] and the views. */
    int graph;
    int src[MR_MAX_LAYERS][2];
    mr_dfloat *dacts[MR_MAX_LAYERS];
} mr_model;

/* Builds the model of cfg on backend context `be` (the replica's; it must
 * outlive the model): its plan (mr_model_plan_make: every .cfg mistake,
 * naming its line), then mr_model_init_from_plan. On failure m holds
 * nothing (mr_model_free is a no-op). */
mr_status mr_model_init(mr_model *m, mr_backend *be, const mr_config *cfg, int max_batch,
                        size_t grads_extra, mr_error *err);
/* Makes plan p on context be: the layers' kernels of be's device kind and
 * their state, the ReLU fusion those kernels allow, every buffer in be's
 * memory for batches up to max_batch, plus `grads_extra` floats after the
 * gradients, the layers' scratch in the context, the weights' views, and
 * the training pass size. The plan may go once this returns (its cfg may
 * not). Weights are zero until mr_model_init_weights. */
mr_status mr_model_init_from_plan(mr_model *m, mr_backend *be, const mr_model_plan *p,
                                  int max_batch, size_t grads_extra, mr_error *err);
void mr_model_free(mr_model *m);

/* Initialises all weights from the seed (same seed -> same bits anywhere,
 * on any device: they are made on the host) and zeroes the optimizer slots. */
mr_status mr_model_init_weights(mr_model *m, uint64_t seed, mr_error *err);

/* Number of classes the output layer predicts (its width). */
int mr_model_classes(const mr_model *m);

/* Labels per example: k for multi-label binary_crossentropy (k > 1 sigmoid outputs, multi-hot
 * labels (batch, k)), else 1 (a class id). Also what an example's `correct` counts up to, so an
 * accuracy divides the correct sum by examples x this. */
int mr_model_label_width(const mr_model *m);

/* 1: the loss is a regression on float targets (mse, mae, huber on a last layer other than a
 * softmax): labels (n, mr_model_label_width) are float32 bit patterns (runtime/dataset.h), the
 * loss kernels' `correct` stays 0, and there is no accuracy to report. */
int mr_model_regression(const mr_model *m);

/* Host memory for the next batch (max_batch, in_size floats), for the
 * loader to fill: m->input itself where the context's memory is host
 * memory (no copy), else the next of the two pinned buffers; then
 * mr_model_input_upload makes `batch` rows of it the model's m->input
 * (nothing to do in the first case). On a GPU the upload does not wait for
 * the copy, nor for the work queued before it, which still reads the
 * previous batch: the loader may fill the next batch while the device
 * computes (backend.h, mr_backend_upload). */
float *mr_model_input_host(mr_model *m);
mr_status mr_model_input_upload(mr_model *m, int batch, mr_error *err);

/* Instead of filling and uploading: the next batch made on the device (its
 * context's input kernel, models/kernels.h), the synthetic examples
 * rows[0..batch) under (k0, k1) times scale, the floats mr_dataset_fill
 * would make of mr_dataset_synthetic's bytes. Only the ids (8 bytes a row)
 * travel, through the same pinned buffer and queued upload as a batch. For
 * a context whose memory is not host memory. */
mr_status mr_model_input_synthetic(mr_model *m, const int64_t *rows, int batch, uint32_t k0,
                                   uint32_t k1, float scale, mr_error *err);

/* Runs the layers on m->input (batch rows); the output (batch, out_size) is
 * then at mr_model_output (device memory). training selects dropout and
 * batch statistics. */
mr_status mr_model_forward(mr_model *m, int batch, int training, mr_error *err);
const mr_dfloat *mr_model_output(const mr_model *m);

/* Forward, loss and backward on m->input: ADDS this batch's gradients of
 * (sum of losses / norm) into m->grads. Adds the loss sum and the metric's numerator to
 * *loss_sum, *correct: the correct count (an integer; multi-label: matched outputs) or, for a
 * regression (mr_model_regression), the sum of |out - target| over the batch's outputs, so
 * that *correct / (examples x mr_model_label_width) is the accuracy, or Keras's mae. A failure of
 * the device or of a collective inside the model (SyncBN) is returned, with its message in err.
 * `after_layer`, if not NULL, is called after each layer's backward with the
 * number of leading gradient floats now final (for bucketed all-reduce).
 * loss_sum and correct NULL (a GPU, not a regression): the sums stay on the
 * device (mr_loss_compute_queued), nothing waits between forward and
 * backward, and mr_model_take_sums hands them over. */
mr_status mr_model_train_batch(mr_model *m, const int32_t *labels, int batch, float norm,
                               double *loss_sum, double *correct,
                               void (*after_layer)(void *ctx, int64_t ready), void *ctx,
                               mr_error *err);

/* Inference on m->input: adds loss sum and correct count (regression: the absolute errors'
 * sum, as mr_model_train_batch's), and, when
 * in_top_k is not NULL and [net] top_k > 0, the rows whose label is among
 * the top_k largest outputs (loss.h). The loss is not weighted by [net]
 * class_weight (Keras weights the training data only). */
mr_status mr_model_eval_batch(mr_model *m, const int32_t *labels, int batch, double *loss_sum,
                              double *correct, int64_t *in_top_k, mr_error *err);

/* The model's answers for the rows of the last forward pass: each row's
 * predicted class (the largest output) into pred (batch), and, when probs
 * is not NULL, its class probabilities into probs (batch, classes): the
 * softmax of the logits where the softmax is fused with the loss, else the
 * outputs themselves; multi-label binary_crossentropy: probs (batch, k), each output's sigmoid
 * probability. pred and probs are host memory. */
mr_status mr_model_predictions(const mr_model *m, int batch, int32_t *pred, float *probs,
                               mr_error *err);

/* Zeroes gradients (and the extra floats). */
mr_status mr_model_zero_grads(mr_model *m, mr_error *err);

/* *penalty = the L2 penalties of the kernels with [dense]/[conv2d]
 * kernel_l2 > 0 (Keras kernel_regularizer=L2: l2 * sum(kernel^2)), at the
 * weights as they are; 0 without any. What Keras adds to the reported
 * training and evaluation losses. */
mr_status mr_model_l2_penalty(const mr_model *m, double *penalty, mr_error *err);

/* One optimizer update of all parameters with learning rate lr; t is
 * 1-based. The kernels' L2 gradients (kernel_l2) are added to the
 * gradients first, then with clipnorm or global_clipnorm the gradients are
 * scaled in place (mr_optimizer_clip_norm), as Keras orders them. bad (or NULL): whether a gradient
 * was NaN or Inf, read by the update itself, which is applied all the same (mr_optimizer_step). */
mr_status mr_model_apply_update(mr_model *m, float lr, int64_t t, int *bad, mr_error *err);

/* *any = 1 if the gradients (n_params floats) hold a NaN or an infinity,
 * else 0: one read of m->grads on the device (mr_optimizer_nonfinite), the
 * only pass over memory the step's on_nan check adds. */
mr_status mr_model_grads_nonfinite(mr_model *m, int *any, mr_error *err);

/* mr_model_grads_nonfinite queued on a GPU, no host wait: *flag (host)
 * reads 1.0 or 0.0 once the host has next waited for the device (the
 * next read, mr_model_read_extra); MR_ERR_UNSUPPORTED on the CPU. */
mr_status mr_model_grads_nonfinite_begin(mr_model *m, const double **flag, mr_error *err);

/* The same for the weights, trainable (m->params) and not (m->state):
 * before a checkpoint is written. */
mr_status mr_model_params_nonfinite(mr_model *m, int *any, mr_error *err);

/* The failure path of on_nan: the first layer in backward order (the last
 * layer first) whose gradients hold a NaN or an infinity, as its index in
 * m->layers, or -1 if none does. Reads the gradients to the host, one
 * weight at a time. */
mr_status mr_model_first_nonfinite_layer(const mr_model *m, int *layer, mr_error *err);

/* The `grads_extra` floats after the gradients (metrics that ride along in
 * the all-reduce): n <= grads_extra of them from or to host memory v. The
 * write is queued (no wait for the device): the model's host staging holds
 * them until the next read through it (mr_model_read_extra), so nothing may
 * write through that staging in between. */
/* 1 if m's device queues the step's loss sums and the check for NaN and
 * Inf (a GPU: mr_loss_compute_queued, mr_model_grads_nonfinite_begin) and
 * the loss has no host-only sum (not a regression), else 0 (the CPU). */
int mr_model_queues_sums(const mr_model *m);

/* Queued: the first 3 extra floats = the device's loss sum and correct
 * count since the last take, as floats, and 1.0 if the loss sum is NaN or
 * +-Inf (mr_loss_take_sums), after whatever mr_model_write_extra queued. */
mr_status mr_model_take_sums(mr_model *m, mr_error *err);

mr_status mr_model_write_extra(mr_model *m, const float *v, size_t n, mr_error *err);
mr_status mr_model_read_extra(const mr_model *m, float *v, size_t n, mr_error *err);

/* n floats of the model's device memory p (n <= m->host_floats unless the
 * context's memory is host memory) for the host to read: *host is p's host
 * view, or the staging buffer after a copy (valid until the next call). */
mr_status mr_model_read(const mr_model *m, const mr_dfloat *p, size_t n, const float **host,
                        mr_error *err);
/* Host memory in which to write n floats for p: p's host view, or the
 * staging buffer; mr_model_write then puts them into p (no copy for a view). */
float *mr_model_host_for(const mr_model *m, mr_dfloat *p);
mr_status mr_model_write(const mr_model *m, mr_dfloat *p, const float *host, size_t n,
                         mr_error *err);

/* Keras's Normalization.adapt (normalization.c): the mean and variance
 * of each channel (the input's last axis) over rows [0, count) of ds as
 * the model's input (ds's scale and standardisation), through the
 * [rescaling] layers before it, into the state of every [normalization]
 * without .cfg statistics; *adapted says how many. Double sums in row
 * order: every process with the same data gets the same bits. */
struct mr_dataset;
mr_status mr_model_adapt(mr_model *m, const struct mr_dataset *ds, int64_t count, int *adapted,
                         mr_error *err);

/* Keras model.summary(): layers, output shapes, parameter counts, totals. */
void mr_model_summary(const mr_model *m, const char *name, FILE *out);

/* Formats an output shape as Keras does: "(None, 13, 13, 32)". */
void mr_shape_format(mr_shape s, char *buf, size_t n);

#endif
