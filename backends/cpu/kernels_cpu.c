/* kernels_cpu.c: the table of the CPU kernels (models/kernels.h). */
#include "backends/cpu/cpu_impl.h"

/* Each layer kind's kernels, by kind: mr_<kernels>_cpu of each line of
 * models/layer_kinds.def. */
static const mr_layer_kernels *const cpu_layers[] = {
    [MR_LAYER_INPUT] = NULL, /* the model's input: no computation */
#define MR_LAYER_KIND(ENUM, section, kernels) [MR_LAYER_##ENUM] = &mr_##kernels##_cpu,
#include "models/layer_kinds.def"
#undef MR_LAYER_KIND
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
