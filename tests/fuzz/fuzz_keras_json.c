/* fuzz_keras_json.c: libFuzzer harness of the Keras model importer (models/keras_import.c,
 * mr_keras_import_text, then mr_config_parse on the .cfg text it makes), which
 * mirrored_train and mirrored_eval go through for a .keras or a Keras .h5. Input: a
 * config.json as a .keras archive holds it (a NUL inside ends it); its compile_config is the
 * compile config. Seeds: tests/fuzz/corpus/keras_json/ (the config.json of each model of
 * tests/golden/keras_models/). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "models/keras_import.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (text == NULL) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    json_t *root = json_loads(text, 0, NULL);
    const json_t *cc = json_object_get(root, "compile_config");
    char *compile = cc != NULL && !json_is_null(cc) ? json_dumps(cc, 0) : NULL;
    json_decref(root);
    char *cfg_text = NULL;
    mr_error err = {0};
    mr_status st = mr_keras_import_text(text, compile, "fuzz.keras", &cfg_text, &err);
    fz_check_refusal(st, &err, "fuzz.keras");
    mr_config *cfg = calloc(1, sizeof *cfg); /* ~100 KB: not on the stack */
    if (st == MR_OK && cfg != NULL) {
        st = mr_config_parse(cfg_text, "fuzz.keras", "/nonexistent", cfg, &err);
        fz_check_refusal(st, &err, "fuzz.keras");
        mr_config_free(cfg);
    }
    free(cfg);
    free(cfg_text);
    free(compile);
    free(text);
    return 0;
}
