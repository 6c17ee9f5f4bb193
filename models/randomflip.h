/* randomflip.h: which axes Keras's RandomFlip flips of one example
 * (models/randomflip.c), written once for its CPU and CUDA kernels
 * (backends/cpu/randomflip_cpu.c, backends/cuda/randomflip_cuda.cu) so
 * that both flip the same examples. */
#ifndef MR_RANDOMFLIP_H
#define MR_RANDOMFLIP_H

#include <stdint.h>

#include "runtime/elementwise.h"
#include "runtime/hd.h"
#include "runtime/rng.h"

/* [randomflip] mode, mr_layer_cfg.flip_mode: Keras's mode names, in this
 * order (randomflip.c's value list). */
enum { MR_RANDOMFLIP_HORIZONTAL, MR_RANDOMFLIP_VERTICAL, MR_RANDOMFLIP_BOTH };

/* The flips of example `sample` (its place in the global batch) at step
 * `step`: bit 0 left-right (width), bit 1 up-down (height). Each axis the
 * mode allows is flipped where its word of Dropout's Philox counters
 * (seed, dropout stream; step, sample, layer, 0: word 0 for width, 1 for
 * height; runtime/elementwise.h) is below one half: a draw of the
 * example's global place, never of the replica that holds it, so any
 * replica count flips the same examples. Key from mr_rng_key. */
MR_HD static inline int mr_randomflip_axes(const uint32_t key[2], int64_t step, uint64_t sample,
                                           int layer, int mode) {
    uint32_t w[4];
    mr_dropout_words(key, step, sample, layer, 0, w);
    const int h = mode != MR_RANDOMFLIP_VERTICAL && mr_rng_u01(w[0]) < 0.5f;
    const int v = mode != MR_RANDOMFLIP_HORIZONTAL && mr_rng_u01(w[1]) < 0.5f;
    return h | v << 1;
}

/* Where element (h, w) of an (H, W) image of example flips `axes` comes
 * from: the flat pixel index h' x W + w'. */
MR_HD static inline int64_t mr_randomflip_source(int axes, int h, int w, int H, int W) {
    const int hs = (axes & 2) ? H - 1 - h : h, ws = (axes & 1) ? W - 1 - w : w;
    return (int64_t)hs * W + ws;
}

#endif
