/* backoff.h: how the host waits for something it can only ask about (a
 * CUDA event, an NCCL collective): ask, and between two questions yield the
 * core for the first `spin_s` seconds (a step's waits are usually short,
 * and a sleep would add its ~60 us of timer slack to each), then sleep 1
 * us, 2, 4 .. up to 64 us (a long wait costs the core almost nothing and
 * is noticed within 64 us). The caller checks its own timeout against
 * mr_backoff_elapsed. */
#ifndef MR_BACKOFF_H
#define MR_BACKOFF_H

#include <sched.h>
#include <time.h>

#include "runtime/clock.h"
#include "runtime/hd.h"

MR_C_BEGIN

typedef struct mr_backoff {
    double start;  /* CLOCK_MONOTONIC seconds of mr_backoff_begin */
    double spin_s; /* yield, not sleep, until this long after start */
    long nap_ns;   /* the next sleep */
} mr_backoff;

#define MR_BACKOFF_MAX_NAP_NS 64000L

static inline void mr_backoff_begin(mr_backoff *b, double spin_s) {
    b->start = mr_now_s();
    b->spin_s = spin_s;
    b->nap_ns = 1000;
}

/* Seconds since mr_backoff_begin. */
static inline double mr_backoff_elapsed(const mr_backoff *b) {
    return mr_now_s() - b->start;
}

/* One pause between two questions. */
static inline void mr_backoff_pause(mr_backoff *b) {
    if (mr_backoff_elapsed(b) < b->spin_s) {
        sched_yield();
        return;
    }
    struct timespec nap = {0, b->nap_ns};
    nanosleep(&nap, NULL);
    if (b->nap_ns < MR_BACKOFF_MAX_NAP_NS) b->nap_ns *= 2;
}

MR_C_END

#endif
