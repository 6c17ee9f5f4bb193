/* optimizer.h: SGD (momentum, Nesterov) and Adam over one flat buffer.
 *
 * Parameters, gradients and each optimizer slot are single contiguous
 * buffers of the same layout (model.h), so an update is one fused pass,
 * run by the kernels of the buffers' device (optimizer_cpu.c; kernels.h).
 * The per-element formulas are in runtime/elementwise.h (shared with CUDA);
 * what is computed once per step (Adam's bias correction) is here. */
#ifndef MR_OPTIMIZER_H
#define MR_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/backend.h"
#include "runtime/hd.h"
#include "models/config.h"

MR_C_BEGIN

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

/* One update of n parameters w with gradients g at learning rate lr, on
 * be's device (w, g and the slots are its memory). t is the 1-based update
 * count (Adam's bias correction). slot0/slot1 as mr_optimizer_slot_count
 * says (NULL where unused). The buffers must not overlap. With `bad`
 * (else NULL), *bad = 1 if a gradient was NaN or +-Inf, else 0, from the
 * update's own read of g (no extra pass): the update is applied all the
 * same, so a caller that finds 1 must not use or save the weights
 * (on_nan = stop); to drop such an update, check first
 * (mr_optimizer_nonfinite). */
mr_status mr_optimizer_step(const mr_optimizer *opt, mr_backend *be, float lr, int64_t t,
                            mr_dfloat *w, const mr_dfloat *g, mr_dfloat *slot0, mr_dfloat *slot1,
                            size_t n, int *bad, mr_error *err);

/* *any = 1 if one of the n floats of x (be's memory) is NaN or +-Inf, else
 * 0: one read of x on be's device (the kernels' nonfinite). */
mr_status mr_optimizer_nonfinite(mr_backend *be, const mr_dfloat *x, size_t n, int *any,
                                 mr_error *err);

/* A device kind's update loops over n elements (elementwise.h's math). */
typedef struct mr_optimizer_kernels {
    /* mr_adam_update with the step's alpha (bias correction folded in);
     * bad (host, or NULL) as mr_optimizer_step says */
    mr_status (*adam)(mr_backend *be, mr_dfloat *w, const mr_dfloat *g, mr_dfloat *m, mr_dfloat *v,
                      size_t n, float alpha, float beta1, float beta2, float epsilon, int *bad,
                      mr_error *err);
    /* mr_sgd_update; momentum 0: w -= lr * g and vel is NULL */
    mr_status (*sgd)(mr_backend *be, mr_dfloat *w, const mr_dfloat *g, mr_dfloat *vel, size_t n,
                     float lr, float momentum, int nesterov, int *bad, mr_error *err);
    /* *any (host) = 1 if one of the n floats of x is NaN or +-Inf
     * (mr_nonfinite), else 0; reads x only. The step runs it on the reduced
     * gradients before the update (on_nan), a checkpoint on the weights. */
    mr_status (*nonfinite)(mr_backend *be, const mr_dfloat *x, size_t n, int *any, mr_error *err);
} mr_optimizer_kernels;

MR_C_END

#endif
