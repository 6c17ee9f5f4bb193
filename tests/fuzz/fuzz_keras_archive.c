/* fuzz_keras_archive.c: libFuzzer harness of the .keras archive as
 * mirrored_train and mirrored_eval read it: the importer
 * (models/keras_import.c: the zip, its names, config.json), then a model
 * of that config on the CPU and its weights from model.weights.h5
 * (models/keras.c: unpacked within bounds, read by HDF5). Input: a whole
 * archive. Seeds: tests/fuzz/corpus/keras_archive/ (Keras 3's own files
 * from tests/golden/keras_models/). Models of more than a million weights
 * are not built: their memory, not a defect, would end the run. */
#include <stdlib.h>

#include "models/keras.h"
#include "models/keras_import.h"
#include "models/model.h"
#include "backends/backends.h"
#include "runtime/backend.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The weights of model cfg read from path (its own refusals checked). */
static void load_weights(const char *path, const mr_config *cfg) {
    static mr_backend *cpu;
    mr_model m;
    mr_error err = {0};
    if (cpu == NULL && mr_backend_create(mr_backend_kind_cpu(), 0, &cpu, &err) != MR_OK) abort();
    if (mr_model_init(&m, cpu, cfg, 1, 0, &err) != MR_OK) return; /* the .cfg's own checks */
    if (m.n_params <= (1 << 20)) {
        mr_status st = mr_keras_load(path, &m, 0, NULL, &err);
        fz_check_refusal(st, &err, path);
    }
    mr_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file(data, size);
    mr_config *cfg = calloc(1, sizeof *cfg); /* ~100 KB: not on the stack */
    if (cfg == NULL) return 0;
    mr_error err = {0};
    mr_status st = mr_keras_import_config_load(path, cfg, &err);
    fz_check_refusal(st, &err, path);
    if (st == MR_OK) {
        load_weights(path, cfg);
        mr_config_free(cfg);
    }
    free(cfg);
    fz_check_h5_closed();
    return 0;
}
