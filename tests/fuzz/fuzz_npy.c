/* fuzz_npy.c: libFuzzer harness of the NPY reader (runtime/array.c,
 * mr_npy_read). Input: a whole file. Seeds: tests/fuzz/corpus/npy/. */
#include "runtime/array.h"
#include "runtime/npy.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file(data, size);
    mr_array a = {0};
    mr_error err = {0};
    mr_status st = mr_npy_read(path, &a, &err);
    fz_check_refusal(st, &err, path);
    mr_array_free(&a);
    return 0;
}
