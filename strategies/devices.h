/* devices.h: which devices a job trains on (--devices) and what the runtime sees.
 *
 * Specs: "auto" (every GPU when the CUDA backend finds one, else one CPU
 * replica per core), "cpu" (one CPU replica), "cpu:N" (N CPU replica
 * threads), "gpu" (every GPU) and "gpu:0,2" (those GPUs). This build has
 * no CUDA backend yet, so the GPU forms fail with a clear message: the
 * runtime never falls back to the CPU silently. */
#ifndef MR_DEVICES_H
#define MR_DEVICES_H

#include <stdio.h>

#include "../runtime/backend.h"
#include "../runtime/error.h"

#define MR_MAX_REPLICAS 256

typedef struct mr_device_set {
    mr_device_kind kind;
    int count;                     /* replicas */
    int ordinals[MR_MAX_REPLICAS]; /* device ordinal of each replica (CPU: 0..count-1, threads) */
    int cores; /* cores this process may use (its share of the node under mpirun); 0: all of
                  its affinity mask */
} mr_device_set;

/* Number of CUDA devices this build and machine can use (0 without the CUDA backend or driver). */
int mr_gpu_count(void);

/* Parses a --devices spec for a process that may use `cores` cores (its
 * share of the node; 0: all of its affinity mask): "auto" is one CPU
 * replica per core. Errors are MR_ERR_USAGE one-liners. */
mr_status mr_devices_parse(const char *spec, int cores, mr_device_set *out, mr_error *err);

/* "cpu:0, cpu:1" */
void mr_devices_format(const mr_device_set *set, char *buf, size_t n);

/* --list-devices: what the runtime sees, one line each, for a process that
 * may use `cores` cores (0: all of its affinity mask). */
void mr_devices_list(FILE *out, int cores);

#endif
