/* report_json.c: mirrored_compare --json (report_json.h) through the
 * streaming writer of runtime/json.h. */
#include "launch/compare/report_json.h"

#include <math.h>

#include "runtime/json.h"

/* A number, or null where absent (has 0) or not finite. */
static void number(mr_json *j, int has, double v) {
    mr_json_double(j, has ? v : NAN, "%.10g");
}

/* "key": {"a": .., "b": .., "b_minus_a": ..} (or "b_over_a"), null where absent. */
static void metric(mr_json *j, const char *key, int has_a, double a, int has_b, double b,
                   int ratio) {
    mr_json_key(j, key);
    mr_json_begin_object(j, MR_JSON_INLINE);
    mr_json_key(j, "a");
    number(j, has_a, a);
    mr_json_key(j, "b");
    number(j, has_b, b);
    if (ratio) {
        mr_json_key(j, "b_over_a");
        number(j, has_a && has_b && a > 0, b / a);
    } else {
        mr_json_key(j, "b_minus_a");
        number(j, has_a && has_b, b - a);
    }
    mr_json_end_object(j);
}

static void row_metrics(mr_json *j, const mr_cmp_row *a, const mr_cmp_row *b) {
    static const mr_cmp_metric ms[] = {MR_CMP_LOSS, MR_CMP_ACCURACY, MR_CMP_VAL_LOSS,
                                       MR_CMP_VAL_ACCURACY, MR_CMP_SAMPLES_PER_SEC};
    for (int i = 0; i < 5; i++) {
        mr_cmp_metric m = ms[i];
        metric(j, mr_cmp_metric_names[m], mr_cmp_row_has(a, m), a->v[m], mr_cmp_row_has(b, m),
               b->v[m], m == MR_CMP_SAMPLES_PER_SEC);
    }
}

static void run(mr_json *j, const char *key, const mr_cmp_run *r) {
    mr_json_key(j, key);
    mr_json_begin_object(j, MR_JSON_INLINE);
    mr_json_key(j, "label");
    mr_json_string(j, r->label);
    mr_json_key(j, "file");
    mr_json_string(j, r->path);
    mr_json_key(j, "epochs");
    mr_json_int(j, r->n);
    mr_json_end_object(j);
}

static void only(mr_json *j, const char *key, const mr_cmp_result *c, int which_a) {
    mr_json_key(j, key);
    mr_json_begin_array(j, MR_JSON_INLINE);
    for (int i = 0; i < c->n_all; i++)
        if (mr_cmp_only_in(&c->all[i], which_a)) mr_json_int(j, c->all[i].epoch);
    mr_json_end_array(j);
}

mr_status mr_cmp_write_json(FILE *f, const mr_cmp_result *c, const char *path, mr_error *err) {
    mr_json j;
    mr_json_init(&j, f, 2);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    run(&j, "a", c->a);
    run(&j, "b", c->b);
    mr_json_key(&j, "epochs_in_common");
    mr_json_int(&j, c->n_common);
    only(&j, "only_in_a", c, 1);
    only(&j, "only_in_b", c, 0);
    mr_json_key(&j, "per_epoch");
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    for (int i = 0; i < c->n_all; i++) {
        const mr_cmp_pair *p = &c->all[i];
        if (!p->a || !p->b) continue;
        mr_json_begin_object(&j, MR_JSON_INLINE);
        mr_json_key(&j, "epoch");
        mr_json_int(&j, p->epoch);
        row_metrics(&j, p->a, p->b);
        mr_json_end_object(&j);
    }
    mr_json_end_array(&j);
    const mr_cmp_pair *last = mr_cmp_last_common(c);
    mr_json_key(&j, "summary");
    mr_json_begin_object(&j, MR_JSON_INLINE);
    mr_json_key(&j, "epoch");
    mr_json_int(&j, last->epoch);
    row_metrics(&j, last->a, last->b);
    int tp = c->tp_epochs > 0;
    metric(&j, "throughput", tp, c->tp_a, tp, c->tp_b, 1);
    mr_json_key(&j, "throughput_epochs");
    mr_json_int(&j, c->tp_epochs);
    mr_json_end_object(&j);
    mr_json_end_object(&j);
    if (mr_json_finish(&j) != 0)
        return mr_error_set(err, MR_ERR_RUNTIME, "--json %s: cannot write", path);
    return MR_OK;
}
