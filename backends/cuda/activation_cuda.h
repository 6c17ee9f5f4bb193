/* activation_cuda.h: the activations on a GPU, for the CUDA kernels that
 * apply one after their own compute (dense_cuda.cu, conv2d_cuda.cu) and for
 * the [activation] layer (activation_cuda.cu, which defines them). The
 * CUDA twins of cpu_impl.h's mr_cpu_activation_forward/backward: the
 * same formulas (runtime/elementwise.h), queued on the context's compute
 * stream. y and dy are device memory (float *: dmem_impl.h). */
#ifndef MR_ACTIVATION_CUDA_H
#define MR_ACTIVATION_CUDA_H

#include "runtime/backend.h"
#include "runtime/error.h"
#include "models/config.h"
#include "runtime/hd.h"

#ifdef __cplusplus /* the .cu files (nvcc, or C++ under emulation) */
#include "runtime/elementwise.h"

/* d act / d x through the output y, for the activations that need only y
 * (relu, sigmoid, elu, leaky relu, tanh: not softmax, linear, nor those of
 * mr_activation_needs_input): one formula for every kernel that applies
 * it, so they give the same bits. */
MR_HD static inline float mr_cuda_act_grad_y(mr_activation act, float y) {
    return act == MR_ACTIVATION_RELU         ? mr_relu_grad(y)
           : act == MR_ACTIVATION_SIGMOID    ? mr_sigmoid_grad(y)
           : act == MR_ACTIVATION_ELU        ? mr_elu_grad(y)
           : act == MR_ACTIVATION_LEAKY_RELU ? mr_leaky_relu_grad(y)
                                             : mr_tanh_grad(y);
}
#endif

MR_C_BEGIN

/* Applies `act` in place over y (rows, width): softmax per row (max
 * subtracted), the others element by element. A launch failure is
 * returned with its message in err. */
mr_status mr_cuda_activation_forward(mr_backend *be, mr_activation act, float *y, int rows,
                                     int width, mr_error *err);
/* The same after adding bias (width) to every row, in the same pass
 * (bias NULL: none): the output of Dense and Conv2D after their products. */
mr_status mr_cuda_bias_activation_forward(mr_backend *be, mr_activation act, float *y,
                                          const float *bias, int rows, int width, mr_error *err);
/* y (rows, width) = act(x + bias), x read and y written in one pass (y
 * may be x; bias NULL: none), and pre = x + bias as well where pre is not
 * NULL (the z that gelu's and swish's backward read): the [activation]
 * layer's output, and Conv2D's with its z. The same bits as the in-place
 * calls above on a copy of x. Linear without bias or pre is the identity:
 * a copy where y is not x. */
mr_status mr_cuda_activation_forward_to(mr_backend *be, mr_activation act, const float *x, float *y,
                                        float *pre, const float *bias, int rows, int width,
                                        mr_error *err);
/* dy (rows, width) *= d act / d x, expressed through the output y
 * (softmax: dx_j = y_j (dy_j - sum_k dy_k y_k), per row). */
mr_status mr_cuda_activation_backward(mr_backend *be, mr_activation act, const float *y, float *dy,
                                      int rows, int width, mr_error *err);
/* dx (rows, width) = dy * d act / d x through y, in one pass (dx may be
 * dy: the call above); linear: a copy where dx is not dy. */
mr_status mr_cuda_activation_backward_to(mr_backend *be, mr_activation act, const float *y,
                                         const float *dy, float *dx, int rows, int width,
                                         mr_error *err);
/* dy (n) *= d act / d x through the input x, for the activations that
 * need it (mr_activation_needs_input: gelu, swish, silu). */
mr_status mr_cuda_activation_backward_x(mr_backend *be, mr_activation act, const float *x,
                                        float *dy, size_t n, mr_error *err);
/* dx (n) = dy * d act / d x through x, in one pass (dx may be dy). */
mr_status mr_cuda_activation_backward_x_to(mr_backend *be, mr_activation act, const float *x,
                                           const float *dy, float *dx, size_t n, mr_error *err);

MR_C_END

#endif
