/* target_clones.h: MR_AVX2_CLONES marks the loops outside BLAS that a training step spends its
 * time in (im2col, pooling, activations, batch norm, dropout, the loss, the
 * optimizer update, batch conversion, the local all-reduce).
 *
 * A portable build compiles for the x86-64 baseline (SSE2), which the
 * -march=native default of earlier builds did not: fashion_cnn.cfg trained
 * at about half the speed (docs/build.md). MR_AVX2_CLONES
 * compiles such a function twice, for the baseline and for AVX2, and the
 * dynamic loader picks one for the CPU it runs on (GCC's target_clones,
 * an ifunc), so a portable binary runs these loops as a native one does.
 * Both clones compute the same bits: no FMA contraction (ISO C mode) and
 * no reassociation of sums (no -ffast-math). Empty where GCC's function
 * multi-versioning is not available, or when the whole build is native. */
#ifndef MR_TARGET_CLONES_H
#define MR_TARGET_CLONES_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(MR_NATIVE_ARCH) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define MR_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MR_AVX2_CLONES
#endif

#endif
