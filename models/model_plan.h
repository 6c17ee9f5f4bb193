/* model_plan.h: what a model is, from its .cfg alone: no device, no data.
 *
 * A plan is a pure function of the configuration: the input's shape, each
 * layer's kind (its ops), sources, Keras name, input and output shapes and
 * declared weights, where each weight lives in a replica's flat buffers
 * (trainable ones in reverse layer order in params, the others in state;
 * model.h says why), what the loss takes from the last layer (logits or
 * probabilities), and the figures the model sizes its buffers from. Every
 * .cfg mistake a model can find is found here, with its .cfg line.
 *
 * A model (model.h, mr_model_init_from_plan) is a plan made on one backend
 * context: the layers' kernels of that device kind and their state, the
 * buffers and the weights' views, and what depends on the device: the
 * fusion of a ReLU into the layer before it (mr_layer_kernels.fuses_relu)
 * and the training pass size (mr_model.pass_rows). The launchers ask a plan
 * what a model takes and gives (input size, classes, label width) without
 * building one. */
#ifndef MR_MODEL_PLAN_H
#define MR_MODEL_PLAN_H

#include <stdint.h>

#include "models/config.h"
#include "models/layer.h"

typedef struct mr_model_plan {
    const mr_config *cfg;      /* the configuration (the caller's: it must outlive the plan) */
    mr_shape in_shape;         /* one example */
    int64_t in_size, out_size; /* floats per example in / out */
    int n_layers;              /* layers after [input] */
    /* layers[0] is the first after [input], as the layers of a model are,
     * set up by their ops alone (mr_layer_ops.setup): ops, cfg, index, name,
     * in, in2 (a merge's), out, w[] with their offsets (data and grad NULL),
     * logits_out; no kernels (kern, be and priv NULL). scratch_floats is
     * what the ops ask for ONE row; the model scales it by its max_batch. */
    mr_layer layers[MR_MAX_LAYERS];
    /* a graph (cfg->graph): layer i takes the outputs of layers src[i][0]
     * and, for a merge, src[i][1] (-1: the model's input; src[i][1] -1
     * otherwise); all 0 in a chain (model.h, graph) */
    int graph;
    int src[MR_MAX_LAYERS][2];
    /* where each layer's trainable weights start in params, in floats */
    int64_t param_offset[MR_MAX_LAYERS];
    int64_t n_params;       /* trainable floats */
    int64_t n_state;        /* non-trainable floats */
    int64_t largest_weight; /* floats of the largest weight, trainable or not */
    /* 1: the model outputs logits and the loss applies the softmax (or a
     * binary_crossentropy's sigmoid); the last layer's logits_out then says
     * whether it skips its own softmax or sigmoid */
    int fused_softmax;
    /* the classes the model predicts (binary_crossentropy's one output: 2)
     * and the labels per example (k for multi-label binary_crossentropy's
     * k > 1 outputs and for regression, else 1): mr_model_classes, mr_model_label_width */
    int classes, label_width;
    /* 1: mse, mae or huber on float targets (a last layer other than a softmax): labels
     * (n, k) floats, label_width k, no accuracy (mr_model_regression) */
    int regression;
    /* for sizing the activation buffers and training passes: floats per
     * example of the widest layer output (or of the input, if wider), and
     * whether a layer needs the whole batch in one pass (whole_batch) */
    int64_t widest;
    int whole_batch;
} mr_model_plan;

/* Plans the model of cfg into *p: shape inference, names, the loss rules
 * and the weight layout. A mistake is an MR_ERR_CONFIG naming the .cfg line
 * ("FILE:LINE: ..."), the message mr_model_init gives. p holds no memory of
 * its own (nothing to free); it points into cfg. */
mr_status mr_model_plan_make(mr_model_plan *p, const mr_config *cfg, mr_error *err);

#endif
