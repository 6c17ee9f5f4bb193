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
                      .epsilon = net->epsilon};
    return o;
}

int mr_optimizer_slot_count(const mr_optimizer *opt) {
    if (opt->kind == MR_OPTIMIZER_ADAM) return 2;
    return opt->momentum != 0.0f ? 1 : 0;
}

mr_status mr_optimizer_step(const mr_optimizer *opt, mr_backend *be, float lr, int64_t t,
                            mr_dfloat *w, const mr_dfloat *g, mr_dfloat *slot0, mr_dfloat *slot1,
                            size_t n, int *bad, mr_error *err) {
    const mr_kernels *kern = mr_kernels_for(be);
    if (kern == NULL)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "no %s optimizer kernels in this build",
                            be->ops->name);
    if (opt->kind == MR_OPTIMIZER_ADAM) {
        /* bias correction folded into the step size once (Keras 3) */
        double b1t = pow((double)opt->beta1, (double)t), b2t = pow((double)opt->beta2, (double)t);
        float alpha = (float)((double)lr * sqrt(1.0 - b2t) / (1.0 - b1t));
        return kern->optimizer->adam(be, w, g, slot0, slot1, n, alpha, opt->beta1, opt->beta2,
                                     opt->epsilon, bad, err);
    }
    return kern->optimizer->sgd(be, w, g, opt->momentum != 0.0f ? slot0 : NULL, n, lr,
                                opt->momentum, opt->nesterov, bad, err);
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
