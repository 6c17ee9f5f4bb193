/* devices.h: which devices a job trains on (--devices) and what the runtime sees.
 *
 * Specs: "auto" (every GPU the CUDA runtime shows, else one CPU replica per
 * core), "cpu" (one CPU replica), "cpu:N" (N CPU replica threads), "gpu"
 * (every GPU) and "gpu:0,2" (those GPUs, as CUDA_VISIBLE_DEVICES numbers
 * them). The GPU forms fail with a clear message where there is no GPU (or
 * no CUDA backend in this build): the runtime never falls back to the CPU
 * silently. Under mpirun with several processes on a node, the node's
 * processes share the GPUs by node-local rank: process k of n takes the
 * k-th of n equal parts of the list (one GPU each when there are as many
 * GPUs as processes); fewer GPUs than processes is an error. */
#ifndef MR_DEVICES_H
#define MR_DEVICES_H

#include <stdio.h>

#include "../runtime/backend.h"
#include "../runtime/device.h"
#include "../runtime/error.h"

#define MR_MAX_REPLICAS 256

typedef struct mr_device_set {
    mr_device_kind kind;
    int count;                     /* replicas */
    int ordinals[MR_MAX_REPLICAS]; /* device ordinal of each replica (CPU: 0..count-1, threads) */
    int cores; /* cores this process may use (its share of the node under mpirun); 0: all of
                  its affinity mask */
} mr_device_set;

/* What a process may use, for parsing a spec. A zeroed one is a process
 * alone on its machine with the GPUs the CUDA runtime shows. */
typedef struct mr_device_env {
    int cores;               /* cores this process may use (its share of the node); 0: all of
                                its affinity mask */
    int local_rank;          /* this process among those of its node */
    int local_size;          /* processes of its node; 0 or 1: alone */
    const mr_gpu_list *gpus; /* NULL: mr_gpu_discover() (tests pass a made-up list) */
} mr_device_env;

/* Number of CUDA devices this build and machine can use (0 without the CUDA backend or driver). */
int mr_gpu_count(void);

/* Parses a --devices spec for a process in `env` (NULL: alone, all its
 * cores, the GPUs found): "auto" is every GPU, else one CPU replica per
 * core. A malformed spec is MR_ERR_USAGE, GPUs asked for where there are
 * none (or too few for the node's processes) MR_ERR_UNSUPPORTED; one line
 * each, starting "--devices SPEC:". */
mr_status mr_devices_parse(const char *spec, const mr_device_env *env, mr_device_set *out,
                           mr_error *err);

/* "cpu:0, cpu:1", "gpu:0, gpu:2" */
void mr_devices_format(const mr_device_set *set, char *buf, size_t n);

/* --list-devices: what the runtime sees, one line each: the CPU (for a
 * process in env; NULL: alone), then each GPU (index, name, memory,
 * compute capability, PCI bus) and the CUDA driver and runtime versions,
 * or "gpu: none" with the CUDA runtime's reason. */
void mr_devices_list(FILE *out, const mr_device_env *env);

#endif
