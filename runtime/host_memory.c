/* host_memory.c: the memory the kernel can still give (host_memory.h). */
#include "runtime/host_memory.h"

#include <stdio.h>
#include <string.h>

int64_t mr_host_memory_available(const char *meminfo) {
    FILE *f = fopen(meminfo, "r");
    if (f == NULL) return -1;
    char line[256];
    long long avail = -1, swap = 0, kib;
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1 && kib >= 0) avail = kib;
        if (sscanf(line, "SwapFree: %lld kB", &kib) == 1 && kib >= 0) swap = kib;
    }
    fclose(f);
    return avail < 0 ? -1 : (int64_t)(avail + swap) * 1024;
}
