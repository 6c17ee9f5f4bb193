/* backend.h: a device's memory and math, one context per replica.
 *
 * A backend context (mr_backend) is what a replica computes with: its
 * device ordinal, the table of operations of its device kind, scratch
 * memory for the layers, and the implementation's own state (CUDA,
 * backends/cuda/cuda_impl.h: the device, streams, cuBLAS and cuDNN
 * handles). The strategy creates one per replica (mr_backend_create,
 * backends/backends.h: the table of device kinds) and hands it to
 * the model; one thread uses a context at a time, after binding itself to
 * the context's device (mr_backend_enter).
 *
 * This table holds what every device kind offers whatever the model:
 * memory (device and host staging), copies between them, zeroing, scaling
 * and GEMM. A layer's own compute (im2col, pooling, batch norm,
 * activations, dropout), the loss and the optimizer update are not here:
 * they are per-device kernel tables (models/kernels.h says what they hold;
 * each backend folder fills one), reached through ops->kernels, and call
 * this table for memory and GEMM. Host
 * code never dereferences device memory (runtime/dmem.h): it copies
 * through this table, or, where the context says its memory is host
 * memory (the CPU), uses it in place through a host view, so the CPU path
 * copies nothing.
 *
 * Implementations: backends/cpu/backend_cpu.c (OpenBLAS) and
 * backends/cuda/backend_cuda.c (the CUDA runtime and cuBLAS), each in its
 * backend's folder; a build has those that backends/backends.h lists.
 * Matrices are row-major. */
#ifndef MR_BACKEND_H
#define MR_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/error.h"
#include "runtime/hd.h"
#include "runtime/dmem.h"

MR_C_BEGIN

/* A device kind's layer, loss and optimizer kernels (models/kernels.h);
 * runtime/ only carries the pointer. */
struct mr_kernels;

typedef struct mr_backend mr_backend;

/* What a training step's kernels take by value and the next step changes:
 * a replayed graph reads them from device memory instead (mr_graph_ops). */
typedef struct mr_step_scalars {
    float lr;     /* the update's learning rate */
    float alpha;  /* its step size (Adam: lr with the bias corrections, mr_optimizer_rates) */
    int64_t step; /* the optimizer step, from 0 (dropout and flip masks: mr_exec_ctx.step) */
} mr_step_scalars;

/* Graphs (CUDA graphs): a step's device work recorded once and replayed.
 * One capture at a time per context; its buffers must not move while a
 * graph of it lives (graph_current says when they did). */
typedef struct mr_graph_ops {
    /* Starts recording the compute stream: work queued from now on is kept,
     * not run. The first recorded node copies the scalars (pinned staging,
     * written now) into device memory, where the kernels queued during the
     * capture read them. */
    mr_status (*capture_begin)(mr_backend *be, const mr_step_scalars *sc, mr_error *err);
    /* Ends the recording; *graph: an executable graph (graph_free). */
    mr_status (*capture_end)(mr_backend *be, void **graph, mr_error *err);
    /* Before a replay: the scalars and n labels into the pinned staging the
     * recorded copies read (the host has waited for the previous replay). */
    mr_status (*stage)(mr_backend *be, const mr_step_scalars *sc, const int32_t *labels, int n,
                       mr_error *err);
    /* 1 while the buffers the graph's recorded calls use are where they were. */
    int (*graph_current)(const mr_backend *be, const void *graph);
    /* Queues the graph's work on the compute stream. */
    mr_status (*launch)(mr_backend *be, void *graph, mr_error *err);
    /* n bytes device -> pinned host staging, queued: read after a wait. */
    mr_status (*queue_to_host)(mr_backend *be, void *dst, const void *src, size_t n, mr_error *err);
    /* The host waits for everything queued (one host synchronisation). */
    mr_status (*wait)(mr_backend *be, const char *what, mr_error *err);
    void (*graph_free)(mr_backend *be, void *graph); /* NULL: nothing */
} mr_graph_ops;

/* Callers use the wrappers below, never the slots directly. Device memory
 * is `void *` in the byte-level slots (any element type) and mr_dfloat *
 * where it holds floats. */
typedef struct mr_backend_ops {
    const char *name; /* the device kind as users name it: "cpu", "gpu" */
    /* The kernels of models/ for this kind (models/kernels.h). */
    const struct mr_kernels *kernels;
    /* 1: run a shard in passes whose activations fit the cache, so a
     * layer's output is still cached when the next layer reads it (the
     * CPU); 0: one pass over the whole shard (a GPU: fewer, larger
     * launches). The model reads it (models/model.c). */
    int cache_passes;
    /* Device memory: n bytes, zeroed, 64-byte aligned; NULL on failure. */
    void *(*alloc)(mr_backend *be, size_t n);
    void (*free)(mr_backend *be, void *p);
    /* Host memory to stage copies through (CUDA: pinned, so copies can be
     * asynchronous): n bytes, zeroed; NULL on failure. */
    void *(*alloc_host)(mr_backend *be, size_t n);
    void (*free_host)(mr_backend *be, void *p);
    /* n bytes host -> device, device -> host (on the CPU both are memcpy). */
    mr_status (*to_device)(mr_backend *be, void *dst, const void *src, size_t n, mr_error *err);
    mr_status (*to_host)(mr_backend *be, void *dst, const void *src, size_t n, mr_error *err);
    /* n bytes host staging -> device, queued after the work queued so far,
     * without waiting for it (mr_backend_write_queued). May be NULL:
     * to_device. */
    mr_status (*queue_to_device)(mr_backend *be, void *dst, const void *src, size_t n,
                                 mr_error *err);
    /* n bytes host staging -> device without waiting for the copy (the
     * input batches, mr_backend_upload). May be NULL: to_device. */
    mr_status (*upload)(mr_backend *be, void *dst, const void *src, size_t n, mr_error *err);
    /* n bytes of device memory set to zero (gradients before a step). */
    mr_status (*zero)(mr_backend *be, void *dst, size_t n, mr_error *err);
    /* x (n floats) *= alpha, element by element. */
    mr_status (*scale)(mr_backend *be, mr_dfloat *x, size_t n, float alpha, mr_error *err);
    /* C (m x n) = alpha * op(A) * op(B) + beta * C, op(A) m x k, op(B) k x n;
     * lda/ldb/ldc are row strides of A, B, C as stored. */
    mr_status (*gemm)(mr_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const mr_dfloat *a, int lda, const mr_dfloat *b, int ldb, float beta,
                      mr_dfloat *c, int ldc, mr_error *err);
    /* Tells the backend how many cores each replica owns; it chooses its
     * math library's threads within them (CPU: OpenBLAS's setting, which is
     * process-wide: 1, or OPENBLAS_NUM_THREADS up to `threads`). May be NULL. */
    void (*set_threads)(mr_backend *be, int threads);
    /* Binds the calling thread to the context's device (CUDA: makes it
     * the current device; the CPU: flush-to-zero and denormals-are-zero
     * on the thread, backend_cpu.c). May be NULL (nothing to do). */
    mr_status (*enter)(mr_backend *be, mr_error *err);
    /* The device's memory: bytes in use (by every context and process on
     * it) and in all. May be NULL (the CPU: not reported). */
    mr_status (*memory)(mr_backend *be, size_t *used, size_t *total, mr_error *err);
    /* Device time, where the kernels run behind the host (a GPU): marks
     * (CUDA: timing events) numbered 0..n-1, made by marks_reserve; `mark`
     * queues mark i on the compute stream, behind everything queued
     * before; mark_seconds waits for mark j, then gives the device's
     * seconds from mark i to mark j (both recorded). All three NULL on the
     * CPU, whose kernels run on the calling thread: its host time is its
     * device time. */
    mr_status (*marks_reserve)(mr_backend *be, int n, mr_error *err);
    mr_status (*mark)(mr_backend *be, int i, mr_error *err);
    mr_status (*mark_seconds)(mr_backend *be, int i, int j, double *s, mr_error *err);
    /* Graphs of a step (mr_graph_ops); NULL: the device kind has none. */
    const mr_graph_ops *graphs;
    /* Frees the implementation's state and the context itself. */
    void (*destroy)(mr_backend *be);
} mr_backend_ops;

struct mr_backend {
    const mr_backend_ops *ops;
    int ordinal;
    /* 1: this context's device memory is host memory (the CPU), so host
     * code may read and write it in place through mr_backend_host_view
     * instead of copying. Tests may clear it on a CPU context: host code
     * then copies as it must for a GPU (the kernels still run on the CPU). */
    int host_memory;
    /* Seconds the host waits for the device before it gives up with an
     * error (CUDA: a kernel that waits for a collective whose peer never
     * comes); 0: no limit. The strategy sets the collectives' timeout. */
    double timeout_s;
    /* Scratch for the layers' kernels (mr_backend_reserve_scratch). */
    mr_dfloat *scratch;
    size_t scratch_floats;
    void *impl; /* the implementation's own state, or NULL */
};

/* Contexts are made by their kind's create (mr_backend_create in
 * backends/backends.h). Frees the context and its scratch (NULL: nothing). */
void mr_backend_destroy(mr_backend *be);

/* "cpu:0", "gpu:1" */
void mr_backend_format(const mr_backend *be, char *buf, size_t n);

/* Device memory. */
void *mr_backend_alloc(mr_backend *be, size_t bytes);
mr_dfloat *mr_backend_alloc_floats(mr_backend *be, size_t n);
void mr_backend_free(mr_backend *be, void *p); /* p may be NULL */
/* Host staging memory (freed with mr_backend_free_host). */
void *mr_backend_alloc_host(mr_backend *be, size_t bytes);
void mr_backend_free_host(mr_backend *be, void *p);

mr_status mr_backend_to_device(mr_backend *be, void *dst, const void *src, size_t bytes,
                               mr_error *err);
mr_status mr_backend_to_host(mr_backend *be, void *dst, const void *src, size_t bytes,
                             mr_error *err);
/* Queues `bytes` from host staging `src` (mr_backend_alloc_host) into
 * device memory `dst` and returns before the copy is done, so the host can
 * fill the next batch while the device computes:
 *   - what is queued on the context after this call runs after the copy;
 *   - the copy starts once everything queued before the PREVIOUS upload of
 *     the context has run: `dst` may be the buffer that work read, so two
 *     device buffers used in turn let the copy overlap the step before;
 *   - it returns once the previous upload's copy is done: its `src` may be
 *     filled again, so two staging buffers used in turn need no other wait.
 * The CPU copies at once (to_device). */
mr_status mr_backend_upload(mr_backend *be, void *dst, const void *src, size_t bytes,
                            mr_error *err);
mr_status mr_backend_zero(mr_backend *be, void *dst, size_t bytes, mr_error *err);
mr_status mr_backend_scale(mr_backend *be, mr_dfloat *x, size_t n, float alpha, mr_error *err);
mr_status mr_gemm(mr_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const mr_dfloat *a, int lda, const mr_dfloat *b, int ldb, float beta,
                  mr_dfloat *c, int ldc, mr_error *err);

/* The host address of device memory p where the context's memory is host
 * memory (host_memory), else NULL: host code then copies. */
float *mr_backend_host_view(const mr_backend *be, mr_dfloat *p);
const float *mr_backend_host_cview(const mr_backend *be, const mr_dfloat *p);

/* n floats of p for the host to read: *host is p's host view (no copy), or
 * `staging` (n floats of host memory) after a copy. */
mr_status mr_backend_read(mr_backend *be, const mr_dfloat *p, size_t n, float *staging,
                          const float **host, mr_error *err);
/* n floats from host memory into p: nothing to do when `host` is p's own
 * host view (the caller filled p in place), else a copy. */
mr_status mr_backend_write(mr_backend *be, mr_dfloat *p, const float *host, size_t n,
                           mr_error *err);
/* mr_backend_write without the wait: `host` is host staging
 * (mr_backend_alloc_host) that the caller leaves alone until the host next
 * waits for the device (a read of device memory), so the copy runs when the
 * device gets to it, in order with the work queued before and after. */
mr_status mr_backend_write_queued(mr_backend *be, mr_dfloat *p, const float *host, size_t n,
                                  mr_error *err);

/* Makes the context's scratch at least n floats (grows, never shrinks; the
 * contents are not kept). The layers of a model declare what they need and
 * the model reserves the largest. */
mr_status mr_backend_reserve_scratch(mr_backend *be, size_t n, mr_error *err);
/* The scratch (mr_backend_reserve_scratch's size), or NULL before any reserve. */
mr_dfloat *mr_backend_scratch(const mr_backend *be);

/* Tells the backend the cores each replica owns (`threads`); it sets its
 * math library's threads within them. On the CPU it is OpenBLAS's setting,
 * global to the process: the strategy sets it once for all its replicas,
 * and it is 1 unless OPENBLAS_NUM_THREADS asks for more (never more than
 * `threads`), so that the sums do not follow the affinity mask. */
void mr_backend_set_threads(mr_backend *be, int threads);

/* Binds the calling thread to be's device; a replica's thread calls it
 * before anything else on the context (MR_OK where there is nothing to do). */
mr_status mr_backend_enter(mr_backend *be, mr_error *err);

/* Bytes of the device's memory in use and in all; *total 0 where the
 * device kind does not report it (the CPU). */
mr_status mr_backend_memory(mr_backend *be, size_t *used, size_t *total, mr_error *err);

/* Device time (the ops' marks): 1 where the device kind has marks (a
 * GPU), 0 where its host time is its device time (the CPU). */
int mr_backend_has_marks(const mr_backend *be);
/* At least n marks (made once; a second call with n no larger does
 * nothing); MR_ERR_UNSUPPORTED without marks. */
mr_status mr_backend_marks_reserve(mr_backend *be, int n, mr_error *err);
/* Queues mark i (0 <= i < reserved) behind the work queued so far; a mark
 * recorded again moves to the new place. */
mr_status mr_backend_mark(mr_backend *be, int i, mr_error *err);
/* Waits for mark j, then *s = the device's seconds from mark i to mark j
 * (negative if i ran after j). */
mr_status mr_backend_mark_seconds(mr_backend *be, int i, int j, double *s, mr_error *err);

/* The kind's graphs (mr_graph_ops), or NULL where it has none (the CPU). */
const mr_graph_ops *mr_backend_graphs(const mr_backend *be);

/* Number of cores this process may run on (sched_getaffinity), at least 1. */
int mr_cpu_cores(void);

MR_C_END

#endif
