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

extern const mr_layer_kernels mr_flatten_cpu;       /* flatten_cpu.c */
extern const mr_layer_kernels mr_dense_cpu;         /* dense_cpu.c */
extern const mr_layer_kernels mr_activation_cpu;    /* activation_cpu.c */
extern const mr_layer_kernels mr_conv2d_cpu;        /* conv2d_cpu.c */
extern const mr_layer_kernels mr_pool_cpu;          /* pool_cpu.c: max and average */
extern const mr_layer_kernels mr_dropout_cpu;       /* dropout_cpu.c */
extern const mr_layer_kernels mr_batchnorm_cpu;     /* batchnorm_cpu.c */
extern const mr_layer_kernels mr_add_cpu;           /* add_cpu.c */
extern const mr_layer_kernels mr_concatenate_cpu;   /* concatenate_cpu.c */
extern const mr_layer_kernels mr_depthwise_cpu;     /* depthwise_cpu.c */
extern const mr_layer_kernels mr_globalavgpool_cpu; /* globalavgpool_cpu.c */
extern const mr_layer_kernels mr_zeropad_cpu;       /* zeropad_cpu.c */
extern const mr_layer_kernels mr_layernorm_cpu;     /* layernorm_cpu.c */
extern const mr_layer_kernels mr_rescaling_cpu;     /* rescaling_cpu.c */
extern const mr_layer_kernels mr_normalization_cpu; /* normalization_cpu.c */

/* The kinds of Keras's image models' own layers. */
extern const mr_layer_kernels mr_relu_cpu;           /* relu_cpu.c */
extern const mr_layer_kernels mr_globalmaxpool_cpu;  /* globalmaxpool_cpu.c */
extern const mr_layer_kernels mr_spatialdropout_cpu; /* spatialdropout_cpu.c */

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
