/* test_model.c: building a model from a .cfg, flat buffers, summary, the
 * whole-model gradient against finite differences, and updates; the host's
 * access to the model's device memory (the batch, metrics, weights,
 * outputs), in place on a CPU context and through copies on one that says
 * its memory is not host memory (a GPU's situation), with the same bits.
 * CPU device memory is host memory, so the tests read it in place
 * (runtime/dmem_impl.h). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/loss.h"
#include "models/model.h"
#include "runtime/dataset.h"
#include "runtime/host_memory.h"
#include "runtime/rng.h"
#include "runtime/dmem_impl.h"
#include "backends/backends.h"
#include "tests/testutil.h"

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
    ck_assert_ptr_eq(m.layers[3].w[1].data, mr_dfloat_at(m.params, 640));
    ck_assert_int_eq(m.layers[3].w[1].offset, 640);
    ck_assert_ptr_eq(m.layers[2].w[0].data, mr_dfloat_at(m.params, 650));
    ck_assert_ptr_eq(mr_dfloat_at(m.layers[1].w[1].data, 128), mr_dfloat_at(m.params, m.n_params));
    ck_assert_ptr_eq(m.layers[1].w[0].grad, mr_dfloat_at(m.grads, m.layers[1].w[0].offset));
    ck_assert_ptr_eq(m.layers[1].w[0].data, mr_dfloat_at(m.params, m.layers[1].w[0].offset));
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

/* Keras's adapt(): [normalization] after [rescaling] takes the mean and
 * variance of each channel of the rescaled training rows. The reference
 * is numpy's, on the same generated uint8 rows (float32 x * (1/255), then
 * x * 2 - 1, then x.astype(float64).mean/var(axis=(0, 1, 2)) as float32). */
START_TEST(adapt_matches_numpy) {
    const int n = 10, H = 2, W = 2, C = 3, d = H * W * C;
    uint8_t raw[10 * 12];
    int32_t labels[10] = {0};
    for (int r = 0; r < n; r++)
        for (int k = 0; k < d; k++)
            raw[r * d + k] = (uint8_t)((r * 37 + k * 11 + (r * k) % 7) % 256);
    mr_dataset ds = {0};
    ds.x.dtype = MR_DTYPE_U8;
    ds.x.data = raw;
    ds.y = labels;
    ds.n = n;
    ds.row = d;
    ds.scale = 1.0f / 255.0f;
    mr_config cfg;
    mr_model m;
    build("[net]\nbatch=4\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=2,2,3\n"
          "[rescaling]\nscale=2\noffset=-1\n[normalization]\n[normalization]\nmean=1\n"
          "variance=4\n[flatten]\n[dense]\nunits=2\nactivation=softmax\n",
          &cfg, &m, 4);
    mr_error err = {0};
    ck_assert_int_eq(mr_model_init_weights(&m, 1, &err), MR_OK);
    int adapted = -1;
    ck_assert_msg(mr_model_adapt(&m, &ds, n, &adapted, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(adapted, 1); /* the second has its statistics in the .cfg */
    const float want_mean[3] = {-0.09156858f, -0.10745093f, -0.016078372f};
    const float want_var[3] = {0.30356908f, 0.2843036f, 0.2809995f};
    const float *mean = mr_dfloat_cptr(m.layers[1].w[0].data);
    const float *var = mr_dfloat_cptr(m.layers[1].w[1].data);
    for (int c = 0; c < C; c++) {
        ck_assert_msg(mean[c] == want_mean[c], "mean[%d] %.9g, numpy %.9g", c, mean[c],
                      want_mean[c]);
        ck_assert_msg(var[c] == want_var[c], "variance[%d] %.9g, numpy %.9g", c, var[c],
                      want_var[c]);
    }
    ck_assert(mr_dfloat_cptr(m.layers[1].w[2].data)[0] == 0.0f); /* count, as Keras leaves it */
    ck_assert(mr_dfloat_cptr(m.layers[2].w[0].data)[2] == 1.0f);
    ck_assert(mr_dfloat_cptr(m.layers[2].w[1].data)[1] == 4.0f);
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
    ck_assert_int_eq(mr_model_init_weights(&a, 42, NULL), MR_OK);
    ck_assert_int_eq(mr_model_init_weights(&b, 42, NULL), MR_OK);
    ck_assert(memcmp(mr_dfloat_ptr(a.params), mr_dfloat_ptr(b.params),
                     sizeof(float) * (size_t)a.n_params) == 0);
    ck_assert_int_eq(mr_model_init_weights(&b, 43, NULL), MR_OK);
    ck_assert(memcmp(mr_dfloat_ptr(a.params), mr_dfloat_ptr(b.params),
                     sizeof(float) * (size_t)a.n_params) != 0);
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
    mr_model_init_weights(&m, seed, NULL);
    float *params = mr_dfloat_ptr(m.params);
    mr_rng_uniform(seed, 200, 0, 0, -1.0f, 1.0f, params, m.n_params); /* nonzero biases too */
    int32_t labels[3] = {0, 2, 1};
    mr_rng_uniform(seed, 201, 0, 0, 0.0f, 1.0f, mr_model_input_host(&m), B * m.in_size);
    mr_model_zero_grads(&m, NULL);
    double loss = 0.0;
    double correct = 0;
    const float norm = 5.0f; /* a global batch larger than this shard */
    ck_assert_int_eq(mr_model_train_batch(&m, labels, B, norm, &loss, &correct, NULL, NULL, NULL),
                     MR_OK);
    ck_assert(loss > 0.0);
    float *ana = malloc(sizeof(float) * (size_t)m.n_params);
    memcpy(ana, mr_dfloat_ptr(m.grads), sizeof(float) * (size_t)m.n_params);
    double maxa = 1e-3, maxd = 0.0;
    int skipped = 0;
    for (int64_t i = 0; i < m.n_params; i++) {
        float keep = params[i];
        double l[3];
        float vals[3] = {keep + 1e-3f, keep, keep - 1e-3f};
        for (int k = 0; k < 3; k++) {
            params[i] = vals[k];
            l[k] = 0.0;
            int64_t c = 0;
            ck_assert_int_eq(mr_model_forward(&m, B, 1, NULL), MR_OK);
            ck_assert_int_eq(mr_loss_compute(m.be, cfg.net.loss, m.fused_softmax, 0.0f,
                                             mr_model_output(&m), labels, NULL, B, (int)m.out_size,
                                             norm, NULL, &l[k], &c, 0, NULL, NULL),
                             MR_OK);
            l[k] /= norm;
        }
        params[i] = keep;
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

/* [layernorm] on conv channels (gamma and beta) and on dense features
 * (center = 0: gamma only): the whole model's gradient, and the summary's
 * rows with Keras's names and parameter counts (2 x 3 and 5). */
START_TEST(layernorm_model_gradient_and_summary) {
    const char *text =
        "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=6,6,2\n"
        "[conv2d]\nfilters=3\nsize=3\npadding=same\n[layernorm]\n[activation]\n"
        "activation=tanh\n[maxpool]\nsize=2\n[flatten]\n[dense]\nunits=5\nactivation=tanh\n"
        "[LayerNormalization]\ncenter=0\nepsilon=0.01\n[dense]\nunits=3\nactivation=softmax\n";
    check_model_gradient(text, 4);
    mr_config cfg;
    mr_model m;
    build(text, &cfg, &m, 4);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mr_model_summary(&m, "ln", f);
    fclose(f);
    ck_assert_msg(strstr(buf, "layer_normalization (LayerNormalization)   (None, 6, 6, 3)") &&
                      strstr(buf, "layer_normalization_1 (LayerNormalization) (None, 5)"),
                  "%s", buf);
    /* names longer than the 28 columns widen the column: every row's shape
     * starts under "Output Shape", and the rules are as wide */
    const char *head = strstr(buf, " Layer (type)");
    ck_assert_ptr_nonnull(head);
    const long col = strstr(head, "Output Shape") - head;
    int rows_seen = 0;
    for (const char *p = strstr(buf, "(None"); p; p = strstr(p + 1, "(None")) {
        const char *bol = p;
        while (bol > buf && bol[-1] != '\n')
            bol--;
        ck_assert_msg(p - bol == col, "shape at column %ld, not %ld:\n%s", (long)(p - bol), col,
                      buf);
        rows_seen++;
    }
    ck_assert_int_eq(rows_seen, m.n_layers + 1); /* the input and each layer */
    const char *rule = strchr(buf, '\n') + 1, *rule_end = strchr(rule, '\n');
    ck_assert_int_eq(rule_end - rule,
                     65 + (int)strlen("layer_normalization_1 (LayerNormalization)") - 28);
    /* each row ends with its parameter count */
    static const char *const rows[][2] = {{"layer_normalization (", " 6\n"},
                                          {"layer_normalization_1 (", " 5\n"}};
    for (int i = 0; i < 2; i++) {
        const char *row = strstr(buf, rows[i][0]), *nl = row ? strchr(row, '\n') : NULL;
        ck_assert_msg(nl && strncmp(nl - 2, rows[i][1], 3) == 0, "%s", buf);
    }
    free(buf);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* A residual graph (models/model.h, graph): `a` feeds a convolution and
 * the first add, the sum `s1` feeds zero padding and a strided 1x1
 * projection, whose batch-normalised output is added to the main branch;
 * global average pooling and a dense head. Every output that feeds two
 * layers must get the sum of their gradients, or the parameters before
 * it get wrong gradients. */
static const char *residual_cfg =
    "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=6,6,2\nname=img\n"
    "[conv2d]\nname=a\nfilters=3\nsize=3\npadding=same\nactivation=tanh\n"
    "[conv2d]\nfilters=3\nsize=3\npadding=same\nactivation=tanh\n"
    "[add]\nfrom=a\nname=s1\n"
    "[zeropad]\npadding=1\n"
    "[conv2d]\nname=main\nfilters=4\nsize=3\nstride=2\nactivation=tanh\n"
    "[conv2d]\ninput=s1\nfilters=4\nsize=1\nstride=2\nuse_bias=0\n[batchnorm]\n"
    "[add]\nfrom=main\n[activation]\nactivation=tanh\n"
    "[globalavgpool]\n[dense]\nunits=3\nactivation=softmax\n";

START_TEST(model_gradient_residual) {
    check_model_gradient(residual_cfg, 6);
    /* an output added to itself (both inputs one layer: its gradient is
     * 2 dy), and a branch taken from the model's input by relative index */
    check_model_gradient(
        "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4,4,2\n"
        "[conv2d]\nfilters=2\nsize=3\npadding=same\nactivation=tanh\n[add]\nfrom=-1\n"
        "[conv2d]\ninput=-3\nfilters=2\nsize=1\nactivation=tanh\n[add]\nfrom=-2\n"
        "[flatten]\n[dense]\nunits=3\nactivation=softmax\n",
        7);
    /* Concatenate (DenseNet's merge): the input's channels joined after a
     * convolution's, then a branch of the joined output added back */
    check_model_gradient(
        "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4,4,2\nname=img\n"
        "[conv2d]\nname=a\nfilters=3\nsize=3\npadding=same\nactivation=tanh\n"
        "[concatenate]\nfrom=img\nname=cat\n"
        "[conv2d]\nfilters=5\nsize=1\nactivation=tanh\n[add]\nfrom=cat\n"
        "[globalavgpool]\n[concatenate]\ninput=-1\nfrom=-1\n[dense]\nunits=3\nactivation=softmax\n",
        5);
}
END_TEST

/* A graph trained in cache-sized passes (model.h, pass_rows) adds up the
 * gradients of one pass over the whole batch: each pass reuses rows
 * [0, pass_rows) of the activation and gradient buffers. */
START_TEST(graph_passes_same_gradients) {
    const char *text = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4,4,2\n"
                       "[conv2d]\nname=a\nfilters=2\nsize=3\npadding=same\nactivation=tanh\n"
                       "[conv2d]\nfilters=2\nsize=3\npadding=same\n[add]\nfrom=a\n"
                       "[globalavgpool]\n[dense]\nunits=3\nactivation=softmax\n";
    float *g[2];
    int64_t n = 0;
    for (int k = 0; k < 2; k++) {
        mr_config cfg;
        mr_model m;
        build(text, &cfg, &m, 7);
        mr_model_init_weights(&m, 3, NULL);
        m.pass_rows = k == 0 ? 7 : 2; /* one pass; four (2, 2, 2, 1) */
        int32_t labels[7] = {0, 1, 2, 1, 0, 2, 2};
        mr_rng_uniform(8, 1, 0, 0, 0.0f, 1.0f, mr_model_input_host(&m), 7 * m.in_size);
        mr_model_zero_grads(&m, NULL);
        double loss = 0.0;
        double c = 0;
        ck_assert_int_eq(mr_model_train_batch(&m, labels, 7, 7.0f, &loss, &c, NULL, NULL, NULL),
                         MR_OK);
        n = m.n_params;
        g[k] = malloc(sizeof(float) * (size_t)n);
        memcpy(g[k], mr_dfloat_ptr(m.grads), sizeof(float) * (size_t)n);
        mr_model_free(&m);
        mr_config_free(&cfg);
    }
    double d = tu_rel_diff(g[0], g[1], (size_t)n);
    ck_assert_msg(d < 1e-5, "relative difference %g", d);
    free(g[0]), free(g[1]);
}
END_TEST

/* The graph's layout and summary: inputs, shapes, Keras's Connected to
 * column; a chain that names its layers or says input = -1 stays a chain. */
START_TEST(residual_layout_and_summary) {
    mr_config cfg;
    mr_model m;
    build(residual_cfg, &cfg, &m, 4);
    ck_assert_int_eq(m.graph, 1);
    ck_assert_int_eq(m.n_layers, 11);
    ck_assert_int_eq(m.src[0][0], -1);
    ck_assert_int_eq(m.src[2][0], 1);
    ck_assert_int_eq(m.src[2][1], 0);
    ck_assert_int_eq(m.src[5][0], 2); /* input = s1 */
    ck_assert_int_eq(m.layers[5].out.d[0], 3);
    ck_assert_str_eq(m.layers[4].name, "main");
    ck_assert_str_eq(m.layers[5].name, "conv2d_1");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mr_model_summary(&m, "res", f);
    fclose(f);
    ck_assert_msg(strstr(buf, "Connected to") && strstr(buf, "s1 (Add)") &&
                      strstr(buf, "conv2d (Conv2D)") && strstr(buf, "img[0][0]") &&
                      strstr(buf, "conv2d[0][0], a[0][0]") &&
                      strstr(buf, "batch_normalization[0][0], main[0][0]") &&
                      strstr(buf, "global_average_pooling2d (GlobalAveragePooling2D)") &&
                      strstr(buf, "(None, 8, 8, 3)"),
                  "%s", buf);
    free(buf);
    mr_model_free(&m);
    mr_config_free(&cfg);
    build("[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=5\nname=x\n"
          "[dense]\nunits=4\nname=hidden\ninput=-1\n[dense]\nunits=3\ninput=hidden\n"
          "activation=softmax\n",
          &cfg, &m, 2);
    ck_assert_int_eq(m.graph, 0);
    ck_assert_str_eq(m.layers[0].name, "hidden");
    ck_assert_str_eq(m.layers[1].name, "dense");
    f = open_memstream(&buf, &len);
    mr_model_summary(&m, "chain", f);
    fclose(f);
    ck_assert_msg(strstr(buf, "Connected to") == NULL, "%s", buf);
    free(buf);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* What only the model can check: shapes at a merge, names that clash
 * with automatic ones. One line with the .cfg line each. */
START_TEST(graph_model_errors) {
    static const struct {
        const char *layers, *want;
    } cases[] = {
        {"[input]\nshape=4,4,2\n[conv2d]\nname=a\nfilters=3\nsize=1\n[conv2d]\nfilters=3\n"
         "size=3\n[add]\nfrom=a\n[flatten]\n[dense]\nunits=2\n",
         "t.cfg:14: [add] cannot add from = a, of shape (None, 4, 4, 3), to its input, of shape "
         "(None, 2, 2, 3): the shapes must be equal"},
        {"[input]\nshape=4\n[dense]\nunits=3\nname=dense_1\n[dense]\nunits=3\n[dense]\nunits=2\n",
         "t.cfg:7: name = dense_1 is the automatic name of the [dense] of line 12; choose another"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text, "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n%s",
                 cases[i].layers);
        mr_config cfg;
        mr_model m;
        mr_error err = {0};
        ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
        ck_assert_int_eq(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err), MR_ERR_CONFIG);
        ck_assert_msg(strcmp(err.msg, cases[i].want) == 0, "got: %s\nwant: %s", err.msg,
                      cases[i].want);
        mr_config_free(&cfg);
    }
}
END_TEST

/* A model whose buffers together exceed what this machine can still give
 * (each one under half of it) is refused before any is made: Linux would
 * give them, and the OOM killer would end the process as they are zeroed
 * (issue 47 N21: a wide input's predict of one row grew to 23 GB). */
START_TEST(more_than_the_host_has_is_refused) {
    const int64_t available = mr_host_memory_available("/proc/meminfo");
    ck_assert_int_gt(available, 0);
    /* (1024, 1024, 1) in, 8 channels out: 8 Mi floats a row for the conv's
     * output and each of the two gradient buffers; the batch makes one of
     * them half of what is available */
    const int64_t row = 8 * 1024 * 1024;
    const int batch = (int)(available / 2 / (4 * row)) + 1;
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    const char *text = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=1024,1024,1\n"
                       "[conv2d]\nfilters=8\nsize=3\npadding=same\n[global_average_pooling2d]\n"
                       "[dense]\nunits=2\nactivation=softmax\n";
    ck_assert_msg(mr_config_parse(text, "wide.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_model_init(&m, tu_cpu_backend(), &cfg, batch, 0, &err), MR_ERR_NOMEM);
    char want[128];
    snprintf(want, sizeof want, ": out of memory for the model at batch %d (", batch);
    ck_assert_msg(strstr(err.msg, "wide.cfg: cpu") == err.msg && strstr(err.msg, want) != NULL,
                  "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "MiB available: a smaller batch needs less)") != NULL, "%s",
                  err.msg);
    mr_config_free(&cfg);
    /* one row of it is made */
    ck_assert_msg(mr_config_parse(text, "wide.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 1, 0, &err) == MR_OK, "%s", err.msg);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* The shipped residual models build, with the parameter counts their
 * papers' architectures give: ResNet-20's from its layers (3x3 convolutions
 * without bias, BN 2 trainable + 2 moving floats a channel, 1x1 stride-2
 * projections with BN), ResNet-50 v1.5's as torchvision counts it. */
START_TEST(shipped_residual_configs) {
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    char *path = tu_source_path("models/configs/fashion_resnet20.cfg");
    ck_assert_msg(mr_config_load(path, &cfg, &err) == MR_OK, "%s", err.msg);
    free(path);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 1, 0, &err) == MR_OK, "%s", err.msg);
    int64_t want = 9 * 1 * 16 + 2 * 16, state = 2 * 16, convs = 1;
    const int f[3] = {16, 32, 64};
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < 3; b++) {
            int in = b == 0 && s > 0 ? f[s - 1] : f[s];
            want += 9 * in * f[s] + 9 * f[s] * f[s] + 4 * f[s], state += 4 * f[s], convs += 2;
            if (in != f[s]) want += in * f[s] + 2 * f[s], state += 2 * f[s], convs++;
        }
    want += 64 * 10 + 10;
    ck_assert_int_eq(m.n_params, want);
    ck_assert_int_eq(m.n_state, state);
    int n_conv = 0;
    for (int i = 0; i < m.n_layers; i++)
        n_conv += m.layers[i].cfg->kind == MR_LAYER_CONV2D;
    ck_assert_int_eq(n_conv, convs);
    ck_assert_int_eq(n_conv + 1, 20 + 2); /* 19 + 2 projections, + the dense layer */
    ck_assert_int_eq(m.out_size, 10);
    mr_model_free(&m);
    mr_config_free(&cfg);
    path = tu_source_path("models/configs/resnet50.cfg");
    ck_assert_msg(mr_config_load(path, &cfg, &err) == MR_OK, "%s", err.msg);
    free(path);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 1, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(m.n_params, 25557032); /* torchvision.models.resnet50() */
    ck_assert_int_eq(m.n_state, 53120);
    ck_assert_int_eq(m.layers[m.n_layers - 2].in.d[0], 7);
    ck_assert_int_eq(m.layers[m.n_layers - 2].in.d[2], 2048);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* fashion_resnet20.cfg trains: with its own optimizer (SGD, Nesterov
 * momentum 0.9 at 0.1, weight decay 0.005), 15 updates on one batch of 8
 * random images bring that batch's loss well down (a model whose
 * gradients were wrong would not fit it). */
START_TEST(resnet20_fits_a_batch) {
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    char *path = tu_source_path("models/configs/fashion_resnet20.cfg");
    ck_assert_msg(mr_config_load(path, &cfg, &err) == MR_OK, "%s", err.msg);
    free(path);
    const int B = 8;
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, B, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_model_init_weights(&m, 1, &err), MR_OK);
    int32_t labels[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    mr_rng_uniform(5, 1, 0, 0, 0.0f, 1.0f, mr_model_input_host(&m), B * m.in_size);
    double first = 0.0, last = 0.0;
    for (int t = 1; t <= 15; t++) {
        double loss = 0.0;
        double c = 0;
        ck_assert_int_eq(mr_model_zero_grads(&m, &err), MR_OK);
        ck_assert_int_eq(mr_model_train_batch(&m, labels, B, (float)B, &loss, &c, NULL, NULL, &err),
                         MR_OK);
        ck_assert_int_eq(mr_model_apply_update(&m, cfg.net.learning_rate, t, NULL, &err), MR_OK);
        if (t == 1) first = loss / B;
        last = loss / B;
    }
    ck_assert_msg(isfinite(last) && last < 0.5 * first, "loss %g -> %g", first, last);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* Trains `text` 4 updates on fixed batches of 6 from the initial weights
 * and state of `like` (the same layout: only weightless layers differ; NULL:
 * its own, seed 4), then runs an inference forward. Returns the
 * parameters, moving statistics, 4 losses and 6 x 3 inference outputs
 * (*n floats); the layers fused into fused[] ('R': relu_fused, 'F': a fused
 * activation, '.' neither, one a layer). */
static float *train_fused(const char *text, const char *like, char *fused, int64_t *n) {
    mr_config cfg, cfg0;
    mr_model m, m0;
    mr_error err = {0};
    build(text, &cfg, &m, 6);
    ck_assert_int_eq(mr_model_init_weights(&m, 4, &err), MR_OK);
    if (like != NULL) {
        build(like, &cfg0, &m0, 6);
        ck_assert_int_eq(mr_model_init_weights(&m0, 4, &err), MR_OK);
        ck_assert_int_eq(m.n_params, m0.n_params);
        ck_assert_int_eq(m.n_state, m0.n_state);
        memcpy(mr_dfloat_ptr(m.params), mr_dfloat_cptr(m0.params),
               sizeof(float) * (size_t)m.n_params);
        memcpy(mr_dfloat_ptr(m.state), mr_dfloat_cptr(m0.state), sizeof(float) * (size_t)m.n_state);
        mr_model_free(&m0);
        mr_config_free(&cfg0);
    }
    for (int i = 0; i < m.n_layers; i++)
        fused[i] = m.layers[i].fused ? 'F' : m.layers[i].relu_fused ? 'R' : '.';
    fused[m.n_layers] = '\0';
    const int64_t np = m.n_params, ns = m.n_state;
    *n = np + ns + 4 + 18;
    float *out = malloc(sizeof(float) * (size_t)*n);
    int32_t labels[6] = {0, 1, 2, 1, 0, 2};
    for (int t = 1; t <= 4; t++) {
        /* inputs centred on 0, so that the ReLUs cut */
        mr_rng_uniform(9, 1, (uint32_t)t, 0, -1.0f, 1.0f, mr_model_input_host(&m), 6 * m.in_size);
        double loss = 0.0;
        double c = 0;
        ck_assert_int_eq(mr_model_zero_grads(&m, &err), MR_OK);
        ck_assert_int_eq(mr_model_train_batch(&m, labels, 6, 6.0f, &loss, &c, NULL, NULL, &err),
                         MR_OK);
        ck_assert_int_eq(mr_model_apply_update(&m, 0.1f, t, NULL, &err), MR_OK);
        out[np + ns + t - 1] = (float)loss;
    }
    /* inference: a fused BN applies the moving statistics, then the ReLU */
    ck_assert_int_eq(mr_model_forward(&m, 6, 0, &err), MR_OK);
    memcpy(out, mr_dfloat_cptr(m.params), sizeof(float) * (size_t)np);
    memcpy(out + np, mr_dfloat_cptr(m.state), sizeof(float) * (size_t)ns);
    memcpy(out + np + ns + 4, mr_dfloat_cptr(mr_model_output(&m)), sizeof(float) * 18);
    mr_model_free(&m);
    mr_config_free(&cfg);
    return out;
}

/* A ReLU [activation] fused into the BatchNormalization or Add before it
 * (model.c, fuse_relus) trains to the same bits as the unfused layers: the
 * same model with a linear [activation] between them, which fuses nothing.
 * A BN whose output also feeds an [add] is not fused. A graph (ResNet's
 * blocks) and a chain. */
START_TEST(fused_relu_same_bits) {
    const char *head = "[net]\noptimizer=sgd\nmomentum=0.9\n[data]\ntrain_images=a\n"
                       "train_labels=b\n[input]\nshape=6,6,2\n";
    const char *lin = "[activation]\nactivation=linear\n";
    /* k = 0: fused; 1: a linear activation in between; 2: no ReLU at all */
    char graph[3][2048], chain[3][1024];
    for (int k = 0; k < 3; k++) {
        const char *x = k == 1 ? lin : "", *relu = k == 2 ? "linear" : "relu";
        snprintf(graph[k], sizeof graph[k],
                 "%s[conv2d]\nfilters=4\nsize=3\npadding=same\n[batchnorm]\n%s"
                 "[activation]\nname=r0\nactivation=%s\n"
                 "[conv2d]\nfilters=4\nsize=3\npadding=same\n[batchnorm]\n[add]\nfrom=r0\n%s"
                 "[activation]\nname=r1\nactivation=%s\n"
                 "[conv2d]\nfilters=4\nsize=3\npadding=same\n"
                 "[batchnorm]\nname=two\n[activation]\nactivation=relu\n[add]\nfrom=two\n"
                 "[globalavgpool]\n[dense]\nunits=3\nactivation=softmax\n",
                 head, x, relu, x, relu);
        snprintf(chain[k], sizeof chain[k],
                 "%s[conv2d]\nfilters=3\nsize=3\n[batchnorm]\n%s[activation]\nactivation=%s\n"
                 "[flatten]\n[dense]\nunits=3\nactivation=softmax\n",
                 head, x, relu);
    }
    char f[3][MR_MAX_LAYERS + 1];
    int64_t n[3];
    float *g[3];
    for (int k = 0; k < 3; k++)
        g[k] = train_fused(graph[k], k ? graph[0] : NULL, f[k], &n[k]);
    /* conv, BN (R), relu (F), conv, BN, add (R), relu (F), conv, BN "two"
     * (two consumers), relu, add, pool, dense */
    ck_assert_str_eq(f[0], ".RF..RF......");
    ck_assert_str_eq(f[1], "...............");
    ck_assert_str_eq(f[2], ".............");
    ck_assert_int_eq(n[0], n[1]);
    ck_assert_msg(memcmp(g[0], g[1], sizeof(float) * (size_t)n[0]) == 0,
                  "graph: fused and unfused differ");
    /* the ReLUs cut: without them the bits differ */
    ck_assert_msg(memcmp(g[0], g[2], sizeof(float) * (size_t)n[0]) != 0, "the ReLUs cut nothing");
    for (int k = 0; k < 3; k++)
        free(g[k]);

    for (int k = 0; k < 3; k++)
        g[k] = train_fused(chain[k], k ? chain[0] : NULL, f[k], &n[k]);
    ck_assert_str_eq(f[0], ".RF..");
    ck_assert_str_eq(f[1], "......");
    ck_assert_msg(memcmp(g[0], g[1], sizeof(float) * (size_t)n[0]) == 0,
                  "chain: fused and unfused differ");
    ck_assert_msg(memcmp(g[0], g[2], sizeof(float) * (size_t)n[0]) != 0, "the ReLUs cut nothing");
    for (int k = 0; k < 3; k++)
        free(g[k]);
}
END_TEST

/* mr_model_input_synthetic on a context whose memory is not host memory
 * (a CPU one with host_memory cleared, as the conformance test's): the
 * batch the input kernel makes is mr_dataset_fill's of the synthetic
 * examples, twice in a row (the two buffers in turn), for a model of one
 * input feature too (the ids, 8 bytes a row, outgrow such a batch). */
START_TEST(synthetic_input_made_by_the_context) {
    const char *texts[2] = {mlp_cfg, "[net]\nbatch=8\n[data]\ntrain_images=a\ntrain_labels=b\n"
                                     "[input]\nshape=1\n[dense]\nunits=3\nactivation=softmax\n"};
    for (int t = 0; t < 2; t++) {
        mr_config cfg;
        mr_model m;
        mr_error err = {0};
        mr_backend *be;
        ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, &be, &err), MR_OK);
        be->host_memory = 0;
        ck_assert_msg(mr_config_parse(texts[t], "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
        const int B = 64;
        ck_assert_msg(mr_model_init(&m, be, &cfg, B, 0, &err) == MR_OK, "%s", err.msg);
        const int dims[1] = {(int)m.in_size};
        mr_dataset ds;
        ck_assert_int_eq(mr_dataset_synthetic(&ds, 200, 1, dims, 3, 7, &err), MR_OK);
        ds.scale = 0.5f;
        int64_t rows[64];
        float *want = malloc(sizeof(float) * (size_t)(B * m.in_size));
        float *got = malloc(sizeof(float) * (size_t)(B * m.in_size));
        int32_t y[64];
        for (int pass = 0; pass < 2; pass++) {
            for (int b = 0; b < B; b++)
                rows[b] = (b * 37 + pass * 11) % 200;
            ck_assert_int_eq(mr_model_input_synthetic(&m, rows, B, ds.synthetic_key[0],
                                                      ds.synthetic_key[1], ds.scale, &err),
                             MR_OK);
            ck_assert_int_eq(
                mr_backend_to_host(be, got, m.input, sizeof(float) * (size_t)(B * m.in_size), &err),
                MR_OK);
            mr_dataset_fill(&ds, rows, B, NULL, want, y);
            ck_assert_mem_eq(got, want, sizeof(float) * (size_t)(B * m.in_size));
            ck_assert_ptr_eq(m.input, m.inputs[pass]);
        }
        free(want), free(got);
        mr_dataset_free(&ds);
        mr_model_free(&m);
        mr_config_free(&cfg);
        mr_backend_destroy(be);
    }
}
END_TEST

/* Gradients accumulate across calls (micro-batches) until zeroed. */
START_TEST(gradients_accumulate) {
    mr_config cfg;
    mr_model m;
    build(mlp_cfg, &cfg, &m, 4);
    mr_model_init_weights(&m, 1, NULL);
    const float *params = mr_dfloat_ptr(m.params), *grads = mr_dfloat_ptr(m.grads);
    int32_t labels[4] = {1, 2, 3, 4};
    mr_rng_uniform(9, 1, 0, 0, 0.0f, 1.0f, mr_model_input_host(&m), 4 * m.in_size);
    double loss = 0;
    double c = 0;
    mr_model_zero_grads(&m, NULL);
    mr_model_train_batch(&m, labels, 4, 4.0f, &loss, &c, NULL, NULL, NULL);
    float *once = malloc(sizeof(float) * (size_t)m.n_params);
    memcpy(once, grads, sizeof(float) * (size_t)m.n_params);
    mr_model_train_batch(&m, labels, 4, 4.0f, &loss, &c, NULL, NULL, NULL);
    for (int64_t i = 0; i < m.n_params; i += 97)
        ck_assert_float_eq_tol(grads[i], 2 * once[i], 1e-6f);
    ck_assert_int_eq(mr_model_zero_grads(&m, NULL), MR_OK);
    for (int64_t i = 0; i < m.n_params; i += 97)
        ck_assert_float_eq(grads[i], 0.0f);
    /* an update moves the weights against the gradient (SGD-like first Adam step) */
    mr_model_train_batch(&m, labels, 4, 4.0f, &loss, &c, NULL, NULL, NULL);
    float before = params[5], g = grads[5];
    ck_assert_int_eq(mr_model_apply_update(&m, 0.01f, 1, NULL, NULL), MR_OK);
    if (g != 0.0f) ck_assert((params[5] - before) * g < 0);
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
    mr_model_init_weights(&m, 1, NULL);
    int32_t labels[2] = {0, 1};
    double loss = 0;
    double c = 0;
    last_ready = 0;
    ready_calls = 0;
    mr_model_zero_grads(&m, NULL);
    mr_model_train_batch(&m, labels, 2, 2.0f, &loss, &c, on_ready, NULL, NULL);
    ck_assert_int_eq(ready_calls, 4);
    ck_assert_int_eq(last_ready, m.n_params);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* A small CNN with dropout: every layer is per-example, so training may
 * split a batch into passes (model.h, pass_rows). */
static const char *pass_cfg = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\n"
                              "shape=6,6,1\n[conv2d]\nfilters=4\nsize=3\nactivation=relu\n"
                              "[maxpool]\nsize=2\n[flatten]\n[dense]\nunits=6\nactivation=relu\n"
                              "[dropout]\nrate=0.3\n[dense]\nunits=3\nactivation=softmax\n";

/* Gradients, loss and hits of one batch of 8 rows trained in passes of `pass_rows`. */
static int64_t train_in_passes(int pass_rows, float *grads, double *loss, double *correct,
                               int *calls) {
    mr_config cfg;
    mr_model m;
    build(pass_cfg, &cfg, &m, 8);
    mr_model_init_weights(&m, 3, NULL);
    ck_assert_int_eq(m.pass_rows, 8); /* tiny rows: one pass unless told otherwise */
    m.pass_rows = pass_rows;
    int32_t labels[8] = {0, 1, 2, 0, 1, 2, 2, 1};
    mr_rng_uniform(5, 1, 0, 0, 0.0f, 1.0f, mr_model_input_host(&m), 8 * m.in_size);
    m.run.seed = 7;
    m.run.step = 2;
    m.run.sample_base = 16; /* as for replica 2 of a global batch of 32 */
    mr_model_zero_grads(&m, NULL);
    last_ready = 0;
    ready_calls = 0;
    ck_assert_int_eq(
        mr_model_train_batch(&m, labels, 8, 32.0f, loss, correct, on_ready, NULL, NULL), MR_OK);
    ck_assert_int_eq(m.run.sample_base, 16); /* the caller's value is restored */
    *calls = ready_calls;
    ck_assert_int_eq(last_ready, m.n_params);
    int64_t n = m.n_params;
    ck_assert_int_le(n, 512);
    memcpy(grads, mr_dfloat_ptr(m.grads), sizeof(float) * (size_t)n);
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
    double c1 = 0, c3 = 0;
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
 * Flatten is a view of its input's buffer, nothing copied, and so is a
 * ReLU fused into the BN before it. */
START_TEST(pass_size_from_the_layout) {
    const char *cnn = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=28,28,1\n"
                      "[conv2d]\nfilters=32\nsize=3\nactivation=relu\n[maxpool]\nsize=2\n"
                      "[flatten]\n[dense]\nunits=10\nactivation=softmax\n";
    mr_config cfg;
    mr_model m;
    build(cnn, &cfg, &m, 32);
    ck_assert_int_eq(m.pass_rows, 16);
    ck_assert_int_eq(mr_model_forward(&m, 4, 0, NULL), MR_OK);
    ck_assert_ptr_eq(m.acts[2], m.acts[1]); /* flatten */
    mr_model_free(&m);
    mr_config_free(&cfg);

    const char *bn = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=28,28,1\n"
                     "[conv2d]\nfilters=32\nsize=3\n[batchnorm]\n[activation]\nactivation=relu\n"
                     "[maxpool]\nsize=2\n[flatten]\n[dense]\nunits=10\nactivation=softmax\n";
    build(bn, &cfg, &m, 32);
    ck_assert_int_eq(m.pass_rows, 32);
    /* the ReLU fused into the BN (model.c, fuse_relus) writes no buffer of its own */
    ck_assert_int_eq(m.layers[2].fused, 1);
    ck_assert_ptr_eq(m.acts[2], m.acts[1]);
    mr_model_free(&m);
    mr_config_free(&cfg);

    const char *wide = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=28,28,1\n"
                       "[conv2d]\nfilters=32\nsize=3\nactivation=relu\n[maxpool]\nsize=2\n"
                       "[flatten]\n[dense]\nunits=256\nactivation=relu\n"
                       "[dense]\nunits=10\nactivation=softmax\n";
    build(wide, &cfg, &m, 32); /* 1.4M weights: twice that exceeds the budget */
    ck_assert_int_eq(m.pass_rows, 32);
    mr_model_free(&m);
    mr_config_free(&cfg);

    build(mlp_cfg, &cfg, &m, 256); /* 2,554 floats a row: 256 rows fit */
    ck_assert_int_eq(m.pass_rows, 256);
    ck_assert_int_eq(mr_model_forward(&m, 2, 0, NULL), MR_OK);
    ck_assert_ptr_eq(m.acts[0], m.input); /* a leading flatten views the input */
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* from_logits: a linear last layer's outputs are logits, taken
 * through the fused softmax; without it a linear last layer and a
 * cross-entropy are refused, as are from_logits with a softmax and
 * from_logits or label_smoothing with mse; and a top_k not below the classes */
START_TEST(from_logits_rules) {
    const char *head = "[net]\n%s\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=6\n"
                       "[dense]\nunits=3\n%s\n";
    struct {
        const char *net, *last, *want; /* want NULL: builds, fused */
    } cases[] = {
        {"from_logits=1", "", NULL},
        {"from_logits=1\nlabel_smoothing=0.1\nloss=categorical_crossentropy", "activation=relu",
         NULL},
        {"label_smoothing=0.1", "activation=softmax", "needs loss = categorical_crossentropy"},
        {"", "", "set [net] from_logits = 1"},
        {"from_logits=1", "activation=softmax", "the last layer is a softmax"},
        {"loss=mse\nfrom_logits=1", "", "from_logits applies to the cross-entropy"},
        {"loss=mse\nlabel_smoothing=0.1", "", "label_smoothing applies to the cross-entropy"},
        /* [net] top_k: below the classes (a label is always among all of them) */
        {"from_logits=1\ntop_k=2", "", NULL},
        {"from_logits=1\ntop_k=3", "", "top_k = 3 must be below the 3 classes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, head, cases[i].net, cases[i].last);
        mr_config cfg;
        mr_model m;
        mr_error err = {0};
        ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
        mr_status st = mr_model_init(&m, tu_cpu_backend(), &cfg, 4, 0, &err);
        if (cases[i].want == NULL) {
            ck_assert_msg(st == MR_OK, "case %zu: %s", i, err.msg);
            ck_assert_int_eq(m.fused_softmax, 1);
            ck_assert_int_eq(m.layers[m.n_layers - 1].logits_out, 0);
            mr_model_free(&m);
        } else {
            ck_assert_msg(st == MR_ERR_CONFIG && strstr(err.msg, "t.cfg") &&
                              strstr(err.msg, cases[i].want),
                          "case %zu: %d %s", i, st, err.msg);
        }
        mr_config_free(&cfg);
    }
}
END_TEST

/* loss = binary_crossentropy: one output unit, fused with a final sigmoid (logits_out) or
 * from_logits on a linear one; refused with a softmax, with from_logits on a sigmoid, with
 * class_weight on more than one unit (multi-label), with a linear one without from_logits, with
 * class_weight other than two weights; top_k and per_class are refused by the parser. The model
 * has two classes and one label per example. */
START_TEST(binary_crossentropy_rules) {
    const char *head = "[net]\nloss=binary_crossentropy\n%s\n[data]\ntrain_images=a\n"
                       "train_labels=b\ntest_images=c\ntest_labels=d\n[input]\nshape=6\n"
                       "[dense]\nunits=%d\n%s\n";
    struct {
        const char *net;
        int units;
        const char *last, *want; /* want NULL: builds, fused */
        int logits_out;
    } cases[] = {
        {"", 1, "activation=sigmoid", NULL, 1},
        {"from_logits=1\nlabel_smoothing=0.1", 1, "", NULL, 0},
        {"class_weight=0.5,2", 1, "activation=sigmoid", NULL, 1},
        {"", 1, "activation=softmax", "needs activation = sigmoid", 0},
        {"from_logits=1", 1, "activation=sigmoid", "needs a linear last layer", 0},
        {"class_weight=1,2,3", 3, "activation=sigmoid", "(multi-label) takes no class_weight", 0},
        {"", 1, "", "or activation = sigmoid", 0},
        {"class_weight=1,2,3", 1, "activation=sigmoid", "outputs 2 classes", 0},
        {"top_k=1", 1, "activation=sigmoid", "top_k does not apply to loss = binary", 0},
        {"per_class=1", 1, "activation=sigmoid", "per_class does not apply to loss = binary", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, head, cases[i].net, cases[i].units, cases[i].last);
        mr_config cfg;
        mr_model m;
        mr_error err = {0};
        mr_status st = mr_config_parse(text, "t.cfg", NULL, &cfg, &err);
        const int parsed = st == MR_OK;
        if (parsed) st = mr_model_init(&m, tu_cpu_backend(), &cfg, 4, 0, &err);
        if (cases[i].want == NULL) {
            ck_assert_msg(st == MR_OK, "case %zu: %s", i, err.msg);
            ck_assert_int_eq(m.fused_softmax, 1);
            ck_assert_int_eq(m.layers[m.n_layers - 1].logits_out, cases[i].logits_out);
            ck_assert_int_eq(mr_model_classes(&m), 2);
            ck_assert_int_eq(mr_model_label_width(&m), 1);
            mr_model_free(&m);
        } else {
            ck_assert_msg(st == MR_ERR_CONFIG && strstr(err.msg, "t.cfg") &&
                              strstr(err.msg, cases[i].want) && !strchr(err.msg, '\n'),
                          "case %zu: %d %s", i, st, err.msg);
        }
        if (parsed) mr_config_free(&cfg);
    }
}
END_TEST

/* Multi-label binary_crossentropy: k = 3 units, fused with a final sigmoid or from_logits on a
 * linear one, label width 3 (multi-hot rows), 3 outputs for --predict; softmax, from_logits on
 * a sigmoid, a linear one without from_logits and class_weight refused (file:line, one line);
 * top_k and per_class by the parser. Other losses keep one label per example. */
START_TEST(multi_label_bce_rules) {
    const char *head = "[net]\nloss=%s\n%s\n[data]\ntrain_images=a\ntrain_labels=b\n"
                       "test_images=c\ntest_labels=d\n[input]\nshape=6\n[dense]\nunits=3\n%s\n";
    struct {
        const char *loss, *net, *last, *want; /* want NULL: builds */
        int width;
    } cases[] = {
        {"binary_crossentropy", "", "activation=sigmoid", NULL, 3},
        {"binary_crossentropy", "from_logits=1\nlabel_smoothing=0.1", "", NULL, 3},
        {"binary_crossentropy", "", "activation=softmax", "t.cfg:11: [net] loss = binary", 0},
        {"binary_crossentropy", "from_logits=1", "activation=sigmoid", "needs a linear last", 0},
        {"binary_crossentropy", "", "", "t.cfg:11: the last layer is linear", 0},
        {"binary_crossentropy", "class_weight=1,2,3", "activation=sigmoid",
         "t.cfg:11: [net] loss = binary_crossentropy with more than one output (multi-label) "
         "takes no class_weight",
         0},
        {"binary_crossentropy", "top_k=1", "activation=sigmoid", "top_k does not apply", 0},
        {"binary_crossentropy\nvalidation_split=0.1", "per_class=1", "activation=sigmoid",
         "per_class does not apply", 0},
        {"sparse_categorical_crossentropy", "", "activation=softmax", NULL, 1},
        /* regression: float targets, one per output; no classes to weigh */
        {"mse", "", "", NULL, 3},
        {"huber", "", "activation=relu", NULL, 3},
        {"mse", "", "activation=softmax", NULL, 1}, /* one-hot of class ids */
        {"mae", "class_weight=1,2,3", "",
         "t.cfg:11: [net] class_weight needs classes, but loss = mae on this last layer", 0},
        {"mse", "from_logits=1", "", "not to loss = mse", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, head, cases[i].loss, cases[i].net, cases[i].last);
        mr_config cfg;
        mr_model m;
        mr_error err = {0};
        mr_status st = mr_config_parse(text, "t.cfg", NULL, &cfg, &err);
        const int parsed = st == MR_OK;
        if (parsed) st = mr_model_init(&m, tu_cpu_backend(), &cfg, 4, 0, &err);
        if (cases[i].want == NULL) {
            ck_assert_msg(st == MR_OK, "case %zu: %s", i, err.msg);
            ck_assert_int_eq(mr_model_label_width(&m), cases[i].width);
            ck_assert_int_eq(mr_model_classes(&m), 3);
            mr_model_free(&m);
        } else {
            ck_assert_msg(st == MR_ERR_CONFIG && strstr(err.msg, "t.cfg") &&
                              strstr(err.msg, cases[i].want) && !strchr(err.msg, '\n'),
                          "case %zu: %d %s", i, st, err.msg);
        }
        if (parsed) mr_config_free(&cfg);
    }
}
END_TEST

/* [net] class_weight: one weight per class of the last layer, else a
 * one-line error naming the layer's line; the model holds them (k) on its
 * device for the loss */
START_TEST(class_weight_count) {
    const char *head = "[net]\nclass_weight=%s\n[data]\ntrain_images=a\ntrain_labels=b\n"
                       "[input]\nshape=6\n[dense]\nunits=3\nactivation=softmax\n";
    const char *given[3] = {"1,2", "1,2,3,4", "0.5, 2, 0"};
    for (int i = 0; i < 3; i++) {
        char text[512];
        snprintf(text, sizeof text, head, given[i]);
        mr_config cfg;
        mr_model m;
        mr_error err = {0};
        ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
        mr_status st = mr_model_init(&m, tu_cpu_backend(), &cfg, 4, 0, &err);
        if (i < 2) {
            ck_assert_msg(st == MR_ERR_CONFIG && strstr(err.msg, "t.cfg:8:") &&
                              strstr(err.msg, i ? "has 4 weights" : "has 2 weights") &&
                              strstr(err.msg, "outputs 3 classes") && !strchr(err.msg, '\n'),
                          "case %d: %d %s", i, st, err.msg);
        } else {
            ck_assert_msg(st == MR_OK, "%s", err.msg);
            const float *cw = mr_dfloat_cptr(m.class_weight);
            ck_assert(cw[0] == 0.5f && cw[1] == 2.0f && cw[2] == 0.0f);
            mr_model_free(&m);
        }
        mr_config_free(&cfg);
    }
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

/* What the host reads and writes of a model on a CPU context: in place, no
 * staging buffer (the CPU path copies nothing). */
START_TEST(host_access_in_place) {
    mr_config cfg;
    mr_model m;
    build(mlp_cfg, &cfg, &m, 4);
    ck_assert_ptr_null(m.host); /* no staging on the CPU */
    ck_assert_ptr_eq(mr_model_input_host(&m), mr_dfloat_ptr(m.input));
    ck_assert_int_eq(mr_model_input_upload(&m, 4, NULL), MR_OK);
    const float *view = NULL;
    ck_assert_int_eq(mr_model_read(&m, m.params, 10, &view, NULL), MR_OK);
    ck_assert_ptr_eq(view, mr_dfloat_ptr(m.params));
    ck_assert_ptr_eq(mr_model_host_for(&m, m.state ? m.state : m.params), mr_dfloat_ptr(m.params));
    ck_assert_int_eq(mr_model_queues_sums(&m), 0); /* the CPU sums on the host */
    /* the extra floats after the gradients */
    const float v[2] = {3.5f, 17.0f};
    float back[2] = {0};
    ck_assert_int_eq(mr_model_write_extra(&m, v, 2, NULL), MR_OK);
    ck_assert_float_eq(mr_dfloat_ptr(m.grads)[m.n_params], 3.5f);
    ck_assert_float_eq(mr_dfloat_ptr(m.grads)[m.n_params + 1], 17.0f);
    ck_assert_int_eq(mr_model_read_extra(&m, back, 2, NULL), MR_OK);
    ck_assert_mem_eq(back, v, sizeof v);
    ck_assert_int_eq(mr_model_zero_grads(&m, NULL), MR_OK); /* the extra floats too */
    ck_assert_int_eq(mr_model_read_extra(&m, back, 2, NULL), MR_OK);
    ck_assert_float_eq(back[0], 0.0f);
    ck_assert_float_eq(back[1], 0.0f);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* kernel_initializer on [dense] and [conv2d]: glorot_uniform (the
 * default) is bitwise the uniform draw it always was; the others have
 * Keras's bounds and spread: he_uniform within sqrt(6 / fan_in) and
 * reaching near it, the normal ones within 2 of their stddev (before
 * Keras's division by 0.8796) and with the standard deviation
 * sqrt(2 / fan_in) (he) or sqrt(2 / (fan_in + fan_out)) (glorot) within
 * 5 standard deviations of the estimate (409600 and 800 draws). Biases
 * stay 0. */
START_TEST(kernel_initializers) {
    const char *names[4] = {"glorot_uniform", "glorot_normal", "he_uniform", "he_normal"};
    for (int k = 0; k < 4; k++) {
        char text[512];
        snprintf(text, sizeof text,
                 "[net]\nbatch=2\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\n"
                 "shape=14,14,1\n[conv2d]\nfilters=32\nsize=5\nkernel_initializer=%s\n"
                 "[flatten]\n[dense]\nunits=128\nkernel_initializer=%s\n[dense]\nunits=10\n"
                 "activation=softmax\n",
                 names[k], names[k]);
        mr_config cfg;
        mr_model m;
        build(text, &cfg, &m, 2);
        ck_assert_int_eq(mr_model_init_weights(&m, 7, NULL), MR_OK);
        const int layers[2] = {0, 2};
        for (int j = 0; j < 2; j++) {
            const mr_layer *l = &m.layers[layers[j]];
            const mr_weight *wt = &l->w[0];
            const float *w = mr_dfloat_ptr(m.params) + wt->offset;
            /* conv 5x5x1 -> 32; dense (10 x 10 x 32) -> 128 */
            const double fan_in = j == 0 ? 25.0 : 3200.0, fan_out = j == 0 ? 800.0 : 128.0;
            const int he = k >= 2, normal = k % 2;
            const double sd = sqrt(2.0 / (he ? fan_in : fan_in + fan_out));
            double sq = 0.0, mx = 0.0;
            for (int64_t i = 0; i < wt->size; i++) {
                sq += (double)w[i] * w[i];
                mx = fabs(w[i]) > mx ? fabs(w[i]) : mx;
            }
            const double got = sqrt(sq / (double)wt->size);
            if (k == 0) {
                float *want = malloc(sizeof(float) * (size_t)wt->size);
                const float lim = sqrtf(6.0f / (float)(fan_in + fan_out));
                mr_rng_uniform(7, MR_RNG_STREAM_INIT, (uint32_t)l->index, 0, -lim, lim, want,
                               wt->size);
                ck_assert_mem_eq(w, want, sizeof(float) * (size_t)wt->size);
                free(want);
            } else if (!normal) {
                ck_assert_msg(mx <= sqrt(6.0 / fan_in) && mx > 0.95 * sqrt(6.0 / fan_in),
                              "%s: max %g", names[k], mx);
            } else {
                ck_assert_msg(mx <= 2.0 * sd / 0.87962566103423978 * (1 + 1e-6), "%s: max %g",
                              names[k], mx);
            }
            /* the estimate's relative spread is sqrt((kurtosis - 1) / 4n):
             * kurtosis 1.8 uniform, 2.365 for the normal truncated at 2 */
            const double tol = 5.0 * sqrt(((normal ? 2.365 : 1.8) - 1.0) / (4.0 * wt->size));
            ck_assert_msg(fabs(got / sd - 1.0) < tol, "%s layer %d: stddev %g, expected %g",
                          names[k], layers[j], got, sd);
            const float *bias = mr_dfloat_ptr(m.params) + l->w[1].offset;
            for (int64_t i = 0; i < l->w[1].size; i++)
                ck_assert_float_eq(bias[i], 0.0f);
        }
        mr_model_free(&m);
        mr_config_free(&cfg);
    }
}
END_TEST

/* kernel_l2 (Keras kernel_regularizer=L2): mr_model_l2_penalty is the sum
 * of l2 sum(kernel^2) over the layers that have one (not the biases, not
 * the layers without), and the update adds 2 l2 kernel to those kernels'
 * gradients only: plain SGD at rate 1 from zero gradients moves each
 * regularized kernel by exactly that and nothing else. */
START_TEST(l2_penalty_and_gradient) {
    const char *text = "[net]\nbatch=4\noptimizer=sgd\nlearning_rate=1\n[data]\n"
                       "train_images=a\ntrain_labels=b\n[input]\nshape=4,4,1\n[conv2d]\n"
                       "filters=2\nsize=3\nkernel_l2=0.01\n[flatten]\n[dense]\nunits=5\n"
                       "[dense]\nunits=3\nactivation=softmax\nkernel_l2=0.5\n";
    mr_config cfg;
    mr_model m;
    build(text, &cfg, &m, 4);
    ck_assert_int_eq(mr_model_init_weights(&m, 3, NULL), MR_OK);
    float *w = mr_dfloat_ptr(m.params);
    const int64_t n = m.n_params;
    float *w0 = malloc(sizeof(float) * (size_t)n);
    memcpy(w0, w, sizeof(float) * (size_t)n);
    const float l2s[4] = {0.01f, 0.0f, 0.0f, 0.5f}; /* by layer: conv, flatten, dense, dense */
    double want = 0.0;
    for (int l = 0; l < 4; l++) {
        if (l2s[l] == 0.0f) continue;
        const mr_weight *k = &m.layers[l].w[0];
        double s = 0.0;
        for (int64_t i = k->offset; i < k->offset + k->size; i++)
            s += (double)w[i] * (double)w[i];
        want += (double)l2s[l] * s;
    }
    double p = -1.0;
    ck_assert_int_eq(mr_model_l2_penalty(&m, &p, NULL), MR_OK);
    ck_assert_msg(fabs(p - want) <= 1e-12 * want && want > 0.0, "%g vs %g", p, want);
    ck_assert_int_eq(mr_model_zero_grads(&m, NULL), MR_OK);
    ck_assert_int_eq(mr_model_apply_update(&m, 1.0f, 1, NULL, NULL), MR_OK);
    for (int l = 0; l < 4; l++)
        for (int k = 0; k < m.layers[l].n_weights; k++) {
            const mr_weight *wt = &m.layers[l].w[k];
            const float a = k == 0 ? 2.0f * l2s[l] : 0.0f;
            for (int64_t i = wt->offset; i < wt->offset + wt->size; i++)
                ck_assert_msg(w[i] == w0[i] - a * w0[i], "layer %d weight %d [%lld]", l, k,
                              (long long)(i - wt->offset));
        }
    free(w0);
    mr_model_free(&m);
    mr_config_free(&cfg);
    /* without kernel_l2 anywhere: 0 */
    build(mlp_cfg, &cfg, &m, 8);
    ck_assert_int_eq(mr_model_init_weights(&m, 3, NULL), MR_OK);
    ck_assert_int_eq(mr_model_l2_penalty(&m, &p, NULL), MR_OK);
    ck_assert(p == 0.0);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

/* Norm clipping in the update (mr_model_apply_update): with clipnorm,
 * each trainable weight's gradient is scaled to that norm where it was
 * larger and left bitwise alone where it was not; with global_clipnorm, all
 * of them together. Plain SGD at rate 1 makes the applied gradient
 * readable as w_before - w_after. */
START_TEST(norm_clipping) {
    const char *fmt = "[net]\nbatch=4\noptimizer=sgd\nlearning_rate=1\n%s\n[data]\n"
                      "train_images=a\ntrain_labels=b\n[input]\nshape=6\n[dense]\nunits=5\n"
                      "[dense]\nunits=3\nactivation=softmax\n";
    for (int global = 0; global < 2; global++) {
        char text[512];
        snprintf(text, sizeof text, fmt, global ? "global_clipnorm = 2" : "clipnorm = 0.5");
        const double c = global ? 2.0 : 0.5;
        mr_config cfg;
        mr_model m;
        build(text, &cfg, &m, 4);
        ck_assert_int_eq(mr_model_init_weights(&m, 5, NULL), MR_OK);
        float *w = mr_dfloat_ptr(m.params), *g = mr_dfloat_ptr(m.grads);
        const int64_t n = m.n_params;
        float *w0 = malloc(sizeof(float) * (size_t)n), *g0 = malloc(sizeof(float) * (size_t)n);
        /* gradients of norm far above c in the kernels, below it in the
         * biases (per weight) */
        for (int64_t i = 0; i < n; i++)
            g[i] = (float)((i % 7) - 3) * 0.5f;
        for (int l = 0; l < m.n_layers; l++)
            for (int k = 0; k < m.layers[l].n_weights; k++)
                if (strcmp(m.layers[l].w[k].name, "bias") == 0)
                    for (int64_t i = 0; i < m.layers[l].w[k].size; i++)
                        g[m.layers[l].w[k].offset + i] = 0.01f;
        memcpy(w0, w, sizeof(float) * (size_t)n);
        memcpy(g0, g, sizeof(float) * (size_t)n);
        ck_assert_int_eq(mr_model_apply_update(&m, 1.0f, 1, NULL, NULL), MR_OK);
        double total = 0.0, total0 = 0.0;
        for (int l = 0; l < m.n_layers; l++)
            for (int k = 0; k < m.layers[l].n_weights; k++) {
                const mr_weight *wt = &m.layers[l].w[k];
                double ss = 0.0, ss0 = 0.0;
                for (int64_t i = wt->offset; i < wt->offset + wt->size; i++) {
                    const double applied = (double)w0[i] - (double)w[i];
                    ss += applied * applied, ss0 += (double)g0[i] * g0[i];
                    /* the direction is kept: same sign, same ratio */
                    ck_assert(applied * g0[i] >= 0.0);
                }
                total += ss, total0 += ss0;
                if (!global && sqrt(ss0) > c)
                    ck_assert_msg(fabs(sqrt(ss) - c) < 1e-5, "%s/%s: norm %g", m.layers[l].name,
                                  wt->name, sqrt(ss));
                if (!global && sqrt(ss0) <= c)
                    for (int64_t i = wt->offset; i < wt->offset + wt->size; i++)
                        ck_assert_float_eq(g[i], g0[i]);
            }
        if (global) ck_assert_msg(fabs(sqrt(total) - c) < 1e-5, "global norm %g", sqrt(total));
        ck_assert(sqrt(total0) > 2.0 * c); /* there was something to clip */
        free(w0), free(g0);
        mr_model_free(&m);
        mr_config_free(&cfg);
    }
}
END_TEST

/* The checks for NaN and Inf: the gradients (and which layer, backward
 * order: the last layer first), the weights and the BN state; on a CPU
 * context and on one whose memory is not host memory (the reads go
 * through the staging buffer, as on a GPU). */
START_TEST(nonfinite_checks) {
    static const char *bn_cfg = "[net]\nbatch=4\n[data]\ntrain_images=a\ntrain_labels=b\n"
                                "[input]\nshape=6\n[dense]\nunits=5\n[batchnorm]\n"
                                "[dense]\nunits=3\n[dense]\nunits=2\nactivation=softmax\n";
    for (int staged = 0; staged < 2; staged++) {
        mr_backend *be = NULL;
        ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, &be, NULL), MR_OK);
        be->host_memory = !staged;
        mr_config cfg;
        mr_model m;
        mr_error err = {0};
        ck_assert_msg(mr_config_parse(bn_cfg, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
        ck_assert_msg(mr_model_init(&m, be, &cfg, 4, 0, &err) == MR_OK, "%s", err.msg);
        ck_assert_int_eq(mr_model_init_weights(&m, 5, &err), MR_OK);
        ck_assert_int_eq(mr_model_zero_grads(&m, &err), MR_OK);
        int any = -1, layer = 7;
        ck_assert_int_eq(mr_model_grads_nonfinite(&m, &any, &err), MR_OK);
        ck_assert_int_eq(any, 0);
        ck_assert_int_eq(mr_model_first_nonfinite_layer(&m, &layer, &err), MR_OK);
        ck_assert_int_eq(layer, -1);
        ck_assert_int_eq(mr_model_params_nonfinite(&m, &any, &err), MR_OK);
        ck_assert_int_eq(any, 0);
        /* a NaN in the first dense's bias gradient, an Inf in the third's
         * kernel: the third (index 3) comes first backward */
        const float nan = NAN, inf = INFINITY;
        const mr_weight *b0 = &m.layers[0].w[1], *k2 = &m.layers[3].w[0];
        ck_assert_int_eq(mr_model_write(&m, mr_dfloat_at(m.grads, b0->offset + 4), &nan, 1, &err),
                         MR_OK);
        ck_assert_int_eq(mr_model_grads_nonfinite(&m, &any, &err), MR_OK);
        ck_assert_int_eq(any, 1);
        ck_assert_int_eq(mr_model_first_nonfinite_layer(&m, &layer, &err), MR_OK);
        ck_assert_int_eq(layer, 0);
        ck_assert_int_eq(mr_model_write(&m, mr_dfloat_at(m.grads, k2->offset + 1), &inf, 1, &err),
                         MR_OK);
        ck_assert_int_eq(mr_model_first_nonfinite_layer(&m, &layer, &err), MR_OK);
        ck_assert_int_eq(layer, 3);
        /* the gradients are not the weights */
        ck_assert_int_eq(mr_model_params_nonfinite(&m, &any, &err), MR_OK);
        ck_assert_int_eq(any, 0);
        /* BN's moving variance is state, not a trainable weight */
        ck_assert_int_gt(m.n_state, 0);
        ck_assert_int_eq(mr_model_write(&m, mr_dfloat_at(m.state, m.n_state - 1), &nan, 1, &err),
                         MR_OK);
        ck_assert_int_eq(mr_model_params_nonfinite(&m, &any, &err), MR_OK);
        ck_assert_int_eq(any, 1);
        const float one = 1.0f;
        ck_assert_int_eq(mr_model_write(&m, mr_dfloat_at(m.state, m.n_state - 1), &one, 1, &err),
                         MR_OK);
        ck_assert_int_eq(mr_model_write(&m, mr_dfloat_at(m.params, m.n_params - 1), &inf, 1, &err),
                         MR_OK);
        ck_assert_int_eq(mr_model_params_nonfinite(&m, &any, &err), MR_OK);
        ck_assert_int_eq(any, 1);
        mr_model_free(&m);
        mr_config_free(&cfg);
        mr_backend_destroy(be);
    }
}
END_TEST

/* Where the context's memory is not host memory, batches go through two
 * staging and two device buffers in turn, so the loader can fill the next
 * batch while the device computes on the last: each upload makes its own
 * buffer the model's input and leaves the one before as it was. */
START_TEST(staged_input_in_turn) {
    mr_backend *be = NULL;
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, &be, NULL), MR_OK);
    be->host_memory = 0;
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(mlp_cfg, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(&m, be, &cfg, 4, 0, &err) == MR_OK, "%s", err.msg);
    const size_t n = 4 * (size_t)m.in_size;
    ck_assert(m.inputs[0] && m.inputs[1] && m.inputs[0] != m.inputs[1]);
    ck_assert(m.input_host[0] && m.input_host[1] && m.input_host[0] != m.input_host[1]);
    float *back = malloc(sizeof(float) * n);
    for (int b = 0; b < 4; b++) {
        float *in = mr_model_input_host(&m);
        ck_assert_ptr_eq(in, m.input_host[b % 2]);
        for (size_t i = 0; i < n; i++)
            in[i] = (float)(b * 1000) + (float)i;
        ck_assert_int_eq(mr_model_input_upload(&m, 4, &err), MR_OK);
        ck_assert_ptr_eq(m.input, m.inputs[b % 2]);
        ck_assert_int_eq(mr_backend_to_host(be, back, m.input, sizeof(float) * n, &err), MR_OK);
        ck_assert_float_eq(back[0], (float)(b * 1000));
        ck_assert_float_eq(back[n - 1], (float)(b * 1000) + (float)(n - 1));
        if (b > 0) { /* the batch before is still there */
            ck_assert_int_eq(
                mr_backend_to_host(be, back, m.inputs[(b - 1) % 2], sizeof(float) * n, &err),
                MR_OK);
            ck_assert_float_eq(back[1], (float)((b - 1) * 1000) + 1.0f);
        }
    }
    free(back);
    mr_model_free(&m);
    ck_assert(m.inputs[0] == NULL && m.inputs[1] == NULL && m.input_host[0] == NULL);
    mr_config_free(&cfg);
    mr_backend_destroy(be);
}
END_TEST

/* One training step, evaluation and predictions of the same model on a CPU
 * context that uses its memory in place and on one that says it is not
 * host memory: the latter stages every host access through copies, as on
 * a GPU, and must give exactly the same bits. */
static void one_step(const char *text, int staged, float *params, double *eval_loss, int32_t *pred,
                     float *probs) {
    mr_backend *be = NULL;
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, &be, NULL), MR_OK);
    be->host_memory = !staged;
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(&m, be, &cfg, 4, 2, &err) == MR_OK, "%s", err.msg);
    ck_assert(staged ? m.host != NULL : m.host == NULL);
    ck_assert_int_eq(mr_model_init_weights(&m, 11, &err), MR_OK);
    int32_t labels[4] = {2, 0, 1, 2};
    float *in = mr_model_input_host(&m);
    ck_assert(staged ? in == m.input_host[0] : in == mr_dfloat_ptr(m.input));
    mr_rng_uniform(4, 1, 0, 0, 0.0f, 1.0f, in, 4 * m.in_size);
    ck_assert_int_eq(mr_model_input_upload(&m, 4, &err), MR_OK);
    double loss = 0.0;
    double correct = 0;
    ck_assert_int_eq(mr_model_zero_grads(&m, &err), MR_OK);
    m.run.seed = 3;
    ck_assert_int_eq(mr_model_train_batch(&m, labels, 4, 4.0f, &loss, &correct, NULL, NULL, &err),
                     MR_OK);
    const float extra[2] = {(float)loss, (float)correct};
    float back[2];
    ck_assert_int_eq(mr_model_write_extra(&m, extra, 2, &err), MR_OK);
    ck_assert_int_eq(mr_model_read_extra(&m, back, 2, &err), MR_OK);
    ck_assert_mem_eq(back, extra, sizeof extra);
    ck_assert_int_eq(mr_model_apply_update(&m, 0.01f, 1, NULL, &err), MR_OK);
    /* every weight read back through the model, as checkpoints do */
    for (int i = 0; i < m.n_layers; i++)
        for (int w = 0; w < m.layers[i].n_weights; w++) {
            const mr_weight *wt = &m.layers[i].w[w];
            const float *host;
            ck_assert_int_eq(mr_model_read(&m, wt->data, (size_t)wt->size, &host, &err), MR_OK);
            if (wt->trainable) memcpy(params + wt->offset, host, sizeof(float) * (size_t)wt->size);
        }
    *eval_loss = 0.0;
    correct = 0.0;
    ck_assert_int_eq(mr_model_eval_batch(&m, labels, 4, eval_loss, &correct, NULL, &err), MR_OK);
    ck_assert_int_eq(mr_model_predictions(&m, 4, pred, probs, &err), MR_OK);
    mr_model_free(&m);
    mr_config_free(&cfg);
    mr_backend_destroy(be);
}

START_TEST(staged_host_access_same_bits) {
    const char *texts[] = {mlp_cfg, pass_cfg,
                           "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=6,6,2\n"
                           "[conv2d]\nfilters=3\nsize=3\npadding=same\nuse_bias=0\n[batchnorm]\n"
                           "[activation]\nactivation=relu\n[maxpool]\nsize=2\n[flatten]\n"
                           "[dense]\nunits=3\nactivation=softmax\n"};
    for (int t = 0; t < 3; t++) {
        float a[120000], b[120000], pa[40], pb[40];
        int32_t ca[4], cb[4];
        double la, lb;
        one_step(texts[t], 0, a, &la, ca, pa);
        one_step(texts[t], 1, b, &lb, cb, pb);
        mr_config cfg;
        ck_assert_int_eq(mr_config_parse(texts[t], "t.cfg", NULL, &cfg, NULL), MR_OK);
        mr_model m;
        ck_assert_int_eq(mr_model_init(&m, tu_cpu_backend(), &cfg, 1, 0, NULL), MR_OK);
        size_t n = (size_t)m.n_params, k = (size_t)m.out_size;
        ck_assert_uint_le(n, 120000);
        mr_model_free(&m);
        mr_config_free(&cfg);
        ck_assert_msg(memcmp(a, b, sizeof(float) * n) == 0, "config %d: weights differ", t);
        ck_assert(la == lb);
        ck_assert_mem_eq(ca, cb, sizeof ca);
        ck_assert_uint_le(k, 10);
        ck_assert_mem_eq(pa, pb, sizeof(float) * 4 * k);
    }
}
END_TEST

/* A context whose ops carry no kernels: the model says so (faked from the
 * CPU's context). */
START_TEST(no_kernels_for_the_device) {
    mr_backend fake = *tu_cpu_backend();
    mr_backend_ops ops = *fake.ops;
    ops.kernels = NULL;
    fake.ops = &ops;
    fake.scratch = NULL;
    fake.scratch_floats = 0;
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    ck_assert_int_eq(mr_config_parse(mlp_cfg, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_int_eq(mr_model_init(&m, &fake, &cfg, 4, 0, &err), MR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "t.cfg:8: [flatten]: no kernels for ") &&
                      strstr(err.msg, " in this build"),
                  "%s", err.msg);
    mr_config_free(&cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mlp_layout_and_summary);
    tcase_add_test(tc, adapt_matches_numpy);
    tcase_add_test(tc, same_seed_same_bits);
    tcase_add_test(tc, model_gradient_sparse_cce);
    tcase_add_test(tc, model_gradient_mse);
    tcase_add_test(tc, model_gradient_cce_relu);
    tcase_add_test(tc, model_gradient_conv_bn_pool_dropout);
    tcase_add_test(tc, model_gradient_residual);
    tcase_add_test(tc, layernorm_model_gradient_and_summary);
    tcase_add_test(tc, residual_layout_and_summary);
    tcase_add_test(tc, graph_passes_same_gradients);
    tcase_add_test(tc, graph_model_errors);
    tcase_add_test(tc, shipped_residual_configs);
    tcase_add_test(tc, more_than_the_host_has_is_refused);
    tcase_add_test(tc, resnet20_fits_a_batch);
    tcase_add_test(tc, synthetic_input_made_by_the_context);
    tcase_add_test(tc, gradients_accumulate);
    tcase_add_test(tc, after_layer_reports_reverse_order);
    tcase_add_test(tc, passes_equal_one_pass);
    tcase_add_test(tc, pass_size_from_the_layout);
    tcase_add_test(tc, shape_errors_name_the_line);
    tcase_add_test(tc, from_logits_rules);
    tcase_add_test(tc, binary_crossentropy_rules);
    tcase_add_test(tc, multi_label_bce_rules);
    tcase_add_test(tc, class_weight_count);
    tcase_add_test(tc, host_access_in_place);
    tcase_add_test(tc, staged_host_access_same_bits);
    tcase_add_test(tc, staged_input_in_turn);
    tcase_add_test(tc, no_kernels_for_the_device);
    tcase_add_test(tc, nonfinite_checks);
    tcase_add_test(tc, norm_clipping);
    tcase_add_test(tc, kernel_initializers);
    tcase_add_test(tc, l2_penalty_and_gradient);
    tcase_add_test(tc, fused_relu_same_bits);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
