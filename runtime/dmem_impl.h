/* dmem_impl.h: device memory as raw pointers, for the implementations of
 * a device kind only (dmem.h says which files those are; the CPU tests
 * include it too, since CPU device memory is host memory).
 *
 * On the CPU a device pointer is a host pointer, and a CPU kernel turns its
 * arguments into float * once at the top. A CUDA kernel (.cu) turns them
 * into the float * that device code takes the same way. Nothing else may
 * include this header: model.c, keras.c, strategies/ and launch/ go through
 * the backend (runtime/backend.h). */
#ifndef MR_DMEM_IMPL_H
#define MR_DMEM_IMPL_H

#include "runtime/dmem.h"

static inline float *mr_dfloat_ptr(mr_dfloat *p) {
    return (float *)p;
}
static inline const float *mr_dfloat_cptr(const mr_dfloat *p) {
    return (const float *)p;
}
/* The other way: raw memory that a device implementation owns (scratch,
 * a test's arrays on the CPU) handed on as device memory. */
static inline mr_dfloat *mr_dfloat_of(float *p) {
    return (mr_dfloat *)p;
}
static inline const mr_dfloat *mr_dfloat_cof(const float *p) {
    return (const mr_dfloat *)p;
}

#endif
