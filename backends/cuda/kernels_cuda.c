/* kernels_cuda.c: the table of the CUDA kernels (models/kernels.h); each entry
 * is defined in its .cu file (kernels_cuda.h). C, for the designated
 * array initialisers. */
#include "backends/cuda/kernels_cuda.h"

/* Each layer kind's kernels, by mr_layer_kind (models/config.h): a new
 * kind that has no line here fails the static assertion below (when it is
 * the last kind) and tests/test_kinds.c (wherever it is). */
static const mr_layer_kernels *const cuda_layers[] = {
    [MR_LAYER_INPUT] = NULL, /* the model's input: no computation */
    [MR_LAYER_FLATTEN] = &mr_flatten_cuda,
    [MR_LAYER_DENSE] = &mr_dense_cuda,
    [MR_LAYER_ACTIVATION] = &mr_activation_cuda,
    [MR_LAYER_CONV2D] = &mr_conv2d_cuda,
    [MR_LAYER_MAXPOOL] = &mr_pool_cuda,
    [MR_LAYER_AVGPOOL] = &mr_pool_cuda,
    [MR_LAYER_DROPOUT] = &mr_dropout_cuda,
    [MR_LAYER_BATCHNORM] = &mr_batchnorm_cuda,
    [MR_LAYER_ADD] = &mr_add_cuda,
    [MR_LAYER_GLOBALAVGPOOL] = &mr_globalavgpool_cuda,
    [MR_LAYER_ZEROPAD] = &mr_zeropad_cuda,
    [MR_LAYER_LAYERNORM] = &mr_layernorm_cuda,
    [MR_LAYER_RESCALING] = &mr_rescaling_cuda,
    [MR_LAYER_NORMALIZATION] = &mr_normalization_cuda,
    [MR_LAYER_CONCATENATE] = &mr_concatenate_cuda,
    [MR_LAYER_DEPTHWISE] = &mr_depthwise_cuda,
    [MR_LAYER_RELU] = &mr_relu_cuda,
    [MR_LAYER_SOFTMAX] = &mr_activation_cuda, /* an activation of softmax (softmax.c) */
    [MR_LAYER_GLOBALMAXPOOL] = &mr_globalmaxpool_cuda,
    [MR_LAYER_RESHAPE] = &mr_flatten_cuda, /* a copy under a new shape, as Flatten */
    [MR_LAYER_SPATIALDROPOUT] = &mr_spatialdropout_cuda,
};
_Static_assert(sizeof cuda_layers / sizeof cuda_layers[0] == MR_LAYER_KIND_COUNT,
               "cuda_layers: one entry per mr_layer_kind");

const mr_kernels mr_cuda_kernels = {
    .device = "gpu",
    .layer = cuda_layers,
    .loss = &mr_loss_cuda,
    .optimizer = &mr_optimizer_cuda,
    .input = &mr_input_cuda,
};
