/* test_strategy.c: the replica manager and the step semantics.
 *
 * The central property (DESIGN.md): R replicas at batch B compute the same
 * update as 1 replica at batch R x B, up to float summation order. We train
 * k = 20 steps on small generated data and compare the weights.
 *
 * Bound: the only difference is the order of float additions: within one
 * replica's GEMMs over B rows vs R*B rows, and the all-reduce's sum over
 * replicas. One step's gradients then differ by a few ulps (~1e-7 relative);
 * SGD carries that forward linearly, and Adam divides by sqrt(v), which can
 * amplify a relative difference of a tiny gradient component. Measured over
 * these runs, differences stay below ~1e-6 of the largest weight; we check
 * 2e-5, an order of magnitude of margin, while a semantic error (a loss
 * normalised by B instead of R*B, a missing replica's gradient, a wrong
 * shard) changes the weights by 1e-3 or more after the first step. */
#include <check.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/rng.h"
#include "../strategies/strategy.h"
#include "testutil.h"

#define BOUND 2e-5

static const char *mlp_text = "[net]\nbatch=4\nlr_scaling=none\nseed=5\n%s\n"
                              "[data]\ntrain_images=a\ntrain_labels=b\n"
                              "[input]\nshape=6,6,1\n[flatten]\n"
                              "[dense]\nunits=16\nactivation=relu\n"
                              "[dense]\nunits=4\nactivation=softmax\n";

static const char *cnn_text = "[net]\nbatch=4\nlr_scaling=none\nseed=5\n%s\n"
                              "[data]\ntrain_images=a\ntrain_labels=b\n"
                              "[input]\nshape=6,6,1\n"
                              "[conv2d]\nfilters=4\nsize=3\nactivation=relu\n"
                              "[maxpool]\nsize=2\n[flatten]\n"
                              "[dense]\nunits=4\nactivation=softmax\n";

static const char *bn_text =
    "[net]\nbatch=4\nlr_scaling=none\nseed=5\n%s\n"
    "[data]\ntrain_images=a\ntrain_labels=b\n"
    "[input]\nshape=6,6,1\n"
    "[conv2d]\nfilters=4\nsize=3\n[batchnorm]\nsync=1\n[activation]\nactivation=relu\n"
    "[dropout]\nrate=0.3\n[flatten]\n"
    "[dense]\nunits=4\nactivation=softmax\n";

/* n examples of 6x6x1 float images with 4 classes that depend on the image. */
static void make_data(mr_dataset *ds, int64_t n) {
    memset(ds, 0, sizeof *ds);
    ds->scale = 1.0f;
    ds->x.dtype = MR_DTYPE_F32;
    ds->x.ndim = 4;
    ds->x.dims[0] = n, ds->x.dims[1] = 6, ds->x.dims[2] = 6, ds->x.dims[3] = 1;
    float *x = malloc(sizeof(float) * (size_t)(n * 36));
    mr_rng_uniform(77, 9, 0, 0, 0.0f, 1.0f, x, n * 36);
    ds->x.data = x;
    ds->y = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        float a = x[i * 36 + 7] + x[i * 36 + 8], b = x[i * 36 + 27] + x[i * 36 + 28];
        ds->y[i] = (a > 1.0f) * 2 + (b > 1.0f);
    }
    ds->n = n;
    ds->row = 36;
}

typedef struct run_opts {
    const char *text;
    const char *net_extra; /* more [net] lines */
    int replicas;
    int batch;
    int64_t n;
    size_t bucket_floats;
    int check_sync;
    int64_t perturb;
} run_opts;

/* Trains one epoch; returns replica 0's parameters (malloc'd) and their count. */
static float *train(const run_opts *o, int64_t *np, mr_status *status, mr_error *err) {
    char text[2048];
    snprintf(text, sizeof text, o->text, o->net_extra ? o->net_extra : "");
    mr_config cfg;
    mr_error perr = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &perr) == MR_OK, "%s", perr.msg);
    cfg.net.batch = o->batch;
    mr_dataset ds;
    make_data(&ds, o->n);
    mr_strategy_opts so = {0};
    so.devices.kind = MR_DEVICE_CPU;
    so.devices.count = o->replicas;
    for (int r = 0; r < o->replicas; r++)
        so.devices.ordinals[r] = r;
    so.seed = 5;
    so.bucket_floats = o->bucket_floats;
    so.check_sync = o->check_sync;
    so.debug_perturb_step = o->perturb;
    mr_strategy *s = NULL;
    float *out = NULL;
    *status = mr_strategy_create(&cfg, &so, o->n, &s, err);
    if (*status == MR_OK) {
        *status = mr_strategy_fit(s, &ds, o->n, 0, 0, 1, NULL, NULL, err);
        mr_model *m = mr_strategy_replica(s, 0);
        *np = m->n_params;
        out = malloc(sizeof(float) * (size_t)(m->n_params + m->n_state));
        memcpy(out, m->params, sizeof(float) * (size_t)m->n_params);
        if (m->n_state) memcpy(out + m->n_params, m->state, sizeof(float) * (size_t)m->n_state);
        *np += m->n_state;
        /* every replica holds the same bits */
        for (int r = 1; r < o->replicas && *status == MR_OK; r++) {
            mr_model *q = mr_strategy_replica(s, r);
            ck_assert(memcmp(q->params, m->params, sizeof(float) * (size_t)m->n_params) == 0);
            if (m->n_state)
                ck_assert(memcmp(q->state, m->state, sizeof(float) * (size_t)m->n_state) == 0);
        }
    }
    mr_strategy_destroy(s);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
    return out;
}

static float *train_ok(const run_opts *o, int64_t *np) {
    mr_status st;
    mr_error err = {0};
    float *p = train(o, np, &st, &err);
    ck_assert_msg(st == MR_OK, "%s", err.msg);
    return p;
}

/* R replicas x B == 1 replica x R*B after 20 steps. */
static void check_equivalent(const char *text, const char *net_extra, int R, int K) {
    const int B = 4;
    int64_t n = 20 * (int64_t)B * R * K;
    char extra[256];
    snprintf(extra, sizeof extra, "%s\naccumulate=%d", net_extra, K);
    run_opts many = {.text = text, .net_extra = extra, .replicas = R, .batch = B, .n = n};
    run_opts one = {
        .text = text, .net_extra = net_extra, .replicas = 1, .batch = B * R * K, .n = n};
    int64_t na, nb;
    float *a = train_ok(&many, &na), *b = train_ok(&one, &nb);
    ck_assert_int_eq(na, nb);
    double d = tu_rel_diff(a, b, (size_t)na);
    ck_assert_msg(d < BOUND, "R=%d K=%d: relative difference %g", R, K, d);
    free(a), free(b);
}

static const char *sgd = "optimizer=sgd\nlearning_rate=0.1\nmomentum=0.9";
static const char *adam = "optimizer=adam\nlearning_rate=0.01";

START_TEST(mlp_sgd_equivalence) {
    check_equivalent(mlp_text, sgd, 2, 1);
    check_equivalent(mlp_text, sgd, 4, 1);
}
END_TEST

START_TEST(mlp_adam_equivalence) {
    check_equivalent(mlp_text, adam, 2, 1);
    check_equivalent(mlp_text, adam, 4, 1);
}
END_TEST

START_TEST(cnn_sgd_equivalence) {
    check_equivalent(cnn_text, sgd, 2, 1);
    check_equivalent(cnn_text, sgd, 4, 1);
}
END_TEST

START_TEST(cnn_adam_equivalence) {
    check_equivalent(cnn_text, adam, 2, 1);
    check_equivalent(cnn_text, adam, 4, 1);
}
END_TEST

START_TEST(accumulate_equivalence) {
    check_equivalent(mlp_text, adam, 2, 2); /* R=2, accumulate=2 == R=1 at 4B */
    check_equivalent(cnn_text, sgd, 2, 2);
}
END_TEST

/* SyncBatchNormalization and dropout keyed by global sample position keep
 * the equivalence exact for BN models too. */
START_TEST(syncbn_dropout_equivalence) {
    check_equivalent(bn_text, sgd, 2, 1);
}
END_TEST

START_TEST(partial_last_batch) {
    /* 83 examples, G = 8: ten full batches and one of 3, split 2 + 1 */
    run_opts many = {.text = mlp_text, .net_extra = adam, .replicas = 2, .batch = 4, .n = 83};
    run_opts one = {.text = mlp_text, .net_extra = adam, .replicas = 1, .batch = 8, .n = 83};
    int64_t na, nb;
    float *a = train_ok(&many, &na), *b = train_ok(&one, &nb);
    double d = tu_rel_diff(a, b, (size_t)na);
    ck_assert_msg(d < BOUND, "partial batch: %g", d);
    /* a last batch smaller than the replica count (81 = 10 x 8 + 1): one replica idles */
    many.n = one.n = 81;
    many.replicas = 4, many.batch = 2;
    free(a), free(b);
    a = train_ok(&many, &na), b = train_ok(&one, &nb);
    d = tu_rel_diff(a, b, (size_t)na);
    ck_assert_msg(d < BOUND, "tiny last batch: %g", d);
    free(a), free(b);
    /* the same with SyncBN: the idle replica still joins the statistics' collectives */
    many.text = one.text = bn_text;
    many.net_extra = one.net_extra = sgd;
    a = train_ok(&many, &na), b = train_ok(&one, &nb);
    d = tu_rel_diff(a, b, (size_t)na);
    ck_assert_msg(d < BOUND, "tiny last batch, SyncBN: %g", d);
    free(a), free(b);
}
END_TEST

START_TEST(two_runs_bitwise_identical) {
    run_opts o = {.text = cnn_text, .net_extra = adam, .replicas = 2, .batch = 4, .n = 160};
    int64_t na, nb;
    float *a = train_ok(&o, &na), *b = train_ok(&o, &nb);
    ck_assert(memcmp(a, b, sizeof(float) * (size_t)na) == 0);
    free(a), free(b);
}
END_TEST

START_TEST(buckets_do_not_change_the_result) {
    run_opts o = {.text = mlp_text, .net_extra = adam, .replicas = 2, .batch = 4, .n = 160};
    int64_t na, nb;
    float *a = train_ok(&o, &na);
    o.bucket_floats = 50; /* a bucket per layer */
    float *b = train_ok(&o, &nb);
    ck_assert(memcmp(a, b, sizeof(float) * (size_t)na) == 0);
    free(a), free(b);
}
END_TEST

START_TEST(check_sync_names_replica_and_layer) {
    run_opts o = {.text = mlp_text,
                  .net_extra = adam,
                  .replicas = 3,
                  .batch = 4,
                  .n = 240,
                  .check_sync = 5,
                  .perturb = 10};
    int64_t np;
    mr_status st;
    mr_error err = {0};
    float *p = train(&o, &np, &st, &err);
    ck_assert_int_eq(st, MR_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "step 10") && strstr(err.msg, "replica 2") &&
                      strstr(err.msg, "dense_1"),
                  "%s", err.msg);
    free(p);
    /* without the perturbation the same check passes */
    o.perturb = 0;
    p = train_ok(&o, &np);
    free(p);
}
END_TEST

START_TEST(batch_errors) {
    int64_t np;
    mr_status st;
    mr_error err = {0};
    run_opts o = {
        .text = mlp_text, .net_extra = "global_batch=10", .replicas = 4, .batch = 4, .n = 100};
    float *p = train(&o, &np, &st, &err);
    ck_assert_int_eq(st, MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "global_batch=10") && strstr(err.msg, "4 replicas"), "%s",
                  err.msg);
    free(p);
    mr_error_clear(&err);
    o.net_extra = "global_batch=200";
    o.replicas = 2;
    p = train(&o, &np, &st, &err);
    ck_assert_int_eq(st, MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "larger than the training set"), "%s", err.msg);
    free(p);
    /* global_batch = 8 over 2 replicas: batch 4 each, same as batch=4 */
    o.net_extra = "global_batch=8";
    o.batch = 99;
    int64_t na, nb;
    float *a = train_ok(&o, &na);
    o.net_extra = "";
    o.batch = 4;
    float *b = train_ok(&o, &nb);
    ck_assert(memcmp(a, b, sizeof(float) * (size_t)na) == 0);
    free(a), free(b);
}
END_TEST

START_TEST(learning_rate_schedule) {
    mr_fit_plan p = {.replicas = 4, .base_lr = 0.1f, .lr_factor = 4.0f, .warmup_epochs = 2.0f};
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 0.0), 0.1f, 1e-7f);
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 1.0), 0.25f, 1e-7f);
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 2.0), 0.4f, 1e-7f);
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 5.0), 0.4f, 1e-7f);
    p.warmup_epochs = 0.0f;
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 0.0), 0.4f, 1e-7f);
    /* cosine after a 2-epoch warmup, 10 epochs in all: peak 0.4 at epoch 2,
     * halfway (epoch 6) (0.4 + 0.04) / 2, then 0.1 x 0.4 at the end */
    p.warmup_epochs = 2.0f;
    p.schedule = MR_LR_SCHEDULE_COSINE;
    p.lr_alpha = 0.1f;
    p.epochs = 10;
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 1.0), 0.25f, 1e-7f);
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 2.0), 0.4f, 1e-7f);
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 6.0), 0.22f, 1e-6f);
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 4.0), 0.04f + 0.36f * 0.8535534f, 1e-6f);
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 10.0), 0.04f, 1e-7f);
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 12.0), 0.04f, 1e-7f);
    /* no warmup, alpha 0: from the peak down to 0 */
    p.warmup_epochs = 0.0f;
    p.lr_alpha = 0.0f;
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 0.0), 0.4f, 1e-7f);
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 5.0), 0.2f, 1e-6f);
    ck_assert_float_eq_tol(mr_plan_learning_rate(&p, 10.0), 0.0f, 1e-7f);
}
END_TEST

START_TEST(linear_scaling_in_plan) {
    const char *text = "[net]\nbatch=4\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=3\n"
                       "[dense]\nunits=2\n";
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    mr_strategy_opts so = {.devices = {.kind = MR_DEVICE_CPU, .count = 3}, .seed = 1};
    mr_strategy *s;
    ck_assert_int_eq(mr_strategy_create(&cfg, &so, 100, &s, &err), MR_OK);
    const mr_fit_plan *p = mr_strategy_plan(s);
    ck_assert_int_eq(p->global_batch, 12);
    ck_assert_float_eq(p->lr_factor, 3.0f);
    ck_assert_int_eq(p->steps_per_epoch, 9);
    /* replicas start identical (broadcast from replica 0) */
    mr_model *a = mr_strategy_replica(s, 0), *b = mr_strategy_replica(s, 2);
    ck_assert(memcmp(a->params, b->params, sizeof(float) * (size_t)a->n_params) == 0);
    mr_strategy_destroy(s);
    mr_config_free(&cfg);
}
END_TEST

/* The MLP config (no [net] extras) and n examples of generated data. */
static void mlp_with_data(mr_config *cfg, mr_dataset *ds, int64_t n) {
    char text[2048];
    snprintf(text, sizeof text, mlp_text, "");
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, cfg, &err) == MR_OK, "%s", err.msg);
    make_data(ds, n);
}

START_TEST(evaluate_exact_with_uneven_shards) {
    mr_config cfg;
    mr_error err = {0};
    mr_dataset ds;
    mlp_with_data(&cfg, &ds, 37);
    double l1, a1, l3, a3;
    for (int R = 1; R <= 3; R += 2) {
        mr_strategy_opts so = {.devices = {.kind = MR_DEVICE_CPU, .count = R}, .seed = 3};
        mr_strategy *s;
        ck_assert_int_eq(mr_strategy_create(&cfg, &so, 37, &s, &err), MR_OK);
        ck_assert_int_eq(
            mr_strategy_evaluate(s, &ds, 0, 37, R == 1 ? &l1 : &l3, R == 1 ? &a1 : &a3, &err),
            MR_OK);
        mr_strategy_destroy(s);
    }
    ck_assert_double_eq_tol(l1, l3, 1e-6);
    ck_assert_double_eq(a1, a3);
    ck_assert_double_eq(a1 * 37, round(a1 * 37)); /* a count over all 37, not a shard */
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
}
END_TEST

/* on_step runs on replica 0's thread: record the cores it may run on. */
static void record_affinity(void *user, int epoch, int64_t step, int64_t steps, double loss,
                            double acc) {
    (void)epoch, (void)step, (void)steps, (void)loss, (void)acc;
    sched_getaffinity(0, sizeof(cpu_set_t), user);
}

/* With one core per replica and no core left over, each replica is pinned
 * to its own core of the process's mask, replica 0 (the caller) too while
 * the job runs, and the caller gets its whole mask back afterwards; with
 * more or fewer replicas than cores, nothing is pinned. */
static void check_pinning(int R, const cpu_set_t *mask) {
    mr_config cfg;
    mr_error err = {0};
    mr_dataset ds;
    const int64_t n = 8 * (int64_t)R; /* two steps of batch 4 */
    mlp_with_data(&cfg, &ds, n);
    ck_assert_int_eq(sched_setaffinity(0, sizeof *mask, mask), 0);
    mr_strategy_opts so = {.devices = {.kind = MR_DEVICE_CPU, .count = R}, .seed = 3};
    mr_strategy *s;
    ck_assert_int_eq(mr_strategy_create(&cfg, &so, n, &s, &err), MR_OK);
    int pinned = R > 1 && R == CPU_COUNT(mask);
    for (int r = 0; r < R; r++) {
        int cpu = mr_strategy_replica_cpu(s, r);
        if (!pinned) {
            ck_assert_int_eq(cpu, -1);
            continue;
        }
        ck_assert(cpu >= 0 && CPU_ISSET(cpu, mask));
        for (int q = 0; q < r; q++)
            ck_assert_int_ne(mr_strategy_replica_cpu(s, q), cpu);
    }
    cpu_set_t during, after;
    CPU_ZERO(&during);
    mr_fit_callbacks cb = {.user = &during, .on_step = record_affinity};
    ck_assert_int_eq(mr_strategy_fit(s, &ds, n, 0, 0, 1, NULL, &cb, &err), MR_OK);
    if (pinned) {
        ck_assert_int_eq(CPU_COUNT(&during), 1);
        ck_assert(CPU_ISSET(mr_strategy_replica_cpu(s, 0), &during));
    } else {
        ck_assert(CPU_EQUAL(&during, mask));
    }
    ck_assert_int_eq(sched_getaffinity(0, sizeof after, &after), 0);
    ck_assert(CPU_EQUAL(&after, mask));
    mr_strategy_destroy(s);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
}

START_TEST(replicas_pinned_one_per_core) {
    cpu_set_t all, first;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    int n = CPU_COUNT(&all);
    CPU_ZERO(&first);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &first);
            break;
        }
    if (n >= 2 && n <= MR_MAX_REPLICAS) check_pinning(n, &all); /* one per core: pinned */
    if (n >= 3) check_pinning(2, &all);                         /* cores left over: not pinned */
    if (n < MR_MAX_REPLICAS) check_pinning(n + 1, &all);        /* more replicas than cores */
    check_pinning(2, &first); /* one core for two replicas: not pinned */
    check_pinning(1, &all);   /* one replica: BLAS may use every core */
    ck_assert_int_eq(sched_setaffinity(0, sizeof all, &all), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("strategy");
    TCase *tc = tcase_create("strategy");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, mlp_sgd_equivalence);
    tcase_add_test(tc, mlp_adam_equivalence);
    tcase_add_test(tc, cnn_sgd_equivalence);
    tcase_add_test(tc, cnn_adam_equivalence);
    tcase_add_test(tc, accumulate_equivalence);
    tcase_add_test(tc, syncbn_dropout_equivalence);
    tcase_add_test(tc, partial_last_batch);
    tcase_add_test(tc, two_runs_bitwise_identical);
    tcase_add_test(tc, buckets_do_not_change_the_result);
    tcase_add_test(tc, check_sync_names_replica_and_layer);
    tcase_add_test(tc, batch_errors);
    tcase_add_test(tc, learning_rate_schedule);
    tcase_add_test(tc, linear_scaling_in_plan);
    tcase_add_test(tc, evaluate_exact_with_uneven_shards);
    tcase_add_test(tc, replicas_pinned_one_per_core);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
