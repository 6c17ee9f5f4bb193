/* cli.h: what the executables share: exit codes, one-line errors, option
 * values, and the job of processes (mpirun) with its one-message failure
 * rules (the job itself starts in session/session_job.h). */
#ifndef MR_CLI_H
#define MR_CLI_H

#include <stdint.h>

#include "collectives/job.h"
#include "runtime/error.h"
#include "session/session_events.h"

enum { MR_EXIT_OK = 0, MR_EXIT_FAILURE = 1, MR_EXIT_BAD_INPUT = 2 };

/* 0 for MR_OK; 2 for bad input (usage, .cfg, I/O, data, unsupported); 1
 * for a failure while running. */
int mr_cli_exit_code(mr_status st);

/* "prog: message" on stderr; returns the exit code. */
int mr_cli_die(const char *prog, const mr_error *err);

/* How the command line names a run's arguments in session/'s messages:
 * its flags ("--devices %s", "--batch-size %s"). */
extern const mr_session_words mr_cli_words;

/* mr_session_events.line of the executables: text and a newline on the
 * FILE * user, flushed (a line before a failure comes before it). */
void mr_cli_line(void *user, mr_session_line kind, const char *text);

/* An integer option value in [lo, hi]; 0 (err filled) if it is not one. */
int mr_cli_parse_long(const char *opt, const char *s, long long lo, long long hi, long long *out,
                      mr_error *err);

/* The getopt_long failure just seen (an unknown option or a missing
 * value), as a usage error naming it. */
mr_status mr_cli_bad_option(char *const *argv, mr_error *err);

/* cli_job.c: */

/* A failure of this process alone: printed with its rank and host in a job
 * of several processes, which it then ends (the others may wait for it in
 * a collective); MR_ERR_ABORTED (stopped for another process's failure)
 * prints nothing. Returns the exit code. */
int mr_cli_fail_alone(const char *prog, mr_job *job, const mr_error *err);

/* A failure every process agreed on (mr_job_agree): printed once. */
int mr_cli_fail_agreed(const char *prog, const mr_job *job, const mr_error *err);

/* How the outcome of an executable's stage becomes the same verdict on
 * every process of the job; each stage declares one. */
typedef enum mr_cli_stage_verdict {
    /* it may fail on one process alone: the processes agree on the outcome
     * after it (mr_job_agree), and a failure is printed once */
    MR_CLI_STAGE_AGREE,
    /* the same outcome on every process already: its own collectives agree
     * (mr_strategy_create), or it reads only what every process holds
     * alike (the .cfg); a failure is printed once */
    MR_CLI_STAGE_SAME,
    /* a failure of this process alone, which the others cannot see (they
     * may wait in a collective): it ends the job (mr_cli_fail_alone) */
    MR_CLI_STAGE_ALONE,
    /* prints (on the lead process) and cannot fail */
    MR_CLI_STAGE_PRINT,
} mr_cli_stage_verdict;

/* Ends a stage that returned st: agrees on it where the verdict is
 * MR_CLI_STAGE_AGREE, and on a failure prints it as the verdict says (a
 * collective of the job that timed out, job->failed, as MR_CLI_STAGE_ALONE),
 * sets *rc to the exit code and returns 1; returns 0 to go on. */
int mr_cli_stage_failed(const char *prog, mr_job *job, mr_cli_stage_verdict verdict, mr_status st,
                        mr_error *err, int *rc);

#endif
