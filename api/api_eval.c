/* api_eval.c: mirrored_model_evaluate and mirrored_model_predict
 * (include/mirrored.h): the caller's arrays or the .cfg's test set,
 * preprocessed as training was, through the replicas that hold the
 * weights (or ones built on the devices asked for, n_train 0 as
 * mirrored_eval builds them). */
#include <string.h>

#include "api/api_internal.h"
#include "session/session_data.h"

/* The .cfg's test set (the caller gave no arrays). */
static mr_status cfg_test_set(const mirrored_model *m, mr_dataset *ds, mr_error *err) {
    const mr_data_cfg *d = &m->cfg.data;
    if (d->test_images[0] == '\0')
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: names no test set ([data] test_images): give x and y", m->name);
    const mr_model_plan *p = &m->plan;
    return mr_session_load_set(&m->cfg, "test", d->test_images, d->test_labels, p->in_size,
                               p->classes, p->label_width, p->regression, ds, err);
}

/* The call's arguments, as api_agree_call compares them. */
static uint32_t eval_args(const char *devices, int64_t batch_size, const mirrored_array *x,
                          const mirrored_array *y) {
    if (!api_many_processes()) return 0;
    const uint32_t c = api_crc(api_crc_str(0, devices), &batch_size, sizeof batch_size);
    return api_crc_array(api_crc_array(c, x), y);
}

static mr_status evaluate(mirrored_model *m, const char *devices, int64_t batch_size,
                          const mirrored_array *x, const mirrored_array *y, mr_dataset *ds,
                          double *loss, double *metric, mr_error *err) {
    mr_status st = x != NULL ? api_dataset_from_arrays(m, x, y, "evaluate", ds, err)
                             : cfg_test_set(m, ds, err);
    MR_CHECK(api_agree_call("evaluate", st, eval_args(devices, batch_size, x, y), err));
    MR_CHECK(api_apply_stats(m, ds, err));
    MR_CHECK(api_eval_strategy(m, devices, batch_size, err));
    return mr_strategy_evaluate(m->reps.s, ds, 0, ds->n, loss, metric, err);
}

MIRRORED_API mirrored_status mirrored_model_evaluate(mirrored_model *m, const char *devices,
                                                     int64_t batch_size, const mirrored_array *x,
                                                     const mirrored_array *y, double *loss,
                                                     double *metric, mirrored_error *err) {
    if (m == NULL || loss == NULL || metric == NULL)
        return api_usage(err, "mirrored_model_evaluate: model, loss or metric is NULL");
    if ((x == NULL) != (y == NULL))
        return api_usage(err, "mirrored_model_evaluate: give x with y (both NULL: the test set)");
    if (batch_size < 0)
        return api_usage(err, "evaluate: batch_size=%lld: 0 (the model's) or more",
                         (long long)batch_size);
    if (api_enter(m, "evaluate", err) != MIRRORED_OK) return MIRRORED_ERR_USAGE;
    mr_error e = {0};
    mr_dataset ds = {0};
    mr_status st = evaluate(m, devices, batch_size, x, y, &ds, loss, metric, &e);
    api_dataset_free(&ds, x);
    st = api_agree(st, &e);
    api_leave(m);
    return st == MR_OK ? api_ok(err) : api_fail(err, &e);
}

/* where predict's rows go: out (n, outputs); the batch's probabilities
 * come as (rows, classes), classes 2 for one sigmoid output (1 - p, p) */
typedef struct predict_out {
    float *out;
    int outputs, classes;
} predict_out;

static void put_rows(void *user, int64_t row, int n, const float *probs) {
    const predict_out *p = user;
    float *to = p->out + row * p->outputs;
    if (p->classes == p->outputs) {
        memcpy(to, probs, sizeof(float) * (size_t)n * (size_t)p->outputs);
        return;
    }
    for (int i = 0; i < n; i++) /* one sigmoid output: p */
        to[i] = probs[2 * i + 1];
}

static mr_status predict(mirrored_model *m, const char *devices, int64_t batch_size,
                         const mirrored_array *x, float *out, int64_t count, mr_dataset *ds,
                         mr_error *err) {
    mr_status st = api_dataset_from_arrays(m, x, NULL, "predict", ds, err);
    const int64_t need = ds->n * m->plan.out_size;
    if (st == MR_OK && count < need)
        st = mr_error_set(
            err, MR_ERR_USAGE, "predict: out has room for %lld floats, (%lld, %lld) = %lld needed",
            (long long)count, (long long)ds->n, (long long)m->plan.out_size, (long long)need);
    MR_CHECK(api_agree_call("predict", st, eval_args(devices, batch_size, x, NULL), err));
    /* this process's rows are written over zeros: api_share_rows */
    memset(out, 0, sizeof(float) * (size_t)need);
    MR_CHECK(api_apply_stats(m, ds, err));
    MR_CHECK(api_eval_strategy(m, devices, batch_size, err));
    predict_out p = {.out = out,
                     .outputs = (int)m->plan.out_size,
                     .classes = mr_model_classes(mr_strategy_replica(m->reps.s, 0))};
    mr_eval_detail detail = {.classes = p.classes, .on_probs = put_rows, .user = &p};
    double loss, metric;
    return mr_strategy_evaluate_detail(m->reps.s, ds, 0, ds->n, &loss, &metric, &detail, err);
}

MIRRORED_API mirrored_status mirrored_model_predict(mirrored_model *m, const char *devices,
                                                    int64_t batch_size, const mirrored_array *x,
                                                    float *out, int64_t count,
                                                    mirrored_error *err) {
    if (m == NULL || x == NULL || out == NULL)
        return api_usage(err, "mirrored_model_predict: model, x or out is NULL");
    if (batch_size < 0)
        return api_usage(err, "predict: batch_size=%lld: 0 (the model's) or more",
                         (long long)batch_size);
    if (api_enter(m, "predict", err) != MIRRORED_OK) return MIRRORED_ERR_USAGE;
    mr_error e = {0};
    mr_dataset ds = {0};
    mr_status st = predict(m, devices, batch_size, x, out, count, &ds, &e);
    const int64_t rows = ds.n;
    api_dataset_free(&ds, x);
    /* every process's rows on every process, once all have theirs */
    st = api_agree(st, &e);
    if (st == MR_OK) st = api_share_rows(out, rows * m->plan.out_size, &e);
    api_leave(m);
    return st == MR_OK ? api_ok(err) : api_fail(err, &e);
}
