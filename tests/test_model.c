/* test_model.c: building a model from a .cfg, flat buffers, summary, the
 * whole-model gradient against finite differences, and updates. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../models/loss.h"
#include "../models/model.h"
#include "../runtime/rng.h"
#include "testutil.h"

static const char *mlp_cfg = "[net]\nbatch=8\n[data]\ntrain_images=a\ntrain_labels=b\n"
                             "[input]\nshape=28,28,1\n[flatten]\n"
                             "[dense]\nunits=128\nactivation=relu\n"
                             "[dense]\nunits=64\nactivation=relu\n"
                             "[dense]\nunits=10\nactivation=softmax\n";

static void build(const char *text, mr_config *cfg, mr_model *m, int batch) {
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(m, tu_cpu_backend(), cfg, batch, 2, &err) == MR_OK, "%s", err.msg);
}

START_TEST(mlp_layout_and_summary) {
    mr_config cfg;
    mr_model m;
    build(mlp_cfg, &cfg, &m, 8);
    ck_assert_int_eq(m.n_layers, 4);
    /* Keras: 784*128+128 + 128*64+64 + 64*10+10 = 109386 */
    ck_assert_int_eq(m.n_params, 109386);
    ck_assert_int_eq(m.n_state, 0);
    ck_assert_int_eq(m.fused_softmax, 1);
    ck_assert_int_eq(m.layers[3].logits_out, 1);
    /* reverse layer order: the last layer's kernel first, its bias next */
    ck_assert_ptr_eq(m.layers[3].w[0].data, m.params);
    ck_assert_ptr_eq(m.layers[3].w[1].data, m.params + 640);
    ck_assert_ptr_eq(m.layers[2].w[0].data, m.params + 650);
    ck_assert_ptr_eq(m.layers[1].w[1].data + 128, m.params + m.n_params);
    ck_assert_ptr_eq(m.layers[1].w[0].grad, m.grads + (m.layers[1].w[0].data - m.params));
    ck_assert_str_eq(m.layers[1].name, "dense");
    ck_assert_str_eq(m.layers[2].name, "dense_1");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mr_model_summary(&m, "mlp", f);
    fclose(f);
    ck_assert_msg(strstr(buf, "dense (Dense)") && strstr(buf, "(None, 128)") &&
                      strstr(buf, "100480") && strstr(buf, "Total params: 109,386") &&
                      strstr(buf, "flatten (Flatten)"),
                  "%s", buf);
    free(buf);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(same_seed_same_bits) {
    mr_config cfg;
    mr_model a, b;
    build(mlp_cfg, &cfg, &a, 4);
    mr_error err = {0};
    ck_assert_int_eq(mr_model_init(&b, tu_cpu_backend(), &cfg, 4, 0, &err), MR_OK);
    mr_model_init_weights(&a, 42);
    mr_model_init_weights(&b, 42);
    ck_assert(memcmp(a.params, b.params, sizeof(float) * (size_t)a.n_params) == 0);
    mr_model_init_weights(&b, 43);
    ck_assert(memcmp(a.params, b.params, sizeof(float) * (size_t)a.n_params) != 0);
    mr_model_free(&a);
    mr_model_free(&b);
    mr_config_free(&cfg);
}
END_TEST

/* The whole-model gradient of (sum of losses / norm) against central
 * differences in every parameter of a small model (float forward: see
 * gradcheck.h for the noise; here |L| ~ 1 and h = 1e-3 give ~1e-4). */
static void check_model_gradient(const char *text, uint64_t seed) {
    mr_config cfg;
    mr_model m;
    const int B = 3;
    build(text, &cfg, &m, B);
    mr_model_init_weights(&m, seed);
    mr_rng_uniform(seed, 200, 0, 0, -1.0f, 1.0f, m.params, m.n_params); /* nonzero biases too */
    int32_t labels[3] = {0, 2, 1};
    mr_rng_uniform(seed, 201, 0, 0, 0.0f, 1.0f, m.input, B * m.in_size);
    mr_model_zero_grads(&m);
    double loss = 0.0;
    int64_t correct = 0;
    const float norm = 5.0f; /* a global batch larger than this shard */
    ck_assert_int_eq(mr_model_train_batch(&m, labels, B, norm, &loss, &correct, NULL, NULL), MR_OK);
    ck_assert(loss > 0.0);
    float *ana = malloc(sizeof(float) * (size_t)m.n_params);
    memcpy(ana, m.grads, sizeof(float) * (size_t)m.n_params);
    double maxa = 1e-3, maxd = 0.0;
    int skipped = 0;
    for (int64_t i = 0; i < m.n_params; i++) {
        float keep = m.params[i];
        double l[3];
        float vals[3] = {keep + 1e-3f, keep, keep - 1e-3f};
        for (int k = 0; k < 3; k++) {
            m.params[i] = vals[k];
            l[k] = 0.0;
            int64_t c = 0;
            const float *out = mr_model_forward(&m, B, 1);
            mr_loss_compute(cfg.net.loss, m.fused_softmax, out, labels, B, (int)m.out_size, norm,
                            NULL, &l[k], &c);
            l[k] /= norm;
        }
        m.params[i] = keep;
        double hp = (double)vals[0] - keep, hm = keep - (double)vals[2];
        double fwd = (l[0] - l[1]) / hp, bwd = (l[1] - l[2]) / hm;
        if (fabs(fwd - bwd) > 2e-2 * (1 + fabs(fwd))) { /* a ReLU kink */
            skipped++;
            continue;
        }
        double num = (l[0] - l[2]) / (hp + hm);
        if (fabs(ana[i]) > maxa) maxa = fabs(ana[i]);
        if (fabs(num - ana[i]) > maxd) maxd = fabs(num - ana[i]);
    }
    ck_assert_msg(maxd / maxa < 1e-2, "model gradient error %g (max grad %g)", maxd / maxa, maxa);
    ck_assert_int_le(skipped, m.n_params / 20);
    free(ana);
    mr_model_free(&m);
    mr_config_free(&cfg);
}

START_TEST(model_gradient_sparse_cce) {
    check_model_gradient(
        "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=2,2,2\n[flatten]\n"
        "[dense]\nunits=4\nactivation=tanh\n[dense]\nunits=3\n[activation]\nactivation=softmax\n",
        3);
}
END_TEST

START_TEST(model_gradient_mse) {
    check_model_gradient(
        "[net]\nloss=mse\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=5\n"
        "[dense]\nunits=4\nactivation=sigmoid\n[dense]\nunits=3\nactivation=softmax\n",
        4);
}
END_TEST

START_TEST(model_gradient_cce_relu) {
    check_model_gradient(
        "[net]\nloss=categorical_crossentropy\n[data]\ntrain_images=a\ntrain_labels=b\n"
        "[input]\nshape=6\n[dense]\nunits=5\nactivation=relu\n[dense]\nunits=3\n"
        "activation=softmax\n",
        5);
}
END_TEST

/* The BN model's shape (conv without bias, BN, relu, max-pool, dense,
 * dropout, dense) end to end: the layers' backward passes chain correctly.
 * Dropout's mask depends on (seed, step, sample), fixed across the calls. */
START_TEST(model_gradient_conv_bn_pool_dropout) {
    check_model_gradient(
        "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=6,6,2\n"
        "[conv2d]\nfilters=3\nsize=3\npadding=same\nuse_bias=0\n[batchnorm]\n"
        "[activation]\nactivation=relu\n[maxpool]\nsize=2\n[flatten]\n[dense]\nunits=5\n"
        "activation=relu\n[dropout]\nrate=0.3\n[dense]\nunits=3\nactivation=softmax\n",
        4);
}
END_TEST

/* Gradients accumulate across calls (micro-batches) until zeroed. */
START_TEST(gradients_accumulate) {
    mr_config cfg;
    mr_model m;
    build(mlp_cfg, &cfg, &m, 4);
    mr_model_init_weights(&m, 1);
    int32_t labels[4] = {1, 2, 3, 4};
    mr_rng_uniform(9, 1, 0, 0, 0.0f, 1.0f, m.input, 4 * m.in_size);
    double loss = 0;
    int64_t c = 0;
    mr_model_zero_grads(&m);
    mr_model_train_batch(&m, labels, 4, 4.0f, &loss, &c, NULL, NULL);
    float *once = malloc(sizeof(float) * (size_t)m.n_params);
    memcpy(once, m.grads, sizeof(float) * (size_t)m.n_params);
    mr_model_train_batch(&m, labels, 4, 4.0f, &loss, &c, NULL, NULL);
    for (int64_t i = 0; i < m.n_params; i += 97)
        ck_assert_float_eq_tol(m.grads[i], 2 * once[i], 1e-6f);
    mr_model_zero_grads(&m);
    for (int64_t i = 0; i < m.n_params; i += 97)
        ck_assert_float_eq(m.grads[i], 0.0f);
    /* an update moves the weights against the gradient (SGD-like first Adam step) */
    mr_model_train_batch(&m, labels, 4, 4.0f, &loss, &c, NULL, NULL);
    float before = m.params[5], g = m.grads[5];
    mr_model_apply_update(&m, 0.01f, 1);
    if (g != 0.0f) ck_assert((m.params[5] - before) * g < 0);
    free(once);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

static int64_t last_ready;
static int ready_calls;
static void on_ready(void *ctx, int64_t ready) {
    (void)ctx;
    ck_assert_int_ge(ready, last_ready); /* gradients become final front to back */
    last_ready = ready;
    ready_calls++;
}

START_TEST(after_layer_reports_reverse_order) {
    mr_config cfg;
    mr_model m;
    build(mlp_cfg, &cfg, &m, 2);
    mr_model_init_weights(&m, 1);
    int32_t labels[2] = {0, 1};
    double loss = 0;
    int64_t c = 0;
    last_ready = 0;
    ready_calls = 0;
    mr_model_zero_grads(&m);
    mr_model_train_batch(&m, labels, 2, 2.0f, &loss, &c, on_ready, NULL);
    ck_assert_int_eq(ready_calls, 4);
    ck_assert_int_eq(last_ready, m.n_params);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* A small CNN with dropout: every layer is per-example, so training may
 * split a batch into passes (model.h, chunk). */
static const char *pass_cfg = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\n"
                              "shape=6,6,1\n[conv2d]\nfilters=4\nsize=3\nactivation=relu\n"
                              "[maxpool]\nsize=2\n[flatten]\n[dense]\nunits=6\nactivation=relu\n"
                              "[dropout]\nrate=0.3\n[dense]\nunits=3\nactivation=softmax\n";

/* Gradients, loss and hits of one batch of 8 rows trained in passes of `chunk`. */
static int64_t train_in_passes(int chunk, float *grads, double *loss, int64_t *correct,
                               int *calls) {
    mr_config cfg;
    mr_model m;
    build(pass_cfg, &cfg, &m, 8);
    mr_model_init_weights(&m, 3);
    ck_assert_int_eq(m.chunk, 8); /* tiny rows: one pass unless told otherwise */
    m.chunk = chunk;
    int32_t labels[8] = {0, 1, 2, 0, 1, 2, 2, 1};
    mr_rng_uniform(5, 1, 0, 0, 0.0f, 1.0f, m.input, 8 * m.in_size);
    m.run.seed = 7;
    m.run.step = 2;
    m.run.sample_base = 16; /* as for replica 2 of a global batch of 32 */
    mr_model_zero_grads(&m);
    last_ready = 0;
    ready_calls = 0;
    ck_assert_int_eq(mr_model_train_batch(&m, labels, 8, 32.0f, loss, correct, on_ready, NULL),
                     MR_OK);
    ck_assert_int_eq(m.run.sample_base, 16); /* the caller's value is restored */
    *calls = ready_calls;
    ck_assert_int_eq(last_ready, m.n_params);
    int64_t n = m.n_params;
    ck_assert_int_le(n, 512);
    memcpy(grads, m.grads, sizeof(float) * (size_t)n);
    mr_model_free(&m);
    mr_config_free(&cfg);
    return n;
}

/* Passes of 3, 3 and 2 rows give one pass's gradients (up to the order of
 * the sums: relative 1e-5 of the largest), the same loss and hits, the same
 * dropout masks (they follow each row's position in the global batch), and
 * report finished gradients once, after the last pass. */
START_TEST(passes_equal_one_pass) {
    float one[512], three[512];
    double loss1 = 0.0, loss3 = 0.0;
    int64_t c1 = 0, c3 = 0;
    int calls1, calls3;
    int64_t n = train_in_passes(8, one, &loss1, &c1, &calls1);
    ck_assert_int_eq(train_in_passes(3, three, &loss3, &c3, &calls3), n);
    ck_assert_int_eq(calls1, 6);
    ck_assert_int_eq(calls3, 6);
    ck_assert_int_eq(c1, c3);
    ck_assert_double_eq_tol(loss1, loss3, 1e-5 * fabs(loss1));
    float peak = 0.0f;
    for (int64_t i = 0; i < n; i++)
        peak = fmaxf(peak, fabsf(one[i]));
    ck_assert(peak > 0.0f);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabsf(one[i] - three[i]) <= 1e-5f * peak, "grad %d: %g vs %g", (int)i, one[i],
                      three[i]);
}
END_TEST

/* The pass size follows the floats a row touches and the weights' size:
 * fashion_cnn.cfg's layout at batch 32 runs two passes of 16; a layer that
 * needs the whole batch (BN) or weights near the budget keep one pass; a
 * Flatten is a view of its input's buffer, nothing copied. */
START_TEST(pass_size_from_the_layout) {
    const char *cnn = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=28,28,1\n"
                      "[conv2d]\nfilters=32\nsize=3\nactivation=relu\n[maxpool]\nsize=2\n"
                      "[flatten]\n[dense]\nunits=10\nactivation=softmax\n";
    mr_config cfg;
    mr_model m;
    build(cnn, &cfg, &m, 32);
    ck_assert_int_eq(m.chunk, 16);
    mr_model_forward(&m, 4, 0);
    ck_assert_ptr_eq(m.acts[2], m.acts[1]); /* flatten */
    mr_model_free(&m);
    mr_config_free(&cfg);

    const char *bn = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=28,28,1\n"
                     "[conv2d]\nfilters=32\nsize=3\n[batchnorm]\n[maxpool]\nsize=2\n"
                     "[flatten]\n[dense]\nunits=10\nactivation=softmax\n";
    build(bn, &cfg, &m, 32);
    ck_assert_int_eq(m.chunk, 32);
    mr_model_free(&m);
    mr_config_free(&cfg);

    const char *wide = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=28,28,1\n"
                       "[conv2d]\nfilters=32\nsize=3\nactivation=relu\n[maxpool]\nsize=2\n"
                       "[flatten]\n[dense]\nunits=256\nactivation=relu\n"
                       "[dense]\nunits=10\nactivation=softmax\n";
    build(wide, &cfg, &m, 32); /* 1.4M weights: twice that exceeds the budget */
    ck_assert_int_eq(m.chunk, 32);
    mr_model_free(&m);
    mr_config_free(&cfg);

    build(mlp_cfg, &cfg, &m, 256); /* 2,554 floats a row: 256 rows fit */
    ck_assert_int_eq(m.chunk, 256);
    mr_model_forward(&m, 2, 0);
    ck_assert_ptr_eq(m.acts[0], m.input); /* a leading flatten views the input */
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(shape_errors_name_the_line) {
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    const char *text = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=28,28,1\n"
                       "[dense]\nunits=10\n";
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_int_eq(mr_model_init(&m, tu_cpu_backend(), &cfg, 4, 0, &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "t.cfg:7:") && strstr(err.msg, "[dense]"), "%s", err.msg);
    mr_config_free(&cfg);
    mr_error_clear(&err);
    text = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=28,28,1\n[activation]\n"
           "activation=relu\n";
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_int_eq(mr_model_init(&m, tu_cpu_backend(), &cfg, 4, 0, &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "t.cfg:7:") && strstr(err.msg, "flat"), "%s", err.msg);
    mr_config_free(&cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mlp_layout_and_summary);
    tcase_add_test(tc, same_seed_same_bits);
    tcase_add_test(tc, model_gradient_sparse_cce);
    tcase_add_test(tc, model_gradient_mse);
    tcase_add_test(tc, model_gradient_cce_relu);
    tcase_add_test(tc, model_gradient_conv_bn_pool_dropout);
    tcase_add_test(tc, gradients_accumulate);
    tcase_add_test(tc, after_layer_reports_reverse_order);
    tcase_add_test(tc, passes_equal_one_pass);
    tcase_add_test(tc, pass_size_from_the_layout);
    tcase_add_test(tc, shape_errors_name_the_line);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
