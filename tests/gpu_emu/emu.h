// emu.h - internal C++ interface of the GPU emulator (tests/gpu_emu).
//
// The emulated CUDA runtime (cudart_emu.cc, libmr_emu_cudart) owns devices,
// device memory, streams (one FIFO worker thread each) and the per-thread
// last error. The cuBLAS, cuDNN and NCCL emulations are separate libraries
// linked against it; they use only this header to put work on a stream and
// to check pointers, so they behave like the real libraries: work is
// ordered on the caller's stream and errors surface through the runtime.
// Types come from the real NVIDIA headers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

// Enqueue a host task on stream s (the emulated device's FIFO worker), as a
// kernel launch does. Stream 0 is the current device's legacy default stream.
// The task runs after everything enqueued on s before it, on the stream's
// worker thread, with the worker's current device set to the stream's device.
void emu_enqueue(cudaStream_t s, std::function<void()> task);

// The device ordinal a pointer was allocated on, and the bytes from p to the
// end of its allocation; -1 if p is not device memory. bytes_left may be null.
int emu_device_of(const void *p, size_t *bytes_left);

// Record an error to be returned by the next cudaGetLastError of the calling
// thread.
void emu_set_last_error(cudaError_t e);

// ---- extensions (not needed by every client) ----

// Counts a library call that queues work on s (emu_counters.h), before its
// emu_enqueue.
enum class EmuLibrary { blas, blas_pool, dnn, nccl };
void emu_count_library(cudaStream_t s, EmuLibrary lib);

// The device a stream belongs to (stream 0: the calling thread's current
// device); -1 for an unknown stream handle.
int emu_stream_device(cudaStream_t s);

// True if p points into pinned host memory from cudaHostAlloc.
bool emu_is_pinned(const void *p);

// The number of emulated devices visible to this process
// (MIRRORED_EMULATED_GPUS, default 2, filtered by CUDA_VISIBLE_DEVICES).
int emu_device_count();

// From inside a task: the work failed (e.g. an access out of an allocation).
// Prints `what` to stderr and makes e a sticky error of the task's device,
// returned by the synchronising calls that follow (as a faulting kernel's
// error surfaces in the real runtime).
void emu_device_fault(cudaError_t e, const char *what);
