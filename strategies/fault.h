/* fault.h: fault injection, the test hooks of the training step.
 *
 * Tests make a replica fail, hang, diverge or copy as a GPU's would, to see
 * that the job notices (an error on every process, a collective timeout,
 * --check-sync naming the replica). mr_fault says which; the strategy asks
 * it at one call per hook point and knows nothing else about tests. A
 * strategy with no mr_fault (NULL) or a zeroed one runs no hook. Relies on
 * models/model.h (the perturbed parameter is written through the model's
 * host access) and runtime/clock.h (the stall). */
#ifndef MR_FAULT_H
#define MR_FAULT_H

#include <stdint.h>

#include "models/model.h"
#include "runtime/error.h"

/* The launcher's variable: RANK:STEP (that process's replica 0 fails at
 * update STEP, 1-based, as a process-local failure would),
 * RANK:STEP:stall (it stops answering there instead: a hung process) or
 * RANK:STEP:SIGNAL with SIGNAL TERM, INT or USR1 (it raises that signal
 * in its own process after update STEP, as a preemption would: at the
 * start of update STEP+1, before that update reads the stop flag, so the
 * stop lands on update STEP+1 however far ahead the other replicas'
 * threads have queued). */
#define MR_FAULT_ENV "MIRRORED_DEBUG_FAIL"

typedef struct mr_fault {
    int64_t fail_step;    /* replica 0 of this process fails after the all-reduce of this
                             update (1-based); 0: never */
    int stall;            /* with fail_step: it stalls there for three collective timeouts
                             instead of failing */
    int raise_signal;     /* with fail_step: it raises this signal before update fail_step + 1
                             reads the stop flag instead (0: none) */
    int64_t perturb_step; /* with --check-sync checking at this update: replica R-1's first
                             parameter += 1 before the check (R > 1); 0: never */
    int staged;           /* the replicas' CPU contexts say their memory is not host memory,
                             so the host copies to and from it as for a GPU */
} mr_fault;

/* What a replica does at a hook point. */
typedef enum mr_fault_action {
    MR_FAULT_NONE = 0,
    MR_FAULT_FAIL,  /* return an error (MR_ERR_RUNTIME) */
    MR_FAULT_STALL, /* stop answering: sleep for three collective timeouts */
} mr_fault_action;

/* Parses the value of MR_FAULT_ENV for the process of job rank `rank`:
 * NULL or "" is no fault, another rank's fault is none for this one.
 * Anything else that is not RANK:STEP or RANK:STEP:stall (RANK >= 0,
 * STEP >= 1) is an MR_ERR_USAGE with a one-line message. *out is zeroed
 * first. */
mr_status mr_fault_parse(const char *value, int rank, mr_fault *out, mr_error *err);

/* Hook after update `step`'s (1-based) all-reduce, before it is applied:
 * what replica `local_replica` (its index in this process) does. A signal
 * fault does nothing here (mr_fault_before_stop_read). */
mr_fault_action mr_fault_at_step(const mr_fault *f, int local_replica, int64_t step);

/* Does what mr_fault_at_step says: MR_FAULT_FAIL returns "replica G:
 * injected failure at step S (MIRRORED_DEBUG_FAIL)"; MR_FAULT_STALL sleeps
 * 3 x timeout_s seconds, then returns MR_OK (the others have given up by
 * then); MR_FAULT_NONE returns MR_OK at once. */
mr_status mr_fault_step(const mr_fault *f, int local_replica, int global_replica, int64_t step,
                        double timeout_s, mr_error *err);

/* Hook before update `step` (1-based) reads the stop flag: on local
 * replica 0, a signal fault of update step - 1 raises its signal here.
 * Why not after that update's all-reduce: a GPU replica's host thread
 * returns from the all-reduce once it is queued, and another replica of
 * this process may not have read the flag for that update yet; here each
 * replica has read the reduced metrics of the update before, so the stop
 * lands on update `step` on every replica, every run. */
void mr_fault_before_stop_read(const mr_fault *f, int local_replica, int64_t step);

/* Hook before --check-sync compares the replicas after update `step`: on
 * global replica R-1 of R > 1 at f->perturb_step, adds 1 to m's first
 * parameter (through the model's host access, as any host code); no-op
 * otherwise. */
mr_status mr_fault_perturb(const mr_fault *f, mr_model *m, int global_replica, int replicas,
                           int64_t step, mr_error *err);

/* Hook when a replica's backend context is made: 1 if a CPU context must
 * stage its host access (set its host_memory to 0). */
int mr_fault_staged(const mr_fault *f);

#endif
