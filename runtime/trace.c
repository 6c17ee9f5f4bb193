/* trace.c: the Chrome trace-event file of trace.h: lanes of events that
 * their threads fill without a lock, and the file rewritten whole. */
#include "runtime/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/atomic_file.h"
#include "runtime/json.h"

struct mr_trace {
    char path[MR_ATOMIC_PATH_MAX];
    int pid;
    double origin; /* clock.h seconds of ts 0 */
    int n_lanes;
    mr_trace_lane **lanes; /* (n_lanes) */
};

mr_status mr_trace_create(const char *path, int pid, double origin_s, mr_trace **out,
                          mr_error *err) {
    *out = NULL;
    if (strlen(path) >= MR_ATOMIC_PATH_MAX)
        return mr_error_set(err, MR_ERR_USAGE, "--trace %s: path too long", path);
    mr_trace *t = calloc(1, sizeof *t);
    if (t == NULL) return mr_error_set(err, MR_ERR_NOMEM, "--trace: out of memory");
    snprintf(t->path, sizeof t->path, "%s", path);
    t->pid = pid;
    t->origin = origin_s;
    /* the empty trace now: a path that cannot be written fails before training */
    mr_status st = mr_trace_write(t, err);
    if (st != MR_OK) {
        mr_trace_destroy(t);
        return st;
    }
    *out = t;
    return MR_OK;
}

void mr_trace_destroy(mr_trace *t) {
    if (t == NULL) return;
    for (int i = 0; i < t->n_lanes; i++) {
        for (int c = 0; c < MR_TRACE_CHUNKS; c++)
            free(atomic_load(&t->lanes[i]->chunk[c]));
        free(t->lanes[i]);
    }
    free(t->lanes);
    free(t);
}

mr_trace_lane *mr_trace_add_lane(mr_trace *t, int tid, const char *label) {
    if (t == NULL) return NULL;
    mr_trace_lane **lanes = realloc(t->lanes, sizeof *lanes * (size_t)(t->n_lanes + 1));
    if (lanes == NULL) return NULL;
    t->lanes = lanes;
    mr_trace_lane *l = calloc(1, sizeof *l);
    if (l == NULL) return NULL;
    l->tid = tid;
    snprintf(l->label, sizeof l->label, "%s", label);
    t->lanes[t->n_lanes++] = l;
    return l;
}

void mr_trace_record(mr_trace_lane *l, const char *cat, const char *name, double t0, double t1,
                     int64_t bytes) {
    /* only this lane's thread writes n: a relaxed read of its own count */
    const int64_t i = atomic_load_explicit(&l->n, memory_order_relaxed);
    const int64_t c = i / MR_TRACE_CHUNK;
    if (c >= MR_TRACE_CHUNKS) {
        mr_trace_drop(l, 1);
        return;
    }
    mr_trace_event *chunk = atomic_load_explicit(&l->chunk[c], memory_order_relaxed);
    if (chunk == NULL) {
        chunk = malloc(sizeof *chunk * MR_TRACE_CHUNK);
        if (chunk == NULL) {
            mr_trace_drop(l, 1);
            return;
        }
        atomic_store_explicit(&l->chunk[c], chunk, memory_order_relaxed);
    }
    mr_trace_event *e = &chunk[i % MR_TRACE_CHUNK];
    e->t0 = t0;
    e->t1 = t1;
    e->cat = cat;
    e->bytes = bytes;
    snprintf(e->name, sizeof e->name, "%s", name);
    /* publishes the event and its chunk to mr_trace_write (acquire) */
    atomic_store_explicit(&l->n, i + 1, memory_order_release);
}

void mr_trace_drop(mr_trace_lane *l, int64_t n) {
    atomic_fetch_add_explicit(&l->dropped, n, memory_order_relaxed);
}

/* A metadata event: process_name or thread_name. */
static void write_meta(mr_json *j, const char *what, int pid, int tid, const char *name) {
    mr_json_begin_object(j, MR_JSON_INLINE);
    mr_json_key(j, "name"), mr_json_string(j, what);
    mr_json_key(j, "ph"), mr_json_string(j, "M");
    mr_json_key(j, "ts"), mr_json_int(j, 0);
    mr_json_key(j, "pid"), mr_json_int(j, pid);
    mr_json_key(j, "tid"), mr_json_int(j, tid);
    mr_json_key(j, "args");
    mr_json_begin_object(j, MR_JSON_INLINE);
    mr_json_key(j, "name"), mr_json_string(j, name);
    mr_json_end_object(j);
    mr_json_end_object(j);
}

static void write_event(mr_json *j, const mr_trace *t, int tid, const mr_trace_event *e) {
    mr_json_begin_object(j, MR_JSON_INLINE);
    mr_json_key(j, "name"), mr_json_string(j, e->name);
    mr_json_key(j, "cat"), mr_json_string(j, e->cat);
    mr_json_key(j, "ph"), mr_json_string(j, "X");
    /* microseconds with ns digits: a child and its parent compare exactly
     * as their clock readings did */
    mr_json_key(j, "ts"), mr_json_double(j, (e->t0 - t->origin) * 1e6, "%.3f");
    mr_json_key(j, "dur"), mr_json_double(j, (e->t1 - e->t0) * 1e6, "%.3f");
    mr_json_key(j, "pid"), mr_json_int(j, t->pid);
    mr_json_key(j, "tid"), mr_json_int(j, tid);
    if (e->bytes >= 0) {
        mr_json_key(j, "args");
        mr_json_begin_object(j, MR_JSON_INLINE);
        mr_json_key(j, "bytes"), mr_json_int(j, e->bytes);
        mr_json_end_object(j);
    }
    mr_json_end_object(j);
}

mr_status mr_trace_write(mr_trace *t, mr_error *err) {
    mr_atomic_file af;
    MR_CHECK(mr_atomic_file_open(&af, t->path, err));
    mr_json j;
    mr_json_init(&j, af.f, 2);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_key(&j, "traceEvents");
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    char name[32];
    snprintf(name, sizeof name, "rank %d", t->pid);
    write_meta(&j, "process_name", t->pid, 0, name);
    int64_t dropped = 0;
    for (int i = 0; i < t->n_lanes; i++) {
        const mr_trace_lane *l = t->lanes[i];
        write_meta(&j, "thread_name", t->pid, l->tid, l->label);
        const int64_t n = atomic_load_explicit(&((mr_trace_lane *)l)->n, memory_order_acquire);
        for (int64_t k = 0; k < n; k++) {
            const mr_trace_event *chunk = atomic_load_explicit(
                &((mr_trace_lane *)l)->chunk[k / MR_TRACE_CHUNK], memory_order_relaxed);
            write_event(&j, t, l->tid, &chunk[k % MR_TRACE_CHUNK]);
        }
        dropped += atomic_load_explicit(&((mr_trace_lane *)l)->dropped, memory_order_relaxed);
    }
    mr_json_end_array(&j);
    mr_json_key(&j, "displayTimeUnit"), mr_json_string(&j, "ms");
    if (dropped) {
        /* events missing from the threads (Perfetto shows otherData as metadata) */
        mr_json_key(&j, "otherData");
        mr_json_begin_object(&j, MR_JSON_INLINE);
        mr_json_key(&j, "dropped"), mr_json_int(&j, dropped);
        mr_json_key(&j, "note"), mr_json_string(&j, "events past a thread's room were not kept");
        mr_json_end_object(&j);
    }
    mr_json_end_object(&j);
    if (mr_json_finish(&j) != 0) {
        mr_atomic_file_abort(&af);
        return mr_error_set(err, MR_ERR_IO, "%s: cannot write: %s", t->path, strerror(errno));
    }
    return mr_atomic_file_commit(&af, err);
}
