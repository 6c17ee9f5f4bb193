/* test_batchnorm.c: batch normalisation: gradient checks in training mode
 * (rank 3 and rank 1), normalised output, moving averages with momentum,
 * inference on the moving statistics, SyncBatchNormalization (two replica
 * threads with sync=1 equal one replica with their whole batch), a failing
 * collective, an empty shard, and batchnorm_stats.h's row blocks and tree
 * of sums (at sizes that cross its levels), which the CPU and CUDA kernels
 * share.
 * Bound 2e-3: gradcheck.h; BN is smooth, so nothing is skipped, and the
 * noise measured here is near 1e-4; a wrong term of the BN backward (a
 * missing mean(dy) or xhat * mean(dy xhat)) is off by O(0.1..1). */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "runtime/dmem_impl.h"
#include "models/batchnorm_stats.h"
#include "tests/gradcheck.h"
#include "tests/testutil.h"

START_TEST(gradients) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_BATCHNORM);
    gc_layer_result r;
    mr_error err = {0};
    mr_shape img = {3, {3, 2, 4}}, flat = {1, {5, 0, 0}};
    ck_assert_int_eq(gc_check_layer(&c, img, 3, 2, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < 2e-3 && r.err_weights < 2e-3, "img: %g %g", r.err_input,
                  r.err_weights);
    ck_assert_int_eq(gc_check_layer(&c, flat, 6, 3, &r, &err), MR_OK);
    ck_assert_msg(r.err_input < 2e-3 && r.err_weights < 2e-3, "flat: %g %g", r.err_input,
                  r.err_weights);
}
END_TEST

START_TEST(statistics_and_inference) {
    mr_layer_cfg c = gc_layer_cfg(MR_LAYER_BATCHNORM);
    c.momentum = 0.9f;
    mr_layer l = {0};
    l.ops = &mr_batchnorm_ops;
    l.cfg = &c;
    l.in = (mr_shape){3, {2, 2, 3}};
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&l, 4, "t.cfg", &err), MR_OK);
    ck_assert_int_eq(l.n_weights, 4);
    ck_assert_str_eq(l.w[2].name, "moving_mean");
    ck_assert_int_eq(l.w[2].trainable, 0);
    float w[4][3], x[48], y[48];
    for (int i = 0; i < 4; i++)
        gc_weight(&l, i, w[i], NULL);
    gc_init(&l, 1);
    ck_assert_float_eq(w[0][1], 1.0f);
    ck_assert_float_eq(w[3][2], 1.0f);
    mr_rng_uniform(3, 3, 0, 0, 0.0f, 4.0f, x, 48);
    float scratch[16];
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1, .scratch = gc_dev(scratch)};
    gc_forward(&l, &run, 4, x, y);
    for (int ch = 0; ch < 3; ch++) {
        double m = 0, v = 0, ym = 0, yv = 0;
        for (int r = 0; r < 16; r++)
            m += x[r * 3 + ch], ym += y[r * 3 + ch];
        m /= 16, ym /= 16;
        for (int r = 0; r < 16; r++) {
            v += (x[r * 3 + ch] - m) * (x[r * 3 + ch] - m);
            yv += (y[r * 3 + ch] - ym) * (y[r * 3 + ch] - ym);
        }
        v /= 16, yv /= 16; /* biased, as Keras */
        ck_assert_double_eq_tol(ym, 0.0, 1e-5);
        ck_assert_double_eq_tol(yv, v / (v + 1e-3), 1e-4);
        ck_assert_double_eq_tol(w[2][ch], 0.1 * m, 1e-5);       /* 0.9 * 0 + 0.1 * mean */
        ck_assert_double_eq_tol(w[3][ch], 0.9 + 0.1 * v, 1e-5); /* 0.9 * 1 + 0.1 * var */
    }
    /* inference: the moving statistics */
    run.training = 0;
    gc_forward(&l, &run, 4, x, y);
    for (int i = 0; i < 48; i++) {
        int ch = i % 3;
        ck_assert_double_eq_tol(y[i], (x[i] - w[2][ch]) / sqrt(w[3][ch] + 1e-3), 1e-5);
    }
    mr_layer_destroy(&l);
}
END_TEST

/* A layer of the BN kind on `in` with its own weights (gamma, beta random
 * around 1 and 0; moving mean 0.5, moving variance 2: a shift that is not
 * the batch mean) and gradients. */
typedef struct bn_case {
    mr_layer_cfg c;
    mr_layer l;
    float w[4][8], g[2][8], scratch[32];
} bn_case;

static void bn_case_init(bn_case *t, mr_shape in, int max_batch, int sync) {
    memset(t, 0, sizeof *t);
    t->c = gc_layer_cfg(MR_LAYER_BATCHNORM);
    t->c.sync = sync;
    t->c.momentum = 0.9f;
    t->l.ops = &mr_batchnorm_ops;
    t->l.cfg = &t->c;
    t->l.in = in;
    mr_error err = {0};
    ck_assert_int_eq(gc_setup(&t->l, max_batch, "test.cfg", &err), MR_OK);
    ck_assert_int_le(t->l.scratch_floats, 32);
    int C = in.d[in.rank - 1];
    for (int i = 0; i < 4; i++)
        gc_weight(&t->l, i, t->w[i], i < 2 ? t->g[i] : NULL);
    gc_init(&t->l, 1);
    for (int ch = 0; ch < C; ch++) {
        t->w[0][ch] = 1.0f + 0.1f * (float)ch;
        t->w[1][ch] = 0.2f * (float)ch - 0.3f;
        t->w[2][ch] = 0.5f;
        t->w[3][ch] = 2.0f;
    }
}

/* Replica threads meeting in sync_sum: each adds its buffer, waits for the
 * others, and leaves with the total. */
typedef struct fake_comm {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int R, arrived, leaving, round;
    float sum[64];
    int calls[2];     /* per replica */
    size_t floats[2]; /* largest n per replica */
    int fail;         /* 1: every call fails */
} fake_comm;

typedef struct replica_ctx {
    fake_comm *comm;
    int r;
} replica_ctx;

static mr_status fake_sync_sum(void *ctx, mr_dfloat *dbuf, size_t n) {
    float *buf = mr_dfloat_ptr(dbuf); /* CPU device memory is host memory */
    replica_ctx *rc = ctx;
    fake_comm *c = rc->comm;
    ck_assert_int_le(n, 64);
    c->calls[rc->r]++;
    if (n > c->floats[rc->r]) c->floats[rc->r] = n;
    if (c->fail) return MR_ERR_RUNTIME;
    pthread_mutex_lock(&c->mu);
    while (c->leaving > 0) /* the previous round is still being read */
        pthread_cond_wait(&c->cv, &c->mu);
    if (c->arrived == 0) memset(c->sum, 0, sizeof c->sum);
    for (size_t i = 0; i < n; i++)
        c->sum[i] += buf[i];
    int round = c->round;
    if (++c->arrived == c->R) {
        c->arrived = 0;
        c->leaving = c->R;
        c->round++;
        pthread_cond_broadcast(&c->cv);
    } else {
        while (c->round == round)
            pthread_cond_wait(&c->cv, &c->mu);
    }
    memcpy(buf, c->sum, sizeof(float) * n);
    if (--c->leaving == 0) pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return MR_OK;
}

typedef struct replica_job {
    bn_case *t;
    replica_ctx ctx;
    int batch;
    const float *x, *dy;
    float *y, *dx;
    mr_status status;
} replica_job;

static void *replica_main(void *arg) {
    replica_job *j = arg;
    mr_exec_ctx run = {.be = tu_cpu_backend(),
                       .training = 1,
                       .scratch = gc_dev(j->t->scratch),
                       .sync_sum = fake_sync_sum,
                       .sync_ctx = &j->ctx};
    float dy[256];
    memcpy(dy, j->dy, sizeof(float) * (size_t)j->batch * mr_shape_size(j->t->l.in));
    j->status = gc_forward(&j->t->l, &run, j->batch, j->x, j->y);
    if (j->status == MR_OK)
        j->status = gc_backward(&j->t->l, &run, j->batch, j->x, j->y, dy, j->dx);
    return NULL;
}

/* y (rows, C) is x normalised per channel with the biased variance of x:
 * (y - beta) / gamma has mean 0 and variance var / (var + eps). */
static void check_normalised(const float *x, const float *y, int rows, int C, const float *gamma,
                             const float *beta, double eps) {
    for (int ch = 0; ch < C; ch++) {
        double m = 0, v = 0, zm = 0, zv = 0;
        for (int r = 0; r < rows; r++)
            m += x[r * C + ch], zm += (y[r * C + ch] - beta[ch]) / gamma[ch];
        m /= rows, zm /= rows;
        for (int r = 0; r < rows; r++) {
            double z = (y[r * C + ch] - beta[ch]) / gamma[ch];
            v += (x[r * C + ch] - m) * (x[r * C + ch] - m), zv += (z - zm) * (z - zm);
        }
        v /= rows, zv /= rows;
        ck_assert_double_eq_tol(zm, 0.0, 1e-5);
        ck_assert_double_eq_tol(zv, v / (v + eps), 1e-5);
    }
}

/* 2 replicas x 4 examples with sync=1 == 1 replica x 8 examples: outputs,
 * input gradients, summed weight gradients and the moving statistics. */
START_TEST(sync_matches_one_replica) {
    mr_shape in = {3, {2, 2, 3}};
    const int C = 3, per = 12, B = 4;
    float x[2 * 4 * 12], dy[2 * 4 * 12], y[2 * 4 * 12], dx[2 * 4 * 12];
    float ry[2 * 4 * 12], rdx[2 * 4 * 12], rdy[2 * 4 * 12];
    mr_rng_uniform(4, 4, 0, 0, 1.0f, 5.0f, x, 2 * B * per); /* mean 3: far from the shift 0.5 */
    mr_rng_uniform(4, 4, 1, 0, -1.0f, 1.0f, dy, 2 * B * per);
    /* the reference: one replica, no sync, the whole batch */
    bn_case ref;
    bn_case_init(&ref, in, 2 * B, 0);
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1, .scratch = gc_dev(ref.scratch)};
    memcpy(rdy, dy, sizeof dy);
    gc_forward(&ref.l, &run, 2 * B, x, ry);
    gc_backward(&ref.l, &run, 2 * B, x, ry, rdy, rdx);
    check_normalised(x, ry, 2 * B * per / C, C, ref.w[0], ref.w[1], 1e-3);
    /* two replica threads with sync=1 */
    bn_case rep[2];
    fake_comm comm = {.R = 2};
    pthread_mutex_init(&comm.mu, NULL);
    pthread_cond_init(&comm.cv, NULL);
    replica_job jobs[2];
    pthread_t tid[2];
    for (int r = 0; r < 2; r++) {
        bn_case_init(&rep[r], in, B, 1);
        jobs[r] = (replica_job){.t = &rep[r],
                                .ctx = {&comm, r},
                                .batch = B,
                                .x = x + r * B * per,
                                .dy = dy + r * B * per,
                                .y = y + r * B * per,
                                .dx = dx + r * B * per};
        pthread_create(&tid[r], NULL, replica_main, &jobs[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(tid[r], NULL);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(jobs[r].status, MR_OK);
        ck_assert_int_eq(comm.calls[r], 2);          /* one in forward, one in backward */
        ck_assert_int_eq(comm.floats[r], 2 * C + 1); /* 2C sums and a count */
    }
    for (int i = 0; i < 2 * B * per; i++) {
        ck_assert_double_eq_tol(y[i], ry[i], 1e-5);
        ck_assert_double_eq_tol(dx[i], rdx[i], 1e-5);
    }
    for (int ch = 0; ch < C; ch++) {
        ck_assert_double_eq_tol(rep[0].g[0][ch] + rep[1].g[0][ch], ref.g[0][ch], 1e-5);
        ck_assert_double_eq_tol(rep[0].g[1][ch] + rep[1].g[1][ch], ref.g[1][ch], 1e-5);
        for (int r = 0; r < 2; r++) {
            ck_assert_double_eq_tol(rep[r].w[2][ch], ref.w[2][ch], 1e-5);
            ck_assert_double_eq_tol(rep[r].w[3][ch], ref.w[3][ch], 1e-5);
        }
    }
    /* without sync each replica normalises with its own statistics */
    bn_case solo;
    bn_case_init(&solo, in, B, 0);
    run.scratch = gc_dev(solo.scratch);
    float y0[4 * 12];
    gc_forward(&solo.l, &run, B, x, y0);
    double d = 0.0;
    for (int i = 0; i < B * per; i++)
        d = fmax(d, fabs(y0[i] - ry[i]));
    ck_assert_double_gt(d, 1e-3);
    for (int r = 0; r < 2; r++)
        mr_layer_destroy(&rep[r].l);
    mr_layer_destroy(&ref.l);
    mr_layer_destroy(&solo.l);
    pthread_mutex_destroy(&comm.mu);
    pthread_cond_destroy(&comm.cv);
}
END_TEST

/* A failing collective is returned by the layer, not a crash. */
START_TEST(sync_failure_sets_status) {
    bn_case t;
    bn_case_init(&t, (mr_shape){1, {3, 0, 0}}, 4, 1);
    fake_comm comm = {.R = 2, .fail = 1};
    replica_ctx ctx = {&comm, 0};
    mr_exec_ctx run = {.be = tu_cpu_backend(),
                       .training = 1,
                       .scratch = gc_dev(t.scratch),
                       .sync_sum = fake_sync_sum,
                       .sync_ctx = &ctx};
    float x[12], y[12];
    mr_rng_uniform(5, 5, 0, 0, -1.0f, 1.0f, x, 12);
    ck_assert_int_eq(gc_forward(&t.l, &run, 4, x, y), MR_ERR_RUNTIME);
    ck_assert_float_eq(t.w[2][0], 0.5f); /* the moving statistics did not move */
    mr_layer_destroy(&t.l);
}
END_TEST

/* An empty shard (batch 0) in training leaves the moving statistics as
 * they were instead of learning 0/0. */
START_TEST(empty_batch_keeps_moving_statistics) {
    bn_case t;
    bn_case_init(&t, (mr_shape){3, {2, 2, 3}}, 4, 0);
    mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1, .scratch = gc_dev(t.scratch)};
    float x[1] = {0}, y[1], dy[1], dx[1];
    gc_forward(&t.l, &run, 0, x, y);
    gc_backward(&t.l, &run, 0, x, y, dy, dx);
    for (int ch = 0; ch < 3; ch++) {
        ck_assert_float_eq(t.w[2][ch], 0.5f);
        ck_assert_float_eq(t.w[3][ch], 2.0f);
        ck_assert_float_eq(t.g[0][ch], 0.0f);
        ck_assert_float_eq(t.g[1][ch], 0.0f);
    }
    mr_layer_destroy(&t.l);
}
END_TEST

/* The row blocks of batchnorm_stats.h partition the rows in order, each
 * MR_BN_ROW_BLOCK long but the last. */
START_TEST(row_blocks) {
    for (int64_t rows = 0; rows <= 3 * MR_BN_ROW_BLOCK + 1; rows++) {
        const int64_t n = mr_bn_blocks(rows);
        ck_assert_int_eq(n, (rows + MR_BN_ROW_BLOCK - 1) / MR_BN_ROW_BLOCK);
        int64_t next = 0;
        for (int64_t j = 0; j < n; j++) {
            int64_t r0, r1;
            mr_bn_block(j, rows, &r0, &r1);
            ck_assert_int_eq(r0, next);
            ck_assert_int_gt(r1, r0);
            ck_assert_int_le(r1 - r0, MR_BN_ROW_BLOCK);
            if (j + 1 < n) ck_assert_int_eq(r1 - r0, MR_BN_ROW_BLOCK);
            next = r1;
        }
        ck_assert_int_eq(next, rows);
    }
    ck_assert_int_eq(mr_bn_sync_floats(5), 11);
}
END_TEST

/* The tree of batchnorm_stats.h, written again top-down: the runs of 64
 * values, in order from 0, then the same over their sums, until one. */
static double ref_tree(const double *v, int64_t n) {
    if (n == 0) return 0.0;
    if (n == 1) return v[0];
    const int64_t m = (n + 63) / 64;
    double *up = malloc(sizeof(double) * (size_t)m);
    ck_assert_ptr_nonnull(up);
    for (int64_t r = 0; r < m; r++) {
        double s = 0.0;
        for (int64_t i = 64 * r; i < n && i < 64 * (r + 1); i++)
            s += v[i];
        up[r] = s;
    }
    const double t = ref_tree(up, m);
    free(up);
    return t;
}

/* Deterministic values of widely varying magnitude and sign, so that
 * another order of summation rounds differently. */
static double wide_value(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = (double)(*state >> 11) / 9007199254740992.0; /* [0, 1) */
    return (u - 0.5) * pow(2.0, (double)(int)((*state >> 3) % 40));
}

/* mr_bn_tree_total equals the top-down tree at sizes that cross its
 * levels (0, 1, one run, 64, 64 + 1, 64^2 +- 1, 64^3 + 1 values), its
 * slots are every level's values, and it is not the plain sequential
 * sum (which the test would otherwise not tell apart). */
START_TEST(tree_levels) {
    static const int64_t sizes[] = {0, 1, 2, 63, 64, 65, 4095, 4096, 4097, 8193, 262145};
    int differs = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        int64_t slots = n, m = n;
        while (m > 1) {
            m = (m + 63) / 64;
            slots += m;
        }
        ck_assert_int_eq(mr_bn_tree_slots(n), slots);
        double *v = malloc(sizeof(double) * (size_t)(slots + 1));
        ck_assert_ptr_nonnull(v);
        uint64_t st = 77 + (uint64_t)n;
        double seq = 0.0;
        for (int64_t i = 0; i < n; i++) {
            v[i] = wide_value(&st);
            seq += v[i];
        }
        const double want = ref_tree(v, n);
        const double got = mr_bn_tree_total(v, 1, n);
        ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "n %lld: tree %.17g, want %.17g",
                      (long long)n, got, want);
        differs |= n > 64 && got != seq;
        free(v);
    }
    ck_assert_msg(differs, "the tree summed as the plain sequential sum at every size");
    ck_assert_int_eq(mr_bn_groups(0), 0);
    ck_assert_int_eq(mr_bn_groups(1), 1);
    ck_assert_int_eq(mr_bn_groups(MR_BN_GROUP_ROWS), 1);
    ck_assert_int_eq(mr_bn_groups(MR_BN_GROUP_ROWS + 1), 2);
}
END_TEST

/* The CPU layer's sums are the tree's: dbeta (= sum dy per channel, as a
 * float) at row counts that cross the blocks, the groups and a level
 * (1, 31, 32, 33, 2047, 2048, 2049, 64 * 32 * 64 + 1 rows), against float
 * partials of 32 rows in row order, their double group sums, and
 * ref_tree over the groups. */
START_TEST(cpu_sums_follow_the_tree) {
    static const int sizes[] = {1, 31, 32, 33, 2047, 2048, 2049, 64 * 32 * 64 + 1};
    enum { C = 2 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int M = sizes[k];
        bn_case t;
        bn_case_init(&t, (mr_shape){1, {C}}, M, 0);
        float *x = malloc(sizeof(float) * (size_t)M * C * 4);
        ck_assert_ptr_nonnull(x);
        float *y = x + (size_t)M * C, *dy = y + (size_t)M * C, *dx = dy + (size_t)M * C;
        uint64_t st = 5 + (uint64_t)M;
        for (int i = 0; i < M * C; i++) {
            x[i] = (float)wide_value(&st) * 1e-6f;
            dy[i] = (float)wide_value(&st) * 1e-6f;
        }
        mr_exec_ctx run = {.be = tu_cpu_backend(), .training = 1, .scratch = gc_dev(t.scratch)};
        ck_assert_int_eq(gc_forward(&t.l, &run, M, x, y), MR_OK);
        ck_assert_int_eq(gc_backward(&t.l, &run, M, x, y, dy, dx), MR_OK);
        const int64_t groups = (M + 2047) / 2048;
        double *gs = malloc(sizeof(double) * (size_t)groups);
        ck_assert_ptr_nonnull(gs);
        for (int ch = 0; ch < C; ch++) {
            for (int64_t g = 0; g < groups; g++) {
                gs[g] = 0.0;
                for (int64_t b = 64 * g; b < 64 * (g + 1) && 32 * b < M; b++) {
                    float f = 0.0f;
                    for (int64_t r = 32 * b; r < M && r < 32 * (b + 1); r++)
                        f += dy[r * C + ch];
                    gs[g] += f;
                }
            }
            const float want = (float)ref_tree(gs, groups);
            ck_assert_msg(memcmp(&t.g[1][ch], &want, sizeof want) == 0,
                          "%d rows, channel %d: dbeta %.9g, want %.9g", M, ch, (double)t.g[1][ch],
                          (double)want);
        }
        free(gs);
        free(x);
        mr_layer_destroy(&t.l);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("batchnorm");
    TCase *tc = tcase_create("batchnorm");
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, statistics_and_inference);
    tcase_add_test(tc, sync_matches_one_replica);
    tcase_add_test(tc, sync_failure_sets_status);
    tcase_add_test(tc, empty_batch_keeps_moving_statistics);
    tcase_add_test(tc, row_blocks);
    tcase_add_test(tc, tree_levels);
    tcase_add_test(tc, cpu_sums_follow_the_tree);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
