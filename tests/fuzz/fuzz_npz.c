/* fuzz_npz.c: libFuzzer harness of the .npz reader (runtime/npz.c over
 * runtime/zip_read.c): the member list, then x_train read as a .npy with
 * the archive's checks (duplicate and path-like names, sizes its headers
 * give, what deflate makes). Input: a whole archive. Seeds:
 * tests/fuzz/corpus/npz/ (numpy.savez and savez_compressed files). */
#include "runtime/array.h"
#include "runtime/npz.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file(data, size);
    char list[1024];
    mr_error err = {0};
    mr_status st = mr_npz_members(path, list, sizeof list, &err);
    fz_check_refusal(st, &err, path);
    if (st != MR_OK) return 0;
    mr_array a = {0};
    mr_error_clear(&err);
    st = mr_npz_read(path, "x_train", &a, &err);
    fz_check_refusal(st, &err, path);
    mr_array_free(&a);
    return 0;
}
