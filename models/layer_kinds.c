/* layer_kinds.c: the .cfg section name of each layer kind, from the one
 * list of them (models/layer_kinds.def). Depends on nothing but the enum
 * (models/config.h), so that both the parser and the layers may ask. */
#include "models/config.h"

static const char *const section_names[] = {
    [MR_LAYER_INPUT] = "input",
#define MR_LAYER_KIND(ENUM, section, kernels) [MR_LAYER_##ENUM] = #section,
#include "models/layer_kinds.def"
#undef MR_LAYER_KIND
};
_Static_assert(sizeof section_names / sizeof section_names[0] == MR_LAYER_KIND_COUNT,
               "section_names: one name per mr_layer_kind");

const char *mr_layer_kind_name(mr_layer_kind kind) {
    return (kind >= 0 && kind < MR_LAYER_KIND_COUNT) ? section_names[kind] : "?";
}
