/* kernels_cuda.c: the table of the CUDA kernels (models/kernels.h); each entry
 * is defined in its .cu file (kernels_cuda.h). C, for the designated
 * array initialisers. */
#include "backends/cuda/kernels_cuda.h"

const mr_kernels mr_cuda_kernels = {
    .device = "gpu",
    .layer =
        {
            [MR_LAYER_INPUT] = NULL,
            [MR_LAYER_FLATTEN] = &mr_flatten_cuda,
            [MR_LAYER_DENSE] = &mr_dense_cuda,
            [MR_LAYER_ACTIVATION] = &mr_activation_cuda,
            [MR_LAYER_CONV2D] = &mr_conv2d_cuda,
            [MR_LAYER_MAXPOOL] = &mr_pool_cuda,
            [MR_LAYER_AVGPOOL] = &mr_pool_cuda,
            [MR_LAYER_DROPOUT] = &mr_dropout_cuda,
            [MR_LAYER_BATCHNORM] = &mr_batchnorm_cuda,
            [MR_LAYER_ADD] = &mr_add_cuda,
            [MR_LAYER_CONCATENATE] = &mr_concatenate_cuda,
            [MR_LAYER_GLOBALAVGPOOL] = &mr_globalavgpool_cuda,
            [MR_LAYER_ZEROPAD] = &mr_zeropad_cuda,
            [MR_LAYER_LAYERNORM] = &mr_layernorm_cuda,
            [MR_LAYER_RESCALING] = &mr_rescaling_cuda,
            [MR_LAYER_NORMALIZATION] = &mr_normalization_cuda,
        },
    .loss = &mr_loss_cuda,
    .optimizer = &mr_optimizer_cuda,
    .input = &mr_input_cuda,
};
