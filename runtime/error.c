/* error.c: first-error-wins message recording (see error.h). */
#include "runtime/error.h"

#include <stdarg.h>

mr_status mr_error_set(mr_error *err, mr_status status, const char *fmt, ...) {
    if (err == NULL || status == MR_OK) return status;
    if (err->status != MR_OK) return status; /* keep the first, nearest the cause */
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return status;
}

void mr_error_clear(mr_error *err) {
    if (err == NULL) return;
    err->status = MR_OK;
    err->msg[0] = '\0';
}

const char *mr_status_name(mr_status status) {
    switch (status) {
    case MR_OK:
        return "ok";
    case MR_ERR_USAGE:
        return "usage error";
    case MR_ERR_CONFIG:
        return "config error";
    case MR_ERR_IO:
        return "I/O error";
    case MR_ERR_DATA:
        return "data error";
    case MR_ERR_NOMEM:
        return "out of memory";
    case MR_ERR_UNSUPPORTED:
        return "unsupported";
    case MR_ERR_RUNTIME:
        return "runtime error";
    case MR_ERR_ABORTED:
        return "aborted";
    case MR_ERR_NOT_FOUND:
        return "file not found";
    }
    return "unknown error";
}
