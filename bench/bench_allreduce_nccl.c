/* bench_allreduce_nccl: time, algorithm and bus bandwidth of the NCCL
 * communicator over this process's GPUs (bench_allreduce's GPU sibling).
 *
 *   bench_allreduce_nccl [--gpus N] [--json]     every visible GPU, or the first N
 *
 * One CUDA context and one thread per GPU, as mirrored_train runs GPU
 * replicas, and the communicator it uses for them (the GPU kind's comm_create: NCCL).
 * For sizes 4 KiB .. 64 MiB every GPU all-reduces the same number of floats
 * of its device memory; the result is checked first (as nccl-tests do),
 * then the median of 7 timed rounds gives, as nccl-tests define them,
 * algbw = bytes / time and busbw = algbw x 2 (n - 1) / n over the n GPUs.
 * A round: a barrier, then `reps` stream-ordered all-reduces
 * (mr_comm_allreduce_sum: each waits on the compute stream for the one
 * before, as gradient buckets do) and one host wait (mr_comm_wait_all);
 * its time is the slowest GPU's, per all-reduce. Without a GPU it says why
 * in one line and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/clock.h"
#include "backends/backends.h"

typedef struct worker {
    mr_comm *c;
    mr_backend *be;
    int rank, reps;
    size_t n;
    mr_dfloat *buf;
    double seconds;
    mr_status st;
    mr_error err;
} worker;


static void *run(void *arg) {
    worker *w = arg;
    w->st = mr_backend_enter(w->be, &w->err);
    if (w->st == MR_OK) w->st = mr_comm_barrier(w->c, w->rank, &w->err);
    double t0 = mr_now_s();
    for (int r = 0; r < w->reps && w->st == MR_OK; r++)
        w->st = mr_comm_allreduce_sum(w->c, w->rank, w->buf, w->n, &w->err);
    if (w->st == MR_OK) w->st = mr_comm_wait_all(w->c, w->rank, &w->err);
    w->seconds = mr_now_s() - t0;
    return NULL;
}

/* One round on every GPU's thread; the slowest GPU's time per all-reduce. */
static double round_time(worker *ws, int n, int reps) {
    pthread_t tid[MR_MAX_GPUS];
    for (int t = 0; t < n; t++) {
        ws[t].reps = reps;
        pthread_create(&tid[t], NULL, run, &ws[t]);
    }
    double worst = 0.0;
    for (int t = 0; t < n; t++)
        pthread_join(tid[t], NULL);
    for (int t = 0; t < n; t++) {
        if (ws[t].st != MR_OK) {
            fprintf(stderr, "bench_allreduce_nccl: %s\n", ws[t].err.msg);
            exit(1);
        }
        if (ws[t].seconds > worst) worst = ws[t].seconds;
    }
    return worst / reps;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *msg) {
    fprintf(stderr, "bench_allreduce_nccl: %s\n", msg);
    exit(1);
}

int main(int argc, char **argv) {
    int json = 0, want = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpus") == 0 && i + 1 < argc)
            want = atoi(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else {
            fprintf(stderr, "usage: bench_allreduce_nccl [--gpus N] [--json]\n");
            return 2;
        }
    }
    const mr_backend_kind *gpu = mr_backend_kind_find("gpu");
    const mr_gpu_list *gpus = mr_backend_kind_devices(gpu);
    if (gpus->count == 0) {
        printf("bench_allreduce_nccl: no GPU, nothing to measure (%s)\n", gpus->reason);
        return 0;
    }
    const int n = want > 0 && want < gpus->count ? want : gpus->count;
    mr_backend *be[MR_MAX_GPUS];
    mr_error err = {0};
    for (int r = 0; r < n; r++)
        if (mr_backend_create(gpu, gpus->gpu[r].ordinal, &be[r], &err) != MR_OK)
            die(err.msg);
    mr_comm *c;
    if (gpu->comm_create(be, n, NULL, 600.0, &c, &err) != MR_OK) die(err.msg);
    if (!json)
        printf("# nccl, %d GPU%s (%s)\n%12s %12s %12s %12s\n", n, n > 1 ? "s" : "",
               gpus->gpu[0].name, "bytes", "time_us", "algbw_GB/s", "busbw_GB/s");
    worker ws[MR_MAX_GPUS];
    for (size_t bytes = 4096; bytes <= (64u << 20); bytes *= 4) {
        size_t count = bytes / sizeof(float);
        float *host = malloc(bytes);
        if (host == NULL) die("out of memory");
        for (int t = 0; t < n; t++) {
            ws[t] = (worker){.c = c, .be = be[t], .rank = t, .n = count};
            ws[t].buf = mr_backend_alloc_floats(be[t], count);
            if (ws[t].buf == NULL) die("out of device memory");
            for (size_t i = 0; i < count; i++)
                host[i] = (float)(t + 1);
            if (mr_backend_to_device(be[t], ws[t].buf, host, bytes, &err) != MR_OK) die(err.msg);
        }
        /* verify: one all-reduce of (g + 1) over g = 0..n-1 gives n (n + 1) / 2 */
        round_time(ws, n, 1);
        for (int t = 0; t < n; t++) {
            if (mr_backend_to_host(be[t], host, ws[t].buf, bytes, &err) != MR_OK) die(err.msg);
            for (size_t i = 0; i < count; i++)
                if (host[i] != (float)(n * (n + 1) / 2)) {
                    fprintf(stderr, "bench_allreduce_nccl: wrong result at %zu bytes on GPU %d\n",
                            bytes, t);
                    return 1;
                }
        }
        int reps = (int)(((size_t)256 << 20) / bytes);
        if (reps > 2000) reps = 2000;
        if (reps < 20) reps = 20;
        round_time(ws, n, reps); /* warm-up: NCCL connects its algorithms on first use */
        double times[7];
        for (int k = 0; k < 7; k++)
            times[k] = round_time(ws, n, reps);
        qsort(times, 7, sizeof times[0], cmp);
        double t = times[3], alg = (double)bytes / t / 1e9, bus = alg * 2.0 * (n - 1) / n;
        if (json)
            printf("{\"impl\":\"nccl\",\"ranks\":%d,\"bytes\":%zu,\"time_us\":%.2f,\"algbw\":%.3f,"
                   "\"busbw\":%.3f}\n",
                   n, bytes, t * 1e6, alg, bus);
        else
            printf("%12zu %12.2f %12.3f %12.3f\n", bytes, t * 1e6, alg, bus);
        fflush(stdout);
        for (int k = 0; k < n; k++)
            mr_backend_free(be[k], ws[k].buf);
        free(host);
    }
    mr_comm_destroy(c);
    for (int r = 0; r < n; r++)
        mr_backend_destroy(be[r]);
    return 0;
}
