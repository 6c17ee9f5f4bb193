/* fuzz_idx.c: libFuzzer harness of the IDX reader, raw or gzip (runtime/array.c,
 * mr_array_read_idx). Input: a whole file. Seeds: tests/fuzz/corpus/idx/. */
#include "runtime/array.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file(data, size);
    mr_array a = {0};
    mr_error err = {0};
    mr_status st = mr_array_read_idx(path, &a, &err);
    fz_check_refusal(st, &err, path);
    mr_array_free(&a);
    return 0;
}
