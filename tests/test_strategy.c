/* test_strategy.c: the replica manager and the step semantics.
 *
 * The central property (docs/architecture.md, "The step"): R replicas at batch B compute the same
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
#include <signal.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "runtime/dmem_impl.h"
#include "strategies/strategy.h"
#include "strategies/check_sync.h"
#include "tests/strategyutil.h"
#include "tests/testutil.h"

static float *train(const su_run *o, int64_t *np, mr_status *status, mr_error *err) {
    return su_train(o, np, NULL, status, err);
}

static float *train_ok(const su_run *o, int64_t *np) {
    return su_train_ok(o, np, NULL);
}

/* R replicas x B == 1 replica x R*B after 20 steps. */
static void check_equivalent(const char *text, const char *net_extra, int R, int K) {
    const int B = 4;
    int64_t n = 20 * (int64_t)B * R * K;
    char extra[256];
    snprintf(extra, sizeof extra, "%s\naccumulate=%d", net_extra, K);
    su_run many = {.text = text, .net_extra = extra, .replicas = R, .batch = B, .n = n};
    su_run one = {.text = text, .net_extra = net_extra, .replicas = 1, .batch = B * R * K, .n = n};
    int64_t na, nb;
    float *a = train_ok(&many, &na), *b = train_ok(&one, &nb);
    ck_assert_int_eq(na, nb);
    double d = tu_rel_diff(a, b, (size_t)na);
    ck_assert_msg(d < SU_BOUND, "R=%d K=%d: relative difference %g", R, K, d);
    free(a), free(b);
}

START_TEST(mlp_sgd_equivalence) {
    check_equivalent(su_mlp_text, su_sgd, 2, 1);
    check_equivalent(su_mlp_text, su_sgd, 4, 1);
}
END_TEST

START_TEST(mlp_adam_equivalence) {
    check_equivalent(su_mlp_text, su_adam, 2, 1);
    check_equivalent(su_mlp_text, su_adam, 4, 1);
}
END_TEST

START_TEST(cnn_sgd_equivalence) {
    check_equivalent(su_cnn_text, su_sgd, 2, 1);
    check_equivalent(su_cnn_text, su_sgd, 4, 1);
}
END_TEST

START_TEST(cnn_adam_equivalence) {
    check_equivalent(su_cnn_text, su_adam, 2, 1);
    check_equivalent(su_cnn_text, su_adam, 4, 1);
}
END_TEST

START_TEST(accumulate_equivalence) {
    check_equivalent(su_mlp_text, su_adam, 2, 2); /* R=2, accumulate=2 == R=1 at 4B */
    check_equivalent(su_cnn_text, su_sgd, 2, 2);
}
END_TEST

/* The update's options act on the all-reduced gradients, so they keep the
 * equivalence: clipping by norm (per weight and global, norms small enough
 * to clip at every step), clipvalue, weight decay, RMSprop and AdamW. */
START_TEST(clipping_and_decay_equivalence) {
    check_equivalent(su_mlp_text,
                     "optimizer=rmsprop\nlearning_rate=0.01\nmomentum=0.5\nclipnorm=0.01", 2, 1);
    check_equivalent(su_cnn_text,
                     "optimizer=adamw\nlearning_rate=0.01\nweight_decay=0.1\nglobal_clipnorm=0.01",
                     4, 1);
    check_equivalent(su_mlp_text, "optimizer=sgd\nlearning_rate=0.1\nclipvalue=0.001", 2, 2);
}
END_TEST

/* SyncBatchNormalization and dropout keyed by global sample position keep
 * the equivalence exact for BN models too. */
START_TEST(syncbn_dropout_equivalence) {
    check_equivalent(su_bn_text, su_sgd, 2, 1);
}
END_TEST

/* A residual graph (name =, input =, [add] from =, with SyncBN): the
 * same equivalence. */
START_TEST(residual_equivalence) {
    check_equivalent(su_res_text, su_sgd, 2, 1);
    check_equivalent(su_res_text, su_adam, 4, 1);
}
END_TEST

/* [net] class_weight: each example's loss weighted by its class, still
 * divided by the global batch, so R x B == 1 x R*B, weights and reported
 * loss; and the weights change the training (an unweighted run ends
 * elsewhere). */
START_TEST(class_weight_equivalence) {
    char net[128];
    snprintf(net, sizeof net, "%s\nclass_weight = 0.5, 2, 0, 1.5", su_sgd);
    check_equivalent(su_mlp_text, net, 2, 1);
    check_equivalent(su_cnn_text, net, 4, 1);
    check_equivalent(su_mlp_text, net, 2, 2);
    su_run two = {.text = su_mlp_text, .net_extra = net, .replicas = 2, .batch = 4, .n = 160};
    su_run one = {.text = su_mlp_text, .net_extra = net, .replicas = 1, .batch = 8, .n = 160};
    su_run plain = {.text = su_mlp_text, .net_extra = su_sgd, .replicas = 1, .batch = 8, .n = 160};
    int64_t na, nb, nc;
    mr_epoch_logs la, lb, lc;
    float *a = su_train_ok(&two, &na, &la), *b = su_train_ok(&one, &nb, &lb);
    float *c = su_train_ok(&plain, &nc, &lc);
    ck_assert_msg(fabs(la.loss - lb.loss) < 1e-5 * lb.loss, "loss %g vs %g", la.loss, lb.loss);
    ck_assert_msg(tu_rel_diff(b, c, (size_t)nb) > 1e-3, "class_weight changed nothing");
    ck_assert_msg(fabs(lb.loss - lc.loss) > 1e-3, "loss %g, unweighted %g", lb.loss, lc.loss);
    free(a), free(b), free(c);
}
END_TEST

/* loss = binary_crossentropy (one sigmoid output, labels 0 and 1; from_logits on a linear
 * one; smoothed; class weighted): R x B == 1 x R*B, weights and reported loss. */
START_TEST(binary_crossentropy_equivalence) {
    const char *text = "[net]\nbatch=4\nlr_scaling=none\nseed=5\nloss=binary_crossentropy\n%s\n"
                       "[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=6,6,1\n[flatten]\n"
                       "[dense]\nunits=16\nactivation=relu\n[dense]\nunits=1\nactivation=sigmoid\n";
    const char *logits = "[net]\nbatch=4\nlr_scaling=none\nseed=5\nloss=binary_crossentropy\n"
                         "from_logits=1\nlabel_smoothing=0.1\n%s\n[data]\ntrain_images=a\n"
                         "train_labels=b\n[input]\nshape=6,6,1\n[flatten]\n[dense]\nunits=16\n"
                         "activation=relu\n[dense]\nunits=1\n";
    char weighted[128];
    snprintf(weighted, sizeof weighted, "%s\nclass_weight = 0.5, 2", su_sgd);
    const struct {
        const char *text, *net;
        int R;
    } cases[] = {{text, su_sgd, 2}, {text, su_adam, 4}, {logits, su_sgd, 2}, {text, weighted, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int R = cases[c].R, B = 4;
        su_run many = {.text = cases[c].text,
                       .net_extra = cases[c].net,
                       .replicas = R,
                       .batch = B,
                       .n = 20 * B * R,
                       .binary = 1};
        su_run one = many;
        one.replicas = 1, one.batch = B * R;
        int64_t na, nb;
        mr_epoch_logs la, lb;
        float *a = su_train_ok(&many, &na, &la), *b = su_train_ok(&one, &nb, &lb);
        ck_assert_int_eq(na, nb);
        const double d = tu_rel_diff(a, b, (size_t)na);
        ck_assert_msg(d < SU_BOUND, "case %zu: relative difference %g", c, d);
        ck_assert_msg(fabs(la.loss - lb.loss) < 1e-5 * lb.loss && la.accuracy == lb.accuracy,
                      "case %zu: loss %g vs %g, accuracy %g vs %g", c, la.loss, lb.loss,
                      la.accuracy, lb.accuracy);
        ck_assert_msg(lb.accuracy > 0.0 && lb.accuracy <= 1.0, "accuracy %g", lb.accuracy);
        free(a), free(b);
    }
}
END_TEST

/* Multi-label binary_crossentropy (3 sigmoid outputs, multi-hot labels (n, 3); from_logits on a
 * linear one, smoothed): R x B == 1 x R*B, weights, reported loss and binary accuracy (matched
 * outputs over examples x 3: a multiple of 1 / (n x 3), not of 1 / n). */
START_TEST(multi_label_bce_equivalence) {
    const char *text = "[net]\nbatch=4\nlr_scaling=none\nseed=5\nloss=binary_crossentropy\n%s\n"
                       "[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=6,6,1\n[flatten]\n"
                       "[dense]\nunits=16\nactivation=relu\n[dense]\nunits=3\nactivation=sigmoid\n";
    const char *logits = "[net]\nbatch=4\nlr_scaling=none\nseed=5\nloss=binary_crossentropy\n"
                         "from_logits=1\nlabel_smoothing=0.1\n%s\n[data]\ntrain_images=a\n"
                         "train_labels=b\n[input]\nshape=6,6,1\n[flatten]\n[dense]\nunits=16\n"
                         "activation=relu\n[dense]\nunits=3\n";
    const struct {
        const char *text, *net;
        int R;
    } cases[] = {{text, su_sgd, 2}, {text, su_adam, 4}, {logits, su_sgd, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int R = cases[c].R, B = 4;
        su_run many = {.text = cases[c].text,
                       .net_extra = cases[c].net,
                       .replicas = R,
                       .batch = B,
                       .n = 20 * B * R,
                       .n_val = 2 * B * R,
                       .multi_hot = 3};
        su_run one = many;
        one.replicas = 1, one.batch = B * R;
        int64_t na, nb;
        mr_epoch_logs la, lb;
        float *a = su_train_ok(&many, &na, &la), *b = su_train_ok(&one, &nb, &lb);
        ck_assert_int_eq(na, nb);
        const double d = tu_rel_diff(a, b, (size_t)na);
        ck_assert_msg(d < SU_BOUND, "case %zu: relative difference %g", c, d);
        ck_assert_msg(fabs(la.loss - lb.loss) < 1e-5 * lb.loss && la.accuracy == lb.accuracy &&
                          la.val_accuracy == lb.val_accuracy,
                      "case %zu: loss %g vs %g, accuracy %g vs %g", c, la.loss, lb.loss,
                      la.accuracy, lb.accuracy);
        /* an accuracy of matched outputs: in (0, 1], and not a whole count over the examples */
        const double n_train = (double)(many.n - many.n_val), seen = lb.accuracy * n_train * 3;
        ck_assert_msg(lb.accuracy > 0.0 && lb.accuracy <= 1.0 && fabs(seen - round(seen)) < 1e-6,
                      "case %zu: accuracy %g is no count over %g x 3 outputs", c, lb.accuracy,
                      n_train);
        ck_assert_msg(lb.val_accuracy > 0.0 && lb.val_accuracy <= 1.0, "val accuracy %g",
                      lb.val_accuracy);
        free(a), free(b);
    }
}
END_TEST

/* BatchNormalization with per-replica statistics (sync=0): after a step
 * every replica holds the same moving statistics, the mean over replicas
 * of what each replica's batch made of them (docs/architecture.md, "Batch normalisation"). The
 * expectation is computed here from each shard alone. */
START_TEST(bn_moving_statistics_averaged) {
    char text[2048];
    snprintf(text, sizeof text, "%s", su_bn_text);
    char *sync = strstr(text, "sync=1");
    ck_assert_ptr_nonnull(sync);
    sync[5] = '0';
    const int R = 2, B = 4;
    su_run o = {.text = text,
                .net_extra = "optimizer=sgd\nshuffle=0",
                .replicas = R,
                .batch = B,
                .n = R * B}; /* one step */
    int64_t np;
    float *got = train_ok(&o, &np); /* su_train: every replica holds these bits */
    /* each shard alone, from the same initial weights */
    char full[2048];
    snprintf(full, sizeof full, text, o.net_extra);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(full, "t.cfg", NULL, &cfg, &err), MR_OK);
    mr_dataset ds;
    su_make_data(&ds, o.n);
    float *want = NULL;
    int64_t ns = 0, off = 0;
    for (int r = 0; r < R; r++) {
        mr_model m;
        ck_assert_int_eq(mr_model_init(&m, tu_cpu_backend(), &cfg, B, 0, &err), MR_OK);
        ck_assert_int_eq(mr_model_init_weights(&m, 5, &err), MR_OK);
        int64_t rows[4];
        int32_t labels[4];
        for (int i = 0; i < B; i++)
            rows[i] = r * B + i;
        mr_dataset_fill(&ds, rows, B, NULL, mr_model_input_host(&m), labels);
        ck_assert_int_eq(mr_model_input_upload(&m, B, &err), MR_OK);
        m.run.seed = 5, m.run.step = 0, m.run.sample_base = r * B;
        ck_assert_int_eq(mr_model_forward(&m, B, 1, &err), MR_OK);
        ns = m.n_state, off = m.n_params;
        if (want == NULL) want = calloc((size_t)ns, sizeof(float));
        const float *state = mr_dfloat_ptr(m.state); /* CPU device memory is host memory */
        for (int64_t i = 0; i < ns; i++)
            want[i] += state[i];
        mr_model_free(&m);
    }
    ck_assert_int_eq(np, off + ns);
    for (int64_t i = 0; i < ns; i++)
        want[i] *= 1.0f / (float)R;
    double d = tu_rel_diff(got + off, want, (size_t)ns);
    ck_assert_msg(d < 1e-6, "moving statistics differ from the replicas' mean by %g", d);
    /* and they are not what one shard alone gives (the averaging matters) */
    free(got), free(want);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
}
END_TEST

/* The epoch's loss and accuracy that replica 0 reports are over the whole
 * global batch (the sums ride the all-reduce), not its own shard's. */
START_TEST(epoch_metrics_are_global) {
    const int B = 4;
    su_run two = {.text = su_mlp_text, .net_extra = su_adam, .replicas = 2, .batch = B, .n = 160};
    su_run one = {
        .text = su_mlp_text, .net_extra = su_adam, .replicas = 1, .batch = 2 * B, .n = 160};
    int64_t na, nb;
    mr_epoch_logs la, lb;
    float *a = su_train_ok(&two, &na, &la), *b = su_train_ok(&one, &nb, &lb);
    ck_assert_msg(fabs(la.loss - lb.loss) < 1e-5 * lb.loss, "loss %g vs %g", la.loss, lb.loss);
    ck_assert_msg(fabs(la.accuracy - lb.accuracy) < 1.5 / 160, "accuracy %g vs %g", la.accuracy,
                  lb.accuracy);
    ck_assert(lb.loss > 0.1 && lb.accuracy > 0.0);
    free(a), free(b);
}
END_TEST

START_TEST(partial_last_batch) {
    /* 83 examples, G = 8: ten full batches and one of 3, split 2 + 1 */
    su_run many = {.text = su_mlp_text, .net_extra = su_adam, .replicas = 2, .batch = 4, .n = 83};
    su_run one = {.text = su_mlp_text, .net_extra = su_adam, .replicas = 1, .batch = 8, .n = 83};
    int64_t na, nb;
    float *a = train_ok(&many, &na), *b = train_ok(&one, &nb);
    double d = tu_rel_diff(a, b, (size_t)na);
    ck_assert_msg(d < SU_BOUND, "partial batch: %g", d);
    /* a last batch smaller than the replica count (81 = 10 x 8 + 1): one replica idles */
    many.n = one.n = 81;
    many.replicas = 4, many.batch = 2;
    free(a), free(b);
    a = train_ok(&many, &na), b = train_ok(&one, &nb);
    d = tu_rel_diff(a, b, (size_t)na);
    ck_assert_msg(d < SU_BOUND, "tiny last batch: %g", d);
    free(a), free(b);
    /* the same with SyncBN: the idle replica still joins the statistics' collectives */
    many.text = one.text = su_bn_text;
    many.net_extra = one.net_extra = su_sgd;
    a = train_ok(&many, &na), b = train_ok(&one, &nb);
    d = tu_rel_diff(a, b, (size_t)na);
    ck_assert_msg(d < SU_BOUND, "tiny last batch, SyncBN: %g", d);
    free(a), free(b);
}
END_TEST

START_TEST(two_runs_bitwise_identical) {
    su_run o = {.text = su_cnn_text, .net_extra = su_adam, .replicas = 2, .batch = 4, .n = 160};
    int64_t na, nb;
    float *a = train_ok(&o, &na), *b = train_ok(&o, &nb);
    ck_assert(memcmp(a, b, sizeof(float) * (size_t)na) == 0);
    free(a), free(b);
}
END_TEST

START_TEST(buckets_do_not_change_the_result) {
    su_run o = {.text = su_mlp_text, .net_extra = su_adam, .replicas = 2, .batch = 4, .n = 160};
    int64_t na, nb;
    float *a = train_ok(&o, &na);
    o.bucket_floats = 50; /* a bucket per layer */
    float *b = train_ok(&o, &nb);
    ck_assert(memcmp(a, b, sizeof(float) * (size_t)na) == 0);
    free(a), free(b);
}
END_TEST

START_TEST(check_sync_names_replica_and_layer) {
    su_run o = {.text = su_mlp_text,
                .net_extra = su_adam,
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

/* Replicas whose contexts say their memory is not host memory (the host
 * then copies the batch in, the metrics and --check-sync hashes out, as it
 * must for a GPU, and loads each shard while the device would still be
 * computing the one before: two input buffers in turn) train to the same
 * bits, SyncBN, BN state averaging and dropout included, with gradient
 * accumulation and validation between epochs, synthetic batches made by
 * the context's input kernel included; and --check-sync still catches a
 * diverged replica. */
/* Trains o in place and staged (o->staged ignored): the same bits, and the
 * same last epoch's logs. */
static void staged_same_bits(su_run o, const char *what) {
    int64_t na, nb;
    mr_epoch_logs la, lb;
    o.staged = 0;
    float *a = su_train_ok(&o, &na, &la);
    o.staged = 1;
    float *b = su_train_ok(&o, &nb, &lb);
    ck_assert_int_eq(na, nb);
    ck_assert_msg(memcmp(a, b, sizeof(float) * (size_t)na) == 0, "%s: weights differ", what);
    ck_assert(la.epoch == lb.epoch && la.has_val == lb.has_val);
    ck_assert(la.epoch == (o.epochs ? o.epochs : 1) - 1 && la.has_val == (o.n_val > 0));
    ck_assert(la.loss == lb.loss && la.accuracy == lb.accuracy);
    ck_assert(la.val_loss == lb.val_loss && la.val_accuracy == lb.val_accuracy);
    free(a), free(b);
}

START_TEST(staged_host_access_same_bits) {
    char extra[256];
    snprintf(extra, sizeof extra, "%s\naccumulate=2", su_adam);
    staged_same_bits((su_run){.text = su_bn_text,
                              .net_extra = extra,
                              .replicas = 2,
                              .batch = 4,
                              .n = 103,
                              .epochs = 2,
                              .n_val = 21},
                     "accumulate, 2 epochs, validation");
    staged_same_bits((su_run){.text = su_cnn_text,
                              .net_extra = su_adam,
                              .replicas = 2,
                              .batch = 4,
                              .n = 83,
                              .check_sync = 3},
                     "cnn");
    staged_same_bits((su_run){.text = su_bn_text,
                              .net_extra = su_adam,
                              .replicas = 2,
                              .batch = 4,
                              .n = 83,
                              .check_sync = 3},
                     "syncbn");
    /* synthetic examples: the staged replicas make their batches with the
     * input kernel (mr_model_input_synthetic), the others convert the
     * host's bytes; validation converts on both */
    staged_same_bits((su_run){.text = su_res_text,
                              .net_extra = extra,
                              .replicas = 2,
                              .batch = 4,
                              .n = 103,
                              .epochs = 2,
                              .n_val = 21,
                              .synthetic = 1},
                     "synthetic, residual, accumulate, validation");
    su_run o = {.text = su_mlp_text,
                .net_extra = su_adam,
                .replicas = 3,
                .batch = 4,
                .n = 240,
                .check_sync = 5,
                .perturb = 10,
                .staged = 1};
    int64_t np;
    mr_status st;
    mr_error err = {0};
    float *p = train(&o, &np, &st, &err);
    ck_assert_int_eq(st, MR_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "step 10") && strstr(err.msg, "replica 2") &&
                      strstr(err.msg, "dense_1"),
                  "%s", err.msg);
    free(p);
}
END_TEST

START_TEST(batch_errors) {
    int64_t np;
    mr_status st;
    mr_error err = {0};
    su_run o = {
        .text = su_mlp_text, .net_extra = "global_batch=10", .replicas = 4, .batch = 4, .n = 100};
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
                       "[dense]\nunits=2\nactivation=softmax\n";
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    mr_strategy_opts so = {.devices = {.kind = "cpu", .count = 3}, .seed = 1};
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
    snprintf(text, sizeof text, su_mlp_text, "");
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, cfg, &err) == MR_OK, "%s", err.msg);
    su_make_data(ds, n);
}

START_TEST(evaluate_exact_with_uneven_shards) {
    mr_config cfg;
    mr_error err = {0};
    mr_dataset ds;
    mlp_with_data(&cfg, &ds, 37);
    double l1, a1, l3, a3;
    for (int R = 1; R <= 3; R += 2) {
        mr_strategy_opts so = {.devices = {.kind = "cpu", .count = R}, .seed = 3};
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

/* [net] top_k and per_class: the probabilities of each evaluated row (37, 4) */
static void keep_probs(void *user, int64_t row, int n, const float *probs) {
    memcpy((float *)user + row * 4, probs, sizeof(float) * (size_t)n * 4);
}

/* The last epoch's logs, and a copy of its per-class counts (the buffer moves on). */
typedef struct kept_epoch {
    mr_epoch_logs logs;
    double confusion[16];
} kept_epoch;

static void keep_epoch(void *user, const mr_epoch_logs *logs) {
    kept_epoch *k = user;
    k->logs = *logs;
    ck_assert_ptr_nonnull(logs->val_confusion);
    ck_assert_int_eq(logs->classes, 4);
    memcpy(k->confusion, logs->val_confusion, sizeof k->confusion);
}

/* [net] top_k and per_class: the top-k count and the confusion matrix
 * summed over 3 replicas' uneven shards are those of 1 replica, the top-k
 * count is the one the rows' probabilities give, and fit's validation
 * reports what an evaluation of the same rows does */
START_TEST(top_k_and_per_class_exact_over_replicas) {
    mr_config cfg;
    mr_error err = {0};
    mr_dataset ds;
    char text[2048];
    snprintf(text, sizeof text, su_mlp_text, "top_k=2\nper_class=1\nvalidation_split=0.25");
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    su_make_data(&ds, 37);
    double top[2], conf[2][16], acc[2];
    float probs[37 * 4];
    for (int R = 1, i = 0; R <= 3; R += 2, i++) {
        mr_strategy_opts so = {.devices = {.kind = "cpu", .count = R}, .seed = 3};
        mr_strategy *s;
        ck_assert_int_eq(mr_strategy_create(&cfg, &so, 37, &s, &err), MR_OK);
        mr_eval_detail d = {
            .classes = 4, .confusion = conf[i], .on_probs = keep_probs, .user = probs};
        double loss;
        ck_assert_int_eq(mr_strategy_evaluate_detail(s, &ds, 0, 37, &loss, &acc[i], &d, &err),
                         MR_OK);
        top[i] = d.top_k_accuracy;
        mr_strategy_destroy(s);
    }
    ck_assert_double_eq(top[0], top[1]);
    ck_assert_mem_eq(conf[0], conf[1], sizeof conf[0]);
    int64_t want = 0;
    double diag = 0.0, total = 0.0;
    for (int r = 0; r < 37; r++) {
        int above = 0;
        for (int j = 0; j < 4; j++)
            above += probs[r * 4 + j] > probs[r * 4 + ds.y[r]];
        want += above < 2;
    }
    for (int c = 0; c < 16; c++)
        total += conf[0][c], diag += c % 5 == 0 ? conf[0][c] : 0.0;
    ck_assert_double_eq(top[0] * 37, (double)want);
    ck_assert_double_eq(total, 37.0);
    ck_assert_double_eq(diag, round(acc[0] * 37)); /* the correct ones */
    ck_assert(top[0] >= acc[0]);
    /* fit: the validation rows [28, 37) after the last epoch */
    mr_strategy_opts so = {.devices = {.kind = "cpu", .count = 3}, .seed = 3};
    mr_strategy *s;
    ck_assert_int_eq(mr_strategy_create(&cfg, &so, 28, &s, &err), MR_OK);
    kept_epoch kept = {0};
    mr_fit_callbacks cb = {.user = &kept, .on_epoch_end = keep_epoch};
    ck_assert_int_eq(mr_strategy_fit(s, &ds, 28, 28, 9, 2, NULL, NULL, &cb, &err), MR_OK);
    ck_assert_ptr_null(mr_strategy_state(s)->history[1].val_confusion);
    double vconf[16], vloss, vacc;
    mr_eval_detail d = {.classes = 4, .confusion = vconf};
    ck_assert_int_eq(mr_strategy_evaluate_detail(s, &ds, 28, 9, &vloss, &vacc, &d, &err), MR_OK);
    ck_assert_double_eq(kept.logs.val_top_k, d.top_k_accuracy);
    ck_assert_mem_eq(kept.confusion, vconf, sizeof vconf);
    mr_strategy_destroy(s);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
}
END_TEST

/* on_step runs on replica 0's thread: record the cores it may run on. */
static void record_affinity(void *user, const mr_step_info *info) {
    (void)info;
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
    mr_strategy_opts so = {.devices = {.kind = "cpu", .count = R}, .seed = 3};
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
    ck_assert_int_eq(mr_strategy_fit(s, &ds, n, 0, 0, 1, NULL, NULL, &cb, &err), MR_OK);
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

/* A planned stop: the flag, set during update 3 (on_step), is read before
 * update 4's all-reduce; every replica stops after update 4, on_stop sees
 * that update once, the fit returns MR_OK and says it stopped; a fit
 * without the flag does not. */
typedef struct stop_probe {
    atomic_int flag;
    int calls;
    int64_t at;
} stop_probe;

static void raise_at_3(void *user, const mr_step_info *info) {
    stop_probe *p = user;
    if (info->global_step == 3) atomic_store(&p->flag, 1);
}

static mr_status note_stop(void *user, const mr_fit_state *st, const mr_model *m, float lr,
                           mr_error *err) {
    (void)m, (void)lr, (void)err;
    stop_probe *p = user;
    p->calls++;
    p->at = st->global_step;
    return MR_OK;
}

START_TEST(stop_flag_stops_every_replica_at_one_update) {
    mr_config cfg;
    mr_error err = {0};
    mr_dataset ds;
    const int64_t n = 64; /* 8 updates of 2 x 4 */
    mlp_with_data(&cfg, &ds, n);
    mr_strategy_opts so = {.devices = {.kind = "cpu", .count = 2}, .seed = 3};
    mr_strategy *s;
    ck_assert_int_eq(mr_strategy_create(&cfg, &so, n, &s, &err), MR_OK);
    stop_probe p = {0};
    mr_fit_callbacks cb = {
        .user = &p, .on_step = raise_at_3, .save_user = &p, .stop = &p.flag, .on_stop = note_stop};
    ck_assert_int_eq(mr_strategy_fit(s, &ds, n, 0, 0, 2, NULL, NULL, &cb, &err), MR_OK);
    ck_assert_int_eq(mr_strategy_stopped(s), 1);
    ck_assert_int_eq(p.calls, 1);
    ck_assert_int_eq(p.at, 4);
    ck_assert_int_eq(mr_strategy_state(s)->global_step, 4);
    ck_assert_int_eq(mr_strategy_state(s)->step, 4);
    ck_assert_int_eq(mr_strategy_state(s)->epoch, 0);
    /* every replica stopped at the same update: they hold the same bits */
    uint64_t h0, h1;
    ck_assert_int_eq(mr_params_hash(mr_strategy_replica(s, 0), &h0, &err), MR_OK);
    ck_assert_int_eq(mr_params_hash(mr_strategy_replica(s, 1), &h1, &err), MR_OK);
    ck_assert(h0 == h1);
    /* no flag: the whole fit */
    mr_fit_callbacks plain = {0};
    ck_assert_int_eq(mr_strategy_fit(s, &ds, n, 0, 0, 1, NULL, NULL, &plain, &err), MR_OK);
    ck_assert_int_eq(mr_strategy_stopped(s), 0);
    ck_assert_int_eq(mr_strategy_state(s)->epoch, 1);
    mr_strategy_destroy(s);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
}
END_TEST

/* The caller's thread is replica 0, which computes with flush-to-zero; the
 * caller gets its own floating-point environment back: a denormal is still
 * one after a fit and an evaluation. */
START_TEST(caller_keeps_its_denormals) {
    mr_config cfg;
    mr_error err = {0};
    mr_dataset ds;
    mlp_with_data(&cfg, &ds, 64);
    mr_strategy_opts so = {.devices = {.kind = "cpu", .count = 2}, .seed = 3};
    mr_strategy *s;
    ck_assert_int_eq(mr_strategy_create(&cfg, &so, 64, &s, &err), MR_OK);
    ck_assert_int_eq(mr_strategy_fit(s, &ds, 64, 0, 0, 1, NULL, NULL, NULL, &err), MR_OK);
    double loss, acc;
    ck_assert_int_eq(mr_strategy_evaluate(s, &ds, 0, 64, &loss, &acc, &err), MR_OK);
    volatile float tiny = 1e-40f; /* below 2^-126: a denormal */
    ck_assert(tiny * 1.0f != 0.0f);
    ck_assert(tiny / 2.0f != 0.0f);
    mr_strategy_destroy(s);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
}
END_TEST

/* stop_after_epoch: asked after each epoch's on_epoch_end; a non-zero
 * verdict ends the fit after that epoch on every replica, as early stopping */
typedef struct epoch_probe {
    int seen, stop_at;
} epoch_probe;

static void count_epoch(void *user, const mr_epoch_logs *logs) {
    epoch_probe *p = user;
    ck_assert_int_eq(logs->epoch, p->seen);
    p->seen++;
}

static int stop_at_epoch(void *user, const mr_epoch_logs *logs) {
    const epoch_probe *p = user;
    return logs->epoch == p->stop_at;
}

START_TEST(stop_after_epoch_ends_every_replica_there) {
    mr_config cfg;
    mr_error err = {0};
    mr_dataset ds;
    const int64_t n = 64;
    mlp_with_data(&cfg, &ds, n);
    mr_strategy_opts so = {.devices = {.kind = "cpu", .count = 2}, .seed = 3};
    mr_strategy *s;
    ck_assert_int_eq(mr_strategy_create(&cfg, &so, n, &s, &err), MR_OK);
    epoch_probe p = {.stop_at = 1};
    mr_fit_callbacks cb = {
        .user = &p, .on_epoch_end = count_epoch, .stop_after_epoch = stop_at_epoch};
    ck_assert_int_eq(mr_strategy_fit(s, &ds, n, 0, 0, 4, NULL, NULL, &cb, &err), MR_OK);
    ck_assert_int_eq(p.seen, 2);
    ck_assert_int_eq(mr_strategy_stopped(s), 0);
    ck_assert_int_eq(mr_strategy_fit_end(s).early_stopped, 2);
    ck_assert_int_eq(mr_strategy_state(s)->epoch, 2);
    ck_assert_int_eq(mr_strategy_state(s)->global_step, 2 * 8);
    uint64_t h0, h1;
    ck_assert_int_eq(mr_params_hash(mr_strategy_replica(s, 0), &h0, &err), MR_OK);
    ck_assert_int_eq(mr_params_hash(mr_strategy_replica(s, 1), &h1, &err), MR_OK);
    ck_assert(h0 == h1);
    /* a verdict of 0 every epoch: the whole fit */
    p = (epoch_probe){.stop_at = -1};
    ck_assert_int_eq(mr_strategy_fit(s, &ds, n, 0, 0, 3, NULL, NULL, &cb, &err), MR_OK);
    ck_assert_int_eq(p.seen, 3);
    ck_assert_int_eq(mr_strategy_fit_end(s).early_stopped, 0);
    mr_strategy_destroy(s);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
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
    tcase_add_test(tc, clipping_and_decay_equivalence);
    tcase_add_test(tc, syncbn_dropout_equivalence);
    tcase_add_test(tc, residual_equivalence);
    tcase_add_test(tc, class_weight_equivalence);
    tcase_add_test(tc, binary_crossentropy_equivalence);
    tcase_add_test(tc, multi_label_bce_equivalence);
    tcase_add_test(tc, bn_moving_statistics_averaged);
    tcase_add_test(tc, epoch_metrics_are_global);
    tcase_add_test(tc, partial_last_batch);
    tcase_add_test(tc, two_runs_bitwise_identical);
    tcase_add_test(tc, buckets_do_not_change_the_result);
    tcase_add_test(tc, check_sync_names_replica_and_layer);
    tcase_add_test(tc, staged_host_access_same_bits);
    tcase_add_test(tc, batch_errors);
    tcase_add_test(tc, learning_rate_schedule);
    tcase_add_test(tc, linear_scaling_in_plan);
    tcase_add_test(tc, evaluate_exact_with_uneven_shards);
    tcase_add_test(tc, top_k_and_per_class_exact_over_replicas);
    tcase_add_test(tc, replicas_pinned_one_per_core);
    tcase_add_test(tc, stop_flag_stops_every_replica_at_one_update);
    tcase_add_test(tc, stop_after_epoch_ends_every_replica_there);
    tcase_add_test(tc, caller_keeps_its_denormals);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
