/* bench_allreduce_mpi: the same measurement as bench_allreduce for
 * OpenMPI's MPI_Allreduce (in place, float, sum) over MPI_COMM_WORLD.
 *
 *   mpirun -np 2 bench_allreduce_mpi [--json] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, T;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &T);
    int json = argc > 1 && strcmp(argv[1], "--json") == 0;
    if (rank == 0 && !json)
        printf("%12s %12s %12s %12s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s");
    for (size_t bytes = 4096; bytes <= (64u << 20); bytes *= 4) {
        size_t n = bytes / sizeof(float);
        float *buf = malloc(bytes);
        for (size_t i = 0; i < n; i++)
            buf[i] = (float)(rank + 1);
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++)
            if (buf[i] != (float)(T * (T + 1) / 2)) {
                fprintf(stderr, "bench_allreduce_mpi: wrong result at %zu bytes\n", bytes);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        int reps = (int)(((size_t)64 << 20) / bytes);
        if (reps > 2000) reps = 2000;
        if (reps < 5) reps = 5;
        double times[7];
        for (int k = 0; k < 7; k++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int r = 0; r < reps; r++)
                MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double t = (MPI_Wtime() - t0) / reps, worst;
            MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            times[k] = worst;
        }
        qsort(times, 7, sizeof times[0], cmp);
        double t = times[3], alg = (double)bytes / t / 1e9, bus = alg * 2.0 * (T - 1) / T;
        if (rank == 0) {
            if (json)
                printf("{\"impl\":\"mpi\",\"ranks\":%d,\"bytes\":%zu,\"time_us\":%.2f,\"algbw\":%."
                       "3f,\"busbw\":%.3f}\n",
                       T, bytes, t * 1e6, alg, bus);
            else
                printf("%12zu %12.2f %12.3f %12.3f\n", bytes, t * 1e6, alg, bus);
        }
        free(buf);
    }
    MPI_Finalize();
    return 0;
}
