/* strategyutil.c: see strategyutil.h. */
#include "tests/strategyutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "runtime/dmem_impl.h"

const char *su_mlp_text = "[net]\nbatch=4\nlr_scaling=none\nseed=5\n%s\n"
                          "[data]\ntrain_images=a\ntrain_labels=b\n"
                          "[input]\nshape=6,6,1\n[flatten]\n"
                          "[dense]\nunits=16\nactivation=relu\n"
                          "[dense]\nunits=4\nactivation=softmax\n";

const char *su_cnn_text = "[net]\nbatch=4\nlr_scaling=none\nseed=5\n%s\n"
                          "[data]\ntrain_images=a\ntrain_labels=b\n"
                          "[input]\nshape=6,6,1\n"
                          "[conv2d]\nfilters=4\nsize=3\nactivation=relu\n"
                          "[maxpool]\nsize=2\n[flatten]\n"
                          "[dense]\nunits=4\nactivation=softmax\n";

const char *su_bn_text =
    "[net]\nbatch=4\nlr_scaling=none\nseed=5\n%s\n"
    "[data]\ntrain_images=a\ntrain_labels=b\n"
    "[input]\nshape=6,6,1\n"
    "[conv2d]\nfilters=4\nsize=3\n[batchnorm]\nsync=1\n[activation]\nactivation=relu\n"
    "[dropout]\nrate=0.3\n[flatten]\n"
    "[dense]\nunits=4\nactivation=softmax\n";

const char *su_res_text =
    "[net]\nbatch=4\nlr_scaling=none\nseed=5\n%s\n"
    "[data]\ntrain_images=a\ntrain_labels=b\n"
    "[input]\nshape=6,6,1\n"
    "[conv2d]\nname=stem\nfilters=4\nsize=3\npadding=same\nactivation=relu\n"
    "[conv2d]\nfilters=4\nsize=3\npadding=same\nuse_bias=0\n[batchnorm]\nsync=1\n"
    "[add]\nfrom=stem\n[activation]\nactivation=relu\nname=block\n"
    "[zeropad]\npadding=1\n[conv2d]\nname=down\nfilters=4\nsize=3\nstride=2\nactivation=relu\n"
    "[conv2d]\ninput=block\nfilters=4\nsize=1\nstride=2\n[add]\nfrom=down\n"
    "[globalavgpool]\n[dense]\nunits=4\nactivation=softmax\n";

const char *su_sgd = "optimizer=sgd\nlearning_rate=0.1\nmomentum=0.9";
const char *su_adam = "optimizer=adam\nlearning_rate=0.01";

void su_make_data(mr_dataset *ds, int64_t n) {
    memset(ds, 0, sizeof *ds);
    ds->scale = 1.0f;
    ds->x.dtype = MR_DTYPE_F32;
    ds->x.ndim = 4;
    ds->x.dims[0] = n, ds->x.dims[1] = 6, ds->x.dims[2] = 6, ds->x.dims[3] = 1;
    float *x = malloc(sizeof(float) * (size_t)(n * 36));
    mr_rng_uniform(77, 9, 0, 0, 0.0f, 1.0f, x, n * 36);
    ds->x.data = x;
    ds->y = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        float a = x[i * 36 + 7] + x[i * 36 + 8], b = x[i * 36 + 27] + x[i * 36 + 28];
        ds->y[i] = (a > 1.0f) * 2 + (b > 1.0f);
    }
    ds->n = n;
    ds->row = 36;
}

/* n floats of replica m's device memory p into out, through the model (a
 * copy from a GPU in pieces its staging holds, weights in Keras's order;
 * a view on the CPU), from the test's thread. */
static void to_host(mr_model *m, const mr_dfloat *p, int64_t n, float *out) {
    mr_error err = {0};
    if (n == 0) return;
    ck_assert_msg(mr_backend_enter(m->be, &err) == MR_OK, "%s", err.msg);
    const int64_t piece = m->be->host_memory ? n : (int64_t)m->host_floats;
    for (int64_t i = 0; i < n; i += piece) {
        const int64_t k = n - i < piece ? n - i : piece;
        const float *host;
        ck_assert_msg(mr_model_read(m, mr_dfloat_at_c(p, i), (size_t)k, &host, &err) == MR_OK, "%s",
                      err.msg);
        memcpy(out + i, host, sizeof(float) * (size_t)k);
    }
}

/* Replica r's parameters followed by its state, on the host (malloc'd). */
static float *replica_weights(mr_strategy *s, int r, int64_t *np) {
    mr_model *m = mr_strategy_replica(s, r);
    *np = m->n_params + m->n_state;
    float *out = malloc(sizeof(float) * (size_t)(*np ? *np : 1));
    ck_assert_ptr_nonnull(out);
    to_host(m, m->params, m->n_params, out);
    to_host(m, m->state, m->n_state, out + m->n_params);
    return out;
}

static void keep_logs(void *user, const mr_epoch_logs *logs) {
    *(mr_epoch_logs *)user = *logs;
}

float *su_train(const su_run *o, int64_t *np, mr_epoch_logs *logs, mr_status *status,
                mr_error *err) {
    char text[2048];
    snprintf(text, sizeof text, o->text, o->net_extra ? o->net_extra : "");
    mr_config cfg;
    mr_error perr = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &perr) == MR_OK, "%s", perr.msg);
    cfg.net.batch = o->batch;
    mr_dataset ds;
    su_make_data(&ds, o->n);
    if (o->synthetic) {
        mr_dataset_free(&ds);
        const int dims[3] = {6, 6, 1};
        ck_assert_msg(mr_dataset_synthetic(&ds, o->n, 3, dims, 4, 9, &perr) == MR_OK, "%s",
                      perr.msg);
        ds.scale = 1.0f / 255.0f;
        if (o->synthetic == 2) ds.synthetic = 0;
    }
    if (o->binary)
        for (int64_t i = 0; i < ds.n; i++)
            ds.y[i] &= 1;
    if (o->multi_hot == 3) {
        int32_t *y = malloc(sizeof(int32_t) * (size_t)(ds.n * 3));
        ck_assert_ptr_nonnull(y);
        for (int64_t i = 0; i < ds.n; i++) {
            y[i * 3] = ds.y[i] & 1, y[i * 3 + 1] = ds.y[i] >> 1;
            y[i * 3 + 2] = ((const float *)ds.x.data)[i * 36 + 14] > 0.5f;
        }
        free(ds.y);
        ds.y = y;
        ds.label_width = 3;
    }
    mr_strategy_opts so = {0};
    snprintf(so.devices.kind, sizeof so.devices.kind, "%s", o->kind ? o->kind : "cpu");
    so.devices.count = o->replicas;
    for (int r = 0; r < o->replicas; r++)
        so.devices.ordinals[r] = r;
    so.job = o->job;
    so.seed = 5;
    so.bucket_floats = o->bucket_floats;
    so.check_sync = o->check_sync;
    mr_fault fault = {.perturb_step = o->perturb, .staged = o->staged};
    so.fault = &fault;
    mr_strategy *s = NULL;
    float *out = NULL;
    mr_epoch_logs got = {0};
    mr_fit_callbacks cb = {.user = &got, .on_epoch_end = keep_logs};
    const int64_t n_train = o->n - o->n_val;
    *status = mr_strategy_create(&cfg, &so, n_train, &s, err);
    if (*status == MR_OK) {
        *status = mr_strategy_fit(s, &ds, n_train, n_train, o->n_val, o->epochs ? o->epochs : 1,
                                  NULL, NULL, &cb, err);
        if (*status == MR_OK) {
            out = replica_weights(s, 0, np);
            for (int r = 1; r < o->replicas; r++) { /* every replica holds the same bits */
                int64_t nq;
                float *q = replica_weights(s, r, &nq);
                ck_assert_int_eq(nq, *np);
                ck_assert_msg(memcmp(q, out, sizeof(float) * (size_t)nq) == 0,
                              "replica %d differs from replica 0", r);
                free(q);
            }
        }
    }
    if (logs != NULL) *logs = got;
    mr_strategy_destroy(s);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
    return out;
}

float *su_train_ok(const su_run *o, int64_t *np, mr_epoch_logs *logs) {
    mr_status st;
    mr_error err = {0};
    float *p = su_train(o, np, logs, &st, &err);
    ck_assert_msg(st == MR_OK, "%s", err.msg);
    return p;
}
