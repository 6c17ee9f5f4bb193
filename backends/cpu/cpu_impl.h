/* cpu_impl.h: the CPU backend's own declarations, for the files of
 * backends/cpu/ only (and the tests of its kernels): the kernels of
 * models/ (models/kernels.h), one table per layer kind, the loss and the
 * optimizer, each in <name>_cpu.c, gathered by kernels_cpu.c, and the
 * loops they share. CPU device memory is host memory: these files turn
 * their mr_dfloat * arguments into float * (runtime/dmem_impl.h) and run
 * plain loops, with MR_AVX2_CLONES (runtime/target_clones.h) on the hot
 * ones, and OpenBLAS through mr_cpu_gemm (backend_cpu.c). */
#ifndef MR_CPU_IMPL_H
#define MR_CPU_IMPL_H

#include "runtime/backend.h"
#include "runtime/dmem_impl.h"
#include "models/kernels.h"

/* The CPU's kernel table (kernels_cpu.c), in its backend ops. */
extern const mr_kernels mr_cpu_kernels;

/* The CPU GEMM (cblas_sgemm, row-major) on host pointers, for the kernels:
 * C (m x n) = alpha * op(A) op(B) + beta * C. */
void mr_cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* Each layer kind's kernels, mr_<kernels>_cpu of each line of
 * models/layer_kinds.def, in backends/cpu/<kernels>_cpu.c (a table two kinds
 * share is declared twice, which C allows). */
#define MR_LAYER_KIND(ENUM, section, kernels) extern const mr_layer_kernels mr_##kernels##_cpu;
#include "models/layer_kinds.def"
#undef MR_LAYER_KIND

extern const mr_loss_kernels mr_loss_cpu;           /* loss_cpu.c */
extern const mr_optimizer_kernels mr_optimizer_cpu; /* optimizer_cpu.c */
extern const mr_input_kernels mr_input_cpu;         /* synthetic_cpu.c */

/* y = act(x) over `rows` rows of width `width` (softmax is per row; the
 * others ignore the rows), in one pass; y may be x (in place). */
void mr_cpu_activation_forward(mr_activation act, const float *x, float *y, int rows, int width);
/* dx (rows, width) = dy * d act / d x, expressed through the output y;
 * dx may be dy (in place). For gelu, swish and silu a copy: their factor
 * comes through the input (mr_cpu_activation_backward_x). */
void mr_cpu_activation_backward(mr_activation act, const float *y, const float *dy, float *dx,
                                int rows, int width);
/* dx (n) = dy * d act / d x through the input x, for the activations that
 * need it (mr_activation_needs_input: gelu, swish, silu); dx may be dy. */
void mr_cpu_activation_backward_x(mr_activation act, const float *x, const float *dy, float *dx,
                                  int64_t n);

#endif
