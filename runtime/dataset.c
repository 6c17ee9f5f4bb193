/* dataset.c: see dataset.h. */
#include "runtime/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/image_folder.h"
#include "runtime/rng.h"
#include "runtime/target_clones.h"

static mr_status to_float(mr_array *a, mr_error *err, const char *path) {
    int64_t n = mr_array_count(a);
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (f == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
    if (a->dtype == MR_DTYPE_I32)
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)((int32_t *)a->data)[i];
    else
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)((int64_t *)a->data)[i];
    free(a->data);
    a->data = f;
    a->dtype = MR_DTYPE_F32;
    return MR_OK;
}

/* Label i of `lab` (any dtype) as a double: exact for every integer a
 * label can be and for every float. */
static double label_value(const mr_array *lab, int64_t i) {
    switch (lab->dtype) {
    case MR_DTYPE_U8:
        return ((const uint8_t *)lab->data)[i];
    case MR_DTYPE_I32:
        return ((const int32_t *)lab->data)[i];
    case MR_DTYPE_I64:
        return (double)((const int64_t *)lab->data)[i];
    case MR_DTYPE_F32:
        return ((const float *)lab->data)[i];
    }
    return -1.0;
}

/* Labels per example: 1 for class ids (a dataset built by hand may leave it 0). */
static int64_t label_width(const mr_dataset *ds) {
    return ds->label_width > 1 ? ds->label_width : 1;
}

mr_status mr_dataset_synthetic(mr_dataset *ds, int64_t n, int rank, const int *dims, int classes,
                               uint64_t seed, mr_error *err) {
    memset(ds, 0, sizeof *ds);
    ds->scale = 1.0f;
    if (n < 1 || rank < 1 || rank > MR_ARRAY_MAX_DIMS - 1 || classes < 1)
        return mr_error_set(err, MR_ERR_USAGE,
                            "synthetic data: %lld examples of rank %d, %d classes", (long long)n,
                            rank, classes);
    ds->x.dtype = MR_DTYPE_U8;
    ds->x.ndim = rank + 1;
    ds->x.dims[0] = n;
    ds->row = 1;
    for (int d = 0; d < rank; d++) {
        ds->x.dims[d + 1] = dims[d];
        ds->row *= dims[d];
    }
    ds->n = n;
    ds->x.data = malloc((size_t)(n * ds->row));
    ds->y = malloc(sizeof(int32_t) * (size_t)n);
    if (ds->x.data == NULL || ds->y == NULL) {
        mr_dataset_free(ds);
        return mr_error_set(err, MR_ERR_NOMEM,
                            "synthetic data: out of memory for %lld examples of %lld values",
                            (long long)n, (long long)ds->row);
    }
    uint32_t key[2], w[4];
    mr_rng_key(seed, MR_RNG_STREAM_SYNTHETIC, key);
    ds->synthetic = 1;
    ds->synthetic_key[0] = key[0], ds->synthetic_key[1] = key[1];
    uint8_t *x = ds->x.data;
    const int64_t total = n * ds->row;
    /* mr_synthetic_byte's bytes, 16 a Philox call (test_dataset compares) */
    for (int64_t i = 0; i < total; i += 16) {
        mr_philox4x32(key[0], key[1], 0, 0, (uint32_t)(i / 16), (uint32_t)((uint64_t)i >> 36), w);
        for (int j = 0; j < 16 && i + j < total; j++)
            x[i + j] = (uint8_t)(w[j / 4] >> (8 * (j % 4)));
    }
    for (int64_t i = 0; i < n; i++) {
        mr_philox4x32(key[0], key[1], 1, 0, (uint32_t)i, (uint32_t)((uint64_t)i >> 32), w);
        /* 64 random bits times classes, the high part: uniform over 0..classes-1 */
        const uint64_t r = ((uint64_t)w[0] << 32) | w[1];
        ds->y[i] = (int32_t)(((unsigned __int128)r * (uint64_t)classes) >> 64);
    }
    return MR_OK;
}

/* A folder of images is read at the model's input shape: height, width, channels. */
static mr_status check_image_shape(const char *images, int rank, const int *shape, mr_error *err) {
    if (rank != 3 || !(shape[2] == 1 || shape[2] == 3 || shape[2] == 4))
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: a folder of images needs an [input] shape of height, width, "
                            "channels (1 grayscale, 3 RGB or 4 RGBA)",
                            images);
    return MR_OK;
}

mr_status mr_dataset_load_images(mr_dataset *ds, const char *folder, int rank, const int *shape,
                                 mr_error *err) {
    memset(ds, 0, sizeof *ds);
    ds->scale = 1.0f;
    mr_status st = check_image_shape(folder, rank, shape, err);
    if (st == MR_OK)
        st = mr_image_folder_read_flat(folder, shape[0], shape[1], shape[2], &ds->x,
                                       &ds->file_names, err);
    if (st == MR_OK) {
        ds->n = ds->x.dims[0];
        ds->row = mr_array_row_size(&ds->x);
        ds->y = calloc((size_t)ds->n, sizeof(int32_t)); /* no labels: 0 stands in */
        if (ds->y == NULL) st = mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", folder);
    }
    if (st == MR_OK)
        snprintf(ds->note, sizeof ds->note, "%s: found %lld files, no labels", folder,
                 (long long)ds->n);
    if (st != MR_OK) mr_dataset_free(ds);
    return st;
}

/* A folder of class folders: labels from the folder names. */
static mr_status load_folder(mr_dataset *ds, const char *images, const char *labels, int rank,
                             const int *shape, mr_error *err) {
    if (labels != NULL && labels[0] != '\0')
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: a folder of class folders is labelled by its subfolders; give "
                            "no labels file (%s)",
                            images, labels);
    MR_CHECK(check_image_shape(images, rank, shape, err));
    MR_CHECK(mr_image_folder_read(images, shape[0], shape[1], shape[2], &ds->x, &ds->y,
                                  &ds->classes, &ds->class_names, err));
    ds->n = ds->x.dims[0];
    ds->row = mr_array_row_size(&ds->x);
    snprintf(ds->note, sizeof ds->note, "%s: found %lld files belonging to %d classes", images,
             (long long)ds->n, ds->classes);
    return MR_OK;
}

mr_status mr_dataset_load_input(mr_dataset *ds, const char *images, const char *labels, int rank,
                                const int *shape, mr_error *err) {
    memset(ds, 0, sizeof *ds);
    ds->scale = 1.0f;
    if (!mr_image_folder_is(images)) return mr_dataset_load(ds, images, labels, err);
    mr_status st = load_folder(ds, images, labels, rank, shape, err);
    if (st != MR_OK) mr_dataset_free(ds);
    return st;
}

/* Labels (n, width), or (n) / (n, 1) when width is 1, of a labels array `lab` for n examples;
 * the message names the file, what they are and what each column is (`per`). */
static mr_status check_label_shape(const mr_array *lab, int64_t n, int width, const char *what,
                                   const char *per, const char *labels, mr_error *err) {
    const int64_t w = lab->ndim == 2 ? lab->dims[1] : (lab->ndim == 1 ? 1 : -1);
    if (w == width && lab->dims[0] == n) return MR_OK;
    char shape[64] = "";
    for (int i = 0; i < lab->ndim && strlen(shape) < 40; i++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), i ? ", %lld" : "%lld",
                 (long long)lab->dims[i]);
    return mr_error_set(err, MR_ERR_DATA, "%s: %s must be (%lld, %d), %s; got (%s)", labels, what,
                        (long long)n, width, per, shape);
}

/* Float targets (n, width) into ds->y as float32 bit patterns; a NaN or infinity is an error. */
static mr_status read_targets(mr_dataset *ds, const mr_array *lab, int width, const char *labels,
                              mr_error *err) {
    MR_CHECK(check_label_shape(lab, ds->n, width, "float targets",
                               "one per output of the model's last layer", labels, err));
    for (int64_t i = 0; i < ds->n * width; i++) {
        const float v = (float)label_value(lab, i);
        if (!isfinite(v))
            return mr_error_set(
                err, MR_ERR_DATA, "%s: target %g at row %lld, column %lld is not a finite float32",
                labels, label_value(lab, i), (long long)(i / width), (long long)(i % width));
        memcpy(&ds->y[i], &v, sizeof v);
    }
    return MR_OK;
}

/* mr_dataset_load (width 0: class ids), mr_dataset_load_multi_hot (width k) and
 * mr_dataset_load_targets (width k, targets 1). */
static mr_status load(mr_dataset *ds, const char *images, const char *labels, int width,
                      int targets, mr_error *err) {
    memset(ds, 0, sizeof *ds);
    ds->scale = 1.0f;
    mr_array lab = {0};
    MR_CHECK(mr_array_read(images, &ds->x, err));
    mr_status st = MR_OK;
    if (labels != NULL && (st = mr_array_read(labels, &lab, err)) != MR_OK) goto fail;
    if (ds->x.ndim < 1 || ds->x.dims[0] < 1) {
        st = mr_error_set(err, MR_ERR_DATA, "%s: no examples", images);
        goto fail;
    }
    if (ds->x.dtype == MR_DTYPE_I32 || ds->x.dtype == MR_DTYPE_I64)
        if ((st = to_float(&ds->x, err, images)) != MR_OK) goto fail;
    ds->n = ds->x.dims[0];
    ds->row = mr_array_row_size(&ds->x);
    ds->label_width = width > 1 ? width : 1;
    ds->targets = targets;
    /* images only: 0 stands in for every label */
    ds->y = calloc((size_t)(ds->n * ds->label_width), sizeof(int32_t));
    if (ds->y == NULL) {
        st = mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", images);
        goto fail;
    }
    if (labels == NULL) goto notes;
    if (targets) {
        if ((st = read_targets(ds, &lab, width, labels, err)) != MR_OK) goto fail;
        goto notes;
    }
    if (width > 0) {
        /* multi-hot rows (n, width), or (n) / (n, 1) when width is 1: each value 0 or 1 */
        const int64_t w = width;
        st = check_label_shape(&lab, ds->n, width, "multi-hot labels",
                               "one 0/1 per sigmoid output of the model", labels, err);
        if (st != MR_OK) goto fail;
        for (int64_t i = 0; i < ds->n * w; i++) {
            const double e = label_value(&lab, i);
            if (e != 0.0 && e != 1.0) {
                st = mr_error_set(err, MR_ERR_DATA,
                                  "%s: value %g at row %lld, column %lld of the multi-hot labels "
                                  "is neither 0 nor 1",
                                  labels, e, (long long)(i / w), (long long)(i % w));
                goto fail;
            }
            ds->y[i] = e == 1.0;
        }
        goto notes;
    }
    /* class ids (n) or (n, 1), integers or integral floats; or one-hot
     * rows (n, k), k > 1, as Keras's categorical_crossentropy takes them */
    const int one_hot = lab.ndim == 2 && lab.dims[1] > 1;
    if (!(lab.ndim == 1 || (lab.ndim == 2 && lab.dims[1] == 1) || one_hot)) {
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s: labels must be class ids of shape (n) or (n, 1), or one-hot rows "
                          "(n, classes); got %s with %d dimensions",
                          labels, mr_dtype_name(lab.dtype), lab.ndim);
        goto fail;
    }
    if (lab.dims[0] != ds->x.dims[0]) {
        st = mr_error_set(err, MR_ERR_DATA, "%s: %lld labels, but %s has %lld images", labels,
                          (long long)lab.dims[0], images, (long long)ds->x.dims[0]);
        goto fail;
    }
    const int64_t k = one_hot ? lab.dims[1] : 1;
    for (int64_t i = 0; i < ds->n; i++) {
        int64_t v = -1;
        if (one_hot) {
            /* exactly one 1, the rest 0: soft or multi-hot rows are not classes */
            int ones = 0, others = 0;
            for (int64_t j = 0; j < k; j++) {
                const double e = label_value(&lab, i * k + j);
                if (e == 1.0)
                    ones++, v = j;
                else if (e != 0.0)
                    others++;
            }
            if (ones != 1 || others != 0) {
                st = mr_error_set(err, MR_ERR_DATA,
                                  "%s: row %lld of the one-hot labels (n, %lld) has %d ones and "
                                  "%d values other than 0 and 1; one-hot rows have exactly one 1",
                                  labels, (long long)i, (long long)k, ones, others);
                goto fail;
            }
        } else {
            const double e = label_value(&lab, i);
            if (e != floor(e) || !(e >= 0.0 && e <= (double)INT32_MAX)) {
                st = mr_error_set(err, MR_ERR_DATA,
                                  "%s: label %g of example %lld is not a class id (an integer 0 "
                                  "or more)",
                                  labels, e, (long long)i);
                goto fail;
            }
            v = (int64_t)e;
        }
        ds->y[i] = (int32_t)v;
    }
    if (one_hot)
        snprintf(ds->note, sizeof ds->note, "%s: one-hot labels (n, %lld) read as class ids",
                 labels, (long long)k);
notes:
    if (ds->x.from_float64)
        snprintf(ds->note + strlen(ds->note), sizeof ds->note - strlen(ds->note),
                 "%s%s: float64 images read as float32", ds->note[0] ? "; " : "", images);
    mr_array_free(&lab);
    return MR_OK;
fail:
    mr_array_free(&lab);
    mr_dataset_free(ds);
    return st;
}

mr_status mr_dataset_load(mr_dataset *ds, const char *images, const char *labels, mr_error *err) {
    return load(ds, images, labels, 0, 0, err);
}

mr_status mr_dataset_load_multi_hot(mr_dataset *ds, const char *images, const char *labels,
                                    int width, mr_error *err) {
    if (width < 1)
        return mr_error_set(err, MR_ERR_USAGE, "%s: multi-hot labels of width %d",
                            labels ? labels : images, width);
    if (mr_image_folder_is(images))
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: a folder of class folders gives one class per image; "
                            "multi-label binary_crossentropy needs a multi-hot labels file",
                            images);
    return load(ds, images, labels, width, 0, err);
}

mr_status mr_dataset_load_targets(mr_dataset *ds, const char *images, const char *labels, int width,
                                  mr_error *err) {
    if (width < 1)
        return mr_error_set(err, MR_ERR_USAGE, "%s: float targets of width %d",
                            labels ? labels : images, width);
    if (mr_image_folder_is(images))
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: a folder of class folders gives one class per image; a "
                            "regression loss needs a labels file of float targets",
                            images);
    return load(ds, images, labels, width, 1, err);
}

/* Example values of x (U8 or F32) as float32, into f. */
static void values_as_float(const mr_array *x, float *f, int64_t count) {
    if (x->dtype == MR_DTYPE_U8)
        for (int64_t i = 0; i < count; i++)
            f[i] = (float)((const uint8_t *)x->data)[i];
    else
        memcpy(f, x->data, sizeof(float) * (size_t)count);
}

mr_status mr_dataset_append(mr_dataset *ds, const mr_dataset *more, mr_error *err) {
    if (more->row != ds->row)
        return mr_error_set(err, MR_ERR_DATA, "examples of %lld and %lld values cannot be joined",
                            (long long)ds->row, (long long)more->row);
    const int64_t lw = label_width(ds);
    if (label_width(more) != lw)
        return mr_error_set(err, MR_ERR_DATA,
                            "examples of %lld and %lld labels each cannot be joined", (long long)lw,
                            (long long)label_width(more));
    const int64_t n = ds->n + more->n, a = ds->n * ds->row, b = more->n * more->row;
    const int u8 = ds->x.dtype == MR_DTYPE_U8 && more->x.dtype == MR_DTYPE_U8;
    const size_t size = u8 ? 1 : sizeof(float);
    void *x = malloc(size * (size_t)(a + b ? a + b : 1));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)(n ? n * lw : 1));
    if (x == NULL || y == NULL) {
        free(x), free(y);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory joining %lld and %lld examples",
                            (long long)ds->n, (long long)more->n);
    }
    if (u8) {
        memcpy(x, ds->x.data, (size_t)a);
        memcpy((uint8_t *)x + a, more->x.data, (size_t)b);
    } else {
        values_as_float(&ds->x, x, a);
        values_as_float(&more->x, (float *)x + a, b);
    }
    memcpy(y, ds->y, sizeof(int32_t) * (size_t)(ds->n * lw));
    memcpy(y + ds->n * lw, more->y, sizeof(int32_t) * (size_t)(more->n * lw));
    free(ds->x.data), free(ds->y);
    ds->x.data = x, ds->y = y;
    ds->x.dtype = u8 ? MR_DTYPE_U8 : MR_DTYPE_F32;
    ds->x.dims[0] = n;
    ds->n = n;
    if (more->note[0])
        snprintf(ds->note + strlen(ds->note), sizeof ds->note - strlen(ds->note), "%s%s",
                 ds->note[0] ? "; " : "", more->note);
    return MR_OK;
}

mr_status mr_dataset_check_labels(const mr_dataset *ds, int classes, const char *labels_path,
                                  mr_error *err) {
    if (ds->classes > 0 && ds->classes != classes)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: %d class folders, but the model has %d outputs (one per class)",
                            labels_path, ds->classes, classes);
    if (label_width(ds) > 1 || ds->targets)
        return MR_OK; /* multi-hot 0/1 or float targets, checked as they were read */
    for (int64_t i = 0; i < ds->n; i++)
        if (ds->y[i] >= classes)
            return mr_error_set(err, MR_ERR_DATA,
                                "%s: label %d of example %lld is outside the class range 0..%d "
                                "(the model has %d outputs)",
                                labels_path, ds->y[i], (long long)i, classes - 1, classes);
    return MR_OK;
}

mr_status mr_dataset_check_row(const mr_dataset *ds, int64_t row, const char *images_path,
                               mr_error *err) {
    if (ds->row != row) {
        char dims[128] = "";
        for (int i = 1; i < ds->x.ndim; i++) {
            char d[24];
            snprintf(d, sizeof d, i > 1 ? ",%lld" : "%lld", (long long)ds->x.dims[i]);
            strncat(dims, d, sizeof dims - strlen(dims) - 1);
        }
        return mr_error_set(
            err, MR_ERR_DATA,
            "%s: examples have shape (%s) = %lld values, but [input] shape has %lld", images_path,
            dims, (long long)ds->row, (long long)row);
    }
    return MR_OK;
}

/* "a,b,c" of n dims. */
static void format_dims(char *buf, size_t size, int n, const int64_t *dims) {
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(buf + strlen(buf), size - strlen(buf), i ? ",%lld" : "%lld", (long long)dims[i]);
}

mr_status mr_dataset_check_shape(mr_dataset *ds, int rank, const int *shape,
                                 const char *images_path, mr_error *err) {
    const int have = ds->x.ndim - 1; /* one example's dims: x.dims[1..] */
    const int64_t *dims = ds->x.dims + 1;
    int same = have == rank;
    for (int i = 0; same && i < rank; i++)
        same = dims[i] == shape[i];
    /* Keras's rank adjustment: the dims but a trailing 1 agree */
    int adjust = 0;
    if (have == rank - 1 && rank >= 2 && shape[rank - 1] == 1) adjust = 1;
    if (have == rank + 1 && have >= 2 && dims[have - 1] == 1) adjust = 1;
    const int common = have < rank ? have : rank;
    for (int i = 0; adjust && i < common; i++)
        adjust = dims[i] == shape[i];
    if (same) return MR_OK;
    if (adjust) {
        ds->x.ndim = rank + 1;
        for (int i = 0; i < rank; i++)
            ds->x.dims[i + 1] = shape[i];
        return MR_OK;
    }
    int64_t want[MR_ARRAY_MAX_DIMS];
    for (int i = 0; i < rank && i < MR_ARRAY_MAX_DIMS; i++)
        want[i] = shape[i];
    char got_s[160], want_s[160];
    format_dims(got_s, sizeof got_s, have, dims);
    format_dims(want_s, sizeof want_s, rank < MR_ARRAY_MAX_DIMS ? rank : MR_ARRAY_MAX_DIMS, want);
    return mr_error_set(err, MR_ERR_DATA,
                        "%s: examples of shape (%s), but the model's [input] shape is %s%s; "
                        "reshape or transpose the data to it",
                        images_path, got_s, want_s,
                        rank == 3 ? " (height, width, channels: channels last)" : "");
}

static inline float raw_value(const mr_dataset *ds, int64_t r, int64_t j) {
    int64_t k = r * ds->row + j;
    return ds->x.dtype == MR_DTYPE_U8 ? (float)((const uint8_t *)ds->x.data)[k]
                                      : ((const float *)ds->x.data)[k];
}

mr_status mr_dataset_standardize(mr_dataset *ds, const mr_dataset *from, int64_t begin,
                                 int64_t count, mr_error *err) {
    int64_t d = from->row;
    double *sum = calloc((size_t)d, sizeof(double)), *sq = calloc((size_t)d, sizeof(double));
    float *mean = malloc(sizeof(float) * (size_t)d), *inv = malloc(sizeof(float) * (size_t)d);
    if (!sum || !sq || !mean || !inv) {
        free(sum), free(sq), free(mean), free(inv);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory for standardisation statistics");
    }
    /* two passes (mean, then squared deviations): a one-pass sq/n - mean^2
     * leaves a rounding residue for constant features, whose root would then
     * pass for a tiny deviation and blow the feature up */
    for (int64_t r = begin; r < begin + count; r++)
        for (int64_t j = 0; j < d; j++)
            sum[j] += (double)raw_value(from, r, j) * from->scale;
    for (int64_t j = 0; j < d; j++)
        mean[j] = count ? (float)(sum[j] / (double)count) : 0.0f;
    for (int64_t r = begin; r < begin + count; r++)
        for (int64_t j = 0; j < d; j++) {
            double e = (double)raw_value(from, r, j) * from->scale - sum[j] / (double)count;
            sq[j] += e * e;
        }
    for (int64_t j = 0; j < d; j++) {
        double sd = count ? sqrt(sq[j] / (double)count) : 0.0;
        /* relative to the feature's size: a residue of a few ulps is no spread */
        double tiny = 1e-6 * (fabs((double)mean[j]) + 1e-6);
        inv[j] = sd > tiny ? (float)(1.0 / sd) : 1.0f;
    }
    free(sum), free(sq);
    free(ds->mean), free(ds->inv_std);
    ds->mean = mean;
    ds->inv_std = inv;
    return MR_OK;
}

void mr_dataset_fill_labels(const mr_dataset *ds, const int64_t *rows, int count, int32_t *y) {
    const int64_t lw = label_width(ds);
    for (int i = 0; i < count; i++)
        for (int64_t j = 0; j < lw; j++) /* (count, label_width) */
            y[i * lw + j] = ds->y[rows[i] * lw + j];
}

MR_AVX2_CLONES void mr_dataset_fill(const mr_dataset *ds, const int64_t *rows, int count,
                                    const mr_augment *aug, float *x, int32_t *y) {
    int64_t d = ds->row;
    const int64_t lw = label_width(ds);
    const float s = ds->scale;
    /* copy of one image for augmentation (the shift reads the unshifted image) */
    float *img = NULL;
    if (aug != NULL && (aug->flip || aug->shift) && aug->h * aug->w * aug->c == d)
        img = malloc(sizeof(float) * (size_t)d);
    for (int i = 0; i < count; i++) {
        int64_t r = rows[i];
        float *dst = x + (int64_t)i * d;
        if (i + 1 < count) {
            /* rows come in a random order: ask for the next one while this one converts */
            size_t es = mr_dtype_size(ds->x.dtype);
            const char *next = (const char *)ds->x.data + rows[i + 1] * d * (int64_t)es;
            for (int64_t off = 0; off < d * (int64_t)es; off += 64)
                __builtin_prefetch(next + off);
        }
        if (ds->x.dtype == MR_DTYPE_U8) {
            const uint8_t *src = (const uint8_t *)ds->x.data + r * d;
            for (int64_t j = 0; j < d; j++)
                dst[j] = (float)src[j] * s;
        } else {
            const float *src = (const float *)ds->x.data + r * d;
            for (int64_t j = 0; j < d; j++)
                dst[j] = src[j] * s;
        }
        if (ds->mean)
            for (int64_t j = 0; j < d; j++)
                dst[j] = (dst[j] - ds->mean[j]) * ds->inv_std[j];
        for (int64_t j = 0; j < lw; j++) /* (count, label_width) */
            y[i * lw + j] = ds->y[r * lw + j];
        if (img != NULL) {
            /* one Philox draw per (epoch, sample): flip bit, dy, dx */
            uint32_t key[2], w[4];
            mr_rng_key(aug->seed, MR_RNG_STREAM_AUGMENT, key);
            mr_philox4x32(key[0], key[1], (uint32_t)aug->epoch,
                          (uint32_t)((uint64_t)aug->epoch >> 32), (uint32_t)r,
                          (uint32_t)((uint64_t)r >> 32), w);
            int flip = aug->flip && (w[0] & 1u);
            int span = 2 * aug->shift + 1;
            int sy = aug->shift ? (int)(w[1] % (uint32_t)span) - aug->shift : 0;
            int sx = aug->shift ? (int)(w[2] % (uint32_t)span) - aug->shift : 0;
            if (!flip && sy == 0 && sx == 0) continue;
            int H = aug->h, W = aug->w, C = aug->c;
            if (img == NULL) continue; /* no memory: no augmentation rather than a crash */
            memcpy(img, dst, sizeof(float) * (size_t)(H * W * C));
            /* out(yy, xx) = in(yy - sy, flip ? W-1-(xx - sx) : xx - sx), zero outside */
            for (int yy = 0; yy < H; yy++)
                for (int xx = 0; xx < W; xx++) {
                    int iy = yy - sy, ix = xx - sx;
                    if (flip) ix = W - 1 - ix;
                    float *o = dst + ((int64_t)yy * W + xx) * C;
                    if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                        for (int c = 0; c < C; c++)
                            o[c] = 0.0f;
                    else
                        memcpy(o, img + ((int64_t)iy * W + ix) * C, sizeof(float) * (size_t)C);
                }
        }
    }
    free(img);
}

void mr_dataset_free(mr_dataset *ds) {
    mr_array_free(&ds->x);
    free(ds->y);
    free(ds->mean);
    free(ds->inv_std);
    free(ds->class_names);
    free(ds->file_names);
    memset(ds, 0, sizeof *ds);
    ds->scale = 1.0f;
}
