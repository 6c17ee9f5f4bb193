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

/* y (n / width, width) = act(x + bias) element by element (bias NULL:
 * none; softmax and linear: the sum only, softmax follows per row). y may
 * be x (Dense and Conv2D: in place); pre, where not NULL, keeps x + bias
 * (n) as well, the z that gelu's and swish's backward read. */
__global__ static void act_forward_kernel(mr_activation act, const float *x, float *y, float *pre,
                                          const float *__restrict__ bias, size_t n, int width) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = bias != NULL ? x[i] + bias[i % (size_t)width] : x[i];
        if (pre != NULL) pre[i] = v;
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

/* dx (n) = dy * act'(y), through the output (not softmax); dx may be dy */
__global__ static void act_backward_kernel(mr_activation act, const float *__restrict__ y,
                                           const float *dy, float *dx, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        dx[i] = dy[i] * mr_cuda_act_grad_y(act, y[i]);
    }
}

/* dx (n) = dy * act'(x), through the input (gelu, swish, silu); dx may be dy */
__global__ static void act_backward_x_kernel(mr_activation act, const float *__restrict__ x,
                                             const float *dy, float *dx, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dx[i] = dy[i] * (act == MR_ACTIVATION_GELU ? mr_gelu_grad_x(x[i]) : mr_swish_grad_x(x[i]));
}

/* y (rows, width): each row becomes softmax(row of x) (elementwise.h's
 * mr_softmax_row, the CPU loop's code, over the row copied into y first
 * where y is not x); one thread per row */
__global__ static void softmax_forward_kernel(const float *x, float *y, int rows, int width) {
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
        float *yr = y + (int64_t)r * width;
        if (x != y)
            for (int j = 0; j < width; j++)
                yr[j] = x[(int64_t)r * width + j];
        mr_softmax_row(yr, width);
    }
}

/* dx (rows, width) = dy through the softmax of output y, per row (dy's
 * row copied into dx first where dx is not dy) */
__global__ static void softmax_backward_kernel(const float *__restrict__ y, const float *dy,
                                               float *dx, int rows, int width) {
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
        float *dxr = dx + (int64_t)r * width;
        if (dx != dy)
            for (int j = 0; j < width; j++)
                dxr[j] = dy[(int64_t)r * width + j];
        mr_softmax_grad_row(y + (int64_t)r * width, dxr, width);
    }
}

mr_status mr_cuda_activation_forward_to(mr_backend *be, mr_activation act, const float *x, float *y,
                                        float *pre, const float *bias, int rows, int width,
                                        mr_error *err) {
    size_t n = (size_t)rows * (size_t)width;
    if (n == 0) return MR_OK;
    cudaStream_t s = mr_cuda(be)->stream;
    const int softmax = act == MR_ACTIVATION_SOFTMAX;
    if (act == MR_ACTIVATION_LINEAR && bias == NULL && pre == NULL) {
        /* the identity (a linear [activation], or one whose softmax the
         * loss took): the one case that is a copy, as the model cannot
         * hand x's buffer on as y */
        if (x != y)
            MR_CUDA_TRY(be, err,
                        cudaMemcpyAsync(y, x, sizeof(float) * n, cudaMemcpyDeviceToDevice, s));
        return MR_OK;
    }
    /* the elementwise pass, unless a softmax without bias reads x itself */
    if (bias != NULL || pre != NULL || !softmax) {
        MR_CUDA_LAUNCH(act_forward_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, s, act, x, y, pre,
                       bias, n, width);
        mr_cuda_launched(be, err, "act_forward_kernel");
        x = y; /* the softmax follows on the sum, in place */
    }
    if (softmax) {
        MR_CUDA_LAUNCH(softmax_forward_kernel, mr_cuda_blocks((size_t)rows), MR_CUDA_THREADS, s, x,
                       y, rows, width);
        mr_cuda_launched(be, err, "softmax_forward_kernel");
    }
    return MR_OK;
}

mr_status mr_cuda_bias_activation_forward(mr_backend *be, mr_activation act, float *y,
                                          const float *bias, int rows, int width, mr_error *err) {
    return mr_cuda_activation_forward_to(be, act, y, y, NULL, bias, rows, width, err);
}

mr_status mr_cuda_activation_forward(mr_backend *be, mr_activation act, float *y, int rows,
                                     int width, mr_error *err) {
    return mr_cuda_activation_forward_to(be, act, y, y, NULL, NULL, rows, width, err);
}

mr_status mr_cuda_activation_backward_to(mr_backend *be, mr_activation act, const float *y,
                                         const float *dy, float *dx, int rows, int width,
                                         mr_error *err) {
    size_t n = (size_t)rows * (size_t)width;
    if (n == 0) return MR_OK;
    cudaStream_t s = mr_cuda(be)->stream;
    if (act == MR_ACTIVATION_LINEAR) {
        /* the identity: a copy where dx is not dy (as the forward's) */
        if (dx != dy)
            MR_CUDA_TRY(be, err,
                        cudaMemcpyAsync(dx, dy, sizeof(float) * n, cudaMemcpyDeviceToDevice, s));
    } else if (act == MR_ACTIVATION_SOFTMAX) {
        MR_CUDA_LAUNCH(softmax_backward_kernel, mr_cuda_blocks((size_t)rows), MR_CUDA_THREADS, s, y,
                       dy, dx, rows, width);
        mr_cuda_launched(be, err, "softmax_backward_kernel");
    } else {
        MR_CUDA_LAUNCH(act_backward_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, s, act, y, dy, dx,
                       n);
        mr_cuda_launched(be, err, "act_backward_kernel");
    }
    return MR_OK;
}

mr_status mr_cuda_activation_backward(mr_backend *be, mr_activation act, const float *y, float *dy,
                                      int rows, int width, mr_error *err) {
    return mr_cuda_activation_backward_to(be, act, y, dy, dy, rows, width, err);
}

mr_status mr_cuda_activation_backward_x_to(mr_backend *be, mr_activation act, const float *x,
                                           const float *dy, float *dx, size_t n, mr_error *err) {
    if (n == 0) return MR_OK;
    MR_CUDA_LAUNCH(act_backward_x_kernel, mr_cuda_blocks(n), MR_CUDA_THREADS, mr_cuda(be)->stream,
                   act, x, dy, dx, n);
    mr_cuda_launched(be, err, "act_backward_x_kernel");
    return MR_OK;
}

mr_status mr_cuda_activation_backward_x(mr_backend *be, mr_activation act, const float *x,
                                        float *dy, size_t n, mr_error *err) {
    return mr_cuda_activation_backward_x_to(be, act, x, dy, dy, n, err);
}

static int last_axis(mr_shape s) {
    return s.d[s.rank - 1];
}

static mr_status act_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                             mr_dfloat *y) {
    int64_t n = batch * mr_shape_size(l->in);
    if (n == 0) return MR_OK;
    /* y (batch, in) = act(x), in one pass that writes y (no copy of x first) */
    int width = last_axis(l->in);
    return mr_cuda_activation_forward_to(run->be, mr_layer_activation(l), mr_dfloat_cptr(x),
                                         mr_dfloat_ptr(y), NULL, NULL, (int)(n / width), width,
                                         run->err);
}

static mr_status act_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                              const mr_dfloat *y, mr_dfloat *dy, mr_dfloat *dx) {
    if (dx == NULL) return MR_OK;
    int64_t n = batch * mr_shape_size(l->in);
    if (n == 0) return MR_OK;
    /* dx (batch, in) = dy * act', in one pass that writes dx */
    int width = last_axis(l->in);
    if (mr_activation_needs_input(mr_layer_activation(l)))
        return mr_cuda_activation_backward_x_to(run->be, mr_layer_activation(l), mr_dfloat_cptr(x),
                                                mr_dfloat_cptr(dy), mr_dfloat_ptr(dx), (size_t)n,
                                                run->err);
    return mr_cuda_activation_backward_to(run->be, mr_layer_activation(l), mr_dfloat_cptr(y),
                                          mr_dfloat_cptr(dy), mr_dfloat_ptr(dx), (int)(n / width),
                                          width, run->err);
}

const mr_layer_kernels mr_activation_cuda = {
    /* C++ (nvcc) wants every member named, in order */
    .setup = NULL,    .forward = act_forward, .backward = act_backward, .destroy = NULL,
    .describe = NULL, .fuses_relu = 0,        .device_order = NULL,
};
