/* api_data.c: the caller's arrays (include/mirrored.h, mirrored_array) as
 * the runtime's datasets: inputs x (n, ...) uint8 or float32 read in place
 * (the dataset's x points at the caller's memory, never freed here), labels
 * copied as the model takes them (class ids, multi-hot rows, float targets
 * as their bit patterns), everything checked against the model with one
 * line naming the array. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "strategies/checkpoint.h"
#include "session/session_checkpoints.h"

static const char *dtype_name(mirrored_dtype t) {
    switch (t) {
    case MIRRORED_UINT8:
        return "uint8";
    case MIRRORED_INT32:
        return "int32";
    case MIRRORED_FLOAT32:
        return "float32";
    }
    return "an unknown dtype";
}

/* dtype known, 1..MIRRORED_MAX_DIMS dims, none negative, data present */
static mr_status check_array(const mirrored_array *a, const char *what, mr_error *err) {
    if (a->dtype != MIRRORED_UINT8 && a->dtype != MIRRORED_INT32 && a->dtype != MIRRORED_FLOAT32)
        return mr_error_set(err, MR_ERR_USAGE, "%s: dtype %d is not uint8, int32 or float32", what,
                            (int)a->dtype);
    if (a->ndim < 1 || a->ndim > MIRRORED_MAX_DIMS)
        return mr_error_set(err, MR_ERR_USAGE, "%s: %d dims (1..%d)", what, a->ndim,
                            MIRRORED_MAX_DIMS);
    int64_t count = 1;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] < 0)
            return mr_error_set(err, MR_ERR_USAGE, "%s: dim %d is %lld", what, i,
                                (long long)a->shape[i]);
        count *= a->shape[i];
    }
    if (a->shape[0] < 1) return mr_error_set(err, MR_ERR_USAGE, "%s: no examples (n = 0)", what);
    if (a->data == NULL && count > 0)
        return mr_error_set(err, MR_ERR_USAGE, "%s: data is NULL", what);
    return MR_OK;
}

/* The labels' shape: (n) or (n, 1) for width 1, else (n, width). */
static mr_status check_label_shape(const mirrored_array *y, int64_t n, int width, const char *what,
                                   mr_error *err) {
    if (y->shape[0] != n)
        return mr_error_set(err, MR_ERR_USAGE, "%s: %lld labels for %lld examples", what,
                            (long long)y->shape[0], (long long)n);
    const int64_t k = y->ndim == 1 ? 1 : y->shape[1];
    if (y->ndim > 2 || (y->ndim == 1 && width != 1) || k != width)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: labels of shape (%lld%s%lld%s): the model takes %d per example",
                            what, (long long)n, y->ndim > 1 ? ", " : "",
                            y->ndim > 1 ? (long long)k : 0LL, y->ndim > 2 ? ", ..." : "", width);
    return MR_OK;
}

/* label i as a number, whatever y's dtype */
static double label_at(const mirrored_array *y, int64_t i) {
    switch (y->dtype) {
    case MIRRORED_UINT8:
        return ((const uint8_t *)y->data)[i];
    case MIRRORED_INT32:
        return ((const int32_t *)y->data)[i];
    case MIRRORED_FLOAT32:
        return ((const float *)y->data)[i];
    }
    return 0.0;
}

/* y into ds->y (n, width): float targets (regression), 0/1 rows
 * (multi-label), else class ids in [0, classes). */
static mr_status copy_labels(const mr_model_plan *p, const mirrored_array *y, mr_dataset *ds,
                             const char *what, mr_error *err) {
    const int64_t count = ds->n * p->label_width;
    for (int64_t i = 0; i < count; i++) {
        const double v = label_at(y, i);
        if (p->regression) {
            if (y->dtype != MIRRORED_FLOAT32 || !isfinite(v))
                return mr_error_set(err, MR_ERR_DATA,
                                    "%s: the model's loss takes finite float32 targets (%s, "
                                    "value %g at %lld)",
                                    what, dtype_name(y->dtype), v, (long long)i);
            memcpy(&ds->y[i], &((const float *)y->data)[i], sizeof(float));
            continue;
        }
        const int classes = p->label_width > 1 ? 2 : p->classes;
        if (v != floor(v) || v < 0.0 || v >= classes)
            return mr_error_set(err, MR_ERR_DATA,
                                "%s: label %g of example %lld is outside the class range 0..%d "
                                "(the model has %d outputs)",
                                what, v, (long long)(i / p->label_width), classes - 1,
                                p->label_width > 1 ? p->label_width : p->classes);
        ds->y[i] = (int32_t)v;
    }
    return MR_OK;
}

static mr_status labels_of(const mirrored_model *m, const mirrored_array *y, const char *what,
                           mr_dataset *ds, mr_error *err) {
    const mr_model_plan *p = &m->plan;
    ds->y = calloc((size_t)(ds->n * p->label_width), sizeof(int32_t));
    if (ds->y == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory for labels", what);
    if (y == NULL) return MR_OK; /* to predict: zero labels, never scored */
    MR_CHECK(check_array(y, what, err));
    MR_CHECK(check_label_shape(y, ds->n, p->label_width, what, err));
    MR_CHECK(copy_labels(p, y, ds, what, err));
    return mr_dataset_check_labels(ds, p->classes, what, err);
}

mr_status api_dataset_from_arrays(const mirrored_model *m, const mirrored_array *x,
                                  const mirrored_array *y, const char *what, mr_dataset *ds,
                                  mr_error *err) {
    char xname[64], yname[64];
    snprintf(xname, sizeof xname, "%s x", what);
    snprintf(yname, sizeof yname, "%s y", what);
    *ds = (mr_dataset){.scale = 1.0f};
    MR_CHECK(check_array(x, xname, err));
    if (x->dtype != MIRRORED_UINT8 && x->dtype != MIRRORED_FLOAT32)
        return mr_error_set(err, MR_ERR_USAGE, "%s: %s inputs: give uint8 or float32", xname,
                            dtype_name(x->dtype));
    ds->x.dtype = x->dtype == MIRRORED_UINT8 ? MR_DTYPE_U8 : MR_DTYPE_F32;
    ds->x.ndim = x->ndim;
    memcpy(ds->x.dims, x->shape, sizeof ds->x.dims);
    ds->x.data = (void *)x->data; /* the caller's: api_dataset_free leaves it */
    ds->n = x->shape[0];
    ds->row = mr_array_row_size(&ds->x);
    ds->label_width = m->plan.label_width;
    ds->targets = m->plan.regression;
    const mr_layer_cfg *in = &m->cfg.layers[0];
    MR_CHECK(mr_dataset_check_shape(ds, in->shape_rank, in->shape, xname, err));
    MR_CHECK(mr_dataset_check_row(ds, m->plan.in_size, xname, err));
    return labels_of(m, y, yname, ds, err);
}

void api_dataset_free(mr_dataset *ds, const mirrored_array *x) {
    if (x != NULL && ds->x.data == x->data) ds->x.data = NULL;
    mr_dataset_free(ds);
}

mr_status api_apply_stats(const mirrored_model *m, mr_dataset *ds, mr_error *err) {
    if (m->source == MR_SESSION_SOURCE_CKPT) return mr_ckpt_apply_preprocessing(&m->ck, ds, err);
    ds->scale = m->cfg.data.scale;
    if (!m->cfg.data.standardize) return MR_OK;
    if (!m->have_stats)
        return mr_error_set(err, MR_ERR_UNSUPPORTED,
                            "%s: [data] standardize needs the training statistics: fit the "
                            "model first",
                            m->name);
    if (m->stats_row != ds->row)
        return mr_error_set(err, MR_ERR_DATA, "%s: %lld values per example, statistics of %lld",
                            m->name, (long long)ds->row, (long long)m->stats_row);
    const size_t bytes = sizeof(float) * (size_t)ds->row;
    free(ds->mean), free(ds->inv_std);
    ds->mean = malloc(bytes), ds->inv_std = malloc(bytes);
    if (ds->mean == NULL || ds->inv_std == NULL)
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory for the statistics");
    memcpy(ds->mean, m->mean, bytes);
    memcpy(ds->inv_std, m->inv_std, bytes);
    return MR_OK;
}

mr_status api_keep_stats(mirrored_model *m, const mr_dataset *ds, mr_error *err) {
    if (ds->mean == NULL || m->source == MR_SESSION_SOURCE_CKPT) return MR_OK;
    const size_t bytes = sizeof(float) * (size_t)ds->row;
    float *mean = malloc(bytes), *inv_std = malloc(bytes);
    if (mean == NULL || inv_std == NULL) {
        free(mean), free(inv_std);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory for the statistics");
    }
    memcpy(mean, ds->mean, bytes);
    memcpy(inv_std, ds->inv_std, bytes);
    free(m->mean), free(m->inv_std);
    m->mean = mean, m->inv_std = inv_std;
    m->stats_row = ds->row;
    m->have_stats = 1;
    return MR_OK;
}
