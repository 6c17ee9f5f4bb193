/* kernels.c: the kernels of a device kind (kernels.h). */
#include "kernels.h"

const mr_kernels *mr_kernels_for(mr_device_kind kind) {
    switch (kind) {
    case MR_DEVICE_CPU:
        return mr_kernels_cpu();
    case MR_DEVICE_CUDA:
        return mr_kernels_cuda();
    }
    return NULL;
}
