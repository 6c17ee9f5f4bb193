/* gradcheck.c: see gradcheck.h. */
#include "tests/gradcheck.h"

#include <check.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "runtime/dmem_impl.h"
#include "tests/testutil.h"

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
    c.center = c.scale = 1;
    c.units = 3;
    c.filters = 2;
    c.depth_multiplier = 1;
    c.dilation[0] = c.dilation[1] = 1;
    c.max_value = -1.0f; /* [relu]: no maximum (Keras's None) */
    c.axis = -1;
    if (kind == MR_LAYER_SOFTMAX) c.activation = MR_ACTIVATION_SOFTMAX;
    return c;
}

mr_status gc_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    return mr_layer_setup(l, tu_cpu_backend(), max_batch, file, err);
}

mr_status gc_init(mr_layer *l, uint64_t seed) {
    return mr_layer_init(l, seed, NULL, NULL);
}

mr_status gc_forward(mr_layer *l, mr_exec_ctx *run, int batch, const float *x, float *y) {
    return mr_layer_forward(l, run, batch, mr_dfloat_cof(x), mr_dfloat_of(y));
}

mr_status gc_backward(mr_layer *l, mr_exec_ctx *run, int batch, const float *x, const float *y,
                      float *dy, float *dx) {
    return mr_layer_backward(l, run, batch, mr_dfloat_cof(x), mr_dfloat_cof(y), mr_dfloat_of(dy),
                             mr_dfloat_of(dx));
}

void gc_weight(mr_layer *l, int i, float *data, float *grad) {
    l->w[i].data = mr_dfloat_of(data);
    l->w[i].grad = mr_dfloat_of(grad);
}

mr_dfloat *gc_dev(float *p) {
    return mr_dfloat_of(p);
}

/* The CPU kernels on host arrays: CPU device memory is host memory. */
static double loss_of(mr_layer *l, mr_exec_ctx *run, int batch, const float *x, float *y,
                      const float *r, int64_t ny) {
    ck_assert_int_eq(mr_layer_forward(l, run, batch, mr_dfloat_cof(x), mr_dfloat_of(y)), MR_OK);
    double s = 0.0;
    for (int64_t i = 0; i < ny; i++)
        s += (double)r[i] * (double)y[i];
    return s;
}

/* Central difference of L in one element v. Where the one-sided slopes
 * disagree the element sits on a kink (ReLU at 0, a max tie) and the central
 * difference means nothing: it then returns the analytic value (not
 * compared) and counts the element as skipped. */
static double numeric(mr_layer *l, mr_exec_ctx *run, int batch, const float *x, float *y,
                      const float *r, int64_t ny, float *v, double l0, float analytic,
                      gc_layer_result *res) {
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
    mr_status st = mr_layer_setup(&l, tu_cpu_backend(), batch, "test.cfg", err);
    if (st != MR_OK) {
        mr_layer_destroy(&l);
        return st;
    }
    int64_t nx = batch * mr_shape_size(l.in), ny = batch * mr_shape_size(l.out);
    float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
    float *r = malloc(sizeof(float) * ny), *dy = malloc(sizeof(float) * ny);
    float *dx = malloc(sizeof(float) * nx);
    double *num = malloc(sizeof(double) * (nx > 4096 ? nx : 4096));
    float *scratch = calloc(l.scratch_floats + 1, sizeof(float));
    mr_rng_uniform(seed, 100, 0, 0, -1.0f, 1.0f, x, nx);
    mr_rng_uniform(seed, 100, 1, 0, -1.0f, 1.0f, r, ny);
    float *data[MR_MAX_WEIGHTS], *grad[MR_MAX_WEIGHTS];
    for (int i = 0; i < l.n_weights; i++) {
        mr_weight *w = &l.w[i];
        data[i] = malloc(sizeof(float) * w->size);
        grad[i] = w->trainable ? calloc(w->size, sizeof(float)) : NULL;
        w->data = mr_dfloat_of(data[i]);
        w->grad = grad[i] ? mr_dfloat_of(grad[i]) : NULL;
    }
    ck_assert_int_eq(mr_layer_init(&l, seed, NULL, NULL), MR_OK);
    /* random weights rather than the init (biases would be zero) */
    for (int i = 0; i < l.n_weights; i++) {
        mr_weight *w = &l.w[i];
        if (!w->trainable) continue;
        mr_rng_uniform(seed, 101, (uint32_t)i, 0, -1.0f, 1.0f, data[i], w->size);
        if (strcmp(w->name, "gamma") == 0)
            for (int64_t j = 0; j < w->size; j++)
                data[i][j] = 1.0f + 0.5f * data[i][j];
    }
    mr_exec_ctx run = {.be = tu_cpu_backend(),
                       .training = 1,
                       .seed = seed,
                       .step = 3,
                       .sample_base = 5,
                       .scratch = mr_dfloat_of(scratch)};
    /* analytic */
    ck_assert_int_eq(mr_layer_forward(&l, &run, batch, mr_dfloat_cof(x), mr_dfloat_of(y)), MR_OK);
    memcpy(dy, r, sizeof(float) * ny);
    ck_assert_int_eq(mr_layer_backward(&l, &run, batch, mr_dfloat_cof(x), mr_dfloat_cof(y),
                                       mr_dfloat_of(dy), mr_dfloat_of(dx)),
                     MR_OK);
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
            nw[i] = numeric(&l, &run, batch, x, y, r, ny, &data[wi][i], l0, grad[wi][i], res);
        double e = group_err(nw, grad[wi], w->size);
        if (e > res->err_weights) res->err_weights = e;
        res->checked += w->size;
        free(nw);
    }
    for (int i = 0; i < l.n_weights; i++) {
        free(data[i]);
        free(grad[i]);
    }
    mr_layer_destroy(&l);
    free(x), free(y), free(r), free(dy), free(dx), free(num), free(scratch);
    return MR_OK;
}
