/* optimizer.h: SGD (momentum, Nesterov) and Adam over one flat buffer.
 *
 * Parameters, gradients and each optimizer slot are single contiguous
 * buffers of the same layout (model.h), so an update is one fused pass. The
 * per-element formulas are in runtime/elementwise.h (shared with CUDA). */
#ifndef MR_OPTIMIZER_H
#define MR_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct mr_optimizer {
    mr_optimizer_kind kind;
    float momentum;              /* sgd */
    int nesterov;                /* sgd */
    float beta1, beta2, epsilon; /* adam */
} mr_optimizer;

/* The optimizer settings of a [net] section. */
mr_optimizer mr_optimizer_from_config(const mr_net_cfg *net);

/* Slot buffers the optimizer needs: sgd with momentum 1 (velocity), plain
 * sgd 0, adam 2 (m, v). */
int mr_optimizer_slot_count(const mr_optimizer *opt);

/* One update of n parameters w with gradients g at learning rate lr.
 * t is the 1-based update count (Adam's bias correction). slot0/slot1 as
 * mr_optimizer_slot_count says (NULL where unused). The buffers must not
 * overlap (restrict: the loops vectorise). */
void mr_optimizer_step(const mr_optimizer *opt, float lr, int64_t t, float *w, const float *g,
                       float *slot0, float *slot1, size_t n);

#endif
