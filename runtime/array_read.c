/* array_read.c: mr_array_read (array.h), the reader a spec names: an HDF5
 * dataset (array.c), an .npz member (npz.c), an NPY file (npy.c) or IDX
 * (array.c); then the check that a float array is finite. */
#include "runtime/array.h"
#include "runtime/npy.h"
#include "runtime/npz.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- dispatch ------------------------------------------------------------ */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Refuses a float array with a NaN or an infinity: one would poison every
 * weight it reaches in the first step. Names the example (row) and the
 * element within it, counted from 0. Integer arrays are always finite. */
static mr_status check_finite(const char *spec, mr_array *a, mr_error *err) {
    if (a->dtype != MR_DTYPE_F32) return MR_OK;
    const float *x = a->data;
    const int64_t n = mr_array_count(a), row = mr_array_row_size(a);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            mr_status st = mr_error_set(err, MR_ERR_DATA,
                                        "%s: example %lld has a non-finite value (%s) at element "
                                        "%lld; NaN and infinity are refused",
                                        spec, (long long)(i / row), isnan(x[i]) ? "NaN" : "Inf",
                                        (long long)(i % row));
            mr_array_free(a);
            return st;
        }
    return MR_OK;
}

static mr_status read_any(const char *spec, mr_array *out, mr_error *err);

/* "file.npz:member", the archive's path the first n bytes of spec. */
static mr_status read_npz_member(const char *spec, size_t n, mr_array *out, mr_error *err) {
    if (spec[n + 1] == '\0')
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: no member named after ':' (write %.*s:NAME, e.g. x_train)", spec,
                            (int)n, spec);
    char *path = malloc(n + 1);
    if (path == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", spec);
    memcpy(path, spec, n);
    path[n] = '\0';
    mr_status st = mr_npz_read(path, spec + n + 1, out, err);
    free(path);
    return st;
}

mr_status mr_array_read(const char *spec, mr_array *out, mr_error *err) {
    MR_CHECK(read_any(spec, out, err));
    return check_finite(spec, out, err);
}

static mr_status read_any(const char *spec, mr_array *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    /* "file.h5:/dataset": split at the colon after the extension, so paths
     * with colons elsewhere still work */
    const char *h5 = strstr(spec, ".h5:"), *hdf5 = strstr(spec, ".hdf5:");
    const char *colon = NULL;
    if (h5 != NULL && (hdf5 == NULL || h5 < hdf5))
        colon = h5 + 3;
    else if (hdf5 != NULL)
        colon = hdf5 + 5;
    if (colon != NULL) {
        size_t n = (size_t)(colon - spec);
        if (colon[1] == '\0')
            return mr_error_set(err, MR_ERR_CONFIG,
                                "%s: no dataset named after ':' (write %.*s:/dataset)", spec,
                                (int)n, spec);
        char *path = malloc(n + 1);
        if (path == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", spec);
        memcpy(path, spec, n);
        path[n] = '\0';
        mr_status st = mr_array_read_h5(path, colon + 1, out, err);
        free(path);
        return st;
    }
    /* without a dataset the HDF5 file would be read as IDX and fail on its
     * magic, which would not tell the user what to change */
    if (ends_with(spec, ".h5") || ends_with(spec, ".hdf5"))
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: an HDF5 file needs a dataset name: write %s:/dataset", spec, spec);
    const char *npz = strstr(spec, ".npz:");
    if (npz != NULL) return read_npz_member(spec, (size_t)(npz + 4 - spec), out, err);
    if (mr_npz_is_archive(spec)) {
        char list[1024] = "";
        MR_CHECK(mr_npz_members(spec, list, sizeof list, err));
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: an .npz needs a member name: write %s:NAME (it has: %s)", spec,
                            spec, list[0] ? list : "no members");
    }
    if (ends_with(spec, ".npy")) return mr_npy_read(spec, out, err);
    return mr_array_read_idx(spec, out, err);
}
