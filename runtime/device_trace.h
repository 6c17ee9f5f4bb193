/* device_trace.h: --trace's device time where kernels run behind the host
 * (a GPU). The host lane of a replica (trace.h) shows when the host
 * queued each layer's kernels; on a GPU that returns long before the
 * kernels ran. Here the host queues a mark (backend.h: a CUDA timing
 * event) before and after each span of device work (a layer's forward or
 * backward, the loss, the update) and, once the step's work is done,
 * reads the device's seconds between them and records the spans on a
 * lane of their own ("replica 0 (gpu) device"), under a "step" span from
 * the step's first mark to its last.
 *
 * Where the spans sit: the device's clock only gives differences, so the
 * step's last mark is placed at the host time its wait returned (at most
 * that wait's latency after the device ran it) and every other mark that
 * many device seconds before it. Durations are the device's own.
 *
 * Marks are queued only between mr_device_trace_arm (a training step
 * begins) and mr_device_trace_flush (it has ended): a validation or
 * evaluation pass outside a step queues none. One per replica, used by
 * the replica's thread only, as its lanes are. A NULL mr_device_trace is
 * off: every call returns at once (the CPU, whose host time is its device
 * time, and runs without --trace). Relies on backend.h (marks), trace.h. */
#ifndef MR_DEVICE_TRACE_H
#define MR_DEVICE_TRACE_H

#include "runtime/backend.h"
#include "runtime/trace.h"

MR_C_BEGIN

typedef struct mr_device_trace mr_device_trace;

/* Device time of context be on lane (mr_trace_add_lane), room for
 * max_spans spans a step. *out is NULL (off, MR_OK) where lane is NULL or
 * be has no marks (mr_backend_has_marks). */
mr_status mr_device_trace_create(mr_backend *be, mr_trace_lane *lane, int max_spans,
                                 mr_device_trace **out, mr_error *err);
void mr_device_trace_destroy(mr_device_trace *d);

/* A step begins: queues its first mark; spans are marked until the flush. */
void mr_device_trace_arm(mr_device_trace *d);
/* Queues the mark a span begins at; returns it, or -1 (off, not armed, or
 * the step's room is full). */
int mr_device_trace_begin(mr_device_trace *d);
/* Queues the mark the span ends at: span [begin, now] of category cat (a
 * string literal) named name (kept until the flush: a layer's name). */
void mr_device_trace_end(mr_device_trace *d, const char *cat, const char *name, int begin);
/* The step has ended: waits for its last mark, records its spans and a
 * "step" span named step_name on the lane, and disarms. A mark that
 * failed to queue (the device's error) is reported here. */
mr_status mr_device_trace_flush(mr_device_trace *d, const char *step_name, mr_error *err);

MR_C_END

#endif
