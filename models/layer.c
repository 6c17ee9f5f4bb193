/* layer.c: what all layers share: the kind -> ops table, the wrappers
 * that set up, run and free a layer on its device's kernels (kernels.h),
 * weight declaration and initialisation (made on the host, copied to the
 * device unless its memory is host memory). Device-independent. */
#include "models/layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "models/kernels.h"

/* The layer kinds' definitions, by kind: one per line of
 * models/layer_kinds.def, mr_<section>_ops of the kind's own file. */
static const mr_layer_ops *const ops_by_kind[] = {
    [MR_LAYER_INPUT] = NULL, /* the model's input: no computation */
#define MR_LAYER_KIND(ENUM, section, kernels) [MR_LAYER_##ENUM] = &mr_##section##_ops,
#include "models/layer_kinds.def"
#undef MR_LAYER_KIND
};
_Static_assert(sizeof ops_by_kind / sizeof ops_by_kind[0] == MR_LAYER_KIND_COUNT,
               "ops_by_kind: one entry per mr_layer_kind");

const mr_layer_ops *mr_layer_ops_for(mr_layer_kind kind) {
    return kind >= 0 && kind < MR_LAYER_KIND_COUNT ? ops_by_kind[kind] : NULL;
}

mr_status mr_layer_setup(mr_layer *l, mr_backend *be, int max_batch, const char *file,
                         mr_error *err) {
    l->be = be;
    l->kern = NULL;
    MR_CHECK(l->ops->setup(l, max_batch, file, err));
    return mr_layer_setup_kernels(l, be, max_batch, file, err);
}

mr_status mr_layer_setup_kernels(mr_layer *l, mr_backend *be, int max_batch, const char *file,
                                 mr_error *err) {
    l->be = be;
    l->kern = NULL;
    const mr_kernels *k = mr_kernels_for(be);
    if (k == NULL || k->layer[l->cfg->kind] == NULL) {
        char dev[32];
        mr_backend_format(be, dev, sizeof dev);
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "%s:%d: [%s]: no kernels for %s in this build",
                            file, l->cfg->line, mr_layer_kind_name(l->cfg->kind), dev);
    }
    l->kern = k->layer[l->cfg->kind];
    return l->kern->setup ? l->kern->setup(l, be, max_batch, err) : MR_OK;
}

mr_status mr_layer_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                           mr_dfloat *y) {
    return l->kern->forward(l, run, batch, x, y);
}

mr_status mr_layer_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                            const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    return l->kern->backward(l, run, batch, x, y, dy, dx);
}

void mr_layer_destroy(mr_layer *l) {
    if (l->kern != NULL && l->kern->destroy != NULL) l->kern->destroy(l, l->be);
    l->kern = NULL;
}

mr_status mr_layer_init(mr_layer *l, uint64_t seed, float *staging, mr_error *err) {
    for (int i = 0; i < l->n_weights; i++) {
        mr_weight *w = &l->w[i];
        float *host = mr_backend_host_view(l->be, w->data);
        if (host == NULL) host = staging; /* made here, then copied */
        if (l->ops->init != NULL)
            l->ops->init(l, i, seed, host);
        else
            memset(host, 0, sizeof(float) * (size_t)w->size);
        if (mr_layer_device_order(l, i, 1, NULL, NULL)) { /* made in Keras's order */
            float *keras = malloc(sizeof(float) * (size_t)w->size);
            if (keras == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
            memcpy(keras, host, sizeof(float) * (size_t)w->size);
            mr_layer_device_order(l, i, 1, keras, host);
            free(keras);
        }
        MR_CHECK(mr_backend_write(l->be, w->data, host, (size_t)w->size, err));
    }
    return MR_OK;
}

void mr_layer_declare_weight(mr_layer *l, const char *name, int trainable, int rank, int d0, int d1,
                             int d2, int d3) {
    MR_ASSERT(l->n_weights < MR_MAX_WEIGHTS && rank >= 0 && rank <= 4); /* 0: a scalar */
    mr_weight *w = &l->w[l->n_weights++];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->trainable = trainable;
    w->rank = rank;
    int d[4] = {d0, d1, d2, d3};
    w->size = 1;
    for (int i = 0; i < rank; i++) {
        w->dims[i] = d[i];
        w->size *= d[i];
    }
}

void mr_layer_init_kernel(const mr_layer *l, int weight, uint64_t seed, int fan_in, int fan_out,
                          float *out) {
    const mr_weight *w = &l->w[weight];
    const mr_initializer init = l->cfg->kernel_initializer;
    const int he = init == MR_INIT_HE_UNIFORM || init == MR_INIT_HE_NORMAL;
    /* Keras VarianceScaling: scale 1 over fan_avg (glorot), 2 over fan_in (he) */
    const float var = he ? 2.0f / (float)fan_in : 2.0f / (float)(fan_in + fan_out);
    const uint32_t a = (uint32_t)l->index, b = (uint32_t)weight;
    if (init == MR_INIT_GLOROT_NORMAL || init == MR_INIT_HE_NORMAL) {
        mr_rng_truncated_normal(seed, MR_RNG_STREAM_INIT, a, b, sqrtf(var) / 0.87962566103423978f,
                                out, w->size);
    } else {
        /* 6 / fan: the very expression the default always used (bits kept) */
        const float limit = sqrtf(6.0f / (float)(he ? fan_in : fan_in + fan_out));
        mr_rng_uniform(seed, MR_RNG_STREAM_INIT, a, b, -limit, limit, out, w->size);
    }
}

int mr_layer_device_order(const mr_layer *l, int w, int to_device, const float *src, float *dst) {
    if (l->kern == NULL || l->kern->device_order == NULL) return 0;
    return l->kern->device_order(l, w, to_device, src, dst);
}

int mr_layer_describe(const mr_layer *l, char *buf, size_t n) {
    if (n > 0) buf[0] = '\0';
    if (l->kern == NULL || l->kern->describe == NULL) return -1;
    return l->kern->describe(l, buf, n) ? 1 : 0;
}
