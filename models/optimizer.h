/* optimizer.h: SGD (momentum, Nesterov), Adam, AdamW and RMSprop over one
 * flat buffer, with Keras 3's decoupled weight decay and gradient clipping.
 *
 * Parameters, gradients and each optimizer slot are single contiguous
 * buffers of the same layout (model.h), so an update is one fused pass,
 * run by the kernels of the buffers' device (optimizer_cpu.c; kernels.h).
 * The per-element formulas are in runtime/elementwise.h (shared with CUDA);
 * what is computed once per step (Adam's bias correction, a gradient norm)
 * is here. The order within a step is Keras's (base_optimizer.apply): clip
 * the gradients, decay the weights, update. */
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
    float momentum;              /* sgd, rmsprop */
    int nesterov;                /* sgd */
    float beta1, beta2, epsilon; /* adam, adamw; epsilon also rmsprop */
    float rho;                   /* rmsprop */
    float weight_decay;          /* decoupled: w -= w * weight_decay * lr first; 0 none */
    float clipnorm;              /* each weight's gradient to this L2 norm; 0 none */
    float global_clipnorm;       /* all gradients together to this L2 norm; 0 none */
    float clipvalue;             /* each gradient element to [-clipvalue, clipvalue]; 0 none */
} mr_optimizer;

/* The scalars of one update, computed once per step (mr_optimizer_step). */
typedef struct mr_step_rates {
    float lr;    /* the step's learning rate (sgd, rmsprop, the weight decay) */
    float alpha; /* adam: lr with the bias correction folded in */
} mr_step_rates;

/* The scalars of update t (1-based) at rate lr: what mr_optimizer_step
 * hands the update kernels (and a replayed graph reads: mr_step_scalars). */
mr_step_rates mr_optimizer_rates(const mr_optimizer *opt, float lr, int64_t t);

/* The optimizer settings of a [net] section. */
mr_optimizer mr_optimizer_from_config(const mr_net_cfg *net);

/* Slot buffers the optimizer needs: sgd with momentum 1 (velocity), plain
 * sgd 0, adam and adamw 2 (m, v), rmsprop 1 (mean square) + 1 with
 * momentum. */
int mr_optimizer_slot_count(const mr_optimizer *opt);

/* Keras's name of slot s ("momentum", "velocity"), as its variables are
 * named (`<weight>_<slot>`). */
const char *mr_optimizer_slot_name(const mr_optimizer *opt, int s);

/* 1 where Keras creates the slots slot by slot (all weights' first slot,
 * then all their second: RMSprop), 0 weight by weight (Adam's m and v of
 * each weight together): the order of the variables in its files. */
int mr_optimizer_slots_by_slot(const mr_optimizer *opt);

/* The Keras class name ("Adam", "AdamW", "SGD", "RMSprop") and the name
 * its instances get ("adam", ...), the group of its variables in an .h5. */
const char *mr_optimizer_keras_class(const mr_optimizer *opt);
const char *mr_optimizer_keras_name(const mr_optimizer *opt);

/* Scales the n gradients g (be's memory) so that their L2 norm is at most
 * max_norm (Keras clip_by_norm), in place; a NaN or Inf norm makes them all
 * NaN, which the step's check then finds. The norm is summed in double in
 * a fixed order, so every replica gets the same bits. */
mr_status mr_optimizer_clip_norm(mr_backend *be, mr_dfloat *g, size_t n, float max_norm,
                                 mr_error *err);

/* Keras's L2 regularizer on n weights w (be's memory), with gradients g:
 * *penalty (host, may be NULL) = l2 * sum(w^2), the term it adds to the
 * loss, and g += 2 l2 w, its gradient (g NULL: the penalty alone). */
mr_status mr_optimizer_l2(mr_backend *be, const mr_dfloat *w, mr_dfloat *g, size_t n, float l2,
                          double *penalty, mr_error *err);

/* One update of n parameters w with gradients g at learning rate lr, on
 * be's device (w, g and the slots are its memory). t is the 1-based update
 * count (Adam's bias correction). slot0/slot1 as mr_optimizer_slot_count
 * says (NULL where unused). The buffers must not overlap. With `bad`
 * (else NULL), *bad = 1 if a gradient was NaN or +-Inf, else 0, from the
 * update's own read of g (no extra pass): the update is applied all the
 * same, so a caller that finds 1 must not use or save the weights
 * (on_nan = stop); to drop such an update, check first
 * (mr_optimizer_nonfinite). The norm clipping (clipnorm, global_clipnorm)
 * is the caller's, before: it needs the weights' boundaries
 * (mr_model_apply_update); clipvalue and the weight decay are done here. */
mr_status mr_optimizer_step(const mr_optimizer *opt, mr_backend *be, float lr, int64_t t,
                            mr_dfloat *w, const mr_dfloat *g, mr_dfloat *slot0, mr_dfloat *slot1,
                            size_t n, int *bad, mr_error *err);

/* *any = 1 if one of the n floats of x (be's memory) is NaN or +-Inf, else
 * 0: one read of x on be's device (the kernels' nonfinite). */
mr_status mr_optimizer_nonfinite(mr_backend *be, const mr_dfloat *x, size_t n, int *any,
                                 mr_error *err);

/* mr_optimizer_nonfinite queued (the kernels' nonfinite_begin): *flag
 * (host) reads 1.0 if one of the n floats of x is NaN or +-Inf, else 0.0,
 * once the host has next waited for be's device; MR_ERR_UNSUPPORTED where
 * the device has no queue (the CPU). */
mr_status mr_optimizer_nonfinite_begin(mr_backend *be, const mr_dfloat *x, size_t n,
                                       const double **flag, mr_error *err);

#define MR_SUMSQ_PARTS 256

/* One update's loop over n elements on a device (elementwise.h's math):
 * each gradient clipped to opt->clipvalue, each weight decayed, then
 * updated. slot0/slot1 as mr_optimizer_slot_count says (NULL where
 * unused); bad (host, or NULL) as mr_optimizer_step says. */
typedef mr_status (*mr_update_fn)(mr_backend *be, const mr_optimizer *opt, const mr_step_rates *r,
                                  mr_dfloat *w, const mr_dfloat *g, mr_dfloat *slot0,
                                  mr_dfloat *slot1, size_t n, int *bad, mr_error *err);

/* A device kind's update loops. */
typedef struct mr_optimizer_kernels {
    mr_update_fn adam;    /* adam and adamw: mr_adam_update with r->alpha */
    mr_update_fn sgd;     /* mr_sgd_update; momentum 0: w -= lr * g, slot0 NULL */
    mr_update_fn rmsprop; /* mr_rmsprop_update; slot1 NULL without momentum */
    /* *any (host) = 1 if one of the n floats of x is NaN or +-Inf
     * (mr_nonfinite), else 0; reads x only. The step runs it on the reduced
     * gradients before the update (on_nan), a checkpoint on the weights. */
    mr_status (*nonfinite)(mr_backend *be, const mr_dfloat *x, size_t n, int *any, mr_error *err);
    /* The same check queued on the device, without a host wait: *host
     * points at the flag (1.0 or 0.0), valid once the host has next waited
     * for the device (a read of its memory) and until the next check. May
     * be NULL (the CPU: nothing to wait for). */
    mr_status (*nonfinite_begin)(mr_backend *be, const mr_dfloat *x, size_t n, const double **host,
                                 mr_error *err);
    /* *sum (host) = the sum of the squares of x's n floats, in double: in
     * MR_SUMSQ_PARTS partial sums (part t: elements t, t + PARTS, ...),
     * then those in order; every device sums in that order, so every
     * replica, CPU or GPU, gets the same bits. */
    mr_status (*sumsq)(mr_backend *be, const mr_dfloat *x, size_t n, double *sum, mr_error *err);
    /* y += a * x over n floats (an L2 penalty's gradient 2 l2 w into the
     * gradients). */
    mr_status (*axpy)(mr_backend *be, mr_dfloat *y, const mr_dfloat *x, size_t n, float a,
                      mr_error *err);
} mr_optimizer_kernels;

MR_C_END

#endif
