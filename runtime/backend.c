/* backend.c: the wrappers every caller of a backend context goes through
 * (backend.h). Device-independent: the host views are
 * the only place outside an implementation where device memory becomes a
 * host pointer, and only when the context says it is host memory. A
 * context is created by its device kind (backends/backends.h). */
#include "runtime/backend.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "runtime/dmem_impl.h"
#include "runtime/isolate.h"

void mr_backend_destroy(mr_backend *be) {
    if (be == NULL) return;
    mr_backend_free(be, be->scratch);
    be->scratch = NULL;
    be->ops->destroy(be);
}

void mr_backend_format(const mr_backend *be, char *buf, size_t n) {
    snprintf(buf, n, "%s:%d", be->ops->name, be->ordinal);
}

void *mr_backend_alloc(mr_backend *be, size_t bytes) {
    return be->ops->alloc(be, bytes);
}

mr_dfloat *mr_backend_alloc_floats(mr_backend *be, size_t n) {
    return be->ops->alloc(be, sizeof(float) * n);
}

void mr_backend_free(mr_backend *be, void *p) {
    if (p != NULL) be->ops->free(be, p);
}

void *mr_backend_alloc_host(mr_backend *be, size_t bytes) {
    return be->ops->alloc_host(be, bytes);
}

void mr_backend_free_host(mr_backend *be, void *p) {
    if (p != NULL) be->ops->free_host(be, p);
}

mr_status mr_backend_to_device(mr_backend *be, void *dst, const void *src, size_t bytes,
                               mr_error *err) {
    return be->ops->to_device(be, dst, src, bytes, err);
}

mr_status mr_backend_to_host(mr_backend *be, void *dst, const void *src, size_t bytes,
                             mr_error *err) {
    return be->ops->to_host(be, dst, src, bytes, err);
}

mr_status mr_backend_upload(mr_backend *be, void *dst, const void *src, size_t bytes,
                            mr_error *err) {
    if (be->ops->upload == NULL) return be->ops->to_device(be, dst, src, bytes, err);
    return be->ops->upload(be, dst, src, bytes, err);
}

mr_status mr_backend_zero(mr_backend *be, void *dst, size_t bytes, mr_error *err) {
    return be->ops->zero(be, dst, bytes, err);
}

mr_status mr_backend_scale(mr_backend *be, mr_dfloat *x, size_t n, float alpha, mr_error *err) {
    return be->ops->scale(be, x, n, alpha, err);
}

mr_status mr_gemm(mr_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const mr_dfloat *a, int lda, const mr_dfloat *b, int ldb, float beta,
                  mr_dfloat *c, int ldc, mr_error *err) {
    return be->ops->gemm(be, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, err);
}

float *mr_backend_host_view(const mr_backend *be, mr_dfloat *p) {
    return be->host_memory ? mr_dfloat_ptr(p) : NULL;
}

const float *mr_backend_host_cview(const mr_backend *be, const mr_dfloat *p) {
    return be->host_memory ? mr_dfloat_cptr(p) : NULL;
}

mr_status mr_backend_read(mr_backend *be, const mr_dfloat *p, size_t n, float *staging,
                          const float **host, mr_error *err) {
    const float *view = mr_backend_host_cview(be, p);
    if (view != NULL) {
        *host = view;
        return MR_OK;
    }
    *host = staging;
    if (mr_isolate_in_child()) { /* no device there: zeros (mr_isolate_in_child) */
        memset(staging, 0, sizeof(float) * n);
        return MR_OK;
    }
    return mr_backend_to_host(be, staging, p, sizeof(float) * n, err);
}

mr_status mr_backend_write(mr_backend *be, mr_dfloat *p, const float *host, size_t n,
                           mr_error *err) {
    if (host == mr_backend_host_view(be, p)) return MR_OK; /* filled in place */
    if (mr_isolate_in_child()) return MR_OK;               /* no device there */
    return mr_backend_to_device(be, p, host, sizeof(float) * n, err);
}

mr_status mr_backend_write_queued(mr_backend *be, mr_dfloat *p, const float *host, size_t n,
                                  mr_error *err) {
    if (host == mr_backend_host_view(be, p)) return MR_OK; /* filled in place */
    if (mr_isolate_in_child()) return MR_OK;               /* no device there */
    if (be->ops->queue_to_device == NULL)
        return mr_backend_to_device(be, p, host, sizeof(float) * n, err);
    return be->ops->queue_to_device(be, p, host, sizeof(float) * n, err);
}

mr_status mr_backend_reserve_scratch(mr_backend *be, size_t n, mr_error *err) {
    if (be->scratch != NULL && n <= be->scratch_floats) return MR_OK;
    mr_backend_free(be, be->scratch);
    be->scratch_floats = 0;
    be->scratch = mr_backend_alloc_floats(be, n > 0 ? n : 1);
    if (be->scratch == NULL) {
        char dev[32];
        mr_backend_format(be, dev, sizeof dev);
        return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory for %zu floats of scratch", dev,
                            n);
    }
    be->scratch_floats = n;
    return MR_OK;
}

mr_dfloat *mr_backend_scratch(const mr_backend *be) {
    return be->scratch;
}

void mr_backend_set_threads(mr_backend *be, int threads) {
    if (be->ops->set_threads != NULL) be->ops->set_threads(be, threads);
}

mr_status mr_backend_enter(mr_backend *be, mr_error *err) {
    return be->ops->enter != NULL ? be->ops->enter(be, err) : MR_OK;
}

mr_status mr_backend_memory(mr_backend *be, size_t *used, size_t *total, mr_error *err) {
    *used = *total = 0;
    return be->ops->memory != NULL ? be->ops->memory(be, used, total, err) : MR_OK;
}

int mr_backend_has_marks(const mr_backend *be) {
    return be->ops->marks_reserve != NULL && be->ops->mark != NULL && be->ops->mark_seconds != NULL;
}

mr_status mr_backend_marks_reserve(mr_backend *be, int n, mr_error *err) {
    if (!mr_backend_has_marks(be))
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "%s: no device-time marks", be->ops->name);
    return be->ops->marks_reserve(be, n, err);
}

mr_status mr_backend_mark(mr_backend *be, int i, mr_error *err) {
    return be->ops->mark(be, i, err);
}

mr_status mr_backend_mark_seconds(mr_backend *be, int i, int j, double *s, mr_error *err) {
    return be->ops->mark_seconds(be, i, j, s, err);
}

int mr_cpu_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    return 1;
}

const mr_graph_ops *mr_backend_graphs(const mr_backend *be) {
    return be->ops->graphs;
}
