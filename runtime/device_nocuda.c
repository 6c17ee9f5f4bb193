/* device_nocuda.c: GPU discovery in a build without CUDA (device.h): none,
 * and the reason says so. meson builds device_cuda.c instead where the
 * CUDA toolkit is found. */
#include "device.h"

#include <stdio.h>

static const mr_gpu_list none = {
    .count = 0,
    .reason =
        "this build has no CUDA backend (meson setup found no CUDA toolkit, or -Dcuda=disabled)",
};

const mr_gpu_list *mr_gpu_discover(void) {
    return &none;
}
