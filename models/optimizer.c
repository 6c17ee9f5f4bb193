/* optimizer.c: the fused update loops (see optimizer.h). */
#include "optimizer.h"

#include <math.h>

#include "../runtime/elementwise.h"
#include "../runtime/hot.h"

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

MR_HOT void mr_optimizer_step(const mr_optimizer *opt, float lr, int64_t t, float *restrict w,
                              const float *restrict g, float *restrict slot0, float *restrict slot1,
                              size_t n) {
    if (opt->kind == MR_OPTIMIZER_ADAM) {
        /* bias correction folded into the step size once (Keras 3) */
        double b1t = pow((double)opt->beta1, (double)t), b2t = pow((double)opt->beta2, (double)t);
        float alpha = (float)((double)lr * sqrt(1.0 - b2t) / (1.0 - b1t));
        float b1 = opt->beta1, b2 = opt->beta2, eps = opt->epsilon;
        for (size_t i = 0; i < n; i++)
            mr_adam_update(&w[i], g[i], &slot0[i], &slot1[i], alpha, b1, b2, eps);
    } else if (opt->momentum != 0.0f) {
        for (size_t i = 0; i < n; i++)
            mr_sgd_update(&w[i], g[i], &slot0[i], lr, opt->momentum, opt->nesterov);
    } else {
        for (size_t i = 0; i < n; i++)
            w[i] -= lr * g[i];
    }
}
