/* test_file_kind.c: files told by their first bytes (zip: .keras or .npz, .npy, HDF5) and a
 * SavedModel folder by its saved_model.pb; the message for each where a reader wanted another
 * kind names the file, says what it is and what to do; kinds that fit, and unknown ones, pass. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/file_kind.h"
#include "tests/testutil.h"

static char dir[4096];

/* A zip's local header whose first member is `name`. */
static char *write_zip(const char *file, const char *member) {
    unsigned char b[128] = {'P', 'K', 3, 4};
    const size_t len = strlen(member);
    b[26] = (unsigned char)len;
    memcpy(b + 30, member, len);
    return tu_write_file(dir, file, b, 30 + len + 8);
}

/* mr_file_check's message for path where `want` was expected ("" when it passes). */
static const char *check(const char *path, mr_file_want want) {
    static mr_error err;
    mr_error_clear(&err);
    if (mr_file_check(path, want, &err) == MR_OK) return "";
    ck_assert_int_eq(err.status, MR_ERR_DATA);
    ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0, "%s", err.msg);
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    return err.msg;
}

START_TEST(kinds_and_messages) {
    char *keras = write_zip("m.keras", "metadata.json"), *npz = write_zip("d.npz", "x.npy");
    char *npy = tu_write_file(dir, "a.npy", "\x93NUMPY\x01\x00", 8);
    char *h5 = tu_write_file(dir, "c.h5", "\x89HDF\r\n\x1a\n", 8);
    char *idx = tu_write_file(dir, "i.idx", "\0\0\x08\x01\0\0\0\0", 8);
    char sm[4200];
    snprintf(sm, sizeof sm, "%s/saved", dir);
    ck_assert_int_eq(mkdir(sm, 0755), 0);
    free(tu_write_text(sm, "saved_model.pb", "x"));
    ck_assert_int_eq(mr_file_kind_of(keras), MR_FILE_KIND_KERAS);
    ck_assert_int_eq(mr_file_kind_of(npz), MR_FILE_KIND_NPZ);
    ck_assert_int_eq(mr_file_kind_of(npy), MR_FILE_KIND_NPY);
    char *zip = write_zip("z.zip", "notes.txt");
    ck_assert_int_eq(mr_file_kind_of(zip), MR_FILE_KIND_ZIP);
    ck_assert(strstr(check(zip, MR_FILE_WANT_IDX), "a zip archive; unzip it"));
    /* an HDF5 file that is no Keras model where a model is read: no claim
     * that mirrored_train reads only a .cfg */
    const char *h5_model = check(h5, MR_FILE_WANT_CFG);
    ck_assert_msg(strstr(h5_model, "takes a .cfg or a Keras .keras or .h5 model"), "%s", h5_model);
    /* a .keras is read as it is: no word of --cfg (docs/keras.md) */
    const char *not_keras = check(zip, MR_FILE_WANT_CHECKPOINT);
    ck_assert_msg(strstr(not_keras, "give the .keras that Keras's model.save wrote") &&
                      !strstr(not_keras, "--cfg"),
                  "%s", not_keras);
    free(zip);
    ck_assert_int_eq(mr_file_kind_of(h5), MR_FILE_KIND_HDF5);
    ck_assert_int_eq(mr_file_kind_of(idx), MR_FILE_KIND_OTHER);
    ck_assert_int_eq(mr_file_kind_of(sm), MR_FILE_KIND_SAVED_MODEL);
    ck_assert_int_eq(mr_file_kind_of(dir), MR_FILE_KIND_OTHER);
    ck_assert_int_eq(mr_file_kind_of("/no/such/file"), MR_FILE_KIND_OTHER);
    ck_assert_str_eq(mr_file_kind_name(MR_FILE_KIND_OTHER), "");

    ck_assert(strstr(check(keras, MR_FILE_WANT_CFG),
                     "a Keras model archive (zip); mirrored_train reads a .cfg: write the model "
                     "as a .cfg (docs/keras.md)"));
    ck_assert(strstr(check(keras, MR_FILE_WANT_CHECKPOINT), "--cfg MODEL.cfg"));
    ck_assert(strstr(check(npz, MR_FILE_WANT_IDX),
                     "a NumPy .npz archive; name it FILE.npz, or one array in it FILE.npz:NAME"));
    ck_assert(strstr(check(npz, MR_FILE_WANT_NPY), "a NumPy .npz archive"));
    ck_assert(strstr(check(sm, MR_FILE_WANT_CFG), "a TensorFlow SavedModel folder;"));
    ck_assert(strstr(check(sm, MR_FILE_WANT_CHECKPOINT), "model.save(\"x.keras\")"));
    ck_assert(strstr(check(sm, MR_FILE_WANT_IDX), "a model, not data"));
    ck_assert(strstr(check(npy, MR_FILE_WANT_IDX), "name it with .npy"));
    ck_assert(strstr(check(h5, MR_FILE_WANT_IDX), "FILE.h5:/dataset"));
    ck_assert(strstr(check(h5, MR_FILE_WANT_CFG), "mirrored_eval"));
    /* kinds that fit, and files of no known kind, are the reader's to judge */
    ck_assert_str_eq(check(npy, MR_FILE_WANT_NPY), "");
    ck_assert_str_eq(check(h5, MR_FILE_WANT_HDF5), "");
    ck_assert_str_eq(check(h5, MR_FILE_WANT_CHECKPOINT), "");
    ck_assert_str_eq(check(idx, MR_FILE_WANT_IDX), "");
    ck_assert_str_eq(check(idx, MR_FILE_WANT_CFG), "");
    ck_assert_str_eq(check("/no/such/file", MR_FILE_WANT_CHECKPOINT), "");
    free(keras), free(npz), free(npy), free(h5), free(idx);
}
END_TEST

int main(void) {
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    Suite *s = suite_create("file_kind");
    TCase *tc = tcase_create("kinds");
    tcase_add_test(tc, kinds_and_messages);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    tu_run(cmd, NULL);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
