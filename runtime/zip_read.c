/* zip_read.c: see zip_read.h. The names are sorted (pointers into
 * libzip's own strings) so duplicates are neighbours: O(n log n) for an
 * archive crafted with many members. */
#include "runtime/zip_read.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Members are copied through a buffer of this size. */
#define ZIP_CHUNK (1 << 20)

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

/* Deflate makes at most about 1032 bytes of one; a member claiming more is
 * a zip bomb's header, refused before a byte is inflated. */
#define ZIP_MAX_RATIO 1032

/* The member's size as its headers give it, checked against the limit and
 * against what its compressed bytes can make. */
static mr_status member_size(zip_t *za, zip_int64_t i, const char *name, uint64_t limit,
                             zip_uint64_t *size, mr_error *err) {
    zip_stat_t sb;
    zip_stat_init(&sb);
    if (zip_stat_index(za, (zip_uint64_t)i, 0, &sb) != 0 || !(sb.valid & ZIP_STAT_SIZE) ||
        !(sb.valid & ZIP_STAT_COMP_SIZE))
        return mr_error_set(err, MR_ERR_DATA, "%s: the member's size cannot be read: %s", name,
                            zip_strerror(za));
    if (sb.size > limit)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: member of %llu bytes is larger than the limit (%llu bytes)", name,
                            (unsigned long long)sb.size, (unsigned long long)limit);
    if (sb.size / ZIP_MAX_RATIO > sb.comp_size + 1)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: the member claims %llu bytes from %llu compressed: more than "
                            "deflate makes (a damaged or crafted archive)",
                            name, (unsigned long long)sb.size, (unsigned long long)sb.comp_size);
    *size = sb.size;
    return MR_OK;
}

mr_status mr_zip_copy_member(zip_t *za, zip_int64_t i, const char *name, uint64_t limit, int fd,
                             mr_error *err) {
    zip_uint64_t size = 0, total = 0;
    MR_CHECK(member_size(za, i, name, limit, &size, err));
    zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)i, 0);
    if (zf == NULL)
        return mr_error_set(err, MR_ERR_DATA, "%s: cannot read the member: %s", name,
                            zip_strerror(za));
    char *buf = malloc(ZIP_CHUNK);
    mr_status st = buf ? MR_OK : mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", name);
    zip_int64_t got = 0;
    while (st == MR_OK && (got = zip_fread(zf, buf, ZIP_CHUNK)) > 0) {
        if ((total += (zip_uint64_t)got) > size) {
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: the member inflates to more than the %llu bytes its header "
                              "gives (a damaged or crafted archive)",
                              name, (unsigned long long)size);
            break;
        }
        for (zip_int64_t done = 0; done < got && st == MR_OK;) {
            ssize_t w = write(fd, buf + done, (size_t)(got - done));
            if (w < 0 && errno != EINTR)
                st = mr_error_set(err, MR_ERR_IO, "%s: cannot buffer the member: %s", name,
                                  strerror(errno));
            if (w > 0) done += w;
        }
    }
    if (st == MR_OK && got < 0)
        st = mr_error_set(err, MR_ERR_DATA, "%s: damaged member: %s", name, zip_file_strerror(zf));
    free(buf);
    zip_fclose(zf);
    return st;
}
