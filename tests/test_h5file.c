/* test_h5file.c: HDF5 checkpoint files: atomic writes (a temporary file
 * renamed into place, the old file whole until then), attributes and
 * datasets read back, errors that name the file and the object, and the
 * checksums: a flipped bit in a dataset refused naming it. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/h5file.h"
#include "tests/testutil.h"

static char dir[4096];

static void setup(void) {
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
}

static char *path_of(const char *name) {
    static char p[8192];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* Writes a small file with every kind of object. */
static void write_sample(const char *path, float first) {
    mr_h5 h;
    mr_error err = {0};
    ck_assert_msg(mr_h5_create(&h, path, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_h5_attr_str(&h, h.file, "backend", "tensorflow", 1, &err), MR_OK);
    const char *names[] = {"dense", "dense_1"};
    hid_t g;
    ck_assert_int_eq(mr_h5_group(&h, h.file, "model_weights/dense", &g, &err), MR_OK);
    ck_assert_int_eq(mr_h5_attr_strs(&h, g, "weight_names", names, 2, &err), MR_OK);
    ck_assert_int_eq(mr_h5_attr_strs(&h, g, "empty", NULL, 0, &err), MR_OK);
    float w[6] = {first, 2, 3, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    ck_assert_int_eq(mr_h5_write(&h, g, "sequential/dense/kernel", MR_H5_F32, 2, dims, w, &err),
                     MR_OK);
    H5Gclose(g);
    int64_t step = 938;
    double x = 0.1;
    ck_assert_int_eq(mr_h5_write(&h, h.file, "a/step", MR_H5_I64, 0, NULL, &step, &err), MR_OK);
    ck_assert_int_eq(mr_h5_write(&h, h.file, "a/x", MR_H5_F64, 0, NULL, &x, &err), MR_OK);
    /* the target appears only at commit */
    ck_assert(tu_exists(h.tmp));
    ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
    ck_assert(!tu_exists(h.tmp));
}

START_TEST(write_then_read) {
    const char *p = path_of("a.h5");
    write_sample(p, 1.0f);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_OK);
    char *s;
    ck_assert_int_eq(mr_h5_read_attr_str(&h, h.file, "backend", &s, &err), MR_OK);
    ck_assert_str_eq(s, "tensorflow");
    free(s);
    hid_t g;
    ck_assert_int_eq(mr_h5_open_group(&h, h.file, "model_weights/dense", &g, &err), MR_OK);
    char **v;
    int n;
    ck_assert_int_eq(mr_h5_read_attr_strs(&h, g, "weight_names", &v, &n, &err), MR_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(v[1], "dense_1");
    mr_h5_free_strs(v, n);
    ck_assert_int_eq(mr_h5_read_attr_strs(&h, g, "empty", &v, &n, &err), MR_OK);
    ck_assert_int_eq(n, 0); /* Keras's empty list: float64 of shape (0,) */
    mr_h5_free_strs(v, n);
    float w[6];
    int64_t dims[2] = {2, 3};
    ck_assert_int_eq(mr_h5_read(&h, g, "sequential/dense/kernel", MR_H5_F32, 2, dims, w, &err),
                     MR_OK);
    ck_assert(w[0] == 1.0f && w[5] == 6.0f);
    /* a shape that is not the model's: both shapes named */
    int64_t other[2] = {3, 2};
    ck_assert_int_eq(mr_h5_read(&h, g, "sequential/dense/kernel", MR_H5_F32, 2, other, w, &err),
                     MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "a.h5") && strstr(err.msg, "/model_weights/dense/sequential") &&
                      strstr(err.msg, "(2, 3)") && strstr(err.msg, "(3, 2)"),
                  "%s", err.msg);
    /* missing things are named */
    mr_error_clear(&err);
    ck_assert_int_eq(mr_h5_read_attr_strs(&h, g, "nope", &v, &n, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "no attribute 'nope'") && strstr(err.msg, "/model_weights/dense"),
                  "%s", err.msg);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_h5_read(&h, g, "x/y", MR_H5_F32, 0, NULL, w, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "no dataset /model_weights/dense/x/y"), "%s", err.msg);
    H5Gclose(g);
    int64_t step;
    double x;
    ck_assert_int_eq(mr_h5_read(&h, h.file, "a/step", MR_H5_I64, 0, NULL, &step, &err), MR_OK);
    ck_assert_int_eq(mr_h5_read(&h, h.file, "a/x", MR_H5_F64, 0, NULL, &x, &err), MR_OK);
    ck_assert(step == 938 && x == 0.1);
    ck_assert(mr_h5_exists(&h, h.file, "a/step") && !mr_h5_exists(&h, h.file, "b/step"));
    mr_error_clear(&err);
    ck_assert_int_eq(mr_h5_open_group(&h, h.file, "nope/deeper", &g, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "no group /nope/deeper"), "%s", err.msg);
    mr_h5_close(&h);
}
END_TEST

/* Replacing a file: until commit the old one is whole; a discarded write
 * leaves it and no temporary file behind. */
START_TEST(atomic_replace) {
    const char *p = path_of("b.h5");
    write_sample(p, 1.0f);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_create(&h, p, &err), MR_OK);
    float z = 9;
    ck_assert_int_eq(mr_h5_write(&h, h.file, "z", MR_H5_F32, 0, NULL, &z, &err), MR_OK);
    char tmp[2048];
    snprintf(tmp, sizeof tmp, "%s", h.tmp);
    mr_h5_discard(&h);
    ck_assert(!tu_exists(tmp));
    mr_h5 r;
    ck_assert_int_eq(mr_h5_open(&r, p, &err), MR_OK);
    ck_assert(mr_h5_exists(&r, r.file, "a/step") && !mr_h5_exists(&r, r.file, "z"));
    mr_h5_close(&r);
    /* a commit replaces it */
    write_sample(p, 7.0f);
    ck_assert_int_eq(mr_h5_open(&r, p, &err), MR_OK);
    float w[6];
    int64_t dims[2] = {2, 3};
    ck_assert_int_eq(mr_h5_read(&r, r.file, "model_weights/dense/sequential/dense/kernel",
                                MR_H5_F32, 2, dims, w, &err),
                     MR_OK);
    ck_assert(w[0] == 7.0f);
    mr_h5_close(&r);
}
END_TEST

START_TEST(bad_files) {
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, path_of("missing.h5"), &err), MR_ERR_IO);
    ck_assert_msg(strstr(err.msg, "missing.h5: cannot open"), "%s", err.msg);
    mr_error_clear(&err);
    free(tu_write_text(dir, "text.h5", "not an HDF5 file at all\n"));
    ck_assert_int_eq(mr_h5_open(&h, path_of("text.h5"), &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "text.h5: not a readable HDF5 file"), "%s", err.msg);
    /* a file cut short: the first half of a real one */
    write_sample(path_of("whole.h5"), 1.0f);
    size_t len;
    char *bytes = tu_read_file(path_of("whole.h5"), &len);
    free(tu_write_file(dir, "cut.h5", bytes, len / 2));
    free(bytes);
    mr_error_clear(&err);
    mr_status st = mr_h5_open(&h, path_of("cut.h5"), &err);
    if (st == MR_OK) { /* the superblock survived: reading the rest fails, named */
        float w[6];
        int64_t dims[2] = {2, 3};
        st = mr_h5_read(&h, h.file, "model_weights/dense/sequential/dense/kernel", MR_H5_F32, 2,
                        dims, w, &err);
        mr_h5_close(&h);
    }
    ck_assert_int_eq(st, MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "cut.h5"), "%s", err.msg);
    /* a folder that cannot take the file: nothing created */
    mr_error_clear(&err);
    ck_assert_int_eq(mr_h5_create(&h, path_of("no/such/folder/x.h5"), &err), MR_ERR_IO);
    ck_assert_msg(strstr(err.msg, "x.h5: cannot write"), "%s", err.msg);
}
END_TEST

/* Flips bit 0 of the byte at offset `at` of path. */
static void flip(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 1, f);
    fclose(f);
}

/* The file offset of dataset obj's values. */
static long offset_of(const char *path, const char *obj) {
    mr_h5 h;
    mr_error err = {0};
    ck_assert_msg(mr_h5_open(&h, path, &err) == MR_OK, "%s", err.msg);
    hid_t d = H5Dopen2(h.file, obj, H5P_DEFAULT);
    haddr_t at = H5Dget_offset(d);
    H5Dclose(d);
    mr_h5_close(&h);
    ck_assert(at != HADDR_UNDEF);
    return (long)at;
}

/* A checkpoint-like file with checksums (mr_h5_create_checked). */
static void write_checked(const char *path) {
    mr_h5 h;
    mr_error err = {0};
    ck_assert_msg(mr_h5_create_checked(&h, path, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_h5_attr_str(&h, h.file, "backend", "tensorflow", 1, &err), MR_OK);
    float w[6] = {1, 2, 3, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    ck_assert_int_eq(mr_h5_write(&h, h.file, "model_weights/k", MR_H5_F32, 2, dims, w, &err),
                     MR_OK);
    ck_assert_int_eq(mr_h5_write_str(&h, h.file, "mirrored/cfg", "[net]\nseed=1\n", &err), MR_OK);
    ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
}

/* Every file mr_h5_open reads is checked whole first; a damaged one is
 * refused with one line naming the dataset where the damage is. */
START_TEST(checksums) {
    char p[8192];
    snprintf(p, sizeof p, "%s", path_of("c.h5")); /* path_of's buffer is reused */
    write_checked(p);
    mr_h5 h;
    mr_error err = {0};
    int sealed = 0;
    ck_assert_msg(mr_h5_verify(p, &sealed, &err) == MR_OK && sealed, "%s", err.msg);
    ck_assert_msg(mr_h5_open(&h, p, &err) == MR_OK, "%s", err.msg);
    char *s;
    ck_assert_msg(mr_h5_read_str(&h, h.file, "mirrored/cfg", &s, &err) == MR_OK, "%s", err.msg);
    ck_assert_str_eq(s, "[net]\nseed=1\n");
    free(s);
    ck_assert_int_eq(mr_h5_read_str(&h, h.file, "model_weights/k", &s, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "/model_weights/k is not a string"), "%s", err.msg);
    /* the table lists every dataset and attribute */
    mr_error_clear(&err);
    ck_assert_int_eq(mr_h5_read_str(&h, h.file, MR_H5_CHECKSUMS, &s, &err), MR_OK);
    ck_assert_msg(strstr(s, "\t/model_weights/k\t\n") && strstr(s, "\t/\tbackend\n") &&
                      strstr(s, "\t/mirrored/cfg\t\n") && strstr(s, "\t(table)\t\n"),
                  "%s", s);
    free(s);
    mr_h5_close(&h);
    /* a file without checksums (Keras's) passes unsealed */
    write_sample(path_of("plain.h5"), 1.0f);
    ck_assert_int_eq(mr_h5_verify(path_of("plain.h5"), &sealed, &err), MR_OK);
    ck_assert_int_eq(sealed, 0);
    /* one flipped bit in a weight, in the string: refused, named */
    const struct {
        const char *obj, *named;
    } cases[] = {{"model_weights/k", "c.h5: dataset /model_weights/k: checksum mismatch"},
                 {"mirrored/cfg", "c.h5: dataset /mirrored/cfg: checksum mismatch"}};
    for (int i = 0; i < 2; i++) {
        write_checked(p);
        flip(p, offset_of(p, cases[i].obj) + 1);
        mr_error_clear(&err);
        ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_ERR_DATA);
        ck_assert_msg(strstr(err.msg, cases[i].named) && !strchr(err.msg, '\n'), "%s", err.msg);
    }
    /* a flipped bit in HDF5's metadata (the superblock): refused too */
    write_checked(p);
    flip(p, MR_H5_USERBLOCK + 20);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "c.h5: checksum mismatch"), "%s", err.msg);
    /* truncated */
    write_checked(p);
    size_t len;
    char *bytes = tu_read_file(p, &len);
    free(tu_write_file(dir, "c.h5", bytes, len - 100));
    free(bytes);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "c.h5: ") && strstr(err.msg, "(the file is truncated)"), "%s",
                  err.msg);
    /* ours (a /mirrored group) without checksums: refused */
    ck_assert_int_eq(mr_h5_create(&h, p, &err), MR_OK);
    ck_assert_int_eq(mr_h5_write_str(&h, h.file, "mirrored/cfg", "x", &err), MR_OK);
    ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_h5_open(&h, p, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "c.h5: a mirrored checkpoint without its checksum"), "%s",
                  err.msg);
}
END_TEST

/* A global heap collection (where the variable-length strings are) whose
 * walk does not advance: HDF5 1.10 loops forever reading it, so mr_h5_open
 * refuses the file (fuzz_checkpoint found it, tests/fuzz/corpus/checkpoint/).
 * Made from a good file by zeroing the size of the collection's free space
 * (object 0); a 10 s timeout stands for the hang. */
START_TEST(corrupt_global_heap) {
    write_sample(path_of("good.h5"), 1.0f);
    size_t len;
    unsigned char *b = (unsigned char *)tu_read_file(path_of("good.h5"), &len);
    unsigned char *gcol = memmem(b, len, "GCOL\1\0\0\0", 8);
    ck_assert_msg(gcol != NULL, "no global heap in the sample");
    /* objects: index (2 bytes), refs (2), reserved (4), size (8), then the
     * data padded to 8 bytes; index 0 is the free space */
    uint64_t size = 0;
    for (int i = 7; i >= 0; i--)
        size = size << 8 | gcol[8 + i];
    unsigned char *p = gcol + 16, *end = gcol + size;
    while (p + 16 <= end && (p[0] | p[1]) != 0) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--)
            n = n << 8 | p[8 + i];
        p += 16 + ((n + 7) & ~(uint64_t)7);
    }
    ck_assert_msg(p + 16 <= end, "no free space in the sample's global heap");
    memset(p + 8, 0, 8);
    free(tu_write_file(dir, "heap.h5", b, len));
    free(b);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, path_of("heap.h5"), &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "heap.h5: not a readable HDF5 file (corrupt global heap at byte"),
                  "%s", err.msg);
    /* the good file still opens */
    ck_assert_int_eq(mr_h5_open(&h, path_of("good.h5"), &err), MR_OK);
    mr_h5_close(&h);
}
END_TEST

/* A variable-length string whose heap ID names an object its global heap
 * collection does not hold: HDF5 1.10 reads past its table of objects
 * (fuzz_checkpoint found it), so reading the attribute is refused naming
 * it, before HDF5 follows the ID. Made from a good file (an attribute of
 * three strings, not sealed: a Keras-made .h5 has no checksum) by changing
 * the index of a 7-letter string's heap ID; and a sealed file (a user
 * block: HDF5's addresses start 512 bytes in) reads its strings. */
START_TEST(bad_global_heap_index) {
    const char *const names[3] = {"dense", "dense_1", "dense_2"};
    for (int sealed = 0; sealed < 2; sealed++) {
        const char *p = path_of(sealed ? "sealed.h5" : "names.h5");
        mr_h5 h;
        mr_error err = {0};
        ck_assert_int_eq(sealed ? mr_h5_create_checked(&h, p, &err) : mr_h5_create(&h, p, &err),
                         MR_OK);
        ck_assert_int_eq(mr_h5_attr_strs(&h, h.file, "layer_names", names, 3, &err), MR_OK);
        ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
        ck_assert_msg(mr_h5_open(&h, p, &err) == MR_OK, "%s", err.msg);
        char **v;
        int n;
        ck_assert_msg(mr_h5_read_attr_strs(&h, h.file, "layer_names", &v, &n, &err) == MR_OK, "%s",
                      err.msg);
        ck_assert_int_eq(n, 3);
        ck_assert_str_eq(v[1], "dense_1");
        mr_h5_free_strs(v, n);
        mr_h5_close(&h);
    }
    size_t len;
    unsigned char *b = (unsigned char *)tu_read_file(path_of("names.h5"), &len);
    unsigned char *gcol = memmem(b, len, "GCOL\1\0\0\0", 8);
    ck_assert_msg(gcol != NULL, "no global heap in the sample");
    /* a heap ID: length 7, the collection's address (no user block: the
     * file offset), the index */
    unsigned char id[12] = {7, 0, 0, 0};
    for (int i = 0; i < 8; i++)
        id[4 + i] = (unsigned char)((uint64_t)(gcol - b) >> 8 * i);
    unsigned char *at = memmem(b, len, id, 12);
    ck_assert_msg(at != NULL && at + 16 <= b + len, "no heap ID in the sample");
    at[12] = 0x61, at[13] = 0x1e, at[14] = 0, at[15] = 0; /* index 7777 */
    free(tu_write_file(dir, "index.h5", b, len));
    free(b);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, path_of("index.h5"), &err), MR_OK);
    char **v;
    int n;
    ck_assert_int_eq(mr_h5_read_attr_strs(&h, h.file, "layer_names", &v, &n, &err), MR_ERR_DATA);
    mr_h5_close(&h);
    ck_assert_msg(strstr(err.msg, "index.h5: /: attribute 'layer_names': string "), "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "points at object 7777 of the global heap at "), "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "which does not hold it (the file is damaged)"), "%s", err.msg);
}
END_TEST

/* The same for a variable-length string dataset (h5py writes them; a
 * Keras-made file's text): refused by mr_h5_read_str naming it. */
START_TEST(bad_global_heap_index_dataset) {
    const char *p = path_of("text.h5");
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(t, H5T_VARIABLE);
    hid_t d = H5Dcreate2(f, "cfg_text", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char *text = "[net]\nbatch=4\n";
    ck_assert(H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text) >= 0);
    H5Dclose(d), H5Sclose(sp), H5Tclose(t), H5Fclose(f);
    mr_h5 h;
    mr_error err = {0};
    char *s;
    ck_assert_msg(mr_h5_open(&h, p, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_h5_read_str(&h, h.file, "cfg_text", &s, &err), MR_OK);
    ck_assert_str_eq(s, text);
    free(s);
    mr_h5_close(&h);
    size_t len;
    unsigned char *b = (unsigned char *)tu_read_file(p, &len);
    unsigned char *gcol = memmem(b, len, "GCOL\1\0\0\0", 8);
    ck_assert_msg(gcol != NULL, "no global heap in the sample");
    unsigned char id[12] = {(unsigned char)strlen(text), 0, 0, 0};
    for (int i = 0; i < 8; i++)
        id[4 + i] = (unsigned char)((uint64_t)(gcol - b) >> 8 * i);
    unsigned char *at = memmem(b, len, id, 12);
    ck_assert_msg(at != NULL && at + 16 <= b + len, "no heap ID in the sample");
    at[12] = 9; /* object 9: the collection holds object 1 only */
    free(tu_write_file(dir, "text_bad.h5", b, len));
    free(b);
    ck_assert_int_eq(mr_h5_open(&h, path_of("text_bad.h5"), &err), MR_OK);
    ck_assert_int_eq(mr_h5_read_str(&h, h.file, "cfg_text", &s, &err), MR_ERR_DATA);
    mr_h5_close(&h);
    ck_assert_msg(strstr(err.msg, "text_bad.h5: /cfg_text: string 0 points at object 9 of the "
                                  "global heap at "),
                  "%s", err.msg);
}
END_TEST

/* A dataset stored with a type wider than 8 bytes is refused before HDF5
 * reads it: a corrupt stored type had HDF5 allocate 4 GB to convert a few
 * weights (fuzz_checkpoint, tests/fuzz/corpus/checkpoint/). A 16-byte
 * long double stands for it here (HDF5 would convert that one). */
START_TEST(wide_stored_type) {
    hid_t f = H5Fcreate(path_of("wide.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t hd[2] = {2, 3};
    hid_t sp = H5Screate_simple(2, hd, NULL);
    hid_t d = H5Dcreate2(f, "w", H5T_NATIVE_LDOUBLE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    long double v[6] = {1, 2, 3, 4, 5, 6};
    ck_assert(H5Dwrite(d, H5T_NATIVE_LDOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d), H5Sclose(sp), H5Fclose(f);
    ck_assert_int_eq(H5Tget_size(H5T_NATIVE_LDOUBLE), 16);
    mr_h5 h;
    mr_error err = {0};
    ck_assert_int_eq(mr_h5_open(&h, path_of("wide.h5"), &err), MR_OK);
    float w[6];
    int64_t dims[2] = {2, 3};
    ck_assert_int_eq(mr_h5_read(&h, h.file, "w", MR_H5_F32, 2, dims, w, &err), MR_ERR_DATA);
    mr_h5_close(&h);
    ck_assert_msg(
        strstr(err.msg, "wide.h5: /w is stored as floats of 16 bytes, not numbers of 1 to 8"), "%s",
        err.msg);
}
END_TEST

/* A file larger than the heap walk's 1 MiB chunks (a checkpoint of
 * fashion_cnn_bn.cfg is 5 MB), its global heap (an attribute written after
 * the weights) past the first chunk: opened and read whole (under
 * AddressSanitizer: the chunks carried over stay inside the buffer). */
START_TEST(large_file) {
    const char *p = path_of("big.h5");
    mr_h5 h;
    mr_error err = {0};
    int64_t n = 600000; /* 2.4 MB of floats */
    float *w = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        w[i] = (float)i;
    ck_assert_int_eq(mr_h5_create(&h, p, &err), MR_OK);
    ck_assert_int_eq(mr_h5_write(&h, h.file, "w", MR_H5_F32, 1, &n, w, &err), MR_OK);
    ck_assert_int_eq(mr_h5_attr_str(&h, h.file, "note", "after the weights", 1, &err), MR_OK);
    ck_assert_int_eq(mr_h5_commit(&h, &err), MR_OK);
    memset(w, 0, sizeof(float) * (size_t)n);
    ck_assert_msg(mr_h5_open(&h, p, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_h5_read(&h, h.file, "w", MR_H5_F32, 1, &n, w, &err), MR_OK);
    ck_assert(w[n - 1] == (float)(n - 1));
    char *s;
    ck_assert_int_eq(mr_h5_read_attr_str(&h, h.file, "note", &s, &err), MR_OK);
    ck_assert_str_eq(s, "after the weights");
    free(s);
    mr_h5_close(&h);
    free(w);
}
END_TEST

int main(void) {
    Suite *s = suite_create("h5file");
    TCase *tc = tcase_create("h5file");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, write_then_read);
    tcase_add_test(tc, atomic_replace);
    tcase_add_test(tc, bad_files);
    tcase_add_test(tc, checksums);
    suite_add_tcase(s, tc);
    tc = tcase_create("hdf5_guards");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, corrupt_global_heap);
    tcase_add_test(tc, bad_global_heap_index);
    tcase_add_test(tc, bad_global_heap_index_dataset);
    tcase_add_test(tc, wide_stored_type);
    tcase_add_test(tc, large_file);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
