/* test_strategy_gpu.c: the strategy on GPU replicas (meson test
 * `strategy_gpu`, CUDA builds only): one CUDA context per replica, joined
 * by the NCCL communicator.
 *
 *   - 2 GPUs x batch B == 1 GPU x 2B (the same .cfg, global_batch=2B) after
 *     10 steps of SGD with momentum and of Adam, within SU_BOUND: as in
 *     test_strategy.c the only difference is the order of float additions
 *     (cuBLAS/cuDNN over B rows vs 2B, and NCCL's sum over two replicas);
 *   - 1 GPU == 1 CPU replica on the same data and seed, within GPU_CPU_BOUND
 *     (an MLP, a CNN, and SyncBN with dropout, in both);
 *   - replicas on 2 GPUs hold the same bits: --check-sync after every step
 *     passes, the replicas' weights copied to the host are equal, and a
 *     perturbed replica is caught and named;
 *   - synthetic batches the GPUs make themselves train to the bits of the
 *     same examples converted on the host and uploaded;
 *   - a GPU convolution's kernel lives on the device as cuDNN's KRSC and
 *     crosses to and from the host in Keras's HWIO (mr_model_read,
 *     mr_model_write, mr_layer_init): params_hash is the CPU's.
 *
 * GPU_CPU_BOUND: the two runs do the same arithmetic in other orders and
 * with other roundings: cuBLAS and OpenBLAS split their dot products
 * differently, cuDNN's convolution is not im2col + GEMM, nvcc contracts a*b+c
 * into FMAs, and CUDA's expf/logf differ from glibc's by an ulp or two. One
 * step's gradients then differ by ~1e-6 relative (more terms than between
 * 1 and 2 replicas of one device kind, whose bound is SU_BOUND = 2e-5 over
 * 20 steps); SGD carries it forward linearly, Adam's 1/sqrt(v) can amplify
 * it on tiny gradient components. 1e-4 (5 x SU_BOUND, over 10 steps) leaves
 * room for that, while a semantic error (a wrong normalisation, a missing
 * bias gradient, a transposed kernel) moves the weights by 1e-3 or more
 * after one step.
 *
 * Without a GPU this prints "SKIP: no GPU: <reason>" and exits 77 (meson's
 * SKIP); with one GPU the 2-GPU cases print "SKIP: needs 2 GPUs, 1 visible"
 * and the 1-GPU case runs. Check runs without fork: discovery has
 * initialised the CUDA runtime, which a forked child cannot use. Every
 * assertion is on the test's thread (the replica threads only return
 * statuses). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backends.h"
#include "backends/gpu_list.h"
#include "strategies/check_sync.h"
#include "strategies/strategy.h"
#include "tests/strategyutil.h"
#include "tests/testutil.h"

#define GPU_CPU_BOUND 1e-4

/* su_train on replicas of `kind` (ordinals 0..replicas-1), one epoch, seed
 * 5: replica 0's parameters and state copied to the host, after checking
 * that every replica holds the same bits. */
static float *train(const char *kind, su_run o, int64_t *np, mr_status *status, mr_error *err) {
    o.kind = kind;
    return su_train(&o, np, NULL, status, err);
}

static float *train_ok(const char *kind, su_run o, int64_t *np) {
    o.kind = kind;
    return su_train_ok(&o, np, NULL);
}

/* su_bn_text without the convolution's bias. A bias that feeds batch
 * normalisation is removed again by the mean: its gradient is zero but for
 * rounding, which differs between devices (and between 1 and 2 replicas),
 * and Adam divides by the root of its running square, so it turns that
 * noise into steps of the full learning rate, different on each side. The
 * comparison would then measure rounding noise amplified to 1e-3..1e-2,
 * not the kernels. Keras users drop this bias for the same reason. */
static const char *bn_text = "[net]\nbatch=4\nlr_scaling=none\nseed=5\n%s\n"
                             "[data]\ntrain_images=a\ntrain_labels=b\n"
                             "[input]\nshape=6,6,1\n"
                             "[conv2d]\nfilters=4\nsize=3\nuse_bias=0\n[batchnorm]\nsync=1\n"
                             "[activation]\nactivation=relu\n[dropout]\nrate=0.3\n[flatten]\n"
                             "[dense]\nunits=4\nactivation=softmax\n";

/* The models: every layer kind of test_strategy.c, SyncBN and dropout
 * (whose masks follow the global sample position) included, and a residual
 * graph (its gradient sums on the device: models/model.c). */
static const struct {
    const char *name, **text;
} models[] = {
    {"mlp", &su_mlp_text}, {"cnn", &su_cnn_text}, {"syncbn", &bn_text}, {"residual", &su_res_text}};
#define N_MODELS (int)(sizeof models / sizeof models[0])

/* [net] lines: SGD with momentum and class weights (opt 0: the GPU's
 * loss kernel weighs each example) or Adam (1), and a fixed global batch. */
static void net_lines(char *buf, size_t n, int opt, int global_batch) {
    snprintf(buf, n, "%s\nglobal_batch=%d%s", opt ? su_adam : su_sgd, global_batch,
             opt ? "" : "\nclass_weight=0.5,2,0,1.25");
}

/* 2 GPUs x B == 1 GPU x 2B: the same .cfg (global_batch = 2B), 10 steps. */
START_TEST(two_gpus_equal_one_gpu_at_twice_the_batch) {
    const int B = 4;
    for (int i = 0; i < N_MODELS; i++)
        for (int opt = 0; opt < 2; opt++) {
            char extra[256];
            net_lines(extra, sizeof extra, opt, 2 * B);
            su_run two = {.text = *models[i].text,
                          .net_extra = extra,
                          .replicas = 2,
                          .batch = B,
                          .n = 20 * B};
            su_run one = two;
            one.replicas = 1, one.batch = 2 * B;
            int64_t na, nb;
            float *a = train_ok("gpu", two, &na);
            float *b = train_ok("gpu", one, &nb);
            ck_assert_int_eq(na, nb);
            double d = tu_rel_diff(a, b, (size_t)na);
            printf("2 GPUs vs 1 (%s, %s): relative difference %g\n", models[i].name,
                   opt ? "adam" : "sgd", d);
            ck_assert_msg(d < SU_BOUND, "%s, %s: relative difference %g", models[i].name, extra, d);
            free(a), free(b);
        }
}
END_TEST

/* 1 GPU == 1 CPU replica on the same data, seed and batch, 10 steps. */
START_TEST(one_gpu_equals_the_cpu) {
    const int B = 8;
    for (int i = 0; i < N_MODELS; i++)
        for (int opt = 0; opt < 2; opt++) {
            char extra[256];
            net_lines(extra, sizeof extra, opt, B);
            su_run o = {.text = *models[i].text,
                        .net_extra = extra,
                        .replicas = 1,
                        .batch = B,
                        .n = 10 * B};
            int64_t na, nb;
            float *a = train_ok("gpu", o, &na), *b = train_ok("cpu", o, &nb);
            ck_assert_int_eq(na, nb);
            double d = tu_rel_diff(a, b, (size_t)na);
            printf("1 GPU vs CPU (%s, %s): relative difference %g\n", models[i].name,
                   opt ? "adam" : "sgd", d);
            ck_assert_msg(d < GPU_CPU_BOUND, "%s, %s: relative difference %g", models[i].name,
                          extra, d);
            free(a), free(b);
        }
}
END_TEST

/* --synthetic on GPUs: the batches the GPUs make from the example ids
 * (synthetic_cuda.cu) train to the bits of the same examples converted on
 * the host and uploaded, over 2 epochs with validation. */
START_TEST(synthetic_batches_made_on_the_gpus) {
    for (int i = 0; i < N_MODELS; i++) {
        su_run o = {.text = *models[i].text,
                    .net_extra = su_adam,
                    .replicas = 2,
                    .batch = 4,
                    .n = 70,
                    .epochs = 2,
                    .n_val = 13,
                    .synthetic = 1};
        int64_t na, nb;
        float *a = train_ok("gpu", o, &na);
        o.synthetic = 2;
        float *b = train_ok("gpu", o, &nb);
        ck_assert_int_eq(na, nb);
        ck_assert_msg(memcmp(a, b, sizeof(float) * (size_t)na) == 0,
                      "%s: made on the GPUs != uploaded", models[i].name);
        free(a), free(b);
    }
}
END_TEST

/* Replicas on 2 GPUs stay bitwise identical: --check-sync after every step
 * passes (train also compares the replicas' weights on the host), and it
 * names the replica a perturbation made diverge. */
START_TEST(two_gpus_stay_in_sync) {
    su_run o = {.text = su_cnn_text,
                .net_extra = su_adam,
                .replicas = 2,
                .batch = 4,
                .n = 83, /* a partial last batch too */
                .check_sync = 1};
    int64_t np;
    free(train_ok("gpu", o, &np));
    o.perturb = 5;
    mr_status st;
    mr_error err = {0};
    float *p = train("gpu", o, &np, &st, &err);
    ck_assert_int_eq(st, MR_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "step 5") && strstr(err.msg, "replica 1"), "%s", err.msg);
    free(p);
}
END_TEST

/* Gradient buckets started during backward (a bucket per layer, and the
 * default's) train to the bits of one all-reduce after backward on 2 and 3
 * GPUs (as far as there are): replica 0's parameters and state, which
 * params_hash hashes, compared byte for byte; SyncBN's collectives inside
 * the model run while buckets are in flight. */
START_TEST(buckets_do_not_change_the_bits) {
    const int count = tu_gpus()->count;
    const size_t buckets[] = {1, MR_BUCKETS_AUTO};
    for (int R = 2; R <= (count < 3 ? count : 3); R++)
        for (int i = 0; i < N_MODELS; i++) {
            char extra[256];
            net_lines(extra, sizeof extra, 1, 4 * R);
            su_run o = {.text = *models[i].text,
                        .net_extra = extra,
                        .replicas = R,
                        .batch = 4,
                        .n = 10 * 4 * R + 3}; /* a partial last batch too */
            int64_t na, nb;
            float *a = train_ok("gpu", o, &na);
            for (size_t k = 0; k < sizeof buckets / sizeof buckets[0]; k++) {
                o.bucket_floats = buckets[k];
                float *b = train_ok("gpu", o, &nb);
                ck_assert_int_eq(na, nb);
                ck_assert_msg(memcmp(a, b, sizeof(float) * (size_t)na) == 0,
                              "%s on %d GPUs: buckets of %s floats changed the weights",
                              models[i].name, R, k ? "the default" : "1");
                free(b);
            }
            printf("%s on %d GPUs: the same bits with and without buckets\n", models[i].name, R);
            free(a);
        }
}
END_TEST

/* fashion_cnn.cfg's model on be, weights from seed 3 (batch 4). */
static void cnn_on(mr_backend *be, mr_config *cfg, mr_model *m) {
    mr_error err = {0};
    ck_assert_msg(mr_model_init(m, be, cfg, 4, 3, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init_weights(m, 3, &err) == MR_OK, "%s", err.msg);
}

/* The conv kernel (HWIO (K, F) on the host) is KRSC (F, K) in the GPU's
 * memory, and every crossing converts: the initial weights, params_hash
 * (read in pieces), a write that starts inside the kernel and ends in the
 * bias, and the reads of it. */
START_TEST(conv_kernel_krsc_on_the_gpu) {
    char *path = tu_source_path("models/configs/fashion_cnn.cfg");
    char *text = tu_read_file(path, NULL);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, path, NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    mr_backend *gbe = NULL, *cbe = NULL;
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_find("gpu"), 0, &gbe, &err), MR_OK);
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_find("cpu"), 0, &cbe, &err), MR_OK);
    mr_model g, c;
    cnn_on(gbe, &cfg, &g);
    cnn_on(cbe, &cfg, &c);
    const mr_layer *conv = &g.layers[0];
    ck_assert_int_eq(conv->cfg->kind, MR_LAYER_CONV2D);
    ck_assert_int_eq(mr_layer_device_order(conv, 0, 0, NULL, NULL), 1);
    ck_assert_int_eq(mr_layer_device_order(conv, 1, 0, NULL, NULL), 0); /* the bias */
    ck_assert_int_eq(mr_layer_device_order(&c.layers[0], 0, 0, NULL, NULL), 0);
    const int64_t F = conv->cfg->filters, K = conv->w[0].size / F, off = conv->w[0].offset;
    /* the device's bytes: the CPU's HWIO kernel transposed */
    const float *hwio, *bias; /* the CPU's: views of its memory */
    ck_assert_int_eq(mr_model_read(&c, c.layers[0].w[0].data, (size_t)(K * F), &hwio, &err), MR_OK);
    ck_assert_int_eq(mr_model_read(&c, c.layers[0].w[1].data, (size_t)F, &bias, &err), MR_OK);
    float *raw = malloc(sizeof(float) * (size_t)(K * F));
    ck_assert_int_eq(mr_backend_to_host(gbe, raw, conv->w[0].data, sizeof(float) * K * F, &err),
                     MR_OK);
    for (int64_t k = 0; k < K; k++)
        for (int64_t f = 0; f < F; f++)
            ck_assert(raw[f * K + k] == hwio[k * F + f]);
    /* reads that end and start inside the kernel (strategyutil's to_host
     * reads in pieces of the staging's size) */
    for (int64_t cut = 1; cut < K * F; cut += K * F / 3) {
        const float *part;
        ck_assert_int_eq(mr_model_read(&g, mr_dfloat_at_c(g.params, off), (size_t)cut, &part, &err),
                         MR_OK);
        for (int64_t i = 0; i < cut; i++)
            ck_assert_msg(part[i] == hwio[i], "cut %lld: float %lld", (long long)cut, (long long)i);
        ck_assert_int_eq(mr_model_read(&g, mr_dfloat_at_c(g.params, off + cut),
                                       (size_t)(K * F - cut), &part, &err),
                         MR_OK);
        for (int64_t i = cut; i < K * F; i++)
            ck_assert_msg(part[i - cut] == hwio[i], "cut %lld: float %lld", (long long)cut,
                          (long long)i);
    }
    uint64_t hg, hc;
    ck_assert_int_eq(mr_params_hash(&g, &hg, &err), MR_OK);
    ck_assert_int_eq(mr_params_hash(&c, &hc, &err), MR_OK);
    ck_assert_uint_eq(hg, hc);
    /* Keras-order floats over [off + 5, off + K*F + 3): the kernel's tail and the bias's head */
    const int64_t a = off + 5, n = K * F - 2;
    float *host = mr_model_host_for(&g, mr_dfloat_at(g.params, a));
    for (int64_t i = 0; i < n; i++)
        host[i] = (float)i + 0.5f;
    ck_assert_int_eq(mr_model_write(&g, mr_dfloat_at(g.params, a), host, (size_t)n, &err), MR_OK);
    const float *back;
    ck_assert_int_eq(
        mr_model_read(&g, mr_dfloat_at_c(g.params, off), (size_t)(K * F + F), &back, &err), MR_OK);
    for (int64_t i = 0; i < K * F + F; i++) {
        const float want = i >= 5 && i < 5 + n ? (float)(i - 5) + 0.5f
                           : i < K * F         ? hwio[i]
                                               : bias[i - K * F];
        ck_assert_msg(back[i] == want, "float %lld: %g, not %g", (long long)i, (double)back[i],
                      (double)want);
    }
    ck_assert_int_eq(mr_backend_to_host(gbe, raw, conv->w[0].data, sizeof(float) * K * F, &err),
                     MR_OK);
    ck_assert(raw[(F - 1) * K + (K - 1)] == (float)(K * F - 1 - 5) + 0.5f); /* KRSC's last */
    free(raw);
    mr_model_free(&g), mr_model_free(&c);
    mr_backend_destroy(gbe), mr_backend_destroy(cbe);
    mr_config_free(&cfg);
    free(text), free(path);
}
END_TEST

int main(void) {
    const mr_gpu_list *gl = tu_gpus();
    if (gl->count == 0) {
        printf("SKIP: no GPU: %s\n", gl->reason[0] ? gl->reason : "none visible");
        return 77; /* meson's SKIP */
    }
    Suite *s = suite_create("strategy_gpu");
    TCase *tc = tcase_create("strategy_gpu");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, one_gpu_equals_the_cpu);
    tcase_add_test(tc, conv_kernel_krsc_on_the_gpu);
    if (gl->count >= 2) {
        tcase_add_test(tc, two_gpus_equal_one_gpu_at_twice_the_batch);
        tcase_add_test(tc, two_gpus_stay_in_sync);
        tcase_add_test(tc, synthetic_batches_made_on_the_gpus);
        tcase_add_test(tc, buckets_do_not_change_the_bits);
    } else {
        printf("SKIP: needs 2 GPUs, %d visible (two_gpus_equal_one_gpu_at_twice_the_batch, "
               "two_gpus_stay_in_sync, synthetic_batches_made_on_the_gpus)\n",
               gl->count);
    }
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* CUDA is initialised in this process */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
