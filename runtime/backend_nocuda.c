/* backend_nocuda.c: the CUDA backend's place in a build without CUDA. meson
 * compiles this file where a CUDA build compiles backend_cuda.cu, so no
 * source needs an #ifdef: asking for a CUDA context is a clear error. */
#include "backend_impl.h"

mr_status mr_backend_cuda_create(int ordinal, mr_backend **out, mr_error *err) {
    *out = NULL;
    return mr_error_set(err, MR_ERR_UNSUPPORTED,
                        "cuda:%d: no CUDA backend in this build (mirrored was built without CUDA)",
                        ordinal);
}
