// emu_block.h - the threads of one emulated thread block, cooperating
// (emu_block.cc, part of libmr_emu_cudart).
//
// A block's threads run on the stream's worker thread, one after another,
// until one of them waits at a barrier (__syncthreads) or a warp exchange
// (__shfl_*_sync, __syncwarp). From then on the block's threads are fibers
// (each with its own stack) that switch at those points: a thread waiting at
// a barrier resumes once every thread it waits for has arrived there or has
// returned, as on hardware ("__syncthreads() waits until all threads in the
// thread block have reached this point", CUDA C++ Programming Guide, 10.6).
// A kernel without a barrier never leaves the fast path.
// Relies on: ucontext (makecontext/swapcontext), mmap'ed stacks with a
// guard page, the ASan and TSan fiber annotations when built with them.
#pragma once

#include <cstdint>

// How a launch runs one thread of a block: index(ctx, t) sets the built-in
// index variables of thread t (linear index in the block) on the calling
// OS thread; run(ctx, t) sets them and runs the kernel body for thread t.
struct EmuBlockFns {
    void (*index)(void *ctx, unsigned t);
    void (*run)(void *ctx, unsigned t);
    void *ctx;
};

// Runs the nthreads threads (<= 1024) of one block to completion.
void emu_block_run(const EmuBlockFns &fns, unsigned nthreads);

// __syncthreads(): waits for every thread of the calling block.
void emu_block_barrier();

// __syncwarp() and the shuffles' meeting point: waits for every thread of
// the caller's warp (32 consecutive linear indices) that has not returned.
void emu_warp_barrier();

// The per-block scratch the shuffles exchange values through: one 64-bit
// slot per thread of the block (1024), valid on the block's worker thread.
uint64_t *emu_block_slots();

// The calling thread's linear index in its block.
unsigned emu_block_thread();
