/* cli_job.c: the job's failure rules (cli.h), for the executables that
 * train or evaluate (not mirrored_compare); session/session_job.h starts
 * the job. */
#include "launch/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* err's message; a failure without one is named by its status (in buf),
 * never an empty line */
static const char *message_of(const mr_error *err, char *buf, size_t n) {
    snprintf(buf, n, "failed (%s) without a message", mr_status_name(err->status));
    return err->msg[0] ? err->msg : buf;
}

int mr_cli_fail_alone(const char *prog, mr_job *job, const mr_error *err) {
    int code = mr_cli_exit_code(err->status);
    if (err->status == MR_ERR_ABORTED && job->size > 1) return code;
    char why[64];
    const char *msg = message_of(err, why, sizeof why);
    if (job->size > 1) {
        fprintf(stderr, "%s: rank %d (%s): %s\n", prog, job->rank, job->hosts[job->rank], msg);
        mr_job_abort(job, code);
    } else {
        fprintf(stderr, "%s: %s\n", prog, msg);
    }
    return code;
}

int mr_cli_fail_agreed(const char *prog, const mr_job *job, const mr_error *err) {
    char why[64];
    if (job->rank == 0) fprintf(stderr, "%s: %s\n", prog, message_of(err, why, sizeof why));
    return mr_cli_exit_code(err->status);
}

int mr_cli_stage_failed(const char *prog, mr_job *job, mr_cli_stage_verdict verdict, mr_status st,
                        mr_error *err, int *rc) {
    if (verdict == MR_CLI_STAGE_AGREE) st = mr_job_agree(job, st, err);
    if (st == MR_OK) return 0;
    /* a collective of the job that timed out: this process alone knows */
    *rc = verdict == MR_CLI_STAGE_ALONE || verdict == MR_CLI_STAGE_PRINT || job->failed
              ? mr_cli_fail_alone(prog, job, err)
              : mr_cli_fail_agreed(prog, job, err);
    return 1;
}
