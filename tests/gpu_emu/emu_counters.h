/* emu_counters.h - what the emulated GPUs saw (libmr_emu_cudart): counts of
 * the operations a real device would be given, for tests that hold a
 * training step to a budget (launches, host synchronisations, copies,
 * allocations, library calls). C, so the project's C tests can call it.
 *
 * Counted where the host asks, per device (the stream's device, or the
 * current device for calls without a stream); an operation captured into a
 * graph counts when captured, not again when the graph replays it (a graph
 * launch counts as one graph_launch and its operations as ops_replayed).
 * Relies on: nothing (plain C types). */
#ifndef MR_EMU_COUNTERS_H
#define MR_EMU_COUNTERS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Copy directions, as cudaMemcpyKind resolved from the pointers. */
enum mr_emu_copy_dir {
    MR_EMU_COPY_H2H,
    MR_EMU_COPY_H2D,
    MR_EMU_COPY_D2H,
    MR_EMU_COPY_D2D,
    MR_EMU_COPY_DIRS
};

typedef struct mr_emu_counters {
    uint64_t launches;                     /* kernel launches (<<<>>>, MR_CUDA_LAUNCH) */
    uint64_t blas_calls;                   /* cuBLAS calls that queue work */
    uint64_t blas_pool_calls; /* ... of them on the library's own workspace pool (no
                                 cublasSetWorkspace since the handle's last
                                 cublasSetStream): in stream capture the pool may
                                 take new memory at each capture */
    uint64_t dnn_calls;                    /* cuDNN calls that queue work */
    uint64_t nccl_calls;                   /* NCCL collectives */
    uint64_t ops;            /* work queued on streams: the above, copies
                                and memsets */
    uint64_t waits;          /* event records and stream waits queued */
    uint64_t host_syncs;     /* the host waited for the device: each
                                cudaStreamSynchronize, cudaDeviceSynchronize,
                                cudaEventSynchronize, cudaFree(Host), each
                                cudaMemcpy(Async) that returns with the copy
                                done, and the first cudaEventQuery (or
                                cudaStreamQuery) that finds a record (the
                                stream's work) complete: a host polling until
                                then has waited once */
    uint64_t queries;        /* cudaStreamQuery, cudaEventQuery calls */
    uint64_t copies[MR_EMU_COPY_DIRS];     /* memcpy calls by direction */
    uint64_t copy_bytes[MR_EMU_COPY_DIRS]; /* their bytes */
    uint64_t memsets;
    uint64_t allocs;         /* cudaMalloc, cudaHostAlloc/cudaMallocHost */
    uint64_t frees;          /* cudaFree, cudaFreeHost */
    uint64_t graph_launches; /* cudaGraphLaunch */
    uint64_t ops_replayed;   /* operations run by graph launches */
} mr_emu_counters;

/* The counts since the last reset: of device `device` (an ordinal), or of
 * all devices together when device is -1. Unknown devices read as zeros. */
void mr_emu_counters_get(int device, mr_emu_counters *out);

/* Zeroes every device's counts. */
void mr_emu_counters_reset(void);

#ifdef __cplusplus
}
#endif

#endif
