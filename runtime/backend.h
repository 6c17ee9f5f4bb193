/* backend.h: one table of operations per device kind.
 *
 * Layers and optimizers reach the hardware only through these wrappers; a
 * replica owns one mr_backend context (CPU: scratch memory; CUDA: device,
 * streams, cuBLAS/cuDNN handles in a later .cu sibling). Matrices are
 * row-major. */
#ifndef MR_BACKEND_H
#define MR_BACKEND_H

#include <stddef.h>

#include "error.h"

typedef enum mr_device_kind { MR_DEVICE_CPU, MR_DEVICE_CUDA } mr_device_kind;

typedef struct mr_backend mr_backend;

typedef struct mr_backend_ops {
    const char *name; /* "cpu", "cuda" */
    /* Device memory: n bytes, zeroed; NULL on failure. */
    void *(*alloc)(mr_backend *be, size_t n);
    void (*free)(mr_backend *be, void *p);
    /* Host <-> device copies (on the CPU both are memcpy). */
    void (*to_device)(mr_backend *be, void *dst, const void *src, size_t n);
    void (*to_host)(mr_backend *be, void *dst, const void *src, size_t n);
    /* C (m x n) = alpha * op(A) * op(B) + beta * C, op(A) m x k, op(B) k x n;
     * lda/ldb/ldc are row strides of A, B, C as stored. */
    void (*gemm)(mr_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
    /* Sets how many threads the backend's math library may use for this
     * context (CPU: OpenBLAS threads). May be NULL. */
    void (*set_threads)(mr_backend *be, int threads);
} mr_backend_ops;

struct mr_backend {
    const mr_backend_ops *ops;
    mr_device_kind kind;
    int ordinal;
};

/* The CPU backend (OpenBLAS). Stateless: one static context serves all replicas. */
mr_backend *mr_backend_cpu(void);

static inline void mr_gemm(mr_backend *be, int trans_a, int trans_b, int m, int n, int k,
                           float alpha, const float *a, int lda, const float *b, int ldb,
                           float beta, float *c, int ldc) {
    be->ops->gemm(be, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* Number of cores this process may run on (sched_getaffinity), at least 1. */
int mr_cpu_cores(void);

/* Sets BLAS threads for the whole process (OpenBLAS's setting is global). */
void mr_backend_set_threads(mr_backend *be, int threads);

#endif
