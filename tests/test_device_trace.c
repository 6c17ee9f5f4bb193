/* test_device_trace.c: device time on a trace lane (runtime/device_trace.h)
 * over a fake device whose marks read a clock the test sets, so every span
 * is known: each span's duration is the device's seconds between its
 * marks, the step's last mark sits at the flush's host time and the rest
 * that many device seconds before it, a "step" span from the step's first
 * mark holds them all; nothing is marked outside arm..flush; spans past
 * the room are dropped and counted; a mark that fails to queue is
 * reported by the flush with the device's message; off (no lane, or a
 * device without marks) is NULL and every call a no-op. The real marks
 * (CUDA timing events on the emulated GPUs) are tested by
 * test_strategy_gpu and tests/train_gpu_emu.py. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device_trace.h"
#include "tests/testutil.h"

enum { MAX_MARKS = 64 };

/* The fake device: mark i records device_now; mark fail_at fails. */
static double device_now, stamps[MAX_MARKS];
static int reserved, marked, fail_at = -1, waited_for = -1;

static mr_status fake_reserve(mr_backend *be, int n, mr_error *err) {
    (void)be, (void)err;
    ck_assert_int_le(n, MAX_MARKS);
    reserved = n;
    return MR_OK;
}

static mr_status fake_mark(mr_backend *be, int i, mr_error *err) {
    (void)be;
    ck_assert_int_lt(i, reserved);
    if (i == fail_at) return mr_error_set(err, MR_ERR_RUNTIME, "fake:0: the device is gone");
    stamps[i] = device_now;
    marked++;
    return MR_OK;
}

static mr_status fake_seconds(mr_backend *be, int i, int j, double *s, mr_error *err) {
    (void)be, (void)err;
    ck_assert_int_lt(i, reserved);
    ck_assert_int_lt(j, reserved);
    waited_for = j;
    *s = stamps[j] - stamps[i];
    return MR_OK;
}

static const mr_backend_ops fake_ops = {
    .name = "fake", .marks_reserve = fake_reserve, .mark = fake_mark, .mark_seconds = fake_seconds};
static const mr_backend_ops no_marks_ops = {.name = "nomarks"};

static char path[4200];
static mr_trace *trace;
static mr_trace_lane *lane;

static void setup(void) {
    snprintf(path, sizeof path, "%s/d.json", tu_tmpdir());
    mr_error err = {0};
    /* the origin 10 s back: the spans sit up to 3 s before their flush */
    ck_assert_int_eq(mr_trace_create(path, 0, mr_now_s() - 10.0, &trace, &err), MR_OK);
    lane = mr_trace_add_lane(trace, 1000, "replica 0 (fake) device");
    ck_assert_ptr_nonnull(lane);
    device_now = 100.0, reserved = marked = 0, fail_at = waited_for = -1;
}

static void teardown(void) {
    mr_trace_destroy(trace);
}

static const mr_trace_event *event(int64_t k) {
    ck_assert_int_lt(k, atomic_load(&lane->n));
    return &lane->chunk[k / MR_TRACE_CHUNK][k % MR_TRACE_CHUNK];
}

#define NEAR(a, b) ck_assert_msg(fabs((a) - (b)) < 1e-6, "%.9f != %.9f", (double)(a), (double)(b))

/* A step of three spans at known device times (seconds):
 *   arm 100.0 | conv forward 100.5-101.0 | loss 101.25-101.5 |
 *   conv backward 102.0-103.0 (the last mark) */
START_TEST(spans_placed_by_device_seconds) {
    mr_backend be = {.ops = &fake_ops};
    mr_device_trace *d;
    mr_error err = {0};
    ck_assert_int_eq(mr_device_trace_create(&be, lane, 3, &d, &err), MR_OK);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(reserved, 7); /* two a span and the step's first */
    /* not armed: no marks (a validation pass) */
    ck_assert_int_eq(mr_device_trace_begin(d), -1);
    mr_device_trace_end(d, "forward", "conv", -1);
    ck_assert_int_eq(marked, 0);
    mr_device_trace_arm(d);
    ck_assert_int_eq(marked, 1);
    device_now = 100.5;
    int a = mr_device_trace_begin(d);
    device_now = 101.0;
    mr_device_trace_end(d, "forward", "conv", a);
    device_now = 101.25;
    a = mr_device_trace_begin(d);
    device_now = 101.5;
    mr_device_trace_end(d, "loss", "loss", a);
    device_now = 102.0;
    a = mr_device_trace_begin(d);
    device_now = 103.0;
    mr_device_trace_end(d, "backward", "conv", a);
    ck_assert_int_eq(marked, 7);
    ck_assert_int_eq(atomic_load(&lane->n), 0); /* nothing recorded before the flush */
    const double before = mr_now_s();
    ck_assert_int_eq(mr_device_trace_flush(d, "step 1", &err), MR_OK);
    const double after = mr_now_s();
    ck_assert_int_eq(waited_for, 6);
    ck_assert_int_eq(atomic_load(&lane->n), 4);
    const mr_trace_event *step = event(3);
    ck_assert_str_eq(step->cat, "step");
    ck_assert_str_eq(step->name, "step 1");
    /* the last mark at the flush's host time; the first 3 device seconds before */
    ck_assert(step->t1 >= before && step->t1 <= after);
    NEAR(step->t1 - step->t0, 3.0);
    const char *cats[3] = {"forward", "loss", "backward"}, *names[3] = {"conv", "loss", "conv"};
    const double t0[3] = {100.5, 101.25, 102.0}, t1[3] = {101.0, 101.5, 103.0};
    for (int k = 0; k < 3; k++) {
        const mr_trace_event *e = event(k);
        ck_assert_str_eq(e->cat, cats[k]);
        ck_assert_str_eq(e->name, names[k]);
        NEAR(e->t0 - step->t0, t0[k] - 100.0);
        NEAR(e->t1 - step->t0, t1[k] - 100.0);
    }
    /* disarmed: the next pass outside a step marks nothing */
    ck_assert_int_eq(mr_device_trace_begin(d), -1);
    ck_assert_int_eq(mr_device_trace_flush(d, "x", &err), MR_OK);
    ck_assert_int_eq(atomic_load(&lane->n), 4);
    /* the file: valid, nested, named */
    ck_assert_int_eq(mr_trace_write(trace, &err), MR_OK);
    char *script = tu_source_path("tests/trace_check.py"), cmd[9000], *out;
    snprintf(cmd, sizeof cmd, "python3 %s %s", script, path);
    free(script);
    ck_assert_msg(tu_run(cmd, &out) == 0, "%s", out);
    free(out);
    mr_device_trace_destroy(d);
}
END_TEST

/* Room for 2 spans: a third is dropped and counted, the two kept. */
START_TEST(spans_past_the_room_dropped) {
    mr_backend be = {.ops = &fake_ops};
    mr_device_trace *d;
    mr_error err = {0};
    ck_assert_int_eq(mr_device_trace_create(&be, lane, 2, &d, &err), MR_OK);
    mr_device_trace_arm(d);
    for (int k = 0; k < 3; k++) {
        device_now += 1.0;
        int a = mr_device_trace_begin(d);
        ck_assert_int_eq(a, k < 2 ? 1 + 2 * k : -1);
        device_now += 1.0;
        mr_device_trace_end(d, "forward", "d", a);
    }
    ck_assert_int_eq(mr_device_trace_flush(d, "step 1", &err), MR_OK);
    ck_assert_int_eq(atomic_load(&lane->n), 3);
    ck_assert_int_eq(atomic_load(&lane->dropped), 1);
    /* and the file says so */
    ck_assert_int_eq(mr_trace_write(trace, &err), MR_OK);
    char *json = tu_read_file(path, NULL);
    ck_assert_msg(json && strstr(json, "\"dropped\": 1"), "%s", json);
    free(json);
    NEAR(event(2)->t1 - event(2)->t0, 4.0); /* the step: mark 0 to the last kept */
    mr_device_trace_destroy(d);
}
END_TEST

/* A mark the device refuses: the flush says so, in the device's words, and
 * the next step starts clean. */
START_TEST(failed_mark_reported) {
    mr_backend be = {.ops = &fake_ops};
    mr_device_trace *d;
    mr_error err = {0};
    ck_assert_int_eq(mr_device_trace_create(&be, lane, 4, &d, &err), MR_OK);
    fail_at = 2;
    mr_device_trace_arm(d);
    int a = mr_device_trace_begin(d);
    mr_device_trace_end(d, "forward", "d", a); /* mark 2 fails */
    ck_assert_int_eq(mr_device_trace_begin(d), -1);
    ck_assert_int_eq(mr_device_trace_flush(d, "step 1", &err), MR_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "fake:0: the device is gone");
    ck_assert_int_eq(atomic_load(&lane->n), 0);
    fail_at = -1;
    mr_error ok = {0};
    mr_device_trace_arm(d);
    a = mr_device_trace_begin(d);
    mr_device_trace_end(d, "forward", "d", a);
    ck_assert_int_eq(mr_device_trace_flush(d, "step 2", &ok), MR_OK);
    ck_assert_int_eq(atomic_load(&lane->n), 2);
    mr_device_trace_destroy(d);
}
END_TEST

/* Off: no lane, or a device without marks (the CPU). */
START_TEST(off_is_null) {
    mr_backend be = {.ops = &fake_ops}, cpu = {.ops = &no_marks_ops};
    mr_device_trace *d = (mr_device_trace *)&be;
    mr_error err = {0};
    ck_assert_int_eq(mr_device_trace_create(&be, NULL, 4, &d, &err), MR_OK);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(mr_device_trace_create(&cpu, lane, 4, &d, &err), MR_OK);
    ck_assert_ptr_null(d);
    ck_assert(!mr_backend_has_marks(&cpu) && mr_backend_has_marks(&be));
    ck_assert_int_eq(mr_backend_marks_reserve(&cpu, 4, &err), MR_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.msg, "nomarks: no device-time marks");
    mr_device_trace_arm(NULL);
    ck_assert_int_eq(mr_device_trace_begin(NULL), -1);
    mr_device_trace_end(NULL, "forward", "d", 0);
    ck_assert_int_eq(mr_device_trace_flush(NULL, "step 1", &err), MR_OK);
    mr_device_trace_destroy(NULL);
    ck_assert_int_eq(reserved + marked, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("device_trace");
    TCase *tc = tcase_create("device_trace");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, spans_placed_by_device_seconds);
    tcase_add_test(tc, spans_past_the_room_dropped);
    tcase_add_test(tc, failed_mark_reported);
    tcase_add_test(tc, off_is_null);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
