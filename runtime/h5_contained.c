/* h5_contained.c: see h5_contained.h. One walk of the file's links
 * (H5Lvisit goes down hard links only, never through a soft or external
 * one); each dataset's creation properties say where its data lives. */
#include "runtime/h5_contained.h"

#include <stdio.h>

typedef struct walk {
    char name[512]; /* the first object refused */
    const char *why;
} walk;

/* What is wrong with the dataset `d`, or NULL. */
static const char *dataset_outside(hid_t d) {
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0) return "a dataset whose properties cannot be read";
    const char *why = NULL;
    if (H5Pget_layout(dcpl) == H5D_VIRTUAL)
        why = "a virtual dataset (its data is in other files)";
    else if (H5Pget_external_count(dcpl) != 0)
        why = "a dataset with external storage (its data is in other files)";
    H5Pclose(dcpl);
    return why;
}

static herr_t visit(hid_t group, const char *name, const H5L_info_t *info, void *op) {
    walk *w = op;
    const char *why = NULL;
    if (info->type == H5L_TYPE_EXTERNAL)
        why = "an external link (to another file)";
    else if (info->type != H5L_TYPE_HARD && info->type != H5L_TYPE_SOFT)
        why = "a user-defined link";
    else if (info->type == H5L_TYPE_HARD) {
        hid_t o = H5Oopen(group, name, H5P_DEFAULT);
        if (o < 0) return 0; /* the reader that needs it says what is wrong */
        if (H5Iget_type(o) == H5I_DATASET) why = dataset_outside(o);
        H5Oclose(o);
    }
    if (why == NULL) return 0;
    snprintf(w->name, sizeof w->name, "%s", name);
    w->why = why;
    return 1; /* stops the walk */
}

mr_status mr_h5_check_contained(hid_t file, const char *path, mr_error *err) {
    walk w = {.why = NULL};
    if (H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, visit, &w) < 0 && w.why == NULL)
        return mr_error_set(err, MR_ERR_DATA, "%s: its links cannot be read (a damaged file)",
                            path);
    if (w.why == NULL) return MR_OK;
    return mr_error_set(err, MR_ERR_DATA,
                        "%s: /%s is %s: refused (mirrored reads only what the file holds)", path,
                        w.name, w.why);
}
