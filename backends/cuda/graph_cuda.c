/* graph_cuda.c: CUDA graphs of a training step (runtime/backend.h's
 * mr_graph_ops) on a context's compute stream. The capture is thread-local
 * (cudaStreamCaptureModeThreadLocal): each replica's thread records its own
 * stream while the others go on queueing theirs. Nothing in a capture may
 * wait for the device, allocate or record an event (CUDA's rules), so the
 * step's lazily made buffers must exist before it (an eager step first),
 * and the labels' copy skips its event while recording (mr_cuda_labels).
 * What changes from one replay to the next comes through pinned staging
 * that a recorded copy reads: the batch's labels, the metric floats, and
 * the step scalars (mr_step_scalars), copied to device memory by the
 * graph's first node and read there by the kernels recorded with
 * mr_cuda_live.
 * Relies on: CUDA runtime 12+ (stream capture, cudaGraphInstantiate). */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"

/* An executable graph and the buffers' generation it recorded (mr_cuda_ctx.moved). */
typedef struct cuda_graph {
    cudaGraphExec_t exec;
    long moved;
} cuda_graph;

static mr_status capture_begin(mr_backend *be, const mr_step_scalars *sc, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    if (c->scal == NULL) { /* before the capture: it may not allocate */
        c->scal = mr_backend_alloc(be, sizeof *c->scal);
        c->scal_host = mr_backend_alloc_host(be, sizeof *c->scal_host);
        if (c->scal == NULL || c->scal_host == NULL)
            return mr_error_set(err, MR_ERR_NOMEM, "gpu:%d: out of memory for the step scalars",
                                be->ordinal);
    }
    *c->scal_host = *sc;
    MR_CUDA_TRY(be, err, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    c->capturing = 1;
    MR_CUDA_TRY(
        be, err,
        cudaMemcpyAsync(c->scal, c->scal_host, sizeof *c->scal, cudaMemcpyHostToDevice, c->stream));
    return MR_OK;
}

static mr_status capture_end(mr_backend *be, void **graph, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    *graph = NULL;
    c->capturing = 0;
    cudaGraph_t g = NULL;
    /* a capture that a forbidden call invalidated ends here with its error */
    MR_CUDA_TRY(be, err, cudaStreamEndCapture(c->stream, &g));
    cuda_graph *cg = calloc(1, sizeof *cg);
    if (cg == NULL) {
        cudaGraphDestroy(g);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory for a graph");
    }
    cudaError_t e = cudaGraphInstantiate(&cg->exec, g, 0);
    cudaGraphDestroy(g); /* the executable graph is a copy */
    if (e != cudaSuccess) {
        free(cg);
        return mr_cuda_fail(be, err, e, "cudaGraphInstantiate");
    }
    cg->moved = c->moved;
    *graph = cg;
    return MR_OK;
}

static mr_status stage(mr_backend *be, const mr_step_scalars *sc, const int32_t *labels, int n,
                       mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    if (c->scal_host == NULL || (size_t)n > c->labels_n)
        return mr_error_set(err, MR_ERR_RUNTIME, "gpu:%d: a graph replayed before its capture",
                            be->ordinal);
    *c->scal_host = *sc;
    memcpy(c->labels_host, labels, sizeof(int32_t) * (size_t)n);
    return MR_OK;
}

static int graph_current(const mr_backend *be, const void *graph) {
    return graph != NULL && ((const cuda_graph *)graph)->moved == mr_cuda(be)->moved;
}

static mr_status launch(mr_backend *be, void *graph, mr_error *err) {
    MR_CUDA_TRY(be, err, cudaGraphLaunch(((cuda_graph *)graph)->exec, mr_cuda(be)->stream));
    return MR_OK;
}

static mr_status queue_to_host(mr_backend *be, void *dst, const void *src, size_t n,
                               mr_error *err) {
    MR_CUDA_TRY(be, err, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, mr_cuda(be)->stream));
    return MR_OK;
}

static void graph_free(mr_backend *be, void *graph) {
    (void)be;
    cuda_graph *cg = graph;
    if (cg == NULL) return;
    cudaGraphExecDestroy(cg->exec);
    free(cg);
}

const mr_graph_ops mr_cuda_graph_ops = {
    .capture_begin = capture_begin,
    .capture_end = capture_end,
    .stage = stage,
    .graph_current = graph_current,
    .launch = launch,
    .queue_to_host = queue_to_host,
    .wait = mr_cuda_wait,
    .graph_free = graph_free,
};
