/* backends.h: the device kinds this build has, one table entry each.
 *
 * A device kind (mr_backend_kind) is everything the rest of the code needs
 * to know about a backend: its name, how to make a context on one of its
 * devices, which devices it sees, how the strategy drives its replicas
 * (pinned threads or not; the model's cache-sized passes are the
 * context's ops->cache_passes) and which communicator sums their
 * gradients. Each backend lives in its own folder (backends/cpu/,
 * backends/cuda/) and exports one entry; the build lists the entries it
 * has (backends/registry.c.in, filled by backends/meson.build), so a
 * build without CUDA simply has no "gpu" entry and no source holds an
 * #ifdef. Callers go through the table and the functions below, never
 * through a backend's own files.
 *
 * This folder sits between the strategy and the folders whose interfaces a
 * backend implements: runtime/ (mr_backend_ops), models/ (the kernel
 * tables of models/kernels.h) and collectives/ (mr_comm). */
#ifndef MR_BACKENDS_H
#define MR_BACKENDS_H

#include "backends/gpu_list.h"
#include "collectives/comm.h"
#include "collectives/job.h"
#include "runtime/backend.h"
#include "runtime/error.h"

typedef struct mr_backend_kind {
    /* The kind as users and messages name it: "cpu", "gpu" (--devices
     * specs, device names "gpu:1", mr_backend_format). */
    const char *name;
    /* Its devices in a message: "CPUs", "GPUs". */
    const char *plural;
    /* Its contexts' ops (memory, copies, GEMM; ops->kernels: its kernels
     * of models/, ops->cache_passes: how the model runs a shard). */
    const mr_backend_ops *ops;
    /* A context on device `ordinal` of this kind: MR_ERR_NOMEM, or what
     * the device says (no such device, no driver). */
    mr_status (*create)(int ordinal, mr_backend **out, mr_error *err);
    /* The devices of this kind this process sees, asked once per process
     * and remembered (thread-safe; never fails: none is count 0 and a
     * reason). NULL for a kind whose devices are the process's cores (the
     * CPU): its replicas are threads, counted by the --devices spec
     * ("cpu:N") and numbered across the job. */
    const mr_gpu_list *(*discover)(void);
    /* 1: each replica's thread is pinned to a core of its own where there
     * are as many cores (the CPU: replicas compute on the cores they run
     * on); 0: a thread drives a device and runs where the OS puts it. */
    int pin_threads;
    /* The communicator over the `local` replicas of this process (be:
     * their contexts) and the job's other processes (job NULL: one
     * process), no collective waiting past timeout_s. NULL: the
     * host-memory communicators (collectives/local.h, hierarchical.h),
     * which read and write the replicas' memory in place. */
    mr_status (*comm_create)(mr_backend **be, int local, mr_job *job, double timeout_s,
                             mr_comm **out, mr_error *err);
} mr_backend_kind;

/* Every kind this build has, preferred first: --devices auto takes the
 * first whose devices are present, and the CPU, always there, is last.
 * *n: how many. */
const mr_backend_kind *const *mr_backend_kinds(int *n);
/* The kind named `name` ("cpu", "gpu"), or NULL where this build has none. */
const mr_backend_kind *mr_backend_kind_find(const char *name);
/* The CPU's kind: every build has it. */
const mr_backend_kind *mr_backend_kind_cpu(void);

/* A context for device `ordinal` of `kind` (kind->create). */
mr_status mr_backend_create(const mr_backend_kind *kind, int ordinal, mr_backend **out,
                            mr_error *err);

/* The GPUs `kind` sees: kind->discover(); for kind NULL (the build has no
 * such kind: mr_backend_kind_find("gpu") in a build without CUDA) an empty
 * list whose reason says so; NULL for a kind with no discover (the CPU). */
const mr_gpu_list *mr_backend_kind_devices(const mr_backend_kind *kind);

#endif
