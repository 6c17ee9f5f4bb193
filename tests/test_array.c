/* test_array.c: unit tests of runtime/array.c and array_read.c (the IDX and
 * HDF5 readers, and NPY files read through mr_array_read; the NPY module's
 * own functions are tests/test_npy.c). Every file is generated here in a
 * temporary directory: IDX and NPY byte by byte (so the tests do not trust the code they test),
 * HDF5 through the HDF5 API. Every bad-input case checks the status, that the message names the
 * file, and that nothing is left in the output array. */
#include <check.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/array.h"
#include "runtime/npy.h"
#include "tests/testutil.h"

#define FASHION_TRAIN_IMAGES "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
#define FASHION_TRAIN_LABELS "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"

static char tmp_dir[4096];

/* ---- helpers ------------------------------------------------------------- */

static char *tmp_path(const char *name) {
    size_t n = strlen(tmp_dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", tmp_dir, name);
    return p;
}

static void put_be32(uint8_t *b, uint32_t v) {
    b[0] = (uint8_t)(v >> 24), b[1] = (uint8_t)(v >> 16), b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

/* Writes bytes to tmp_dir/name, through gzip if gz; returns the path (malloc'd). */
static char *write_bytes(const char *name, const void *data, size_t len, int gz) {
    if (!gz) return tu_write_file(tmp_dir, name, data, len);
    char *path = tmp_path(name);
    gzFile f = gzopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (len > 0) ck_assert_int_eq(gzwrite(f, data, (unsigned)len), (int)len);
    ck_assert_int_eq(gzclose(f), Z_OK);
    return path;
}

/* An IDX file: magic 00 00 type ndim, big-endian dims, then `len` payload
 * bytes (already big-endian where that matters). */
static char *write_idx(const char *name, int type, int ndim, const uint32_t *dims,
                       const void *payload, size_t len, int gz) {
    size_t hlen = 4 + 4 * (size_t)ndim;
    uint8_t *buf = malloc(hlen + len + 1);
    buf[0] = 0, buf[1] = 0, buf[2] = (uint8_t)type, buf[3] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++)
        put_be32(buf + 4 + 4 * i, dims[i]);
    if (len > 0) memcpy(buf + hlen, payload, len);
    char *path = write_bytes(name, buf, hlen + len, gz);
    free(buf);
    return path;
}

/* An NPY file with a hand-written header of the given version (1, 2 or 3). */
static char *write_npy_raw(const char *name, int major, const char *dict, const void *data,
                           size_t len) {
    size_t lenbytes = major == 1 ? 2 : 4, dlen = strlen(dict);
    size_t total = 8 + lenbytes + dlen + 1;
    size_t padded = (total + 63) / 64 * 64, hlen = padded - 8 - lenbytes;
    uint8_t *buf = calloc(1, padded + len + 1);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major, buf[7] = 0;
    for (size_t i = 0; i < lenbytes; i++)
        buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    memset(buf + 8 + lenbytes, ' ', hlen);
    memcpy(buf + 8 + lenbytes, dict, dlen);
    buf[padded - 1] = '\n';
    if (len > 0) memcpy(buf + padded, data, len);
    char *path = tu_write_file(tmp_dir, name, buf, padded + len);
    free(buf);
    return path;
}

static void assert_zeroed(const mr_array *a) {
    ck_assert_ptr_null(a->data);
    ck_assert_int_eq(a->ndim, 0);
    for (int i = 0; i < MR_ARRAY_MAX_DIMS; i++)
        ck_assert_int_eq(a->dims[i], 0);
}

/* Reads `spec` expecting failure: status, first line naming `path`, and the
 * `needle` (a word that says what is wrong). */
static void expect_fail(const char *spec, const char *path, mr_status want, const char *needle) {
    mr_array a;
    memset(&a, 0xAB, sizeof a); /* garbage in: the reader must clear it */
    mr_error err = {0};
    mr_status st = mr_array_read(spec, &a, &err);
    ck_assert_msg(st == want, "%s: status %s, expected %s (%s)", spec, mr_status_name(st),
                  mr_status_name(want), err.msg);
    ck_assert_int_eq(err.status, want);
    ck_assert_msg(strstr(err.msg, path) == err.msg, "message does not start with the path: %s",
                  err.msg);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "message lacks '%s': %s", needle, err.msg);
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    assert_zeroed(&a);
}

static void read_ok(const char *spec, mr_array *a) {
    mr_error err = {0};
    mr_status st = mr_array_read(spec, a, &err);
    ck_assert_msg(st == MR_OK, "%s: %s", spec, err.msg);
    ck_assert_int_eq(err.status, MR_OK);
    ck_assert_ptr_nonnull(a->data);
}

static void assert_dims(const mr_array *a, int ndim, const int64_t *dims) {
    ck_assert_int_eq(a->ndim, ndim);
    for (int i = 0; i < ndim; i++)
        ck_assert_int_eq(a->dims[i], dims[i]);
}

/* ---- dtype and array helpers ------------------------------------------- */

START_TEST(test_dtype_helpers) {
    ck_assert_uint_eq(mr_dtype_size(MR_DTYPE_U8), 1);
    ck_assert_uint_eq(mr_dtype_size(MR_DTYPE_I32), 4);
    ck_assert_uint_eq(mr_dtype_size(MR_DTYPE_I64), 8);
    ck_assert_uint_eq(mr_dtype_size(MR_DTYPE_F32), 4);
    ck_assert_str_eq(mr_dtype_name(MR_DTYPE_U8), "uint8");
    ck_assert_str_eq(mr_dtype_name(MR_DTYPE_I32), "int32");
    ck_assert_str_eq(mr_dtype_name(MR_DTYPE_I64), "int64");
    ck_assert_str_eq(mr_dtype_name(MR_DTYPE_F32), "float32");
}
END_TEST

START_TEST(test_count_and_row_size) {
    mr_array a = {.dtype = MR_DTYPE_F32, .ndim = 3, .dims = {10, 28, 28}};
    ck_assert_int_eq(mr_array_count(&a), 10 * 28 * 28);
    ck_assert_int_eq(mr_array_row_size(&a), 28 * 28);
    mr_array b = {.dtype = MR_DTYPE_U8, .ndim = 1, .dims = {7}};
    ck_assert_int_eq(mr_array_count(&b), 7);
    ck_assert_int_eq(mr_array_row_size(&b), 1);
    mr_array s = {.dtype = MR_DTYPE_F32, .ndim = 0};
    ck_assert_int_eq(mr_array_count(&s), 1);
    ck_assert_int_eq(mr_array_row_size(&s), 1);
    mr_array e = {.dtype = MR_DTYPE_F32, .ndim = 2, .dims = {0, 5}};
    ck_assert_int_eq(mr_array_count(&e), 0);
    ck_assert_int_eq(mr_array_row_size(&e), 5);
    /* free is safe on a zeroed array and zeroes an owned one */
    mr_array z = {0};
    mr_array_free(&z);
    mr_array owned = {.dtype = MR_DTYPE_U8, .ndim = 1, .dims = {3}, .data = malloc(3)};
    mr_array_free(&owned);
    assert_zeroed(&owned);
}
END_TEST

/* ---- IDX ----------------------------------------------------------------- */

/* 3-D uint8 images (N=3, 4x5) and 1-D labels, raw and gzip. */
START_TEST(test_idx_u8) {
    for (int gz = 0; gz <= 1; gz++) {
        uint8_t img[3 * 4 * 5], lab[10];
        for (int i = 0; i < 60; i++)
            img[i] = (uint8_t)(i * 7 + 3);
        for (int i = 0; i < 10; i++)
            lab[i] = (uint8_t)(i % 10);
        uint32_t idims[3] = {3, 4, 5}, ldims[1] = {10};
        char *ip = write_idx(gz ? "img.gz" : "img", 0x08, 3, idims, img, sizeof img, gz);
        char *lp = write_idx(gz ? "lab.gz" : "lab", 0x08, 1, ldims, lab, sizeof lab, gz);
        mr_array a, b;
        read_ok(ip, &a);
        ck_assert_int_eq(a.dtype, MR_DTYPE_U8);
        assert_dims(&a, 3, (int64_t[]){3, 4, 5});
        ck_assert_int_eq(mr_array_row_size(&a), 20);
        ck_assert_mem_eq(a.data, img, sizeof img);
        /* the explicit reader gives the same */
        mr_error err = {0};
        ck_assert_int_eq(mr_array_read_idx(lp, &b, &err), MR_OK);
        ck_assert_int_eq(b.dtype, MR_DTYPE_U8);
        assert_dims(&b, 1, (int64_t[]){10});
        ck_assert_mem_eq(b.data, lab, sizeof lab);
        mr_array_free(&a);
        mr_array_free(&b);
        assert_zeroed(&a);
        free(ip);
        free(lp);
    }
}
END_TEST

START_TEST(test_idx_i32) {
    const int32_t v[6] = {0, 1, -1, 2147483647, -2147483647 - 1, 123456789};
    uint8_t be[sizeof v];
    for (int i = 0; i < 6; i++)
        put_be32(be + 4 * i, (uint32_t)v[i]);
    for (int gz = 0; gz <= 1; gz++) {
        char *p = write_idx(gz ? "i32.gz" : "i32", 0x0C, 2, (uint32_t[]){2, 3}, be, sizeof be, gz);
        mr_array a;
        read_ok(p, &a);
        ck_assert_int_eq(a.dtype, MR_DTYPE_I32);
        assert_dims(&a, 2, (int64_t[]){2, 3});
        const int32_t *d = a.data;
        for (int i = 0; i < 6; i++)
            ck_assert_int_eq(d[i], v[i]);
        mr_array_free(&a);
        free(p);
    }
}
END_TEST

START_TEST(test_idx_f32) {
    const float v[4] = {0.0f, -1.5f, 3.25e-7f, 65504.0f};
    uint8_t be[sizeof v];
    for (int i = 0; i < 4; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        put_be32(be + 4 * i, u);
    }
    for (int gz = 0; gz <= 1; gz++) {
        char *p = write_idx(gz ? "f32.gz" : "f32", 0x0D, 1, (uint32_t[]){4}, be, sizeof be, gz);
        mr_array a;
        read_ok(p, &a);
        ck_assert_int_eq(a.dtype, MR_DTYPE_F32);
        assert_dims(&a, 1, (int64_t[]){4});
        ck_assert_mem_eq(a.data, v, sizeof v); /* bit-exact */
        mr_array_free(&a);
        free(p);
    }
}
END_TEST

/* ---- NPY ----------------------------------------------------------------- */

/* Writes with mr_npy_write, checks numpy's layout, reads it back. */
static void npy_round_trip(const char *name, mr_dtype dtype, int ndim, const int64_t *dims,
                           const char *descr, const char *shape_text) {
    mr_array a = {.dtype = dtype, .ndim = ndim};
    memcpy(a.dims, dims, sizeof(int64_t) * (size_t)ndim);
    size_t bytes = (size_t)mr_array_count(&a) * mr_dtype_size(dtype);
    a.data = malloc(bytes + 1);
    for (size_t i = 0; i < bytes; i++)
        ((uint8_t *)a.data)[i] = (uint8_t)(i * 31 + 7);
    char *path = tmp_path(name);
    mr_error err = {0};
    ck_assert_msg(mr_npy_write(path, &a, &err) == MR_OK, "%s", err.msg);

    size_t flen;
    char *file = tu_read_file(path, &flen);
    ck_assert_ptr_nonnull(file);
    ck_assert_mem_eq(file, "\x93NUMPY\x01\x00", 8);
    size_t hlen = (uint8_t)file[8] | (size_t)(uint8_t)file[9] << 8;
    ck_assert_uint_eq((10 + hlen) % 64, 0);
    ck_assert_uint_eq(flen, 10 + hlen + bytes);
    ck_assert_int_eq(file[10 + hlen - 1], '\n');
    char want[256];
    snprintf(want, sizeof want, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr,
             shape_text);
    ck_assert_msg(strncmp(file + 10, want, strlen(want)) == 0, "header: %.*s", (int)hlen,
                  file + 10);
    free(file);

    mr_array b;
    read_ok(path, &b);
    ck_assert_int_eq(b.dtype, dtype);
    assert_dims(&b, ndim, dims);
    if (bytes > 0) ck_assert_mem_eq(b.data, a.data, bytes);
    mr_array_free(&a);
    mr_array_free(&b);
    free(path);
}

START_TEST(test_npy_round_trip) {
    npy_round_trip("u8.npy", MR_DTYPE_U8, 3, (int64_t[]){5, 4, 3}, "|u1", "5, 4, 3");
    npy_round_trip("i32.npy", MR_DTYPE_I32, 1, (int64_t[]){9}, "<i4", "9,");
    npy_round_trip("i64.npy", MR_DTYPE_I64, 2, (int64_t[]){3, 2}, "<i8", "3, 2");
    npy_round_trip("f32.npy", MR_DTYPE_F32, 4, (int64_t[]){2, 3, 4, 1}, "<f4", "2, 3, 4, 1");
    npy_round_trip("scalar.npy", MR_DTYPE_F32, 0, (int64_t[]){0}, "<f4", "");
    npy_round_trip("empty.npy", MR_DTYPE_F32, 2, (int64_t[]){0, 10}, "<f4", "0, 10");
}
END_TEST

/* Version 2.0 (4-byte header length), written by hand. */
START_TEST(test_npy_v2) {
    const float v[6] = {1, 2, 3, -4, 5.5f, 1e-3f};
    char *p = write_npy_raw(
        "v2.npy", 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v, sizeof v);
    mr_array a;
    read_ok(p, &a);
    ck_assert_int_eq(a.dtype, MR_DTYPE_F32);
    assert_dims(&a, 2, (int64_t[]){2, 3});
    ck_assert_mem_eq(a.data, v, sizeof v);
    mr_array_free(&a);
    free(p);
}
END_TEST

/* Other writers: version 3.0, double quotes, other key order, no trailing
 * comma, '<u1' for uint8. */
START_TEST(test_npy_header_variants) {
    const int64_t v[3] = {-5, 0, 9007199254740993LL};
    char *p = write_npy_raw("v3.npy", 3,
                            "{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<i8\"}", v,
                            sizeof v);
    mr_array a;
    read_ok(p, &a);
    ck_assert_int_eq(a.dtype, MR_DTYPE_I64);
    assert_dims(&a, 1, (int64_t[]){3});
    ck_assert_mem_eq(a.data, v, sizeof v);
    mr_array_free(&a);
    free(p);

    const uint8_t u[4] = {0, 1, 254, 255};
    p = write_npy_raw("u1.npy", 1, "{'descr':'<u1','fortran_order':False,'shape':(2,2)}", u, 4);
    read_ok(p, &a);
    ck_assert_int_eq(a.dtype, MR_DTYPE_U8);
    assert_dims(&a, 2, (int64_t[]){2, 2});
    ck_assert_mem_eq(a.data, u, 4);
    mr_array_free(&a);
    free(p);
}
END_TEST

/* ---- HDF5 ---------------------------------------------------------------- */

/* Writes a dataset stored as `ftype` from memory of `mtype`. */
static void h5_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int ndim,
                     const hsize_t *dims, const void *data) {
    hid_t space = H5Screate_simple(ndim, dims, NULL);
    ck_assert_int_ge(space, 0);
    hid_t ds = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert_int_ge(ds, 0);
    ck_assert_int_ge(H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
    H5Dclose(ds);
    H5Sclose(space);
}

static const uint8_t H5_U8[2][3] = {{0, 1, 2}, {253, 254, 255}};
static const int64_t H5_I64[4] = {-1, 0, 1, 4611686018427387904LL};
static const float H5_F32[2][2] = {{0.5f, -2.0f}, {1e-6f, 3.0e9f}};
static const int16_t H5_I16[3] = {-32768, 7, 32767};
static const int32_t H5_I32[2] = {-100000, 100000};
static const double H5_F64[3] = {0.25, -1.0, 1e10};

/* A file with one dataset per supported type, one in a group, and a string
 * dataset; returns its path. */
static char *make_h5(void) {
    char *path = tmp_path("data.h5");
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    h5_write(f, "u8", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, (hsize_t[]){2, 3}, H5_U8);
    hid_t g = H5Gcreate2(f, "grp", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    h5_write(g, "i64", H5T_NATIVE_INT64, H5T_NATIVE_INT64, 1, (hsize_t[]){4}, H5_I64);
    H5Gclose(g);
    h5_write(f, "f32", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, 2, (hsize_t[]){2, 2},
             H5_F32); /* big-endian on disk */
    h5_write(f, "i16", H5T_STD_I16BE, H5T_NATIVE_INT16, 1, (hsize_t[]){3}, H5_I16);
    h5_write(f, "i32", H5T_NATIVE_INT32, H5T_NATIVE_INT32, 1, (hsize_t[]){2}, H5_I32);
    h5_write(f, "f64", H5T_NATIVE_DOUBLE, H5T_NATIVE_DOUBLE, 1, (hsize_t[]){3}, H5_F64);
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 4);
    h5_write(f, "str", str, str, 1, (hsize_t[]){2}, "abcdefgh");
    H5Tclose(str);
    H5Fclose(f);
    return path;
}

static void h5_read_ok(const char *path, const char *ds, mr_array *a) {
    char spec[4200];
    snprintf(spec, sizeof spec, "%s:%s", path, ds);
    read_ok(spec, a);
}

START_TEST(test_h5_types) {
    char *path = make_h5();
    mr_array a;

    h5_read_ok(path, "/u8", &a);
    ck_assert_int_eq(a.dtype, MR_DTYPE_U8);
    assert_dims(&a, 2, (int64_t[]){2, 3});
    ck_assert_mem_eq(a.data, H5_U8, sizeof H5_U8);
    mr_array_free(&a);

    /* the explicit reader, a dataset in a group, a name without '/' */
    mr_error err = {0};
    ck_assert_int_eq(mr_array_read_h5(path, "grp/i64", &a, &err), MR_OK);
    ck_assert_int_eq(a.dtype, MR_DTYPE_I64);
    assert_dims(&a, 1, (int64_t[]){4});
    ck_assert_mem_eq(a.data, H5_I64, sizeof H5_I64);
    mr_array_free(&a);

    h5_read_ok(path, "/f32", &a);
    ck_assert_int_eq(a.dtype, MR_DTYPE_F32);
    assert_dims(&a, 2, (int64_t[]){2, 2});
    ck_assert_mem_eq(a.data, H5_F32, sizeof H5_F32);
    mr_array_free(&a);

    h5_read_ok(path, "/i16", &a); /* other integer widths widen to int64 */
    ck_assert_int_eq(a.dtype, MR_DTYPE_I64);
    assert_dims(&a, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(((int64_t *)a.data)[i], H5_I16[i]);
    mr_array_free(&a);

    h5_read_ok(path, "/i32", &a);
    ck_assert_int_eq(a.dtype, MR_DTYPE_I32);
    ck_assert_mem_eq(a.data, H5_I32, sizeof H5_I32);
    mr_array_free(&a);

    h5_read_ok(path, "/f64", &a); /* other floats narrow to float32 */
    ck_assert_int_eq(a.dtype, MR_DTYPE_F32);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq(((float *)a.data)[i], (float)H5_F64[i]);
    mr_array_free(&a);

    /* ".hdf5:" works too */
    char *copy = tmp_path("data.hdf5");
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, copy);
    ck_assert_int_eq(tu_run(cmd, NULL), 0);
    h5_read_ok(copy, "/u8", &a);
    ck_assert_mem_eq(a.data, H5_U8, sizeof H5_U8);
    mr_array_free(&a);
    free(copy);
    free(path);
}
END_TEST

/* ---- bad input ----------------------------------------------------------- */

START_TEST(test_missing_file) {
    char *p = tmp_path("no-such-file-idx3-ubyte.gz");
    expect_fail(p, p, MR_ERR_NOT_FOUND, "cannot open: No such file or directory");
    free(p);
    p = tmp_path("missing.npy");
    expect_fail(p, p, MR_ERR_NOT_FOUND, "cannot open: No such file or directory");
    free(p);
    p = tmp_path("missing.h5");
    char spec[4200];
    snprintf(spec, sizeof spec, "%s:/x", p);
    expect_fail(spec, p, MR_ERR_NOT_FOUND, "cannot open: No such file or directory");
    free(p);
}
END_TEST

START_TEST(test_idx_wrong_magic) {
    const uint8_t bytes[16] = {0x01, 0x00, 0x08, 0x01, 0, 0, 0, 4, 1, 2, 3, 4};
    char *p = write_bytes("magic.idx", bytes, 12, 0);
    expect_fail(p, p, MR_ERR_DATA, "wrong IDX magic 0x01000801");
    free(p);
}
END_TEST

START_TEST(test_idx_unsupported_type) {
    const uint8_t v[8] = {0};
    char *p = write_idx("f64.idx", 0x0E, 1, (uint32_t[]){1}, v, 8, 0);
    expect_fail(p, p, MR_ERR_DATA, "unsupported IDX element type 0x0E (float64)");
    free(p);
    p = write_idx("ndim0.idx", 0x08, 0, NULL, v, 1, 0);
    expect_fail(p, p, MR_ERR_DATA, "0 dimensions");
    free(p);
}
END_TEST

START_TEST(test_idx_truncated) {
    uint8_t img[2 * 3 * 3] = {0};
    for (int gz = 0; gz <= 1; gz++) {
        /* header says 3x3x3 = 27 bytes, 18 follow */
        char *p = write_idx(gz ? "trunc.gz" : "trunc", 0x08, 3, (uint32_t[]){3, 3, 3}, img,
                            sizeof img, gz);
        expect_fail(p, p, MR_ERR_DATA, "truncated: header says 27 bytes of data, file has 18");
        free(p);
    }
    /* the header itself cut short: magic says 3 dims, only one follows */
    const uint8_t hdr[8] = {0, 0, 0x08, 3, 0, 0, 0, 9};
    char *p = write_bytes("trunc-hdr", hdr, sizeof hdr, 0);
    expect_fail(p, p, MR_ERR_DATA, "truncated: IDX header needs 16 bytes, file has 8");
    free(p);
    p = write_bytes("empty.gz", "", 0, 1);
    expect_fail(p, p, MR_ERR_DATA, "truncated");
    free(p);
}
END_TEST

/* A gzip file cut short mid-stream (not at an element boundary either). */
START_TEST(test_idx_truncated_gzip_stream) {
    uint8_t img[4 * 64 * 64];
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (uint8_t)(i * 2654435761u >> 13);
    char *p = write_idx("cut.gz", 0x08, 3, (uint32_t[]){4, 64, 64}, img, sizeof img, 1);
    size_t len;
    char *whole = tu_read_file(p, &len);
    free(p);
    p = write_bytes("cut.gz", whole, len / 2, 0);
    mr_array a;
    mr_error err = {0};
    mr_status st = mr_array_read(p, &a, &err);
    /* zlib reports a cut stream as a short read; either way the message must
     * name the file and say truncated */
    ck_assert_int_eq(st, MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, p) == err.msg && strstr(err.msg, "truncated") != NULL, "%s",
                  err.msg);
    assert_zeroed(&a);
    free(whole);
    free(p);
}
END_TEST

START_TEST(test_idx_corrupt_gzip) {
    /* a valid gzip header (deflate, no flags, unix) then bytes whose first
     * block header says block type 3, which does not exist */
    uint8_t bytes[10 + 64] = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03};
    memset(bytes + 10, 0xFF, 64);
    char *p = write_bytes("corrupt.gz", bytes, sizeof bytes, 0);
    expect_fail(p, p, MR_ERR_DATA, "corrupt gzip data: invalid block type");
    free(p);
}
END_TEST

/* Bytes after the gzip stream (zlib's gzread skips them) are refused; a file of two gzip
 * members, as `cat a.gz b.gz` makes, is one stream of data and is read. */
START_TEST(test_gzip_trailing_garbage) {
    uint8_t img[2 * 3 * 3];
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (uint8_t)(i * 7);
    char *p = write_idx("whole.gz", 0x08, 3, (uint32_t[]){2, 3, 3}, img, sizeof img, 1);
    size_t len;
    char *whole = tu_read_file(p, &len);
    free(p);
    char *more = malloc(len + 16);
    memcpy(more, whole, len);
    memcpy(more + len, "garbage appended", 16);
    p = write_bytes("garbage.gz", more, len + 16, 0);
    expect_fail(p, p, MR_ERR_DATA, "trailing data after the gzip stream");
    free(p);
    /* two members: the header in one, the payload in the other */
    const uint8_t hdr[16] = {0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 3};
    char *a = write_bytes("head.gz", hdr, sizeof hdr, 1),
         *b = write_bytes("body.gz", img, sizeof img, 1);
    size_t la, lb;
    char *ta = tu_read_file(a, &la), *tb = tu_read_file(b, &lb);
    char *both = malloc(la + lb);
    memcpy(both, ta, la), memcpy(both + la, tb, lb);
    p = write_bytes("members.gz", both, la + lb, 0);
    mr_array arr;
    mr_error err = {0};
    ck_assert_msg(mr_array_read(p, &arr, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(arr.dims[0], 2);
    ck_assert_int_eq(memcmp(arr.data, img, sizeof img), 0);
    mr_array_free(&arr);
    free(p), free(a), free(b), free(ta), free(tb), free(both), free(whole), free(more);
}
END_TEST

START_TEST(test_idx_trailing_bytes) {
    uint8_t lab[12] = {0};
    for (int gz = 0; gz <= 1; gz++) {
        char *p = write_idx(gz ? "trail.gz" : "trail", 0x08, 1, (uint32_t[]){10}, lab, 12, gz);
        expect_fail(p, p, MR_ERR_DATA, "trailing data: header says 10 bytes of data, file has 12");
        free(p);
    }
}
END_TEST

START_TEST(test_idx_bad_dims) {
    char *p = write_idx("zero", 0x08, 2, (uint32_t[]){5, 0}, NULL, 0, 0);
    expect_fail(p, p, MR_ERR_DATA, "IDX dimension 2 of 2 is 0");
    free(p);
    /* 2^32-1 cubed overflows int64; 100000^2 float32 = 40 GB passes int64
     * but not the size limit. Neither may try to allocate. */
    p = write_idx("huge", 0x08, 3, (uint32_t[]){0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, NULL, 0, 0);
    expect_fail(p, p, MR_ERR_DATA, "larger than the 16 GiB limit");
    free(p);
    p = write_idx("big", 0x0D, 2, (uint32_t[]){100000, 100000}, NULL, 0, 0);
    expect_fail(p, p, MR_ERR_DATA, "array of shape 100000x100000 (float32) is larger");
    free(p);
}
END_TEST

/* A header whose dims the file cannot hold is refused before the data is
 * allocated (fuzz_idx found 12 bytes asking for 17 GB: an out-of-memory
 * under the sanitizers, tests/fuzz/corpus/idx/). 60000x60000x3 uint8 is
 * 10.8 GB, under the size limit. */
START_TEST(test_idx_dims_larger_than_file) {
    const uint32_t dims[3] = {60000, 60000, 3};
    char *p = write_idx("big-raw", 0x08, 3, dims, NULL, 0, 0);
    expect_fail(p, p, MR_ERR_DATA, "truncated: header says 10800000000 bytes of data, file has 0");
    free(p);
    p = write_idx("big.gz", 0x08, 3, dims, NULL, 0, 1);
    expect_fail(p, p, MR_ERR_DATA, "truncated: header says 10800000000 bytes of data, more than");
    free(p);
}
END_TEST

START_TEST(test_npy_bad_magic) {
    char *p = tu_write_text(tmp_dir, "zip.npy", "PK\x03\x04 this is a zip archive");
    expect_fail(p, p, MR_ERR_DATA, "a zip archive; unzip it");
    free(p);
    p = write_bytes("zero.npy", "", 0, 0);
    expect_fail(p, p, MR_ERR_DATA, "wrong NPY magic");
    free(p);
    const uint8_t v4[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 4, 0, 0, 0};
    p = write_bytes("v4.npy", v4, sizeof v4, 0);
    expect_fail(p, p, MR_ERR_DATA, "unsupported NPY version 4.0");
    free(p);
}
END_TEST

START_TEST(test_npy_fortran_order) {
    const float v[6] = {0};
    char *p =
        write_npy_raw("fortran.npy", 1,
                      "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", v, sizeof v);
    expect_fail(p, p, MR_ERR_DATA, "Fortran order");
    free(p);
}
END_TEST

/* NaN or Inf in float input is refused at load, naming the example (the
 * row along dims[0]) and the element in it; the same values finite load. */
START_TEST(test_nonfinite_refused) {
    float v[2][3] = {{0.5f, 1.0f, 2.0f}, {3.0f, 4.0f, 5.0f}};
    char *p =
        write_npy_raw("finite.npy", 1,
                      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v, sizeof v);
    mr_array a;
    read_ok(p, &a);
    mr_array_free(&a);
    free(p);
    v[1][2] = NAN;
    p = write_npy_raw("nan.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                      v, sizeof v);
    expect_fail(p, p, MR_ERR_DATA, "example 1 has a non-finite value (NaN) at element 2");
    free(p);
    v[1][2] = 5.0f;
    v[0][1] = -INFINITY;
    p = write_npy_raw("inf.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                      v, sizeof v);
    expect_fail(p, p, MR_ERR_DATA, "example 0 has a non-finite value (Inf) at element 1");
    free(p);
    /* HDF5: a NaN stored as a double is still one after the conversion to float */
    p = tmp_path("nonfinite.h5");
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    const double d[3][1] = {{1.0}, {2.0}, {NAN}};
    h5_write(f, "x", H5T_NATIVE_DOUBLE, H5T_NATIVE_DOUBLE, 2, (hsize_t[]){3, 1}, d);
    H5Fclose(f);
    char spec[4200];
    snprintf(spec, sizeof spec, "%s:/x", p);
    expect_fail(spec, spec, MR_ERR_DATA, "example 2 has a non-finite value (NaN) at element 0");
    free(p);
}
END_TEST

/* float64 (numpy's default) is read as float32, marked from_float64; a
 * finite value beyond float32's range is refused, a NaN named as such. */
START_TEST(test_npy_float64) {
    const double v[4] = {0.1, -2.5, 1e30, 3.0};
    char *p = write_npy_raw(
        "f8.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", v, sizeof v);
    mr_array a;
    mr_error err = {0};
    ck_assert_msg(mr_array_read(p, &a, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(a.dtype, MR_DTYPE_F32);
    ck_assert_int_eq(a.from_float64, 1);
    ck_assert_int_eq(a.ndim, 2);
    for (int i = 0; i < 4; i++)
        ck_assert(((float *)a.data)[i] == (float)v[i]);
    mr_array_free(&a);
    free(p);
    const double big[2] = {1.0, 1e300};
    p = write_npy_raw("f8big.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
                      big, sizeof big);
    expect_fail(p, p, MR_ERR_DATA, "float64 value 1e+300 (element 1) is beyond float32's range");
    free(p);
    const double nan[2] = {1.0, NAN};
    p = write_npy_raw("f8nan.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
                      nan, sizeof nan);
    expect_fail(p, p, MR_ERR_DATA, "non-finite value (NaN)");
    free(p);
}
END_TEST

/* Labels as numpy saved them: every integer width widens to int32 or int64, signed values
 * sign-extended; a uint64 beyond int64 is refused. */
START_TEST(test_npy_integer_widths) {
    const struct {
        const char *descr;
        const void *data;
        size_t len;
        mr_dtype dtype;
        int64_t want[3];
    } cases[] = {
        {"|i1", "\xff\x00\x7f", 3, MR_DTYPE_I32, {-1, 0, 127}},
        {"<i2", "\x00\x80\x07\x00\xff\x7f", 6, MR_DTYPE_I32, {-32768, 7, 32767}},
        {"<u2", "\xff\xff\x01\x00\x00\x00", 6, MR_DTYPE_I32, {65535, 1, 0}},
        {"<u4",
         "\xff\xff\xff\xff\x02\x00\x00\x00\x00\x00\x00\x00",
         12,
         MR_DTYPE_I64,
         {4294967295LL, 2, 0}},
        {"<u8",
         "\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
         "\xff\xff\xff\xff\xff\xff\xff\x7f",
         24,
         MR_DTYPE_I64,
         {9, 0, INT64_MAX}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }",
                 cases[c].descr);
        char *p = write_npy_raw("w.npy", 1, dict, cases[c].data, cases[c].len);
        mr_array a;
        read_ok(p, &a);
        ck_assert_int_eq(a.dtype, cases[c].dtype);
        assert_dims(&a, 1, (int64_t[]){3});
        for (int i = 0; i < 3; i++) {
            int64_t v = a.dtype == MR_DTYPE_I32 ? ((int32_t *)a.data)[i] : ((int64_t *)a.data)[i];
            ck_assert_msg(v == cases[c].want[i], "%s[%d] = %lld", cases[c].descr, i, (long long)v);
        }
        mr_array_free(&a);
        free(p);
    }
    char *p =
        write_npy_raw("big.npy", 1, "{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }",
                      "\x00\x00\x00\x00\x00\x00\x00\x80", 8);
    expect_fail(p, p, MR_ERR_DATA, "uint64 value 9223372036854775808 (element 0) is beyond");
    free(p);
    /* a short payload is named in the file's bytes (2 a value), not memory's */
    p = write_npy_raw("short.npy", 1, "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }",
                      "\x01\x00\x02\x00", 4);
    expect_fail(p, p, MR_ERR_DATA, "header says 6 bytes of data, file has 4");
    free(p);
}
END_TEST

START_TEST(test_npy_unsupported_dtype) {
    const double v[2] = {0};
    char *p = write_npy_raw("f2.npy", 1,
                            "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", v, 4);
    expect_fail(p, p, MR_ERR_DATA, "unsupported NPY dtype '<f2'");
    free(p);
    /* a dtype string with a newline in it (fuzz_npy): named on one line */
    p = write_npy_raw("nl.npy", 1, "{'descr': '<f\n2', 'fortran_order': False, 'shape': (2,), }", v,
                      4);
    expect_fail(p, p, MR_ERR_DATA, "unsupported NPY dtype '<f?2'");
    free(p);
    p = write_npy_raw("be.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", v,
                      16);
    expect_fail(p, p, MR_ERR_DATA, "unsupported NPY dtype '>f4'");
    free(p);
    p = write_npy_raw("rec.npy", 1,
                      "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", v, 16);
    expect_fail(p, p, MR_ERR_DATA, "structured dtypes are not supported");
    free(p);
}
END_TEST

START_TEST(test_npy_truncated) {
    const float v[5] = {0};
    char *p = write_npy_raw(
        "trunc.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }", v, sizeof v);
    expect_fail(p, p, MR_ERR_DATA, "truncated: header says 40 bytes of data, file has 20");
    free(p);
    /* a header length that runs past the end of the file */
    const uint8_t hdr[14] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0x76, 0, '{', '\'', 'd', 'e'};
    p = write_bytes("trunc-hdr.npy", hdr, sizeof hdr, 0);
    expect_fail(p, p, MR_ERR_DATA, "truncated: NPY header needs 128 bytes, file has 14");
    free(p);
    /* and too many bytes: the shape does not describe the file */
    p = write_npy_raw("trail.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
                      v, sizeof v);
    expect_fail(p, p, MR_ERR_DATA, "trailing data: header says 16 bytes of data, file has 20");
    free(p);
}
END_TEST

START_TEST(test_npy_bad_header) {
    char *p = write_npy_raw("hdr.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': 12}",
                            NULL, 0);
    expect_fail(p, p, MR_ERR_DATA, "bad NPY header: shape is not a tuple");
    free(p);
    p = write_npy_raw("nokey.npy", 1, "{'descr': '<f4', 'shape': (1,)}", NULL, 0);
    expect_fail(p, p, MR_ERR_DATA, "missing one of the keys");
    free(p);
}
END_TEST

START_TEST(test_h5_not_hdf5) {
    char *p = tu_write_text(tmp_dir, "text.h5", "this is not an HDF5 file, just text\n");
    char spec[4200];
    snprintf(spec, sizeof spec, "%s:/data", p);
    expect_fail(spec, p, MR_ERR_DATA, "cannot open as HDF5");
    free(p);
}
END_TEST

START_TEST(test_h5_missing_dataset) {
    char *p = make_h5();
    char spec[4200];
    snprintf(spec, sizeof spec, "%s:/nope", p);
    expect_fail(spec, p, MR_ERR_DATA, ":/nope: no such dataset");
    snprintf(spec, sizeof spec, "%s:/grp/deeper/nope", p);
    expect_fail(spec, p, MR_ERR_DATA, ":/grp/deeper/nope: no such dataset");
    snprintf(spec, sizeof spec, "%s:/grp", p);
    expect_fail(spec, p, MR_ERR_DATA, ":/grp: is a group, not a dataset");
    snprintf(spec, sizeof spec, "%s:/str", p);
    expect_fail(spec, p, MR_ERR_DATA, "unsupported HDF5 type class string");
    /* no dataset named at all */
    expect_fail(p, p, MR_ERR_CONFIG, "needs a dataset name");
    snprintf(spec, sizeof spec, "%s:", p);
    expect_fail(spec, p, MR_ERR_CONFIG, "no dataset named");
    free(p);
}
END_TEST

/* ---- real data ----------------------------------------------------------- */

START_TEST(test_fashion_mnist) {
    mr_array img, lab;
    read_ok(FASHION_TRAIN_IMAGES, &img);
    ck_assert_int_eq(img.dtype, MR_DTYPE_U8);
    assert_dims(&img, 3, (int64_t[]){60000, 28, 28});
    uint8_t mx = 0;
    for (int64_t i = 0; i < mr_array_count(&img); i++)
        if (((uint8_t *)img.data)[i] > mx) mx = ((uint8_t *)img.data)[i];
    ck_assert_int_gt(mx, 200); /* real pixels, not zeros */
    mr_array_free(&img);
    if (tu_exists(FASHION_TRAIN_LABELS)) {
        read_ok(FASHION_TRAIN_LABELS, &lab);
        assert_dims(&lab, 1, (int64_t[]){60000});
        for (int64_t i = 0; i < 60000; i++)
            ck_assert_int_lt(((uint8_t *)lab.data)[i], 10);
        mr_array_free(&lab);
    }
}
END_TEST

static Suite *array_suite(void) {
    Suite *s = suite_create("array");
    TCase *tc = tcase_create("helpers");
    tcase_add_test(tc, test_dtype_helpers);
    tcase_add_test(tc, test_count_and_row_size);
    suite_add_tcase(s, tc);

    tc = tcase_create("read");
    tcase_add_test(tc, test_idx_u8);
    tcase_add_test(tc, test_idx_i32);
    tcase_add_test(tc, test_idx_f32);
    tcase_add_test(tc, test_npy_round_trip);
    tcase_add_test(tc, test_npy_v2);
    tcase_add_test(tc, test_npy_header_variants);
    tcase_add_test(tc, test_h5_types);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_input");
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_idx_wrong_magic);
    tcase_add_test(tc, test_idx_unsupported_type);
    tcase_add_test(tc, test_idx_truncated);
    tcase_add_test(tc, test_idx_truncated_gzip_stream);
    tcase_add_test(tc, test_idx_corrupt_gzip);
    tcase_add_test(tc, test_idx_trailing_bytes);
    tcase_add_test(tc, test_gzip_trailing_garbage);
    tcase_add_test(tc, test_idx_bad_dims);
    tcase_add_test(tc, test_idx_dims_larger_than_file);
    tcase_add_test(tc, test_npy_bad_magic);
    tcase_add_test(tc, test_npy_fortran_order);
    tcase_add_test(tc, test_npy_float64);
    tcase_add_test(tc, test_npy_unsupported_dtype);
    tcase_add_test(tc, test_npy_integer_widths);
    tcase_add_test(tc, test_nonfinite_refused);
    tcase_add_test(tc, test_npy_truncated);
    tcase_add_test(tc, test_npy_bad_header);
    tcase_add_test(tc, test_h5_not_hdf5);
    tcase_add_test(tc, test_h5_missing_dataset);
    suite_add_tcase(s, tc);

    /* only where the data set is installed; absent, it is not run at all
     * (rather than counted as a pass) */
    if (tu_exists(FASHION_TRAIN_IMAGES)) {
        tc = tcase_create("real_data");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_fashion_mnist);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "%s", tu_tmpdir());
    SRunner *sr = srunner_create(array_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    tu_run(cmd, NULL);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
