/* rng.c: Philox4x32-10 and the draws built on it (see rng.h). */
#include "rng.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

void mr_philox4x32(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                   uint32_t out[4]) {
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(PHILOX_M0, c0, &hi0, &lo0);
        mulhilo(PHILOX_M1, c2, &hi1, &lo1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

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
