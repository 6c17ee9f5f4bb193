/* test_dataset.c: unit tests of runtime/dataset.c: loading images and labels
 * (IDX written byte by byte here, NPY through mr_npy_write), the label
 * and row checks and their messages, per-batch conversion with scaling and
 * standardisation (checked against sums done by hand in double), and random
 * augmentation (flips and zero-filled shifts, keyed by sample so a sample's
 * augmentation does not depend on the batch it lands in). */
#include <check.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/array.h"
#include "runtime/npy.h"
#include "runtime/dataset.h"
#include "runtime/rng.h"
#include "tests/testutil.h"

static char tmp_dir[4096];

/* ---- helpers ------------------------------------------------------------- */

static void put_be32(uint8_t *b, uint32_t v) {
    b[0] = (uint8_t)(v >> 24), b[1] = (uint8_t)(v >> 16), b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

/* A raw uint8 IDX file: magic 00 00 08 ndim, big-endian dims, payload. */
static char *write_idx_u8(const char *name, int ndim, const uint32_t *dims, const uint8_t *data) {
    size_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= dims[i];
    size_t hlen = 4 + 4 * (size_t)ndim;
    uint8_t *buf = malloc(hlen + count);
    buf[0] = 0, buf[1] = 0, buf[2] = 0x08, buf[3] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++)
        put_be32(buf + 4 + 4 * i, dims[i]);
    memcpy(buf + hlen, data, count);
    char *path = tu_write_file(tmp_dir, name, buf, hlen + count);
    free(buf);
    return path;
}

/* An NPY file through the library's writer (tested in test_array). */
static char *write_npy(const char *name, mr_dtype dtype, int ndim, const int64_t *dims,
                       const void *data) {
    size_t n = strlen(tmp_dir) + strlen(name) + 2;
    char *path = malloc(n);
    snprintf(path, n, "%s/%s", tmp_dir, name);
    mr_array a = {.dtype = dtype, .ndim = ndim, .data = (void *)data};
    for (int i = 0; i < ndim; i++)
        a.dims[i] = dims[i];
    mr_error err = {0};
    ck_assert_msg(mr_npy_write(path, &a, &err) == MR_OK, "%s", err.msg);
    return path;
}

static void load_ok(mr_dataset *ds, const char *images, const char *labels) {
    mr_error err = {0};
    mr_status st = mr_dataset_load(ds, images, labels, &err);
    ck_assert_msg(st == MR_OK, "load %s + %s: %s", images, labels, err.msg);
    ck_assert_int_eq(err.status, MR_OK);
}

/* Loads expecting `want`; checks the message is one line naming `path` and
 * that the dataset is left empty. Returns the message (static). */
static const char *load_fail(const char *images, const char *labels, mr_status want,
                             const char *path) {
    static mr_error err;
    mr_dataset ds;
    memset(&ds, 0xAB, sizeof ds); /* garbage in: load must reset it */
    memset(&err, 0, sizeof err);
    mr_status st = mr_dataset_load(&ds, images, labels, &err);
    ck_assert_msg(st == want, "load %s + %s: status %s, expected %s (%s)", images, labels,
                  mr_status_name(st), mr_status_name(want), err.msg);
    ck_assert_int_eq(err.status, want);
    ck_assert_msg(strstr(err.msg, path) != NULL, "message does not name %s: %s", path, err.msg);
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    ck_assert_ptr_null(ds.x.data);
    ck_assert_ptr_null(ds.y);
    ck_assert_int_eq(ds.n, 0);
    mr_dataset_free(&ds); /* safe on what a failed load leaves */
    return err.msg;
}

/* 1 if `msg`, with every occurrence of the paths removed (temporary names can
 * hold digits), contains `value` as a whole number (not part of a longer
 * number or word; a leading '-' belongs to the number). */
static int has_number(const char *msg, long long value, const char *path1, const char *path2) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", msg);
    const char *paths[2] = {path1, path2};
    for (int p = 0; p < 2; p++) {
        if (paths[p] == NULL || paths[p][0] == '\0') continue;
        size_t pl = strlen(paths[p]);
        char *hit;
        while ((hit = strstr(buf, paths[p])) != NULL)
            memmove(hit, hit + pl, strlen(hit + pl) + 1);
    }
    char want[32];
    snprintf(want, sizeof want, "%lld", value);
    size_t wl = strlen(want);
    for (const char *s = buf; (s = strstr(s, want)) != NULL; s++) {
        int before_ok = s == buf || (!isalnum((unsigned char)s[-1]) && (value < 0 || s[-1] != '-'));
        int after_ok = !isalnum((unsigned char)s[wl]);
        if (before_ok && after_ok) return 1;
    }
    return 0;
}

/* A dataset built in memory: n float images of `row` values, value
 * (r * 1000 + j + 1) so every value is distinct and nonzero; labels r % 10. */
static void make_float_dataset(mr_dataset *ds, int64_t n, int64_t row) {
    memset(ds, 0, sizeof *ds);
    ds->scale = 1.0f;
    ds->x.dtype = MR_DTYPE_F32;
    ds->x.ndim = 2;
    ds->x.dims[0] = n, ds->x.dims[1] = row;
    float *x = malloc(sizeof(float) * (size_t)(n * row));
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < row; j++)
            x[r * row + j] = (float)(r * 1000 + j + 1);
    ds->x.data = x;
    ds->y = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t r = 0; r < n; r++)
        ds->y[r] = (int32_t)(r % 10);
    ds->n = n;
    ds->row = row;
}

/* ---- loading ---------------------------------------------------------------- */

START_TEST(test_load_idx_u8) {
    uint8_t img[6 * 3 * 4], lab[6] = {3, 1, 4, 1, 5, 9};
    for (int i = 0; i < (int)sizeof img; i++)
        img[i] = (uint8_t)(i * 37 + 5);
    char *ip = write_idx_u8("img_u8", 3, (uint32_t[]){6, 3, 4}, img);
    char *lp = write_idx_u8("lab_u8", 1, (uint32_t[]){6}, lab);
    mr_dataset ds;
    load_ok(&ds, ip, lp);
    ck_assert_int_eq(ds.n, 6);
    ck_assert_int_eq(ds.row, 12);
    ck_assert_int_eq(ds.x.dtype, MR_DTYPE_U8); /* kept as uint8 */
    ck_assert_int_eq(ds.x.ndim, 3);
    ck_assert_mem_eq(ds.x.data, img, sizeof img);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(ds.y[i], lab[i]);
    ck_assert_float_eq(ds.scale, 1.0f);
    ck_assert_ptr_null(ds.mean);
    ck_assert_ptr_null(ds.inv_std);
    mr_dataset_free(&ds);
    ck_assert_ptr_null(ds.x.data);
    ck_assert_ptr_null(ds.y);
    free(ip), free(lp);
}
END_TEST

START_TEST(test_load_npy_i64_labels) {
    float img[4 * 5];
    for (int i = 0; i < 20; i++)
        img[i] = (float)i * 0.25f - 2.0f;
    const int64_t lab[4] = {0, 7, 2, 100000};
    char *ip = write_npy("img_f32.npy", MR_DTYPE_F32, 2, (int64_t[]){4, 5}, img);
    char *lp = write_npy("lab_i64.npy", MR_DTYPE_I64, 1, (int64_t[]){4}, lab);
    mr_dataset ds;
    load_ok(&ds, ip, lp);
    ck_assert_int_eq(ds.n, 4);
    ck_assert_int_eq(ds.row, 5);
    ck_assert_int_eq(ds.x.dtype, MR_DTYPE_F32);
    ck_assert_mem_eq(ds.x.data, img, sizeof img);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ds.y[i], lab[i]);
    mr_dataset_free(&ds);
    free(ip), free(lp);
}
END_TEST

/* Labels of shape (n, 1), as Keras users often save them. */
START_TEST(test_load_labels_n_by_1) {
    uint8_t img[5 * 2] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const int32_t lab[5] = {4, 3, 2, 1, 0};
    char *ip = write_idx_u8("img_5x2", 2, (uint32_t[]){5, 2}, img);
    char *lp = write_npy("lab_n1.npy", MR_DTYPE_I32, 2, (int64_t[]){5, 1}, lab);
    mr_dataset ds;
    load_ok(&ds, ip, lp);
    ck_assert_int_eq(ds.n, 5);
    ck_assert_int_eq(ds.row, 2);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(ds.y[i], lab[i]);
    mr_dataset_free(&ds);
    free(ip), free(lp);
}
END_TEST

/* Integer images become float. */
START_TEST(test_load_int_images_to_float) {
    const int32_t img[3 * 2] = {-5, 0, 7, 1000000, -2, 3};
    const uint8_t lab[3] = {0, 1, 0};
    char *ip = write_npy("img_i32.npy", MR_DTYPE_I32, 2, (int64_t[]){3, 2}, img);
    char *lp = write_npy("lab_u8.npy", MR_DTYPE_U8, 1, (int64_t[]){3}, lab);
    mr_dataset ds;
    load_ok(&ds, ip, lp);
    ck_assert_int_eq(ds.x.dtype, MR_DTYPE_F32);
    const float *x = ds.x.data;
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq(x[i], (float)img[i]);
    mr_dataset_free(&ds);
    free(ip), free(lp);
}
END_TEST

/* --synthetic's examples: the shape asked for, uint8 values over the
 * whole range, labels over every class and no other, the same for the same
 * seed and different for another; every byte is mr_synthetic_byte's (what
 * a GPU makes), also past Philox's first counter word; the labels alone
 * (mr_dataset_fill_labels) are mr_dataset_fill's. */
START_TEST(test_synthetic) {
    mr_dataset a, b;
    const int dims[3] = {5, 6, 3};
    ck_assert_int_eq(mr_dataset_synthetic(&a, 1000, 3, dims, 7, 42, NULL), MR_OK);
    ck_assert(a.n == 1000 && a.row == 90 && a.x.dtype == MR_DTYPE_U8 && a.x.ndim == 4);
    ck_assert(a.x.dims[0] == 1000 && a.x.dims[1] == 5 && a.x.dims[2] == 6 && a.x.dims[3] == 3);
    ck_assert_float_eq(a.scale, 1.0f);
    int seen[7] = {0}, lo = 255, hi = 0;
    for (int64_t i = 0; i < a.n; i++) {
        ck_assert(a.y[i] >= 0 && a.y[i] < 7);
        seen[a.y[i]]++;
    }
    for (int c = 0; c < 7; c++)
        ck_assert_msg(seen[c] > 100, "class %d: %d of 1000", c, seen[c]);
    const uint8_t *x = a.x.data;
    double sum = 0.0;
    for (int64_t i = 0; i < a.n * a.row; i++) {
        lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
        sum += x[i];
    }
    ck_assert(lo == 0 && hi == 255);
    ck_assert(fabs(sum / (double)(a.n * a.row) - 127.5) < 1.0);
    uint32_t key[2], w[4];
    mr_rng_key(42, MR_RNG_STREAM_SYNTHETIC, key);
    ck_assert(a.synthetic == 1 && a.synthetic_key[0] == key[0] && a.synthetic_key[1] == key[1]);
    for (int64_t o = 0; o < a.n * a.row; o++)
        ck_assert_int_eq(mr_synthetic_byte(key[0], key[1], o), x[o]);
    /* byte 2^36 + 21: counter (0, 0, 1, 1) (2^32 + 1 calls of 16 bytes), word 1, byte 1 */
    mr_philox4x32(key[0], key[1], 0, 0, 1, 1, w);
    ck_assert_int_eq(mr_synthetic_byte(key[0], key[1], (INT64_C(1) << 36) + 21),
                     (uint8_t)(w[1] >> 8));
    const int64_t rows[4] = {999, 3, 3, 500};
    int32_t y[4], y2[4] = {-1, -1, -1, -1};
    float *xf = malloc(sizeof(float) * 4 * 90);
    mr_dataset_fill(&a, rows, 4, NULL, xf, y);
    mr_dataset_fill_labels(&a, rows, 4, y2);
    ck_assert_mem_eq(y, y2, sizeof y);
    ck_assert(y[0] == a.y[999] && y[1] == a.y[3] && y[3] == a.y[500]);
    free(xf);
    ck_assert_int_eq(mr_dataset_synthetic(&b, 1000, 3, dims, 7, 42, NULL), MR_OK);
    ck_assert_mem_eq(a.x.data, b.x.data, 90000);
    ck_assert_mem_eq(a.y, b.y, sizeof(int32_t) * 1000);
    mr_dataset_free(&b);
    ck_assert_int_eq(mr_dataset_synthetic(&b, 1000, 3, dims, 7, 43, NULL), MR_OK);
    ck_assert(memcmp(a.x.data, b.x.data, 90000) != 0);
    mr_dataset_free(&b);
    mr_dataset_free(&a);
    mr_error err = {0};
    ck_assert_int_eq(mr_dataset_synthetic(&a, 0, 3, dims, 7, 42, &err), MR_ERR_USAGE);
}
END_TEST

/* Images alone (labels NULL): the examples as with labels, every class id
 * the placeholder 0; a file without examples is still refused. */
START_TEST(test_load_images_only) {
    const int32_t img[3 * 2] = {-5, 0, 7, 1000000, -2, 3};
    char *ip = write_npy("img_only_i32.npy", MR_DTYPE_I32, 2, (int64_t[]){3, 2}, img);
    mr_dataset ds;
    memset(&ds, 0xAB, sizeof ds);
    load_ok(&ds, ip, NULL);
    ck_assert_int_eq(ds.n, 3);
    ck_assert_int_eq(ds.row, 2);
    ck_assert_int_eq(ds.x.dtype, MR_DTYPE_F32);
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq(((const float *)ds.x.data)[i], (float)img[i]);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ds.y[i], 0);
    ck_assert_str_eq(ds.note, "");
    mr_dataset_free(&ds);
    char *empty = write_npy("img_none.npy", MR_DTYPE_U8, 2, (int64_t[]){0, 2}, img);
    load_fail(empty, NULL, MR_ERR_DATA, empty);
    free(ip), free(empty);
}
END_TEST

START_TEST(test_load_count_mismatch) {
    uint8_t img[7 * 4] = {0}, lab[5] = {0, 1, 2, 3, 4};
    char *ip = write_idx_u8("img_7", 2, (uint32_t[]){7, 4}, img);
    char *lp = write_idx_u8("lab_5", 1, (uint32_t[]){5}, lab);
    const char *msg = load_fail(ip, lp, MR_ERR_DATA, lp);
    ck_assert_msg(has_number(msg, 5, ip, lp), "label count missing: %s", msg);
    ck_assert_msg(has_number(msg, 7, ip, lp), "image count missing: %s", msg);
    /* more labels than images is as wrong */
    uint8_t lab9[9] = {0};
    char *lp9 = write_idx_u8("lab_9", 1, (uint32_t[]){9}, lab9);
    msg = load_fail(ip, lp9, MR_ERR_DATA, lp9);
    ck_assert_msg(has_number(msg, 9, ip, lp9), "label count missing: %s", msg);
    ck_assert_msg(has_number(msg, 7, ip, lp9), "image count missing: %s", msg);
    free(ip), free(lp), free(lp9);
}
END_TEST

/* Float labels with integer values (what numpy gives after arithmetic)
 * are class ids; 0.5 or a negative one is not. */
START_TEST(test_load_float_labels) {
    uint8_t img[3 * 2] = {0};
    const float lab[3] = {0.0f, 1.0f, 2.0f};
    char *ip = write_idx_u8("img_3x2", 2, (uint32_t[]){3, 2}, img);
    char *lp = write_npy("lab_f32.npy", MR_DTYPE_F32, 1, (int64_t[]){3}, lab);
    mr_dataset ds;
    load_ok(&ds, ip, lp);
    ck_assert_int_eq(ds.y[0], 0);
    ck_assert_int_eq(ds.y[2], 2);
    ck_assert_str_eq(ds.note, "");
    mr_dataset_free(&ds);
    const float half[3] = {0.0f, 0.5f, 2.0f}, neg[3] = {0.0f, -1.0f, 2.0f};
    char *hp = write_npy("lab_half.npy", MR_DTYPE_F32, 1, (int64_t[]){3}, half);
    const char *msg = load_fail(ip, hp, MR_ERR_DATA, hp);
    ck_assert_msg(strstr(msg, "label 0.5 of example 1 is not a class id"), "%s", msg);
    char *np = write_npy("lab_negf.npy", MR_DTYPE_F32, 1, (int64_t[]){3}, neg);
    load_fail(ip, np, MR_ERR_DATA, np);
    free(ip), free(lp), free(hp), free(np);
}
END_TEST

/* Multi-hot rows (n, k) for multi-label binary_crossentropy (mr_dataset_load_multi_hot): kept
 * as they are, any number of 1s per row, ints or floats 0.0/1.0; label_width k; fill copies
 * (count, k) rows in the batch's order; append joins two of the same width. Refused, naming the
 * labels file: a value other than 0 and 1, a width other than k, a count other than the
 * images', and a folder of class folders (naming it). */
START_TEST(test_load_multi_hot_labels) {
    uint8_t img[3 * 2] = {10, 11, 20, 21, 30, 31};
    char *ip = write_idx_u8("img_3x2m", 2, (uint32_t[]){3, 2}, img);
    const float hot[9] = {1, 0, 1, 0, 0, 0, 1, 1, 1};
    char *lp = write_npy("lab_multi.npy", MR_DTYPE_F32, 2, (int64_t[]){3, 3}, hot);
    mr_error err = {0};
    mr_dataset ds, more;
    ck_assert_msg(mr_dataset_load_multi_hot(&ds, ip, lp, 3, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(ds.label_width, 3);
    for (int i = 0; i < 9; i++)
        ck_assert_int_eq(ds.y[i], (int)hot[i]);
    ck_assert_str_eq(ds.note, "");
    int32_t y[3 * 3];
    float x[3 * 2];
    mr_dataset_fill(&ds, (int64_t[]){2, 0}, 2, NULL, x, y);
    const int32_t want[6] = {1, 1, 1, 1, 0, 1};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(y[i], want[i]);
    ck_assert(x[0] == 30.0f && x[2] == 10.0f);
    ck_assert_int_eq(mr_dataset_check_labels(&ds, 3, lp, &err), MR_OK);
    /* int64 rows of the same width append; class ids (width 1) do not */
    const int64_t hot64[9] = {0, 1, 0, 1, 1, 1, 0, 0, 1};
    char *lp64 = write_npy("lab_multi64.npy", MR_DTYPE_I64, 2, (int64_t[]){3, 3}, hot64);
    ck_assert_msg(mr_dataset_load_multi_hot(&more, ip, lp64, 3, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_dataset_append(&ds, &more, &err), MR_OK);
    ck_assert_int_eq(ds.n, 6);
    for (int i = 0; i < 9; i++)
        ck_assert_int_eq(ds.y[9 + i], (int)hot64[i]);
    mr_dataset_free(&more);
    const int64_t ids[3] = {0, 1, 0};
    char *idp = write_npy("lab_ids3.npy", MR_DTYPE_I64, 1, (int64_t[]){3}, ids);
    load_ok(&more, ip, idp);
    ck_assert_int_eq(mr_dataset_append(&ds, &more, &err), MR_ERR_DATA);
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    mr_dataset_free(&more);
    mr_dataset_free(&ds);
    /* refusals: each one line naming the file */
    const float bad[9] = {1, 0, 1, 0, 0.5f, 0, 1, 1, 1};
    char *bp = write_npy("lab_multi_bad.npy", MR_DTYPE_F32, 2, (int64_t[]){3, 3}, bad);
    const char *paths[4] = {bp, lp, idp, lp};
    const int widths[4] = {3, 4, 3, 3};
    for (int c = 0; c < 4; c++) {
        memset(&err, 0, sizeof err);
        memset(&ds, 0xAB, sizeof ds);
        const char *images = ip;
        uint8_t img2[2 * 2] = {0};
        char *ip2 = write_idx_u8("img_2x2m", 2, (uint32_t[]){2, 2}, img2);
        if (c == 3) images = ip2; /* 2 images, 3 label rows */
        ck_assert_int_eq(mr_dataset_load_multi_hot(&ds, images, paths[c], widths[c], &err),
                         MR_ERR_DATA);
        ck_assert_msg(strstr(err.msg, paths[c]) != NULL, "case %d: %s", c, err.msg);
        ck_assert_ptr_null(strchr(err.msg, '\n'));
        ck_assert_ptr_null(ds.y);
        free(ip2);
    }
    ck_assert_msg(strstr(err.msg, "(2, 3)") != NULL, "%s", err.msg);
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(mr_dataset_load_multi_hot(&ds, ip, bp, 3, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "value 0.5 at row 1, column 1"), "%s", err.msg);
    ck_assert_int_eq(mr_dataset_load_multi_hot(&ds, tmp_dir, NULL, 3, &err), MR_ERR_USAGE);
    free(ip), free(lp), free(lp64), free(idp), free(bp);
}
END_TEST

/* One-hot rows (n, k) of any dtype are read as class ids, with a note;
 * a row without exactly one 1 (soft or multi-hot labels) is refused. */
START_TEST(test_load_one_hot_labels) {
    uint8_t img[3 * 2] = {0};
    char *ip = write_idx_u8("img_3x2h", 2, (uint32_t[]){3, 2}, img);
    const float hot[12] = {0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1};
    char *lp = write_npy("lab_hot.npy", MR_DTYPE_F32, 2, (int64_t[]){3, 4}, hot);
    mr_dataset ds;
    load_ok(&ds, ip, lp);
    ck_assert_int_eq(ds.y[0], 2);
    ck_assert_int_eq(ds.y[1], 1);
    ck_assert_int_eq(ds.y[2], 3);
    ck_assert_msg(strstr(ds.note, "lab_hot.npy: one-hot labels (n, 4) read as class ids"), "%s",
                  ds.note);
    mr_dataset_free(&ds);
    const uint8_t hot8[6] = {1, 0, 0, 1, 1, 0};
    char *lp8 = write_npy("lab_hot8.npy", MR_DTYPE_U8, 2, (int64_t[]){3, 2}, hot8);
    load_ok(&ds, ip, lp8);
    ck_assert_int_eq(ds.y[1], 1);
    mr_dataset_free(&ds);
    const float soft[12] = {0, 0, 1, 0, 0.1f, 0.9f, 0, 0, 0, 0, 0, 1};
    char *sp = write_npy("lab_soft.npy", MR_DTYPE_F32, 2, (int64_t[]){3, 4}, soft);
    const char *msg = load_fail(ip, sp, MR_ERR_DATA, sp);
    ck_assert_msg(strstr(msg, "row 1 of the one-hot labels (n, 4) has 0 ones and 2 values"), "%s",
                  msg);
    const float multi[12] = {0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0, 1};
    char *mp = write_npy("lab_multi.npy", MR_DTYPE_F32, 2, (int64_t[]){3, 4}, multi);
    msg = load_fail(ip, mp, MR_ERR_DATA, mp);
    ck_assert_msg(strstr(msg, "row 1 of the one-hot labels (n, 4) has 2 ones"), "%s", msg);
    free(ip), free(lp), free(lp8), free(sp), free(mp);
}
END_TEST

START_TEST(test_load_label_shapes_rejected) {
    uint8_t img[3 * 2] = {0};
    const int32_t lab[6] = {0, 1, 2, 3, 4, 5};
    char *ip = write_idx_u8("img_3x2b", 2, (uint32_t[]){3, 2}, img);
    /* (n, 2) rows that are not one-hot, and 3-D labels, are not class ids */
    char *lp = write_npy("lab_n2.npy", MR_DTYPE_I32, 2, (int64_t[]){3, 2}, lab);
    load_fail(ip, lp, MR_ERR_DATA, lp);
    char *lp3 = write_npy("lab_3d.npy", MR_DTYPE_I32, 3, (int64_t[]){3, 1, 2}, lab);
    load_fail(ip, lp3, MR_ERR_DATA, lp3);
    free(ip), free(lp), free(lp3);
}
END_TEST

START_TEST(test_load_negative_labels_rejected) {
    uint8_t img[3 * 2] = {0};
    char *ip = write_idx_u8("img_3x2c", 2, (uint32_t[]){3, 2}, img);
    const int32_t lab[3] = {0, -1, 2};
    char *lp = write_npy("lab_neg.npy", MR_DTYPE_I32, 1, (int64_t[]){3}, lab);
    const char *msg = load_fail(ip, lp, MR_ERR_DATA, lp);
    ck_assert_msg(has_number(msg, -1, ip, lp), "label value missing: %s", msg);
    const int64_t lab64[3] = {0, 2, -3000000000ll};
    char *lp64 = write_npy("lab_neg64.npy", MR_DTYPE_I64, 1, (int64_t[]){3}, lab64);
    load_fail(ip, lp64, MR_ERR_DATA, lp64);
    /* and beyond int32 the other way: not silently truncated */
    const int64_t big[3] = {0, 4294967296ll + 1, 2};
    char *lpb = write_npy("lab_big.npy", MR_DTYPE_I64, 1, (int64_t[]){3}, big);
    load_fail(ip, lpb, MR_ERR_DATA, lpb);
    free(ip), free(lp), free(lp64), free(lpb);
}
END_TEST

START_TEST(test_load_missing_files) {
    uint8_t img[3 * 2] = {0}, lab[3] = {0};
    char *ip = write_idx_u8("img_ok", 2, (uint32_t[]){3, 2}, img);
    char *lp = write_idx_u8("lab_ok", 1, (uint32_t[]){3}, lab);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/no_such_file", tmp_dir);
    load_fail(missing, lp, MR_ERR_NOT_FOUND, missing);
    /* images read, labels missing: the images are freed (ASan checks) */
    load_fail(ip, missing, MR_ERR_NOT_FOUND, missing);
    free(ip), free(lp);
}
END_TEST

/* ---- checks -------------------------------------------------------------- */

START_TEST(test_check_labels) {
    mr_dataset ds;
    make_float_dataset(&ds, 3, 2);
    ds.y[0] = 0, ds.y[1] = 9, ds.y[2] = 2;
    mr_error err = {0};
    const char *path = "data/train-labels.idx";
    ck_assert_int_eq(mr_dataset_check_labels(&ds, 10, path, &err), MR_OK); /* 9 = classes - 1 */
    ck_assert_int_eq(err.status, MR_OK);
    ck_assert_int_eq(mr_dataset_check_labels(&ds, 5, path, &err), MR_ERR_DATA);
    ck_assert_int_eq(err.status, MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, path) != NULL, "path missing: %s", err.msg);
    ck_assert_msg(has_number(err.msg, 9, path, NULL), "label missing: %s", err.msg);
    /* the range: 0..4, or 5 classes */
    ck_assert_msg(has_number(err.msg, 4, path, NULL) || has_number(err.msg, 5, path, NULL),
                  "class range missing: %s", err.msg);
    /* the boundary: label == classes is out */
    mr_error_clear(&err);
    ck_assert_int_eq(mr_dataset_check_labels(&ds, 9, path, &err), MR_ERR_DATA);
    mr_dataset_free(&ds);
}
END_TEST

/* The data's shape against the model's input: equal, or Keras's trailing axis of 1 added or
 * dropped (silently, x taking the model's shape); channels-first and flat data of the right
 * size are refused naming the file and both shapes. */
START_TEST(test_check_shape) {
    uint8_t img[2 * 3 * 4] = {0}, lab[2] = {0, 1};
    char *ip = write_idx_u8("img_2x3x4", 3, (uint32_t[]){2, 3, 4}, img);
    char *lp = write_idx_u8("lab_2", 1, (uint32_t[]){2}, lab);
    char *flat = write_idx_u8("img_2x12", 2, (uint32_t[]){2, 12}, img);
    char *cf = write_idx_u8("img_2x1x3x4", 4, (uint32_t[]){2, 1, 3, 4}, img);
    mr_dataset ds;
    mr_error err = {0};
    load_ok(&ds, ip, lp);
    ck_assert_int_eq(mr_dataset_check_shape(&ds, 2, (int[]){3, 4}, ip, &err), MR_OK);
    ck_assert_int_eq(mr_dataset_check_shape(&ds, 3, (int[]){3, 4, 1}, ip, &err), MR_OK);
    ck_assert_int_eq(ds.x.ndim, 4);
    ck_assert_int_eq(ds.x.dims[3], 1);
    ck_assert_int_eq(mr_dataset_check_shape(&ds, 2, (int[]){3, 4}, ip, &err), MR_OK); /* back */
    ck_assert_int_eq(ds.x.ndim, 3);
    const struct {
        int rank, shape[3];
        const char *want;
    } bad[] = {{3, {4, 3, 1}, "(3,4), but the model's [input] shape is 4,3,1 (height"},
               {1, {12}, "(3,4), but the model's [input] shape is 12;"},
               {2, {4, 3}, "shape is 4,3;"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mr_error_clear(&err);
        ck_assert_int_eq(mr_dataset_check_shape(&ds, bad[i].rank, bad[i].shape, ip, &err),
                         MR_ERR_DATA);
        ck_assert_msg(strncmp(err.msg, ip, strlen(ip)) == 0 && strstr(err.msg, bad[i].want), "%s",
                      err.msg);
    }
    mr_dataset_free(&ds);
    /* flat (n, 12) for 3,4,1 and channels-first (n, 1, 3, 4) for 3,4,1: the right size, refused */
    load_ok(&ds, flat, lp);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_dataset_check_shape(&ds, 3, (int[]){3, 4, 1}, flat, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "examples of shape (12), but the model's [input] shape is 3,4,1"),
                  "%s", err.msg);
    mr_dataset_free(&ds);
    load_ok(&ds, cf, lp);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_dataset_check_shape(&ds, 3, (int[]){3, 4, 1}, cf, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "(1,3,4)"), "%s", err.msg);
    mr_dataset_free(&ds);
    free(ip), free(lp), free(flat), free(cf);
}
END_TEST

START_TEST(test_check_row) {
    uint8_t img[2 * 3 * 4] = {0}, lab[2] = {0, 1};
    char *ip = write_idx_u8("img_2x3x4", 3, (uint32_t[]){2, 3, 4}, img);
    char *lp = write_idx_u8("lab_2", 1, (uint32_t[]){2}, lab);
    mr_dataset ds;
    load_ok(&ds, ip, lp);
    mr_error err = {0};
    ck_assert_int_eq(mr_dataset_check_row(&ds, 12, ip, &err), MR_OK);
    ck_assert_int_eq(err.status, MR_OK);
    ck_assert_int_eq(mr_dataset_check_row(&ds, 10, ip, &err), MR_ERR_DATA);
    ck_assert_int_eq(err.status, MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, ip) != NULL, "path missing: %s", err.msg);
    ck_assert_msg(has_number(err.msg, 12, ip, NULL), "row size missing: %s", err.msg);
    ck_assert_msg(has_number(err.msg, 10, ip, NULL), "model input size missing: %s", err.msg);
    mr_dataset_free(&ds);
    free(ip), free(lp);
}
END_TEST

/* ---- conversion and preprocessing ------------------------------------------ */

START_TEST(test_fill_scale) {
    enum { N = 6, ROW = 5 };
    uint8_t img[N * ROW], lab[N];
    for (int i = 0; i < N * ROW; i++)
        img[i] = (uint8_t)(i * 41 + 11);
    for (int i = 0; i < N; i++)
        lab[i] = (uint8_t)(9 - i);
    char *ip = write_idx_u8("img_scale", 2, (uint32_t[]){N, ROW}, img);
    char *lp = write_idx_u8("lab_scale", 1, (uint32_t[]){N}, lab);
    mr_dataset ds;
    load_ok(&ds, ip, lp);
    ds.scale = 1.0f / 255.0f;
    const int64_t rows[3] = {5, 0, 3};
    float x[3 * ROW];
    int32_t y[3];
    mr_dataset_fill(&ds, rows, 3, NULL, x, y);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(y[i], lab[rows[i]]);
        for (int j = 0; j < ROW; j++) {
            double want = img[rows[i] * ROW + j] / 255.0;
            ck_assert_msg(fabs(x[i * ROW + j] - want) < 1e-7, "x[%d][%d] = %.9g, want %.9g", i, j,
                          x[i * ROW + j], want);
        }
    }
    mr_dataset_free(&ds);

    /* float images are scaled the same way */
    make_float_dataset(&ds, 4, 3);
    ds.scale = 0.5f;
    mr_dataset_fill(&ds, (int64_t[]){2}, 1, NULL, x, y);
    ck_assert_float_eq(x[0], 1000.5f);
    ck_assert_float_eq(x[2], 1001.5f);
    ck_assert_int_eq(y[0], 2);
    mr_dataset_free(&ds);
    free(ip), free(lp);
}
END_TEST

/* Mean and population standard deviation per feature over rows
 * [begin, begin + count), in double, as Keras's Normalization.adapt. */
static void hand_stats(const mr_dataset *ds, int64_t begin, int64_t count, double *mean,
                       double *sd) {
    for (int64_t j = 0; j < ds->row; j++) {
        double s = 0.0;
        for (int64_t r = begin; r < begin + count; r++) {
            double v = ds->x.dtype == MR_DTYPE_U8 ? ((uint8_t *)ds->x.data)[r * ds->row + j]
                                                  : ((float *)ds->x.data)[r * ds->row + j];
            s += v * (double)ds->scale;
        }
        mean[j] = s / (double)count;
        double q = 0.0;
        for (int64_t r = begin; r < begin + count; r++) {
            double v = ds->x.dtype == MR_DTYPE_U8 ? ((uint8_t *)ds->x.data)[r * ds->row + j]
                                                  : ((float *)ds->x.data)[r * ds->row + j];
            double d = v * (double)ds->scale - mean[j];
            q += d * d;
        }
        sd[j] = sqrt(q / (double)count);
    }
}

START_TEST(test_standardize) {
    /* 6 rows, 3 features; statistics over rows 1..4:
     * f0 varies; f1 is 2.5 on rows 1..4 only (constant within the range, so
     * inv_std 1 although the whole column varies); f2 varies only outside */
    const float v[6][3] = {
        {100.0f, -7.0f, 1.0f}, {1.0f, 2.5f, 3.0f}, {2.0f, 2.5f, 3.0f},
        {4.0f, 2.5f, 3.0f},    {8.5f, 2.5f, 3.0f}, {-50.0f, 9.0f, 0.0f},
    };
    mr_dataset ds;
    make_float_dataset(&ds, 6, 3);
    memcpy(ds.x.data, v, sizeof v);
    ds.scale = 0.5f;
    mr_error err = {0};
    ck_assert_int_eq(mr_dataset_standardize(&ds, &ds, 1, 4, &err), MR_OK);
    ck_assert_ptr_nonnull(ds.mean);
    ck_assert_ptr_nonnull(ds.inv_std);
    double mean[3], sd[3];
    hand_stats(&ds, 1, 4, mean, sd);
    /* f0 by hand: scaled values 0.5, 1, 2, 4.25; mean 1.9375 */
    ck_assert(fabs(mean[0] - 1.9375) < 1e-12);
    for (int j = 0; j < 3; j++) {
        ck_assert_msg(fabs(ds.mean[j] - mean[j]) <= 1e-6 * fmax(1.0, fabs(mean[j])),
                      "mean[%d] = %.9g, want %.9g", j, ds.mean[j], mean[j]);
        double inv = sd[j] > 0 ? 1.0 / sd[j] : 1.0;
        ck_assert_msg(fabs(ds.inv_std[j] - inv) <= 1e-5 * inv, "inv_std[%d] = %.9g, want %.9g", j,
                      ds.inv_std[j], inv);
    }
    ck_assert_float_eq(ds.inv_std[1], 1.0f);
    ck_assert_float_eq(ds.inv_std[2], 1.0f);

    /* fill applies (x * scale - mean) * inv_std, on rows in and outside the range */
    const int64_t rows[3] = {0, 2, 5};
    float x[3 * 3];
    int32_t y[3];
    mr_dataset_fill(&ds, rows, 3, NULL, x, y);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double inv = sd[j] > 0 ? 1.0 / sd[j] : 1.0;
            double want = (v[rows[i]][j] * 0.5 - mean[j]) * inv;
            ck_assert_msg(fabs(x[i * 3 + j] - want) <= 1e-5 * fmax(1.0, fabs(want)),
                          "x[%d][%d] = %.9g, want %.9g", i, j, x[i * 3 + j], want);
        }
    /* a second call replaces the statistics (no leak: ASan) */
    ck_assert_int_eq(mr_dataset_standardize(&ds, &ds, 0, 6, &err), MR_OK);
    hand_stats(&ds, 0, 6, mean, sd);
    ck_assert(fabs(ds.mean[2] - mean[2]) < 1e-6);
    ck_assert(fabs(ds.inv_std[2] - 1.0 / sd[2]) < 1e-5 / sd[2]);
    mr_dataset_free(&ds);
}
END_TEST

/* uint8 images with the usual 1/255 scale: a feature constant over the
 * range at a value other than 0 has zero deviation and must get inv_std 1
 * (not the inverse of a rounding residue: E[v^2] - E[v]^2 in double leaves
 * residues up to ~1e-17 for v ~ 1, whose square root 3e-9 would pass for a
 * deviation), so it standardises to 0. Every range length 1..N is tried, as
 * the residue depends on the count. */
START_TEST(test_standardize_constant_u8_feature) {
    enum { N = 200, ROW = 5 };
    const uint8_t constant[ROW] = {0, 3, 77, 0, 255};
    uint8_t *img = malloc(N * ROW), lab[N] = {0};
    for (int r = 0; r < N; r++)
        for (int j = 0; j < ROW; j++)
            img[r * ROW + j] = j == 0 ? (uint8_t)(r * 25) : constant[j];
    char *ip = write_idx_u8("img_const", 2, (uint32_t[]){N, ROW}, img);
    char *lp = write_idx_u8("lab_const", 1, (uint32_t[]){N}, lab);
    mr_dataset ds;
    load_ok(&ds, ip, lp);
    ds.scale = 1.0f / 255.0f;
    mr_error err = {0};
    int bad_inv = 0, bad_x = 0, first_count = 0, first_j = 0;
    float first_inv = 0.0f;
    for (int count = 1; count <= N; count++) {
        ck_assert_int_eq(mr_dataset_standardize(&ds, &ds, 0, count, &err), MR_OK);
        float x[ROW];
        int32_t y;
        mr_dataset_fill(&ds, (int64_t[]){0}, 1, NULL, x, &y);
        for (int j = 1; j < ROW; j++) {
            if (ds.inv_std[j] != 1.0f && bad_inv++ == 0)
                first_count = count, first_j = j, first_inv = ds.inv_std[j];
            bad_x += !(fabsf(x[j]) < 1e-6f);
        }
    }
    ck_assert_msg(bad_inv == 0,
                  "%d (range length, constant feature) pairs with inv_std != 1; first: length "
                  "%d, feature %d (constant %d / 255): inv_std %.9g",
                  bad_inv, first_count, first_j, constant[first_j], first_inv);
    ck_assert_msg(bad_x == 0, "%d constant features not standardised to 0", bad_x);
    mr_dataset_free(&ds);
    free(img), free(ip), free(lp);
}
END_TEST

/* Statistics from one set applied to another (test data with the training
 * statistics); the source keeps none. */
/* Appending a validation set: uint8 after uint8 stays uint8; uint8 and
 * float32 become float32 with the same values; labels and notes follow. */
START_TEST(test_append) {
    const uint8_t a[2 * 3] = {1, 2, 3, 4, 5, 6}, b[1 * 3] = {7, 8, 9};
    const float f[1 * 3] = {0.5f, 1.5f, 2.5f};
    const int32_t la[2] = {0, 1}, lb[1] = {2};
    char *ap = write_idx_u8("app_a", 2, (uint32_t[]){2, 3}, a);
    char *bp = write_idx_u8("app_b", 2, (uint32_t[]){1, 3}, b);
    char *fp = write_npy("app_f.npy", MR_DTYPE_F32, 2, (int64_t[]){1, 3}, f);
    char *lap = write_npy("app_la.npy", MR_DTYPE_I32, 1, (int64_t[]){2}, la);
    char *lbp = write_npy("app_lb.npy", MR_DTYPE_I32, 1, (int64_t[]){1}, lb);
    mr_dataset ds, more;
    mr_error err = {0};
    load_ok(&ds, ap, lap);
    load_ok(&more, bp, lbp);
    ck_assert_int_eq(mr_dataset_append(&ds, &more, &err), MR_OK);
    mr_dataset_free(&more);
    ck_assert_int_eq(ds.n, 3);
    ck_assert_int_eq(ds.x.dims[0], 3);
    ck_assert_int_eq(ds.x.dtype, MR_DTYPE_U8);
    ck_assert_int_eq(((uint8_t *)ds.x.data)[7], 8);
    ck_assert_int_eq(ds.y[2], 2);
    load_ok(&more, fp, lbp);
    ck_assert_int_eq(mr_dataset_append(&ds, &more, &err), MR_OK);
    mr_dataset_free(&more);
    ck_assert_int_eq(ds.n, 4);
    ck_assert_int_eq(ds.x.dtype, MR_DTYPE_F32);
    const float *x = ds.x.data;
    ck_assert(x[0] == 1.0f && x[8] == 9.0f && x[10] == 1.5f);
    ck_assert_int_eq(ds.y[3], 2);
    /* a row of another size is refused */
    const uint8_t c[4] = {0};
    char *cp = write_idx_u8("app_c", 2, (uint32_t[]){1, 4}, c);
    load_ok(&more, cp, lbp);
    ck_assert_int_eq(mr_dataset_append(&ds, &more, &err), MR_ERR_DATA);
    ck_assert_int_eq(ds.n, 4);
    mr_dataset_free(&more);
    mr_dataset_free(&ds);
    free(ap), free(bp), free(fp), free(lap), free(lbp), free(cp);
}
END_TEST

START_TEST(test_standardize_from_other) {
    mr_dataset train, test;
    make_float_dataset(&train, 8, 3);
    make_float_dataset(&test, 2, 3);
    mr_error err = {0};
    ck_assert_int_eq(mr_dataset_standardize(&test, &train, 2, 5, &err), MR_OK);
    ck_assert_ptr_null(train.mean);
    ck_assert_ptr_null(train.inv_std);
    double mean[3], sd[3];
    hand_stats(&train, 2, 5, mean, sd);
    for (int j = 0; j < 3; j++) {
        ck_assert(fabs(test.mean[j] - mean[j]) <= 1e-6 * fabs(mean[j]));
        ck_assert(fabs(test.inv_std[j] - 1.0 / sd[j]) <= 1e-5 / sd[j]);
    }
    float x[3];
    int32_t y;
    mr_dataset_fill(&test, (int64_t[]){1}, 1, NULL, x, &y);
    for (int j = 0; j < 3; j++) {
        double want = ((double)(1000 + j + 1) - mean[j]) / sd[j];
        ck_assert(fabs(x[j] - want) <= 1e-5 * fmax(1.0, fabs(want)));
    }
    mr_dataset_free(&train);
    mr_dataset_free(&test);
}
END_TEST

/* ---- augmentation ------------------------------------------------------------ */

/* Output value at (yy, xx, c) of image `in` (H, W, C) under flip f and
 * shift (sy, sx): in(yy - sy, xx') with xx' = xx - sx, mirrored if f, zero
 * outside. Flip-then-shift and shift-then-flip give the same set of
 * transforms over a symmetric shift range, so matching against every
 * (f, sy, sx) does not depend on the order the code applies them in. */
static float transformed(const float *in, int H, int W, int C, int f, int sy, int sx, int yy,
                         int xx, int c) {
    int iy = yy - sy, ix = xx - sx;
    if (f) ix = W - 1 - ix;
    if (iy < 0 || iy >= H || ix < 0 || ix >= W) return 0.0f;
    return in[((size_t)iy * W + ix) * C + c];
}

static int matches(const float *out, const float *in, int H, int W, int C, int f, int sy, int sx) {
    for (int yy = 0; yy < H; yy++)
        for (int xx = 0; xx < W; xx++)
            for (int c = 0; c < C; c++)
                if (out[((size_t)yy * W + xx) * C + c] !=
                    transformed(in, H, W, C, f, sy, sx, yy, xx, c))
                    return 0;
    return 1;
}

/* Which (flip, sy, sx) with |sy|, |sx| <= shift produced `out`; -1 when none
 * does (the images hold distinct nonzero values, so at most one can). */
static int identify(const float *out, const float *in, int H, int W, int C, int shift, int *f,
                    int *sy, int *sx) {
    int found = 0;
    for (int ff = 0; ff <= 1; ff++)
        for (int a = -shift; a <= shift; a++)
            for (int b = -shift; b <= shift; b++)
                if (matches(out, in, H, W, C, ff, a, b)) {
                    *f = ff, *sy = a, *sx = b;
                    found++;
                }
    return found == 1 ? 0 : -1;
}

enum { AH = 3, AW = 4, AC = 2, AROW = AH * AW * AC, AN = 64 };

START_TEST(test_augment_flip_only) {
    mr_dataset ds;
    make_float_dataset(&ds, AN, AROW);
    int64_t rows[AN];
    for (int i = 0; i < AN; i++)
        rows[i] = i;
    float *x = malloc(sizeof(float) * AN * AROW);
    int32_t y[AN];
    mr_augment aug = {.flip = 1, .shift = 0, .h = AH, .w = AW, .c = AC, .seed = 7, .epoch = 3};
    mr_dataset_fill(&ds, rows, AN, &aug, x, y);
    const float *in = ds.x.data;
    int flipped[AN], n_flipped = 0;
    for (int i = 0; i < AN; i++) {
        ck_assert_int_eq(y[i], ds.y[i]);
        int is_id = matches(x + i * AROW, in + i * AROW, AH, AW, AC, 0, 0, 0);
        int is_mirror = matches(x + i * AROW, in + i * AROW, AH, AW, AC, 1, 0, 0);
        ck_assert_msg(is_id != is_mirror, "sample %d is neither itself nor its mirror image", i);
        flipped[i] = is_mirror;
        n_flipped += is_mirror;
    }
    /* a fair coin per sample: binomial(64, 1/2) has mean 32 and sd 4; the
     * bound [12, 52] is 5 sd (a correct draw is outside with probability
     * 6e-7), and it excludes "never" and "always" */
    ck_assert_msg(n_flipped >= 12 && n_flipped <= 52, "%d of %d flipped", n_flipped, AN);
    /* another epoch or seed flips another set (equal by chance: 2^-64) */
    int differ = 0;
    aug.epoch = 4;
    mr_dataset_fill(&ds, rows, AN, &aug, x, y);
    for (int i = 0; i < AN; i++)
        differ += matches(x + i * AROW, in + i * AROW, AH, AW, AC, 1, 0, 0) != flipped[i];
    ck_assert_int_gt(differ, 0);
    differ = 0;
    aug.epoch = 3, aug.seed = 8;
    mr_dataset_fill(&ds, rows, AN, &aug, x, y);
    for (int i = 0; i < AN; i++)
        differ += matches(x + i * AROW, in + i * AROW, AH, AW, AC, 1, 0, 0) != flipped[i];
    ck_assert_int_gt(differ, 0);
    free(x);
    mr_dataset_free(&ds);
}
END_TEST

START_TEST(test_augment_shift_zero_fills) {
    mr_dataset ds;
    make_float_dataset(&ds, AN, AROW);
    int64_t rows[AN];
    for (int i = 0; i < AN; i++)
        rows[i] = i;
    float *x = malloc(sizeof(float) * AN * AROW);
    int32_t y[AN];
    mr_augment aug = {.flip = 0, .shift = 1, .h = AH, .w = AW, .c = AC, .seed = 11, .epoch = 0};
    mr_dataset_fill(&ds, rows, AN, &aug, x, y);
    const float *in = ds.x.data;
    int seen_y[3] = {0}, seen_x[3] = {0}, zeros_ok = 1;
    for (int i = 0; i < AN; i++) {
        int f = -1, sy = 0, sx = 0;
        const float *o = x + i * AROW;
        ck_assert_msg(identify(o, in + i * AROW, AH, AW, AC, 1, &f, &sy, &sx) == 0,
                      "sample %d is not a shift of its image by at most 1 pixel", i);
        ck_assert_int_eq(f, 0); /* no flips asked for */
        seen_y[sy + 1]++, seen_x[sx + 1]++;
        /* the vacated border is zero: row 0 when shifted down, etc. */
        for (int xx = 0; xx < AW; xx++)
            for (int c = 0; c < AC; c++) {
                if (sy == 1) zeros_ok &= o[(0 * AW + xx) * AC + c] == 0.0f;
                if (sy == -1) zeros_ok &= o[((AH - 1) * AW + xx) * AC + c] == 0.0f;
            }
        for (int yy = 0; yy < AH; yy++)
            for (int c = 0; c < AC; c++) {
                if (sx == 1) zeros_ok &= o[(yy * AW + 0) * AC + c] == 0.0f;
                if (sx == -1) zeros_ok &= o[(yy * AW + AW - 1) * AC + c] == 0.0f;
            }
    }
    ck_assert(zeros_ok);
    /* each of -1, 0, 1 occurs on each axis: with probability 1/3 per sample,
     * one value missing from 64 samples has probability 6 (2/3)^64 = 3e-11 */
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(seen_y[k] > 0, "vertical shift %d never drawn", k - 1);
        ck_assert_msg(seen_x[k] > 0, "horizontal shift %d never drawn", k - 1);
    }
    free(x);
    mr_dataset_free(&ds);
}
END_TEST

/* Flip and a 2-pixel shift together on a one-channel image. */
START_TEST(test_augment_flip_and_shift) {
    enum { H = 5, W = 6, ROW = H * W, N = 64 };
    mr_dataset ds;
    make_float_dataset(&ds, N, ROW);
    int64_t rows[N];
    for (int i = 0; i < N; i++)
        rows[i] = N - 1 - i; /* any order */
    float *x = malloc(sizeof(float) * N * ROW);
    int32_t y[N];
    mr_augment aug = {.flip = 1, .shift = 2, .h = H, .w = W, .c = 1, .seed = 5, .epoch = 9};
    mr_dataset_fill(&ds, rows, N, &aug, x, y);
    const float *in = ds.x.data;
    int n_flip = 0, n_far = 0;
    for (int i = 0; i < N; i++) {
        int f = -1, sy = 0, sx = 0;
        ck_assert_msg(identify(x + i * ROW, in + rows[i] * ROW, H, W, 1, 2, &f, &sy, &sx) == 0,
                      "sample %lld is not a flip/shift of its image", (long long)rows[i]);
        ck_assert_int_eq(y[i], ds.y[rows[i]]);
        n_flip += f;
        n_far += abs(sy) == 2 || abs(sx) == 2;
    }
    ck_assert(n_flip > 0 && n_flip < N);
    ck_assert_int_gt(n_far, 0); /* the full range is used: P(none) = (9/25)^64 */
    free(x);
    mr_dataset_free(&ds);
}
END_TEST

START_TEST(test_augment_deterministic_and_batch_independent) {
    enum { N = 20 };
    mr_dataset ds;
    make_float_dataset(&ds, N, AROW);
    mr_augment aug = {.flip = 1, .shift = 1, .h = AH, .w = AW, .c = AC, .seed = 3, .epoch = 2};
    int64_t all[N];
    for (int i = 0; i < N; i++)
        all[i] = i;
    float *a = malloc(sizeof(float) * N * AROW), *b = malloc(sizeof(float) * N * AROW);
    int32_t ya[N], yb[N];
    mr_dataset_fill(&ds, all, N, &aug, a, ya);
    mr_dataset_fill(&ds, all, N, &aug, b, yb);
    ck_assert_mem_eq(a, b, sizeof(float) * N * AROW);
    /* each row alone, and inside other batches at other positions */
    for (int r = 0; r < N; r++) {
        mr_dataset_fill(&ds, (int64_t[]){r}, 1, &aug, b, yb);
        ck_assert_msg(memcmp(b, a + r * AROW, sizeof(float) * AROW) == 0, "row %d alone differs",
                      r);
        int64_t batch[4] = {(r + 7) % N, (r + 3) % N, r, (r + 11) % N};
        mr_dataset_fill(&ds, batch, 4, &aug, b, yb);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(memcmp(b + i * AROW, a + batch[i] * AROW, sizeof(float) * AROW) == 0,
                          "row %lld at position %d of a batch differs", (long long)batch[i], i);
    }
    /* another epoch changes some of the 20 (each draws the same flip and
     * shift again with probability 1/18) */
    aug.epoch = 3;
    mr_dataset_fill(&ds, all, N, &aug, b, yb);
    ck_assert(memcmp(a, b, sizeof(float) * N * AROW) != 0);
    free(a), free(b);
    mr_dataset_free(&ds);
}
END_TEST

START_TEST(test_no_augmentation) {
    enum { N = 16 };
    mr_dataset ds;
    make_float_dataset(&ds, N, AROW);
    int64_t all[N];
    for (int i = 0; i < N; i++)
        all[i] = i;
    float *x = malloc(sizeof(float) * N * AROW);
    int32_t y[N];
    mr_dataset_fill(&ds, all, N, NULL, x, y);
    ck_assert_mem_eq(x, ds.x.data, sizeof(float) * N * AROW);
    /* an all-zero augment block is "none" too */
    mr_augment none = {.h = AH, .w = AW, .c = AC, .seed = 1, .epoch = 1};
    memset(x, 0, sizeof(float) * N * AROW);
    mr_dataset_fill(&ds, all, N, &none, x, y);
    ck_assert_mem_eq(x, ds.x.data, sizeof(float) * N * AROW);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(y[i], ds.y[i]);
    free(x);
    mr_dataset_free(&ds);
}
END_TEST

static Suite *dataset_suite(void) {
    Suite *s = suite_create("dataset");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, test_load_idx_u8);
    tcase_add_test(tc, test_load_npy_i64_labels);
    tcase_add_test(tc, test_load_labels_n_by_1);
    tcase_add_test(tc, test_load_int_images_to_float);
    tcase_add_test(tc, test_load_images_only);
    tcase_add_test(tc, test_synthetic);
    tcase_add_test(tc, test_load_count_mismatch);
    tcase_add_test(tc, test_load_float_labels);
    tcase_add_test(tc, test_load_one_hot_labels);
    tcase_add_test(tc, test_load_multi_hot_labels);
    tcase_add_test(tc, test_append);
    tcase_add_test(tc, test_load_label_shapes_rejected);
    tcase_add_test(tc, test_load_negative_labels_rejected);
    tcase_add_test(tc, test_load_missing_files);
    suite_add_tcase(s, tc);
    tc = tcase_create("checks");
    tcase_add_test(tc, test_check_labels);
    tcase_add_test(tc, test_check_shape);
    tcase_add_test(tc, test_check_row);
    suite_add_tcase(s, tc);
    tc = tcase_create("preprocess");
    tcase_add_test(tc, test_fill_scale);
    tcase_add_test(tc, test_standardize);
    tcase_add_test(tc, test_standardize_constant_u8_feature);
    tcase_add_test(tc, test_standardize_from_other);
    suite_add_tcase(s, tc);
    tc = tcase_create("augment");
    tcase_add_test(tc, test_augment_flip_only);
    tcase_add_test(tc, test_augment_shift_zero_fills);
    tcase_add_test(tc, test_augment_flip_and_shift);
    tcase_add_test(tc, test_augment_deterministic_and_batch_independent);
    tcase_add_test(tc, test_no_augmentation);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "%s", tu_tmpdir());
    SRunner *sr = srunner_create(dataset_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    tu_run(cmd, NULL);
    return failed != 0;
}
