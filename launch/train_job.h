/* train_job.h: what every process of a mirrored_train job must agree on:
 * how the replicas are numbered across the job, how many CPU replicas
 * --devices auto makes (the same rule on every process), and the check that
 * every process trains the same .cfg with the same settings on the same
 * kind of device. Relies on collectives/job.h (allgather). */
#ifndef MR_TRAIN_JOB_H
#define MR_TRAIN_JOB_H

#include "collectives/job.h"
#include "launch/train_options.h"
#include "models/config.h"
#include "strategies/devices.h"
#include "strategies/strategy.h"

/* 1: the replicas of set's kind are threads on the cores (the CPU), so
 * they are numbered across the job, in rank order; 0: they are devices,
 * named by their ordinal on their node (GPUs). */
int mr_train_numbered_across_job(const mr_device_set *set);

/* --devices auto with a global batch fixed by the .cfg: the most replicas,
 * up to one per core, over which the global batch divides evenly (on every
 * process alike, so that the job's total divides too). */
int mr_train_auto_replicas(const mr_config *cfg, int processes, int cores);

/* Every process must train the same model with the same settings (a .cfg
 * edited while mpirun started the processes, or different files on two
 * nodes, would train different models or wait in different collectives):
 * the .cfg text, every option of c that changes what the job computes or
 * which collectives it runs (--epochs, --seed, --max-steps, --synthetic,
 * --check-sync, --bucket-mb, --resume, --init-weights,
 * --checkpoint-on-signal, --write-data, --trace, --dry-run,
 * --stop-signals) and the kind of device are compared. A difference is
 * one MR_ERR_CONFIG or MR_ERR_USAGE naming the first differing rank and
 * rank 0, with both values of the option; the same verdict on every
 * process. Also fills sets[p] with process p's devices (rank 0's start
 * line and summary name them). A collective: every process calls it. */
mr_status mr_train_check_same_job(const mr_train_options *c, mr_job *job, const mr_config *cfg,
                                  const mr_strategy_opts *opts, mr_device_set *sets, mr_error *err);

#endif
