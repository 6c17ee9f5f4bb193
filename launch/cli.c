/* cli.c: exit codes, errors and option values (cli.h);
 * the job's part is cli_job.c. */
#include "launch/cli.h"

#include <getopt.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const mr_session_words mr_cli_words = {
    .arg = {[MR_SESSION_ARG_DEVICES] = "--devices %s",
            [MR_SESSION_ARG_EPOCHS] = "--epochs %s",
            [MR_SESSION_ARG_SEED] = "--seed %s",
            [MR_SESSION_ARG_BATCH_SIZE] = "--batch-size %s",
            [MR_SESSION_ARG_VALIDATION_SPLIT] = "--validation-split %s",
            [MR_SESSION_ARG_DATA] = "--data %s",
            [MR_SESSION_ARG_SAVE] = "--save %s",
            [MR_SESSION_ARG_RESUME] = "--resume %s",
            [MR_SESSION_ARG_INIT_WEIGHTS] = "--init-weights %s",
            [MR_SESSION_ARG_STOP_CHECKPOINT] = "--checkpoint-on-signal %s",
            [MR_SESSION_ARG_STOP_BUDGET] = "--stop-budget %s",
            [MR_SESSION_ARG_SYNTHETIC] = "--synthetic %s",
            [MR_SESSION_ARG_JSON] = "--json %s"},
    .name = {[MR_SESSION_ARG_DEVICES] = "--devices",
             [MR_SESSION_ARG_EPOCHS] = "--epochs",
             [MR_SESSION_ARG_SEED] = "--seed",
             [MR_SESSION_ARG_BATCH_SIZE] = "--batch-size",
             [MR_SESSION_ARG_VALIDATION_SPLIT] = "--validation-split",
             [MR_SESSION_ARG_DATA] = "--data",
             [MR_SESSION_ARG_SAVE] = "--save",
             [MR_SESSION_ARG_RESUME] = "--resume",
             [MR_SESSION_ARG_INIT_WEIGHTS] = "--init-weights",
             [MR_SESSION_ARG_STOP_CHECKPOINT] = "--checkpoint-on-signal",
             [MR_SESSION_ARG_STOP_BUDGET] = "--stop-budget",
             [MR_SESSION_ARG_SYNTHETIC] = "--synthetic",
             [MR_SESSION_ARG_JSON] = "--json"}};

void mr_cli_line(void *user, mr_session_line kind, const char *text) {
    (void)kind;
    fprintf(user, "%s\n", text);
    fflush(user);
}

int mr_cli_exit_code(mr_status st) {
    switch (st) {
    case MR_OK:
        return MR_EXIT_OK;
    case MR_ERR_USAGE:
    case MR_ERR_CONFIG:
    case MR_ERR_IO:
    case MR_ERR_NOT_FOUND:
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

mr_status mr_cli_bad_option(char *const *argv, mr_error *err) {
    /* getopt sets optopt to the short option, or to a long option's code */
    if (optopt > 0 && optopt < 256)
        return mr_error_set(err, MR_ERR_USAGE, "-%c: unknown option or missing value (see --help)",
                            optopt);
    return mr_error_set(err, MR_ERR_USAGE, "%s: unknown option or missing value (see --help)",
                        argv[optind - 1]);
}
