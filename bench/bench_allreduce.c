/* bench_allreduce: time, algorithm and bus bandwidth of our communicators.
 *
 *   bench_allreduce [--threads T] [--json]                     local (T threads)
 *   mpirun -np P bench_allreduce [--threads T] [--json]        mpi (T = 1) or
 *                                                             hierarchical (T > 1)
 *   mpirun -np P -x MIRRORED_RANKS_PER_NODE=1 bench_allreduce  hierarchical, each
 *                                                             rank its own node
 * The communicator is the one mirrored_train would use for that job shape
 * (mr_job_comm_create). For sizes 4 KiB .. 64 MiB every participant
 * all-reduces the same number of floats; the result is verified first (as
 * nccl-tests do), then the median of 7 timed rounds (each the slowest
 * participant's mean over many all-reduces) gives, as nccl-tests define
 * them, algbw = bytes / time and busbw = algbw x 2 (n - 1) / n over the n
 * participants. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/dmem_impl.h"
#include "runtime/clock.h"
#include "collectives/job.h"

typedef struct worker {
    mr_comm *c;
    int rank, reps;
    size_t n;
    float *buf;
    double seconds;
    mr_status st;
    mr_error err;
} worker;


static void *run(void *arg) {
    worker *w = arg;
    w->st = mr_comm_barrier(w->c, w->rank, &w->err);
    double t0 = mr_now_s();
    for (int r = 0; r < w->reps && w->st == MR_OK; r++)
        w->st = mr_comm_allreduce_sum(w->c, w->rank, mr_dfloat_of(w->buf), w->n, &w->err);
    w->seconds = mr_now_s() - t0;
    return NULL;
}

/* One round on every participant: threads 1..T-1, the caller is thread 0
 * (the one that may call MPI). Returns the slowest participant's time per
 * all-reduce across the whole job. */
static double round_time(mr_job *job, worker *ws, int T, int reps) {
    pthread_t tid[64];
    for (int t = 1; t < T; t++) {
        ws[t].reps = reps;
        pthread_create(&tid[t], NULL, run, &ws[t]);
    }
    ws[0].reps = reps;
    run(&ws[0]);
    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        if (t > 0) pthread_join(tid[t], NULL);
        if (ws[t].st != MR_OK) {
            fprintf(stderr, "bench_allreduce: %s\n", ws[t].err.msg);
            exit(1);
        }
        if (ws[t].seconds > worst) worst = ws[t].seconds;
    }
    double *all = calloc((size_t)job->size, sizeof(double));
    mr_error err = {0};
    if (mr_job_allgather(job, &worst, sizeof worst, all, &err) != MR_OK) {
        fprintf(stderr, "bench_allreduce: %s\n", err.msg);
        exit(1);
    }
    for (int p = 0; p < job->size; p++)
        if (all[p] > worst) worst = all[p];
    free(all);
    return worst / reps;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int T = 2, json = 0, threads_given = 0;
    mr_job job;
    mr_error err = {0};
    const char *rpn = getenv("MIRRORED_RANKS_PER_NODE");
    if (mr_job_init(&argc, &argv, rpn && *rpn ? atoi(rpn) : 0, 600.0, &job, &err) != MR_OK) {
        fprintf(stderr, "bench_allreduce: %s\n", err.msg);
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            T = atoi(argv[++i]), threads_given = 1;
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else {
            fprintf(stderr, "usage: [mpirun -np P] bench_allreduce [--threads T] [--json]\n");
            return 2;
        }
    }
    if (!threads_given && job.size > 1) T = 1; /* one replica per process by default */
    if (T < 1 || T > 64) {
        fprintf(stderr, "bench_allreduce: --threads must be 1..64\n");
        return 2;
    }
    mr_comm *c;
    if (mr_job_comm_create(&job, T, &c, &err) != MR_OK) {
        fprintf(stderr, "bench_allreduce: %s\n", err.msg);
        return 1;
    }
    const int n_all = c->world_size, lead = job.rank == 0;
    worker ws[64];
    if (lead && !json)
        printf("# %s, %d participants (%d process%s x %d thread%s)\n", mr_comm_name(c), n_all,
               job.size, job.size > 1 ? "es" : "", T, T > 1 ? "s" : "");
    if (lead && !json)
        printf("%12s %12s %12s %12s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s");
    for (size_t bytes = 4096; bytes <= (64u << 20); bytes *= 4) {
        size_t n = bytes / sizeof(float);
        for (int t = 0; t < T; t++) {
            ws[t] = (worker){.c = c, .rank = t, .n = n};
            ws[t].buf = malloc(bytes);
            for (size_t i = 0; i < n; i++)
                ws[t].buf[i] = (float)(c->world_offset + t + 1);
        }
        /* verify: one all-reduce of (g + 1) over g = 0..n-1 gives n (n + 1) / 2 */
        round_time(&job, ws, T, 1);
        for (int t = 0; t < T; t++)
            for (size_t i = 0; i < n; i++)
                if (ws[t].buf[i] != (float)(n_all * (n_all + 1) / 2)) {
                    fprintf(stderr, "bench_allreduce: wrong result at %zu bytes\n", bytes);
                    return 1;
                }
        int reps = (int)(((size_t)64 << 20) / bytes);
        if (reps > 2000) reps = 2000;
        if (reps < 5) reps = 5;
        double times[7];
        for (int k = 0; k < 7; k++)
            times[k] = round_time(&job, ws, T, reps);
        qsort(times, 7, sizeof times[0], cmp);
        double t = times[3], alg = (double)bytes / t / 1e9, bus = alg * 2.0 * (n_all - 1) / n_all;
        if (lead && json)
            printf("{\"impl\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"time_us\":%.2f,\"algbw\":%.3f,"
                   "\"busbw\":%.3f}\n",
                   mr_comm_name(c), n_all, bytes, t * 1e6, alg, bus);
        else if (lead)
            printf("%12zu %12.2f %12.3f %12.3f\n", bytes, t * 1e6, alg, bus);
        for (int k = 0; k < T; k++)
            free(ws[k].buf);
    }
    mr_comm_destroy(c);
    mr_job_finalize(&job);
    return 0;
}
