/* session_devices.h: the devices a run trains on, on this process of its
 * job: the replicas of a device kind numbered across the job (CPU threads)
 * or by ordinal on their node (GPUs), and "auto"'s count of CPU replicas,
 * the same rule on every process. Relies on strategies/devices.h. */
#ifndef MR_SESSION_DEVICES_H
#define MR_SESSION_DEVICES_H

#include "collectives/job.h"
#include "models/config.h"
#include "session/session_events.h"
#include "strategies/devices.h"

/* 1: the replicas of set's kind are threads on the cores (the CPU), so
 * they are numbered across the job, in rank order; 0: they are devices,
 * named by their ordinal on their node (GPUs). */
int mr_session_numbered_across_job(const mr_device_set *set);

/* "auto" with a global batch fixed by the .cfg: the most replicas, up to
 * one per core, over which the global batch divides evenly (on every
 * process alike, so that the job's total divides too). */
int mr_session_auto_replicas(const mr_config *cfg, int processes, int cores);

/* mr_devices_parse, a refusal naming the argument as `words` do (NULL:
 * the library's, devices='gpu'). */
mr_status mr_session_parse_devices(const char *spec, const mr_device_env *env,
                                   const mr_session_words *words, mr_device_set *d, mr_error *err);

/* The devices of `spec` on this process (env: its cores and GPUs,
 * mr_devices_job_env): "auto" on CPU replicas takes the count that the
 * .cfg's global batch divides into, and under mpirun cpu:N may not ask for
 * more cores than the process has. A refusal names the argument as
 * `words` do (NULL: the library's, devices='gpu'). */
mr_status mr_session_choose_devices(const char *spec, const mr_job *job, const mr_device_env *env,
                                    const mr_config *cfg, const mr_session_words *words,
                                    mr_device_set *d, mr_error *err);

/* A global batch the run's arguments set (batch_size, over [net]
 * global_batch) against the replicas of d in a job of one process: at
 * least one example per replica (and per accumulated micro-batch), and a
 * multiple of them; else MR_ERR_USAGE naming the argument as `words` do
 * (NULL: the library's, batch_size=64). The .cfg's own global_batch, and a
 * job of several processes (whose counts may differ), are the strategy's
 * to check, in the .cfg's words. */
mr_status mr_session_check_batch(int64_t batch_size, const mr_config *cfg, const mr_device_set *d,
                                 const mr_job *job, const mr_session_words *words, mr_error *err);

#endif
