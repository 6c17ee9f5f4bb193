/* fuzz_h5.c: libFuzzer harness of the HDF5 data reader (runtime/array.c,
 * mr_array_read_h5, what a "file.h5:/dataset" data path reads). Input: a
 * whole HDF5 file; the dataset read is /x. Seeds: tests/fuzz/corpus/h5/. */
#include "runtime/array.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file(data, size);
    mr_array a = {0};
    mr_error err = {0};
    mr_status st = mr_array_read_h5(path, "/x", &a, &err);
    fz_check_refusal(st, &err, path);
    mr_array_free(&a);
    fz_check_h5_closed();
    return 0;
}
