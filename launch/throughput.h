/* throughput.h: images/sec as the standard benchmarks print it.
 *
 * tf_cnn_benchmarks and Horovod's synthetic benchmark report a training
 * speed that leaves out the first updates (warm-up: allocation, caches, the
 * first cuDNN algorithm searches), then every few updates the mean speed
 * so far with its uncertainty, and a total at the end. This module keeps
 * those figures from the per-update times of global replica 0 (one update
 * trains one global batch on every replica); mirrored_train prints them
 * with --synthetic or --display-every. */
#ifndef MR_THROUGHPUT_H
#define MR_THROUGHPUT_H

#include <stdint.h>
#include <stdio.h>

typedef struct mr_throughput {
    int64_t warmup; /* updates of this run left out at its start (a resumed run too) */
    int64_t calls;  /* updates seen */
    int64_t every;  /* print a line every this many counted updates (0: never) */
    int global_batch;
    int replicas;
    FILE *out; /* where the lines go, or NULL */
    /* the counted updates' speeds (images/sec), for the mean, the standard
     * error and the jitter (median absolute deviation) */
    double *speeds;
    int64_t n, cap;
    double images, seconds; /* summed over the counted updates */
} mr_throughput;

/* Starts counting after `warmup` updates, printing every `every` (0:
 * only the total) to out (NULL: nothing printed). */
void mr_throughput_init(mr_throughput *t, int64_t warmup, int64_t every, int global_batch,
                        int replicas, FILE *out);
void mr_throughput_free(mr_throughput *t);

/* One update that took `seconds` (global_step, 1-based, names it in the
 * line; the warm-up counts this run's updates). Prints
 * "Step N: images/sec: MEAN +/- SE (jitter = J)" every `every` counted
 * updates. Returns 0, or -1 when out of memory (the figures then stop). */
int mr_throughput_step(mr_throughput *t, int64_t global_step, double seconds);

/* The figures over the counted updates: mean of the per-update speeds, its
 * standard error (sd / sqrt(n)), the jitter (1.4826 x the median absolute
 * deviation, as tf_cnn_benchmarks), and the total: images / seconds. All 0
 * before the first counted update. */
typedef struct mr_throughput_figures {
    int64_t n;
    double mean, stderr_, jitter, total;
} mr_throughput_figures;
mr_throughput_figures mr_throughput_get(const mr_throughput *t);

#endif
