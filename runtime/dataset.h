/* dataset.h: examples and labels in memory, preprocessing, batch assembly.
 *
 * Images stay in the dtype they arrived in (uint8 for Fashion-MNIST: 47 MB
 * rather than 188 MB as float) and are converted per batch, row by row, by
 * the replica that trains on them. Labels become int32 class ids. The
 * training/validation split is a row range (Keras's validation_split takes
 * the LAST fraction, before any shuffling). */
#ifndef MR_DATASET_H
#define MR_DATASET_H

#include <stdint.h>

#include "runtime/array.h"
#include "runtime/error.h"

typedef struct mr_dataset {
    mr_array x;        /* (n, ...) as read: U8 or F32 (I32/I64 images are converted to F32) */
    int32_t *y;        /* (n, label_width): class ids, multi-hot rows of 0/1, or (targets)
                          float32 targets as their bit patterns */
    int64_t n;         /* examples */
    int64_t row;       /* values per example */
    float scale;       /* multiply every value by this (1 = none) */
    float *mean;       /* (row) subtracted after scaling, or NULL */
    float *inv_std;    /* (row) multiplied after subtracting, or NULL */
    char note[1200];   /* what the load converted (one-hot labels, float64), or "" */
    int classes;       /* class folders of an image folder (labels inferred), or 0 */
    char *class_names; /* those folders' names, one per line in label order, or NULL */
    char *file_names;  /* a folder of images to predict: each example's file, one per line */
    int label_width;   /* labels per example: 1 (class ids; 0 reads as 1), or k (multi-hot rows,
                          multi-label binary_crossentropy: mr_dataset_load_multi_hot) */
    int targets;       /* 1: y holds float targets (mr_dataset_load_targets) */
    /* 1: x is mr_dataset_synthetic's, byte o mr_synthetic_byte(synthetic_key,
     * o) (runtime/rng.h), so a device can make any example itself */
    int synthetic;
    uint32_t synthetic_key[2];
} mr_dataset;

/* Random augmentation of (H, W, C) images; all zero = none. */
typedef struct mr_augment {
    int flip;    /* random horizontal flip */
    int shift;   /* random shift in [-shift, shift] pixels per axis, zero fill */
    int h, w, c; /* image shape */
    uint64_t seed;
    int64_t epoch;
} mr_augment;

/* Reads images and labels (specs as mr_array_read takes them) and checks
 * they agree: same count; labels class ids, (n) or (n, 1), integers or
 * floats with integer values, or one-hot rows (n, classes) of any dtype
 * (each exactly one 1, the rest 0), read as class ids. ds->note says what
 * was converted (one-hot labels, float64 images), for the caller to print.
 * labels NULL: images only (examples to predict); every y is 0, a
 * placeholder that no score may be computed from. */
mr_status mr_dataset_load(mr_dataset *ds, const char *images, const char *labels, mr_error *err);

/* mr_dataset_load for multi-label binary_crossentropy: labels are multi-hot rows (n, k), k =
 * `width` (the model's sigmoid outputs; (n) or (n, 1) when k is 1), of 0 and 1 (any number of
 * 1s per row; integers or floats 0.0/1.0), kept as they are: ds->y (n, k), ds->label_width k.
 * A value other than 0 or 1, or another width, is an error naming the labels file. `images`
 * may not be a folder of class folders (its labels are classes); labels NULL: images only. */
mr_status mr_dataset_load_multi_hot(mr_dataset *ds, const char *images, const char *labels,
                                    int width, mr_error *err);

/* mr_dataset_load for the regression losses (mse, mae, huber on float targets): labels are
 * (n, k), k = `width` (the model's outputs; (n) or (n, 1) when k is 1), of any dtype, kept as
 * float32 (float64 rounded) in ds->y as bit patterns, ds->label_width k, ds->targets 1. Another
 * shape, or a NaN or infinite target, is an error naming the labels file. `images` may not be a
 * folder of class folders; labels NULL: images only (every target 0). */
mr_status mr_dataset_load_targets(mr_dataset *ds, const char *images, const char *labels, int width,
                                  mr_error *err);

/* mr_dataset_load, where `images` may also be a folder of class folders
 * (runtime/image_folder.h: Keras's image_dataset_from_directory), decoded
 * and resized to the model's input shape (rank 3: height, width,
 * channels 1, 3 or 4). Its subfolders are the labels, so `labels` must be
 * NULL; ds->classes is then the number of class folders, which
 * mr_dataset_check_labels checks against the model, and ds->note says
 * what was found (Keras's "Found N files belonging to K classes."). */
mr_status mr_dataset_load_input(mr_dataset *ds, const char *images, const char *labels, int rank,
                                const int *shape, mr_error *err);

/* A folder of images without labels, to predict (runtime/image_folder.h:
 * mr_image_folder_read_flat), decoded and resized to the model's input
 * shape as mr_dataset_load_input does; ds->file_names names each example's
 * file and every label is 0, a placeholder. */
mr_status mr_dataset_load_images(mr_dataset *ds, const char *folder, int rank, const int *shape,
                                 mr_error *err);

/* n synthetic examples (--synthetic, as tf_cnn_benchmarks without a data
 * directory): images of `rank` dims `dims` (one example's shape), uint8
 * values uniform over 0..255 and labels uniform over 0..classes-1, both
 * from Philox keyed by `seed` (MR_RNG_STREAM_SYNTHETIC): the same on every
 * process of a job, and a few bytes of memory per value. The scale and
 * standardisation are the caller's to set, as for files. ds->synthetic
 * and synthetic_key say how a device makes the same bytes itself. */
mr_status mr_dataset_synthetic(mr_dataset *ds, int64_t n, int rank, const int *dims, int classes,
                               uint64_t seed, mr_error *err);

/* Appends the examples of `more` after those of ds (a validation set
 * after the training set: the fit validates on a row range); both must
 * have ds->row values per example (mr_dataset_check_row) and the same
 * label_width. uint8 stays
 * uint8 when both are; otherwise both become float32 (the value the batch
 * conversion would make, so training is the same bits). Adds more's note
 * to ds's. */
mr_status mr_dataset_append(mr_dataset *ds, const mr_dataset *more, mr_error *err);

/* Checks labels are in [0, classes), and that an image folder has
 * `classes` class folders; the message names `labels_path`. */
mr_status mr_dataset_check_labels(const mr_dataset *ds, int classes, const char *labels_path,
                                  mr_error *err);

/* Checks the examples' shape, ds->x's dims after the first, against the model's input shape
 * (`rank` dims `shape`): the same, or Keras 3's own rank adjustment (Functional's
 * _adjust_input_rank), silently, as Keras does it: a trailing axis of 1 that the data lacks
 * (IDX images (n, 28, 28) for [input] shape 28,28,1) or that only the data has ((n, 10, 1) for
 * shape 10); x's dims then become the model's. Anything else, even of the same size
 * (channels-first (n, 3, 8, 8) for 8,8,3, flat (n, 784) for 28,28,1), is MR_ERR_DATA naming
 * `images_path`, the data's shape and the model's. */
mr_status mr_dataset_check_shape(mr_dataset *ds, int rank, const int *shape,
                                 const char *images_path, mr_error *err);

/* Checks that each example has `row` values (the model's input size). */
mr_status mr_dataset_check_row(const mr_dataset *ds, int64_t row, const char *images_path,
                               mr_error *err);

/* Per-feature mean and standard deviation of rows [begin, begin+count) of
 * `from` (after its scale), installed into ds (which may be `from`).
 * Features with zero deviation get inv_std 1. */
mr_status mr_dataset_standardize(mr_dataset *ds, const mr_dataset *from, int64_t begin,
                                 int64_t count, mr_error *err);

/* Converts the examples rows[0..count) into x (count, row) as float with
 * preprocessing (and augmentation if aug is not NULL; aug keys by the row
 * index, so a sample's augmentation is the same whatever replica takes it),
 * and their labels into y (count, label_width). */
void mr_dataset_fill(const mr_dataset *ds, const int64_t *rows, int count, const mr_augment *aug,
                     float *x, int32_t *y);

/* The labels alone of mr_dataset_fill: y (count, label_width), where the
 * device makes the examples themselves (a synthetic set on a GPU). */
void mr_dataset_fill_labels(const mr_dataset *ds, const int64_t *rows, int count, int32_t *y);

void mr_dataset_free(mr_dataset *ds);

#endif
