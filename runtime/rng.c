/* rng.c: the draws built on Philox (see rng.h): keys, uniform and
 * truncated normal floats, permutations. */
#include "runtime/rng.h"

#include <math.h>

void mr_rng_key(uint64_t seed, uint32_t stream, uint32_t key[2]) {
    /* splitmix64 finaliser so nearby seeds and streams give unrelated keys */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t)(stream + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    key[0] = (uint32_t)z;
    key[1] = (uint32_t)(z >> 32);
}

void mr_rng_uniform(uint64_t seed, uint32_t stream, uint32_t a, uint32_t b, float lo, float hi,
                    float *out, int64_t n) {
    uint32_t key[2], w[4];
    mr_rng_key(seed, stream, key);
    float span = hi - lo;
    for (int64_t i = 0; i < n; i += 4) {
        mr_philox4x32(key[0], key[1], a, b, (uint32_t)(i / 4), (uint32_t)((uint64_t)i >> 34), w);
        for (int j = 0; j < 4 && i + j < n; j++)
            out[i + j] = lo + span * mr_rng_u01(w[j]);
    }
}

void mr_rng_truncated_normal(uint64_t seed, uint32_t stream, uint32_t a, uint32_t b, float stddev,
                             float *out, int64_t n) {
    uint32_t key[2], w[4];
    mr_rng_key(seed, stream, key);
    for (int64_t i = 0; i < n; i++) {
        double z = 0.0;
        for (uint32_t attempt = 0;; attempt++) {
            /* the high bit of word 3 keeps these counters apart from
             * mr_rng_uniform's (whose word 3 is i >> 34) */
            mr_philox4x32(key[0], key[1], a, b, (uint32_t)i, 0x80000000u | attempt, w);
            int found = 0;
            for (int p = 0; p < 4 && !found; p += 2) {
                /* u1 in (0, 1]: the log is finite */
                const double u1 = ((double)(w[p] >> 8) + 1.0) / 16777216.0;
                const double u2 = (double)(w[p + 1] >> 8) / 16777216.0;
                z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
                found = fabs(z) <= 2.0;
            }
            if (found) break;
        }
        out[i] = (float)(z * (double)stddev);
    }
}

void mr_rng_permutation(uint64_t seed, int64_t epoch, int64_t *perm, int64_t n) {
    uint32_t key[2], w[4];
    mr_rng_key(seed, MR_RNG_STREAM_SHUFFLE, key);
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        mr_philox4x32(key[0], key[1], (uint32_t)epoch, (uint32_t)((uint64_t)epoch >> 32),
                      (uint32_t)i, (uint32_t)((uint64_t)i >> 32), w);
        /* j uniform in [0, i]: 64 random bits times (i+1), take the high part */
        uint64_t r = ((uint64_t)w[0] << 32) | w[1];
        int64_t j = (int64_t)(((unsigned __int128)r * (uint64_t)(i + 1)) >> 64);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}
