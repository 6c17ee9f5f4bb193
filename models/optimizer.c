/* optimizer.c: the optimizer's settings, what is computed once per step,
 * and the dispatch to the device's update loops (see optimizer.h). */
#include "models/optimizer.h"

#include <math.h>

#include "models/kernels.h"

mr_optimizer mr_optimizer_from_config(const mr_net_cfg *net) {
    mr_optimizer o = {.kind = net->optimizer,
                      .momentum = net->momentum,
                      .nesterov = net->nesterov,
                      .beta1 = net->beta1,
                      .beta2 = net->beta2,
                      .epsilon = net->epsilon,
                      .rho = net->rho,
                      .weight_decay = net->weight_decay,
                      .clipnorm = net->clipnorm,
                      .global_clipnorm = net->global_clipnorm,
                      .clipvalue = net->clipvalue};
    return o;
}

static int is_adam(const mr_optimizer *opt) {
    return opt->kind == MR_OPTIMIZER_ADAM || opt->kind == MR_OPTIMIZER_ADAMW;
}

int mr_optimizer_slot_count(const mr_optimizer *opt) {
    if (is_adam(opt)) return 2;
    if (opt->kind == MR_OPTIMIZER_RMSPROP) return opt->momentum > 0.0f ? 2 : 1;
    return opt->momentum != 0.0f ? 1 : 0;
}

const char *mr_optimizer_slot_name(const mr_optimizer *opt, int s) {
    if (is_adam(opt)) return s == 0 ? "momentum" : "velocity";
    if (opt->kind == MR_OPTIMIZER_RMSPROP) return s == 0 ? "velocity" : "momentum";
    return "momentum";
}

int mr_optimizer_slots_by_slot(const mr_optimizer *opt) {
    return opt->kind == MR_OPTIMIZER_RMSPROP;
}

const char *mr_optimizer_keras_class(const mr_optimizer *opt) {
    static const char *const names[] = {
        [MR_OPTIMIZER_SGD] = "SGD",
        [MR_OPTIMIZER_ADAM] = "Adam",
        [MR_OPTIMIZER_RMSPROP] = "RMSprop",
        [MR_OPTIMIZER_ADAMW] = "AdamW",
    };
    return names[opt->kind];
}

const char *mr_optimizer_keras_name(const mr_optimizer *opt) {
    return mr_optimizer_name(opt->kind); /* Keras's lower-case names are ours */
}

mr_status mr_optimizer_clip_norm(mr_backend *be, mr_dfloat *g, size_t n, float max_norm,
                                 mr_error *err) {
    const mr_kernels *kern = mr_kernels_for(be);
    if (kern == NULL || kern->optimizer->sumsq == NULL)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "no %s gradient norm kernel in this build",
                            be->ops->name);
    double sum;
    MR_CHECK(kern->optimizer->sumsq(be, g, n, &sum, err));
    const double norm = sqrt(sum);
    if (isfinite(norm) && norm <= (double)max_norm) return MR_OK;
    /* Keras: g * clip / max(norm, clip); NaN or Inf: NaN everywhere */
    const float scale = isfinite(norm) ? (float)((double)max_norm / norm) : NAN;
    return mr_backend_scale(be, g, n, scale, err);
}

mr_status mr_optimizer_l2(mr_backend *be, const mr_dfloat *w, mr_dfloat *g, size_t n, float l2,
                          double *penalty, mr_error *err) {
    const mr_kernels *kern = mr_kernels_for(be);
    if (kern == NULL || kern->optimizer->sumsq == NULL || kern->optimizer->axpy == NULL)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "no %s L2 kernels in this build",
                            be->ops->name);
    if (penalty != NULL) {
        double sum;
        MR_CHECK(kern->optimizer->sumsq(be, w, n, &sum, err));
        *penalty = (double)l2 * sum;
    }
    /* d(l2 w^2)/dw = 2 l2 w (2 l2 is exact in float) */
    return g != NULL ? kern->optimizer->axpy(be, g, w, n, 2.0f * l2, err) : MR_OK;
}

mr_step_rates mr_optimizer_rates(const mr_optimizer *opt, float lr, int64_t t) {
    mr_step_rates r = {.lr = lr, .alpha = lr};
    if (is_adam(opt)) {
        /* bias correction folded into the step size once (Keras 3) */
        double b1t = pow((double)opt->beta1, (double)t), b2t = pow((double)opt->beta2, (double)t);
        r.alpha = (float)((double)lr * sqrt(1.0 - b2t) / (1.0 - b1t));
    }
    return r;
}

mr_status mr_optimizer_step(const mr_optimizer *opt, mr_backend *be, float lr, int64_t t,
                            mr_dfloat *w, const mr_dfloat *g, mr_dfloat *slot0, mr_dfloat *slot1,
                            size_t n, int *bad, mr_error *err) {
    const mr_kernels *kern = mr_kernels_for(be);
    if (kern == NULL)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "no %s optimizer kernels in this build",
                            be->ops->name);
    const mr_step_rates r = mr_optimizer_rates(opt, lr, t);
    const int slots = mr_optimizer_slot_count(opt);
    if (slots < 1) slot0 = NULL;
    if (slots < 2) slot1 = NULL;
    if (is_adam(opt)) return kern->optimizer->adam(be, opt, &r, w, g, slot0, slot1, n, bad, err);
    if (opt->kind == MR_OPTIMIZER_RMSPROP)
        return kern->optimizer->rmsprop(be, opt, &r, w, g, slot0, slot1, n, bad, err);
    return kern->optimizer->sgd(be, opt, &r, w, g, slot0, slot1, n, bad, err);
}

mr_status mr_optimizer_nonfinite_begin(mr_backend *be, const mr_dfloat *x, size_t n,
                                       const double **flag, mr_error *err) {
    const mr_kernels *kern = mr_kernels_for(be);
    *flag = NULL;
    if (kern == NULL || kern->optimizer->nonfinite_begin == NULL)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "no queued %s check for NaN and Inf",
                            be->ops->name);
    return kern->optimizer->nonfinite_begin(be, x, n, flag, err);
}

mr_status mr_optimizer_nonfinite(mr_backend *be, const mr_dfloat *x, size_t n, int *any,
                                 mr_error *err) {
    const mr_kernels *kern = mr_kernels_for(be);
    *any = 0;
    if (kern == NULL)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "no %s optimizer kernels in this build",
                            be->ops->name);
    return kern->optimizer->nonfinite(be, x, n, any, err);
}
