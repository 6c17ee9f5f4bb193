/* synthetic_cpu.c: a synthetic batch made by the CPU (models/kernels.h,
 * mr_input_kernels). The training loop fills a CPU replica's input from the
 * host copy of the examples (mr_dataset_fill: same bits, and no Philox per
 * byte); this is the reference that the GPU's kernel is tested against
 * (test_conformance.c), and what a CPU context that copies (the
 * conformance test's) runs.
 *   rows: (count) example ids -> x: (count, row) floats */
#include "backends/cpu/cpu_impl.h"
#include "runtime/rng.h"

static mr_status synthetic_cpu(mr_backend *be, mr_dfloat *x, const int64_t *rows, int count,
                               int64_t row, uint32_t k0, uint32_t k1, float scale, mr_error *err) {
    (void)be, (void)err;
    float *out = mr_dfloat_ptr(x);
    for (int b = 0; b < count; b++) {
        const int64_t base = rows[b] * row;
        for (int64_t j = 0; j < row; j++) /* mr_dataset_fill's (float)byte * scale */
            out[(int64_t)b * row + j] = (float)mr_synthetic_byte(k0, k1, base + j) * scale;
    }
    return MR_OK;
}

const mr_input_kernels mr_input_cpu = {.synthetic = synthetic_cpu};
