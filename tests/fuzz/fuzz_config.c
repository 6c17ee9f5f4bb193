/* fuzz_config.c: libFuzzer harness of the .cfg parser (models/config.c,
 * mr_config_parse, which mr_config_load and mirrored_eval's checkpoint path
 * go through). Input: the text of a .cfg file (a NUL inside ends it, as it
 * would for the parser). Seeds: tests/fuzz/corpus/config/ (the shipped
 * models/configs/ and the refusals of tests/test_config.c). */
#include <stdlib.h>
#include <string.h>

#include "models/config.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (text == NULL) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    mr_config *cfg = calloc(1, sizeof *cfg); /* ~100 KB: not on the stack */
    mr_error err = {0};
    if (cfg != NULL) {
        mr_status st = mr_config_parse(text, "fuzz.cfg", "/nonexistent", cfg, &err);
        fz_check_refusal(st, &err, "fuzz.cfg");
        mr_config_free(cfg);
    }
    free(cfg);
    free(text);
    return 0;
}
