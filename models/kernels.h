/* kernels.h: the compute of models/ for each device kind.
 *
 * One table per device kind lists every layer kind's kernels, the loss and
 * the optimizer update (the per-element math they share is
 * runtime/elementwise.h). The layers, the loss and the optimizer pick the
 * table of their backend context's kind (mr_kernels_for), so model.c and
 * the strategy hold no device code and no #ifdef. The CPU table is
 * kernels_cpu.c over the models/<kind>_cpu.c files; the CUDA one comes
 * from kernels_cuda.cu in a CUDA build, and from kernels_nocuda.c (none)
 * otherwise: meson picks the file, as collectives/ picks job_mpi.c or
 * job_single.c. */
#ifndef MR_KERNELS_H
#define MR_KERNELS_H

#include "../runtime/hd.h"
#include "layer.h"
#include "loss.h"
#include "optimizer.h"

MR_C_BEGIN

typedef struct mr_kernels {
    const char *device; /* "cpu", "cuda" */
    /* by layer kind; NULL for MR_LAYER_INPUT */
    const mr_layer_kernels *layer[MR_LAYER_KIND_COUNT];
    const mr_loss_kernels *loss;
    const mr_optimizer_kernels *optimizer;
} mr_kernels;

/* The kernels of a device kind, or NULL where this build has none. */
const mr_kernels *mr_kernels_for(mr_device_kind kind);

/* kernels_cpu.c */
const mr_kernels *mr_kernels_cpu(void);
/* kernels_cuda.cu, or kernels_nocuda.c: NULL */
const mr_kernels *mr_kernels_cuda(void);

MR_C_END

#endif
