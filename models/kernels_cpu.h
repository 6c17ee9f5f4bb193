/* kernels_cpu.h: the CPU kernels of models/ (kernels.h): one table per
 * layer kind, the loss and the optimizer, each in models/<name>_cpu.c, and
 * the loops they share. CPU device memory is host memory: these files turn
 * their mr_dfloat * arguments into float * (runtime/tensor_impl.h) and run
 * plain loops, with MR_HOT (runtime/hot.h) on the hot ones, and OpenBLAS
 * through mr_cpu_gemm (runtime/backend_impl.h). Only kernels_cpu.c and the
 * *_cpu.c files include this header. */
#ifndef MR_KERNELS_CPU_H
#define MR_KERNELS_CPU_H

#include "../runtime/backend_impl.h"
#include "../runtime/tensor_impl.h"
#include "kernels.h"

extern const mr_layer_kernels mr_flatten_cpu;       /* flatten_cpu.c */
extern const mr_layer_kernels mr_dense_cpu;         /* dense_cpu.c */
extern const mr_layer_kernels mr_activation_cpu;    /* activation_cpu.c */
extern const mr_layer_kernels mr_conv2d_cpu;        /* conv2d_cpu.c */
extern const mr_layer_kernels mr_pool_cpu;          /* pool_cpu.c: max and average */
extern const mr_layer_kernels mr_dropout_cpu;       /* dropout_cpu.c */
extern const mr_layer_kernels mr_batchnorm_cpu;     /* batchnorm_cpu.c */
extern const mr_loss_kernels mr_loss_cpu;           /* loss_cpu.c */
extern const mr_optimizer_kernels mr_optimizer_cpu; /* optimizer_cpu.c */

/* Applies an activation in place over `rows` rows of width `width`
 * (softmax is per row; the others ignore the rows). */
void mr_cpu_activation_forward(mr_activation act, float *y, int rows, int width);
/* dy (rows, width) *= d act / d x, expressed through the output y. */
void mr_cpu_activation_backward(mr_activation act, const float *y, float *dy, int rows, int width);

#endif
