/* mpi_impl.h: what the MPI-based parts of collectives/ share (internal:
 * only job_mpi.c and mpi_comm.c include it; it needs <mpi.h>).
 *
 * Every wait on MPI here is a polling loop with a deadline rather than a
 * blocking MPI_Wait: a collective must fail with a message naming the
 * ranks that did not arrive instead of waiting forever (docs/architecture.md,
 * "Threads and processes"). */
#ifndef MR_MPI_IMPL_H
#define MR_MPI_IMPL_H

#include <mpi.h>

#include "runtime/error.h"

/* Turns an MPI return code into an MR_ERR_RUNTIME naming the call. */
mr_status mr_mpi_check(int rc, const char *call, mr_error *err);

/* Waits until all n requests are complete, polling MPI_Testall: spinning
 * first (the answer usually comes within microseconds), then yielding the
 * core between polls for a moment, then sleeping between them (1 us
 * doubling to 64 us, runtime/backoff.h), so that a long wait leaves the
 * core to whoever shares it; `yield` sleeps from the start (a process
 * sharing its core with the peers it waits for). peers[i] is the MPI_COMM_WORLD rank
 * that request i waits for (a receive), or -1 (a send). Past timeout_s the
 * message names `what` and the peers whose receives never completed. */
mr_status mr_mpi_wait(MPI_Request *reqs, int n, const int *peers, double timeout_s, int yield,
                      const char *what, mr_error *err);

#endif
