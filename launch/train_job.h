/* train_job.h: the check that every process of a mirrored_train job trains
 * the same .cfg with the same options on the same kind of device: the
 * options that must agree, by their flags, over session/session_job.h's
 * comparison. */
#ifndef MR_TRAIN_JOB_H
#define MR_TRAIN_JOB_H

#include "collectives/job.h"
#include "launch/train_options.h"
#include "models/config.h"
#include "strategies/devices.h"
#include "strategies/strategy.h"

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
 * process (mr_session_check_same_job). Also fills sets[p] with process p's
 * devices (rank 0's start line and summary name them). A collective: every
 * process calls it. */
mr_status mr_train_check_same_job(const mr_train_options *c, mr_job *job, const mr_config *cfg,
                                  const mr_strategy_opts *opts, mr_device_set *sets, mr_error *err);

#endif
