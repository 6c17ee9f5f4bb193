/* kernels.h: the compute of models/ for each device kind.
 *
 * One table per device kind lists every layer kind's kernels, the loss,
 * the optimizer update and the making of a synthetic batch (the
 * per-element math they share is runtime/elementwise.h). Each backend
 * fills one in its own folder (backends/cpu/kernels_cpu.c,
 * backends/cuda/kernels_cuda.c) and hangs it on its context's ops
 * (runtime/backend.h, ops->kernels); the layers, the loss and the
 * optimizer take the table of their context (mr_kernels_for), so model.c
 * and the strategy hold no device code and no #ifdef. */
#ifndef MR_KERNELS_H
#define MR_KERNELS_H

#include "runtime/hd.h"
#include "models/layer.h"
#include "models/loss.h"
#include "models/optimizer.h"

MR_C_BEGIN

/* A batch made on the device itself (--synthetic on a GPU: no copy of the
 * examples from the host, as tf_cnn_benchmarks makes its synthetic images
 * on the GPU). */
typedef struct mr_input_kernels {
    /* x (count, row) = scale x the bytes of synthetic examples rows[0..count)
     * (device memory; example i's value j is mr_synthetic_byte(k0, k1,
     * i x row + j), runtime/rng.h): the floats mr_dataset_fill makes of
     * mr_dataset_synthetic's examples, bit for bit. On be's compute queue. */
    mr_status (*synthetic)(mr_backend *be, mr_dfloat *x, const int64_t *rows, int count,
                           int64_t row, uint32_t k0, uint32_t k1, float scale, mr_error *err);
} mr_input_kernels;

typedef struct mr_kernels {
    const char *device; /* "cpu", "gpu": the kind whose table this is */
    /* by layer kind: MR_LAYER_KIND_COUNT entries, NULL for MR_LAYER_INPUT
     * (a backend's table checks its size with a static assertion) */
    const mr_layer_kernels *const *layer;
    const mr_loss_kernels *loss;
    const mr_optimizer_kernels *optimizer;
    const mr_input_kernels *input;
} mr_kernels;

/* The kernels of be's device kind. */
static inline const mr_kernels *mr_kernels_for(const mr_backend *be) {
    return be->ops->kernels;
}

MR_C_END

#endif
