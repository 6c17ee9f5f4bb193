/* hd.h: MR_HD marks a function that runs on the host and on the device:
 * __host__ __device__ under nvcc, nothing in C. Such functions are
 * `MR_HD static inline` in headers (elementwise.h, rng.h), so one source
 * serves the CPU loops and the CUDA kernels, and the CPU tests exercise
 * the very code the GPU runs. */
#ifndef MR_HD_H
#define MR_HD_H

#ifdef __CUDACC__
#define MR_HD __host__ __device__
#else
#define MR_HD
#endif

/* MR_C_BEGIN / MR_C_END wrap the declarations of a header that .cu files
 * include (compiled as C++ by nvcc), so they keep C linkage: the functions
 * are defined in C files. Placed after the header's own #includes, since
 * Random123 and the CUDA headers hold C++ templates under nvcc. */
#ifdef __cplusplus
#define MR_C_BEGIN extern "C" {
#define MR_C_END   }
#else
#define MR_C_BEGIN
#define MR_C_END
#endif

#endif
