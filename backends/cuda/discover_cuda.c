/* discover_cuda.c: GPU discovery through the CUDA runtime (gpu_list.h,
 * the CUDA kind's discover in backends.h).
 * Relies on: cudaRuntimeGetVersion, cudaDriverGetVersion (0 without a
 * driver), cudaGetDeviceCount (an error without a driver or GPU: its
 * string is the reason shown), cudaGetDeviceProperties (needs no context,
 * so listing does not take memory on the GPUs). */
#include "backends/cuda/cuda_impl.h"
#include "backends/gpu_list.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static mr_gpu_list gpus;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void discover(void) {
    mr_gpu_list *l = &gpus;
    cudaRuntimeGetVersion(&l->runtime_version);
    if (cudaDriverGetVersion(&l->driver_version) != cudaSuccess) l->driver_version = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (l->driver_version == 0)
            snprintf(l->reason, sizeof l->reason, "no NVIDIA driver: %s", cudaGetErrorString(e));
        else
            snprintf(l->reason, sizeof l->reason, "%s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return;
    }
    if (n == 0) {
        snprintf(l->reason, sizeof l->reason, "the CUDA runtime sees no GPU");
        return;
    }
    if (n > MR_MAX_GPUS) n = MR_MAX_GPUS;
    for (int i = 0; i < n; i++) {
        struct cudaDeviceProp p;
        mr_gpu_info *g = &l->gpu[l->count];
        if ((e = cudaGetDeviceProperties(&p, i)) != cudaSuccess) {
            snprintf(l->reason, sizeof l->reason, "GPU %d: %s", i, cudaGetErrorString(e));
            (void)cudaGetLastError();
            continue;
        }
        g->ordinal = i;
        snprintf(g->name, sizeof g->name, "%s", p.name);
        g->total_bytes = p.totalGlobalMem;
        g->cc_major = p.major;
        g->cc_minor = p.minor;
        snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID,
                 p.pciDeviceID);
        l->count++;
    }
}

const mr_gpu_list *mr_cuda_discover(void) {
    pthread_once(&once, discover);
    return &gpus;
}
