/* test_nocopy_gpu.c: a training step on a GPU copies no device memory to
 * device memory (meson test `nocopy_gpu`, emulated GPUs only): every
 * layer writes its output and its inputs' gradients itself (the
 * [activation] layer reads x and writes y, [add]'s backward writes both
 * gradients in one pass, BN+ReLU and Add+ReLU fused, Conv2D keeps gelu's z
 * from the pass that writes y). Counted here by this executable's own
 * cudaMemcpyAsync, which the backend (linked in statically) calls instead
 * of the runtime's and which passes every call on to it
 * (dlsym(RTLD_NEXT): the emulator's libcudart; the dynamic linker lets an
 * executable's definition win). A real CUDA runtime may be linked
 * statically, so only the emulated build has this test.
 *
 *   - the small models of strategyutil.h with every kind of the shipped
 *     configs' layers (MLP, CNN, BN + ReLU and an unfused [activation], a
 *     residual graph with Add + ReLU and a plain Add) train an epoch on one
 *     GPU with no device-to-device copy at all;
 *   - on a GPU the model fuses those ReLUs as on the CPU (relu_fused on the
 *     BN or Add, the [activation] fused), the Conv2D's not;
 *   - the count is real: a linear [activation] (the identity, which the
 *     model cannot skip) is a copy each way, and shows in it.
 *
 * Without a GPU this prints "SKIP: no GPU: <reason>" and exits 77. (The
 * build defines _GNU_SOURCE: RTLD_NEXT.) */
#include <check.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backends.h"
#include "backends/gpu_list.h"
#include "models/model.h"
#include "strategies/strategy.h"
#include "tests/strategyutil.h"
#include "tests/testutil.h"

static atomic_long d2d_copies; /* device-to-device cudaMemcpyAsync calls so far */

typedef cudaError_t (*memcpy_async_fn)(void *, const void *, size_t, enum cudaMemcpyKind,
                                       cudaStream_t);

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
    static _Atomic(memcpy_async_fn) real;
    memcpy_async_fn f = atomic_load(&real);
    if (f == NULL) {
        f = (memcpy_async_fn)dlsym(RTLD_NEXT, "cudaMemcpyAsync");
        if (f == NULL) return cudaErrorUnknown;
        atomic_store(&real, f);
    }
    if (kind == cudaMemcpyDeviceToDevice) atomic_fetch_add(&d2d_copies, 1);
    return f(dst, src, count, kind, stream);
}

/* A chain with a ReLU [activation] after a convolution (its own pass: a
 * Conv2D does not fuse one) and one after a BatchNormalization (fused),
 * without dropout; `act` is the second activation's name. */
static const char *chain_text = "[net]\nbatch=4\nlr_scaling=none\nseed=5\n%s\n"
                                "[data]\ntrain_images=a\ntrain_labels=b\n"
                                "[input]\nshape=6,6,1\n"
                                "[conv2d]\nfilters=4\nsize=3\n[activation]\nactivation=relu\n"
                                "[conv2d]\nfilters=4\nsize=3\nuse_bias=0\n[batchnorm]\n"
                                "[activation]\nactivation=%s\n[flatten]\n"
                                "[dense]\nunits=4\nactivation=softmax\n";

/* The device-to-device copies of one epoch of `text` on one GPU, every
 * step eager ([net] cuda_graphs = 0): a replayed CUDA graph makes no host
 * call to count, and records the calls of the eager step. */
static long copies_of(const char *text) {
    char extra[512];
    snprintf(extra, sizeof extra, "%s\ncuda_graphs=0", su_adam);
    su_run o = {
        .text = text, .net_extra = extra, .replicas = 1, .batch = 4, .n = 6 * 4, .kind = "gpu"};
    const long before = atomic_load(&d2d_copies);
    int64_t np;
    free(su_train_ok(&o, &np, NULL));
    return atomic_load(&d2d_copies) - before;
}

/* chain_text with its second activation named, into buf */
static const char *chain(char *buf, size_t n, const char *act) {
    /* the [net] lines stay "%s" for su_train */
    snprintf(buf, n, chain_text, "%s", act);
    return buf;
}

START_TEST(a_step_copies_nothing) {
    char relu[1024];
    const struct {
        const char *name, *text;
    } models[] = {{"mlp", su_mlp_text},
                  {"cnn", su_cnn_text},
                  {"conv, relu, conv, BN + relu", chain(relu, sizeof relu, "relu")},
                  {"residual", su_res_text}};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        long n = copies_of(models[i].text);
        printf("%s: %ld device-to-device copies in an epoch\n", models[i].name, n);
        ck_assert_msg(n == 0, "%s: %ld device-to-device copies", models[i].name, n);
    }
}
END_TEST

START_TEST(the_count_sees_a_copy) {
    char linear[1024];
    long n = copies_of(chain(linear, sizeof linear, "linear"));
    printf("a linear [activation]: %ld device-to-device copies in an epoch\n", n);
    /* forward and backward of each of the 6 steps at least */
    ck_assert_msg(n >= 12, "%ld device-to-device copies", n);
}
END_TEST

/* The layers of `text` on a GPU context (gpu:0) as fused[] ('R':
 * relu_fused, 'F': a fused activation, '.' neither, one a layer). */
static void fusion_of(const char *text, char *fused) {
    char cfg_text[2048];
    snprintf(cfg_text, sizeof cfg_text, text, su_sgd);
    mr_config cfg;
    mr_model m;
    mr_backend *be = NULL;
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(cfg_text, "t.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_backend_create(mr_backend_kind_find("gpu"), 0, &be, &err) == MR_OK, "%s",
                  err.msg);
    ck_assert_msg(mr_model_init(&m, be, &cfg, 4, 0, &err) == MR_OK, "%s", err.msg);
    for (int i = 0; i < m.n_layers; i++)
        fused[i] = m.layers[i].fused ? 'F' : m.layers[i].relu_fused ? 'R' : '.';
    fused[m.n_layers] = '\0';
    mr_model_free(&m);
    mr_backend_destroy(be);
    mr_config_free(&cfg);
}

START_TEST(relus_fuse_into_bn_and_add) {
    char text[1024], f[MR_MAX_LAYERS + 1];
    /* conv, relu (its own pass), conv, BN (R), relu (F), flatten, dense */
    fusion_of(chain(text, sizeof text, "relu"), f);
    ck_assert_str_eq(f, "...RF..");
    /* stem, conv, BN, add (R), relu "block" (F), zeropad, down, 1x1 conv,
     * add (no ReLU after it), pool, dense */
    fusion_of(su_res_text, f);
    ck_assert_str_eq(f, "...RF......");
}
END_TEST

int main(void) {
    const mr_gpu_list *gl = tu_gpus();
    if (gl->count == 0) {
        printf("SKIP: no GPU: %s\n", gl->reason[0] ? gl->reason : "none visible");
        return 77; /* meson's SKIP */
    }
    Suite *s = suite_create("nocopy_gpu");
    TCase *tc = tcase_create("nocopy_gpu");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, a_step_copies_nothing);
    tcase_add_test(tc, the_count_sees_a_copy);
    tcase_add_test(tc, relus_fuse_into_bn_and_add);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* CUDA is initialised in this process */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
