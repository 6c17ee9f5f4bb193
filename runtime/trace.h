/* trace.h: a Chrome trace-event file (--trace FILE.json) of where a run's
 * time goes: complete events ("ph": "X") per thread, written as the JSON
 * Object Format {"traceEvents": [...], "displayTimeUnit": "ms"} that
 * Perfetto and chrome://tracing read.
 *
 * One mr_trace per process (pid = its rank); one lane per replica thread
 * (tid = the replica's job-wide index). A lane is written by its own
 * thread only, with no lock: an event goes into the lane's chunk, then the
 * lane's count is published with a release store. mr_trace_write, from any
 * thread, reads each lane up to its count (acquire), so it can run while
 * the replicas go on recording (at an epoch's end on replica 0's thread).
 *
 * Why the whole file is rewritten atomically at each write
 * (runtime/atomic_file.h) rather than appended to: the file on disk is
 * then always a whole, valid JSON document, the last write's, whatever
 * happens next (a crash, SIGKILL, a full disk), with no closing bracket to
 * keep patching and no seek. The cost is writing the events again at each
 * epoch's end, a few MB at most: small next to an epoch.
 *
 * Tracing off costs a NULL check per event: the hooks test the lane
 * pointer (mr_trace_now returns 0 without reading the clock). Times are
 * runtime/clock.h's seconds; the file's ts and dur are microseconds since
 * the origin given at creation (the job's start). Relies on clock.h,
 * json.h, atomic_file.h and C11 atomics. */
#ifndef MR_TRACE_H
#define MR_TRACE_H

#include <stdatomic.h>
#include <stdint.h>

#include "runtime/clock.h"
#include "runtime/error.h"

MR_C_BEGIN

/* Events a lane keeps: MR_TRACE_CHUNKS chunks of MR_TRACE_CHUNK events
 * (4M events, hours of steps of a 20-layer model); events past that are
 * counted as dropped, and the file says how many. */
enum { MR_TRACE_CHUNK = 4096, MR_TRACE_CHUNKS = 1024, MR_TRACE_NAME = 48 };
/* A replica's device-time lane (runtime/device_trace.h) is thread
 * MR_TRACE_DEVICE_TID + its index, so viewers list it after the replicas'
 * host lanes. */
enum { MR_TRACE_DEVICE_TID = 1000 };

typedef struct mr_trace_event {
    double t0, t1;            /* clock.h seconds */
    const char *cat;          /* a string literal: "forward", "allreduce", ... */
    int64_t bytes;            /* args.bytes (allreduce), or -1: none */
    char name[MR_TRACE_NAME]; /* a copy: a layer's name may not outlive the trace */
} mr_trace_event;

typedef struct mr_trace_lane {
    int tid;
    char label[MR_TRACE_NAME]; /* thread_name: "replica 1 (cpu:1)" */
    _Atomic int64_t n;         /* events published */
    _Atomic int64_t dropped;   /* events not kept (mr_trace_drop): otherData.dropped */
    mr_trace_event *_Atomic chunk[MR_TRACE_CHUNKS]; /* allocated as the lane fills */
} mr_trace_lane;

typedef struct mr_trace mr_trace;

/* A trace of process `pid` (its rank; process_name "rank PID") writing to
 * path, with times measured from origin_s (mr_now_s() at the job's start).
 * Fails (MR_ERR_IO naming the path) if path cannot be written: it writes
 * the empty trace at once. */
mr_status mr_trace_create(const char *path, int pid, double origin_s, mr_trace **out,
                          mr_error *err);
void mr_trace_destroy(mr_trace *t);

/* A new lane (thread) of tid with its thread_name; before the threads that
 * record start (not thread-safe with other mr_trace_add_lane calls). NULL
 * if t is NULL (tracing off) or out of memory (that lane is then off). */
mr_trace_lane *mr_trace_add_lane(mr_trace *t, int tid, const char *label);

/* Records a complete event [t0, t1] (clock.h seconds) of category cat (a
 * string literal) named name on the lane; bytes >= 0 adds args.bytes.
 * Only the lane's own thread calls it. */
void mr_trace_record(mr_trace_lane *l, const char *cat, const char *name, double t0, double t1,
                     int64_t bytes);

/* Counts n events of the lane that were not kept (its room full, out of
 * memory, or a device-time span past its step's room): the file's
 * otherData says how many. Any thread. */
void mr_trace_drop(mr_trace_lane *l, int64_t n);

/* Rewrites the file with every event published so far, atomically. Safe
 * while lanes record; calls must not overlap each other. */
mr_status mr_trace_write(mr_trace *t, mr_error *err);

/* The clock when tracing (l not NULL), else 0 without reading it. */
static inline double mr_trace_now(const mr_trace_lane *l) {
    return l ? mr_now_s() : 0.0;
}

/* An event from t0 (mr_trace_now) to now, if tracing. */
static inline void mr_trace_end(mr_trace_lane *l, const char *cat, const char *name, double t0) {
    if (l) mr_trace_record(l, cat, name, t0, mr_now_s(), -1);
}

MR_C_END

#endif
