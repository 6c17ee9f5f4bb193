/* backend_cuda.c: the CUDA backend (backend.h) over the CUDA runtime and
 * cuBLAS; its state is cuda_impl.h's mr_cuda_ctx. Plain C calling the
 * libraries' C APIs: the kernels are the .cu files of models/.
 *
 * Memory is the device's (cudaMalloc), so host code copies (host_memory
 * 0). Every call is queued on the context's compute stream; a copy to the
 * host waits for it, so what the host reads is what the kernels wrote.
 * GEMM: cuBLAS is column-major and our matrices row-major; a row-major C
 * (m x n) is a column-major C^T (n x m), and C^T = op(B)^T op(A)^T, so the
 * call is cublasSgemm(opB, opA, n, m, k, B, ldb, A, lda, C, ldc): the same
 * strides, the operands swapped.
 * Relies on: CUDA runtime 12+, cuBLAS (loaded: cublas_lazy.c), cuDNN 9 (the
 * handle). */
#include "runtime/backoff.h"
#include "backends/backends.h"
#include "backends/cuda/cuda_impl.h"
#include "backends/cuda/nccl_comm.h"
#include "backends/gpu_list.h"

#include <stdlib.h>
#include <string.h>

mr_status mr_cuda_fail(const mr_backend *be, mr_error *err, cudaError_t e, const char *what) {
    (void)cudaGetLastError(); /* clears a non-sticky error so later calls start clean */
    return mr_error_set(err, e == cudaErrorMemoryAllocation ? MR_ERR_NOMEM : MR_ERR_RUNTIME,
                        "gpu:%d: %s: %s (%s)", be->ordinal, what, cudaGetErrorString(e),
                        cudaGetErrorName(e));
}

mr_status mr_cublas_fail(const mr_backend *be, mr_error *err, cublasStatus_t s, const char *what) {
    return mr_error_set(err, s == CUBLAS_STATUS_ALLOC_FAILED ? MR_ERR_NOMEM : MR_ERR_RUNTIME,
                        "gpu:%d: %s: %s", be->ordinal, what, mr_cublas.status_string(s));
}

mr_status mr_cudnn_fail(const mr_backend *be, mr_error *err, cudnnStatus_t s, const char *what) {
    return mr_error_set(err, s == CUDNN_STATUS_ALLOC_FAILED ? MR_ERR_NOMEM : MR_ERR_RUNTIME,
                        "gpu:%d: %s: %s", be->ordinal, what, cudnnGetErrorString(s));
}

mr_status mr_cuda_enter(mr_backend *be, mr_error *err) {
    MR_CUDA_TRY(be, err, cudaSetDevice(mr_cuda(be)->device));
    return MR_OK;
}

static void *cuda_alloc(mr_backend *be, size_t n) {
    mr_cuda_ctx *c = mr_cuda(be);
    void *p = NULL;
    /* cudaMalloc aligns to 256 bytes; zeroed on the compute stream, so any
     * kernel queued after sees zeros */
    if (cudaSetDevice(c->device) != cudaSuccess || cudaMalloc(&p, n ? n : 1) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    if (cudaMemsetAsync(p, 0, n, c->stream) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void cuda_free(mr_backend *be, void *p) {
    (void)be;
    /* cudaFree waits for the device: nothing queued still uses p */
    cudaFree(p);
}

static void *cuda_alloc_host(mr_backend *be, size_t n) {
    (void)be;
    /* pinned: copies from it run asynchronously and at full bus speed */
    void *p = NULL;
    if (cudaHostAlloc(&p, n ? n : 1, cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

static void cuda_free_host(mr_backend *be, void *p) {
    (void)be;
    cudaFreeHost(p);
}

/* The host's wait for event ev (recorded), within be->timeout_s. */
static mr_status wait_event(mr_backend *be, cudaEvent_t ev, const char *what, mr_error *err) {
    mr_backoff b;
    mr_backoff_begin(&b, 1e-3);
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) return MR_OK;
        if (e != cudaErrorNotReady) return mr_cuda_fail(be, err, e, what);
        if (be->timeout_s > 0 && mr_backoff_elapsed(&b) > be->timeout_s)
            return mr_error_set(err, MR_ERR_RUNTIME,
                                "gpu:%d: the device did not finish the work queued before %s "
                                "within %g s (a collective inside the model, such as SyncBN's, "
                                "may be waiting for a replica that failed or never came)",
                                be->ordinal, what, be->timeout_s);
        mr_backoff_pause(&b);
    }
}

mr_status mr_cuda_wait(mr_backend *be, const char *what, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    const long uploads = c->uploads, label_copies = c->label_copies;
    MR_CUDA_TRY(be, err, cudaEventRecord(c->idle, c->stream));
    MR_CHECK(wait_event(be, c->idle, what, err));
    /* the compute stream waited for every upload queued before this record */
    c->settled = uploads;
    c->labels_settled = label_copies; /* and every labels' copy before it */
    return MR_OK;
}

static mr_status cuda_to_device(mr_backend *be, void *dst, const void *src, size_t n,
                                mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    MR_CUDA_TRY(be, err, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream));
    /* the caller may reuse src as soon as this returns */
    return mr_cuda_wait(be, "a copy to the device", err);
}

/* backend.h's queue_to_device: the copy joins the compute stream's queue
 * and the host goes on; src (pinned) is read when the device gets to it. */
static mr_status cuda_queue_to_device(mr_backend *be, void *dst, const void *src, size_t n,
                                      mr_error *err) {
    MR_CUDA_TRY(be, err, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, mr_cuda(be)->stream));
    return MR_OK;
}

static mr_status cuda_to_host(mr_backend *be, void *dst, const void *src, size_t n, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    MR_CUDA_TRY(be, err, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream));
    return mr_cuda_wait(be, "a copy to the host", err);
}

/* backend.h's contract, with two events (cuda_impl.h): the copy goes on the
 * copy stream, after the compute work queued before the previous upload
 * (`fence`), so it runs while the work queued since (the step that reads
 * the other buffer) computes; the compute stream waits for it (`copied`)
 * before anything queued later. */
static mr_status cuda_upload(mr_backend *be, void *dst, const void *src, size_t n, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    if (c->uploads > 0) {
        /* the previous copy is done: its staging may be filled again (known
         * without a wait where the host waited for the device since) */
        if (c->settled < c->uploads)
            MR_CHECK(wait_event(be, c->upload_copied, "the previous batch's copy", err));
    } else {
        /* the first: after everything queued so far (the buffer's zeroing) */
        MR_CUDA_TRY(be, err, cudaEventRecord(c->upload_fence, c->stream));
    }
    MR_CUDA_TRY(be, err, cudaStreamWaitEvent(c->copy_stream, c->upload_fence, 0));
    MR_CUDA_TRY(be, err, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->copy_stream));
    MR_CUDA_TRY(be, err, cudaEventRecord(c->upload_copied, c->copy_stream));
    /* recorded before the compute stream's wait for this copy: it marks the
     * work that reads the buffers of the uploads before this one */
    MR_CUDA_TRY(be, err, cudaEventRecord(c->upload_fence, c->stream));
    MR_CUDA_TRY(be, err, cudaStreamWaitEvent(c->stream, c->upload_copied, 0));
    c->uploads++;
    return MR_OK;
}

static mr_status cuda_zero(mr_backend *be, void *dst, size_t n, mr_error *err) {
    MR_CUDA_TRY(be, err, cudaMemsetAsync(dst, 0, n, mr_cuda(be)->stream));
    return MR_OK;
}

static mr_status cuda_scale(mr_backend *be, mr_dfloat *x, size_t n, float alpha, mr_error *err) {
    /* cuBLAS takes int counts: a buffer past 2^31 floats goes in pieces */
    float *p = (float *)x;
    while (n > 0) {
        int chunk = n > (size_t)1 << 30 ? 1 << 30 : (int)n;
        MR_CUBLAS_TRY(be, err, mr_cublas.sscal(mr_cuda(be)->cublas, chunk, &alpha, p, 1));
        p += chunk;
        n -= (size_t)chunk;
    }
    return MR_OK;
}

static mr_status cuda_gemm(mr_backend *be, int trans_a, int trans_b, int m, int n, int k,
                           float alpha, const mr_dfloat *a, int lda, const mr_dfloat *b, int ldb,
                           float beta, mr_dfloat *c, int ldc, mr_error *err) {
    /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T (see top) */
    MR_CUBLAS_TRY(be, err,
                  mr_cublas.sgemm(mr_cuda(be)->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                  (const float *)b, ldb, (const float *)a, lda, &beta, (float *)c,
                                  ldc));
    return MR_OK;
}

mr_status mr_cuda_workspace(mr_backend *be, size_t bytes, void **ws, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    if (c->workspace == NULL || bytes > c->workspace_bytes) {
        mr_backend_free(be, c->workspace);
        c->workspace_bytes = 0;
        c->workspace = mr_backend_alloc(be, bytes);
        if (c->workspace == NULL)
            return mr_error_set(err, MR_ERR_NOMEM,
                                "gpu:%d: out of memory for %zu bytes of cuDNN workspace",
                                be->ordinal, bytes);
        c->workspace_bytes = bytes;
        c->moved++;
    }
    *ws = c->workspace;
    return MR_OK;
}

mr_status mr_cuda_labels(mr_backend *be, const int32_t *labels, int n, const int32_t **dev,
                         mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    if (c->labels == NULL || (size_t)n > c->labels_n) {
        mr_backend_free(be, c->labels);
        mr_backend_free_host(be, c->labels_host);
        c->labels_n = 0;
        c->labels = mr_backend_alloc(be, sizeof(int32_t) * (size_t)n);
        c->labels_host = mr_backend_alloc_host(be, sizeof(int32_t) * (size_t)n);
        if (c->labels == NULL || c->labels_host == NULL)
            return mr_error_set(err, MR_ERR_NOMEM, "gpu:%d: out of memory for %d labels",
                                be->ordinal, n);
        c->labels_n = (size_t)n;
        c->moved++;
    }
    /* through the context's pinned copy: the caller's array is free at
     * once, and the host does not wait for the device here; it waits for
     * the copy before filling the copy again only where no wait since has
     * (two losses queued with no wait between: mr_loss_compute_queued) */
    if (c->labels_settled < c->label_copies && !c->capturing)
        MR_CHECK(wait_event(be, c->labels_copied, "the previous labels' copy", err));
    memcpy(c->labels_host, labels, sizeof(int32_t) * (size_t)n);
    MR_CUDA_TRY(be, err,
                cudaMemcpyAsync(c->labels, c->labels_host, sizeof(int32_t) * (size_t)n,
                                cudaMemcpyHostToDevice, c->stream));
    /* a graph's copy reads the staging at each replay, after the host's
     * wait for the one before (graph_cuda.c): no event in a capture */
    if (c->capturing) return *dev = c->labels, MR_OK;
    MR_CUDA_TRY(be, err, cudaEventRecord(c->labels_copied, c->stream));
    c->label_copies++;
    *dev = c->labels;
    return MR_OK;
}

mr_status mr_cuda_rows(mr_backend *be, size_t n, double **dev, double **host, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    if (c->rows == NULL || n > c->rows_n) {
        mr_backend_free(be, c->rows);
        mr_backend_free_host(be, c->rows_host);
        c->rows_n = 0;
        c->rows = mr_backend_alloc(be, sizeof(double) * n);
        c->rows_host = mr_backend_alloc_host(be, sizeof(double) * n);
        if (c->rows == NULL || c->rows_host == NULL)
            return mr_error_set(err, MR_ERR_NOMEM, "gpu:%d: out of memory for %zu loss rows",
                                be->ordinal, n);
        c->rows_n = n;
        c->moved++;
    }
    *dev = c->rows;
    *host = c->rows_host;
    return MR_OK;
}

static mr_status cuda_memory(mr_backend *be, size_t *used, size_t *total, mr_error *err) {
    size_t free_bytes = 0;
    MR_CUDA_TRY(be, err, cudaSetDevice(mr_cuda(be)->device));
    MR_CUDA_TRY(be, err, cudaMemGetInfo(&free_bytes, total));
    *used = *total - free_bytes;
    return MR_OK;
}

/* Marks are timing events (the context's other events are created with
 * cudaEventDisableTiming, which costs less to record); made on the
 * context's device, recorded on its compute stream. */
static mr_status cuda_marks_reserve(mr_backend *be, int n, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    if (n <= c->n_marks) return MR_OK;
    cudaEvent_t *m = realloc(c->marks, sizeof *m * (size_t)n);
    if (m == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory for %d marks", n);
    c->marks = m;
    MR_CUDA_TRY(be, err, cudaSetDevice(c->device));
    for (; c->n_marks < n; c->n_marks++)
        MR_CUDA_TRY(be, err, cudaEventCreateWithFlags(&c->marks[c->n_marks], cudaEventDefault));
    return MR_OK;
}

static mr_status cuda_mark(mr_backend *be, int i, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    MR_ASSERT(i >= 0 && i < c->n_marks);
    MR_CUDA_TRY(be, err, cudaEventRecord(c->marks[i], c->stream));
    return MR_OK;
}

static mr_status cuda_mark_seconds(mr_backend *be, int i, int j, double *s, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    MR_ASSERT(i >= 0 && i < c->n_marks && j >= 0 && j < c->n_marks);
    /* j queued after i on one stream: once j is done, so is i */
    MR_CHECK(wait_event(be, c->marks[j], "a device-time mark", err));
    MR_CHECK(wait_event(be, c->marks[i], "a device-time mark", err));
    float ms = 0.0f;
    MR_CUDA_TRY(be, err, cudaEventElapsedTime(&ms, c->marks[i], c->marks[j]));
    *s = (double)ms * 1e-3;
    return MR_OK;
}

static void cuda_destroy(mr_backend *be) {
    mr_cuda_ctx *c = mr_cuda(be);
    if (c != NULL) {
        cudaSetDevice(c->device);
        /* the models' buffers are freed (cudaFree waits for the device); a
         * kernel still stuck behind an aborted collective has ended */
        if (c->stream) cudaStreamSynchronize(c->stream);
        if (c->idle) cudaEventDestroy(c->idle);
        if (c->upload_fence) cudaEventDestroy(c->upload_fence);
        if (c->upload_copied) cudaEventDestroy(c->upload_copied);
        if (c->labels_copied) cudaEventDestroy(c->labels_copied);
        for (int i = 0; i < c->n_marks; i++)
            cudaEventDestroy(c->marks[i]);
        free(c->marks);
        mr_backend_free(be, c->workspace);
        mr_backend_free(be, c->labels);
        mr_backend_free_host(be, c->labels_host);
        mr_backend_free(be, c->rows);
        mr_backend_free_host(be, c->rows_host);
        mr_backend_free(be, c->flag);
        mr_backend_free_host(be, c->flag_host);
        mr_backend_free(be, c->sums);
        mr_backend_free(be, c->scal);
        mr_backend_free_host(be, c->scal_host);
        if (c->cudnn) cudnnDestroy(c->cudnn);
        if (c->cublas) mr_cublas.destroy(c->cublas);
        if (c->blas_workspace) cudaFree(c->blas_workspace);
        if (c->stream) cudaStreamDestroy(c->stream);
        if (c->copy_stream) cudaStreamDestroy(c->copy_stream);
        if (c->comm_stream) cudaStreamDestroy(c->comm_stream);
        free(c);
    }
    free(be);
}

const mr_backend_ops mr_cuda_ops = {
    .name = "gpu",
    .kernels = &mr_cuda_kernels,
    .cache_passes = 0, /* a shard in one pass: fewer, larger launches */
    .alloc = cuda_alloc,
    .free = cuda_free,
    .alloc_host = cuda_alloc_host,
    .free_host = cuda_free_host,
    .to_device = cuda_to_device,
    .queue_to_device = cuda_queue_to_device,
    .to_host = cuda_to_host,
    .upload = cuda_upload,
    .zero = cuda_zero,
    .scale = cuda_scale,
    .gemm = cuda_gemm,
    .set_threads = NULL,
    .enter = mr_cuda_enter,
    .memory = cuda_memory,
    .marks_reserve = cuda_marks_reserve,
    .mark = cuda_mark,
    .mark_seconds = cuda_mark_seconds,
    .graphs = &mr_cuda_graph_ops,
    .destroy = cuda_destroy,
};

static mr_status cuda_setup(mr_backend *be, mr_cuda_ctx *c, mr_error *err) {
    const mr_gpu_list *gpus = mr_cuda_discover();
    if (gpus->count == 0)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "gpu:%d: no GPU available (%s)", be->ordinal,
                            gpus->reason);
    if (c->device < 0 || c->device >= gpus->count)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "gpu:%d: no such GPU (%d visible)",
                            be->ordinal, gpus->count);
    MR_CUDA_TRY(be, err, cudaSetDevice(c->device));
    MR_CUDA_TRY(be, err, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    MR_CUDA_TRY(be, err, cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking));
    MR_CUDA_TRY(be, err, cudaStreamCreateWithFlags(&c->comm_stream, cudaStreamNonBlocking));
    MR_CUDA_TRY(be, err, cudaEventCreateWithFlags(&c->idle, cudaEventDisableTiming));
    MR_CUDA_TRY(be, err, cudaEventCreateWithFlags(&c->upload_fence, cudaEventDisableTiming));
    MR_CUDA_TRY(be, err, cudaEventCreateWithFlags(&c->upload_copied, cudaEventDisableTiming));
    MR_CUDA_TRY(be, err, cudaEventCreateWithFlags(&c->labels_copied, cudaEventDisableTiming));
    MR_CHECK(mr_cublas_load(err));
    MR_CUBLAS_TRY(be, err, mr_cublas.create(&c->cublas));
    MR_CUBLAS_TRY(be, err, mr_cublas.set_stream(c->cublas, c->stream));
    /* full FP32 products (no TF32): the CPU and the GPU agree to float
     * rounding, which the conformance test bounds */
    MR_CUBLAS_TRY(be, err, mr_cublas.set_math_mode(c->cublas, CUBLAS_PEDANTIC_MATH));
    /* after set_stream, which goes back to cuBLAS's own pool */
    MR_CUDA_TRY(be, err, cudaMalloc(&c->blas_workspace, MR_CUDA_BLAS_WORKSPACE));
    MR_CUBLAS_TRY(be, err,
                  mr_cublas.set_workspace(c->cublas, c->blas_workspace, MR_CUDA_BLAS_WORKSPACE));
    MR_CUDNN_TRY(be, err, cudnnCreate(&c->cudnn));
    MR_CUDNN_TRY(be, err, cudnnSetStream(c->cudnn, c->stream));
    return MR_OK;
}

static mr_status cuda_create(int ordinal, mr_backend **out, mr_error *err) {
    *out = NULL;
    mr_backend *be = calloc(1, sizeof *be);
    mr_cuda_ctx *c = calloc(1, sizeof *c);
    if (be == NULL || c == NULL) {
        free(be);
        free(c);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory for a CUDA context");
    }
    be->ops = &mr_cuda_ops;
    be->ordinal = ordinal;
    be->host_memory = 0;
    be->impl = c;
    c->device = ordinal;
    mr_status st = cuda_setup(be, c, err);
    if (st != MR_OK) {
        cuda_destroy(be);
        return st;
    }
    *out = be;
    return MR_OK;
}

const mr_backend_kind mr_cuda_kind = {
    .name = "gpu",
    .plural = "GPUs",
    .ops = &mr_cuda_ops,
    .create = cuda_create,
    .discover = mr_cuda_discover,
    .pin_threads = 0, /* a thread drives its GPU */
    .comm_create = mr_comm_nccl_create,
};
