/* cublas_lazy.c: cuBLAS, loaded when the first CUDA context is made
 * (cuda_impl.h, mr_cublas_load) instead of linked. Linking it costs every
 * process about 210 MB of resident memory as it starts (libcublasLt's
 * load: a binary linked against nothing but libcublas.so.13 peaks at 217
 * MB on this machine, against 1.5 MB with libcudart alone), so a CUDA build
 * would pay it on CPU runs and for --help too. The CUDA runtime, cuDNN and
 * NCCL stay linked: a few MB each.
 * Relies on: cuBLAS 12+ (cublas_v2.h; the _v2 symbols behind its macros),
 * glibc's dlopen. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "backends/cuda/cuda_impl.h"

/* "13" from 13 */
#define MR_STR_(x)    #x
#define MR_STR(x)     MR_STR_(x)
#define CUBLAS_SONAME "libcublas.so." MR_STR(CUBLAS_VER_MAJOR)

mr_cublas_api mr_cublas;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512]; /* "" once loaded */

/* The toolkit's own copy first (MR_CUDA_LIBDIR, meson's), then the
 * loader's search (LD_LIBRARY_PATH, ld.so.cache). */
static void load(void) {
    void *h = dlopen(MR_CUDA_LIBDIR "/" CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) h = dlopen(CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(failure, sizeof failure, "cannot load cuBLAS: %s", dlerror());
        return;
    }
    struct {
        void **slot;
        const char *name;
    } want[] = {
        {(void **)&mr_cublas.create, "cublasCreate_v2"},
        {(void **)&mr_cublas.destroy, "cublasDestroy_v2"},
        {(void **)&mr_cublas.set_stream, "cublasSetStream_v2"},
        {(void **)&mr_cublas.set_math_mode, "cublasSetMathMode"},
        {(void **)&mr_cublas.set_workspace, "cublasSetWorkspace_v2"},
        {(void **)&mr_cublas.sscal, "cublasSscal_v2"},
        {(void **)&mr_cublas.sgemm, "cublasSgemm_v2"},
        {(void **)&mr_cublas.status_string, "cublasGetStatusString"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        *want[i].slot = dlsym(h, want[i].name);
        if (*want[i].slot == NULL) {
            snprintf(failure, sizeof failure, "%s has no %s", CUBLAS_SONAME, want[i].name);
            return; /* the handle stays open: nothing of it is used */
        }
    }
}

mr_status mr_cublas_load(mr_error *err) {
    pthread_once(&once, load);
    if (failure[0] != '\0') return mr_error_set(err, MR_ERR_UNSUPPORTED, "%s", failure);
    return MR_OK;
}
