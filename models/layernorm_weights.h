/* layernorm_weights.h: where [layernorm]'s gamma and beta are among its
 * weights, for its kernels on every device (layernorm_cpu.c,
 * layernorm_cuda.cu). layernorm.c declares gamma first when scale = 1,
 * then beta when center = 1, so beta is w[0] without gamma. */
#ifndef MR_LAYERNORM_WEIGHTS_H
#define MR_LAYERNORM_WEIGHTS_H

#include "models/layer.h"

/* gamma (C), or NULL where [layernorm] scale = 0 */
static inline const mr_weight *mr_layernorm_gamma(const mr_layer *l) {
    return l->cfg->scale ? &l->w[0] : NULL;
}

/* beta (C), or NULL where [layernorm] center = 0 */
static inline const mr_weight *mr_layernorm_beta(const mr_layer *l) {
    return l->cfg->center ? &l->w[l->cfg->scale ? 1 : 0] : NULL;
}

#endif
