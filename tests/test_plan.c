/* test_plan.c: the batch plan (strategies/plan.h, mr_plan_make) as a pure
 * function of [net] and the job's shape: how the global batch splits over
 * replicas x accumulate, the learning-rate factor, steps per epoch, and the
 * configurations it refuses; the rate it starts a fit with
 * (mr_plan_learning_rate's schedule itself: test_strategy.c); and the
 * gradient buckets' boundaries (mr_plan_buckets). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "strategies/plan.h"
#include "tests/testutil.h"

/* A .cfg with these [net] lines (the model does not matter to the plan). */
static void config(mr_config *cfg, const char *net) {
    char text[1024];
    snprintf(text, sizeof text,
             "[net]\n%s\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=3\n"
             "[dense]\nunits=2\nactivation=softmax\n",
             net);
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, cfg, &err) == MR_OK, "%s", err.msg);
}

START_TEST(batch_per_replica_scales_the_rate) {
    mr_config cfg;
    config(&cfg, "batch=4\nlearning_rate=0.01\nepochs=3");
    mr_fit_plan p;
    mr_error err = {0};
    ck_assert_int_eq(mr_plan_make(&cfg, 6, 3, 2, 100, &p, &err), MR_OK);
    ck_assert_int_eq(p.replicas, 6);
    ck_assert_int_eq(p.local_replicas, 3);
    ck_assert_int_eq(p.processes, 2);
    ck_assert_int_eq(p.batch, 4);
    ck_assert_int_eq(p.accumulate, 1);
    ck_assert_int_eq(p.global_batch, 24);
    ck_assert_int_eq(p.fixed_global, 0);
    ck_assert_float_eq(p.base_lr, 0.01f);
    ck_assert_float_eq(p.lr_factor, 6.0f); /* linear: global batch / batch */
    ck_assert_int_eq(p.epochs, 3);
    ck_assert_int_eq(p.steps_per_epoch, 5); /* ceil(100 / 24): the last batch partial */
    /* the rate starts at the scaled one without warmup */
    ck_assert_float_eq(mr_plan_learning_rate(&p, 0.0), 0.01f * 6.0f);
    /* lr_scaling = none: the .cfg's rate on any replica count */
    mr_config_free(&cfg);
    config(&cfg, "batch=4\nlr_scaling=none");
    ck_assert_int_eq(mr_plan_make(&cfg, 6, 6, 1, 100, &p, &err), MR_OK);
    ck_assert_float_eq(p.lr_factor, 1.0f);
    /* one replica: factor 1 either way */
    mr_config_free(&cfg);
    config(&cfg, "batch=4");
    ck_assert_int_eq(mr_plan_make(&cfg, 1, 1, 1, 100, &p, &err), MR_OK);
    ck_assert_float_eq(p.lr_factor, 1.0f);
    ck_assert_int_eq(p.steps_per_epoch, 25);
    /* training set not known yet (evaluation): no steps, no bound */
    ck_assert_int_eq(mr_plan_make(&cfg, 1, 1, 1, 0, &p, &err), MR_OK);
    ck_assert_int_eq(p.steps_per_epoch, 0);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(global_batch_fixed_by_the_cfg) {
    mr_config cfg;
    config(&cfg, "global_batch=24\naccumulate=2\nlearning_rate=0.1\n"
                 "lr_schedule=cosine\nlr_alpha=0.5");
    mr_fit_plan p;
    mr_error err = {0};
    ck_assert_int_eq(mr_plan_make(&cfg, 3, 3, 1, 48, &p, &err), MR_OK);
    ck_assert_int_eq(p.batch, 4); /* 24 / (3 replicas x 2 micro-batches) */
    ck_assert_int_eq(p.accumulate, 2);
    ck_assert_int_eq(p.global_batch, 24);
    ck_assert_int_eq(p.fixed_global, 1);
    ck_assert_float_eq(p.lr_factor, 1.0f); /* the same batch on any R: the same rate */
    ck_assert_float_eq(p.warmup_epochs, 0.0f);
    ck_assert_int_eq(p.schedule, MR_LR_SCHEDULE_COSINE);
    ck_assert_float_eq(p.lr_alpha, 0.5f);
    ck_assert_int_eq(p.steps_per_epoch, 2);
    /* on another replica count: another batch per replica, the same global batch */
    ck_assert_int_eq(mr_plan_make(&cfg, 6, 2, 3, 48, &p, &err), MR_OK);
    ck_assert_int_eq(p.batch, 2);
    ck_assert_int_eq(p.global_batch, 24);
    mr_config_free(&cfg);
}
END_TEST

/* mr_plan_make refuses with MR_ERR_CONFIG, a message holding both parts,
 * and *out untouched. */
static void refused(const char *net, int R, int P, int64_t n, const char *part1,
                    const char *part2) {
    mr_config cfg;
    config(&cfg, net);
    mr_fit_plan p = {.batch = -7};
    mr_error err = {0};
    ck_assert_int_eq(mr_plan_make(&cfg, R, R / P, P, n, &p, &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "t.cfg: ") == err.msg && strstr(err.msg, part1) &&
                      strstr(err.msg, part2) && !strchr(err.msg, '\n'),
                  "%s", err.msg);
    ck_assert_int_eq(p.batch, -7);
    mr_config_free(&cfg);
}

/* lr_schedule = steps: the scaled rate times 1 before the first boundary,
 * then each factor from its boundary on (an update at progress >=
 * boundary: the first update of epoch 31 for boundary 30); fractional
 * boundaries; after a warmup, the ramp goes to the scaled rate first. */
START_TEST(steps_schedule) {
    mr_config cfg;
    config(&cfg, "global_batch=8\nlearning_rate=0.1\nepochs=90\nlr_schedule=steps\n"
                 "lr_boundaries=30, 60\nlr_factors=0.1,0.01");
    mr_fit_plan p;
    mr_error err = {0};
    ck_assert_int_eq(mr_plan_make(&cfg, 2, 2, 1, 100, &p, &err), MR_OK);
    ck_assert_int_eq(p.boundaries.n, 2);
    const double at[] = {0.0, 29.99, 30.0, 45.5, 59.999, 60.0, 89.9};
    const float want[] = {0.1f,        0.1f,         0.1f * 0.1f, 0.1f * 0.1f,
                          0.1f * 0.1f, 0.1f * 0.01f, 0.1f * 0.01f};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        ck_assert_msg(mr_plan_learning_rate(&p, at[i]) == want[i], "at %g: %g, not %g", at[i],
                      (double)mr_plan_learning_rate(&p, at[i]), (double)want[i]);
    mr_config_free(&cfg);
    /* a fractional boundary inside a warmup: the ramp, then the factor */
    config(&cfg, "batch=4\nlearning_rate=0.01\nwarmup_epochs=2\nlr_schedule=steps\n"
                 "lr_boundaries=0.5\nlr_factors=0.5");
    ck_assert_int_eq(mr_plan_make(&cfg, 4, 4, 1, 100, &p, &err), MR_OK);
    ck_assert_float_eq(mr_plan_learning_rate(&p, 0.0), 0.01f);
    ck_assert_float_eq(mr_plan_learning_rate(&p, 2.0), 0.04f * 0.5f);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(refusals) {
    refused("global_batch=10", 4, 1, 100, "global_batch=10 does not divide evenly over 4 replicas",
            "");
    refused("global_batch=2", 4, 4, 100, "global_batch=2 is smaller than 4 replicas on 4 processes",
            "needs at least one example");
    refused("global_batch=12\naccumulate=2", 4, 2, 100,
            "does not divide evenly over 4 replicas on 2 processes", " x accumulate micro-batches");
    refused("batch=60", 4, 1, 100, "the global batch (240) is larger than the training set",
            "(100 examples)");
    /* a warmup ramps to the scaled rate; where the rate is never
     * scaled it would announce a ramp and keep the rate constant */
    refused("global_batch=24\nwarmup_epochs=1", 4, 1, 100, "warmup_epochs=1 with global_batch",
            "never scaled");
    refused("batch=4\nlr_scaling=none\nwarmup_epochs=0.5", 4, 1, 100,
            "warmup_epochs=0.5 with lr_scaling=none", "never scaled");
    /* evaluation (no training set) plans a checkpoint's .cfg: no warmup there */
    mr_config cfg;
    config(&cfg, "global_batch=24\nwarmup_epochs=1");
    mr_fit_plan p;
    mr_error err = {0};
    ck_assert_int_eq(mr_plan_make(&cfg, 4, 4, 1, 0, &p, &err), MR_OK);
    mr_config_free(&cfg);
    /* the correct count must stay an exact float: G <= 2^24 */
    refused("batch=1048576\naccumulate=8", 4, 1, 0, "the global batch (33554432) is larger than",
            "16777216");
}
END_TEST

/* The buckets: boundaries at layer ends, in backward order, each bucket at
 * least bucket_floats; what is left after the last goes in the final
 * all-reduce. Four layers of 10, 0, 30 and 5 trainable floats, laid out in
 * reverse order: layer 3 at 0, layer 2 at 5, layer 1 at 35, layer 0 at 35. */
START_TEST(buckets_at_layer_ends) {
    const int64_t offset[4] = {35, 35, 5, 0};
    int64_t ends[3];
    /* after layer 3: [0, 5) final; after layer 2: [0, 35); after layer 1 (no weights): the same */
    ck_assert_int_eq(mr_plan_buckets(offset, 4, 1, ends), 2);
    ck_assert_int_eq(ends[0], 5);
    ck_assert_int_eq(ends[1], 35);
    /* 6 floats: layer 3's 5 are too few, layers 3 and 2 together make one */
    ck_assert_int_eq(mr_plan_buckets(offset, 4, 6, ends), 1);
    ck_assert_int_eq(ends[0], 35);
    /* 31 floats: the first boundary at 35; layer 0's 10 stay for the final all-reduce */
    ck_assert_int_eq(mr_plan_buckets(offset, 4, 31, ends), 1);
    ck_assert_int_eq(ends[0], 35);
    /* more than the layer ends reach, 0, or one layer: no boundary */
    ck_assert_int_eq(mr_plan_buckets(offset, 4, 36, ends), 0);
    ck_assert_int_eq(mr_plan_buckets(offset, 4, 0, ends), 0);
    ck_assert_int_eq(mr_plan_buckets(offset + 3, 1, 1, ends), 0);
}
END_TEST

/* The default: 25 MiB of floats on 2 or more replicas that overlap (GPUs),
 * else none. */
START_TEST(default_buckets) {
    const size_t mib25 = (size_t)25 * 1024 * 1024 / sizeof(float);
    ck_assert_uint_eq(mr_plan_default_bucket_floats(2, 1), mib25);
    ck_assert_uint_eq(mr_plan_default_bucket_floats(64, 1), mib25);
    ck_assert_uint_eq(mr_plan_default_bucket_floats(1, 1), 0);
    ck_assert_uint_eq(mr_plan_default_bucket_floats(2, 0), 0);
    ck_assert_uint_eq(mr_plan_default_bucket_floats(8, 0), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, batch_per_replica_scales_the_rate);
    tcase_add_test(tc, global_batch_fixed_by_the_cfg);
    tcase_add_test(tc, steps_schedule);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, buckets_at_layer_ends);
    tcase_add_test(tc, default_buckets);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
