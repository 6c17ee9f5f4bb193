/* test_dropout.c: inverted dropout: keep rate, scaling, identity in
 * inference and at rate 0, masks keyed by the global sample position (not
 * the replica), the same mask in forward and backward, gradient check.
 * Gradient bound 1e-3: with the mask fixed by the run (seed, step,
 * sample_base, layer) dropout is linear, so the central difference is exact
 * up to float rounding (gradcheck.h: ~1e-4 at worst); a mask that differed
 * between forward and backward would be off by a whole dy/(1-rate) ~ 1. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/elementwise.h"
#include "runtime/rng.h"
#include "tests/gradcheck.h"
#include "tests/testutil.h"

static mr_layer make(mr_layer_cfg *c, int n) {
    mr_layer l = {0};
    l.ops = &mr_dropout_ops;
    l.cfg = c;
    l.index = 3;
    l.in = (mr_shape){1, {n, 0, 0}};
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&l, 64, "t.cfg", &err), MR_OK);
    return l;
}

START_TEST(keep_fraction_and_scale) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_DROPOUT);
    c.rate = 0.3f;
    const int n = 1000, B = 20;
    mr_layer l = make(&c, n);
    float *x = malloc(sizeof(float) * n * B), *y = malloc(sizeof(float) * n * B);
    for (int i = 0; i < n * B; i++)
        x[i] = 2.0f;
    mr_exec_ctx run = {
        .be = tu_cpu_backend(), .training = 1, .seed = 9, .step = 4, .sample_base = 0};
    gc_forward(&l, &run, B, x, y);
    int kept = 0;
    for (int i = 0; i < n * B; i++) {
        if (y[i] != 0.0f) {
            ck_assert_float_eq_tol(y[i], 2.0f / 0.7f, 1e-6f);
            kept++;
        }
    }
    /* 20000 Bernoulli(0.7): sd = sqrt(20000 * 0.21) ~ 65; allow 5 sd */
    ck_assert_int_lt(abs(kept - 14000), 325);
    run.training = 0;
    gc_forward(&l, &run, B, x, y);
    ck_assert(memcmp(x, y, sizeof(float) * n * B) == 0);
    free(x), free(y);
}
END_TEST

/* Row i with sample_base b gets the same mask as row i+1 with base b-1:
 * the mask follows the sample's global position, not the replica. */
START_TEST(mask_follows_global_position) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_DROPOUT);
    c.rate = 0.5f;
    const int n = 64;
    mr_layer l = make(&c, n);
    float x[4 * 64], a[4 * 64], b[4 * 64];
    for (int i = 0; i < 4 * n; i++)
        x[i] = 1.0f + (float)i;
    mr_exec_ctx run = {
        .be = tu_cpu_backend(), .training = 1, .seed = 1, .step = 7, .sample_base = 10};
    gc_forward(&l, &run, 4, x, a);
    run.sample_base = 12; /* rows 2,3 of the first call, alone */
    gc_forward(&l, &run, 2, x + 2 * n, b);
    ck_assert(memcmp(a + 2 * n, b, sizeof(float) * 2 * n) == 0);
    /* another step or another layer: another mask */
    run.sample_base = 10;
    run.step = 8;
    gc_forward(&l, &run, 4, x, b);
    ck_assert(memcmp(a, b, sizeof(float) * 4 * n) != 0);
    run.step = 7;
    l.index = 4;
    gc_forward(&l, &run, 4, x, b);
    ck_assert(memcmp(a, b, sizeof(float) * 4 * n) != 0);
}
END_TEST

/* The same run gives the same mask; backward applies exactly the
 * forward's mask and scale; rate 0 is the identity even in training. */
START_TEST(backward_uses_the_forward_mask) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_DROPOUT);
    c.rate = 0.3f;
    const int n = 203, B = 5; /* n not a multiple of 4: the last word of a row */
    mr_layer l = make(&c, n);
    float x[5 * 203], y[5 * 203], y2[5 * 203], dy[5 * 203], dx[5 * 203];
    for (int i = 0; i < n * B; i++)
        x[i] = 1.0f, dy[i] = 1.0f;
    mr_exec_ctx run = {
        .be = tu_cpu_backend(), .training = 1, .seed = 3, .step = 11, .sample_base = 7};
    gc_forward(&l, &run, B, x, y);
    gc_forward(&l, &run, B, x, y2);
    ck_assert(memcmp(y, y2, sizeof y) == 0);
    gc_backward(&l, &run, B, x, y, dy, dx);
    ck_assert(memcmp(y, dx, sizeof y) == 0); /* dx = mask * dy / (1 - rate) = y here */
    int dropped = 0;
    for (int i = 0; i < n * B; i++)
        dropped += y[i] == 0.0f;
    ck_assert_int_gt(dropped, 0);
    /* element j of row i is kept iff u01(Philox(seed, dropout; step, base + i, layer, j / 4)[j %
     * 4]) >= rate */
    uint32_t key[2], w[4];
    mr_rng_key(3, MR_RNG_STREAM_DROPOUT, key);
    for (int i = 0; i < B; i++)
        for (int j = 0; j < n; j++) {
            mr_philox4x32(key[0], key[1], 11, 7 + (uint32_t)i, 3, (uint32_t)(j / 4), w);
            int keep = mr_rng_u01(w[j % 4]) >= 0.3f;
            ck_assert_int_eq(keep, y[i * n + j] != 0.0f);
        }
    c.rate = 0.0f;
    gc_forward(&l, &run, B, x, y);
    ck_assert(memcmp(x, y, sizeof y) == 0);
    gc_backward(&l, &run, B, x, y, dy, dx);
    ck_assert(memcmp(dy, dx, sizeof dx) == 0);
    /* inference backward (not used in training, but defined): the identity */
    c.rate = 0.3f;
    run.training = 0;
    gc_backward(&l, &run, B, x, y, dy, dx);
    ck_assert(memcmp(dy, dx, sizeof dx) == 0);
}
END_TEST

/* The single-source per-element mask (elementwise.h), which a CUDA kernel
 * shares: its words are Philox at the documented counter (a sample past
 * 2^32 folds its high bits into the layer word), and the layer's output is
 * mr_dropout_apply of them, element by element, bit for bit. */
START_TEST(single_source_mask) {
    uint32_t key[2], w[4], want[4];
    mr_rng_key(8, MR_RNG_STREAM_DROPOUT, key);
    const uint64_t samples[3] = {0, 12345, (5ull << 32) + 9};
    for (int s = 0; s < 3; s++) {
        mr_dropout_words(key, 21, samples[s], 3, 17, w);
        mr_philox4x32(key[0], key[1], 21, (uint32_t)samples[s],
                      3u | (uint32_t)(samples[s] >> 32) << 16, 17, want);
        ck_assert_mem_eq(w, want, sizeof w);
    }
    /* kept: x / (1 - rate) in float; dropped: +0 */
    ck_assert_float_eq(mr_dropout_apply(2.0f, 0xffffffffu, 0.3f, 1.0f / 0.7f), 2.0f / 0.7f);
    ck_assert_float_eq(mr_dropout_apply(-2.0f, 0u, 0.3f, 1.0f / 0.7f), 0.0f);
    ck_assert(!signbit(mr_dropout_apply(-2.0f, 0u, 0.3f, 1.0f / 0.7f)));
    ck_assert_float_eq(mr_dropout_apply(5.0f, 0u, 0.0f, 1.0f), 5.0f); /* u01 >= 0: kept */
    /* the layer is exactly that */
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_DROPOUT);
    c.rate = 0.4f;
    const int n = 37, B = 3;
    mr_layer l = make(&c, n);
    float x[3 * 37], y[3 * 37];
    mr_rng_uniform(2, 9, 0, 0, -2.0f, 2.0f, x, n * B);
    mr_exec_ctx run = {
        .be = tu_cpu_backend(), .training = 1, .seed = 8, .step = 21, .sample_base = 40};
    ck_assert_int_eq(gc_forward(&l, &run, B, x, y), MR_OK);
    const float scale = 1.0f / (1.0f - 0.4f);
    for (int i = 0; i < B; i++)
        for (int j = 0; j < n; j++) {
            mr_dropout_words(key, 21, 40 + (uint64_t)i, l.index, j / 4, w);
            float e = mr_dropout_apply(x[i * n + j], w[j % 4], 0.4f, scale);
            ck_assert(memcmp(&e, &y[i * n + j], sizeof e) == 0);
        }
    mr_layer_destroy(&l);
}
END_TEST

START_TEST(gradient_with_fixed_mask) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_DROPOUT);
    c.rate = 0.3f;
    gc_layer_result r;
    mr_error err = {0};
    mr_shape in = {3, {3, 3, 2}};
    ck_assert_int_eq(gc_check_layer(&c, in, 3, 5, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < 1e-3, "%g", r.err_input);
    ck_assert_int_eq(r.skipped, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dropout");
    TCase *tc = tcase_create("dropout");
    tcase_add_test(tc, keep_fraction_and_scale);
    tcase_add_test(tc, mask_follows_global_position);
    tcase_add_test(tc, backward_uses_the_forward_mask);
    tcase_add_test(tc, gradient_with_fixed_mask);
    tcase_add_test(tc, single_source_mask);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
