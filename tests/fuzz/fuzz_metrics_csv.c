/* fuzz_metrics_csv.c: libFuzzer harness of mirrored_compare's metrics CSV
 * reader (launch/compare/metrics_csv.c, mr_cmp_run_load). Input: a whole
 * --metrics (or Keras CSVLogger) file. Seeds: tests/fuzz/corpus/metrics_csv/. */
#include "launch/compare/metrics_csv.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file(data, size);
    mr_cmp_run r;
    mr_error err = {0};
    mr_status st = mr_cmp_run_load(&r, path, &err);
    fz_check_refusal(st, &err, path);
    if (st == MR_OK) mr_cmp_run_free(&r);
    return 0;
}
