/* kernels_cpu.c: the table of the CPU kernels (models/kernels.h). */
#include "backends/cpu/cpu_impl.h"

const mr_kernels mr_cpu_kernels = {
    .device = "cpu",
    .layer =
        {
            [MR_LAYER_INPUT] = NULL,
            [MR_LAYER_FLATTEN] = &mr_flatten_cpu,
            [MR_LAYER_DENSE] = &mr_dense_cpu,
            [MR_LAYER_ACTIVATION] = &mr_activation_cpu,
            [MR_LAYER_CONV2D] = &mr_conv2d_cpu,
            [MR_LAYER_MAXPOOL] = &mr_pool_cpu,
            [MR_LAYER_AVGPOOL] = &mr_pool_cpu,
            [MR_LAYER_DROPOUT] = &mr_dropout_cpu,
            [MR_LAYER_BATCHNORM] = &mr_batchnorm_cpu,
            [MR_LAYER_ADD] = &mr_add_cpu,
            [MR_LAYER_CONCATENATE] = &mr_concatenate_cpu,
            [MR_LAYER_GLOBALAVGPOOL] = &mr_globalavgpool_cpu,
            [MR_LAYER_ZEROPAD] = &mr_zeropad_cpu,
            [MR_LAYER_LAYERNORM] = &mr_layernorm_cpu,
            [MR_LAYER_RESCALING] = &mr_rescaling_cpu,
            [MR_LAYER_NORMALIZATION] = &mr_normalization_cpu,
        },
    .loss = &mr_loss_cpu,
    .optimizer = &mr_optimizer_cpu,
    .input = &mr_input_cpu,
};
