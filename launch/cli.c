/* cli.c: exit codes, errors, option values and output files (cli.h);
 * the job's part is cli_job.c. */
#include "launch/cli.h"
#include "runtime/atomic_file.h"

#include <getopt.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

mr_status mr_cli_check_writable(const char *opt, const char *path, mr_error *err) {
    if (path == NULL) return MR_OK;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return mr_error_set(err, MR_ERR_IO, "%s %s: cannot write: Is a directory", opt, path);
    /* a device or a pipe is written in place (an HDF5 file must be regular: paths.h) */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) return MR_OK;
    /* the temporary an atomic write of path would make (runtime/atomic_file.h) */
    char tmp[4200];
    mr_error why = {0};
    if (mr_atomic_path_begin(path, tmp, sizeof tmp, &why) != MR_OK)
        return mr_error_set(err, MR_ERR_IO, "%s %s", opt, why.msg);
    mr_atomic_path_abort(tmp);
    return MR_OK;
}

mr_status mr_cli_bad_option(char *const *argv, mr_error *err) {
    /* getopt sets optopt to the short option, or to a long option's code */
    if (optopt > 0 && optopt < 256)
        return mr_error_set(err, MR_ERR_USAGE, "-%c: unknown option or missing value (see --help)",
                            optopt);
    return mr_error_set(err, MR_ERR_USAGE, "%s: unknown option or missing value (see --help)",
                        argv[optind - 1]);
}
