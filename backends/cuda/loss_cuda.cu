/* loss_cuda.cu: the losses on a GPU (loss.h's contract; loss_cpu.c is the
 * reference): cross-entropy from logits (fused softmax, through
 * log-sum-exp) or from probabilities (clipped as Keras does), mean squared
 * error. One thread per row computes the row's loss (in double where the
 * CPU does), its hit (argmax, first maximum wins), whether its label is in
 * the top k (top_k > 0) and its dy; the rows go
 * to the host, which sums them in row order as the CPU loop does, so the
 * sums repeat bitwise and need no atomics. A training step's loss
 * (compute_queued) sums them on the device instead, in the same launch:
 * the last of its blocks to finish (CUDA's "last block" pattern, a counter
 * after __threadfence) adds them in the same row order in one thread, so
 * the step waits for nothing between forward and backward.
 * Relies on: kernels_cuda.h, cuda_impl.h (mr_cuda_labels, mr_cuda_rows,
 * mr_cuda_wait). */
#include "backends/cuda/kernels_cuda.h"
#include "models/loss_row.h"

/* out (batch, k), labels (batch) or, multi-label binary_crossentropy and regression, (batch, k), cw
 * (k) or NULL -> loss[i] (weighted by its class's cw), hit[i], top[i] (doubles; top only when top_k
 * > 0) and, when dy is not NULL, dy (batch, k): loss_row.h's mr_loss_example, the CPU's code */
__global__ static void loss_kernel(mr_loss_kind kind, int fused_softmax, float ls,
                                   const float *__restrict__ out,
                                   const int32_t *__restrict__ labels, const float *__restrict__ cw,
                                   int batch, int k, float inv, float *__restrict__ dy,
                                   double *__restrict__ loss, double *__restrict__ hit, int top_k,
                                   double *__restrict__ top) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < batch; i += gridDim.x * blockDim.x) {
        int h, t;
        loss[i] =
            mr_loss_example(kind, fused_softmax, ls, out, labels, cw, i, k, inv, top_k, dy, &h, &t);
        hit[i] = (double)h;
        if (top_k > 0) top[i] = (double)t;
    }
}

/* loss_kernel (no top k), then in the last block to finish, one thread
 * in row order, as cuda_loss's host loop: sums[0] += the rows' loss sum,
 * sums[1] += their hit count (an int64, then a double): the same additions
 * in the same order, so the same bits as the host's sums. done: blocks
 * finished, 0 between launches (the last block puts it back). */
__global__ static void
loss_sums_kernel(mr_loss_kind kind, int fused_softmax, float ls, const float *__restrict__ out,
                 const int32_t *__restrict__ labels, const float *__restrict__ cw, int batch, int k,
                 float inv, float *__restrict__ dy, double *rows, double *sums, unsigned *done) {
    __shared__ int last;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < batch; i += gridDim.x * blockDim.x) {
        int h, t;
        rows[i] =
            mr_loss_example(kind, fused_softmax, ls, out, labels, cw, i, k, inv, 0, dy, &h, &t);
        rows[batch + i] = (double)h;
    }
    __threadfence(); /* this block's rows reach the last block before the count */
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last || threadIdx.x != 0) return;
    const volatile double *v = rows; /* other blocks' rows */
    double total = 0.0;
    int64_t right = 0;
    for (int i = 0; i < batch; i++) {
        total += v[i];
        right += (int64_t)v[batch + i];
    }
    sums[0] += total;
    sums[1] += (double)right;
    *done = 0; /* for the next launch */
}

/* dst (3 floats) = (float) loss sum, (float) correct, whether the loss sum
 * is NaN or +-Inf (fit_step's metric floats); the sums start again. */
__global__ static void take_sums_kernel(double *sums, float *dst) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    dst[0] = (float)sums[0];
    dst[1] = (float)sums[1];
    dst[2] = isfinite(sums[0]) ? 0.0f : 1.0f;
    sums[0] = sums[1] = 0.0;
}

/* The device's step sums (2), then loss_sums_kernel's counter: zeroed on
 * first use. */
static mr_status step_sums(mr_backend *be, double **sums, mr_error *err) {
    mr_cuda_ctx *c = mr_cuda(be);
    if (c->sums == NULL) {
        c->sums = (double *)mr_backend_alloc(be, 3 * sizeof(double));
        if (c->sums == NULL)
            return mr_error_set(err, MR_ERR_NOMEM, "gpu:%d: out of memory for the loss sums",
                                be->ordinal);
    }
    *sums = c->sums;
    return MR_OK;
}

/* loss.h's mr_loss_compute_queued: the rows stay on the device and are
 * summed there, in row order, into the step sums; no copy, no wait. The
 * rows' buffer is the context's: the next loss queued after this one on
 * the same stream overwrites it only after this sum has read it. */
static mr_status cuda_loss_queued(mr_backend *be, mr_loss_kind kind, int fused_softmax, float ls,
                                  const mr_dfloat *out, const int32_t *labels,
                                  const mr_dfloat *class_weight, int batch, int k, float norm,
                                  mr_dfloat *dy, mr_error *err) {
    if (batch == 0) return MR_OK;
    cudaStream_t s = mr_cuda(be)->stream;
    const int32_t *dlabels;
    double *rows, *host, *sums = NULL;
    const int width =
        mr_loss_multi_label(kind, k) || mr_loss_float_targets(kind, fused_softmax) ? k : 1;
    MR_CHECK(mr_cuda_labels(be, labels, batch * width, &dlabels, err));
    MR_CHECK(mr_cuda_rows(be, 2 * (size_t)batch, &rows, &host, err));
    MR_CHECK(step_sums(be, &sums, err));
    MR_CUDA_LAUNCH(loss_sums_kernel, mr_cuda_blocks((size_t)batch), MR_CUDA_THREADS, s, kind,
                   fused_softmax, ls, mr_dfloat_cptr(out), dlabels,
                   class_weight ? mr_dfloat_cptr(class_weight) : NULL, batch, k, 1.0f / norm,
                   dy ? mr_dfloat_ptr(dy) : NULL, rows, sums, (unsigned *)(sums + 2));
    mr_cuda_launched(be, err, "loss_sums_kernel");
    return MR_OK;
}

static mr_status cuda_take_sums(mr_backend *be, mr_dfloat *dst, mr_error *err) {
    double *sums = NULL;
    MR_CHECK(step_sums(be, &sums, err));
    MR_CUDA_LAUNCH(take_sums_kernel, 1, 1, mr_cuda(be)->stream, sums, mr_dfloat_ptr(dst));
    mr_cuda_launched(be, err, "take_sums_kernel");
    return MR_OK;
}

static mr_status cuda_loss(mr_backend *be, mr_loss_kind kind, int fused_softmax, float ls,
                           const mr_dfloat *out, const int32_t *labels,
                           const mr_dfloat *class_weight, int batch, int k, float norm,
                           mr_dfloat *dy, double *loss_sum, int64_t *correct, int top_k,
                           int64_t *in_top_k, mr_error *err) {
    if (batch == 0) return MR_OK;
    cudaStream_t s = mr_cuda(be)->stream;
    const int32_t *dlabels;
    double *rows, *host;
    /* multi-label binary_crossentropy: (batch, k) multi-hot labels; regression: (batch, k)
     * float targets; else (batch) */
    const int width =
        mr_loss_multi_label(kind, k) || mr_loss_float_targets(kind, fused_softmax) ? k : 1;
    MR_CHECK(mr_cuda_labels(be, labels, batch * width, &dlabels, err));
    /* rows: batch losses, batch hits, then (top_k > 0) batch top-k hits */
    const size_t nrows = (top_k > 0 ? 3 : 2) * (size_t)batch;
    MR_CHECK(mr_cuda_rows(be, nrows, &rows, &host, err));
    MR_CUDA_LAUNCH(loss_kernel, mr_cuda_blocks((size_t)batch), MR_CUDA_THREADS, s, kind,
                   fused_softmax, ls, mr_dfloat_cptr(out), dlabels,
                   class_weight ? mr_dfloat_cptr(class_weight) : NULL, batch, k, 1.0f / norm,
                   dy ? mr_dfloat_ptr(dy) : NULL, rows, rows + batch, top_k,
                   rows + 2 * (size_t)batch);
    mr_cuda_launched(be, err, "loss_kernel");
    MR_CUDA_TRY(be, err,
                cudaMemcpyAsync(host, rows, sizeof(double) * nrows, cudaMemcpyDeviceToHost, s));
    MR_CHECK(mr_cuda_wait(be, "the loss's sums", err));
    /* in row order, as loss_cpu.c: the same sum bit for bit */
    double total = 0.0;
    int64_t right = 0, top = 0;
    for (int i = 0; i < batch; i++) {
        total += host[i];
        right += (int64_t)host[batch + i]; /* 0 or 1; multi-label: 0..k */
        if (top_k > 0) top += host[2 * (size_t)batch + i] != 0.0;
    }
    *loss_sum += total;
    *correct += right;
    if (top_k > 0) *in_top_k += top;
    return MR_OK;
}

const mr_loss_kernels mr_loss_cuda = {
    .compute = cuda_loss, .compute_queued = cuda_loss_queued, .take_sums = cuda_take_sums};
