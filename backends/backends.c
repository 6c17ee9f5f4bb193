/* backends.c: finding a device kind in the build's table (backends.h). */
#include "backends/backends.h"

#include <string.h>

const mr_backend_kind *mr_backend_kind_find(const char *name) {
    int n;
    const mr_backend_kind *const *kinds = mr_backend_kinds(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(kinds[i]->name, name) == 0) return kinds[i];
    return NULL;
}

const mr_backend_kind *mr_backend_kind_cpu(void) {
    const mr_backend_kind *cpu = mr_backend_kind_find("cpu");
    MR_ASSERT(cpu != NULL); /* every build has the CPU backend */
    return cpu;
}

mr_status mr_backend_create(const mr_backend_kind *kind, int ordinal, mr_backend **out,
                            mr_error *err) {
    *out = NULL;
    return kind->create(ordinal, out, err);
}

const mr_gpu_list *mr_backend_kind_devices(const mr_backend_kind *kind) {
    static const mr_gpu_list none = {
        .count = 0,
        .reason = "this build has no GPU backend (meson setup found no CUDA toolkit, or "
                  "-Dcuda=disabled)",
    };
    if (kind == NULL) return &none;
    return kind->discover != NULL ? kind->discover() : NULL;
}
