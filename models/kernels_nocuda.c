/* kernels_nocuda.c: the CUDA kernels' place in a build without CUDA (see
 * kernels.h): there are none. meson builds kernels_cuda.cu instead where
 * CUDA is found. */
#include "kernels.h"

const mr_kernels *mr_kernels_cuda(void) {
    return NULL;
}
