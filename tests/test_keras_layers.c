/* test_keras_layers.c: the layers of Keras's image models: ReLU (max_value,
 * negative_slope, threshold), Softmax, GlobalMaxPooling2D, Reshape and
 * SpatialDropout2D: gradient checks, values, their .cfg sections under
 * Keras's names, the refusals, and the Keras configs they export.
 *
 * Bound: as test_layers.c, errors normalised by max(1, max|grad|) below
 * 2e-3 (finite-difference noise near 1e-4); kinks are skipped by gradcheck. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/keras.h"
#include "models/model.h"
#include "tests/gradcheck.h"
#include "backends/backends.h"
#include "tests/testutil.h"

static const char *const head = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n";

static void check_grad(const mr_layer_cfg *c, mr_shape in) {
    gc_layer_result r;
    mr_error err = {0};
    for (uint64_t seed = 1; seed <= 3; seed++) {
        ck_assert_msg(gc_check_layer(c, in, 3, seed, &r, &err) == MR_OK, "%s", err.msg);
        ck_assert_msg(r.err_input < 2e-3, "kind %d: %g", c->kind, r.err_input);
        ck_assert_int_le(r.skipped, r.checked / 20);
        ck_assert_int_gt(r.checked, 0);
    }
}

/* A layer of cfg c on input shape `in`, set up on the CPU. */
static mr_layer make(const mr_layer_cfg *c, mr_shape in, mr_error *err, mr_status *st) {
    mr_layer l;
    memset(&l, 0, sizeof l);
    l.ops = mr_layer_ops_for(c->kind);
    l.cfg = c;
    l.index = 2;
    l.in = in;
    *st = gc_setup(&l, 8, "t.cfg", err);
    return l;
}

static mr_layer_cfg relu_cfg(float mx, float ns, float t) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_RELU);
    c.max_value = mx, c.negative_slope = ns, c.threshold = t;
    return c;
}

START_TEST(relu_gradients) {
    mr_shape img = {3, {2, 3, 4}};
    mr_layer_cfg a = relu_cfg(-1.0f, 0.0f, 0.0f), b = relu_cfg(0.5f, 0.0f, 0.0f),
                 c = relu_cfg(0.6f, 0.1f, 0.2f), d = relu_cfg(-1.0f, 0.3f, 0.0f);
    check_grad(&a, img);
    check_grad(&b, img);
    check_grad(&c, img);
    check_grad(&d, (mr_shape){1, {7, 0, 0}});
}
END_TEST

/* Keras 3.15's ReLU layer's values and TensorFlow's gradients of them, as
 * Keras 3.15 on TensorFlow printed them (x * (x > t), clipped to [0, max],
 * less slope * relu(t - x); leaky_relu where no max and t 0). */
START_TEST(relu_values) {
    const float x[6] = {-2.0f, 0.0f, 0.1f, 0.5f, 3.0f, 7.0f};
    const struct {
        float mx, ns, t, y[6], g[6];
    } cases[] = {
        {-1, 0, 0, {0, 0, 0.1f, 0.5f, 3, 7}, {0, 0, 1, 1, 1, 1}},
        {6, 0, 0, {0, 0, 0.1f, 0.5f, 3, 6}, {0, 0, 1, 1, 1, 0}},
        {-1, 0.5f, 0, {-1, 0, 0.1f, 0.5f, 3, 7}, {0.5f, 0.5f, 1, 1, 1, 1}},
        {6, 0.5f, 1, {-1.5f, -0.5f, -0.45f, -0.25f, 3, 6}, {0.5f, 0.5f, 0.5f, 0.5f, 1, 0}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mr_layer_cfg c = relu_cfg(cases[k].mx, cases[k].ns, cases[k].t);
        mr_error err = {0};
        mr_status st;
        mr_layer l = make(&c, (mr_shape){1, {6, 0, 0}}, &err, &st);
        ck_assert_msg(st == MR_OK, "%s", err.msg);
        float y[6], dy[6] = {1, 1, 1, 1, 1, 1}, dx[6];
        mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1};
        ck_assert_int_eq(gc_forward(&l, &run, 1, x, y), MR_OK);
        ck_assert_int_eq(gc_backward(&l, &run, 1, x, y, dy, dx), MR_OK);
        for (int i = 0; i < 6; i++) {
            ck_assert_msg(fabsf(y[i] - cases[k].y[i]) < 1e-6f, "case %zu x %g: y %g", k, x[i],
                          y[i]);
            ck_assert_msg(dx[i] == cases[k].g[i], "case %zu x %g: dx %g", k, x[i], dx[i]);
        }
        mr_layer_destroy(&l);
    }
}
END_TEST

/* Parses text after head; returns the status, the message in err. */
static mr_status parse(const char *layers, mr_config *cfg, mr_error *err) {
    char text[1024];
    snprintf(text, sizeof text, "%s%s", head, layers);
    return mr_config_parse(text, "t.cfg", NULL, cfg, err);
}

START_TEST(relu_cfg_keras_spelling) {
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(parse("[input]\nshape=4,4,2\n[ReLU]\nmax_value=6.0\n[re_lu]\nmax_value=None\n"
                        "negative_slope=0.1\nthreshold=0.5\n",
                        &cfg, &err) == MR_OK,
                  "%s", err.msg);
    ck_assert_int_eq(cfg.layers[1].kind, MR_LAYER_RELU);
    ck_assert_float_eq(cfg.layers[1].max_value, 6.0f);
    ck_assert_float_eq(cfg.layers[1].negative_slope, 0.0f);
    ck_assert_float_eq(cfg.layers[2].max_value, -1.0f);
    ck_assert_float_eq(cfg.layers[2].threshold, 0.5f);
    mr_config_free(&cfg);
    ck_assert_int_eq(parse("[input]\nshape=4\n[ReLU]\nthreshold=-1\n", &cfg, &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "t.cfg:8:") && strstr(err.msg, "threshold"), "%s", err.msg);
}
END_TEST

/* A negative max_value other than -1 (None) is refused, naming the line. */
START_TEST(relu_negative_max_refused) {
    mr_layer_cfg c = relu_cfg(-0.5f, 0.0f, 0.0f);
    c.line = 12;
    mr_error err = {0};
    mr_status st;
    mr_layer l = make(&c, (mr_shape){1, {4, 0, 0}}, &err, &st);
    ck_assert_int_eq(st, MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "t.cfg:12: [relu] max_value -0.5"), "%s", err.msg);
    mr_layer_destroy(&l);
}
END_TEST

/* [Softmax] is [activation] activation = softmax: the same outputs, and
 * the same loss rules on the last layer. */
START_TEST(softmax_is_the_activation) {
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(parse("[input]\nshape=5\n[Softmax]\naxis=-1\n", &cfg, &err) == MR_OK, "%s",
                  err.msg);
    ck_assert_int_eq(cfg.layers[1].kind, MR_LAYER_SOFTMAX);
    ck_assert_int_eq(cfg.layers[1].activation, MR_ACTIVATION_SOFTMAX);
    mr_config_free(&cfg);
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(parse("[input]\nshape=5\n[Softmax]\naxis=1\n", &cfg, &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "t.cfg:8:") && strstr(err.msg, "axis"), "%s", err.msg);

    mr_layer_cfg s = gc_layer_cfg(MR_LAYER_SOFTMAX), a = gc_layer_cfg(MR_LAYER_ACTIVATION);
    a.activation = MR_ACTIVATION_SOFTMAX;
    mr_status st;
    mr_shape in = {3, {2, 2, 3}};
    mr_layer ls = make(&s, in, &err, &st), la = make(&a, in, &err, &st);
    float x[2 * 12], ys[2 * 12], ya[2 * 12], dy[2 * 12], dxs[2 * 12], dxa[2 * 12];
    for (int i = 0; i < 24; i++)
        x[i] = sinf((float)i), dy[i] = cosf((float)i);
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1};
    gc_forward(&ls, &run, 2, x, ys);
    gc_forward(&la, &run, 2, x, ya);
    gc_backward(&ls, &run, 2, x, ys, dy, dxs);
    gc_backward(&la, &run, 2, x, ya, dy, dxa);
    ck_assert(memcmp(ys, ya, sizeof ys) == 0 && memcmp(dxs, dxa, sizeof dxs) == 0);
    mr_layer_destroy(&ls), mr_layer_destroy(&la);
    check_grad(&s, (mr_shape){1, {6, 0, 0}});
}
END_TEST

START_TEST(softmax_last_layer_loss_rules) {
    mr_config cfg;
    mr_error err = {0};
    mr_model m;
    const char *layers = "[input]\nshape=6\n[dense]\nunits=3\n[Softmax]\n";
    char text[512];
    snprintf(text, sizeof text, "[net]\nfrom_logits=1\n[data]\ntrain_images=a\ntrain_labels=b\n%s",
             layers);
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_OK);
    ck_assert_int_eq(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "the last layer is a softmax"), "%s", err.msg);
    mr_config_free(&cfg);
    /* without from_logits: trained, fused with the cross-entropy */
    ck_assert_int_eq(parse(layers, &cfg, &err), MR_OK);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(m.layers[m.n_layers - 1].logits_out, 1);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

START_TEST(globalmaxpool_gradients) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_GLOBALMAXPOOL);
    check_grad(&c, (mr_shape){3, {3, 4, 5}});
    c.keepdims = 1;
    check_grad(&c, (mr_shape){3, {2, 3, 2}});
}
END_TEST

/* Ties share the gradient equally (TensorFlow's reduce_max gradient). */
START_TEST(globalmaxpool_values_and_ties) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_GLOBALMAXPOOL);
    mr_error err = {0};
    mr_status st;
    mr_layer l = make(&c, (mr_shape){3, {2, 2, 2}}, &err, &st);
    ck_assert_int_eq(st, MR_OK);
    ck_assert_int_eq(l.out.rank, 1);
    ck_assert_int_eq(l.out.d[0], 2);
    /* channel 0: 1, 4, 4, -2 (a tie at 4); channel 1: -1, -3, 2, 0 */
    const float x[8] = {1, -1, 4, -3, 4, 2, -2, 0};
    float y[2], dy[2] = {1.0f, 3.0f}, dx[8];
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1};
    gc_forward(&l, &run, 1, x, y);
    ck_assert(y[0] == 4.0f && y[1] == 2.0f);
    gc_backward(&l, &run, 1, x, y, dy, dx);
    const float want[8] = {0, 0, 0.5f, 0, 0.5f, 3, 0, 0};
    for (int i = 0; i < 8; i++)
        ck_assert_msg(dx[i] == want[i], "dx[%d] = %g", i, dx[i]);
    mr_layer_destroy(&l);
    c.keepdims = 1;
    l = make(&c, (mr_shape){3, {2, 2, 2}}, &err, &st);
    ck_assert(l.out.rank == 3 && l.out.d[0] == 1 && l.out.d[1] == 1 && l.out.d[2] == 2);
    mr_layer_destroy(&l);
    c.keepdims = 0;
    l = make(&c, (mr_shape){1, {8, 0, 0}}, &err, &st);
    ck_assert_int_eq(st, MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "[globalmaxpool] needs an image input"), "%s", err.msg);
    mr_layer_destroy(&l);
}
END_TEST

static mr_status reshape_to(const char *target, mr_shape in, mr_shape *out, mr_error *err) {
    mr_config cfg;
    char layers[256];
    snprintf(layers, sizeof layers, "[input]\nshape=2,2,3\n[Reshape]\ntarget_shape=%s\n", target);
    mr_status st = parse(layers, &cfg, err);
    if (st != MR_OK) return st;
    mr_layer l = make(&cfg.layers[1], in, err, &st);
    *out = l.out;
    mr_layer_destroy(&l);
    mr_config_free(&cfg);
    return st;
}

START_TEST(reshape_shapes) {
    mr_shape in = {3, {2, 2, 3}}, out;
    mr_error err = {0};
    ck_assert_int_eq(reshape_to("(12,)", in, &out, &err), MR_OK);
    ck_assert(out.rank == 1 && out.d[0] == 12);
    ck_assert_int_eq(reshape_to("(1, 1, -1)", in, &out, &err), MR_OK);
    ck_assert(out.rank == 3 && out.d[0] == 1 && out.d[1] == 1 && out.d[2] == 12);
    ck_assert_int_eq(reshape_to("[3, -1, 2]", in, &out, &err), MR_OK);
    ck_assert(out.d[0] == 3 && out.d[1] == 2 && out.d[2] == 2);
    const struct {
        const char *target, *want;
    } bad[] = {
        {"5", "does not hold the input's 12 values"},
        {"5,-1,1", "does not hold"},
        {"-1,-1,12", "more than one -1"},
        {"0,12,1", "a size of 0"},
        {"3,4", "has 2 values"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err); /* an error keeps its first message */
        ck_assert_int_eq(reshape_to(bad[i].target, in, &out, &err), MR_ERR_CONFIG);
        ck_assert_msg(strstr(err.msg, "t.cfg:7: [reshape]") && strstr(err.msg, bad[i].want),
                      "%s: %s", bad[i].target, err.msg);
    }
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_RESHAPE);
    c.target_rank = 1, c.target_shape[0] = -1;
    check_grad(&c, in);
}
END_TEST

/* Every channel of an example is kept at every pixel (scaled by
 * 1 / (1 - rate)) or dropped at every pixel; about rate of them dropped;
 * the mask follows the sample's global position; inference is identity. */
START_TEST(spatialdropout_whole_channels) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_SPATIALDROPOUT);
    c.rate = 0.25f;
    enum { B = 40, H = 3, W = 2, C = 50, N = H * W * C };
    mr_error err = {0};
    mr_status st;
    mr_layer l = make(&c, (mr_shape){3, {H, W, C}}, &err, &st);
    ck_assert_int_eq(st, MR_OK);
    float *x = malloc(sizeof(float) * B * N), *y = malloc(sizeof(float) * B * N),
          *y2 = malloc(sizeof(float) * B * N);
    for (int i = 0; i < B * N; i++)
        x[i] = 1.0f + (float)(i % 7);
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1, .seed = 5, .step = 3};
    gc_forward(&l, &run, B, x, y);
    int dropped = 0;
    for (int b = 0; b < B; b++)
        for (int ch = 0; ch < C; ch++) {
            const int kept = y[b * N + ch] != 0.0f;
            dropped += !kept;
            for (int p = 0; p < H * W; p++) {
                const int j = b * N + p * C + ch;
                ck_assert_float_eq(y[j], kept ? x[j] * (1.0f / 0.75f) : 0.0f);
            }
        }
    /* 2000 Bernoulli(0.25): sd ~ 19; allow 5 sd */
    ck_assert_int_lt(abs(dropped - 500), 97);
    run.sample_base = 1; /* row 0 now is the first call's row 1 */
    gc_forward(&l, &run, B - 1, x + N, y2);
    ck_assert(memcmp(y2, y + N, sizeof(float) * (B - 1) * N) == 0);
    run.training = 0;
    gc_forward(&l, &run, B, x, y);
    ck_assert(memcmp(x, y, sizeof(float) * B * N) == 0);
    free(x), free(y), free(y2);
    mr_layer_destroy(&l);
    c.rate = 0.5f;
    check_grad(&c, (mr_shape){3, {2, 2, 6}});
}
END_TEST

/* The exported Keras configs: Keras 3.15's keys and values. */
START_TEST(keras_configs) {
    const char *layers = "[input]\nshape=4,4,2\n[ReLU]\nmax_value=6\n[SpatialDropout2D]\n"
                         "rate=0.25\n[GlobalMaxPooling2D]\n[Reshape]\ntarget_shape=(1,1,-1)\n"
                         "[GlobalMaxPooling2D]\nkeepdims=True\n[reshape]\ntarget_shape=2\n"
                         "[dense]\nunits=3\n[Softmax]\n";
    mr_config cfg;
    mr_error err = {0};
    mr_model m;
    ck_assert_msg(parse(layers, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err) == MR_OK, "%s", err.msg);
    char *j = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, 0.001f);
    const char *want[] = {
        "\"class_name\": \"ReLU\", \"config\": {\"name\": \"re_lu\", \"trainable\": true, ",
        "\"max_value\": 6.0, \"negative_slope\": 0.0, \"threshold\": 0.0}",
        "\"class_name\": \"SpatialDropout2D\", \"config\": {\"rate\": 0.25, \"seed\": null, "
        "\"name\": \"spatial_dropout2d\", \"dtype\": \"float32\", \"data_format\": "
        "\"channels_last\"}",
        "\"name\": \"global_max_pooling2d\", ",
        "\"data_format\": \"channels_last\", \"keepdims\": false}",
        "\"name\": \"reshape\", ",
        "\"target_shape\": [1, 1, -1]}",
        "\"data_format\": \"channels_last\", \"keepdims\": true}",
        "\"target_shape\": [2]}",
        "\"class_name\": \"Softmax\", \"config\": {\"name\": \"softmax\", ",
        "\"axis\": -1}",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(j, want[i]) != NULL, "want %s in %s", want[i], j);
    free(j);
    mr_model_free(&m);
    mr_config_free(&cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("keras_layers");
    TCase *tc = tcase_create("keras_layers");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, relu_gradients);
    tcase_add_test(tc, relu_values);
    tcase_add_test(tc, relu_cfg_keras_spelling);
    tcase_add_test(tc, relu_negative_max_refused);
    tcase_add_test(tc, softmax_is_the_activation);
    tcase_add_test(tc, softmax_last_layer_loss_rules);
    tcase_add_test(tc, globalmaxpool_gradients);
    tcase_add_test(tc, globalmaxpool_values_and_ties);
    tcase_add_test(tc, reshape_shapes);
    tcase_add_test(tc, spatialdropout_whole_channels);
    tcase_add_test(tc, keras_configs);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
