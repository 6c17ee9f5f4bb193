/* rng.h: counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
 *
 * Every random number is a pure function of (key, counter): no generator
 * state to carry, save or keep in step between replicas or ranks. Weights
 * come from (seed, layer, index), an epoch's permutation from (seed, epoch),
 * a dropout mask from (seed, step, sample, layer); the same inputs give the
 * same bits on any machine and with any replica count.
 *
 * Philox itself is Random123's header-only philox4x32 (Debian's
 * librandom123-dev), which compiles as host and device code: the mask of a
 * dropout kernel on the GPU is the CPU's bit for bit (elementwise.h,
 * mr_dropout_words). It is bitwise the Philox4x32-10 this file implemented
 * before (test_rng.c compares them over many keys and counters). */
#ifndef MR_RNG_H
#define MR_RNG_H

#include <stdint.h>

#include <Random123/philox.h>

#include "runtime/hd.h"

MR_C_BEGIN

/* Streams separate the uses of one seed so they never share counters. */
enum {
    MR_RNG_STREAM_INIT = 1,      /* weight initialisation: ctr = (layer, weight, index) */
    MR_RNG_STREAM_SHUFFLE = 2,   /* epoch permutation: ctr = (epoch, i) */
    MR_RNG_STREAM_DROPOUT = 3,   /* dropout masks: ctr = (step, sample, layer) */
    MR_RNG_STREAM_AUGMENT = 4,   /* data augmentation: ctr = (epoch, sample) */
    MR_RNG_STREAM_SYNTHETIC = 5, /* synthetic data: ctr = (0 images / 1 labels, 0, index) */
};

/* Four 32-bit random words for counter (c0, c1, c2, c3) under key (k0, k1):
 * Philox4x32 with 10 rounds (Random123's default). Host and device. */
MR_HD static inline void mr_philox4x32(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1,
                                       uint32_t c2, uint32_t c3, uint32_t out[4]) {
    philox4x32_ctr_t ctr = {{c0, c1, c2, c3}};
    philox4x32_key_t key = {{k0, k1}};
    philox4x32_ctr_t r = philox4x32(ctr, key);
    out[0] = r.v[0], out[1] = r.v[1], out[2] = r.v[2], out[3] = r.v[3];
}

/* Uniform float in [0, 1) from a 32-bit word (24 bits of mantissa). */
MR_HD static inline float mr_rng_u01(uint32_t w) {
    return (float)(w >> 8) * (1.0f / 16777216.0f);
}

/* Byte o of the synthetic data stream under key (mr_rng_key(seed,
 * MR_RNG_STREAM_SYNTHETIC)): example i's value j is byte i x row + j.
 * Sixteen bytes a Philox call, counter (0, 0, o / 16, o / 2^36), little end
 * first. Host and device: a GPU makes the examples the host would
 * (mr_dataset_synthetic, the input kernels of models/kernels.h). */
MR_HD static inline uint8_t mr_synthetic_byte(uint32_t k0, uint32_t k1, int64_t o) {
    uint32_t w[4];
    mr_philox4x32(k0, k1, 0, 0, (uint32_t)(o / 16), (uint32_t)((uint64_t)o >> 36), w);
    return (uint8_t)(w[(o % 16) / 4] >> (8 * (o % 4)));
}

/* Key for (seed, stream): the two halves of a 64-bit seed mixed with the stream. */
void mr_rng_key(uint64_t seed, uint32_t stream, uint32_t key[2]);

/* Fills n floats uniform in [lo, hi) for counter prefix (a, b): element i uses
 * counter (a, b, i / 4, 0), word i % 4. Same output for any n-prefix. */
void mr_rng_uniform(uint64_t seed, uint32_t stream, uint32_t a, uint32_t b, float lo, float hi,
                    float *out, int64_t n);

/* Fills n floats from a normal distribution of mean 0 and standard
 * deviation stddev truncated at +-2 stddev (TensorFlow's truncated_normal,
 * which Keras's *Normal initializers draw from), for counter prefix (a, b):
 * element i draws Box-Muller pairs from counter (a, b, i, 0x80000000 |
 * attempt), words 0-1 then 2-3, until one falls within the bounds; a pure
 * function of where the element is, like mr_rng_uniform. */
void mr_rng_truncated_normal(uint64_t seed, uint32_t stream, uint32_t a, uint32_t b, float stddev,
                             float *out, int64_t n);

/* perm (n entries) becomes a uniformly random permutation of 0..n-1 that depends
 * only on (seed, epoch): Fisher-Yates driven by Philox (unbiased via 64-bit
 * multiply-shift on two words). */
void mr_rng_permutation(uint64_t seed, int64_t epoch, int64_t *perm, int64_t n);

MR_C_END

#endif
