/* npz.c: .npz archives (npz.h). A member is inflated by libzip into an
 * anonymous memory file (memfd), which the NPY reader then reads as it
 * reads a .npy on disk, with the same checks and messages. */
#include "runtime/npy.h"
#include "runtime/npz.h"
#include "runtime/zip_read.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zip.h>

/* The largest member read: the NPY reader's array limit (16 GiB) and a header. */
#define NPZ_MAX_MEMBER (((int64_t)16 << 30) + (1 << 20))

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int mr_npz_is_archive(const char *spec) {
    return ends_with(spec, ".npz");
}

static mr_status npz_open(const char *path, zip_t **za, mr_error *err) {
    int code = 0;
    *za = zip_open(path, ZIP_RDONLY, &code);
    if (*za != NULL) {
        mr_status st = mr_zip_check_names(*za, path, err);
        if (st != MR_OK) zip_discard(*za), *za = NULL;
        return st;
    }
    zip_error_t ze;
    zip_error_init_with_code(&ze, code);
    mr_status st =
        mr_error_set(err, code == ZIP_ER_MEMORY ? MR_ERR_NOMEM : MR_ERR_DATA,
                     "%s: cannot open as an .npz (zip) archive: %s", path, zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return st;
}

/* The members' names without ".npy", ", " between them. */
static void list_members(zip_t *za, char *list, size_t n) {
    size_t len = 0;
    list[0] = '\0';
    const zip_int64_t count = zip_get_num_entries(za, 0);
    for (zip_int64_t i = 0; i < count && len < n; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, 0);
        if (name == NULL) continue;
        int shown = (int)strlen(name) - (ends_with(name, ".npy") ? 4 : 0);
        len += (size_t)snprintf(list + len, n - len, "%s%.*s", len ? ", " : "", shown, name);
    }
}

mr_status mr_npz_members(const char *path, char *list, size_t n, mr_error *err) {
    zip_t *za;
    MR_CHECK(npz_open(path, &za, err));
    list_members(za, list, n);
    zip_discard(za);
    return MR_OK;
}

/* The index of `member` ("x" finds "x.npy" first, then "x"), or -1. */
static zip_int64_t locate(zip_t *za, const char *member) {
    char with[1024];
    if (!ends_with(member, ".npy") && strlen(member) + 5 <= sizeof with) {
        snprintf(with, sizeof with, "%s.npy", member);
        zip_int64_t i = zip_name_locate(za, with, 0);
        if (i >= 0) return i;
    }
    return zip_name_locate(za, member, 0);
}

int mr_npz_has(const char *path, const char *member) {
    mr_error err = {0};
    zip_t *za;
    if (npz_open(path, &za, &err) != MR_OK) return 0;
    const int has = locate(za, member) >= 0;
    zip_discard(za);
    return has;
}

/* Member i of za, copied into a memory file and read as a .npy. */
static mr_status read_member(zip_t *za, zip_int64_t i, const char *name, mr_array *out,
                             mr_error *err) {
    int fd = memfd_create("mirrored-npz-member", MFD_CLOEXEC);
    if (fd < 0)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot make a memory file: %s", name,
                            strerror(errno));
    mr_status st = mr_zip_copy_member(za, i, name, NPZ_MAX_MEMBER, fd, err);
    if (st == MR_OK && lseek(fd, 0, SEEK_SET) != 0)
        st = mr_error_set(err, MR_ERR_IO, "%s: cannot rewind the memory file: %s", name,
                          strerror(errno));
    if (st != MR_OK) {
        close(fd);
        return st;
    }
    return mr_npy_read_fd(fd, name, out, err);
}

mr_status mr_npz_read(const char *path, const char *member, mr_array *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    zip_t *za;
    MR_CHECK(npz_open(path, &za, err));
    const zip_int64_t i = locate(za, member);
    mr_status st;
    if (i < 0) {
        char list[1024];
        list_members(za, list, sizeof list);
        st = mr_error_set(err, MR_ERR_DATA, "%s: no member '%s'; the archive has: %s", path, member,
                          list[0] ? list : "no members");
    } else {
        char name[4200];
        snprintf(name, sizeof name, "%s:%s", path, member);
        st = read_member(za, i, name, out, err);
    }
    zip_discard(za);
    return st;
}

mr_status mr_npz_data_paths(const char *images, const char *labels, const char *set,
                            char *images_out, char *labels_out, size_t n, mr_error *err) {
    const int whole = mr_npz_is_archive(images);
    const int same = whole && (labels[0] == '\0' || strcmp(labels, images) == 0);
    int a = whole ? snprintf(images_out, n, "%s:x_%s", images, set)
                  : snprintf(images_out, n, "%s", images);
    int b = same ? snprintf(labels_out, n, "%s:y_%s", images, set)
                 : snprintf(labels_out, n, "%s", labels);
    if (a < 0 || (size_t)a >= n || b < 0 || (size_t)b >= n)
        return mr_error_set(err, MR_ERR_CONFIG, "%s: path too long", images);
    return MR_OK;
}
