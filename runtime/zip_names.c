/* zip_names.c: see zip_names.h. The names are sorted (pointers into
 * libzip's own strings) so duplicates are neighbours: O(n log n) for an
 * archive crafted with many members. */
#include "runtime/zip_names.h"

#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 if name leaves the archive's folder: absolute, a ".." part, a backslash. */
static int is_path_out(const char *name) {
    if (name[0] == '/' || strchr(name, '\\') != NULL) return 1;
    for (const char *p = name; *p != '\0';) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.') return 1;
        p += len + (p[len] == '/');
    }
    return 0;
}

mr_status mr_zip_check_names(zip_t *za, const char *path, mr_error *err) {
    const zip_int64_t count = zip_get_num_entries(za, 0);
    if (count < 0 || count > MR_ZIP_MAX_MEMBERS)
        return mr_error_set(err, MR_ERR_DATA, "%s: %lld members in the zip archive (at most %d)",
                            path, (long long)count, MR_ZIP_MAX_MEMBERS);
    const char **names = malloc(((size_t)count + 1) * sizeof *names);
    if (names == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
    size_t n = 0;
    mr_status st = MR_OK;
    for (zip_int64_t i = 0; i < count && st == MR_OK; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, 0);
        if (name == NULL)
            st = mr_error_set(err, MR_ERR_DATA, "%s: member %lld has no readable name", path,
                              (long long)i);
        else if (is_path_out(name))
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: member '%s' is a path out of the archive: refused", path, name);
        else
            names[n++] = name;
    }
    if (st == MR_OK && n > 1) qsort(names, n, sizeof *names, by_name);
    for (size_t i = 1; i < n && st == MR_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: member '%s' appears twice in the zip archive (numpy and Keras "
                              "read the last, libzip the first): refused",
                              path, names[i]);
    free(names);
    return st;
}
