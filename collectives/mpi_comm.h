/* mpi_comm.h: the communicator between processes, over MPI (OpenMPI), with
 * one participant per process (its replica, or the process's local sum in
 * a hierarchical communicator).
 *
 * All-reduce with a fixed summation order, which MPI_Allreduce does not
 * promise: a reduce-scatter in which process q receives slice q of every
 * process's buffer and sums the slices in rank order 0..P-1, then an
 * all-gather of the summed slices, both as point-to-point messages (P - 1
 * each way per phase; bandwidth 2 n (P - 1) / P per process, as a ring).
 * Each element is summed in the same order as the local communicator sums
 * replica threads, so P processes of one replica train bitwise like one
 * process of P replicas. Non-blocking starts (allreduce_start) let
 * gradient buckets travel while backward goes on; MPI moves them only
 * inside its calls, so the caller polls (mr_comm_progress). */
#ifndef MR_MPI_COMM_H
#define MR_MPI_COMM_H

#include <mpi.h>

#include "collectives/comm.h"

/* A communicator over the processes of `comm` (duplicated, so its messages
 * never meet the caller's). timeout_s bounds every wait; yield: waiters
 * yield the core between polls at once (processes outnumber cores). */
mr_status mr_comm_mpi_create(MPI_Comm comm, double timeout_s, int yield, mr_comm **out,
                             mr_error *err);

#endif
