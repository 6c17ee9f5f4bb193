/* test_npy.c: unit tests of runtime/npy.c, the NPY module's own functions:
 * mr_npy_write's layout read back by mr_npy_read, a gzip-compressed file,
 * mr_npy_read_fd on an open descriptor (an .npz member's way in), and the
 * refusals of each. Headers are written here by hand (numpy's layout), so
 * the reader is not checked by its own writer alone. The NPY cases reached
 * through a spec (mr_array_read) are tests/test_array.c's. */
#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/array.h"
#include "runtime/npy.h"
#include "tests/testutil.h"

static char tmp_dir[4096];

static char *tmp_path(const char *name) {
    size_t n = strlen(tmp_dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", tmp_dir, name);
    return p;
}

/* The bytes of an NPY 1.0 file with header `dict` and `len` bytes of data
 * (malloc'd; *n its length). */
static uint8_t *npy_bytes(const char *dict, const void *data, size_t len, size_t *n) {
    size_t dlen = strlen(dict), padded = (10 + dlen + 1 + 63) / 64 * 64, hlen = padded - 10;
    uint8_t *b = calloc(1, padded + len + 1);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)hlen, b[9] = (uint8_t)(hlen >> 8);
    memset(b + 10, ' ', hlen);
    memcpy(b + 10, dict, dlen);
    b[padded - 1] = '\n';
    if (len > 0) memcpy(b + padded, data, len);
    *n = padded + len;
    return b;
}

/* tmp_dir/name holding an NPY 1.0 file, through gzip if gz (path malloc'd). */
static char *write_npy_raw(const char *name, const char *dict, const void *data, size_t len,
                           int gz) {
    size_t n;
    uint8_t *b = npy_bytes(dict, data, len, &n);
    char *path;
    if (gz) {
        path = tmp_path(name);
        gzFile f = gzopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(gzwrite(f, b, (unsigned)n), (int)n);
        ck_assert_int_eq(gzclose(f), Z_OK);
    } else {
        path = tu_write_file(tmp_dir, name, b, n);
    }
    free(b);
    return path;
}

/* mr_npy_write then mr_npy_read: numpy's layout (a 64-byte aligned header
 * ending in '\n') and the same dtype, shape and bytes back. */
START_TEST(test_npy_write_read) {
    int32_t v[6] = {1, -2, 3, 400000, -5, 6};
    mr_array a = {.dtype = MR_DTYPE_I32, .ndim = 2, .dims = {3, 2}, .data = v};
    char *p = tmp_path("w.npy");
    mr_error err = {0};
    ck_assert_msg(mr_npy_write(p, &a, &err) == MR_OK, "%s", err.msg);
    size_t flen;
    char *file = tu_read_file(p, &flen);
    ck_assert_ptr_nonnull(file);
    size_t hlen = (uint8_t)file[8] | (size_t)(uint8_t)file[9] << 8;
    ck_assert_uint_eq((10 + hlen) % 64, 0);
    ck_assert_uint_eq(flen, 10 + hlen + sizeof v);
    const char *want = "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }";
    ck_assert_msg(strncmp(file + 10, want, strlen(want)) == 0, "%.*s", (int)hlen, file + 10);
    free(file);
    mr_array b;
    ck_assert_msg(mr_npy_read(p, &b, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(b.dtype, MR_DTYPE_I32);
    ck_assert_int_eq(b.ndim, 2);
    ck_assert_int_eq(b.dims[0], 3);
    ck_assert_int_eq(b.dims[1], 2);
    ck_assert_mem_eq(b.data, v, sizeof v);
    mr_array_free(&b);
    free(p);
}
END_TEST

/* A gzip-compressed NPY reads as the plain one; float64 arrives as float32. */
START_TEST(test_npy_gzip_float64) {
    const double v[3] = {0.5, -1.25, 3.0};
    char *p = write_npy_raw(
        "f8.npy.gz", "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", v, sizeof v, 1);
    mr_array a;
    mr_error err = {0};
    ck_assert_msg(mr_npy_read(p, &a, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(a.dtype, MR_DTYPE_F32);
    ck_assert_int_eq(a.from_float64, 1);
    ck_assert_int_eq(a.ndim, 1);
    ck_assert_int_eq(a.dims[0], 3);
    const float *x = a.data;
    ck_assert(x[0] == 0.5f && x[1] == -1.25f && x[2] == 3.0f);
    mr_array_free(&a);
    free(p);
}
END_TEST

/* mr_npy_read_fd: an open descriptor, named in messages as the caller says. */
START_TEST(test_npy_fd) {
    const float v[2] = {1.5f, -2.0f};
    char *p = write_npy_raw("fd.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                            v, sizeof v, 0);
    mr_array a;
    mr_error err = {0};
    int fd = open(p, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(mr_npy_read_fd(fd, "some.npz:x", &a, &err), MR_OK);
    ck_assert_int_eq(a.dtype, MR_DTYPE_F32);
    ck_assert(((float *)a.data)[0] == 1.5f && ((float *)a.data)[1] == -2.0f);
    mr_array_free(&a);
    free(p);
    p = write_npy_raw("fd2.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (9,), }", v,
                      sizeof v, 0);
    fd = open(p, O_RDONLY);
    ck_assert_int_eq(mr_npy_read_fd(fd, "some.npz:x", &a, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "some.npz:x: truncated") == err.msg, "%s", err.msg);
    ck_assert_ptr_null(a.data);
    ck_assert_int_eq(a.ndim, 0);
    free(p);
}
END_TEST

/* The reader's refusals name the path: a bad header, a dtype it does not
 * read; nothing is left in the output. */
START_TEST(test_npy_read_refusals) {
    const float v[2] = {0};
    char *p = write_npy_raw("f2.npy", "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
                            v, 4, 0);
    mr_array a;
    memset(&a, 0xAB, sizeof a);
    mr_error err = {0};
    ck_assert_int_eq(mr_npy_read(p, &a, &err), MR_ERR_DATA);
    ck_assert_ptr_eq(strstr(err.msg, p), err.msg);
    ck_assert_ptr_nonnull(strstr(err.msg, "unsupported NPY dtype '<f2'"));
    ck_assert_ptr_null(a.data);
    free(p);
    p = write_npy_raw("bad.npy", "{'descr': '<f4', 'shape': (2,), }", v, sizeof v, 0);
    err = (mr_error){0}; /* an error keeps its first message */
    ck_assert_int_eq(mr_npy_read(p, &a, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "bad NPY header: missing one of the keys"), "%s", err.msg);
    free(p);
}
END_TEST

/* mr_npy_write refuses what it cannot write, naming the path. */
START_TEST(test_npy_write_errors) {
    char *p = tmp_path("no-such-dir/x.npy");
    uint8_t v[2] = {1, 2};
    mr_array a = {.dtype = MR_DTYPE_U8, .ndim = 1, .dims = {2}, .data = v};
    mr_error err = {0};
    ck_assert_int_eq(mr_npy_write(p, &a, &err), MR_ERR_IO);
    ck_assert_ptr_eq(strstr(err.msg, p), err.msg);
    ck_assert_ptr_nonnull(strstr(err.msg, "cannot create"));
    free(p);
    p = tmp_path("nodata.npy");
    a.data = NULL;
    err = (mr_error){0};
    ck_assert_int_eq(mr_npy_write(p, &a, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "array has no data"), "%s", err.msg);
    ck_assert(!tu_exists(p));
    free(p);
}
END_TEST

static Suite *npy_suite(void) {
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_add_test(tc, test_npy_write_read);
    tcase_add_test(tc, test_npy_gzip_float64);
    tcase_add_test(tc, test_npy_fd);
    tcase_add_test(tc, test_npy_read_refusals);
    tcase_add_test(tc, test_npy_write_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "%s", tu_tmpdir());
    SRunner *sr = srunner_create(npy_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    tu_run(cmd, NULL);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
