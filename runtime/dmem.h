/* dmem.h: device memory in the type system.
 *
 * A tensor's floats live where its replica's backend put them: host memory
 * on the CPU, GPU memory under CUDA. Code that runs on the host for every
 * device kind (model.c, the optimizer and loss dispatch, keras.c,
 * strategies/, launch/) must not read or write them; only the backend
 * implementations do: backends/cpu/backend_cpu.c, the CPU kernels
 * models/<layer>_cpu.c, loss_cpu.c, optimizer_cpu.c (later their .cu
 * siblings), and the communicators for CPU replicas (collectives/), which
 * see device memory as float * (runtime/dmem_impl.h, collectives/comm.h).
 *
 * The rule is in the type: `mr_dfloat *` points to float32 in device
 * memory. mr_dfloat is an incomplete type, never defined, so the compiler
 * rejects what host code must not do: dereference (*p, p[i]), pointer
 * arithmetic, or passing a host `float *` where device memory is expected
 * and back. A wrapper struct `{ float *p; }` would only make such a use
 * visible (p.p[i] compiles); a `typedef float mr_dfloat` would not even
 * do that. The pointer stays a plain pointer: NULL, comparisons and
 * offsets (mr_dfloat_at) cost nothing, so the CPU path is what it was.
 *
 * Host code reaches device memory through the backend (runtime/backend.h):
 * copies, and zero-copy host views where the backend's memory is host
 * memory (the CPU), so the CPU path never copies. */
#ifndef MR_DMEM_H
#define MR_DMEM_H

#include <stdint.h>

/* Float32 in a backend's memory; see above. Never defined. */
typedef struct mr_dfloat mr_dfloat;

/* p + i floats (device memory offsets are plain address arithmetic). */
static inline mr_dfloat *mr_dfloat_at(mr_dfloat *p, int64_t i) {
    return (mr_dfloat *)((float *)p + i);
}
static inline const mr_dfloat *mr_dfloat_at_c(const mr_dfloat *p, int64_t i) {
    return (const mr_dfloat *)((const float *)p + i);
}

#endif
