/* clock.h: the one clock that timings, timeouts and backoffs read.
 *
 * CLOCK_MONOTONIC: it never jumps with the wall clock (NTP, a user setting
 * the date), so an elapsed time or a timeout measured across a jump stays
 * right. Seconds as a double: microsecond resolution for decades of
 * uptime, and the arithmetic callers do (rates, deadlines) is in seconds. */
#ifndef MR_CLOCK_H
#define MR_CLOCK_H

#include <time.h>

#include "runtime/hd.h"

MR_C_BEGIN

/* Seconds since an arbitrary fixed point (boot). */
static inline double mr_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

MR_C_END

#endif
