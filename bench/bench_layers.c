/* bench_layers: per-layer forward and backward time of a model, and each
 * convolution's achieved GFLOP/s (2 x multiply-adds / time) against the
 * machine's SGEMM GFLOP/s measured in the same run (1024^3, same threads).
 * The multiply-adds are the direct convolution's whatever the algorithm:
 * a 3x3 stride-1 layer that runs by Winograd (backends/cpu/winograd_cpu.h)
 * does 2.25 times fewer in its GEMMs, so it can pass 100% of SGEMM.
 *
 *   OPENBLAS_NUM_THREADS=1 taskset -c 0 bench_layers MODEL.cfg [BATCH]
 * Median of 9 timings of each layer on random inputs; backward includes the
 * weight gradient and, except for the first layer, the input gradient.
 * Then the passes over the parameters of an update: the optimizer's
 * update, plain and with the NaN/Inf check folded into it (on_nan = stop),
 * and the separate check that on_nan = skip makes before it, each with its
 * share of forward + backward + update at this batch. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/clock.h"
#include "backends/backends.h"
#include "models/conv_geometry.h"
#include "models/model.h"
#include "runtime/rng.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double sgemm_gflops(void) {
    const int n = 1024;
    float *a = calloc((size_t)n * n, 4), *b = calloc((size_t)n * n, 4),
          *c = calloc((size_t)n * n, 4);
    double t[5];
    for (int k = 0; k < 5; k++) {
        double t0 = mr_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        t[k] = mr_now_s() - t0;
    }
    qsort(t, 5, sizeof t[0], cmp);
    free(a), free(b), free(c);
    return 2.0 * n * n * n / t[2] / 1e9;
}

int main(int argc, char **argv) {
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: bench_layers MODEL.cfg [BATCH]\n"
               "per-layer forward and backward times and each convolution's GFLOP/s against\n"
               "SGEMM's (counting the direct convolution's flops: a Winograd layer can pass\n"
               "100%%); run as OPENBLAS_NUM_THREADS=1 taskset -c 0 bench_layers MODEL.cfg\n");
        return 0;
    }
    if (argc < 2 || argc > 3 || argv[1][0] == '-') {
        fprintf(stderr, "usage: bench_layers MODEL.cfg [BATCH]\n");
        return 2;
    }
    mr_config cfg;
    mr_error err = {0};
    if (mr_config_load(argv[1], &cfg, &err) != MR_OK) {
        fprintf(stderr, "bench_layers: %s\n", err.msg);
        return 2;
    }
    int B = argc == 3 ? atoi(argv[2]) : cfg.net.batch;
    if (B < 1) {
        fprintf(stderr, "bench_layers: batch must be >= 1\n");
        return 2;
    }
    mr_model m;
    mr_backend *be = NULL;
    if (mr_backend_create(mr_backend_kind_cpu(), 0, &be, &err) != MR_OK ||
        mr_model_init(&m, be, &cfg, B, 0, &err) != MR_OK) {
        fprintf(stderr, "bench_layers: %s\n", err.msg);
        return 2;
    }
    mr_rng_uniform(1, 50, 0, 0, 0.0f, 1.0f, mr_model_input_host(&m), B * m.in_size);
    /* every layer's x and y hold real values */
    if (mr_model_init_weights(&m, 1, &err) != MR_OK ||
        mr_model_input_upload(&m, B, &err) != MR_OK || mr_model_forward(&m, B, 1, &err) != MR_OK) {
        fprintf(stderr, "bench_layers: %s\n", err.msg);
        return 2;
    }
    double peak = sgemm_gflops();
    printf("SGEMM 1024^3: %.1f GFLOP/s; batch %d\n", peak, B);
    printf("| layer | output | forward ms | backward ms | forward GFLOP/s | backward GFLOP/s | %% "
           "of SGEMM (fwd / bwd) |\n");
    printf("|---|---|---|---|---|---|---|\n");
    double layers_s = 0.0; /* medians of every layer's forward + backward */
    for (int i = 0; i < m.n_layers; i++) {
        mr_layer *l = &m.layers[i];
        if (l->ops->view) { /* the model neither copies nor calls it */
            char shape[64];
            mr_shape_format(l->out, shape, sizeof shape);
            printf("| %s (%s) | %s | view, no copy | view, no copy | | | |\n", l->name,
                   l->ops->class_name, shape);
            continue;
        }
        if (l->fused) { /* a ReLU the layer before applies in its own passes */
            char shape[64];
            mr_shape_format(l->out, shape, sizeof shape);
            printf("| %s (%s) | %s | fused into the layer before | fused | | | |\n", l->name,
                   l->ops->class_name, shape);
            continue;
        }
        const mr_dfloat *x = i > 0 ? m.acts[i - 1] : m.input;
        int64_t ny = B * mr_shape_size(l->out), nx = B * mr_shape_size(l->in);
        mr_dfloat *dy = mr_backend_alloc_floats(be, (size_t)ny);
        mr_dfloat *dx = i > 0 ? mr_backend_alloc_floats(be, (size_t)nx) : NULL;
        /* dy is made on the host: in place where the context's memory is host memory */
        float *dy_host = mr_backend_host_view(be, dy), *stage = NULL;
        if (dy_host == NULL) dy_host = stage = malloc(sizeof(float) * ny);
        double tf[9], tb[9];
        for (int k = 0; k < 9; k++) {
            double t0 = mr_now_s();
            mr_status st = mr_layer_forward(l, &m.run, B, x, m.acts[i]);
            tf[k] = mr_now_s() - t0;
            mr_rng_uniform(2, 51, (uint32_t)k, 0, -1.0f, 1.0f, dy_host, ny);
            if (st == MR_OK) st = mr_backend_write(be, dy, dy_host, (size_t)ny, &err);
            t0 = mr_now_s();
            if (st == MR_OK) st = mr_layer_backward(l, &m.run, B, x, m.acts[i], dy, dx);
            tb[k] = mr_now_s() - t0;
            if (st != MR_OK) {
                fprintf(stderr, "bench_layers: %s: %s\n", l->name, err.msg);
                return 1;
            }
        }
        qsort(tf, 9, sizeof tf[0], cmp);
        qsort(tb, 9, sizeof tb[0], cmp);
        layers_s += tf[4] + tb[4];
        char shape[64];
        mr_shape_format(l->out, shape, sizeof shape);
        if (l->cfg->kind == MR_LAYER_CONV2D) {
            /* multiply-adds: output pixels x kernel volume x filters */
            double macs = (double)B * l->out.d[0] * l->out.d[1] * l->cfg->size[0] *
                          l->cfg->size[1] * l->in.d[2] * l->out.d[2];
            double fwd = 2 * macs / tf[4] / 1e9, bwd = 2 * macs * (dx ? 2 : 1) / tb[4] / 1e9;
            printf("| %s (%s) | %s | %.3f | %.3f | %.1f | %.1f | %.0f%% / %.0f%% |\n", l->name,
                   l->ops->class_name, shape, tf[4] * 1e3, tb[4] * 1e3, fwd, bwd, 100 * fwd / peak,
                   100 * bwd / peak);
        } else {
            printf("| %s (%s) | %s | %.3f | %.3f | | | |\n", l->name, l->ops->class_name, shape,
                   tf[4] * 1e3, tb[4] * 1e3);
        }
        mr_backend_free(be, dy);
        mr_backend_free(be, dx);
        free(stage);
    }
    /* the passes over the n_params floats of the weights and gradients;
     * the gradients are those of a real backward */
    if (mr_model_zero_grads(&m, &err) != MR_OK) {
        fprintf(stderr, "bench_layers: %s\n", err.msg);
        return 1;
    }
    double tu[9], tf[9], tc[9];
    for (int k = 0; k < 9; k++) {
        int bad = 0;
        double t0 = mr_now_s();
        mr_status st = mr_model_apply_update(&m, 1e-6f, 2 * k + 1, NULL, &err);
        tu[k] = mr_now_s() - t0;
        t0 = mr_now_s();
        if (st == MR_OK) st = mr_model_apply_update(&m, 1e-6f, 2 * k + 2, &bad, &err);
        tf[k] = mr_now_s() - t0;
        t0 = mr_now_s();
        if (st == MR_OK) st = mr_model_grads_nonfinite(&m, &bad, &err);
        tc[k] = mr_now_s() - t0;
        if (st != MR_OK) {
            fprintf(stderr, "bench_layers: %s\n", err.msg);
            return 1;
        }
    }
    qsort(tu, 9, sizeof tu[0], cmp);
    qsort(tc, 9, sizeof tc[0], cmp);
    qsort(tf, 9, sizeof tf[0], cmp);
    printf("\n| pass over the %lld parameters | ms | share of forward + backward + update |\n",
           (long long)m.n_params);
    printf("|---|---|---|\n");
    const double step_s = layers_s + tu[4];
    printf("| optimizer update | %.3f | %.2f%% |\n", tu[4] * 1e3, 100 * tu[4] / step_s);
    printf("| optimizer update checking the gradients as it reads them (on_nan = stop) | %.3f | "
           "%.2f%% |\n",
           tf[4] * 1e3, 100 * tf[4] / step_s);
    printf("| NaN/Inf check of the gradients (on_nan = skip) | %.3f | %.2f%% |\n", tc[4] * 1e3,
           100 * tc[4] / step_s);
    mr_model_free(&m);
    mr_backend_destroy(be);
    mr_config_free(&cfg);
    return 0;
}
