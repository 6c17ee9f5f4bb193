/* kernels_cpu.c: the table of the CPU kernels (models/kernels.h). */
#include "backends/cpu/cpu_impl.h"

/* Each layer kind's kernels, by mr_layer_kind (models/config.h): a new
 * kind that has no line here fails the static assertion below (when it is
 * the last kind) and tests/test_kinds.c (wherever it is). */
static const mr_layer_kernels *const cpu_layers[] = {
    [MR_LAYER_INPUT] = NULL, /* the model's input: no computation */
    [MR_LAYER_FLATTEN] = &mr_flatten_cpu,
    [MR_LAYER_DENSE] = &mr_dense_cpu,
    [MR_LAYER_ACTIVATION] = &mr_activation_cpu,
    [MR_LAYER_CONV2D] = &mr_conv2d_cpu,
    [MR_LAYER_MAXPOOL] = &mr_pool_cpu,
    [MR_LAYER_AVGPOOL] = &mr_pool_cpu,
    [MR_LAYER_DROPOUT] = &mr_dropout_cpu,
    [MR_LAYER_BATCHNORM] = &mr_batchnorm_cpu,
    [MR_LAYER_ADD] = &mr_add_cpu,
    [MR_LAYER_GLOBALAVGPOOL] = &mr_globalavgpool_cpu,
    [MR_LAYER_ZEROPAD] = &mr_zeropad_cpu,
    [MR_LAYER_LAYERNORM] = &mr_layernorm_cpu,
    [MR_LAYER_RESCALING] = &mr_rescaling_cpu,
    [MR_LAYER_NORMALIZATION] = &mr_normalization_cpu,
    [MR_LAYER_CONCATENATE] = &mr_concatenate_cpu,
    [MR_LAYER_DEPTHWISE] = &mr_depthwise_cpu,
    [MR_LAYER_RELU] = &mr_relu_cpu,
    [MR_LAYER_SOFTMAX] = &mr_activation_cpu, /* an activation of softmax (softmax.c) */
    [MR_LAYER_GLOBALMAXPOOL] = &mr_globalmaxpool_cpu,
    [MR_LAYER_RESHAPE] = &mr_flatten_cpu, /* a copy under a new shape, as Flatten */
    [MR_LAYER_SPATIALDROPOUT] = &mr_spatialdropout_cpu,
};
_Static_assert(sizeof cpu_layers / sizeof cpu_layers[0] == MR_LAYER_KIND_COUNT,
               "cpu_layers: one entry per mr_layer_kind");

const mr_kernels mr_cpu_kernels = {
    .device = "cpu",
    .layer = cpu_layers,
    .loss = &mr_loss_cpu,
    .optimizer = &mr_optimizer_cpu,
    .input = &mr_input_cpu,
};
