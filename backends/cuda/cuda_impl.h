/* cuda_impl.h: a CUDA backend context's state and the error checks of the
 * CUDA backend's files (backends/cuda/: backend_cuda.c, the kernels
 * <layer>_cuda.cu, nccl_comm.c). Nothing outside that folder includes it
 * (a build without CUDA has no such headers), but the tests of the CUDA
 * backend.
 *
 * A context is one device and everything a replica computes with on it:
 * a compute stream (every kernel and library call of the replica, in
 * order), a copy stream (the next batch, host -> device, while the current
 * step runs: mr_backend_upload) and a communication stream (collectives,
 * ordered against the compute stream by events), a cuBLAS and a cuDNN
 * handle bound to the compute stream, and a cuDNN workspace. One host
 * thread uses a context at a time and makes its device current first
 * (mr_cuda_enter). The host never blocks inside CUDA: it waits for an
 * event with a timeout (mr_cuda_wait), so a kernel stuck behind a
 * collective that never completes ends in an error, not a hang. */
#ifndef MR_CUDA_IMPL_H
#define MR_CUDA_IMPL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "runtime/backend.h"
#include "runtime/hd.h"

MR_C_BEGIN

/* The CUDA context's ops (backend_cuda.c): a context is a CUDA one when
 * its ops are these (the NCCL communicator checks what it is given). */
extern const mr_backend_ops mr_cuda_ops;
/* The CUDA kernels' table (kernels_cuda.c). */
extern const struct mr_kernels mr_cuda_kernels;
/* The GPUs the CUDA runtime sees (discover_cuda.c); asks once per process
 * and remembers (thread-safe). Never fails: no GPU is count 0 and a
 * reason in the runtime's words. */
struct mr_gpu_list;
const struct mr_gpu_list *mr_cuda_discover(void);

typedef struct mr_cuda_ctx {
    int device;               /* CUDA ordinal, as CUDA_VISIBLE_DEVICES numbers them */
    cudaStream_t stream;      /* compute */
    cudaStream_t copy_stream; /* input batches, host -> device */
    cudaStream_t comm_stream; /* collectives */
    cublasHandle_t cublas;    /* on `stream` */
    cudnnHandle_t cudnn;      /* on `stream` */
    void *workspace;          /* cuDNN workspace (mr_cuda_workspace) */
    void *blas_workspace;     /* cuBLAS's, its own (MR_CUDA_BLAS_WORKSPACE bytes) */
    size_t workspace_bytes;
    int32_t *labels;      /* device copy of a batch's labels (mr_cuda_labels) */
    int32_t *labels_host; /* and its pinned staging */
    size_t labels_n;
    cudaEvent_t labels_copied;         /* the last copy out of labels_host */
    long label_copies, labels_settled; /* copies queued; known done (mr_cuda_wait) */
    double *rows;                      /* per-row results of the loss (mr_cuda_rows): device */
    double *rows_host;                 /* and their pinned host copy */
    size_t rows_n;
    double *sums;      /* (2) the step's loss sum and correct count (mr_loss_compute_queued), then a
                          counter */
    double *flag;      /* the queued check for NaN and Inf (nonfinite_begin): device */
    double *flag_host; /* and its pinned copy, read after the host's next wait */
    cudaEvent_t idle;  /* compute stream: what mr_cuda_wait waits for */
    /* mr_backend_upload: `fence` on the compute stream marks the work
     * queued before the previous upload (the copy after it waits for it);
     * `copied` on the copy stream marks the last copy (the compute stream
     * and the next upload's host wait wait for it) */
    cudaEvent_t upload_fence, upload_copied;
    long uploads; /* so far: the first has no previous upload to wait for */
    long settled; /* uploads known done: the compute stream waited for each
                     before the host's last mr_cuda_wait (cuda_upload skips
                     its wait for them) */
    /* mr_backend_mark: timing events on the compute stream (--trace's
     * device time), n_marks of them; NULL until marks_reserve */
    cudaEvent_t *marks;
    int n_marks;
    /* graphs (graph_cuda.c): 1 while the compute stream records; the step
     * scalars the recorded kernels read (device) and their pinned staging;
     * `moved` counts the times a buffer above (workspace, labels, rows) was
     * replaced, so a graph that recorded the old one is known stale */
    int capturing;
    mr_step_scalars *scal, *scal_host;
    long moved;
} mr_cuda_ctx;

/* The kind's graphs (graph_cuda.c). */
extern const mr_graph_ops mr_cuda_graph_ops;

/* The per-step scalars for a kernel being queued: the device copy while
 * the stream records a graph (the replays' values), else NULL (the kernel
 * takes its by-value arguments). */
static inline const mr_step_scalars *mr_cuda_live(const mr_backend *be) {
    const mr_cuda_ctx *c = (const mr_cuda_ctx *)be->impl;
    return c->capturing ? c->scal : NULL;
}

/* cuBLAS's workspace per context: what cuBLAS recommends for Hopper (32
 * MiB; 4 MiB before it), owned by the context, so that a captured graph's
 * GEMMs take no memory from cuBLAS's own pool at each capture. */
#define MR_CUDA_BLAS_WORKSPACE ((size_t)32 << 20)

/* The cuBLAS calls the backend makes, loaded by mr_cublas_load (once, on
 * the first CUDA context; thread-safe): backends/cuda/cublas_lazy.c says why
 * cuBLAS is loaded rather than linked. Valid once a load succeeded. */
typedef struct mr_cublas_api {
    __typeof__(&cublasCreate_v2) create;
    __typeof__(&cublasDestroy_v2) destroy;
    __typeof__(&cublasSetStream_v2) set_stream;
    __typeof__(&cublasSetMathMode) set_math_mode;
    __typeof__(&cublasSetWorkspace_v2) set_workspace;
    __typeof__(&cublasSscal_v2) sscal;
    __typeof__(&cublasSgemm_v2) sgemm;
    __typeof__(&cublasGetStatusString) status_string;
} mr_cublas_api;
extern mr_cublas_api mr_cublas;
/* MR_ERR_UNSUPPORTED "cannot load cuBLAS: ..." where it cannot. */
mr_status mr_cublas_load(mr_error *err);

/* The context's CUDA state. */
static inline mr_cuda_ctx *mr_cuda(const mr_backend *be) {
    return (mr_cuda_ctx *)be->impl;
}

/* The device's upper bound for a workspace that a cuDNN algorithm may ask
 * for; algorithms wanting more are skipped. */
#define MR_CUDA_WORKSPACE_LIMIT ((size_t)256 << 20)

/* Makes the context's device current for the calling thread. */
mr_status mr_cuda_enter(mr_backend *be, mr_error *err);

/* A failed call as one line naming the device and what was being done:
 * "gpu:1: cudnnConvolutionForward: CUDNN_STATUS_BAD_PARAM". Return
 * MR_ERR_RUNTIME (MR_ERR_NOMEM for an out-of-memory status). */
mr_status mr_cuda_fail(const mr_backend *be, mr_error *err, cudaError_t e, const char *what);
mr_status mr_cublas_fail(const mr_backend *be, mr_error *err, cublasStatus_t s, const char *what);
mr_status mr_cudnn_fail(const mr_backend *be, mr_error *err, cudnnStatus_t s, const char *what);

/* Checks of a call's result inside a function returning mr_status. */
#define MR_CUDA_TRY(be, err, call)                                                                 \
    do {                                                                                           \
        cudaError_t mr_e_ = (call);                                                                \
        if (mr_e_ != cudaSuccess) return mr_cuda_fail((be), (err), mr_e_, #call);                  \
    } while (0)
#define MR_CUBLAS_TRY(be, err, call)                                                               \
    do {                                                                                           \
        cublasStatus_t mr_s_ = (call);                                                             \
        if (mr_s_ != CUBLAS_STATUS_SUCCESS) return mr_cublas_fail((be), (err), mr_s_, #call);      \
    } while (0)
#define MR_CUDNN_TRY(be, err, call)                                                                \
    do {                                                                                           \
        cudnnStatus_t mr_s_ = (call);                                                              \
        if (mr_s_ != CUDNN_STATUS_SUCCESS) return mr_cudnn_fail((be), (err), mr_s_, #call);        \
    } while (0)

/* The context's cuDNN workspace, at least `bytes` (grows, never shrinks). */
mr_status mr_cuda_workspace(mr_backend *be, size_t bytes, void **ws, mr_error *err);

/* n labels from host memory into the context's device buffer, queued on
 * the compute stream through pinned staging: the host array may be reused
 * once this returns; the staging is reused by the next call, which must
 * come after a host wait (mr_cuda_wait: the loss waits for its sums). */
mr_status mr_cuda_labels(mr_backend *be, const int32_t *labels, int n, const int32_t **dev,
                         mr_error *err);

/* n doubles of device memory and n of pinned host memory for per-row
 * results (the loss writes each example's loss and hit there; the host
 * sums them in row order, so the sums repeat bitwise). */
mr_status mr_cuda_rows(mr_backend *be, size_t n, double **dev, double **host, mr_error *err);

/* Blocks until the context's compute stream has run everything queued,
 * or fails once be->timeout_s has passed (0: no limit), saying that the
 * device did not finish what was queued before `what`. */
mr_status mr_cuda_wait(mr_backend *be, const char *what, mr_error *err);

MR_C_END

#endif
