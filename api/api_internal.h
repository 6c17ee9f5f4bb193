/* api_internal.h: the model handle behind include/mirrored.h and what the
 * api/ files share: the job, errors, the replicas that hold the weights,
 * caller arrays as datasets. */
#ifndef MR_API_INTERNAL_H
#define MR_API_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "include/mirrored.h"
#include "collectives/job.h"
#include "models/config.h"
#include "models/model_plan.h"
#include "runtime/dataset.h"
#include "runtime/paths.h"
#include "session/session_model.h"
#include "session/session_replicas.h"
#include "strategies/checkpoint.h"
#include "strategies/strategy.h"

struct mirrored_model {
    mr_config cfg;          /* reps.s points at it */
    mr_model_plan plan;     /* points into cfg */
    char name[256];         /* what messages and the summary call the model */
    char path[MR_PATH_MAX]; /* the file loaded ("" for .cfg text) */
    /* what a checkpoint records as the .cfg's path, so its relative [data]
     * paths resolve where they did: the .cfg loaded, a checkpoint's own
     * record, or FOLDER/NAME for from_config(folder=) */
    char cfg_path[MR_PATH_MAX];
    mr_session_source source; /* where its first weights come from (session/session_model.h) */
    /* a Keras file's or checkpoint's weights (and slots), read at the load
     * on a CPU context (one replica, host memory): every later call starts
     * from these, never from the path again (reps.first), so a file renamed
     * over it meanwhile cannot mix two files. host_be NULL: none (a .cfg,
     * or freed once a fit has begun: the replicas hold the weights then) */
    mr_backend *host_be;
    mr_model host;
    mr_checkpoint ck; /* MR_SESSION_SOURCE_CKPT: the checkpoint read */
    /* the .cfg's own [net] values, which a fit's options override for that fit */
    int cfg_epochs, cfg_batch;
    int64_t cfg_seed;
    float cfg_split;
    /* the replicas that hold the weights now (session/session_replicas.h) */
    mr_session_replicas reps;
    /* where training stands: updates and epochs done in all, the last rate */
    int64_t global_step;
    int epochs_done;
    float lr;
    /* the preprocessing the weights were trained with: x * scale, then
     * (x - mean) * inv_std, (row) each; have_stats 0: none yet */
    int have_stats;
    int64_t stats_row;
    float *mean, *inv_std;
    atomic_int stop; /* mr_fit_callbacks.stop of every fit */
    /* the call in progress ("fit", "predict", ...; NULL: none): one call at
     * a time per model, a second one refused at once (api_calls.c) */
    _Atomic(const char *) busy;
};

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the stop flag is written by a signal handler");

/* ---- api_job.c ---------------------------------------------------------- */

/* err's status and message from e; returns the status */
mirrored_status api_fail(mirrored_error *err, const mr_error *e);
/* err cleared; MIRRORED_OK */
mirrored_status api_ok(mirrored_error *err);
/* a usage error with one line */
mirrored_status api_usage(mirrored_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The process's job, started on first use (mr_session_job_init). */
mr_status api_job(mr_job **job, mr_error *err);

/* ---- api_calls.c ------------------------------------------------------- */

/* Marks `call` ("fit") in progress on m; MIRRORED_ERR_USAGE, naming the
 * call already in progress, where one is (another thread's, or a fit's
 * callback calling back into its own model). */
mirrored_status api_enter(mirrored_model *m, const char *call, mirrored_error *err);
/* The call api_enter marked has ended. */
void api_leave(mirrored_model *m);

/* ---- api_fit.c --------------------------------------------------------- */

/* The model whose fit's epoch callback this thread is in (NULL: none): a
 * save from there writes the weights of the epoch just ended (mirrored.c). */
const mirrored_model *api_in_epoch_callback(void);

/* ---- api_data.c -------------------------------------------------------- */

/* x (n, ...) and y (may be NULL: zero labels, to predict) as a dataset of
 * the model's: x read in place (ds->x.data is the caller's: free with
 * api_dataset_free), labels checked against the model; `what` names them
 * in messages ("x", "validation_data"). */
mr_status api_dataset_from_arrays(const mirrored_model *m, const mirrored_array *x,
                                  const mirrored_array *y, const char *what, mr_dataset *ds,
                                  mr_error *err);

/* Frees ds, except the caller's memory that ds->x may point at. */
void api_dataset_free(mr_dataset *ds, const mirrored_array *x);

/* The model's preprocessing into ds (its scale, the training statistics
 * where [data] standardize asks for them). */
mr_status api_apply_stats(const mirrored_model *m, mr_dataset *ds, mr_error *err);

/* Keeps ds's statistics as the model's (after the first fit standardised). */
mr_status api_keep_stats(mirrored_model *m, const mr_dataset *ds, mr_error *err);

/* ---- api_agree.c ------------------------------------------------------- */

/* A CRC-32 of the call's arguments, built up piece by piece (crc 0 to
 * start): bytes, a string (NULL differs from ""), an array (dtype, shape
 * and data; NULL differs from any). */
uint32_t api_crc(uint32_t crc, const void *p, size_t n);
uint32_t api_crc_str(uint32_t crc, const char *s);
uint32_t api_crc_array(uint32_t crc, const mirrored_array *a);

/* 1 in a job of more than one process (where the arguments' CRC is worth
 * computing), else 0. */
int api_many_processes(void);

/* The job's status for this process's `st` (its message in *err): MR_OK
 * where every process succeeded, else on every process the same error
 * (mr_job_agree: the lowest failing rank's, named). st itself in a
 * one-process job. */
mr_status api_agree(mr_status st, mr_error *err);

/* api_agree, then: every process was given the same arguments (`args`,
 * their api_crc); else an MR_ERR_USAGE on every process naming `call` and
 * the first rank whose arguments differ from rank 0's. Each call of the
 * job's collective work starts with this, after its own checks, so one
 * process's refusal never leaves the others waiting in a collective. */
mr_status api_agree_call(const char *call, mr_status st, uint32_t args, mr_error *err);

/* out (count floats) filled on each process with its own rows and zeros
 * elsewhere: every process's rows on every process, bit for bit. */
mr_status api_share_rows(float *out, int64_t count, mr_error *err);

/* ---- api_replicas.c ---------------------------------------------------- */

/* The devices of `spec` (NULL: "auto") on this process; for a fit, "auto"
 * takes the count the global batch divides into. */
mr_status api_devices(mirrored_model *m, const char *spec, int for_fit, mr_device_set *set,
                      mr_error *err);

/* Makes m->s the replicas of `key` (kept where m->s has that key), with the
 * model's weights: the last strategy's once a fit has run, else the
 * seed's (key->seed) or the file's. */
mr_status api_strategy(mirrored_model *m, const mr_session_key *key, mr_error *err);

/* A strategy for evaluate, predict, save and summary: m->s where it runs on
 * `spec`'s devices (NULL or "auto": whichever it runs on) at batch_size
 * (0: whichever it has), else one with n_train 0 (the .cfg's batch, or
 * batch_size: checked against the replicas as fit's is). */
mr_status api_eval_strategy(mirrored_model *m, const char *spec, int64_t batch_size, mr_error *err);

#endif
