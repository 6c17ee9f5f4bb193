/* bench_sgemm: the machine's OpenBLAS SGEMM speed, the yardstick for our
 * layers' achieved GFLOP/s. Run it with the thread count to compare against
 * (OPENBLAS_NUM_THREADS=1 for the single-thread figure).
 *
 *   bench_sgemm [M N K]...     default: 1024 1024 1024
 * Prints one line per shape: M N K GFLOP/s (median of 7 timed runs). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/clock.h"


static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int shapes[64][3] = {{1024, 1024, 1024}}, n = 1;
    if (argc > 1) {
        if ((argc - 1) % 3 != 0) {
            fprintf(stderr, "usage: bench_sgemm [M N K]...\n");
            return 2;
        }
        n = 0;
        for (int i = 1; i + 2 < argc && n < 64; i += 3, n++)
            for (int j = 0; j < 3; j++)
                shapes[n][j] = atoi(argv[i + j]);
    }
    for (int s = 0; s < n; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        if (M < 1 || N < 1 || K < 1) {
            fprintf(stderr, "bench_sgemm: sizes must be positive\n");
            return 2;
        }
        float *a = malloc(sizeof(float) * (size_t)M * K),
              *b = malloc(sizeof(float) * (size_t)K * N);
        float *c = malloc(sizeof(float) * (size_t)M * N);
        for (long i = 0; i < (long)M * K; i++)
            a[i] = (float)(i % 7) * 0.1f;
        for (long i = 0; i < (long)K * N; i++)
            b[i] = (float)(i % 5) * 0.1f;
        double flops = 2.0 * M * N * K, times[7];
        int reps = (int)(2e9 / flops) + 1; /* ~0.1 s per timing at 20 GFLOP/s */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c,
                    N);
        for (int t = 0; t < 7; t++) {
            double t0 = mr_now_s();
            for (int r = 0; r < reps; r++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N,
                            0.0f, c, N);
            times[t] = (mr_now_s() - t0) / reps;
        }
        qsort(times, 7, sizeof times[0], cmp);
        printf("%d %d %d %.1f\n", M, N, K, flops / times[3] / 1e9);
        free(a), free(b), free(c);
    }
    return 0;
}
