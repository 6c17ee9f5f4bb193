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

#endif
