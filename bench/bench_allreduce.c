/* bench_allreduce: algorithm and bus bandwidth of the local communicator.
 *
 *   bench_allreduce [--threads T] [--json]
 * For sizes 4 KiB .. 64 MiB: T threads all-reduce the same number of floats;
 * the result is verified first (as nccl-tests do), then the median time of
 * several timed rounds gives algbw = bytes / time and
 * busbw = algbw * 2 (T - 1) / T. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../collectives/local.h"

typedef struct worker {
    mr_comm *c;
    int rank, reps;
    size_t n;
    float *buf;
    double seconds;
    mr_status st;
} worker;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *run(void *arg) {
    worker *w = arg;
    mr_error err = {0};
    w->st = mr_comm_barrier(w->c, w->rank, &err);
    double t0 = now_s();
    for (int r = 0; r < w->reps && w->st == MR_OK; r++)
        w->st = mr_comm_allreduce_sum(w->c, w->rank, w->buf, w->n, &err);
    w->seconds = now_s() - t0;
    return NULL;
}

static double round_time(mr_comm *c, worker *ws, int T, int reps) {
    pthread_t tid[64];
    for (int t = 0; t < T; t++) {
        ws[t].reps = reps;
        pthread_create(&tid[t], NULL, run, &ws[t]);
    }
    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        pthread_join(tid[t], NULL);
        if (ws[t].st != MR_OK) {
            fprintf(stderr, "bench_allreduce: a collective failed\n");
            exit(1);
        }
        if (ws[t].seconds > worst) worst = ws[t].seconds;
    }
    (void)c;
    return worst / reps;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int T = 2, json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            T = atoi(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else {
            fprintf(stderr, "usage: bench_allreduce [--threads T] [--json]\n");
            return 2;
        }
    }
    if (T < 1 || T > 64) {
        fprintf(stderr, "bench_allreduce: --threads must be 1..64\n");
        return 2;
    }
    mr_comm *c;
    mr_error err = {0};
    if (mr_comm_local_create(T, &c, &err) != MR_OK) {
        fprintf(stderr, "bench_allreduce: %s\n", err.msg);
        return 1;
    }
    worker ws[64];
    if (!json) printf("%12s %12s %12s %12s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s");
    for (size_t bytes = 4096; bytes <= (64u << 20); bytes *= 4) {
        size_t n = bytes / sizeof(float);
        for (int t = 0; t < T; t++) {
            ws[t] = (worker){.c = c, .rank = t, .n = n};
            ws[t].buf = malloc(bytes);
            for (size_t i = 0; i < n; i++)
                ws[t].buf[i] = (float)(t + 1);
        }
        /* verify: one all-reduce of (t + 1) gives T (T + 1) / 2 everywhere */
        round_time(c, ws, T, 1);
        for (int t = 0; t < T; t++)
            for (size_t i = 0; i < n; i++)
                if (ws[t].buf[i] != (float)(T * (T + 1) / 2)) {
                    fprintf(stderr, "bench_allreduce: wrong result at %zu bytes\n", bytes);
                    return 1;
                }
        int reps = (int)(((size_t)64 << 20) / bytes);
        if (reps > 2000) reps = 2000;
        if (reps < 5) reps = 5;
        double times[7];
        for (int k = 0; k < 7; k++)
            times[k] = round_time(c, ws, T, reps);
        qsort(times, 7, sizeof times[0], cmp);
        double t = times[3], alg = (double)bytes / t / 1e9, bus = alg * 2.0 * (T - 1) / T;
        if (json)
            printf("{\"impl\":\"local\",\"ranks\":%d,\"bytes\":%zu,\"time_us\":%.2f,\"algbw\":%.3f,"
                   "\"busbw\":%.3f}\n",
                   T, bytes, t * 1e6, alg, bus);
        else
            printf("%12zu %12.2f %12.3f %12.3f\n", bytes, t * 1e6, alg, bus);
        for (int k = 0; k < T; k++)
            free(ws[k].buf);
    }
    mr_comm_destroy(c);
    return 0;
}
