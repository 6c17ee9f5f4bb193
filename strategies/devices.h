/* devices.h: which devices a job trains on (a device spec) and what the runtime sees.
 *
 * Specs: "auto" (every GPU the CUDA runtime shows, else one CPU replica per
 * core), "cpu" (one CPU replica), "cpu:N" (N CPU replica threads), "gpu"
 * (every GPU) and "gpu:0,2" (those GPUs, as CUDA_VISIBLE_DEVICES numbers
 * them). The GPU forms fail with a clear message where there is no GPU (or
 * no CUDA backend in this build): the runtime never falls back to the CPU
 * silently. Under mpirun with several processes on a node, either every
 * process of the node sees the same GPUs, and they share them by node-local
 * rank: process k of n takes the k-th of n equal parts of the list (one GPU
 * each when there are as many GPUs as processes; fewer GPUs than processes
 * is an error); or each process sees GPUs of its own (SLURM
 * --gpus-per-task, or a wrapper setting CUDA_VISIBLE_DEVICES per local
 * rank), and takes them all. Anything else (two processes of a node seeing
 * some GPU in common but not the same GPUs; one seeing none while another
 * sees some) is an error for the GPU forms (mr_devices_gpu_sharing). */
#ifndef MR_DEVICES_H
#define MR_DEVICES_H

#include <stdio.h>

#include "backends/backends.h"
#include "collectives/job.h"
#include "runtime/error.h"

#define MR_MAX_REPLICAS 256

typedef struct mr_device_set {
    /* The device kind's name ("cpu", "gpu"; mr_devices_kind gives its
     * table entry). A name, not a pointer: the processes of a job compare
     * their sets (an all-gather of this struct). */
    char kind[8];
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
    const mr_gpu_list *gpus; /* NULL: what the build's GPU kind discovers (tests pass a
                                made-up list) */
    /* 1: the GPUs this process sees are its own (no other process of its
     * node sees any of them): it takes them all, "gpu:LIST" indexing them,
     * and does not split them by local rank. 0: the node's processes all
     * see the same GPUs and split them by local rank. */
    int gpus_own;
    /* Non-NULL: why the GPUs the node's processes see cannot be shared out
     * (mr_devices_gpu_sharing's message); the GPU forms, and "auto" where
     * this process sees GPUs, fail with it; the CPU forms ignore it. */
    const char *gpus_conflict;
} mr_device_env;

/* Number of GPUs this build and machine can use (0 without a GPU backend or driver). */
int mr_gpu_count(void);

/* The table entry of set's device kind (backends/backends.h); NULL for a
 * name this build has no kind for (another process's set, from another
 * build). */
const mr_backend_kind *mr_devices_kind(const mr_device_set *set);

/* Parses a device spec for a process in `env` (NULL: alone, all its
 * cores, the GPUs found): "auto" is every GPU, else one CPU replica per
 * core. A malformed spec is MR_ERR_USAGE, GPUs asked for where there are
 * none (or too few for the node's processes, or env->gpus_conflict)
 * MR_ERR_UNSUPPORTED; one line each, starting with the argument as the
 * caller names it: `named` is a printf format with one %s for a spec
 * (a face's words: "--devices %s", "devices='%s'"; NULL: "devices '%s'"),
 * which also names the spec a message suggests instead ("use
 * devices 'cpu'"). strategies/ knows no face's flags or arguments. */
mr_status mr_devices_parse(const char *spec, const mr_device_env *env, const char *named,
                           mr_device_set *out, mr_error *err);

/* How the processes of one node share its GPUs, from the GPUs each sees
 * (lists[k]: node-local process k's, as its GPU kind discovers them; n
 * processes), compared by PCI bus id. Every process sees the same set (in
 * any order; also when all see none, and n <= 1): *own = 0, they split it
 * by local rank. The sets are pairwise disjoint and none is empty: *own =
 * 1, each process's GPUs are its own. Anything else is MR_ERR_UNSUPPORTED
 * (*own = 0) with one line naming two processes by local rank: two that
 * see a GPU in common (its bus id) but not the same GPUs, or one that sees
 * none while another sees some. Pure: no discovery, no collective. */
mr_status mr_devices_gpu_sharing(const mr_gpu_list *const *lists, int n, int *own, mr_error *err);

/* The device environment of this process of `job`: its cores and place on
 * its node, and (mr_devices_gpu_sharing over the GPUs each process of its
 * node sees) gpus_own, or gpus_conflict pointing into `conflict` (n bytes,
 * which must outlive env) where the node's GPU sets conflict: that is not
 * a failure here, as it only matters if GPUs are used (mr_devices_parse).
 * Collective where the job has several processes (every process calls it,
 * in the same order: not after a step that may return early on one);
 * fails only where the all-gather does, or out of memory. */
mr_status mr_devices_job_env(mr_job *job, mr_device_env *env, char *conflict, size_t n,
                             mr_error *err);

/* "cpu:0, cpu:1", "gpu:0, gpu:2" */
void mr_devices_format(const mr_device_set *set, char *buf, size_t n);

/* --list-devices: what the runtime sees, one line each: the CPU (for a
 * process in env; NULL: alone), then each GPU (index, name, memory,
 * compute capability, PCI bus) and the CUDA driver and runtime versions,
 * or "gpu: none" with the CUDA runtime's reason. */
void mr_devices_list(FILE *out, const mr_device_env *env);

#endif
