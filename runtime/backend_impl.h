/* backend_impl.h: what the backend implementations export, for backend.c
 * (which dispatches on the device kind) and for the kernels of the same
 * device kind (models/<layer>_cpu.c call the CPU GEMM on raw pointers).
 * Not for model.c, strategies/ or launch/: they use backend.h. */
#ifndef MR_BACKEND_IMPL_H
#define MR_BACKEND_IMPL_H

#include "backend.h"
#include "hd.h"

MR_C_BEGIN

/* backend_cpu.c: a CPU context (OpenBLAS); its memory is host memory. */
mr_status mr_backend_cpu_create(int ordinal, mr_backend **out, mr_error *err);

/* backend_cuda.cu, or backend_nocuda.c in a build without CUDA (then
 * MR_ERR_UNSUPPORTED: "no CUDA backend in this build"). */
mr_status mr_backend_cuda_create(int ordinal, mr_backend **out, mr_error *err);

/* The CPU GEMM (cblas_sgemm, row-major) on host pointers, for CPU kernels:
 * C (m x n) = alpha * op(A) op(B) + beta * C. */
void mr_cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

MR_C_END

#endif
