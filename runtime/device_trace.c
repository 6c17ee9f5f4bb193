/* device_trace.c: spans between device marks, placed on a trace lane
 * (device_trace.h says how they are placed). */
#include "runtime/device_trace.h"

#include <stdlib.h>

typedef struct span {
    const char *cat, *name;
    int a, b; /* its marks */
} span;

struct mr_device_trace {
    mr_backend *be;
    mr_trace_lane *lane;
    int armed;
    int max_spans, n_spans;
    int n_marks; /* queued this step; mark 0 is the step's first */
    int64_t overflow;
    mr_status st; /* the first mark that failed to queue, reported by the flush */
    mr_error err;
    span spans[];
};

mr_status mr_device_trace_create(mr_backend *be, mr_trace_lane *lane, int max_spans,
                                 mr_device_trace **out, mr_error *err) {
    *out = NULL;
    if (lane == NULL || !mr_backend_has_marks(be)) return MR_OK;
    if (max_spans < 1) max_spans = 1;
    mr_device_trace *d = calloc(1, sizeof *d + sizeof(span) * (size_t)max_spans);
    if (d == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory for device time");
    d->be = be;
    d->lane = lane;
    d->max_spans = max_spans;
    /* two marks a span and the step's first */
    mr_status st = mr_backend_marks_reserve(be, 2 * max_spans + 1, err);
    if (st != MR_OK) {
        free(d);
        return st;
    }
    *out = d;
    return MR_OK;
}

void mr_device_trace_destroy(mr_device_trace *d) {
    free(d);
}

/* Queues the next mark; -1 if it fails (latched for the flush). */
static int next_mark(mr_device_trace *d) {
    const int i = d->n_marks;
    if (d->st != MR_OK) return -1;
    if (i == 2 * d->max_spans + 1) { /* the reserve (nested spans may get here) */
        d->overflow++;
        return -1;
    }
    d->st = mr_backend_mark(d->be, i, &d->err);
    if (d->st != MR_OK) return -1;
    d->n_marks++;
    return i;
}

void mr_device_trace_arm(mr_device_trace *d) {
    if (d == NULL) return;
    d->armed = 1;
    d->n_spans = 0;
    d->n_marks = 0;
    (void)next_mark(d);
}

int mr_device_trace_begin(mr_device_trace *d) {
    if (d == NULL || !d->armed) return -1;
    if (d->n_spans == d->max_spans) {
        d->overflow++;
        return -1;
    }
    return next_mark(d);
}

void mr_device_trace_end(mr_device_trace *d, const char *cat, const char *name, int begin) {
    if (d == NULL || begin < 0) return;
    if (d->n_spans == d->max_spans) {
        d->overflow++;
        return;
    }
    const int b = next_mark(d);
    if (b < 0) return;
    d->spans[d->n_spans++] = (span){.cat = cat, .name = name, .a = begin, .b = b};
}

mr_status mr_device_trace_flush(mr_device_trace *d, const char *step_name, mr_error *err) {
    if (d == NULL || !d->armed) return MR_OK;
    d->armed = 0;
    if (d->st != MR_OK) {
        *err = d->err;
        d->st = MR_OK;
        return err->status;
    }
    if (d->n_marks == 0) return MR_OK;
    const int last = d->n_marks - 1;
    double s;
    MR_CHECK(mr_backend_mark_seconds(d->be, last, last, &s, err)); /* waits for it */
    const double t_last = mr_now_s();
    for (int i = 0; i < d->n_spans; i++) {
        const span *p = &d->spans[i];
        double sa, sb;
        MR_CHECK(mr_backend_mark_seconds(d->be, p->a, last, &sa, err));
        MR_CHECK(mr_backend_mark_seconds(d->be, p->b, last, &sb, err));
        mr_trace_record(d->lane, p->cat, p->name, t_last - sa, t_last - sb, -1);
    }
    MR_CHECK(mr_backend_mark_seconds(d->be, 0, last, &s, err));
    mr_trace_record(d->lane, "step", step_name, t_last - s, t_last, -1);
    /* spans past the step's room: counted with the lane's dropped events */
    if (d->overflow) mr_trace_drop(d->lane, d->overflow);
    d->overflow = 0;
    return MR_OK;
}
