/* cli.c: see cli.h. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mr_cli_exit_code(mr_status st) {
    switch (st) {
    case MR_OK:
        return MR_EXIT_OK;
    case MR_ERR_USAGE:
    case MR_ERR_CONFIG:
    case MR_ERR_IO:
    case MR_ERR_DATA:
    case MR_ERR_UNSUPPORTED:
        return MR_EXIT_BAD_INPUT;
    default:
        return MR_EXIT_FAILURE;
    }
}

int mr_cli_die(const char *prog, const mr_error *err) {
    fprintf(stderr, "%s: %s\n", prog, err->msg);
    return mr_cli_exit_code(err->status);
}

int mr_cli_parse_long(const char *opt, const char *s, long long lo, long long hi, long long *out,
                      mr_error *err) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno || v < lo || v > hi) {
        mr_error_set(err, MR_ERR_USAGE, "%s %s: expected an integer in [%lld, %lld]", opt, s, lo,
                     hi);
        return 0;
    }
    *out = v;
    return 1;
}

mr_status mr_cli_check_writable(const char *opt, const char *path, mr_error *err) {
    if (path == NULL) return MR_OK;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_IO, "%s %s: cannot write: %s", opt, path, strerror(errno));
    fclose(f);
    unlink(tmp);
    return MR_OK;
}

mr_status mr_cli_job_init(int *argc, char ***argv, mr_job *job, mr_error *err) {
    int ranks_per_node = 0;
    const char *rpn = getenv("MIRRORED_RANKS_PER_NODE");
    if (rpn != NULL && rpn[0] != '\0') {
        long long v;
        if (!mr_cli_parse_long("MIRRORED_RANKS_PER_NODE", rpn, 1, 1 << 20, &v, err)) {
            memset(job, 0, sizeof *job);
            return err->status;
        }
        ranks_per_node = (int)v;
    }
    return mr_job_init(argc, argv, ranks_per_node, mr_comm_default_timeout(), job, err);
}

int mr_cli_fail_alone(const char *prog, mr_job *job, const mr_error *err) {
    int code = mr_cli_exit_code(err->status);
    if (err->status == MR_ERR_ABORTED && job->size > 1) return code;
    if (job->size > 1) {
        fprintf(stderr, "%s: rank %d (%s): %s\n", prog, job->rank, job->hosts[job->rank], err->msg);
        mr_job_abort(job, code);
    } else {
        fprintf(stderr, "%s: %s\n", prog, err->msg);
    }
    return code;
}

int mr_cli_fail_agreed(const char *prog, const mr_job *job, const mr_error *err) {
    if (job->rank == 0) fprintf(stderr, "%s: %s\n", prog, err->msg);
    return mr_cli_exit_code(err->status);
}
