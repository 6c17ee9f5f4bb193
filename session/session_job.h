/* session_job.h: the job of processes a run belongs to: started from the
 * environment (mpirun's processes, or this one alone), and the check that
 * every process of it runs the same job: the same .cfg text, the same
 * settings that change what it computes, the same kind of device. Relies
 * on collectives/job.h (allgather). */
#ifndef MR_SESSION_JOB_H
#define MR_SESSION_JOB_H

#include <stddef.h>

#include "collectives/job.h"
#include "models/config.h"
#include "session/session_events.h"
#include "strategies/devices.h"

/* Starts the job (mpirun's processes, or this one), reading
 * MIRRORED_RANKS_PER_NODE and MIRRORED_COMM_TIMEOUT (either set to a bad
 * value: MR_ERR_USAGE naming it). argc and argv may be NULL. */
mr_status mr_session_job_init(int *argc, char ***argv, mr_job *job, mr_error *err);

/* The settings every process must get alike, as the face names them:
 * setting i of n written into buf[size] with its value ("--max-steps 5",
 * "no --resume"); exact: reals in hex, so that equal texts are equal
 * values (the comparison), else as a user reads them (the message). */
typedef struct mr_session_agreed {
    size_t n;
    const void *user;
    void (*format)(const void *user, size_t i, int exact, char *buf, size_t size);
    const mr_session_words *words; /* how the face names the devices (NULL: the library's) */
} mr_session_agreed;

/* Every process must run the same model with the same settings (a .cfg
 * edited while mpirun started the processes, or different files on two
 * nodes, would train different models or wait in different collectives):
 * the .cfg text (cfg_path names it), the agreed settings and the kind of
 * device (devices: this process's) are compared. A difference is one
 * MR_ERR_CONFIG or MR_ERR_USAGE naming the first differing rank and rank 0,
 * with both values of the setting; the same verdict on every process. Also
 * fills sets[p] with process p's devices. A collective: every process
 * calls it. */
mr_status mr_session_check_same_job(mr_job *job, const mr_config *cfg, const char *cfg_path,
                                    const mr_session_agreed *agreed, const mr_device_set *devices,
                                    mr_device_set *sets, mr_error *err);

#endif
