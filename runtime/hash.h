/* hash.h: FNV-1a, 64 bits, for fingerprints that must be equal where the
 * bytes are: a model's parameters (params_hash), the .cfg text every
 * process of a job read. Not for security: it only has to tell runs apart.
 * Chained: pass the previous result as `h` to hash several pieces. */
#ifndef MR_HASH_H
#define MR_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/hd.h"

MR_C_BEGIN

/* FNV-1a's offset basis: the `h` of the first piece. */
#define MR_FNV1A_INIT 0xCBF29CE484222325ull

static inline uint64_t mr_fnv1a(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

MR_C_END

#endif
