/* test_rng.c: unit tests of runtime/rng.c: Philox4x32-10 against the
 * Random123 known-answer vectors and, over many keys and counters, against
 * the implementation mirrored had before it used Random123's (the same
 * bits: every seed's weights, permutations and dropout masks stay as they
 * were), then the draws built on it (uniform floats, epoch permutations,
 * per-stream keys). The statistical checks use fixed
 * seeds, so each either always passes or always fails; the bounds are set so
 * that a correct generator fails them with probability about 1e-3 or less
 * (the reasoning is next to each bound). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"

/* ---- Philox4x32-10 known answers ---------------------------------------- */

static void expect_philox(const uint32_t key[2], const uint32_t ctr[4], const uint32_t want[4]) {
    uint32_t out[4];
    mr_philox4x32(key[0], key[1], ctr[0], ctr[1], ctr[2], ctr[3], out);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(out[i] == want[i],
                      "philox4x32-10 word %d: got 0x%08x, expected 0x%08x (Random123 kat)", i,
                      out[i], want[i]);
}

/* The three philox4x32 10-round vectors of Random123's kat_vectors. */
START_TEST(test_philox_kat_zero) {
    expect_philox((uint32_t[]){0, 0}, (uint32_t[]){0, 0, 0, 0},
                  (uint32_t[]){0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
}
END_TEST

START_TEST(test_philox_kat_ones) {
    expect_philox((uint32_t[]){0xffffffff, 0xffffffff},
                  (uint32_t[]){0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                  (uint32_t[]){0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
}
END_TEST

START_TEST(test_philox_kat_pi) {
    expect_philox((uint32_t[]){0xa4093822, 0x299f31d0},
                  (uint32_t[]){0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                  (uint32_t[]){0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}
END_TEST

/* Every counter word and key word reaches the output. */
START_TEST(test_philox_sensitivity) {
    uint32_t base[4], out[4];
    mr_philox4x32(1, 2, 3, 4, 5, 6, base);
    uint32_t args[6] = {1, 2, 3, 4, 5, 6};
    for (int a = 0; a < 6; a++) {
        uint32_t v[6];
        memcpy(v, args, sizeof v);
        v[a] ^= 1u;
        mr_philox4x32(v[0], v[1], v[2], v[3], v[4], v[5], out);
        ck_assert_msg(memcmp(out, base, sizeof out) != 0, "argument %d does not change the output",
                      a);
    }
}
END_TEST

/* Philox4x32-10 as runtime/rng.c computed it before Random123: the
 * reference that mr_philox4x32 must match bit for bit. */
static void philox_reference(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1, uint32_t c2,
                             uint32_t c3, uint32_t out[4]) {
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Random123's philox4x32 against the reference: every pattern of all-zero
 * and all-one words, then a million xorshift keys and counters. */
START_TEST(test_philox_matches_reference) {
    uint32_t s = 2463534242u;
    long bad = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t v[6];
        for (int j = 0; j < 6; j++) {
            s ^= s << 13, s ^= s >> 17, s ^= s << 5;
            v[j] = i < 64 ? ((i >> j) & 1 ? 0xffffffffu : 0u) : s;
        }
        uint32_t got[4], want[4];
        mr_philox4x32(v[0], v[1], v[2], v[3], v[4], v[5], got);
        philox_reference(v[0], v[1], v[2], v[3], v[4], v[5], want);
        bad += memcmp(got, want, sizeof got) != 0;
    }
    ck_assert_msg(bad == 0, "%ld of 1000000 outputs differ from the reference", bad);
}
END_TEST

START_TEST(test_u01) {
    ck_assert_float_eq(mr_rng_u01(0u), 0.0f);
    ck_assert_float_lt(mr_rng_u01(0xffffffffu), 1.0f);
    ck_assert_float_eq(mr_rng_u01(0xffffffffu), 1.0f - 1.0f / 16777216.0f);
    ck_assert_float_eq(mr_rng_u01(0x80000000u), 0.5f);
    /* the low 8 bits are dropped */
    ck_assert_float_eq(mr_rng_u01(0x800000ffu), 0.5f);
}
END_TEST

/* ---- mr_rng_key ------------------------------------------------------------ */

START_TEST(test_key_by_stream_and_seed) {
    const uint64_t seeds[4] = {0, 1, 42, 1ull << 32};
    uint32_t keys[4][5][2];
    for (int s = 0; s < 4; s++)
        for (uint32_t st = 0; st < 5; st++) {
            mr_rng_key(seeds[s], st, keys[s][st]);
            uint32_t again[2];
            mr_rng_key(seeds[s], st, again);
            ck_assert(again[0] == keys[s][st][0] && again[1] == keys[s][st][1]);
        }
    /* all 20 (seed, stream) pairs give different keys, in particular every
     * stream of one seed, and the high half of the seed counts */
    for (int a = 0; a < 20; a++)
        for (int b = 0; b < a; b++) {
            const uint32_t *ka = keys[a / 5][a % 5], *kb = keys[b / 5][b % 5];
            ck_assert_msg(ka[0] != kb[0] || ka[1] != kb[1],
                          "seed %llu stream %d and seed %llu stream %d share a key",
                          (unsigned long long)seeds[a / 5], a % 5, (unsigned long long)seeds[b / 5],
                          b % 5);
        }
}
END_TEST

/* ---- mr_rng_uniform --------------------------------------------------------- */

#define UNIFORM_N 200000

START_TEST(test_uniform_range_and_moments) {
    float *u = malloc(sizeof(float) * UNIFORM_N);
    mr_rng_uniform(1234, MR_RNG_STREAM_INIT, 0, 0, 0.0f, 1.0f, u, UNIFORM_N);
    double sum = 0.0, sq = 0.0;
    int low = 0, outside = 0;
    for (int i = 0; i < UNIFORM_N; i++) {
        outside += !(u[i] >= 0.0f && u[i] < 1.0f);
        sum += u[i];
        sq += (double)u[i] * u[i];
        low += u[i] < 0.1f;
    }
    ck_assert_int_eq(outside, 0);
    double mean = sum / UNIFORM_N, var = sq / UNIFORM_N - mean * mean;
    /* U[0,1) has variance 1/12, so the mean of N draws has standard deviation
     * sqrt(1/(12 N)) = 6.5e-4 for N = 2e5; 5 sigma = 3.2e-3 (a correct
     * generator is outside with probability 6e-7). */
    ck_assert_msg(fabs(mean - 0.5) < 5.0 * sqrt(1.0 / (12.0 * UNIFORM_N)), "mean %g", mean);
    /* the sample variance has sd sqrt((1/80 - 1/144) / N) = 1.7e-4 (fourth
     * central moment of U[0,1) is 1/80): same 5-sigma reasoning */
    ck_assert_msg(fabs(var - 1.0 / 12.0) < 5.0 * sqrt((1.0 / 80 - 1.0 / 144) / UNIFORM_N),
                  "variance %g", var);
    /* tail bin: binomial(N, 0.1) has sd sqrt(N * 0.09) = 134; 5 sigma */
    ck_assert_msg(fabs(low - 0.1 * UNIFORM_N) < 5.0 * sqrt(0.09 * UNIFORM_N), "%d below 0.1", low);
    free(u);
}
END_TEST

START_TEST(test_uniform_lo_hi) {
    enum { N = 50000 };
    float *u = malloc(sizeof(float) * N);
    mr_rng_uniform(7, MR_RNG_STREAM_INIT, 3, 1, -2.0f, 3.0f, u, N);
    double sum = 0.0;
    float mn = 1e9f, mx = -1e9f;
    int outside = 0;
    for (int i = 0; i < N; i++) {
        outside += !(u[i] >= -2.0f && u[i] < 3.0f);
        sum += u[i];
        mn = fminf(mn, u[i]), mx = fmaxf(mx, u[i]);
    }
    ck_assert_int_eq(outside, 0);
    /* mean 0.5, sd of the mean 5 / sqrt(12 N) = 6.5e-3; 5 sigma */
    ck_assert_msg(fabs(sum / N - 0.5) < 5.0 * 5.0 / sqrt(12.0 * N), "mean %g", sum / N);
    /* the whole interval is used: with 5e4 draws the extremes are within
     * 5 * 5 / 5e4 = 5e-4 of the ends except with probability e^-5 each */
    ck_assert_float_lt(mn, -2.0f + 5e-4f);
    ck_assert_float_gt(mx, 3.0f - 5e-4f);
    free(u);
}
END_TEST

/* Element i is lo + (hi - lo) * u01(word i % 4 of counter (a, b, i / 4, 0)). */
START_TEST(test_uniform_counter_layout) {
    enum { N = 11 };
    float u[N];
    const uint64_t seed = 99;
    mr_rng_uniform(seed, MR_RNG_STREAM_DROPOUT, 5, 6, 0.0f, 1.0f, u, N);
    uint32_t key[2], w[4];
    mr_rng_key(seed, MR_RNG_STREAM_DROPOUT, key);
    for (int i = 0; i < N; i++) {
        mr_philox4x32(key[0], key[1], 5, 6, (uint32_t)(i / 4), 0, w);
        ck_assert_float_eq(u[i], mr_rng_u01(w[i % 4]));
    }
}
END_TEST

START_TEST(test_uniform_deterministic_and_prefix) {
    enum { LONG = 1003, SHORT = 37 };
    float a[LONG], b[LONG], c[SHORT];
    mr_rng_uniform(5, MR_RNG_STREAM_INIT, 1, 2, -1.0f, 1.0f, a, LONG);
    mr_rng_uniform(5, MR_RNG_STREAM_INIT, 1, 2, -1.0f, 1.0f, b, LONG);
    ck_assert_mem_eq(a, b, sizeof a);
    /* the first n of a longer draw are the shorter draw (n not a multiple of 4) */
    for (int n = 1; n <= SHORT; n++) {
        memset(c, 0, sizeof c);
        mr_rng_uniform(5, MR_RNG_STREAM_INIT, 1, 2, -1.0f, 1.0f, c, n);
        ck_assert_mem_eq(c, a, sizeof(float) * (size_t)n);
    }
    /* n = 0 writes nothing */
    float guard = 123.0f;
    mr_rng_uniform(5, MR_RNG_STREAM_INIT, 1, 2, -1.0f, 1.0f, &guard, 0);
    ck_assert_float_eq(guard, 123.0f);
}
END_TEST

/* Seed, stream and either counter prefix word change the draw. */
START_TEST(test_uniform_inputs_matter) {
    enum { N = 16 };
    float base[N], other[N];
    mr_rng_uniform(5, MR_RNG_STREAM_INIT, 1, 2, 0.0f, 1.0f, base, N);
    mr_rng_uniform(6, MR_RNG_STREAM_INIT, 1, 2, 0.0f, 1.0f, other, N);
    ck_assert(memcmp(base, other, sizeof base) != 0);
    mr_rng_uniform(5, MR_RNG_STREAM_DROPOUT, 1, 2, 0.0f, 1.0f, other, N);
    ck_assert(memcmp(base, other, sizeof base) != 0);
    mr_rng_uniform(5, MR_RNG_STREAM_INIT, 0, 2, 0.0f, 1.0f, other, N);
    ck_assert(memcmp(base, other, sizeof base) != 0);
    mr_rng_uniform(5, MR_RNG_STREAM_INIT, 1, 3, 0.0f, 1.0f, other, N);
    ck_assert(memcmp(base, other, sizeof base) != 0);
    /* within one draw, the 16 values are all different (a repeat among 16
     * 24-bit values has probability 120 / 2^24 = 7e-6) */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < i; j++)
            ck_assert(base[i] != base[j]);
}
END_TEST

/* ---- mr_rng_permutation ------------------------------------------------------ */

/* 1 if p holds each of 0..n-1 once (plain code: Check's assertions are slow
 * in long loops). */
static int is_permutation(const int64_t *p, int64_t n) {
    char *seen = calloc((size_t)n + 1, 1);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        ok = p[i] >= 0 && p[i] < n && !seen[p[i]];
        if (ok) seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

/* ---- truncated normal ---------------------------------------------------------------- */

/* A unit normal truncated at +-2 (what Keras's *Normal initializers draw,
 * before their division by its standard deviation): nothing beyond 2, and
 * the moments of that distribution. With Z = Phi(2) - Phi(-2) = 0.9544997
 * and phi(2) = 0.0539910: variance 1 - 4 phi(2) / Z = 0.7737413, fourth
 * moment 3 - 28 phi(2) / Z = 1.4161492, P(|z| > 1) = (Z - 0.6826895) / Z
 * = 0.2847667. Bounds are 5 standard deviations of each estimate over N
 * draws, as for the uniform draws. */
START_TEST(test_truncated_normal_moments) {
    float *z = malloc(sizeof(float) * UNIFORM_N);
    mr_rng_truncated_normal(1234, MR_RNG_STREAM_INIT, 3, 0, 1.0f, z, UNIFORM_N);
    double sum = 0.0, sq = 0.0;
    int outside = 0, tail = 0;
    for (int i = 0; i < UNIFORM_N; i++) {
        outside += !(fabsf(z[i]) <= 2.0f);
        tail += fabsf(z[i]) > 1.0f;
        sum += z[i];
        sq += (double)z[i] * z[i];
    }
    ck_assert_int_eq(outside, 0);
    const double var0 = 0.7737413, m4 = 1.4161492, p1 = 0.2847667;
    double mean = sum / UNIFORM_N, var = sq / UNIFORM_N - mean * mean;
    ck_assert_msg(fabs(mean) < 5.0 * sqrt(var0 / UNIFORM_N), "mean %g", mean);
    ck_assert_msg(fabs(var - var0) < 5.0 * sqrt((m4 - var0 * var0) / UNIFORM_N), "variance %g",
                  var);
    ck_assert_msg(fabs(tail - p1 * UNIFORM_N) < 5.0 * sqrt(p1 * (1 - p1) * UNIFORM_N),
                  "%d beyond 1", tail);
    /* stddev scales the draws: the same counters, the same z times it */
    float *y = malloc(sizeof(float) * 100);
    mr_rng_truncated_normal(1234, MR_RNG_STREAM_INIT, 3, 0, 0.25f, y, 100);
    for (int i = 0; i < 100; i++)
        ck_assert_msg(fabsf(y[i] - 0.25f * z[i]) <= 1e-7f, "%d: %g vs %g", i, (double)y[i],
                      (double)z[i]);
    free(y);
    free(z);
}
END_TEST

/* A pure function of (seed, stream, a, b, i): the same for any n-prefix,
 * different for another seed, layer (a) or weight (b). */
START_TEST(test_truncated_normal_deterministic) {
    float x[64], y[64], p[10];
    mr_rng_truncated_normal(9, MR_RNG_STREAM_INIT, 1, 2, 1.0f, x, 64);
    mr_rng_truncated_normal(9, MR_RNG_STREAM_INIT, 1, 2, 1.0f, y, 64);
    ck_assert_mem_eq(x, y, sizeof x);
    mr_rng_truncated_normal(9, MR_RNG_STREAM_INIT, 1, 2, 1.0f, p, 10);
    ck_assert_mem_eq(x, p, sizeof p);
    const uint32_t other[3][3] = {{10, 1, 2}, {9, 2, 2}, {9, 1, 3}};
    for (int k = 0; k < 3; k++) {
        mr_rng_truncated_normal(other[k][0], MR_RNG_STREAM_INIT, other[k][1], other[k][2], 1.0f, y,
                                64);
        int same = 0;
        for (int i = 0; i < 64; i++)
            same += x[i] == y[i];
        ck_assert_msg(same < 4, "case %d: %d of 64 equal", k, same);
    }
}
END_TEST

START_TEST(test_permutation_is_permutation) {
    const int64_t sizes[] = {1, 2, 3, 10, 100, 60000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        int64_t *p = malloc(sizeof(int64_t) * (size_t)n);
        for (int64_t e = 0; e < 3; e++) {
            for (int64_t i = 0; i < n; i++)
                p[i] = -7; /* garbage in: the output does not depend on it */
            mr_rng_permutation(11, e, p, n);
            ck_assert_msg(is_permutation(p, n), "n = %lld, epoch %lld", (long long)n, (long long)e);
        }
        if (n >= 100) {
            /* not the identity (probability 1/n!) */
            int64_t fixed = 0;
            for (int64_t i = 0; i < n; i++)
                fixed += p[i] == i;
            /* fixed points of a random permutation: about Poisson(1); 10 or
             * more has probability 1e-7 */
            ck_assert_int_lt(fixed, 10);
        }
        free(p);
    }
    int64_t dummy = 5;
    mr_rng_permutation(11, 0, &dummy, 0); /* n = 0: nothing to do */
    ck_assert_int_eq(dummy, 5);
}
END_TEST

START_TEST(test_permutation_deterministic_and_varies) {
    enum { N = 100 };
    int64_t a[N], b[N];
    mr_rng_permutation(3, 7, a, N);
    mr_rng_permutation(3, 7, b, N);
    ck_assert_mem_eq(a, b, sizeof a);
    /* another epoch, another seed, an epoch differing only in its high 32
     * bits: each a different order (equal by chance with probability 1/100!) */
    mr_rng_permutation(3, 8, b, N);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    mr_rng_permutation(4, 7, b, N);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    mr_rng_permutation(3, 7 + (1ll << 32), b, N);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    mr_rng_permutation(3 + (1ull << 32), 7, b, N);
    ck_assert(memcmp(a, b, sizeof a) != 0);
}
END_TEST

/* Uniformity over many epochs for n = 5. */
START_TEST(test_permutation_uniform) {
    enum { N = 5, EPOCHS = 60000, PERMS = 120 };
    int64_t p[N];
    long pos0[N] = {0};
    long *perm_count = calloc(PERMS, sizeof(long));
    int bad = 0;
    for (int64_t e = 0; e < EPOCHS; e++) {
        mr_rng_permutation(2024, e, p, N);
        bad += !is_permutation(p, N);
        for (int i = 0; i < N; i++)
            if (p[i] == 0) pos0[i]++;
        /* rank of the permutation in the factorial number system */
        int code = 0;
        for (int i = 0; i < N; i++) {
            int smaller = 0;
            for (int j = i + 1; j < N; j++)
                smaller += p[j] < p[i];
            code = code * (N - i) + smaller;
        }
        perm_count[code]++;
    }
    ck_assert_int_eq(bad, 0);
    /* where element 0 lands: 5 cells, chi-square with 4 degrees of freedom;
     * its 0.999 quantile is 18.47 */
    double chi = 0.0, expect = (double)EPOCHS / N;
    for (int i = 0; i < N; i++)
        chi += (pos0[i] - expect) * (pos0[i] - expect) / expect;
    ck_assert_msg(chi < 18.47, "position of element 0: chi-square %g (4 dof)", chi);
    /* the whole permutation: 120 cells, 119 degrees of freedom; the 0.999
     * quantile is 172.5 (Wilson-Hilferty). A biased shuffle (e.g. j drawn
     * from [0, n) instead of [0, i]) lands far above: some orders are then
     * 2.9x as likely as others, an expected chi-square near 3000. */
    chi = 0.0, expect = (double)EPOCHS / PERMS;
    for (int c = 0; c < PERMS; c++) {
        ck_assert_msg(perm_count[c] > 0, "permutation %d never drawn", c);
        chi += (perm_count[c] - expect) * (perm_count[c] - expect) / expect;
    }
    ck_assert_msg(chi < 172.5, "permutations of 5: chi-square %g (119 dof)", chi);
    free(perm_count);
}
END_TEST

static Suite *rng_suite(void) {
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("philox");
    tcase_add_test(tc, test_philox_kat_zero);
    tcase_add_test(tc, test_philox_kat_ones);
    tcase_add_test(tc, test_philox_kat_pi);
    tcase_add_test(tc, test_philox_matches_reference);
    tcase_add_test(tc, test_philox_sensitivity);
    tcase_add_test(tc, test_u01);
    tcase_add_test(tc, test_key_by_stream_and_seed);
    suite_add_tcase(s, tc);
    tc = tcase_create("uniform");
    tcase_add_test(tc, test_uniform_range_and_moments);
    tcase_add_test(tc, test_uniform_lo_hi);
    tcase_add_test(tc, test_uniform_counter_layout);
    tcase_add_test(tc, test_uniform_deterministic_and_prefix);
    tcase_add_test(tc, test_uniform_inputs_matter);
    suite_add_tcase(s, tc);
    tc = tcase_create("truncated_normal");
    tcase_add_test(tc, test_truncated_normal_moments);
    tcase_add_test(tc, test_truncated_normal_deterministic);
    suite_add_tcase(s, tc);
    tc = tcase_create("permutation");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_permutation_is_permutation);
    tcase_add_test(tc, test_permutation_deterministic_and_varies);
    tcase_add_test(tc, test_permutation_uniform);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(rng_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
