/* test_npz.c: unit tests of runtime/npz.c. Archives are built here with libzip, as
 * numpy.savez (stored members) and numpy.savez_compressed (deflated) write them, each member a
 * .npy whose header is written by hand (numpy's layout), so no Python is needed. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "runtime/array.h"
#include "runtime/npz.h"
#include "tests/testutil.h"

static const char *dir;

/* One member: its name in the archive, its dtype, shape and data. */
typedef struct member {
    const char *name, *descr, *shape;
    const void *data;
    size_t len;
} member;

/* The bytes of an NPY 1.0 file (malloc'd; *n its length). */
static void *npy_bytes(const member *m, size_t *n) {
    char dict[256];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", m->descr,
             m->shape);
    size_t dlen = strlen(dict), padded = (10 + dlen + 1 + 63) / 64 * 64, hlen = padded - 10;
    unsigned char *b = calloc(1, padded + m->len);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)hlen, b[9] = (unsigned char)(hlen >> 8);
    memset(b + 10, ' ', hlen);
    memcpy(b + 10, dict, dlen);
    b[padded - 1] = '\n';
    memcpy(b + padded, m->data, m->len);
    *n = padded + m->len;
    return b;
}

/* dir/file, an archive of `count` members, deflated (savez_compressed) or stored (savez). */
static char *write_npz(const char *file, const member *ms, int count, int deflate) {
    char *path = malloc(strlen(dir) + strlen(file) + 2);
    sprintf(path, "%s/%s", dir, file);
    int code = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &code);
    ck_assert_ptr_nonnull(za);
    for (int i = 0; i < count; i++) {
        size_t n;
        void *b = npy_bytes(&ms[i], &n);
        zip_source_t *src = zip_source_buffer(za, b, n, 1); /* freed by libzip */
        ck_assert_ptr_nonnull(src);
        zip_int64_t idx = zip_file_add(za, ms[i].name, src, ZIP_FL_OVERWRITE);
        ck_assert_int_ge(idx, 0);
        ck_assert_int_eq(zip_set_file_compression(za, (zip_uint64_t)idx,
                                                  deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0),
                         0);
    }
    ck_assert_int_eq(zip_close(za), 0);
    return path;
}

static const unsigned char X[2][2][3] = {{{0, 1, 2}, {3, 4, 5}},
                                         {{250, 251, 252}, {253, 254, 255}}};
static const unsigned char Y[2] = {7, 3};
static const double XT[2] = {0.5, -1.25};
static const short YT[2] = {-1, 300};

/* keras.datasets' names: uint8 images (2, 2, 3), uint8 labels; float64 and int16 for the test. */
static char *keras_like(const char *file, int deflate) {
    const member ms[] = {
        {"x_train.npy", "|u1", "(2, 2, 3)", X, sizeof X},
        {"y_train.npy", "|u1", "(2,)", Y, sizeof Y},
        {"x_test.npy", "<f8", "(2, 1)", XT, sizeof XT},
        {"y_test.npy", "<i2", "(2,)", YT, sizeof YT},
    };
    return write_npz(file, ms, 4, deflate);
}

static void read_ok(const char *spec, mr_array *a) {
    mr_error err = {0};
    ck_assert_msg(mr_array_read(spec, a, &err) == MR_OK, "%s: %s", spec, err.msg);
}

/* mr_array_read's one-line message for spec, which must fail with `want`. */
static const char *read_fails(const char *spec, mr_status want) {
    static mr_error err;
    mr_error_clear(&err);
    mr_array a;
    memset(&a, 0xAB, sizeof a);
    ck_assert_int_eq(mr_array_read(spec, &a, &err), want);
    ck_assert_ptr_null(a.data);
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    return err.msg;
}

START_TEST(stored_and_deflated_members) {
    for (int deflate = 0; deflate < 2; deflate++) {
        char *p = keras_like(deflate ? "c.npz" : "s.npz", deflate);
        char spec[4200];
        mr_array a;
        snprintf(spec, sizeof spec, "%s:x_train", p);
        read_ok(spec, &a);
        ck_assert_int_eq(a.dtype, MR_DTYPE_U8);
        ck_assert_int_eq(a.ndim, 3);
        ck_assert_int_eq(a.dims[0], 2);
        ck_assert_int_eq(a.dims[2], 3);
        ck_assert_mem_eq(a.data, X, sizeof X);
        mr_array_free(&a);
        snprintf(spec, sizeof spec, "%s:y_train.npy", p); /* with its extension too */
        read_ok(spec, &a);
        ck_assert_mem_eq(a.data, Y, sizeof Y);
        mr_array_free(&a);
        snprintf(spec, sizeof spec, "%s:x_test", p);
        read_ok(spec, &a);
        ck_assert_int_eq(a.dtype, MR_DTYPE_F32);
        ck_assert_int_eq(a.from_float64, 1);
        ck_assert(((float *)a.data)[0] == 0.5f && ((float *)a.data)[1] == -1.25f);
        mr_array_free(&a);
        mr_error err = {0};
        ck_assert_int_eq(mr_npz_read(p, "y_test", &a, &err), MR_OK);
        ck_assert_int_eq(a.dtype, MR_DTYPE_I32);
        ck_assert_int_eq(((int32_t *)a.data)[0], -1);
        ck_assert_int_eq(((int32_t *)a.data)[1], 300);
        mr_array_free(&a);
        free(p);
    }
}
END_TEST

START_TEST(members_and_has) {
    char *p = keras_like("m.npz", 1);
    char list[256];
    mr_error err = {0};
    ck_assert_int_eq(mr_npz_members(p, list, sizeof list, &err), MR_OK);
    ck_assert_str_eq(list, "x_train, y_train, x_test, y_test");
    ck_assert_int_eq(mr_npz_has(p, "x_test"), 1);
    ck_assert_int_eq(mr_npz_has(p, "x_test.npy"), 1);
    ck_assert_int_eq(mr_npz_has(p, "x_val"), 0);
    ck_assert_int_eq(mr_npz_has("/nonexistent/a.npz", "x_train"), 0);
    ck_assert_int_eq(mr_npz_is_archive("a/b.npz"), 1);
    ck_assert_int_eq(mr_npz_is_archive("a/b.npz:x"), 0);
    ck_assert_int_eq(mr_npz_is_archive("b.npy"), 0);
    free(p);
}
END_TEST

START_TEST(wrong_names_and_files) {
    char *p = keras_like("w.npz", 0);
    char spec[4200];
    snprintf(spec, sizeof spec, "%s:images", p);
    const char *msg = read_fails(spec, MR_ERR_DATA);
    ck_assert_msg(strstr(msg, p) == msg, "%s", msg);
    ck_assert_msg(strstr(msg, "no member 'images'; the archive has: x_train, y_train, x_test, "
                              "y_test"),
                  "%s", msg);
    /* the whole archive where one array is read: which member? */
    msg = read_fails(p, MR_ERR_CONFIG);
    ck_assert_msg(strstr(msg, "needs a member name") && strstr(msg, "(it has: x_train, y_train"),
                  "%s", msg);
    snprintf(spec, sizeof spec, "%s:", p);
    ck_assert(strstr(read_fails(spec, MR_ERR_CONFIG), "no member named after ':'"));
    /* not a zip, and no file */
    char *bad = tu_write_text(dir, "bad.npz", "not a zip\n");
    snprintf(spec, sizeof spec, "%s:x_train", bad);
    msg = read_fails(spec, MR_ERR_DATA);
    ck_assert_msg(strstr(msg, bad) == msg && strstr(msg, "cannot open as an .npz"), "%s", msg);
    msg = read_fails("/nonexistent/d.npz:x", MR_ERR_DATA);
    ck_assert_msg(strstr(msg, "/nonexistent/d.npz: cannot open"), "%s", msg);
    free(bad), free(p);
}
END_TEST

/* A member that is no good .npy is named as path:member, with the NPY reader's reason. */
START_TEST(damaged_members) {
    const float nan_row[2] = {1.0f, 0.0f / 0.0f};
    const member ms[] = {
        {"x_train.npy", "<f4", "(5,)", nan_row, sizeof nan_row}, /* shorter than its header says */
        {"y_train.npy", "<f2", "(1,)", nan_row, 2},
        {"x_test.npy", "<f4", "(1, 2)", nan_row, sizeof nan_row},
    };
    for (int deflate = 0; deflate < 2; deflate++) {
        char *p = write_npz("d.npz", ms, 3, deflate);
        char spec[4200], want[4300];
        snprintf(spec, sizeof spec, "%s:x_train", p);
        snprintf(want, sizeof want, "%s:x_train: truncated", p);
        const char *msg = read_fails(spec, MR_ERR_DATA);
        ck_assert_msg(strstr(msg, want) == msg, "%s", msg);
        snprintf(spec, sizeof spec, "%s:y_train", p);
        ck_assert(strstr(read_fails(spec, MR_ERR_DATA), "unsupported NPY dtype '<f2'"));
        snprintf(spec, sizeof spec, "%s:x_test", p);
        ck_assert(strstr(read_fails(spec, MR_ERR_DATA), ":x_test: example 0 has a non-finite"));
        free(p);
    }
    /* deflated bytes damaged inside the archive: the CRC or the stream says so */
    const member one[] = {{"x_train.npy", "|u1", "(2, 2, 3)", X, sizeof X}};
    char *p = write_npz("crc.npz", one, 1, 1);
    size_t n;
    unsigned char *b = (unsigned char *)tu_read_file(p, &n);
    b[30 + strlen("x_train.npy") + 4] ^= 0x55;
    free(tu_write_file(dir, "crc.npz", b, n));
    char spec[4200];
    snprintf(spec, sizeof spec, "%s:x_train", p);
    const char *msg = read_fails(spec, MR_ERR_DATA);
    ck_assert_msg(strstr(msg, spec) == msg, "%s", msg);
    free(b), free(p);
}
END_TEST

/* Sets the uncompressed size of every member of dir/file to `size` in both
 * headers: the local header (PK 3 4, size at byte 22) and the central
 * directory (PK 1 2, at byte 24), as a crafted archive would. */
static void lie_about_sizes(const char *path, uint32_t size) {
    size_t n = 0;
    unsigned char *b = (unsigned char *)tu_read_file(path, &n);
    int patched = 0;
    for (size_t i = 0; i + 46 <= n; i++) {
        size_t at = 0;
        if (memcmp(b + i, "PK\3\4", 4) == 0) at = i + 22;
        if (memcmp(b + i, "PK\1\2", 4) == 0) at = i + 24;
        if (at == 0) continue;
        for (int k = 0; k < 4; k++)
            b[at + k] = (unsigned char)(size >> (8 * k));
        patched++;
    }
    ck_assert_int_eq(patched, 2);
    FILE *f = fopen(path, "wb");
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
    free(b);
}

/* A member whose headers lie about its size: one that inflates to more
 * than they say stops there (it filled memory: a 3 MB file took 3.2 GB),
 * and one claiming more than deflate can make of its bytes is refused
 * before a byte is inflated. */
START_TEST(lying_sizes_refused) {
    static unsigned char zeros[200000];
    const member big = {"x.npy", "|u1", "(200000,)", zeros, sizeof zeros};
    for (int lie = 0; lie < 2; lie++) {
        char *path = write_npz(lie ? "bomb.npz" : "small.npz", &big, 1, 1);
        lie_about_sizes(path, lie ? 0x7fffffffu : 1000u);
        mr_array a;
        mr_error err = {0};
        ck_assert_int_eq(mr_npz_read(path, "x", &a, &err), MR_ERR_DATA);
        ck_assert_msg(strstr(err.msg, lie ? "more than deflate makes"
                                          : "inflates to more than the 1000 bytes its header"),
                      "%s", err.msg);
        free(path);
    }
}
END_TEST

START_TEST(data_paths_rule) {
    char img[256], lab[256];
    mr_error err = {0};
    ck_assert_int_eq(mr_npz_data_paths("d/f.npz", "", "train", img, lab, sizeof img, &err), MR_OK);
    ck_assert_str_eq(img, "d/f.npz:x_train");
    ck_assert_str_eq(lab, "d/f.npz:y_train");
    mr_npz_data_paths("f.npz", "f.npz", "test", img, lab, sizeof img, &err);
    ck_assert_str_eq(img, "f.npz:x_test");
    ck_assert_str_eq(lab, "f.npz:y_test");
    mr_npz_data_paths("f.npz", "g.npz:labels", "val", img, lab, sizeof img, &err);
    ck_assert_str_eq(img, "f.npz:x_val");
    ck_assert_str_eq(lab, "g.npz:labels");
    mr_npz_data_paths("f.npz:a", "f.npz:b", "train", img, lab, sizeof img, &err);
    ck_assert_str_eq(img, "f.npz:a");
    ck_assert_str_eq(lab, "f.npz:b");
    mr_npz_data_paths("imgs.gz", "", "train", img, lab, sizeof img, &err);
    ck_assert_str_eq(img, "imgs.gz");
    ck_assert_str_eq(lab, "");
    char small[10];
    ck_assert_int_eq(mr_npz_data_paths("long/f.npz", "", "train", small, lab, sizeof small, &err),
                     MR_ERR_CONFIG);
}
END_TEST

int main(void) {
    dir = tu_tmpdir();
    Suite *s = suite_create("npz");
    TCase *tc = tcase_create("npz");
    tcase_add_test(tc, stored_and_deflated_members);
    tcase_add_test(tc, members_and_has);
    tcase_add_test(tc, wrong_names_and_files);
    tcase_add_test(tc, damaged_members);
    tcase_add_test(tc, data_paths_rule);
    tcase_add_test(tc, lying_sizes_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
