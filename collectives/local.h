/* local.h: the communicator for replicas that are threads of one process.
 *
 * Shared memory, no copies through a staging buffer: each rank publishes its
 * buffer, then all-reduce is a reduce-scatter (rank r sums slice r of every
 * rank's buffer, in rank order 0..size-1, into its own buffer) followed by an
 * all-gather (every rank copies the other slices from their owners).
 * Threads meet by spinning on atomics (bounded, then yielding/sleeping), not
 * pthread barriers: a pthread barrier round costs tens of microseconds on a
 * 2-core machine, which would drown small buckets. */
#ifndef MR_LOCAL_H
#define MR_LOCAL_H

#include "comm.h"

/* Creates a local communicator for `size` threads (size >= 1). */
mr_status mr_comm_local_create(int size, mr_comm **out, mr_error *err);

#endif
