/* session_data.c: the training data of a .cfg ([data] files, or synthetic
 * examples) checked against the model (session_data.h). */
#include "session/session_data.h"

#include <stdio.h>
#include <string.h>

#include "runtime/image_folder.h"

/* What the class check names: the labels file, or the image folder whose
 * subfolders are the labels. */
static const char *labels_name(const char *labels, const char *images) {
    return labels[0] ? labels : images;
}

/* [data] <set>_images without <set>_labels is a folder of class folders,
 * or a missing key (the .cfg parser leaves that to the loader: the folder
 * need not exist where a .cfg is only read). */
static mr_status need_labels(const mr_config *cfg, const char *set, const char *images,
                             const char *labels, mr_error *err) {
    if (images[0] == '\0' || labels[0] != '\0' || mr_image_folder_is(images)) return MR_OK;
    return mr_error_set(err, MR_ERR_CONFIG,
                        "%s: [data] %s_labels is missing: %s_images %s is not a folder of class "
                        "folders, so its labels are needed",
                        cfg->path, set, set, images);
}

/* One set's images and labels: class ids, multi-hot rows (n, label_width) for multi-label
 * binary_crossentropy, or float targets (n, label_width) for a regression. */
static mr_status load_set(mr_dataset *ds, const char *images, const char *labels, int rank,
                          const int *shape, int label_width, int regression, mr_error *err) {
    if (regression) return mr_dataset_load_targets(ds, images, labels, label_width, err);
    return label_width > 1 ? mr_dataset_load_multi_hot(ds, images, labels, label_width, err)
                           : mr_dataset_load_input(ds, images, labels, rank, shape, err);
}

/* On every process: the data, checked against the model. */
mr_status mr_session_load_data(const mr_config *cfg, int64_t in_size, int classes, int label_width,
                               int regression, mr_dataset *train, mr_dataset *test,
                               int64_t *n_train, mr_error *err) {
    const mr_data_cfg *d = &cfg->data;
    /* an images path may be a folder of class folders, read at the [input]
     * shape; its labels are its subfolders, and the class check names it */
    const int rank = cfg->layers[0].shape_rank, *shape = cfg->layers[0].shape;
    MR_CHECK(need_labels(cfg, "train", d->train_images, d->train_labels, err));
    MR_CHECK(need_labels(cfg, "val", d->val_images, d->val_labels, err));
    MR_CHECK(need_labels(cfg, "test", d->test_images, d->test_labels, err));
    MR_CHECK(load_set(train, d->train_images, d->train_labels, rank, shape, label_width, regression,
                      err));
    MR_CHECK(mr_dataset_check_shape(train, rank, shape, d->train_images, err));
    MR_CHECK(mr_dataset_check_row(train, in_size, d->train_images, err));
    MR_CHECK(mr_dataset_check_labels(train, classes, labels_name(d->train_labels, d->train_images),
                                     err));
    if (d->test_images[0] != '\0') {
        MR_CHECK(load_set(test, d->test_images, d->test_labels, rank, shape, label_width,
                          regression, err));
        MR_CHECK(mr_dataset_check_shape(test, rank, shape, d->test_images, err));
        MR_CHECK(mr_dataset_check_row(test, in_size, d->test_images, err));
        MR_CHECK(mr_dataset_check_labels(test, classes, labels_name(d->test_labels, d->test_images),
                                         err));
    }
    if (d->val_images[0] != '\0') {
        /* Keras's validation_data: the validation rows follow the training
         * rows, and the fit validates on that range */
        mr_dataset val;
        MR_CHECK(load_set(&val, d->val_images, d->val_labels, rank, shape, label_width, regression,
                          err));
        mr_status st = mr_dataset_check_shape(&val, rank, shape, d->val_images, err);
        if (st == MR_OK) st = mr_dataset_check_row(&val, in_size, d->val_images, err);
        if (st == MR_OK)
            st = mr_dataset_check_labels(&val, classes, labels_name(d->val_labels, d->val_images),
                                         err);
        *n_train = train->n;
        if (st == MR_OK) st = mr_dataset_append(train, &val, err);
        mr_dataset_free(&val);
        MR_CHECK(st);
    } else {
        /* Keras's validation_split: the last fraction, taken before shuffling */
        /* + 1e-4: 0.1f is not 0.1, and 60000 x (1 - 0.1f) must still give 54000 */
        *n_train = (int64_t)((double)train->n * (1.0 - (double)cfg->net.validation_split) + 1e-4);
        if (*n_train < 1)
            return mr_error_set(err, MR_ERR_CONFIG,
                                "%s: validation_split leaves no training examples", cfg->path);
        /* a folder's rows come class after class: the last fraction is
         * the last classes, which the user should hear of */
        const size_t used = strlen(train->note);
        if (train->classes > 0 && *n_train < train->n)
            snprintf(train->note + used, sizeof train->note - used,
                     "; validation_split holds out its last %lld files, of the last classes in "
                     "folder order: a val_images folder validates on every class",
                     (long long)(train->n - *n_train));
    }
    train->scale = test->scale = d->scale;
    if (d->standardize) {
        /* statistics of the training split only, applied to everything */
        MR_CHECK(mr_dataset_standardize(train, train, 0, *n_train, err));
        if (test->n > 0) MR_CHECK(mr_dataset_standardize(test, train, 0, *n_train, err));
    }
    return MR_OK;
}

/* --synthetic: n random examples of the model's input shape and classes,
 * the same on every process (keyed by the seed); the [data] files are not
 * read, and there is no test set. validation_split, scale and standardize
 * apply as to files. */
mr_status mr_session_synthetic_data(const mr_config *cfg, int64_t n, int classes, int label_width,
                                    int regression, mr_dataset *train, int64_t *n_train,
                                    const mr_session_words *words, mr_error *err) {
    const char *synthetic = mr_session_name(words, MR_SESSION_ARG_SYNTHETIC);
    const mr_layer_cfg *in = &cfg->layers[0];
    if (regression)
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: %s makes class ids, not the float targets of loss = %s on this "
                            "last layer: give [data] files",
                            cfg->path, synthetic, mr_loss_name(cfg->net.loss));
    if (label_width > 1)
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: %s makes class ids, not the multi-hot labels of multi-label "
                            "binary_crossentropy: give [data] files",
                            cfg->path, synthetic);
    MR_CHECK(mr_dataset_synthetic(train, n, in->shape_rank, in->shape, classes,
                                  (uint64_t)cfg->net.seed, err));
    train->scale = cfg->data.scale;
    /* validation_split as for files: the last fraction (load_data) */
    *n_train = (int64_t)((double)n * (1.0 - (double)cfg->net.validation_split) + 1e-4);
    if (*n_train < 1)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: validation_split leaves no training examples of the %lld "
                            "synthetic ones",
                            cfg->path, (long long)n);
    /* standardize: the statistics of these examples, as of a training set */
    if (cfg->data.standardize) MR_CHECK(mr_dataset_standardize(train, train, 0, *n_train, err));
    return MR_OK;
}

mr_status mr_session_augment(const mr_config *cfg, const char *name, mr_augment *aug,
                             mr_error *err) {
    const mr_layer_cfg *in = &cfg->layers[0];
    if (in->shape_rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [augment] needs an image input shape H,W,C",
                            name, cfg->augment.line);
    *aug = (mr_augment){.flip = cfg->augment.flip,
                        .shift = cfg->augment.shift,
                        .h = in->shape[0],
                        .w = in->shape[1],
                        .c = in->shape[2],
                        .seed = (uint64_t)cfg->net.seed};
    return MR_OK;
}

mr_status mr_session_load_set(const mr_config *cfg, const char *set, const char *images,
                              const char *labels, int64_t in_size, int classes, int label_width,
                              int regression, mr_dataset *ds, mr_error *err) {
    const int rank = cfg->layers[0].shape_rank, *shape = cfg->layers[0].shape;
    MR_CHECK(need_labels(cfg, set, images, labels, err));
    MR_CHECK(load_set(ds, images, labels, rank, shape, label_width, regression, err));
    MR_CHECK(mr_dataset_check_shape(ds, rank, shape, images, err));
    MR_CHECK(mr_dataset_check_row(ds, in_size, images, err));
    return mr_dataset_check_labels(ds, classes, labels_name(labels, images), err);
}
