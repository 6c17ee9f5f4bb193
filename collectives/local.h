/* local.h: the communicator for replicas that are threads of one process.
 *
 * Shared memory, no staging buffer: each rank publishes its buffer, then an
 * all-reduce is a reduce-scatter in which rank r sums slice r of every rank's
 * buffer, in rank order 0..size-1, and pushes the sum into slice r of every
 * buffer (the all-gather done by the slice's owner, not pulled by the
 * others). Threads meet by spinning on atomics for a moment, then blocking
 * on a futex (collectives/local.c), not on pthread barriers: a pthread
 * barrier round costs tens of microseconds on a 2-core machine, which
 * would drown small buckets, and a spin that never blocks takes the core
 * from a neighbour that shares it.
 *
 * CPU replicas only: the ranks read each other's buffers and copy with
 * memcpy, which is right because a CPU replica's device memory is host
 * memory (runtime/dmem.h). The strategy never gives it GPU replicas;
 * those are joined by NCCL, device to device. */
#ifndef MR_LOCAL_H
#define MR_LOCAL_H

#include "collectives/comm.h"

/* Creates a local communicator for `size` threads (size >= 1). */
mr_status mr_comm_local_create(int size, mr_comm **out, mr_error *err);

/* Places a local communicator in a multi-process job: its participants are
 * the job's replicas first .. first + size - 1 (so messages name them as
 * such: "replica 5 waited for replica(s) 4"), and the process may use
 * `cores` cores (its share of the node when several processes share it),
 * which decides whether waiters spin before blocking or block at once. */
void mr_comm_local_place(mr_comm *c, int first, int cores);

#endif
