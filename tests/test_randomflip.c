/* test_randomflip.c: [randomflip] (Keras RandomFlip, models/randomflip.c):
 * in training each example is its input flipped along the axes its mode
 * allows, about half of the examples per axis; the identity in inference;
 * the same bits for 1 replica x 64 as for 2 x 32 (the draw follows the
 * example's place in the global batch); backward is the same flip; the
 * gradient check; the .cfg section under Keras's names, the Keras import
 * of its config and the Keras config it exports. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "models/keras.h"
#include "models/keras_import.h"
#include "models/model.h"
#include "models/randomflip.h"
#include "tests/gradcheck.h"
#include "tests/testutil.h"

enum { B = 64, H = 3, W = 4, C = 2, N = H * W * C };

/* A [randomflip] of mode `mode` on (H, W, C), set up on the CPU. */
static mr_layer make(const mr_layer_cfg *c) {
    mr_layer l;
    memset(&l, 0, sizeof l);
    l.ops = mr_layer_ops_for(c->kind);
    l.cfg = c;
    l.index = 2;
    l.in = (mr_shape){3, {H, W, C}};
    mr_error err = {0};
    ck_assert_msg(gc_setup(&l, B, "t.cfg", &err) == MR_OK, "%s", err.msg);
    return l;
}

/* Distinct values, so that every flip shows. */
static float *inputs(void) {
    float *x = malloc(sizeof(float) * B * N);
    for (int i = 0; i < B * N; i++)
        x[i] = (float)i;
    return x;
}

/* Which flips turn example row x into y: bit 0 width, bit 1 height; -1 none. */
static int flips_of(const float *x, const float *y) {
    for (int axes = 0; axes < 4; axes++) {
        int same = 1;
        for (int h = 0; h < H && same; h++)
            for (int w = 0; w < W && same; w++)
                for (int c = 0; c < C && same; c++) {
                    const int hs = (axes & 2) ? H - 1 - h : h, ws = (axes & 1) ? W - 1 - w : w;
                    same = y[(h * W + w) * C + c] == x[(hs * W + ws) * C + c];
                }
        if (same) return axes;
    }
    return -1;
}

START_TEST(flips_in_training) {
    static const int allowed[3] = {1, 2, 3}; /* the axes each mode may flip */
    for (int mode = 0; mode < 3; mode++) {
        mr_layer_cfg c = gc_layer_cfg(MR_LAYER_RANDOMFLIP);
        c.flip_mode = mode;
        mr_layer l = make(&c);
        float *x = inputs(), *y = malloc(sizeof(float) * B * N);
        mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1, .seed = 7, .step = 2};
        ck_assert_int_eq(gc_forward(&l, &run, B, x, y), MR_OK);
        int per_axis[2] = {0, 0};
        for (int b = 0; b < B; b++) {
            const int axes = flips_of(x + b * N, y + b * N);
            ck_assert_msg(axes >= 0, "mode %d example %d: not a flip of its input", mode, b);
            ck_assert_int_eq(axes & ~allowed[mode], 0);
            per_axis[0] += axes & 1, per_axis[1] += (axes >> 1) & 1;
        }
        /* 64 fair coins per allowed axis: sd 4; allow 5 sd */
        for (int a = 0; a < 2; a++) {
            if (allowed[mode] >> a & 1)
                ck_assert_msg(abs(per_axis[a] - 32) <= 20, "mode %d axis %d: %d of 64", mode, a,
                              per_axis[a]);
            else
                ck_assert_int_eq(per_axis[a], 0);
        }
        free(x), free(y);
        mr_layer_destroy(&l);
    }
}
END_TEST

START_TEST(identity_in_inference) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_RANDOMFLIP);
    c.flip_mode = MR_RANDOMFLIP_BOTH;
    mr_layer l = make(&c);
    float *x = inputs(), *y = malloc(sizeof(float) * B * N);
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 0, .seed = 7, .step = 2};
    ck_assert_int_eq(gc_forward(&l, &run, B, x, y), MR_OK);
    ck_assert(memcmp(x, y, sizeof(float) * B * N) == 0);
    free(x), free(y);
    mr_layer_destroy(&l);
}
END_TEST

/* 1 replica x 64 and 2 x 32 (the second replica's rows from global place
 * 32) give the same bits, forward and backward; another step draws anew. */
START_TEST(replicas_same_bits) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_RANDOMFLIP);
    c.flip_mode = MR_RANDOMFLIP_BOTH;
    mr_layer l = make(&c);
    float *x = inputs(), *y1 = malloc(sizeof(float) * B * N), *y2 = malloc(sizeof(float) * B * N);
    float *dx1 = malloc(sizeof(float) * B * N), *dx2 = malloc(sizeof(float) * B * N);
    mr_exec_ctx one = {.be = tu_cpu_backend(), .training = 1, .seed = 11, .step = 5};
    ck_assert_int_eq(gc_forward(&l, &one, B, x, y1), MR_OK);
    ck_assert_int_eq(gc_backward(&l, &one, B, x, y1, x, dx1), MR_OK);
    for (int r = 0; r < 2; r++) {
        mr_exec_ctx rep = one;
        rep.sample_base = r * (B / 2);
        const int64_t o = (int64_t)r * (B / 2) * N;
        ck_assert_int_eq(gc_forward(&l, &rep, B / 2, x + o, y2 + o), MR_OK);
        ck_assert_int_eq(gc_backward(&l, &rep, B / 2, x + o, y2 + o, x + o, dx2 + o), MR_OK);
    }
    ck_assert(memcmp(y1, y2, sizeof(float) * B * N) == 0);
    ck_assert(memcmp(dx1, dx2, sizeof(float) * B * N) == 0);
    /* backward flips dy as forward flipped x: the same draw, its own inverse */
    ck_assert(memcmp(dx1, y1, sizeof(float) * B * N) == 0);
    one.step = 6;
    ck_assert_int_eq(gc_forward(&l, &one, B, x, y2), MR_OK);
    ck_assert(memcmp(y1, y2, sizeof(float) * B * N) != 0);
    free(x), free(y1), free(y2), free(dx1), free(dx2);
    mr_layer_destroy(&l);
}
END_TEST

START_TEST(gradients) {
    gc_layer_result r;
    mr_error err = {0};
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_RANDOMFLIP);
    c.flip_mode = MR_RANDOMFLIP_BOTH;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        ck_assert_msg(gc_check_layer(&c, (mr_shape){3, {3, 4, 2}}, 3, seed, &r, &err) == MR_OK,
                      "%s", err.msg);
        ck_assert_msg(r.err_input < 2e-3, "%g", r.err_input);
        ck_assert_int_gt(r.checked, 0);
    }
}
END_TEST

/* The section under Keras's names, its mode's default and values, and an
 * input that is not an image refused. */
START_TEST(cfg_section) {
    const char *head = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4,4,2\n";
    static const struct {
        const char *layer;
        int mode;
    } ok[] = {{"[randomflip]\n", MR_RANDOMFLIP_BOTH},
              {"[RandomFlip]\nmode='horizontal'\n", MR_RANDOMFLIP_HORIZONTAL},
              {"[random_flip]\nmode=vertical\n", MR_RANDOMFLIP_VERTICAL}};
    char text[512];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        mr_config cfg;
        mr_error err = {0};
        snprintf(text, sizeof text, "%s%s[flatten]\n", head, ok[i].layer);
        ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
        ck_assert_int_eq(cfg.layers[1].kind, MR_LAYER_RANDOMFLIP);
        ck_assert_int_eq(cfg.layers[1].flip_mode, ok[i].mode);
        mr_config_free(&cfg);
    }
    mr_config cfg;
    mr_error err = {0};
    snprintf(text, sizeof text, "%s[randomflip]\nmode=diagonal\n", head);
    ck_assert_int_eq(mr_config_parse(text, "t.cfg", NULL, &cfg, &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "t.cfg:8: [randomflip] mode: 'diagonal' is not one of"), "%s",
                  err.msg);
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_RANDOMFLIP);
    mr_layer l;
    memset(&l, 0, sizeof l);
    l.ops = mr_layer_ops_for(c.kind), l.cfg = &c, l.index = 1, l.in = (mr_shape){1, {6, 0, 0}};
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(gc_setup(&l, 2, "t.cfg", &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "[randomflip] needs an image input"), "%s", err.msg);
    mr_layer_destroy(&l);
}
END_TEST

/* Keras's RandomFlip config in, the .cfg section out; the model's Keras
 * config has Keras's keys; an unknown argument or mode is refused. */
START_TEST(keras_in_and_out) {
    const char *model_fmt =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 4, 4, 2], "
        "\"dtype\": \"float32\", \"name\": \"in\"}}, {\"class_name\": \"RandomFlip\", "
        "\"config\": {\"name\": \"random_flip\", \"trainable\": true, \"dtype\": \"float32\", "
        "\"seed\": 3, \"mode\": \"%s\", \"data_format\": \"channels_last\"%s}}, "
        "{\"class_name\": \"Flatten\", \"config\": {\"name\": \"f\"}}, {\"class_name\": "
        "\"Dense\", \"config\": {\"name\": \"d\", \"units\": 2, \"activation\": \"softmax\"}}]}}";
    const char *compile = "{\"optimizer\": {\"class_name\": \"Adam\", \"config\": "
                          "{\"learning_rate\": 0.01}}, \"loss\": "
                          "\"sparse_categorical_crossentropy\"}";
    char model[2048];
    snprintf(model, sizeof model, model_fmt, "vertical", "");
    char *text = NULL;
    mr_error err = {0};
    ck_assert_msg(mr_keras_import_text(model, compile, "m.keras", &text, &err) == MR_OK, "%s",
                  err.msg);
    ck_assert_msg(strstr(text, "[randomflip]\nname = random_flip\nmode = vertical\n"), "%s", text);
    mr_config cfg;
    ck_assert_msg(mr_config_parse(text, "m.keras", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    free(text);
    mr_model m;
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 2, 0, &err) == MR_OK, "%s", err.msg);
    char *j = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, 0.001f);
    ck_assert_msg(strstr(j, "\"class_name\": \"RandomFlip\", \"config\": {\"name\": "
                            "\"random_flip\", \"trainable\": true, ") &&
                      strstr(j, "\"seed\": null, \"mode\": \"vertical\", \"data_format\": "
                                "\"channels_last\"}"),
                  "%s", j);
    free(j);
    mr_model_free(&m);
    mr_config_free(&cfg);
    snprintf(model, sizeof model, model_fmt, "vertical", ", \"value_range\": [0, 1]");
    ck_assert_int_eq(mr_keras_import_text(model, compile, "m.keras", &text, &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "'value_range' is not supported"), "%s", err.msg);
    /* a mode of another name: the .cfg's parser refuses it, naming it */
    snprintf(model, sizeof model, model_fmt, "diagonal", "");
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(mr_keras_import_text(model, compile, "m.keras", &text, &err), MR_OK);
    ck_assert_int_eq(mr_config_parse(text, "m.keras", NULL, &cfg, &err), MR_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "'diagonal' is not one of"), "%s", err.msg);
    free(text);
}
END_TEST

int main(void) {
    Suite *s = suite_create("randomflip");
    TCase *tc = tcase_create("randomflip");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, flips_in_training);
    tcase_add_test(tc, identity_in_inference);
    tcase_add_test(tc, replicas_same_bits);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, cfg_section);
    tcase_add_test(tc, keras_in_and_out);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
