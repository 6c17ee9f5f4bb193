/* train_data.c: --write-data (train_data.h). */
#include "launch/train_data.h"

#include <stdio.h>
#include <stdlib.h>

#include "runtime/h5file.h"

/* --write-data: the examples as the model sees them (scaled, standardised),
 * float32, with their labels, for a later job to read with scale = 1 and no
 * standardize: a CPU job and a GPU job then train on the same bits. */
mr_status mr_train_write_data(const char *path, const mr_config *cfg, const mr_dataset *train,
                              const mr_dataset *test, mr_error *err) {
    const mr_layer_cfg *in = &cfg->layers[0];
    mr_h5 h;
    MR_CHECK(mr_h5_create(&h, path, err));
    mr_status st = MR_OK;
    const mr_dataset *sets[2] = {train, test};
    const char *names[2] = {"train", "test"};
    for (int k = 0; k < 2 && st == MR_OK; k++) {
        const mr_dataset *ds = sets[k];
        if (ds->n == 0) continue;
        float *x = malloc(sizeof(float) * (size_t)(ds->n * ds->row));
        int32_t *y = malloc(sizeof(int32_t) * (size_t)ds->n);
        int64_t *rows = malloc(sizeof(int64_t) * (size_t)ds->n), *labels = NULL;
        if (x && y && rows) labels = malloc(sizeof(int64_t) * (size_t)ds->n);
        if (labels == NULL) {
            st = mr_error_set(err, MR_ERR_NOMEM, "--write-data: out of memory");
        } else {
            for (int64_t i = 0; i < ds->n; i++)
                rows[i] = i;
            for (int64_t i = 0; i < ds->n; i += 1 << 20) /* fill takes an int count */
                mr_dataset_fill(ds, rows + i, (int)(ds->n - i < (1 << 20) ? ds->n - i : 1 << 20),
                                NULL, x + i * ds->row, y + i);
            for (int64_t i = 0; i < ds->n; i++)
                labels[i] = y[i];
            int64_t dims[4] = {ds->n, in->shape[0], in->shape[1], in->shape[2]};
            char name[32];
            snprintf(name, sizeof name, "%s_images", names[k]);
            st = mr_h5_write(&h, h.file, name, MR_H5_F32, 1 + in->shape_rank, dims, x, err);
            snprintf(name, sizeof name, "%s_labels", names[k]);
            if (st == MR_OK) st = mr_h5_write(&h, h.file, name, MR_H5_I64, 1, &ds->n, labels, err);
        }
        free(x), free(y), free(rows), free(labels);
    }
    if (st != MR_OK) {
        mr_h5_discard(&h);
        return st;
    }
    MR_CHECK(mr_h5_commit(&h, err));
    printf("Wrote %s: %lld training and %lld test examples, preprocessed. To train on them:\n"
           "[data]\ntrain_images = %s:/train_images\ntrain_labels = %s:/train_labels\n",
           path, (long long)train->n, (long long)test->n, path, path);
    if (test->n)
        printf("test_images = %s:/test_images\ntest_labels = %s:/test_labels\n", path, path);
    printf("scale = 1\n");
    return MR_OK;
}
