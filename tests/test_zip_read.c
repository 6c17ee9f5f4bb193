/* test_zip_read.c: unit tests of runtime/zip_read.c, and of the .npz
 * reader over it. Archives are written here with libzip; a member of a
 * name libzip will not write twice (or at all) gets a stand-in name of the
 * same length, patched in the file's bytes afterwards (local header and
 * central directory: the checksums cover the data, not the names). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "runtime/npz.h"
#include "runtime/zip_read.h"
#include "tests/testutil.h"

static const char *dir;

static void setup(void) {
    dir = tu_tmpdir();
}

/* dir/file with members named names[i], each holding its own name; then
 * every `from` in the file's bytes becomes `to` (same length). */
static char *write_zip(const char *file, const char *const *names, int n, const char *from,
                       const char *to) {
    char *path = malloc(4200);
    snprintf(path, 4200, "%s/%s", dir, file);
    int code = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &code);
    ck_assert_ptr_nonnull(za);
    for (int i = 0; i < n; i++) {
        zip_source_t *src = zip_source_buffer(za, names[i], strlen(names[i]), 0);
        ck_assert_int_ge(zip_file_add(za, names[i], src, 0), 0);
    }
    ck_assert_int_eq(zip_close(za), 0);
    if (from == NULL) return path;
    ck_assert_uint_eq(strlen(from), strlen(to));
    size_t size = 0;
    char *bytes = tu_read_file(path, &size);
    int patched = 0;
    for (size_t i = 0; i + strlen(from) <= size; i++)
        if (memcmp(bytes + i, from, strlen(from)) == 0)
            memcpy(bytes + i, to, strlen(to)), patched++;
    ck_assert_int_ge(patched, 2); /* local header and central directory */
    FILE *f = fopen(path, "wb");
    ck_assert_uint_eq(fwrite(bytes, 1, size, f), size);
    fclose(f);
    free(bytes);
    return path;
}

/* The verdict of mr_zip_check_names on dir/file (its message in err). */
static mr_status check(const char *path, mr_error *err) {
    int code = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY, &code);
    ck_assert_msg(za != NULL, "%s: zip_open %d", path, code);
    mr_status st = mr_zip_check_names(za, path, err);
    zip_discard(za);
    return st;
}

START_TEST(distinct_names_pass) {
    const char *const names[] = {"x_train.npy", "y_train.npy", "assets/a.txt", "a..b"};
    char *path = write_zip("ok.zip", names, 4, NULL, NULL);
    mr_error err = {0};
    ck_assert_msg(check(path, &err) == MR_OK, "%s", err.msg);
    free(path);
}
END_TEST

/* Two members of one name: refused, naming the file and the member; the
 * .npz reader refuses the archive before reading a member. */
START_TEST(duplicate_refused) {
    const char *const names[] = {"x_train.npy", "x_trainQ.np", "y_train.npy"};
    /* "x_trainQ.np" and "x_train.npy" have one length: the second becomes the first */
    char *path = write_zip("dup.npz", names, 3, "x_trainQ.np", "x_train.npy");
    mr_error err = {0};
    ck_assert_int_eq(check(path, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "'x_train.npy' appears twice"), "%s",
                  err.msg);
    mr_error_clear(&err);
    char list[256];
    ck_assert_int_eq(mr_npz_members(path, list, sizeof list, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "appears twice"), "%s", err.msg);
    free(path);
}
END_TEST

/* Names that are paths out of the archive's folder. */
START_TEST(path_names_refused) {
    static const char *const bad[][2] = {
        {"Xetc/passwd", "/etc/passwd"}, {"abXX/x.npy", "a/../x.npy"}, {"XXx.npy", "..x.npy"}};
    for (int i = 0; i < 3; i++) {
        const char *names[] = {bad[i][0]};
        /* libzip refuses no name; a name of the same length is patched in */
        char *path = write_zip("p.zip", names, 1, bad[i][0], bad[i][1]);
        mr_error err = {0};
        mr_status st = check(path, &err);
        if (i < 2) {
            ck_assert_int_eq(st, MR_ERR_DATA);
            ck_assert_msg(strstr(err.msg, "is a path out of the archive"), "%s", err.msg);
        } else {
            ck_assert_msg(st == MR_OK, "'..x.npy' is a name, not a path: %s", err.msg);
        }
        free(path);
    }
    const char *const back[] = {"a\\b.npy"};
    char *path = write_zip("b.zip", back, 1, NULL, NULL);
    mr_error err = {0};
    ck_assert_int_eq(check(path, &err), MR_ERR_DATA);
    free(path);
}
END_TEST

int main(void) {
    Suite *s = suite_create("zip_read");
    TCase *tc = tcase_create("zip_read");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, distinct_names_pass);
    tcase_add_test(tc, duplicate_refused);
    tcase_add_test(tc, path_names_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
