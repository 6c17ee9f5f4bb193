/* train_data.c: the command line's data options over the .cfg
 * (session/session_overrides.h in the CLI's words), and --write-data
 * (train_data.h). */
#include "launch/train_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/h5file.h"
#include "launch/cli.h"
#include "session/session_overrides.h"

/* the face's lines: a test set left out, on `say` */
static void say_line(void *user, mr_session_line kind, const char *text) {
    (void)kind;
    fprintf(user, "%s\n", text);
}

mr_status mr_train_apply_options(const mr_train_options *c, mr_config *cfg, FILE *say,
                                 mr_error *err) {
    const mr_session_overrides o = {.epochs = c->epochs,
                                    .seed = c->seed,
                                    .batch_size = c->batch_size,
                                    .validation_split = c->validation_split,
                                    .data = c->data_path};
    const mr_session_events ev = {.user = say, .line = say ? say_line : NULL};
    if (c->no_cuda_graphs) cfg->net.cuda_graphs = 0; /* what runs, not the model */
    return mr_session_apply_overrides(&o, cfg, &mr_cli_words, &ev, err);
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
