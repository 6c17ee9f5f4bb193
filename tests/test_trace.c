/* test_trace.c: the Chrome trace writer (runtime/trace.h): events of two
 * lanes recorded by their threads while another thread rewrites the file,
 * every rewrite a whole JSON document that Python's json module reads and
 * tests/trace_check.py accepts (names, nesting); ts and dur in
 * microseconds from the origin; args.bytes only where given; a name copied
 * at record time; a lane's chunks filled past one; a path that cannot be
 * written refused at creation with one line naming it; tracing off (NULL)
 * a no-op that reads no clock. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/trace.h"
#include "tests/testutil.h"

static char dir[4096];

static void setup(void) {
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
}

/* tests/trace_check.py on path with extra arguments; returns its exit status, output in *out. */
static int check_file(const char *path, const char *args, char **out) {
    char *script = tu_source_path("tests/trace_check.py");
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "python3 %s %s %s", script, path, args);
    free(script);
    return tu_run(cmd, out);
}

/* The value Python reads at expr (on `d`, the file's JSON), as text. */
static char *py_eval(const char *path, const char *expr) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(%s)' %s", expr,
             path);
    char *out;
    ck_assert_msg(tu_run(cmd, &out) == 0, "%s: %s", cmd, out);
    return out;
}

enum { STEPS = 1100 }; /* 2 lanes x 4 events x 1100: past a chunk (4096) per lane */

typedef struct worker {
    mr_trace_lane *lane;
    double origin;
} worker;

/* One replica's steps: a step of [k, k+1) ms holding a forward and a
 * backward of layer "d" and an all-reduce of 400 bytes, each 0.25 ms. */
static void *record_steps(void *arg) {
    worker *w = arg;
    for (int k = 0; k < STEPS; k++) {
        const double t = w->origin + 1e-3 * k;
        mr_trace_record(w->lane, "forward", "d", t, t + 0.25e-3, -1);
        mr_trace_record(w->lane, "backward", "d", t + 0.25e-3, t + 0.5e-3, -1);
        mr_trace_record(w->lane, "allreduce", "allreduce", t + 0.5e-3, t + 0.75e-3, 400);
        mr_trace_record(w->lane, "step", "step", t, t + 1e-3, -1);
    }
    return NULL;
}

static atomic_int writers_done;

/* Rewrites the file while the lanes record (as replica 0 does at an epoch's end). */
static void *rewrite(void *arg) {
    mr_trace *t = arg;
    while (!atomic_load(&writers_done)) {
        mr_error err = {0};
        ck_assert_int_eq(mr_trace_write(t, &err), MR_OK);
    }
    return NULL;
}

START_TEST(lanes_recorded_while_written) {
    char path[4200];
    snprintf(path, sizeof path, "%s/t.json", dir);
    mr_trace *t;
    mr_error err = {0};
    const double origin = 100.0;
    ck_assert_int_eq(mr_trace_create(path, 3, origin, &t, &err), MR_OK);
    /* the empty trace is there at once, valid, the process named */
    char *out;
    ck_assert_int_eq(check_file(path, "", &out), 1); /* no complete events yet */
    ck_assert_msg(strstr(out, "no complete events"), "%s", out);
    free(out);
    out = py_eval(path, "d[\"traceEvents\"][0][\"args\"][\"name\"], d[\"displayTimeUnit\"]");
    ck_assert_str_eq(out, "rank 3 ms\n");
    free(out);
    worker w[2] = {{mr_trace_add_lane(t, 0, "replica 0 (cpu)"), origin},
                   {mr_trace_add_lane(t, 1, "replica 1 (cpu)"), origin}};
    ck_assert_ptr_nonnull(w[0].lane);
    ck_assert_ptr_nonnull(w[1].lane);
    pthread_t th[3];
    atomic_store(&writers_done, 0);
    pthread_create(&th[2], NULL, rewrite, t);
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, record_steps, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    atomic_store(&writers_done, 1);
    pthread_join(th[2], NULL);
    ck_assert_int_eq(mr_trace_write(t, &err), MR_OK);
    ck_assert_int_eq(check_file(path, "--layers=d", &out), 0);
    ck_assert_msg(strstr(out, "ok: pids 1 threads 2 steps 2200 events 8803"), "%s", out);
    free(out);
    /* the last step of lane 1: ts (1099 ms) and dur (1 ms) in us, pid, tid, no args */
    out = py_eval(path, "[(e[\"ts\"], e[\"dur\"], e[\"pid\"], \"args\" in e) for e in "
                        "d[\"traceEvents\"] if e[\"ph\"] == \"X\" and e[\"tid\"] == 1][-1]");
    ck_assert_str_eq(out, "(1099000.0, 1000.0, 3, False)\n");
    free(out);
    out = py_eval(path, "sorted({e[\"args\"][\"bytes\"] for e in d[\"traceEvents\"] if "
                        "e.get(\"cat\") == \"allreduce\"}), [e[\"args\"][\"name\"] for e in "
                        "d[\"traceEvents\"] if e[\"name\"] == \"thread_name\"]");
    ck_assert_str_eq(out, "[400] ['replica 0 (cpu)', 'replica 1 (cpu)']\n");
    free(out);
    mr_trace_destroy(t);
}
END_TEST

/* A name is copied when recorded (a layer's may go before the file is
 * written); one too long is cut, not overrun. */
START_TEST(names_copied) {
    char path[4200];
    snprintf(path, sizeof path, "%s/n.json", dir);
    mr_trace *t;
    mr_error err = {0};
    ck_assert_int_eq(mr_trace_create(path, 0, 0.0, &t, &err), MR_OK);
    mr_trace_lane *l = mr_trace_add_lane(t, 5, "replica 5 (gpu)");
    char name[128] = "dense_1";
    mr_trace_record(l, "forward", name, 1.0, 2.0, -1);
    strcpy(name, "changed");
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    mr_trace_record(l, "forward", name, 2.0, 3.0, 0);
    ck_assert_int_eq(mr_trace_write(t, &err), MR_OK);
    char *out = py_eval(path, "[(e[\"name\"], e[\"tid\"], e.get(\"args\")) for e in "
                              "d[\"traceEvents\"] if e[\"ph\"] == \"X\"]");
    char want[256];
    snprintf(want, sizeof want, "[('dense_1', 5, None), ('%.*s', 5, {'bytes': 0})]\n",
             MR_TRACE_NAME - 1, name);
    ck_assert_str_eq(out, want);
    free(out);
    mr_trace_destroy(t);
}
END_TEST

START_TEST(unwritable_path) {
    char path[4200];
    snprintf(path, sizeof path, "%s/missing/t.json", dir);
    mr_trace *t = (mr_trace *)&t;
    mr_error err = {0};
    ck_assert_int_eq(mr_trace_create(path, 0, 0.0, &t, &err), MR_ERR_IO);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "cannot write") &&
                      !strchr(err.msg, '\n'),
                  "%s", err.msg);
    ck_assert(!tu_exists(path));
}
END_TEST

/* Tracing off: no lane, no clock read, nothing recorded. */
START_TEST(off_is_null) {
    ck_assert_ptr_null(mr_trace_add_lane(NULL, 0, "x"));
    ck_assert(mr_trace_now(NULL) == 0.0);
    mr_trace_end(NULL, "forward", "x", 0.0); /* no crash: a NULL check */
    mr_trace_destroy(NULL);
    mr_trace_lane l = {0};
    const double t = mr_trace_now(&l);
    ck_assert(t > 0.0 && t <= mr_now_s());
}
END_TEST

int main(void) {
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, lanes_recorded_while_written);
    tcase_add_test(tc, names_copied);
    tcase_add_test(tc, unwritable_path);
    tcase_add_test(tc, off_is_null);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
