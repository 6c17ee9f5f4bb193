/* gpu_list.h: the GPUs this process can use, as a GPU backend sees them
 * (mr_backend_kind's discover, backends.h).
 *
 * The CUDA backend asks the CUDA runtime (cuda/discover_cuda.c, which
 * honours CUDA_VISIBLE_DEVICES); a build without a GPU backend sees none,
 * with the reason (mr_backend_kind_devices). A machine without a driver or
 * a GPU has 0 GPUs and a reason in the runtime's words: never a crash. The
 * CPU is always there (mr_cpu_cores, runtime/backend.h). */
#ifndef MR_GPU_LIST_H
#define MR_GPU_LIST_H

#include <stddef.h>
#include <stdio.h>

#include "runtime/hd.h"

MR_C_BEGIN

#define MR_MAX_GPUS 64

typedef struct mr_gpu_info {
    int ordinal;            /* CUDA ordinal (after CUDA_VISIBLE_DEVICES) */
    char name[256];         /* "NVIDIA H100 80GB HBM3" */
    size_t total_bytes;     /* device memory */
    int cc_major, cc_minor; /* compute capability */
    char pci_bus_id[32];    /* "0000:3B:00.0" */
} mr_gpu_info;

typedef struct mr_gpu_list {
    int count;
    mr_gpu_info gpu[MR_MAX_GPUS];
    int driver_version;  /* CUDA version the driver supports, 1000 * major + 10 * minor; 0: none */
    int runtime_version; /* of the CUDA runtime linked in; 0: no CUDA in this build */
    char reason[256];    /* why count is 0 ("no CUDA-capable device is detected"); "" otherwise */
} mr_gpu_list;

/* "13.0" from 13000 (driver and runtime versions); "none" for 0. */
static inline void mr_cuda_version_format(int version, char *buf, size_t n) {
    if (version <= 0)
        snprintf(buf, n, "none");
    else
        snprintf(buf, n, "%d.%d", version / 1000, version % 1000 / 10);
}

MR_C_END

#endif
