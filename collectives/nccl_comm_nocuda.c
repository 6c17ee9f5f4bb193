/* nccl_comm_nocuda.c: the NCCL communicator's place in a build without CUDA
 * (nccl_comm.h). meson compiles this file where a CUDA build compiles
 * nccl_comm.c, so no source needs an #ifdef: asking for it is a clear
 * error, as asking for a CUDA context is (runtime/backend_nocuda.c). */
#include "nccl_comm.h"

mr_status mr_comm_nccl_create(mr_backend **be, int local, mr_job *job, double timeout_s,
                              mr_comm **out, mr_error *err) {
    (void)be, (void)local, (void)job, (void)timeout_s;
    *out = NULL;
    return mr_error_set(err, MR_ERR_UNSUPPORTED, "this build has no CUDA backend (NCCL)");
}
