/* test_h5_contained.c: unit tests of runtime/h5_contained.c, and of the
 * readers over it (mr_h5_open for checkpoints and Keras files,
 * mr_array_read_h5 for data): files made here with HDF5's own API, each
 * with one way of reaching outside itself. */
#include <check.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/array.h"
#include "runtime/h5_contained.h"
#include "runtime/h5file.h"
#include "tests/testutil.h"

static const char *dir;
static const float values[4] = {1, 2, 3, 4};

enum way { PLAIN, EXTERNAL_LINK, EXTERNAL_STORAGE, VIRTUAL };

static void setup(void) {
    dir = tu_tmpdir();
}

/* dir/name holding /x (4 floats) and a soft link /s to it, plus /out made
 * the `way` way, pointing at dir/other.h5's /x or at dir/raw.bin. */
static char *make(const char *name, enum way way) {
    char *path = malloc(4200), other[4200], raw[4200];
    snprintf(path, 4200, "%s/%s", dir, name);
    snprintf(other, sizeof other, "%s/other.h5", dir);
    snprintf(raw, sizeof raw, "%s/raw.bin", dir);
    FILE *f = fopen(raw, "wb");
    fwrite(values, sizeof values, 1, f);
    fclose(f);
    hsize_t dims[1] = {4};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t o = H5Fcreate(other, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t od = H5Dcreate2(o, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(od, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    H5Dclose(od), H5Fclose(o);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t d = H5Dcreate2(file, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert_int_ge(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0);
    H5Dclose(d);
    ck_assert_int_ge(H5Lcreate_soft("/x", file, "s", H5P_DEFAULT, H5P_DEFAULT), 0);
    hid_t g = H5Gcreate2(file, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (way == EXTERNAL_LINK)
        ck_assert_int_ge(H5Lcreate_external(other, "/x", g, "out", H5P_DEFAULT, H5P_DEFAULT), 0);
    if (way == EXTERNAL_STORAGE) ck_assert_int_ge(H5Pset_external(dcpl, raw, 0, sizeof values), 0);
    if (way == VIRTUAL) ck_assert_int_ge(H5Pset_virtual(dcpl, space, other, "/x", space), 0);
    if (way == EXTERNAL_STORAGE || way == VIRTUAL) {
        hid_t v = H5Dcreate2(g, "out", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        ck_assert_int_ge(v, 0);
        H5Dclose(v);
    }
    H5Pclose(dcpl), H5Gclose(g), H5Sclose(space), H5Fclose(file);
    return path;
}

/* The verdict on a file made the `way` way, from the check itself. */
static mr_status check(const char *path, mr_error *err) {
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_ge(file, 0);
    mr_status st = mr_h5_check_contained(file, path, err);
    H5Fclose(file);
    return st;
}

START_TEST(self_contained_passes) {
    char *path = make("plain.h5", PLAIN);
    mr_error err = {0};
    ck_assert_msg(check(path, &err) == MR_OK, "%s", err.msg);
    mr_array a;
    ck_assert_msg(mr_array_read_h5(path, "/s", &a, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(memcmp(a.data, values, sizeof values), 0);
    mr_array_free(&a);
    free(path);
}
END_TEST

/* Each way out is refused by the check, by the data reader (even for
 * another dataset of the file) and by the model reader, naming /g/out. */
START_TEST(ways_out_refused) {
    static const char *const why[] = {"", "an external link", "external storage",
                                      "a virtual dataset"};
    const enum way way = (enum way)_i;
    char *path = make("out.h5", way);
    mr_error err = {0};
    ck_assert_int_eq(check(path, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, path) == err.msg && strstr(err.msg, "/g/out is ") &&
                      strstr(err.msg, why[way]) && strstr(err.msg, "refused"),
                  "%s", err.msg);
    mr_error_clear(&err);
    mr_array a;
    ck_assert_int_eq(mr_array_read_h5(path, "/x", &a, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "/g/out is "), "%s", err.msg);
    mr_error_clear(&err);
    mr_h5 h;
    ck_assert_int_eq(mr_h5_open(&h, path, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "/g/out is "), "%s", err.msg);
    free(path);
}
END_TEST

int main(void) {
    Suite *s = suite_create("h5_contained");
    TCase *tc = tcase_create("h5_contained");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, self_contained_passes);
    tcase_add_loop_test(tc, ways_out_refused, EXTERNAL_LINK, VIRTUAL + 1);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
