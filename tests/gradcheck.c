/* gradcheck.c: see gradcheck.h. */
#include "gradcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/rng.h"
#include "testutil.h"

#define GC_STEP 1e-3 /* finite-difference step */
#define GC_KINK 2e-2 /* one-sided slopes further apart than this: a kink */

mr_layer_cfg gc_layer_cfg(mr_layer_kind kind) {
    mr_layer_cfg c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.line = 1;
    c.use_bias = 1;
    c.size[0] = c.size[1] = 2;
    c.stride[0] = c.stride[1] = 1;
    c.momentum = 0.99f;
    c.epsilon = 1e-3f;
    c.units = 3;
    c.filters = 2;
    return c;
}

static double loss_of(mr_layer *l, mr_run *run, int batch, const float *x, float *y, const float *r,
                      int64_t ny) {
    l->ops->forward(l, run, batch, x, y);
    double s = 0.0;
    for (int64_t i = 0; i < ny; i++)
        s += (double)r[i] * (double)y[i];
    return s;
}

/* Central difference of L in one element v. Where the one-sided slopes
 * disagree the element sits on a kink (ReLU at 0, a max tie) and the central
 * difference means nothing: it then returns the analytic value (not
 * compared) and counts the element as skipped. */
static double numeric(mr_layer *l, mr_run *run, int batch, const float *x, float *y, const float *r,
                      int64_t ny, float *v, double l0, float analytic, gc_layer_result *res) {
    const double h = GC_STEP;
    float keep = *v;
    *v = keep + (float)h;
    double hp = (double)*v - keep;
    double lp = loss_of(l, run, batch, x, y, r, ny);
    *v = keep - (float)h;
    double hm = keep - (double)*v;
    double lm = loss_of(l, run, batch, x, y, r, ny);
    *v = keep;
    double fwd = (lp - l0) / hp, bwd = (l0 - lm) / hm;
    double central = (lp - lm) / (hp + hm);
    if (fabs(fwd - bwd) > GC_KINK * (1.0 + fabs(central))) {
        res->skipped++;
        return analytic;
    }
    return central;
}

static double group_err(const double *num, const float *ana, int64_t n) {
    double maxa = 1.0, maxd = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(ana[i]) > maxa) maxa = fabs(ana[i]);
        double d = fabs(num[i] - (double)ana[i]);
        if (d > maxd) maxd = d;
    }
    return maxd / maxa;
}

mr_status gc_check_layer(const mr_layer_cfg *cfg, mr_shape in, int batch, uint64_t seed,
                         gc_layer_result *res, mr_error *err) {
    memset(res, 0, sizeof *res);
    mr_layer l;
    memset(&l, 0, sizeof l);
    l.ops = mr_layer_ops_for(cfg->kind);
    l.cfg = cfg;
    l.index = 1;
    l.in = in;
    snprintf(l.name, sizeof l.name, "%s", mr_layer_kind_name(cfg->kind));
    MR_CHECK(l.ops->setup(&l, batch, "test.cfg", err));
    int64_t nx = batch * mr_shape_size(l.in), ny = batch * mr_shape_size(l.out);
    float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
    float *r = malloc(sizeof(float) * ny), *dy = malloc(sizeof(float) * ny);
    float *dx = malloc(sizeof(float) * nx);
    double *num = malloc(sizeof(double) * (nx > 4096 ? nx : 4096));
    float *scratch = calloc(l.scratch_floats + 1, sizeof(float));
    mr_rng_uniform(seed, 100, 0, 0, -1.0f, 1.0f, x, nx);
    mr_rng_uniform(seed, 100, 1, 0, -1.0f, 1.0f, r, ny);
    for (int i = 0; i < l.n_weights; i++) {
        mr_weight *w = &l.w[i];
        w->data = malloc(sizeof(float) * w->size);
        w->grad = w->trainable ? calloc(w->size, sizeof(float)) : NULL;
        if (l.ops->init) continue;
    }
    if (l.ops->init) l.ops->init(&l, seed);
    /* random weights rather than the init (biases would be zero) */
    for (int i = 0; i < l.n_weights; i++) {
        mr_weight *w = &l.w[i];
        if (!w->trainable) continue;
        mr_rng_uniform(seed, 101, (uint32_t)i, 0, -1.0f, 1.0f, w->data, w->size);
        if (strcmp(w->name, "gamma") == 0)
            for (int64_t j = 0; j < w->size; j++)
                w->data[j] = 1.0f + 0.5f * w->data[j];
    }
    mr_run run = {.be = tu_cpu_backend(),
                  .training = 1,
                  .seed = seed,
                  .step = 3,
                  .sample_base = 5,
                  .scratch = scratch};
    /* analytic */
    l.ops->forward(&l, &run, batch, x, y);
    memcpy(dy, r, sizeof(float) * ny);
    l.ops->backward(&l, &run, batch, x, y, dy, dx);
    const double l0 = loss_of(&l, &run, batch, x, y, r, ny);
    /* numeric dL/dx */
    for (int64_t i = 0; i < nx; i++)
        num[i] = numeric(&l, &run, batch, x, y, r, ny, &x[i], l0, dx[i], res);
    res->err_input = group_err(num, dx, nx);
    res->checked += nx;
    for (int wi = 0; wi < l.n_weights; wi++) {
        mr_weight *w = &l.w[wi];
        if (!w->trainable) continue;
        double *nw = malloc(sizeof(double) * w->size);
        for (int64_t i = 0; i < w->size; i++)
            nw[i] = numeric(&l, &run, batch, x, y, r, ny, &w->data[i], l0, w->grad[i], res);
        double e = group_err(nw, w->grad, w->size);
        if (e > res->err_weights) res->err_weights = e;
        res->checked += w->size;
        free(nw);
    }
    for (int i = 0; i < l.n_weights; i++) {
        free(l.w[i].data);
        free(l.w[i].grad);
    }
    if (l.ops->destroy) l.ops->destroy(&l);
    free(x), free(y), free(r), free(dy), free(dx), free(num), free(scratch);
    return MR_OK;
}
