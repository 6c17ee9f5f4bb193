/* gradcheck.h: finite-difference gradient checks for layers and losses.
 *
 * For a layer y = f(x; w) we take the scalar L = sum_i r_i * y_i with fixed
 * random r, so dL/dy = r, and compare the layer's backward (dL/dx and the
 * weight gradients) with central differences (L(v + h) - L(v - h)) / 2h of
 * every input and weight element. L is accumulated in double; the forward is
 * float, so the difference quotient carries a rounding error of about
 * eps_float * |L| / h: with h = 1e-3 and |L| ~ 10 that is ~1e-3 absolute at
 * worst (typically far less, the rounding errors being random), and the
 * truncation error h^2 |f'''| / 6 is ~1e-7. Elements on a kink (where the
 * two one-sided slopes differ: ReLU at 0, a max tie) are skipped and
 * counted; with h = 1e-3 that is rare (about 0.1% of ReLU inputs). */
#ifndef MR_GRADCHECK_H
#define MR_GRADCHECK_H

#include "models/layer.h"

typedef struct gc_layer_result {
    /* max |numeric - analytic| / max(1, max |analytic|) over each group */
    double err_input;
    double err_weights;
    int64_t checked; /* elements compared */
    int64_t skipped; /* elements on a kink, not compared */
} gc_layer_result;

/* Builds a layer of cfg->kind on input shape `in`, fills inputs and weights
 * from the seed (uniform [-1, 1], BN gamma around 1), and checks it at the
 * given batch size in training mode. Returns MR_OK or the setup's error. */
mr_status gc_check_layer(const mr_layer_cfg *cfg, mr_shape in, int batch, uint64_t seed,
                         gc_layer_result *res, mr_error *err);

/* A default-filled layer cfg of a kind (as if its section had only defaults). */
mr_layer_cfg gc_layer_cfg(mr_layer_kind kind);

/* A layer's CPU kernels on the test's host arrays: CPU device memory is
 * host memory, so these wrap the arrays as device pointers
 * (runtime/dmem_impl.h) and call the mr_layer_* wrappers, which dispatch
 * to the kernels of the test's CPU context (tu_cpu_backend). */
mr_status gc_setup(mr_layer *l, int max_batch, const char *file, mr_error *err);
mr_status gc_init(mr_layer *l, uint64_t seed);
mr_status gc_forward(mr_layer *l, mr_exec_ctx *run, int batch, const float *x, float *y);
mr_status gc_backward(mr_layer *l, mr_exec_ctx *run, int batch, const float *x, const float *y,
                      float *dy, float *dx);
/* Host arrays as a layer's weight i (grad may be NULL), and as scratch. */
void gc_weight(mr_layer *l, int i, float *data, float *grad);
mr_dfloat *gc_dev(float *p);

#endif
