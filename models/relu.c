/* relu.c: Keras's ReLU layer, (B, ...) -> (B, ...), element by element
 * (runtime/elementwise.h, mr_relu_layer, has the formula both devices run):
 *   y = min(x, max_value)                 x > threshold
 *   y = negative_slope * (x - threshold)  otherwise
 * max_value < 0 is Keras's None (no maximum); ReLU(max_value=6) is
 * MobileNet's ReLU6. The kernels are backends/cpu/relu_cpu.c and
 * backends/cuda/relu_cuda.cu. */
#include "models/layer.h"
#include "models/keras.h"
#include "runtime/strbuf.h"

static mr_status relu_setup(mr_layer *l, int max_batch, const char *file, mr_error *err) {
    (void)max_batch;
    const float mx = l->cfg->max_value;
    if (mx < 0.0f && mx != -1.0f)
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [relu] max_value %g: give one of at least 0, or -1 (None) for "
                            "none",
                            file, l->cfg->line, (double)mx);
    l->out = l->in;
    return MR_OK;
}

/* Keras's ReLU config keys, in its order. */
static void relu_keras_config(const mr_layer *l, mr_sb *b) {
    mr_sb_printf(b, ", \"max_value\": ");
    if (l->cfg->max_value < 0.0f)
        mr_sb_printf(b, "null");
    else
        mr_sb_float(b, l->cfg->max_value);
    mr_sb_printf(b, ", \"negative_slope\": ");
    mr_sb_float(b, l->cfg->negative_slope);
    mr_sb_printf(b, ", \"threshold\": ");
    mr_sb_float(b, l->cfg->threshold);
}

const mr_layer_ops mr_relu_ops = {
    .class_name = "ReLU",
    .keras_name = "re_lu",
    .keras_config = relu_keras_config,
    .setup = relu_setup,
};
