/* kernels_cuda.c: the table of the CUDA kernels (models/kernels.h); each entry
 * is defined in its .cu file (kernels_cuda.h). C, for the designated
 * array initialisers. */
#include "backends/cuda/kernels_cuda.h"

/* Each layer kind's kernels, by kind: mr_<kernels>_cuda of each line of
 * models/layer_kinds.def. */
static const mr_layer_kernels *const cuda_layers[] = {
    [MR_LAYER_INPUT] = NULL, /* the model's input: no computation */
#define MR_LAYER_KIND(ENUM, section, kernels) [MR_LAYER_##ENUM] = &mr_##kernels##_cuda,
#include "models/layer_kinds.def"
#undef MR_LAYER_KIND
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
