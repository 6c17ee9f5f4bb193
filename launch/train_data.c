/* train_data.c: the command line's data options, and --write-data (train_data.h). */
#include "launch/train_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/h5file.h"
#include "runtime/npz.h"

/* dst (a [data] path, MR_PATH_MAX bytes) = "archive:member". */
static mr_status set_member(char *dst, const char *archive, const char *member, mr_error *err) {
    int n = snprintf(dst, MR_PATH_MAX, "%s:%s", archive, member);
    if (n < 0 || n >= MR_PATH_MAX)
        return mr_error_set(err, MR_ERR_USAGE, "--data %s: path too long", archive);
    return MR_OK;
}

/* --data F.npz: the [data] files become the archive's arrays by keras.datasets' names. */
static mr_status apply_npz(const char *path, mr_config *cfg, FILE *say, mr_error *err) {
    mr_data_cfg *d = &cfg->data;
    if (!mr_npz_is_archive(path))
        return mr_error_set(err, MR_ERR_USAGE,
                            "--data %s: expected an .npz archive with x_train and y_train (as "
                            "keras.datasets' files); other files go in the .cfg's [data]",
                            path);
    char list[1024];
    MR_CHECK(mr_npz_members(path, list, sizeof list, err));
    if (!mr_npz_has(path, "x_train") || !mr_npz_has(path, "y_train"))
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: no x_train and y_train (keras.datasets' names: x_train, y_train, "
                            "x_test, y_test); the archive has: %s",
                            path, list[0] ? list : "no members");
    MR_CHECK(set_member(d->train_images, path, "x_train", err));
    MR_CHECK(set_member(d->train_labels, path, "y_train", err));
    d->val_images[0] = d->val_labels[0] = '\0';
    if (mr_npz_has(path, "x_test") && mr_npz_has(path, "y_test")) {
        MR_CHECK(set_member(d->test_images, path, "x_test", err));
        return set_member(d->test_labels, path, "y_test", err);
    }
    d->test_images[0] = d->test_labels[0] = '\0';
    if (say) fprintf(say, "%s has no x_test and y_test: no test evaluation\n", path);
    return MR_OK;
}

/* --validation-split, and a validation set for the [net] keys that watch one. */
static mr_status apply_split(const mr_train_options *c, mr_config *cfg, mr_error *err) {
    if (c->validation_split >= 0.0) {
        if (c->validation_split > 0.0 && cfg->data.val_images[0] != '\0')
            return mr_error_set(err, MR_ERR_USAGE,
                                "--validation-split %g: [data] val_images of %s is the validation "
                                "set already: give one of them",
                                c->validation_split, cfg->path);
        cfg->net.validation_split = (float)c->validation_split;
    }
    if (cfg->data.val_images[0] != '\0' || cfg->net.validation_split > 0.0f) return MR_OK;
    const struct {
        const char *key;
        mr_monitor mon;
    } watchers[] = {{"early_stopping", cfg->net.early_stopping},
                    {"save_best_only", cfg->net.save_best_only},
                    {"reduce_lr_on_plateau", cfg->net.reduce_lr_on_plateau}};
    for (size_t i = 0; i < sizeof watchers / sizeof watchers[0]; i++)
        if (watchers[i].mon == MR_MONITOR_VAL_LOSS || watchers[i].mon == MR_MONITOR_VAL_ACCURACY)
            return mr_error_set(err, MR_ERR_USAGE,
                                "%s: [net] %s watches the validation set, and the command line "
                                "leaves none: give --validation-split F",
                                cfg->path, watchers[i].key);
    return MR_OK;
}

mr_status mr_train_apply_options(const mr_train_options *c, mr_config *cfg, FILE *say,
                                 mr_error *err) {
    if (c->epochs > 0) cfg->net.epochs = (int)c->epochs;
    if (c->seed >= 0) cfg->net.seed = c->seed;
    if (c->batch_size > 0) cfg->net.global_batch = (int)c->batch_size;
    if (c->data_path != NULL) MR_CHECK(apply_npz(c->data_path, cfg, say, err));
    MR_CHECK(apply_split(c, cfg, err));
    /* [data] naming a whole archive: each set's x_ and y_ members */
    mr_data_cfg *d = &cfg->data;
    char images[MR_PATH_MAX], labels[MR_PATH_MAX];
    struct {
        const char *set;
        char *images, *labels;
    } sets[] = {{"train", d->train_images, d->train_labels},
                {"val", d->val_images, d->val_labels},
                {"test", d->test_images, d->test_labels}};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        MR_CHECK(mr_npz_data_paths(sets[i].images, sets[i].labels, sets[i].set, images, labels,
                                   sizeof images, err));
        memcpy(sets[i].images, images, sizeof images);
        memcpy(sets[i].labels, labels, sizeof labels);
    }
    return MR_OK;
}

/* --write-data: the examples as the model sees them (scaled, standardised),
 * float32, with their labels, for a later job to read with scale = 1 and no
 * standardize: a CPU job and a GPU job then train on the same bits. */
mr_status mr_train_write_data(const char *path, const mr_config *cfg, const mr_dataset *train,
                              int64_t n_train, const mr_dataset *test, mr_error *err) {
    const mr_layer_cfg *in = &cfg->layers[0];
    mr_h5 h;
    MR_CHECK(mr_h5_create(&h, path, err));
    mr_status st = MR_OK;
    /* with val_images, the training rows are followed by the validation
     * rows (mr_dataset_append): written apart, as they were given */
    const int has_val = cfg->data.val_images[0] != '\0';
    const int64_t n_first = has_val ? n_train : train->n;
    const struct {
        const mr_dataset *ds;
        int64_t begin, count;
        const char *name;
    } sets[3] = {{train, 0, n_first, "train"},
                 {train, n_first, train->n - n_first, "val"},
                 {test, 0, test->n, "test"}};
    for (int k = 0; k < 3 && st == MR_OK; k++) {
        const mr_dataset *ds = sets[k].ds;
        const int64_t n = sets[k].count, begin = sets[k].begin;
        if (n == 0) continue;
        /* labels (n) class ids, or (n, k) multi-hot rows */
        const int64_t lw = ds->label_width > 1 ? ds->label_width : 1;
        float *x = malloc(sizeof(float) * (size_t)(n * ds->row));
        int32_t *y = malloc(sizeof(int32_t) * (size_t)(n * lw));
        int64_t *rows = malloc(sizeof(int64_t) * (size_t)n), *labels = NULL;
        if (x && y && rows) labels = malloc(sizeof(int64_t) * (size_t)(n * lw));
        if (labels == NULL) {
            st = mr_error_set(err, MR_ERR_NOMEM, "--write-data: out of memory");
        } else {
            for (int64_t i = 0; i < n; i++)
                rows[i] = begin + i;
            for (int64_t i = 0; i < n; i += 1 << 20) /* fill takes an int count */
                mr_dataset_fill(ds, rows + i, (int)(n - i < (1 << 20) ? n - i : 1 << 20), NULL,
                                x + i * ds->row, y + i * lw);
            for (int64_t i = 0; i < n * lw; i++)
                labels[i] = y[i];
            int64_t dims[4] = {n, in->shape[0], in->shape[1], in->shape[2]};
            char name[32];
            snprintf(name, sizeof name, "%s_images", sets[k].name);
            st = mr_h5_write(&h, h.file, name, MR_H5_F32, 1 + in->shape_rank, dims, x, err);
            snprintf(name, sizeof name, "%s_labels", sets[k].name);
            const int64_t ldims[2] = {n, lw};
            if (st == MR_OK)
                st = mr_h5_write(&h, h.file, name, MR_H5_I64, lw > 1 ? 2 : 1, ldims, labels, err);
        }
        free(x), free(y), free(rows), free(labels);
    }
    if (st != MR_OK) {
        mr_h5_discard(&h);
        return st;
    }
    MR_CHECK(mr_h5_commit(&h, err));
    char val[64] = "";
    if (has_val) snprintf(val, sizeof val, ", %lld validation", (long long)(train->n - n_first));
    printf("Wrote %s: %lld training%s and %lld test examples, preprocessed. To train on them:\n"
           "[data]\ntrain_images = %s:/train_images\ntrain_labels = %s:/train_labels\n",
           path, (long long)n_first, val, (long long)test->n, path, path);
    if (has_val) printf("val_images = %s:/val_images\nval_labels = %s:/val_labels\n", path, path);
    if (test->n)
        printf("test_images = %s:/test_images\ntest_labels = %s:/test_labels\n", path, path);
    printf("scale = 1\n");
    return MR_OK;
}
