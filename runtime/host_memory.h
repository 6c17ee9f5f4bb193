/* host_memory.h: how much memory this machine can still give a process.
 *
 * Linux gives memory on first touch, not on malloc: a model whose buffers
 * together exceed what is left is allocated without complaint, then
 * killed by the OOM killer as it fills them. A model in host memory is
 * therefore checked against this figure before its buffers are made. */
#ifndef MR_HOST_MEMORY_H
#define MR_HOST_MEMORY_H

#include <stdint.h>

/* Bytes the kernel can still give without killing anyone: MemAvailable
 * plus SwapFree from `meminfo` (a /proc/meminfo file: the caller names it,
 * so tests can give their own); -1 where the file cannot be read or names
 * no MemAvailable. */
int64_t mr_host_memory_available(const char *meminfo);

#endif
