/* activation_cuda.cu: activations on a GPU: the helpers of
 * activation_cuda.h that Dense and Conv2D apply after their products, and
 * the [activation] layer's kernels (activation.c says what the layer is;
 * activation_cpu.c is the reference). Element-wise activations are one
 * grid-stride pass over elementwise.h's math; softmax is one thread per
 * row, summing the row in the CPU's order.
 * Relies on: kernels_cuda.h (stream, launch checks), runtime/elementwise.h. */
#include "backends/cuda/activation_cuda.h"
#include "backends/cuda/kernels_cuda.h"
#include "runtime/elementwise.h"

/* y (n / width, width) = act(y + bias) element by element (bias NULL:
 * none; softmax and linear: the sum only, softmax follows per row) */
__global__ static void act_forward_kernel(mr_activation act, float *__restrict__ y,
                                          const float *__restrict__ bias, size_t n, int width) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = bias != NULL ? y[i] + bias[i % (size_t)width] : y[i];
        y[i] = act == MR_ACTIVATION_RELU                                   ? mr_relu(v)
               : act == MR_ACTIVATION_SIGMOID                              ? mr_sigmoid(v)
               : act == MR_ACTIVATION_TANH                                 ? tanhf(v)
               : act == MR_ACTIVATION_ELU                                  ? mr_elu(v)
               : act == MR_ACTIVATION_LEAKY_RELU                           ? mr_leaky_relu(v)
               : act == MR_ACTIVATION_GELU                                 ? mr_gelu(v)
               : (act == MR_ACTIVATION_SWISH || act == MR_ACTIVATION_SILU) ? mr_swish(v)
                                                                           : v;
    }
}

/* dy (n) *= act'(y), through the output (not softmax) */
__global__ static void act_backward_kernel(mr_activation act, const float *__restrict__ y,
                                           float *__restrict__ dy, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = y[i];
        dy[i] *= act == MR_ACTIVATION_RELU         ? mr_relu_grad(v)
                 : act == MR_ACTIVATION_SIGMOID    ? mr_sigmoid_grad(v)
                 : act == MR_ACTIVATION_ELU        ? mr_elu_grad(v)
                 : act == MR_ACTIVATION_LEAKY_RELU ? mr_leaky_relu_grad(v)
                                                   : mr_tanh_grad(v);
    }
}

/* dy (n) *= act'(x), through the input (gelu, swish, silu) */
__global__ static void act_backward_x_kernel(mr_activation act, const float *__restrict__ x,
                                             float *__restrict__ dy, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dy[i] *= act == MR_ACTIVATION_GELU ? mr_gelu_grad_x(x[i]) : mr_swish_grad_x(x[i]);
}

/* y (rows, width): each row becomes softmax(row) (elementwise.h's
 * mr_softmax_row, the CPU loop's code); one thread per row */
__global__ static void softmax_forward_kernel(float *__restrict__ y, int rows, int width) {
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x)
        mr_softmax_row(y + (int64_t)r * width, width);
}

/* dy (rows, width) through the softmax of output y, per row */
__global__ static void softmax_backward_kernel(const float *__restrict__ y, float *__restrict__ dy,
                                               int rows, int width) {
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x)
        mr_softmax_grad_row(y + (int64_t)r * width, dy + (int64_t)r * width, width);
}

mr_status mr_cuda_bias_activation_forward(mr_backend *be, mr_activation act, float *y,
                                          const float *bias, int rows, int width, mr_error *err) {
    size_t n = (size_t)rows * (size_t)width;
    if (n == 0) return MR_OK;
    cudaStream_t s = mr_cuda(be)->stream;
    if (bias != NULL || (act != MR_ACTIVATION_LINEAR && act != MR_ACTIVATION_SOFTMAX)) {
        MR_CUDA_LAUNCH(act_forward_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, s, act, y, bias, n,
                       width);
        mr_cuda_launched(be, err, "act_forward_kernel");
    }
    if (act == MR_ACTIVATION_SOFTMAX) {
        MR_CUDA_LAUNCH(softmax_forward_kernel, mr_cuda_blocks((size_t)rows), MR_CUDA_THREADS, s, y,
                       rows, width);
        mr_cuda_launched(be, err, "softmax_forward_kernel");
    }
    return MR_OK;
}

mr_status mr_cuda_activation_forward(mr_backend *be, mr_activation act, float *y, int rows,
                                     int width, mr_error *err) {
    return mr_cuda_bias_activation_forward(be, act, y, NULL, rows, width, err);
}

mr_status mr_cuda_activation_backward(mr_backend *be, mr_activation act, const float *y, float *dy,
                                      int rows, int width, mr_error *err) {
    size_t n = (size_t)rows * (size_t)width;
    if (act == MR_ACTIVATION_LINEAR || n == 0) return MR_OK;
    cudaStream_t s = mr_cuda(be)->stream;
    if (act == MR_ACTIVATION_SOFTMAX) {
        MR_CUDA_LAUNCH(softmax_backward_kernel, mr_cuda_blocks((size_t)rows), MR_CUDA_THREADS, s, y,
                       dy, rows, width);
        mr_cuda_launched(be, err, "softmax_backward_kernel");
    } else {
        MR_CUDA_LAUNCH(act_backward_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, s, act, y, dy, n);
        mr_cuda_launched(be, err, "act_backward_kernel");
    }
    return MR_OK;
}

mr_status mr_cuda_activation_backward_x(mr_backend *be, mr_activation act, const float *x,
                                        float *dy, size_t n, mr_error *err) {
    if (n == 0) return MR_OK;
    MR_CUDA_LAUNCH(act_backward_x_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   act, x, dy, n);
    mr_cuda_launched(be, err, "act_backward_x_kernel");
    return MR_OK;
}

static int last_axis(mr_shape s) {
    return s.d[s.rank - 1];
}

static mr_status act_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                             mr_dfloat *yd) {
    mr_backend *be = run->be;
    float *y = mr_dfloat_ptr(yd);
    int64_t n = batch * mr_shape_size(l->in);
    if (n == 0) return MR_OK;
    /* y (batch, in) = x, then the activation in place */
    if (y != mr_dfloat_cptr(x))
        MR_CUDA_TRY(be, run->err,
                    cudaMemcpyAsync(y, mr_dfloat_cptr(x), sizeof(float) * (size_t)n,
                                    cudaMemcpyDeviceToDevice, mr_cuda(be)->stream));
    int width = last_axis(l->in);
    return mr_cuda_activation_forward(be, mr_layer_activation(l), y, (int)(n / width), width,
                                      run->err);
}

static mr_status act_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                              const mr_dfloat *y, mr_dfloat *dyd, mr_dfloat *dx) {
    if (dx == NULL) return MR_OK;
    mr_backend *be = run->be;
    float *dy = mr_dfloat_ptr(dyd);
    int64_t n = batch * mr_shape_size(l->in);
    if (n == 0) return MR_OK;
    /* dy (batch, in) becomes dL/dx in place (dy is the model's scratch), then to dx */
    int width = last_axis(l->in);
    if (mr_activation_needs_input(mr_layer_activation(l))) {
        MR_CHECK(mr_cuda_activation_backward_x(be, mr_layer_activation(l), mr_dfloat_cptr(x), dy,
                                               (size_t)n, run->err));
    } else {
        MR_CHECK(mr_cuda_activation_backward(be, mr_layer_activation(l), mr_dfloat_cptr(y), dy,
                                             (int)(n / width), width, run->err));
    }
    if (mr_dfloat_ptr(dx) != dy)
        MR_CUDA_TRY(be, run->err,
                    cudaMemcpyAsync(mr_dfloat_ptr(dx), dy, sizeof(float) * (size_t)n,
                                    cudaMemcpyDeviceToDevice, mr_cuda(be)->stream));
    return MR_OK;
}

const mr_layer_kernels mr_activation_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,   .forward = act_forward, .backward = act_backward,
    .destroy = NULL, .describe = NULL,       .fuses_relu = 0,
};
