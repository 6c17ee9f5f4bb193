/* throughput.c: images/sec over the updates after the warm-up (see
 * throughput.h). */
#include "launch/throughput.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void mr_throughput_init(mr_throughput *t, int64_t warmup, int64_t every, int global_batch,
                        int replicas, FILE *out) {
    memset(t, 0, sizeof *t);
    t->warmup = warmup;
    t->every = every;
    t->global_batch = global_batch;
    t->replicas = replicas;
    t->out = out;
}

void mr_throughput_free(mr_throughput *t) {
    free(t->speeds);
    t->speeds = NULL;
    t->n = t->cap = 0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

mr_throughput_figures mr_throughput_get(const mr_throughput *t) {
    mr_throughput_figures f = {.n = t->n};
    if (t->n == 0) return f;
    double sum = 0.0;
    for (int64_t i = 0; i < t->n; i++)
        sum += t->speeds[i];
    f.mean = sum / (double)t->n;
    double ss = 0.0;
    for (int64_t i = 0; i < t->n; i++)
        ss += (t->speeds[i] - f.mean) * (t->speeds[i] - f.mean);
    f.stderr_ = t->n > 1 ? sqrt(ss / (double)(t->n - 1)) / sqrt((double)t->n) : 0.0;
    /* the median of |speed - median| over a sorted copy */
    double *s = malloc(sizeof(double) * (size_t)t->n);
    if (s != NULL) {
        memcpy(s, t->speeds, sizeof(double) * (size_t)t->n);
        qsort(s, (size_t)t->n, sizeof *s, cmp_double);
        const int64_t n = t->n;
        const double med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
        for (int64_t i = 0; i < n; i++)
            s[i] = fabs(s[i] - med);
        qsort(s, (size_t)n, sizeof *s, cmp_double);
        f.jitter = 1.4826 * (n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]));
        free(s);
    }
    f.total = t->seconds > 0.0 ? t->images / t->seconds : 0.0;
    return f;
}

int mr_throughput_step(mr_throughput *t, int64_t global_step, double seconds) {
    if (++t->calls <= t->warmup || !(seconds > 0.0)) return 0;
    if (t->n == t->cap) {
        const int64_t cap = t->cap ? 2 * t->cap : 256;
        double *p = realloc(t->speeds, sizeof(double) * (size_t)cap);
        if (p == NULL) return -1;
        t->speeds = p, t->cap = cap;
    }
    t->speeds[t->n++] = (double)t->global_batch / seconds;
    t->images += t->global_batch;
    t->seconds += seconds;
    if (t->out != NULL && t->every > 0 && t->n % t->every == 0) {
        const mr_throughput_figures f = mr_throughput_get(t);
        fprintf(t->out, "Step %lld: images/sec: %.1f +/- %.1f (jitter = %.1f)\n",
                (long long)global_step, f.mean, f.stderr_, f.jitter);
        fflush(t->out);
    }
    return 0;
}
