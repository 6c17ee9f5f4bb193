/* fault.c: fault injection (fault.h): the parser of MIRRORED_DEBUG_FAIL and
 * the hooks the training step calls. Relies on the model's host access
 * (perturb) and the monotonic clock (stall). */
#include "strategies/fault.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/clock.h"

/* A decimal integer without sign or spaces at *p, advancing p; -1 when none
 * or out of range. */
static long long parse_count(const char **p) {
    const char *s = *p;
    if (!isdigit((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0) return -1;
    *p = end;
    return v;
}

mr_status mr_fault_parse(const char *value, int rank, mr_fault *out, mr_error *err) {
    *out = (mr_fault){0};
    if (value == NULL || value[0] == '\0') return MR_OK;
    const char *p = value;
    long long r = parse_count(&p), step = -1;
    int stall = 0, sig = 0;
    if (r >= 0 && *p == ':') {
        p++;
        step = parse_count(&p);
        if (strcmp(p, ":stall") == 0)
            stall = 1;
        else if (strcmp(p, ":TERM") == 0)
            sig = SIGTERM;
        else if (strcmp(p, ":INT") == 0)
            sig = SIGINT;
        else if (strcmp(p, ":USR1") == 0)
            sig = SIGUSR1;
        else if (*p != '\0')
            step = -1;
    }
    if (r < 0 || r > 0x7fffffff || step < 1)
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s=%s: expected RANK:STEP, RANK:STEP:stall or RANK:STEP:TERM|INT|USR1 "
                            "(a rank, and an update counted from 1)",
                            MR_FAULT_ENV, value);
    if (r != rank) return MR_OK;
    out->fail_step = step;
    out->stall = stall;
    out->raise_signal = sig;
    return MR_OK;
}

mr_fault_action mr_fault_at_step(const mr_fault *f, int local_replica, int64_t step) {
    if (f == NULL || f->fail_step == 0 || f->fail_step != step || local_replica != 0)
        return MR_FAULT_NONE;
    if (f->raise_signal) return MR_FAULT_NONE; /* mr_fault_before_stop_read's */
    return f->stall ? MR_FAULT_STALL : MR_FAULT_FAIL;
}

void mr_fault_before_stop_read(const mr_fault *f, int local_replica, int64_t step) {
    if (f == NULL || f->fail_step == 0 || f->raise_signal == 0 || local_replica != 0 ||
        step != f->fail_step + 1)
        return;
    raise(f->raise_signal);
}

mr_status mr_fault_step(const mr_fault *f, int local_replica, int global_replica, int64_t step,
                        double timeout_s, mr_error *err) {
    switch (mr_fault_at_step(f, local_replica, step)) {
    case MR_FAULT_NONE:
        return MR_OK;
    case MR_FAULT_FAIL:
        return mr_error_set(err, MR_ERR_RUNTIME,
                            "replica %d: injected failure at step %lld (" MR_FAULT_ENV ")",
                            global_replica, (long long)step);
    case MR_FAULT_STALL:
        break;
    }
    /* busy with naps, not one sleep: a signal must not cut the stall short */
    double until = mr_now_s() + 3.0 * timeout_s;
    while (mr_now_s() < until) {
        struct timespec nap = {0, 10000000};
        nanosleep(&nap, NULL);
    }
    return MR_OK;
}

mr_status mr_fault_perturb(const mr_fault *f, mr_model *m, int global_replica, int replicas,
                           int64_t step, mr_error *err) {
    if (f == NULL || f->perturb_step == 0 || f->perturb_step != step ||
        global_replica != replicas - 1 || replicas < 2)
        return MR_OK;
    const float *now;
    MR_CHECK(mr_model_read(m, m->params, 1, &now, err));
    float *next = mr_model_host_for(m, m->params);
    next[0] = now[0] + 1.0f;
    return mr_model_write(m, m->params, next, 1, err);
}

int mr_fault_staged(const mr_fault *f) {
    return f != NULL && f->staged;
}
