/* error.h: status codes and error messages for the library folders.
 *
 * Library code (runtime, collectives, models, strategies) never exits: it
 * returns an mr_status and fills an mr_error with one line that says what went
 * wrong and where (the .cfg file and line, the path, the HDF5 object). Only
 * launch/ turns a status into a message on stderr and an exit code.
 * Broken invariants (programmer errors) go through MR_ASSERT instead. */
#ifndef MR_ERROR_H
#define MR_ERROR_H

#include <stdio.h>
#include <stdlib.h>

#include "runtime/hd.h"

MR_C_BEGIN

typedef enum mr_status {
    MR_OK = 0,
    MR_ERR_USAGE,       /* bad command-line option or value */
    MR_ERR_CONFIG,      /* bad .cfg: syntax, unknown key, value out of range, bad shapes */
    MR_ERR_IO,          /* file missing, unreadable or unwritable */
    MR_ERR_DATA,        /* file readable but its content is wrong (magic, truncation, counts) */
    MR_ERR_NOMEM,       /* allocation failed */
    MR_ERR_UNSUPPORTED, /* asked for something this build or machine cannot do */
    MR_ERR_RUNTIME,     /* failure while running: a collective timed out, replicas diverged */
    MR_ERR_ABORTED,     /* released from a collective because another participant failed:
                           an echo, the real error is that participant's */
    MR_ERR_NOT_FOUND,   /* a file or folder that does not exist: an I/O error whose cause
                           callers can act on (the Python package's FileNotFoundError) */
} mr_status;

typedef struct mr_error {
    mr_status status;
    char msg[1024]; /* one line, no trailing newline */
} mr_error;

/* Records the first error only: a later call with an error already set keeps
 * the original message (it is nearer the cause). Returns `status`, so callers
 * can write `return mr_error_set(err, MR_ERR_IO, "%s: ...", path);`.
 * err may be NULL. */
mr_status mr_error_set(mr_error *err, mr_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears err to MR_OK with an empty message. */
void mr_error_clear(mr_error *err);

/* Short lowercase name of a status ("config error", "I/O error", ...). */
const char *mr_status_name(mr_status status);

/* Propagates a failing status to the caller. */
#define MR_CHECK(expr)                                                                             \
    do {                                                                                           \
        mr_status mr_check_status_ = (expr);                                                       \
        if (mr_check_status_ != MR_OK) return mr_check_status_;                                    \
    } while (0)

/* Stores a failing status in `st` and jumps to the cleanup label. */
#define MR_CHECK_GOTO(expr, st, label)                                                             \
    do {                                                                                           \
        (st) = (expr);                                                                             \
        if ((st) != MR_OK) goto label;                                                             \
    } while (0)

/* Programmer errors only: prints file:line and aborts. */
#define MR_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: internal error: assertion '%s' failed\n", __FILE__, __LINE__,  \
                    #cond);                                                                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

MR_C_END

#endif
