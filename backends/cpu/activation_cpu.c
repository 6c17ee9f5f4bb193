/* activation_cpu.c: activations on the CPU: the loops that Dense, Conv2D
 * and the stand-alone [activation] layer (activation.c) apply, over the
 * per-element math of runtime/elementwise.h, and that layer's kernels. */
#include <math.h>
#include <string.h>

#include "runtime/elementwise.h"
#include "runtime/target_clones.h"
#include "backends/cpu/cpu_impl.h"

MR_AVX2_CLONES void mr_cpu_activation_forward(mr_activation act, const float *x, float *y, int rows,
                                              int width) {
    int64_t n = (int64_t)rows * width;
    switch (act) {
    case MR_ACTIVATION_LINEAR:
        if (y != x) memcpy(y, x, sizeof(float) * (size_t)n);
        break;
    case MR_ACTIVATION_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = mr_relu(x[i]);
        break;
    case MR_ACTIVATION_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            y[i] = mr_sigmoid(x[i]);
        break;
    case MR_ACTIVATION_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = tanhf(x[i]);
        break;
    case MR_ACTIVATION_SOFTMAX:
        if (y != x) memcpy(y, x, sizeof(float) * (size_t)n);
        for (int r = 0; r < rows; r++)
            mr_softmax_row(y + (int64_t)r * width, width);
        break;
    case MR_ACTIVATION_ELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = mr_elu(x[i]);
        break;
    case MR_ACTIVATION_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = mr_leaky_relu(x[i]);
        break;
    case MR_ACTIVATION_GELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = mr_gelu(x[i]);
        break;
    case MR_ACTIVATION_SWISH:
    case MR_ACTIVATION_SILU:
        for (int64_t i = 0; i < n; i++)
            y[i] = mr_swish(x[i]);
        break;
    }
}

MR_AVX2_CLONES void mr_cpu_activation_backward(mr_activation act, const float *y, const float *dy,
                                               float *dx, int rows, int width) {
    int64_t n = (int64_t)rows * width;
    switch (act) {
    case MR_ACTIVATION_LINEAR:
    case MR_ACTIVATION_GELU:
    case MR_ACTIVATION_SWISH:
    case MR_ACTIVATION_SILU: /* the last three: through the input, mr_cpu_activation_backward_x */
        if (dx != dy) memcpy(dx, dy, sizeof(float) * (size_t)n);
        break;
    case MR_ACTIVATION_RELU:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * mr_relu_grad(y[i]);
        break;
    case MR_ACTIVATION_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * mr_sigmoid_grad(y[i]);
        break;
    case MR_ACTIVATION_TANH:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * mr_tanh_grad(y[i]);
        break;
    case MR_ACTIVATION_SOFTMAX:
        if (dx != dy) memcpy(dx, dy, sizeof(float) * (size_t)n);
        for (int r = 0; r < rows; r++)
            mr_softmax_grad_row(y + (int64_t)r * width, dx + (int64_t)r * width, width);
        break;
    case MR_ACTIVATION_ELU:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * mr_elu_grad(y[i]);
        break;
    case MR_ACTIVATION_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * mr_leaky_relu_grad(y[i]);
        break;
    }
}

MR_AVX2_CLONES void mr_cpu_activation_backward_x(mr_activation act, const float *x, const float *dy,
                                                 float *dx, int64_t n) {
    if (act == MR_ACTIVATION_GELU)
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * mr_gelu_grad_x(x[i]);
    else
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * mr_swish_grad_x(x[i]);
}

static int last_axis(mr_shape s) {
    return s.d[s.rank - 1];
}

static mr_status act_forward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                             mr_dfloat *yd) {
    (void)run;
    int64_t n = batch * mr_shape_size(l->in);
    mr_activation act = mr_layer_activation(l);
    int width = last_axis(l->in);
    /* one pass, x to y: no copy first */
    mr_cpu_activation_forward(act, mr_dfloat_cptr(x), mr_dfloat_ptr(yd), (int)(n / width), width);
    return MR_OK;
}

static mr_status act_backward(mr_layer *l, mr_exec_ctx *run, int batch, const mr_dfloat *x,
                              const mr_dfloat *y, mr_dfloat *dyd, mr_dfloat *dx) {
    (void)run;
    if (dx == NULL) return MR_OK;
    const float *dy = mr_dfloat_cptr(dyd);
    int64_t n = batch * mr_shape_size(l->in);
    mr_activation act = mr_layer_activation(l);
    int width = last_axis(l->in);
    /* one pass, dy to dx (dy is left as it was) */
    if (mr_activation_needs_input(act))
        mr_cpu_activation_backward_x(act, mr_dfloat_cptr(x), dy, mr_dfloat_ptr(dx), n);
    else
        mr_cpu_activation_backward(act, mr_dfloat_cptr(y), dy, mr_dfloat_ptr(dx), (int)(n / width),
                                   width);
    return MR_OK;
}

const mr_layer_kernels mr_activation_cpu = {
    .forward = act_forward,
    .backward = act_backward,
};
