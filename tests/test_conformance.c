/* test_conformance.c: backend conformance: every kernel of a backend under
 * test against the CPU's, on the same inputs.
 *
 * Each layer kind (models/config.h, mr_layer_kind) in each configuration
 * that the kernels treat differently runs on two contexts: the reference
 * CPU context and the context under test. Inputs, weights, dy and the
 * starting weight gradients are made on the host (Philox, deterministic),
 * copied to each context (mr_backend_to_device), and every result is
 * copied back (mr_backend_to_host) and compared: forward y (and BN's moving
 * statistics), backward dx and the weight gradients. The gradients start
 * from the same nonzero values on both sides, since backward ADDS into them
 * (layer.h); a second pass (forward at a smaller batch, backward with dx
 * NULL, as for the first layer) adds again. The losses (every kind, fused
 * softmax and not: dy, the loss sum and the count of correct argmaxes) and
 * the optimizer updates (SGD plain, momentum, Nesterov; Adam: weights and
 * slots over three steps) are compared the same way, and the check for NaN
 * and Inf (on_nan) gives the expected verdicts. Weight initialisation
 * (mr_layer_init: made on the host, copied) and a synthetic batch (the
 * input kernel; the reference's against mr_dataset_fill) must give the
 * same bits.
 *
 * Contexts under test:
 *   no argument: a CPU context whose host_memory flag is cleared
 *     (backend.h), so every host access copies as for a GPU; it runs in
 *     every build and must agree bit for bit. A self-test perturbs results
 *     to show that the comparison reports a difference just above its
 *     bound and passes one below it.
 *   KIND (a device kind of the build's table, backends/backends.h, with
 *     devices of its own: "gpu"): each of its visible devices, meson test
 *     conformance_cuda. With none, the run prints
 *     "SKIP: no GPU: <reason>" and exits 77 (meson's SKIP). The CUDA
 *     runtime does not survive fork() once initialised (discovery does),
 *     so these tests run without Check's fork.
 * The kernels are reached only through the kernel-table API (mr_layer_*,
 * mr_loss_compute, mr_optimizer_step); an empty table entry is reported
 * as a failure, not called.
 *
 * Error bound. Both sides compute in FP32 with FMA-only math (cuBLAS
 * pedantic, cuDNN CUDNN_FMA_MATH: no TF32), so they differ only in the
 * order of operations (summation order and blocking, FMA contraction) and
 * in the last bits of the transcendental functions (CUDA's expf/tanhf are
 * within 2 ulp, glibc's within 1). A K-term sum of float terms of random
 * sign rounds like a random walk: its error is about u * sqrt(K) times the
 * size of the result (u = FLT_EPSILON / 2; the worst case K * u needs
 * every rounding in the same direction). The two sides round independently
 * (x sqrt(2)); the largest of up to ~2000 elements compared at once is
 * about 4 standard deviations; a few rounded elementwise operations follow
 * (bias, activation, 1/norm: ~1 ulp each). We normalise by the largest
 * reference magnitude, max_i |a_i - b_i| / (max_i |b_i| + tiny), so an
 * element that cancels to near zero is judged against the tensor's scale.
 * Hence the bound tol(K) = 8 * FLT_EPSILON * sqrt(K + 16), K the longest
 * reduction in the case (conv: max(kh*kw*C, kh*kw*F, B*OH*OW); dense:
 * max(in, units, B); BN: the B*H*W values per channel; layer norm:
 * max(C, B*H*W), a row and the rows of gamma's gradient; softmax: its
 * width): 8 * FLT_EPSILON = 16u covers sqrt(2) * 4 with a factor ~3 to
 * spare, and the +16 gives elementwise results (K = 1) a floor of 32
 * FLT_EPSILON ~ 3.8e-6, several ulp for the transcendental functions. For
 * the sizes here (K <= 100) tol lies between 3.8e-6 and 1.0e-5. Checked:
 * float dot products of K = 13..256 random terms, summed in order, in
 * reverse with fmaf and four-way split with fmaf, differ by at most 0.08
 * tol (worst of 300 draws each). A real bug (a wrong index, padding on
 * the wrong side, an overwrite instead of an accumulation, a missing term,
 * BN's unbiased variance) gives 1e-3 .. 1. Results that are copies or
 * selections of the same bits (Flatten, Dropout: the masks come from the
 * same Philox words; weight init; argmax counts) compare exactly. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/kernels.h"
#include "backends/gpu_list.h"
#include "runtime/dataset.h"
#include "runtime/rng.h"
#include "tests/gradcheck.h"
#include "backends/backends.h"
#include "tests/testutil.h"

#define TOL_C       8.0 /* tol(K) = TOL_C * FLT_EPSILON * sqrt(K + TOL_FLOOR_K): see above */
#define TOL_FLOOR_K 16.0
#define TINY        1e-30 /* keeps an all-zero reference from dividing by zero */
#define MAX_REPORTS 40    /* failure lines printed per test */

static double tol_for(double k) {
    return TOL_C * FLT_EPSILON * sqrt(k + TOL_FLOOR_K);
}

/* Set by main: the GPUs (argument "cuda") or the CPU copy-mode context. */
/* The device kind under test (its name the argument), or NULL: the CPU
 * context that copies. */
static const mr_backend_kind *dut_kind;

/* One test's pair of contexts and what its comparisons found. */
typedef struct cf {
    mr_backend *ref, *dut; /* reference CPU context, context under test */
    char dev[320];         /* the context under test, for messages */
    char tag[96];          /* the case being run */
    int compared, failed;
    double worst;     /* largest error / tol over the toleranced comparisons */
    char first[1024]; /* the first failure */
    /* Self-test: > 0 moves one element of each result under test before it
     * is compared: by perturb * tol of the tensor's scale (toleranced), by
     * one ulp when perturb >= 1 (exact); an int count by 1 when >= 1. */
    double perturb;
    int quiet; /* 1: failures are counted, not printed (the self-test expects them) */
} cf;

static void cf_fail(cf *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void cf_fail(cf *h, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (h->failed == 0) snprintf(h->first, sizeof h->first, "%s: %s: %s", h->dev, h->tag, msg);
    if (!h->quiet && h->failed < MAX_REPORTS)
        fprintf(stderr, "FAIL %s: %s: %s\n", h->dev, h->tag, msg);
    h->failed++;
}

/* 1 when st is MR_OK; else records "what on SIDE: message". */
static int cf_ok(cf *h, int side, mr_status st, const mr_error *err, const char *what) {
    if (st == MR_OK) return 1;
    cf_fail(h, "%s on the %s: %s (%s)", what, side ? "context under test" : "reference",
            err->msg[0] ? err->msg : "no message", mr_status_name(st));
    return 0;
}

/* Compares the tested context's n floats `dut` with the reference's `ref`:
 * bit for bit when tol is 0, else the normalised error against tol. `dut`
 * is the caller's copy (the self-test perturbs it). */
static void cf_check(cf *h, const char *what, float *dut, const float *ref, size_t n, double tol) {
    h->compared++;
    if (n == 0) return;
    const size_t at = n / 2;
    double maxb = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)ref[i]) > maxb) maxb = fabs((double)ref[i]);
    if (tol == 0.0 && h->perturb >= 1.0) dut[at] = nextafterf(dut[at], INFINITY);
    if (tol > 0.0 && h->perturb > 0.0) dut[at] = (float)(dut[at] + h->perturb * tol * maxb);
    if (tol == 0.0) {
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&dut[i], &ref[i], sizeof(float)) != 0 && bad++ == 0) first = i;
        if (bad > 0)
            cf_fail(h, "%s: %zu of %zu differ (must be bit for bit), first [%zu]: %.9g vs %.9g",
                    what, bad, n, first, dut[first], ref[first]);
        return;
    }
    double maxd = 0.0;
    size_t worst = 0, nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(dut[i])) nonfinite++;
        double d = fabs((double)dut[i] - (double)ref[i]);
        if (d > maxd) maxd = d, worst = i;
    }
    const double e = maxd / (maxb + TINY);
    if (nonfinite > 0 || !(e <= tol))
        cf_fail(h, "%s: error %.3g > tol %.3g (%zu non-finite), worst [%zu]: %.9g vs %.9g", what, e,
                tol, nonfinite, worst, dut[worst], ref[worst]);
    if (e / tol > h->worst) h->worst = e / tol;
}

static void cf_check_double(cf *h, const char *what, double dut, double ref, double tol) {
    h->compared++;
    if (h->perturb > 0.0) dut += h->perturb * tol * fabs(ref);
    const double e = fabs(dut - ref) / (fabs(ref) + TINY);
    if (!(e <= tol))
        cf_fail(h, "%s: %.12g vs %.12g: error %.3g > tol %.3g", what, dut, ref, e, tol);
    if (e / tol > h->worst) h->worst = e / tol;
}

static void cf_check_int(cf *h, const char *what, int64_t dut, int64_t ref) {
    h->compared++;
    if (h->perturb >= 1.0) dut++;
    if (dut != ref)
        cf_fail(h, "%s: %lld vs %lld (must be equal)", what, (long long)dut, (long long)ref);
}

/* The reference CPU context and context `target` under test (a device of
 * dut_kind; else a CPU context with host_memory cleared). 0 on failure
 * (recorded). */
static int cf_begin(cf *h, int target) {
    memset(h, 0, sizeof *h);
    snprintf(h->tag, sizeof h->tag, "contexts");
    mr_error err = {0};
    if (!cf_ok(h, 0, mr_backend_create(mr_backend_kind_cpu(), 0, &h->ref, &err), &err, "create"))
        return 0;
    if (dut_kind != NULL) {
        const mr_gpu_list *g = mr_backend_kind_devices(dut_kind);
        snprintf(h->dev, sizeof h->dev, "%s:%d (%s)", dut_kind->name, target,
                 target < g->count ? g->gpu[target].name : "?");
        return cf_ok(h, 1, mr_backend_create(dut_kind, target, &h->dut, &err), &err, "create");
    }
    snprintf(h->dev, sizeof h->dev, "cpu:0 (host_memory cleared)");
    if (!cf_ok(h, 1, mr_backend_create(mr_backend_kind_cpu(), 0, &h->dut, &err), &err, "create"))
        return 0;
    h->dut->host_memory = 0; /* host code copies, as for a GPU */
    return 1;
}

/* Frees the contexts, prints the summary, fails the test on any failure. */
static void cf_end(cf *h, const char *group) {
    mr_backend_destroy(h->dut);
    mr_backend_destroy(h->ref);
    h->dut = h->ref = NULL;
    printf("conformance %s: %s: %d comparisons, %d failed, worst error %.3g of its bound\n", h->dev,
           group, h->compared, h->failed, h->worst);
    fflush(stdout);
    ck_assert_msg(h->failed == 0, "%d of %d comparisons failed; first: %s", h->failed, h->compared,
                  h->first);
}

/* n floats of device memory of be, a copy of src unless src is NULL (then
 * zeroed by the allocator); NULL on failure (recorded). */
static mr_dfloat *cf_upload(cf *h, int side, mr_backend *be, const float *src, size_t n) {
    mr_dfloat *p = mr_backend_alloc_floats(be, n > 0 ? n : 1);
    if (p == NULL) {
        cf_fail(h, "out of memory for %zu floats on the %s", n, side ? "context" : "reference");
        return NULL;
    }
    mr_error err = {0};
    if (src != NULL && n > 0 &&
        !cf_ok(h, side, mr_backend_to_device(be, p, src, sizeof(float) * n, &err), &err,
               "to_device")) {
        mr_backend_free(be, p);
        return NULL;
    }
    return p;
}

static int cf_put(cf *h, int side, mr_backend *be, mr_dfloat *dst, const float *src, size_t n) {
    mr_error err = {0};
    return cf_ok(h, side, mr_backend_to_device(be, dst, src, sizeof(float) * n, &err), &err,
                 "to_device");
}

static int cf_get(cf *h, int side, mr_backend *be, float *dst, const mr_dfloat *src, size_t n) {
    mr_error err = {0};
    return cf_ok(h, side, mr_backend_to_host(be, dst, src, sizeof(float) * n, &err), &err,
                 "to_host");
}

/* Downloads n floats from both sides (into a: under test, b: reference)
 * and compares them; 0 when a download failed (recorded). */
static int cf_compare(cf *h, const char *what, const mr_dfloat *dref, const mr_dfloat *ddut,
                      size_t n, double tol, float *a, float *b) {
    if (!cf_get(h, 0, h->ref, b, dref, n) || !cf_get(h, 1, h->dut, a, ddut, n)) return 0;
    cf_check(h, what, a, b, n, tol);
    return 1;
}

/* ---------------------------------------------------------------- layers */

/* One layer configuration. */
typedef struct lcase {
    char name[96];
    mr_layer_cfg cfg;
    mr_shape in;
    mr_shape in2; /* a merge's second input; rank 0: the shape of in */
    int batch;
    int training;   /* mr_exec_ctx.training */
    int backward;   /* run backward (training only: the model never does in inference) */
    int exact;      /* results are copies or selections: bit for bit */
    int logits_out; /* the last layer before a fused softmax + cross-entropy */
    int sync;       /* BN: mr_exec_ctx.sync_sum set, as one replica of a synced run */
    int relu_fused; /* a ReLU [activation] fused in (layer.h; kernels with fuses_relu) */
    float x_lo, x_hi;
    uint64_t seed;
} lcase;

/* One replica's sum over all replicas is its own buffer: nothing to add. */
static mr_status one_replica_sum(void *ctx, mr_dfloat *buf, size_t n) {
    (void)ctx, (void)buf, (void)n;
    return MR_OK;
}

/* The longest reduction of a case (the error bound's K, see the top). */
static double layer_k(const mr_layer *l, int batch) {
    const mr_layer_cfg *c = l->cfg;
    double k = 1.0;
    switch (c->kind) {
    case MR_LAYER_DENSE: /* x W over in, dy W^T over units (and softmax), dW over the batch */
        k = fmax(fmax(l->in.d[0], l->out.d[0]), batch);
        break;
    case MR_LAYER_CONV2D: { /* the window, the windows over an input pixel, dW over B*OH*OW */
        const double area = (double)c->size[0] * c->size[1];
        k = fmax(fmax(area * l->in.d[2], area * c->filters),
                 (double)batch * l->out.d[0] * l->out.d[1]);
        break;
    }
    case MR_LAYER_DEPTHWISE: /* the window (times M into dx), dW over B*OH*OW */
        k = fmax((double)c->size[0] * c->size[1] * c->depth_multiplier,
                 (double)batch * l->out.d[0] * l->out.d[1]);
        break;
    case MR_LAYER_ACTIVATION: /* softmax: its width (channels) */
    case MR_LAYER_SOFTMAX:
        k = l->in.d[l->in.rank - 1];
        break;
    case MR_LAYER_MAXPOOL:
    case MR_LAYER_AVGPOOL: /* the window; the windows that share an input cell */
        k = (double)c->size[0] * c->size[1];
        break;
    case MR_LAYER_GLOBALAVGPOOL: /* the H*W values of a channel */
        k = (double)l->in.d[0] * l->in.d[1];
        break;
    case MR_LAYER_BATCHNORM: /* the B*H*W values of a channel */
        k = (double)batch * (double)mr_shape_size(l->in) / l->in.d[l->in.rank - 1];
        break;
    case MR_LAYER_LAYERNORM: /* a row's C values; the gamma/beta gradients over the B*H*W rows */
        k = fmax(l->in.d[l->in.rank - 1],
                 (double)batch * (double)mr_shape_size(l->in) / l->in.d[l->in.rank - 1]);
        break;
    default:
        break;
    }
    return k;
}

/* Host values of weight i: trainable ones uniform in [-1, 1) (biases
 * nonzero, unlike the init), BN's gamma near 1, moving statistics of a
 * plausible size (variance positive). */
static void weight_values(const mr_weight *w, uint64_t seed, int i, float *out) {
    mr_rng_uniform(seed, 301, (uint32_t)i, 0, -1.0f, 1.0f, out, w->size);
    const int gamma = strcmp(w->name, "gamma") == 0,
              var = strcmp(w->name, "moving_variance") == 0 || strcmp(w->name, "variance") == 0;
    const float scale = strcmp(w->name, "moving_mean") == 0 ? 0.2f : 0.5f;
    for (int64_t j = 0; j < w->size; j++) {
        if (gamma || var)
            out[j] = 1.0f + 0.5f * out[j];
        else if (!w->trainable)
            out[j] *= scale;
    }
}

typedef struct side {
    mr_layer l;
    mr_dfloat *x, *y, *dy, *dx;
    mr_dfloat *x2, *dx2; /* [add]'s second input and its gradient */
    mr_dfloat *w[MR_MAX_WEIGHTS], *g[MR_MAX_WEIGHTS];
} side;

static mr_exec_ctx make_run(const lcase *c, mr_backend *be, int64_t sample_base, mr_error *err) {
    mr_exec_ctx r = {.be = be,
                     .training = c->training,
                     .seed = c->seed * 7919 + 17,
                     .step = 3,
                     .sample_base = sample_base,
                     .scratch = mr_backend_scratch(be),
                     .err = err};
    if (c->sync) r.sync_sum = one_replica_sum;
    return r;
}

/* Weight i of l (or its gradient) as l's device keeps it: keras itself,
 * or put into tmp in the device's order (mr_layer_device_order: a GPU
 * convolution's kernel is KRSC). */
static const float *device_order(const mr_layer *l, int i, const float *keras, float *tmp) {
    if (keras == NULL || !mr_layer_device_order(l, i, 1, keras, tmp)) return keras;
    return tmp;
}

/* cf_compare of weight i (or its gradient) of both sides, the context's
 * read back into Keras's order first (tmp: scratch of the weight's size). */
static int compare_weight(cf *h, const char *what, side *s, int i, const mr_dfloat *dref,
                          const mr_dfloat *ddut, double tol, float *a, float *b, float *tmp) {
    const size_t n = (size_t)s[0].l.w[i].size;
    if (!cf_get(h, 0, h->ref, b, dref, n) || !cf_get(h, 1, h->dut, a, ddut, n)) return 0;
    if (mr_layer_device_order(&s[1].l, i, 0, NULL, NULL)) {
        memcpy(tmp, a, sizeof(float) * n);
        mr_layer_device_order(&s[1].l, i, 0, tmp, a);
    }
    cf_check(h, what, a, b, n, tol);
    return 1;
}

/* Compares BN's moving statistics (the non-trainable weights). */
static void compare_state(cf *h, side *s, double tol, float *a, float *b, float *tmp,
                          const char *when) {
    char what[64];
    for (int i = 0; i < s[0].l.n_weights; i++) {
        if (s[0].l.w[i].trainable) continue;
        snprintf(what, sizeof what, "%s %s", s[0].l.w[i].name, when);
        compare_weight(h, what, s, i, s[0].w[i], s[1].w[i], tol, a, b, tmp);
    }
}

static void compare_grads(cf *h, side *s, double tol, float *a, float *b, float *tmp,
                          const char *when) {
    char what[64];
    for (int i = 0; i < s[0].l.n_weights; i++) {
        if (!s[0].l.w[i].trainable) continue;
        snprintf(what, sizeof what, "d%s %s", s[0].l.w[i].name, when);
        compare_weight(h, what, s, i, s[0].g[i], s[1].g[i], tol, a, b, tmp);
    }
}

/* Runs case c on both contexts and compares every result. */
static void run_layer(cf *h, const lcase *c) {
    side s[2];
    memset(s, 0, sizeof s);
    mr_backend *be[2] = {h->ref, h->dut};
    float *x = NULL, *x2 = NULL, *dy = NULL, *a = NULL, *b = NULL, *stage = NULL;
    const int merge = mr_layer_kind_merges(c->cfg.kind);
    float *hw[MR_MAX_WEIGHTS] = {0}, *hg[MR_MAX_WEIGHTS] = {0};
    mr_error err = {0};
    snprintf(h->tag, sizeof h->tag, "%s", c->name);
    const int batch = c->batch, max_batch = c->batch + 2;
    for (int k = 0; k < 2; k++) {
        mr_layer *l = &s[k].l;
        l->ops = mr_layer_ops_for(c->cfg.kind);
        l->cfg = &c->cfg;
        l->index = 2;
        l->in = c->in;
        l->in2 = c->in2.rank ? c->in2 : c->in; /* a merge's second input */
        l->logits_out = c->logits_out;
        l->relu_fused = c->relu_fused;
        snprintf(l->name, sizeof l->name, "%s", mr_layer_kind_name(c->cfg.kind));
        if (!cf_ok(h, k, mr_layer_setup(l, be[k], max_batch, "conformance.cfg", &err), &err,
                   "setup"))
            goto out;
    }
    const mr_layer_kernels *kern = s[1].l.kern;
    if (kern == NULL || kern->forward == NULL || (c->backward && kern->backward == NULL)) {
        cf_fail(h, "the %s kernel table has no %s for [%s]", h->dut->ops->name,
                kern && kern->forward ? "backward" : "forward", mr_layer_kind_name(c->cfg.kind));
        goto out;
    }
    const mr_layer *l0 = &s[0].l;
    const size_t nin = (size_t)(batch * mr_shape_size(l0->in));
    const size_t nin2 = merge ? (size_t)(batch * mr_shape_size(l0->in2)) : 0;
    const size_t nout = (size_t)(batch * mr_shape_size(l0->out));
    size_t nmax = nin > nout ? nin : nout, wmax = 1;
    for (int i = 0; i < l0->n_weights; i++)
        if ((size_t)l0->w[i].size > wmax) wmax = (size_t)l0->w[i].size;
    if (wmax > nmax) nmax = wmax;
    const double tol = c->exact ? 0.0 : tol_for(layer_k(l0, batch));
    x = malloc(sizeof(float) * nin);
    x2 = malloc(sizeof(float) * (nin2 ? nin2 : 1));
    dy = malloc(sizeof(float) * nout);
    a = malloc(sizeof(float) * nmax);
    b = malloc(sizeof(float) * nmax);
    stage = malloc(sizeof(float) * wmax);
    ck_assert(x && x2 && dy && a && b && stage);
    mr_rng_uniform(c->seed, 300, 0, 0, c->x_lo, c->x_hi, x, (int64_t)nin);
    mr_rng_uniform(c->seed, 300, 2, 0, c->x_lo, c->x_hi, x2, (int64_t)nin2);
    mr_rng_uniform(c->seed, 300, 1, 0, -1.0f, 1.0f, dy, (int64_t)nout);
    for (int i = 0; i < l0->n_weights; i++) {
        const mr_weight *w = &l0->w[i];
        hw[i] = malloc(sizeof(float) * (size_t)w->size);
        ck_assert(hw[i] != NULL);
        weight_values(w, c->seed, i, hw[i]);
        if (w->trainable) {
            /* nonzero starting gradients: backward must add to them */
            hg[i] = malloc(sizeof(float) * (size_t)w->size);
            ck_assert(hg[i] != NULL);
            mr_rng_uniform(c->seed, 302, (uint32_t)i, 0, -1.0f, 1.0f, hg[i], w->size);
        }
    }
    /* buffers, and the weights made by the init (host, then copied) */
    for (int k = 0; k < 2; k++) {
        mr_layer *l = &s[k].l;
        if (!cf_ok(h, k, mr_backend_reserve_scratch(be[k], l->scratch_floats, &err), &err,
                   "reserve_scratch"))
            goto out;
        if (!(s[k].x = cf_upload(h, k, be[k], x, nin)) ||
            !(s[k].y = cf_upload(h, k, be[k], NULL, nout)) ||
            !(s[k].dy = cf_upload(h, k, be[k], NULL, nout)) ||
            !(s[k].dx = cf_upload(h, k, be[k], NULL, nin)))
            goto out;
        if (merge) {
            if (!(s[k].x2 = cf_upload(h, k, be[k], x2, nin2)) ||
                !(s[k].dx2 = cf_upload(h, k, be[k], NULL, nin2)))
                goto out;
            l->x2 = s[k].x2;
            l->dx2 = s[k].dx2;
        }
        for (int i = 0; i < l->n_weights; i++) {
            if (!(s[k].w[i] = cf_upload(h, k, be[k], NULL, (size_t)l->w[i].size))) goto out;
            l->w[i].data = s[k].w[i];
            if (l->w[i].trainable) {
                if (!(s[k].g[i] = cf_upload(h, k, be[k], device_order(l, i, hg[i], stage),
                                            (size_t)l->w[i].size)))
                    goto out;
                l->w[i].grad = s[k].g[i];
            }
        }
        if (!cf_ok(h, k, mr_layer_init(l, c->seed, stage, &err), &err, "mr_layer_init")) goto out;
    }
    for (int i = 0; i < l0->n_weights; i++) {
        char what[64];
        snprintf(what, sizeof what, "init %s", l0->w[i].name);
        compare_weight(h, what, s, i, s[0].w[i], s[1].w[i], 0.0, a, b, stage);
        for (int k = 0; k < 2; k++)
            if (!cf_put(h, k, be[k], s[k].w[i], device_order(&s[k].l, i, hw[i], stage),
                        (size_t)l0->w[i].size))
                goto out;
    }
    /* forward */
    for (int k = 0; k < 2; k++) {
        mr_exec_ctx run = make_run(c, be[k], 5, &err);
        if (!cf_ok(h, k, mr_layer_forward(&s[k].l, &run, batch, s[k].x, s[k].y), &err, "forward"))
            goto out;
    }
    const int got_y = cf_compare(h, "forward y", s[0].y, s[1].y, nout, tol, a, b);
    if (got_y && c->cfg.kind == MR_LAYER_DROPOUT && c->training && c->cfg.rate > 0.0f) {
        /* the masks must be exercised: some elements dropped, some kept */
        size_t dropped = 0;
        for (size_t i = 0; i < nout; i++)
            dropped += b[i] == 0.0f && x[i] != 0.0f;
        if (dropped == 0 || dropped == nout)
            cf_fail(h, "the reference dropped %zu of %zu: no test of the mask", dropped, nout);
    }
    compare_state(h, s, tol, a, b, stage, "after forward");
    if (c->backward) {
        for (int k = 0; k < 2; k++) {
            mr_exec_ctx run = make_run(c, be[k], 5, &err);
            if (!cf_put(h, k, be[k], s[k].dy, dy, nout) ||
                !cf_ok(h, k,
                       mr_layer_backward(&s[k].l, &run, batch, s[k].x, s[k].y, s[k].dy, s[k].dx),
                       &err, "backward"))
                goto out;
        }
        cf_compare(h, "backward dx", s[0].dx, s[1].dx, nin, tol, a, b);
        if (merge) cf_compare(h, "backward dx2", s[0].dx2, s[1].dx2, nin2, tol, a, b);
        compare_grads(h, s, tol, a, b, stage, "(start + 1 backward)");
        /* a second micro-batch, smaller, elsewhere in the global batch; dx
         * NULL (a first layer): the gradients accumulate again */
        const int batch2 = batch > 1 ? batch - 1 : 1;
        const size_t nout2 = (size_t)(batch2 * mr_shape_size(l0->out));
        for (int k = 0; k < 2; k++) {
            mr_exec_ctx run = make_run(c, be[k], 5 + batch, &err);
            if (!cf_ok(h, k, mr_layer_forward(&s[k].l, &run, batch2, s[k].x, s[k].y), &err,
                       "forward (second pass)") ||
                !cf_put(h, k, be[k], s[k].dy, dy, nout2) ||
                !cf_ok(h, k,
                       mr_layer_backward(&s[k].l, &run, batch2, s[k].x, s[k].y, s[k].dy, NULL),
                       &err, "backward with dx NULL"))
                goto out;
        }
        cf_compare(h, "forward y (second pass)", s[0].y, s[1].y, nout2, tol, a, b);
        compare_state(h, s, tol, a, b, stage, "after the second forward");
        compare_grads(h, s, tol, a, b, stage, "(start + 2 backward)");
    }
    /* x is const: the kernels must not have used it as scratch */
    if (cf_get(h, 1, be[1], a, s[1].x, nin)) cf_check(h, "x unchanged", a, x, nin, 0.0);
out:
    for (int k = 0; k < 2; k++) {
        mr_layer_destroy(&s[k].l);
        mr_backend_free(be[k], s[k].x);
        mr_backend_free(be[k], s[k].y);
        mr_backend_free(be[k], s[k].dy);
        mr_backend_free(be[k], s[k].dx);
        mr_backend_free(be[k], s[k].x2);
        mr_backend_free(be[k], s[k].dx2);
        for (int i = 0; i < MR_MAX_WEIGHTS; i++) {
            mr_backend_free(be[k], s[k].w[i]);
            mr_backend_free(be[k], s[k].g[i]);
        }
    }
    for (int i = 0; i < MR_MAX_WEIGHTS; i++)
        free(hw[i]), free(hg[i]);
    free(x), free(x2), free(dy), free(a), free(b), free(stage);
}

/* A training case (forward and backward) of kind on input `in`. */
static lcase make_case(mr_layer_kind kind, mr_shape in, int batch, uint64_t seed) {
    lcase c;
    memset(&c, 0, sizeof c);
    c.cfg = gc_layer_cfg(kind);
    c.in = in;
    c.batch = batch;
    c.training = 1;
    c.backward = 1;
    c.x_lo = -1.0f;
    c.x_hi = 1.0f;
    c.seed = seed;
    return c;
}

static mr_shape img(int h, int w, int ch) {
    return (mr_shape){3, {h, w, ch}};
}

static mr_shape flat(int n) {
    return (mr_shape){1, {n, 0, 0}};
}

static const char *pad_name(mr_padding p) {
    return p == MR_PADDING_SAME ? "same" : "valid";
}

static void run_dense(cf *h) {
    static const struct {
        int in, units, batch;
        mr_activation act;
        int bias, logits;
    } cases[] = {
        {13, 6, 4, MR_ACTIVATION_LINEAR, 1, 0},  {13, 6, 4, MR_ACTIVATION_RELU, 1, 0},
        {13, 6, 4, MR_ACTIVATION_SIGMOID, 1, 0}, {13, 6, 4, MR_ACTIVATION_TANH, 1, 0},
        {13, 6, 4, MR_ACTIVATION_SOFTMAX, 1, 0}, {13, 6, 4, MR_ACTIVATION_LINEAR, 0, 0},
        {13, 6, 4, MR_ACTIVATION_RELU, 0, 0},    {13, 6, 4, MR_ACTIVATION_SOFTMAX, 1, 1},
        {70, 10, 7, MR_ACTIVATION_RELU, 1, 0},   {5, 33, 1, MR_ACTIVATION_TANH, 1, 0},
        {13, 6, 4, MR_ACTIVATION_ELU, 1, 0},     {13, 6, 4, MR_ACTIVATION_LEAKY_RELU, 1, 0},
        {13, 6, 4, MR_ACTIVATION_GELU, 1, 0},    {13, 6, 4, MR_ACTIVATION_SWISH, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lcase c = make_case(MR_LAYER_DENSE, flat(cases[i].in), cases[i].batch, 10 + i);
        c.cfg.units = cases[i].units;
        c.cfg.activation = cases[i].act;
        c.cfg.use_bias = cases[i].bias;
        c.logits_out = cases[i].logits;
        snprintf(c.name, sizeof c.name, "dense %d->%d %s%s%s B=%d", cases[i].in, cases[i].units,
                 mr_activation_name(cases[i].act), cases[i].bias ? "" : " no-bias",
                 cases[i].logits ? " logits_out" : "", cases[i].batch);
        run_layer(h, &c);
    }
}

static void run_activation(cf *h) {
    const mr_shape shapes[] = {img(3, 2, 5), flat(7)};
    for (int a = MR_ACTIVATION_LINEAR; a <= MR_ACTIVATION_SILU; a++)
        for (int si = 0; si < 2; si++) {
            lcase c = make_case(MR_LAYER_ACTIVATION, shapes[si], 3, 20 + (uint64_t)(a * 2 + si));
            c.cfg.activation = (mr_activation)a;
            snprintf(c.name, sizeof c.name, "activation %s rank %d",
                     mr_activation_name(c.cfg.activation), shapes[si].rank);
            run_layer(h, &c);
        }
    lcase c = make_case(MR_LAYER_ACTIVATION, flat(7), 3, 31);
    c.cfg.activation = MR_ACTIVATION_SOFTMAX;
    c.logits_out = 1;
    snprintf(c.name, sizeof c.name, "activation softmax logits_out");
    run_layer(h, &c);
}

static void run_flatten(cf *h) {
    lcase c = make_case(MR_LAYER_FLATTEN, img(3, 2, 4), 3, 40);
    c.exact = 1;
    snprintf(c.name, sizeof c.name, "flatten 3x2x4");
    run_layer(h, &c);
}

static void run_conv2d(cf *h) {
    static const struct {
        int h, w, c, f, kh, kw, sh, sw;
        mr_padding pad;
        mr_activation act;
        int bias;
    } cases[] = {
        {6, 7, 3, 4, 3, 3, 1, 1, MR_PADDING_VALID, MR_ACTIVATION_RELU, 1},
        {7, 7, 2, 3, 3, 3, 2, 2, MR_PADDING_VALID, MR_ACTIVATION_LINEAR, 0},
        {5, 6, 3, 4, 3, 3, 1, 1, MR_PADDING_SAME, MR_ACTIVATION_TANH, 1},
        {5, 6, 3, 4, 3, 3, 1, 1, MR_PADDING_SAME, MR_ACTIVATION_ELU, 1},
        {6, 7, 3, 4, 3, 3, 1, 1, MR_PADDING_VALID, MR_ACTIVATION_LEAKY_RELU, 1},
        {6, 7, 3, 4, 3, 3, 1, 1, MR_PADDING_SAME, MR_ACTIVATION_GELU, 1},
        {5, 5, 2, 3, 2, 2, 1, 1, MR_PADDING_VALID, MR_ACTIVATION_SILU, 0},
        /* even kernels: SAME pads less before than after (asymmetric) */
        {5, 5, 2, 3, 2, 2, 1, 1, MR_PADDING_SAME, MR_ACTIVATION_RELU, 1},
        {7, 6, 3, 2, 4, 4, 2, 2, MR_PADDING_SAME, MR_ACTIVATION_SIGMOID, 1},
        /* odd kernel, stride 2, even input: total padding 1, all after */
        {6, 6, 2, 3, 3, 3, 2, 2, MR_PADDING_SAME, MR_ACTIVATION_LINEAR, 1},
        /* the axes differ: kernel, stride and input; one channel */
        {6, 5, 1, 3, 3, 2, 2, 1, MR_PADDING_SAME, MR_ACTIVATION_LINEAR, 1},
        {6, 5, 1, 3, 3, 2, 2, 1, MR_PADDING_VALID, MR_ACTIVATION_RELU, 1},
        /* 1x1: the CPU's direct path; softmax over the filters */
        {4, 4, 5, 3, 1, 1, 1, 1, MR_PADDING_VALID, MR_ACTIVATION_SOFTMAX, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lcase c = make_case(MR_LAYER_CONV2D, img(cases[i].h, cases[i].w, cases[i].c), 3, 50 + i);
        c.cfg.filters = cases[i].f;
        c.cfg.size[0] = cases[i].kh, c.cfg.size[1] = cases[i].kw;
        c.cfg.stride[0] = cases[i].sh, c.cfg.stride[1] = cases[i].sw;
        c.cfg.padding = cases[i].pad;
        c.cfg.activation = cases[i].act;
        c.cfg.use_bias = cases[i].bias;
        snprintf(c.name, sizeof c.name, "conv2d %dx%dx%d f%d k%dx%d s%dx%d %s %s%s", cases[i].h,
                 cases[i].w, cases[i].c, cases[i].f, cases[i].kh, cases[i].kw, cases[i].sh,
                 cases[i].sw, pad_name(cases[i].pad), mr_activation_name(cases[i].act),
                 cases[i].bias ? "" : " no-bias");
        run_layer(h, &c);
    }
    /* the logits of a fused softmax: no activation applied */
    lcase c = make_case(MR_LAYER_CONV2D, img(4, 4, 2), 2, 60);
    c.cfg.filters = 3;
    c.cfg.size[0] = c.cfg.size[1] = 3;
    c.cfg.activation = MR_ACTIVATION_SOFTMAX;
    c.logits_out = 1;
    snprintf(c.name, sizeof c.name, "conv2d 4x4x2 k3x3 valid softmax logits_out");
    run_layer(h, &c);
}

static void run_depthwise(cf *h) {
    static const struct {
        int h, w, c, m, kh, kw, sh, sw;
        mr_padding pad;
        mr_activation act;
        int bias;
    } cases[] = {
        {6, 7, 4, 1, 3, 3, 1, 1, MR_PADDING_SAME, MR_ACTIVATION_RELU, 1},
        {7, 7, 3, 2, 3, 3, 2, 2, MR_PADDING_SAME, MR_ACTIVATION_LINEAR, 0},
        {6, 6, 2, 3, 3, 3, 2, 2, MR_PADDING_VALID, MR_ACTIVATION_TANH, 1},
        /* even kernel, SAME pads less before than after; the axes differ */
        {5, 6, 3, 1, 2, 4, 1, 2, MR_PADDING_SAME, MR_ACTIVATION_GELU, 1},
        {5, 5, 8, 2, 1, 1, 1, 1, MR_PADDING_VALID, MR_ACTIVATION_SOFTMAX, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lcase c =
            make_case(MR_LAYER_DEPTHWISE, img(cases[i].h, cases[i].w, cases[i].c), 3, 140 + i);
        c.cfg.depth_multiplier = cases[i].m;
        c.cfg.size[0] = cases[i].kh, c.cfg.size[1] = cases[i].kw;
        c.cfg.stride[0] = cases[i].sh, c.cfg.stride[1] = cases[i].sw;
        c.cfg.padding = cases[i].pad;
        c.cfg.activation = cases[i].act;
        c.cfg.use_bias = cases[i].bias;
        snprintf(c.name, sizeof c.name, "depthwise %dx%dx%d m%d k%dx%d s%dx%d %s %s%s", cases[i].h,
                 cases[i].w, cases[i].c, cases[i].m, cases[i].kh, cases[i].kw, cases[i].sh,
                 cases[i].sw, pad_name(cases[i].pad), mr_activation_name(cases[i].act),
                 cases[i].bias ? "" : " no-bias");
        run_layer(h, &c);
    }
}

static void run_pool(cf *h) {
    static const struct {
        int h, w, c, kh, kw, sh, sw;
        mr_padding pad;
    } cases[] = {
        {6, 6, 3, 2, 2, 2, 2, MR_PADDING_VALID}, /* windows tile the input */
        {7, 6, 2, 2, 2, 2, 2, MR_PADDING_VALID}, /* a row left over */
        {5, 6, 2, 3, 3, 1, 1, MR_PADDING_VALID}, /* overlapping windows */
        {5, 7, 3, 2, 2, 2, 2, MR_PADDING_SAME},  /* partial windows after */
        {6, 6, 2, 3, 3, 2, 2, MR_PADDING_SAME},  /* total padding 1, all after */
        {4, 5, 2, 3, 2, 1, 2, MR_PADDING_SAME},  /* the axes differ, overlap */
    };
    for (int kind = MR_LAYER_MAXPOOL; kind <= MR_LAYER_AVGPOOL; kind++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            lcase c = make_case((mr_layer_kind)kind, img(cases[i].h, cases[i].w, cases[i].c), 3,
                                70 + i + 10 * (uint64_t)kind);
            c.cfg.size[0] = cases[i].kh, c.cfg.size[1] = cases[i].kw;
            c.cfg.stride[0] = cases[i].sh, c.cfg.stride[1] = cases[i].sw;
            c.cfg.padding = cases[i].pad;
            snprintf(c.name, sizeof c.name, "%s %dx%dx%d k%dx%d s%dx%d %s",
                     mr_layer_kind_name((mr_layer_kind)kind), cases[i].h, cases[i].w, cases[i].c,
                     cases[i].kh, cases[i].kw, cases[i].sh, cases[i].sw, pad_name(cases[i].pad));
            run_layer(h, &c);
        }
    /* all-negative input: a max that counted the SAME padding as 0 shows */
    lcase c = make_case(MR_LAYER_MAXPOOL, img(5, 5, 2), 2, 95);
    c.cfg.size[0] = c.cfg.size[1] = 2;
    c.cfg.stride[0] = c.cfg.stride[1] = 2;
    c.cfg.padding = MR_PADDING_SAME;
    c.x_lo = -2.0f, c.x_hi = -1.0f;
    snprintf(c.name, sizeof c.name, "maxpool 5x5x2 k2x2 s2x2 same, negative input");
    run_layer(h, &c);
}

/* The layers of residual networks: Add (and the in-place sum
 * the model adds gradients with), GlobalAveragePooling2D, ZeroPadding2D. */
static void run_residual(cf *h) {
    lcase c = make_case(MR_LAYER_ADD, img(5, 4, 3), 3, 120);
    c.exact = 1; /* one rounding each way */
    snprintf(c.name, sizeof c.name, "add 5x4x3");
    run_layer(h, &c);
    c = make_case(MR_LAYER_ADD, flat(37), 2, 121);
    c.exact = 1;
    snprintf(c.name, sizeof c.name, "add 37");
    run_layer(h, &c);
    /* a fused ReLU (BN+ReLU and Add+ReLU, model.c's fuse_relus): relu(x +
     * x2), and both gradients masked by y > 0, the same bits */
    c = make_case(MR_LAYER_ADD, img(5, 4, 3), 3, 125);
    c.exact = 1;
    c.relu_fused = 1;
    snprintf(c.name, sizeof c.name, "add 5x4x3 relu_fused");
    run_layer(h, &c);
    /* Concatenate: channels of two images, features of two vectors */
    c = make_case(MR_LAYER_CONCATENATE, img(5, 4, 3), 3, 130);
    c.in2 = img(5, 4, 2);
    c.exact = 1; /* copies */
    snprintf(c.name, sizeof c.name, "concatenate 5x4x3 + 5x4x2");
    run_layer(h, &c);
    c = make_case(MR_LAYER_CONCATENATE, flat(7), 2, 131);
    c.in2 = flat(30);
    c.exact = 1;
    snprintf(c.name, sizeof c.name, "concatenate 7 + 30");
    run_layer(h, &c);
    static const int gap[][3] = {{4, 5, 3}, {7, 7, 16}, {1, 1, 5}};
    for (int i = 0; i < 3; i++) {
        c = make_case(MR_LAYER_GLOBALAVGPOOL, img(gap[i][0], gap[i][1], gap[i][2]), 3,
                      122 + (uint64_t)i);
        snprintf(c.name, sizeof c.name, "globalavgpool %dx%dx%d", gap[i][0], gap[i][1], gap[i][2]);
        run_layer(h, &c);
    }
    static const int pad[][4] = {{1, 1, 1, 1}, {3, 3, 3, 3}, {0, 0, 2, 2}, {0, 1, 0, 1}};
    for (int i = 0; i < 4; i++) {
        c = make_case(MR_LAYER_ZEROPAD, img(4, 3, 2), 2, 126 + (uint64_t)i);
        memcpy(c.cfg.pad, pad[i], sizeof c.cfg.pad);
        c.exact = 1; /* copies and zeros */
        snprintf(c.name, sizeof c.name, "zeropad 4x3x2 %d,%d,%d,%d", pad[i][0], pad[i][1],
                 pad[i][2], pad[i][3]);
        run_layer(h, &c);
    }
}

/* The preprocessing layers: Rescaling (the CPU's unfused product and sum,
 * bit for bit), Normalization (a subtraction and a division by a correctly
 * rounded square root: bit for bit too), its initial state from the .cfg's
 * statistics too. */
static void run_preprocessing(cf *h) {
    static const struct {
        float scale, offset;
    } rs[] = {{1.0f / 255.0f, 0.0f}, {0.5f, -1.0f}, {-3.0f, 0.25f}};
    for (int i = 0; i < 3; i++) {
        lcase c =
            make_case(MR_LAYER_RESCALING, i == 1 ? flat(37) : img(4, 3, 3), 3, 130 + (uint64_t)i);
        c.cfg.scale = rs[i].scale, c.cfg.offset = rs[i].offset;
        c.x_lo = 0.0f, c.x_hi = 255.0f; /* raw pixels */
        c.exact = 1;
        snprintf(c.name, sizeof c.name, "rescaling %g %g", rs[i].scale, rs[i].offset);
        run_layer(h, &c);
    }
    static const mr_shape ns[] = {{3, {4, 3, 3}}, {1, {37, 0, 0}}, {3, {2, 2, 5}}};
    for (int i = 0; i < 3; i++) {
        lcase c = make_case(MR_LAYER_NORMALIZATION, ns[i], 3, 140 + (uint64_t)i);
        if (i == 2) { /* the statistics of the .cfg (compared after the init) */
            c.cfg.mean.n = 1, c.cfg.mean.v[0] = 0.25f;
            c.cfg.variance.n = 5;
            for (int k = 0; k < 5; k++)
                c.cfg.variance.v[k] = k == 3 ? 1e-16f : 0.5f + 0.25f * (float)k;
            c.x_lo = -5.0f, c.x_hi = 5.0f;
        }
        c.exact = 1;
        snprintf(c.name, sizeof c.name, "normalization rank %d, %d channels", ns[i].rank,
                 ns[i].d[ns[i].rank - 1]);
        run_layer(h, &c);
    }
}

static void run_dropout(cf *h) {
    static const struct {
        mr_shape in;
        float rate;
        int training;
    } cases[] = {
        {{3, {3, 3, 3}}, 0.3f, 1}, /* 27 per row: not a multiple of the 4 words of a draw */
        {{1, {10, 0, 0}}, 0.5f, 1},
        {{1, {5, 0, 0}}, 0.0f, 1}, /* rate 0: identity */
        {{3, {3, 3, 3}}, 0.3f, 0}, /* inference: identity */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lcase c = make_case(MR_LAYER_DROPOUT, cases[i].in, 4, 100 + i);
        c.cfg.rate = cases[i].rate;
        c.training = c.backward = cases[i].training;
        c.exact = 1;
        snprintf(c.name, sizeof c.name, "dropout rate %.1f rank %d %s", (double)cases[i].rate,
                 cases[i].in.rank, cases[i].training ? "training" : "inference");
        run_layer(h, &c);
    }
}

/* Keras's image-model layers: ReLU (elementwise, rounded one by one),
 * GlobalMaxPooling2D (a maximum and a division among ties), Reshape (a
 * copy) and SpatialDropout2D (Dropout's draws) bit for bit; Softmax as
 * the activation's softmax. */
static void run_keras_layers(cf *h) {
    static const float relu[][3] = {{-1, 0, 0}, {6, 0, 0}, {0.5f, 0.1f, 0.2f}, {-1, 0.3f, 0}};
    for (int i = 0; i < 4; i++) {
        lcase c = make_case(MR_LAYER_RELU, i == 3 ? flat(37) : img(4, 3, 5), 3, 150 + (uint64_t)i);
        c.cfg.max_value = relu[i][0], c.cfg.negative_slope = relu[i][1];
        c.cfg.threshold = relu[i][2];
        c.x_lo = -8.0f, c.x_hi = 8.0f; /* past max_value 6 */
        c.exact = 1;
        snprintf(c.name, sizeof c.name, "relu max %g slope %g threshold %g", relu[i][0], relu[i][1],
                 relu[i][2]);
        run_layer(h, &c);
    }
    lcase c = make_case(MR_LAYER_SOFTMAX, img(3, 2, 7), 3, 155);
    snprintf(c.name, sizeof c.name, "softmax 3x2x7");
    run_layer(h, &c);
    for (int i = 0; i < 2; i++) {
        c = make_case(MR_LAYER_GLOBALMAXPOOL, img(5, 4, 3 + i), 3, 156 + (uint64_t)i);
        c.cfg.keepdims = i;
        c.exact = 1;
        snprintf(c.name, sizeof c.name, "globalmaxpool 5x4x%d keepdims %d", 3 + i, i);
        run_layer(h, &c);
    }
    c = make_case(MR_LAYER_RESHAPE, img(4, 3, 2), 2, 158);
    c.cfg.target_rank = 3;
    c.cfg.target_shape[0] = 2, c.cfg.target_shape[1] = -1, c.cfg.target_shape[2] = 3;
    c.exact = 1;
    snprintf(c.name, sizeof c.name, "reshape 4x3x2 to 2,-1,3");
    run_layer(h, &c);
    static const struct {
        float rate;
        int training, ch;
    } sd[] = {{0.3f, 1, 7}, {0.5f, 1, 4}, {0.3f, 0, 7}};
    for (int i = 0; i < 3; i++) {
        c = make_case(MR_LAYER_SPATIALDROPOUT, img(3, 2, sd[i].ch), 4, 160 + (uint64_t)i);
        c.cfg.rate = sd[i].rate;
        c.training = c.backward = sd[i].training;
        c.exact = 1;
        snprintf(c.name, sizeof c.name, "spatialdropout rate %.1f %d channels %s",
                 (double)sd[i].rate, sd[i].ch, sd[i].training ? "training" : "inference");
        run_layer(h, &c);
    }
    for (int i = 0; i < 4; i++) {
        /* the three modes in training, then the identity of inference */
        c = make_case(MR_LAYER_RANDOMFLIP, img(3, 4, 2 + i), 6, 170 + (uint64_t)i);
        c.cfg.flip_mode = i % 3;
        c.training = c.backward = i < 3;
        c.exact = 1;
        snprintf(c.name, sizeof c.name, "randomflip mode %d 3x4x%d %s", i % 3, 2 + i,
                 i < 3 ? "training" : "inference");
        run_layer(h, &c);
    }
}

static void run_batchnorm(cf *h) {
    static const struct {
        mr_shape in;
        int batch, training, sync;
    } cases[] = {
        {{3, {3, 4, 5}}, 3, 1, 0},
        {{1, {6, 0, 0}}, 5, 1, 0},
        {{3, {2, 3, 4}}, 3, 1, 1}, /* SyncBatchNormalization's path, one replica */
        {{3, {3, 4, 5}}, 3, 0, 0}, /* inference: the moving statistics */
        {{1, {6, 0, 0}}, 5, 0, 0},
        /* the sums' tree (batchnorm_stats.h) past a level: 2 groups of
         * 2048 rows (rows 4096 + 2), and 65 groups, 3 levels (131074 rows) */
        {{3, {41, 50, 3}}, 2, 1, 0},
        {{3, {2, 2, 1}}, 32769, 1, 1},
    };
    /* and each with a fused ReLU: relu(y), dy masked by y > 0 as it is read */
    for (int fused = 0; fused < 2; fused++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            lcase c = make_case(MR_LAYER_BATCHNORM, cases[i].in, cases[i].batch, 110 + i);
            c.cfg.momentum = 0.9f;
            c.cfg.epsilon = 1e-3f;
            c.cfg.sync = cases[i].sync;
            c.sync = cases[i].sync;
            c.training = c.backward = cases[i].training;
            c.relu_fused = fused;
            c.exact = 1; /* the same tree of sums, each rounding once: bit for bit */
            c.x_lo = -0.5f, c.x_hi = 1.5f; /* a mean away from 0 */
            snprintf(c.name, sizeof c.name, "batchnorm rank %d B=%d %s%s%s", cases[i].in.rank,
                     cases[i].batch, cases[i].training ? "training" : "inference",
                     cases[i].sync ? " sync" : "", fused ? " relu_fused" : "");
            run_layer(h, &c);
        }
}

static void run_layernorm(cf *h) {
    static const struct {
        mr_shape in;
        int batch, center, scale;
    } cases[] = {
        {{3, {3, 4, 5}}, 3, 1, 1}, {{1, {37, 0, 0}}, 5, 1, 1},
        {{3, {2, 3, 4}}, 2, 0, 1}, /* no beta */
        {{1, {6, 0, 0}}, 4, 1, 0}, /* no gamma */
        {{1, {6, 0, 0}}, 4, 0, 0}, /* no weights */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lcase c = make_case(MR_LAYER_LAYERNORM, cases[i].in, cases[i].batch, 130 + i);
        c.cfg.epsilon = 1e-3f;
        c.cfg.center = cases[i].center, c.cfg.scale = cases[i].scale;
        c.x_lo = -0.5f, c.x_hi = 1.5f; /* a mean away from 0 */
        snprintf(c.name, sizeof c.name, "layernorm rank %d B=%d center %d scale %d",
                 cases[i].in.rank, cases[i].batch, cases[i].center, cases[i].scale);
        run_layer(h, &c);
    }
}

/* ------------------------------------------------------------------ loss */

#define LB 6 /* rows */
#define LK 7 /* classes */

/* Runs one loss kind (with label smoothing ls, with class weights when
 * `weighted`: (LK) device memory, one of them 0) on both contexts: dy, the
 * loss sum (added to a nonzero start), the correct count and the top-1
 * count ([net] top_k: the tie below is in it); then again without dy, with
 * the top-3 count. */
static void run_loss_weighted(cf *h, mr_loss_kind kind, int fused, float ls, int weighted) {
    snprintf(h->tag, sizeof h->tag, "loss %s%s%s%s", mr_loss_name(kind),
             kind == MR_LOSS_MSE ? "" : (fused ? " fused softmax" : " on probabilities"),
             ls > 0.0f ? " label smoothing" : "", weighted ? " class weights" : "");
    const mr_kernels *kk = mr_kernels_for(h->dut);
    if (kk == NULL || kk->loss == NULL || kk->loss->compute == NULL) {
        cf_fail(h, "the %s kernel table has no loss", h->dut->ops->name);
        return;
    }
    float out[LB * LK], a[LB * LK], b[LB * LK];
    int32_t labels[LB];
    for (int i = 0; i < LB; i++)
        labels[i] = (i * 3) % LK;
    labels[3] = 4;
    if (kind == MR_LOSS_MSE) {
        mr_rng_uniform(200, 303, (uint32_t)kind, 0, 0.0f, 1.0f, out, LB * LK);
    } else {
        mr_rng_uniform(200, 303, (uint32_t)kind, 0, -3.0f, 3.0f, out, LB * LK);
        if (!fused) /* probabilities: softmax rows */
            for (int i = 0; i < LB; i++) {
                double s = 0.0;
                for (int j = 0; j < LK; j++)
                    s += exp((double)out[i * LK + j]);
                for (int j = 0; j < LK; j++)
                    out[i * LK + j] = (float)(exp((double)out[i * LK + j]) / s);
            }
        if (!fused) {
            out[1 * LK + labels[1]] = 1e-9f; /* clipped from below */
            out[2 * LK + labels[2]] = 1.0f;  /* clipped from above: no gradient */
        }
    }
    /* a tie: argmax takes the first, so row 3 (label 4) is not correct */
    out[3 * LK + 2] = out[3 * LK + 4] = kind == MR_LOSS_MSE ? 2.0f : (fused ? 5.0f : 0.9f);
    const float norm = 10.0f; /* the global batch: more rows than this replica's */
    const double tol_dy = tol_for(LK), tol_sum = tol_for(LB * LK);
    mr_backend *be[2] = {h->ref, h->dut};
    mr_dfloat *dout[2] = {0}, *ddy[2] = {0}, *dcw[2] = {0};
    const float cw[LK] = {0.5f, 2.0f, 0.0f, 1.0f, 3.25f, 1.5f, 0.75f};
    double sum[2] = {1.25, 1.25}, sum2[2] = {0.5, 0.5};
    int64_t correct[2] = {3, 3}, correct2[2] = {1, 1}, top1[2] = {2, 2}, top3[2] = {0, 0};
    mr_error err = {0};
    for (int k = 0; k < 2; k++) {
        if (!(dout[k] = cf_upload(h, k, be[k], out, LB * LK)) ||
            !(ddy[k] = cf_upload(h, k, be[k], NULL, LB * LK)) ||
            (weighted && !(dcw[k] = cf_upload(h, k, be[k], cw, LK))))
            goto out;
        if (!cf_ok(h, k,
                   mr_loss_compute(be[k], kind, fused, ls, dout[k], labels, dcw[k], LB, LK, norm,
                                   ddy[k], &sum[k], &correct[k], 1, &top1[k], &err),
                   &err, "loss") ||
            !cf_ok(h, k,
                   mr_loss_compute(be[k], kind, fused, ls, dout[k], labels, dcw[k], LB, LK, norm,
                                   NULL, &sum2[k], &correct2[k], 3, &top3[k], &err),
                   &err, "loss without dy"))
            goto out;
    }
    cf_compare(h, "dy", ddy[0], ddy[1], LB * LK, tol_dy, a, b);
    cf_check_double(h, "loss sum", sum[1], sum[0], tol_sum);
    cf_check_int(h, "correct", correct[1], correct[0]);
    cf_check_double(h, "loss sum without dy", sum2[1], sum2[0], tol_sum);
    cf_check_int(h, "correct without dy", correct2[1], correct2[0]);
    cf_check_int(h, "in top 1", top1[1], top1[0]);
    cf_check_int(h, "in top 3", top3[1], top3[0]);
    /* the tie of row 3 is in the top 1, not correct: the reference says so too */
    if (top1[0] - 2 != correct[0] - 3 + 1)
        cf_fail(h, "reference: %lld in the top 1, %lld correct: the tie is not counted",
                (long long)(top1[0] - 2), (long long)(correct[0] - 3));
    /* the out buffer is const */
    if (cf_get(h, 1, be[1], a, dout[1], LB * LK))
        cf_check(h, "out unchanged", a, out, LB * LK, 0.0);
out:
    for (int k = 0; k < 2; k++) {
        mr_backend_free(be[k], dout[k]);
        mr_backend_free(be[k], ddy[k]);
        mr_backend_free(be[k], dcw[k]);
    }
}

static void run_loss_smoothed(cf *h, mr_loss_kind kind, int fused, float ls) {
    run_loss_weighted(h, kind, fused, ls, 0);
}

static void run_loss(cf *h, mr_loss_kind kind, int fused) {
    run_loss_smoothed(h, kind, fused, 0.0f);
}

/* binary_crossentropy: one output per row (LB rows), labels 0 and 1, logits (fused) or
 * probabilities (two clipped, one exactly 0.5: class 0), smoothed, class weighted (two
 * weights): dy, the loss sum and the binary_accuracy count on both contexts. */
static void run_loss_bce(cf *h, int fused, float ls, int weighted) {
    snprintf(h->tag, sizeof h->tag, "loss binary_crossentropy%s%s%s",
             fused ? " fused sigmoid" : " on probabilities", ls > 0.0f ? " label smoothing" : "",
             weighted ? " class weights" : "");
    float out[LB], a[LB], b[LB];
    int32_t labels[LB];
    for (int i = 0; i < LB; i++)
        labels[i] = (i * 5 / 2) % 2;
    mr_rng_uniform(200, 304, (uint32_t)fused, 0, fused ? -3.0f : 0.0f, fused ? 3.0f : 1.0f, out,
                   LB);
    if (!fused) out[1] = 1e-9f, out[2] = 1.0f, out[3] = 0.5f;
    const float norm = 10.0f, cw[2] = {0.5f, 2.0f};
    const double tol_dy = tol_for(1), tol_sum = tol_for(LB);
    mr_backend *be[2] = {h->ref, h->dut};
    mr_dfloat *dout[2] = {0}, *ddy[2] = {0}, *dcw[2] = {0};
    double sum[2] = {1.25, 1.25};
    int64_t correct[2] = {3, 3};
    mr_error err = {0};
    for (int k = 0; k < 2; k++) {
        if (!(dout[k] = cf_upload(h, k, be[k], out, LB)) ||
            !(ddy[k] = cf_upload(h, k, be[k], NULL, LB)) ||
            (weighted && !(dcw[k] = cf_upload(h, k, be[k], cw, 2))))
            goto out;
        if (!cf_ok(h, k,
                   mr_loss_compute(be[k], MR_LOSS_BINARY_CROSSENTROPY, fused, ls, dout[k], labels,
                                   dcw[k], LB, 1, norm, ddy[k], &sum[k], &correct[k], 0, NULL,
                                   &err),
                   &err, "loss"))
            goto out;
    }
    cf_compare(h, "dy", ddy[0], ddy[1], LB, tol_dy, a, b);
    cf_check_double(h, "loss sum", sum[1], sum[0], tol_sum);
    cf_check_int(h, "correct", correct[1], correct[0]);
out:
    for (int k = 0; k < 2; k++) {
        mr_backend_free(be[k], dout[k]);
        mr_backend_free(be[k], ddy[k]);
        mr_backend_free(be[k], dcw[k]);
    }
}

/* Multi-label binary_crossentropy: LB rows of KM = 3 outputs, labels (LB, 3) multi-hot (the
 * device copies LB x 3 ints), logits (fused) or probabilities (one clipped, one exactly 0.5),
 * plain and smoothed: dy, the loss sum and the matched-output count on both contexts. */
static void run_loss_bce_multi(cf *h, int fused, float ls) {
    enum { KM = 3 };
    snprintf(h->tag, sizeof h->tag, "loss multi-label binary_crossentropy%s%s",
             fused ? " fused sigmoid" : " on probabilities", ls > 0.0f ? " label smoothing" : "");
    float out[LB * KM], a[LB * KM], b[LB * KM];
    int32_t labels[LB * KM];
    for (int i = 0; i < LB * KM; i++)
        labels[i] = (i * 7 / 3) % 2;
    mr_rng_uniform(201, 304, (uint32_t)fused, 0, fused ? -3.0f : 0.0f, fused ? 3.0f : 1.0f, out,
                   LB * KM);
    if (!fused) out[1] = 1e-9f, out[4] = 0.5f;
    const float norm = 10.0f;
    const double tol_dy = tol_for(1), tol_sum = tol_for(LB * KM);
    mr_backend *be[2] = {h->ref, h->dut};
    mr_dfloat *dout[2] = {0}, *ddy[2] = {0};
    double sum[2] = {1.25, 1.25};
    int64_t correct[2] = {3, 3};
    mr_error err = {0};
    for (int k = 0; k < 2; k++) {
        if (!(dout[k] = cf_upload(h, k, be[k], out, LB * KM)) ||
            !(ddy[k] = cf_upload(h, k, be[k], NULL, LB * KM)))
            goto out;
        if (!cf_ok(h, k,
                   mr_loss_compute(be[k], MR_LOSS_BINARY_CROSSENTROPY, fused, ls, dout[k], labels,
                                   NULL, LB, KM, norm, ddy[k], &sum[k], &correct[k], 0, NULL, &err),
                   &err, "loss"))
            goto out;
    }
    cf_compare(h, "dy", ddy[0], ddy[1], LB * KM, tol_dy, a, b);
    cf_check_double(h, "loss sum", sum[1], sum[0], tol_sum);
    cf_check_int(h, "correct", correct[1], correct[0]);
out:
    for (int k = 0; k < 2; k++) {
        mr_backend_free(be[k], dout[k]);
        mr_backend_free(be[k], ddy[k]);
    }
}

static void run_losses(cf *h) {
    run_loss(h, MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1);
    run_loss(h, MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 0);
    run_loss(h, MR_LOSS_CATEGORICAL_CROSSENTROPY, 1);
    run_loss(h, MR_LOSS_CATEGORICAL_CROSSENTROPY, 0);
    run_loss(h, MR_LOSS_MSE, 0); /* the model never fuses a softmax into MSE */
    run_loss_smoothed(h, MR_LOSS_CATEGORICAL_CROSSENTROPY, 1, 0.1f);
    run_loss_smoothed(h, MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 0, 0.2f);
    run_loss_weighted(h, MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1, 0.0f, 1);
    run_loss_weighted(h, MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 0, 0.0f, 1);
    run_loss_weighted(h, MR_LOSS_CATEGORICAL_CROSSENTROPY, 1, 0.1f, 1);
    run_loss_weighted(h, MR_LOSS_MSE, 0, 0.0f, 1);
    run_loss_bce(h, 1, 0.0f, 0);
    run_loss_bce(h, 0, 0.0f, 0);
    run_loss_bce(h, 1, 0.1f, 1);
    run_loss_bce(h, 0, 0.2f, 1);
    run_loss_bce_multi(h, 1, 0.0f);
    run_loss_bce_multi(h, 0, 0.1f);
}

/* ------------------------------------------------------------- optimizer */

#define ON 1000 /* parameters: not a multiple of a block or a vector */

/* Three updates with fresh gradients; weights and slots compared after
 * each, the first two checked for NaN and Inf on the way (both say 0);
 * then a fourth whose gradients hold a NaN, which both report. */
static void run_optimizer(cf *h, const mr_optimizer *opt, float lr, const char *name) {
    snprintf(h->tag, sizeof h->tag, "optimizer %s", name);
    const mr_kernels *kk = mr_kernels_for(h->dut);
    const int adam = opt->kind == MR_OPTIMIZER_ADAM || opt->kind == MR_OPTIMIZER_ADAMW;
    if (kk == NULL || kk->optimizer == NULL ||
        (adam                                ? kk->optimizer->adam == NULL
         : opt->kind == MR_OPTIMIZER_RMSPROP ? kk->optimizer->rmsprop == NULL
                                             : kk->optimizer->sgd == NULL)) {
        cf_fail(h, "the %s kernel table has no %s update", h->dut->ops->name, name);
        return;
    }
    static float w0[ON], g[ON], a[ON], b[ON];
    mr_rng_uniform(300, 304, 0, 0, -1.0f, 1.0f, w0, ON);
    const int slots = mr_optimizer_slot_count(opt);
    const double tol = tol_for(1);
    mr_backend *be[2] = {h->ref, h->dut};
    mr_dfloat *dw[2] = {0}, *dg[2] = {0}, *ds[2][2] = {{0}};
    mr_error err = {0};
    for (int k = 0; k < 2; k++) {
        if (!(dw[k] = cf_upload(h, k, be[k], w0, ON)) ||
            !(dg[k] = cf_upload(h, k, be[k], NULL, ON)))
            goto out;
        for (int j = 0; j < slots; j++)
            if (!(ds[k][j] = cf_upload(h, k, be[k], NULL, ON)) ||
                !cf_ok(h, k, mr_backend_zero(be[k], ds[k][j], sizeof(float) * ON, &err), &err,
                       "zero"))
                goto out;
    }
    for (int t = 1; t <= 4; t++) {
        mr_rng_uniform(300, 305, (uint32_t)t, 0, -1.0f, 1.0f, g, ON);
        if (t == 4) g[ON / 2 + 1] = NAN;
        int bad[2] = {-1, -1};
        for (int k = 0; k < 2; k++)
            if (!cf_put(h, k, be[k], dg[k], g, ON) ||
                !cf_ok(h, k,
                       mr_optimizer_step(opt, be[k], lr, t, dw[k], dg[k], ds[k][0], ds[k][1], ON,
                                         t == 3 ? NULL : &bad[k], &err),
                       &err, "step"))
                goto out;
        if (t != 3)
            for (int k = 0; k < 2; k++)
                if (bad[k] != (t == 4))
                    cf_fail(h, "step %d: %s says %d for gradients %s", t, be[k]->ops->name, bad[k],
                            t == 4 ? "with a NaN" : "all finite");
        if (t == 4) break; /* the weights hold the NaN's update now */
        char what[64];
        snprintf(what, sizeof what, "w after step %d", t);
        cf_compare(h, what, dw[0], dw[1], ON, tol, a, b);
        for (int j = 0; j < slots; j++) {
            snprintf(what, sizeof what, "slot %d after step %d", j, t);
            cf_compare(h, what, ds[0][j], ds[1][j], ON, tol, a, b);
        }
    }
out:
    for (int k = 0; k < 2; k++) {
        mr_backend_free(be[k], dw[k]);
        mr_backend_free(be[k], dg[k]);
        mr_backend_free(be[k], ds[k][0]);
        mr_backend_free(be[k], ds[k][1]);
    }
}

/* The check for NaN and Inf (on_nan): on buffers finite to the edge
 * (+-FLT_MAX, subnormals, zeros) it says 0, with one NaN, +Inf or -Inf at
 * the first, a middle or the last element it says 1, as the reference does. */
static void run_nonfinite(cf *h) {
    snprintf(h->tag, sizeof h->tag, "optimizer nonfinite");
    const mr_kernels *kk = mr_kernels_for(h->dut);
    if (kk == NULL || kk->optimizer == NULL || kk->optimizer->nonfinite == NULL) {
        cf_fail(h, "the %s kernel table has no nonfinite check", h->dut->ops->name);
        return;
    }
    static float x[ON];
    mr_backend *be[2] = {h->ref, h->dut};
    mr_dfloat *dx[2] = {0};
    mr_error err = {0};
    for (int k = 0; k < 2; k++)
        if (!(dx[k] = cf_upload(h, k, be[k], NULL, ON))) goto out;
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    const int at[3] = {0, ON / 2 + 1, ON - 1};
    for (int c = -1; c < 9; c++) {
        mr_rng_uniform(300, 306, 0, 0, -1.0f, 1.0f, x, ON);
        x[1] = FLT_MAX, x[2] = -FLT_MAX, x[3] = FLT_MIN / 4, x[4] = 0.0f, x[ON - 2] = -FLT_MAX;
        if (c >= 0) x[at[c % 3]] = bad[c / 3];
        for (int k = 0; k < 2; k++) {
            int any = -1;
            if (!cf_put(h, k, be[k], dx[k], x, ON) ||
                !cf_ok(h, k, mr_optimizer_nonfinite(be[k], dx[k], ON, &any, &err), &err,
                       "nonfinite"))
                goto out;
            if (any != (c >= 0))
                cf_fail(h, "nonfinite on the %s says %d for %s at %d", k ? "context" : "reference",
                        any,
                        c < 0        ? "no NaN or Inf"
                        : c / 3 == 0 ? "NaN"
                                     : "Inf",
                        c < 0 ? -1 : at[c % 3]);
        }
    }
out:
    for (int k = 0; k < 2; k++)
        mr_backend_free(be[k], dx[k]);
}

/* The sum of squares (norm clipping) gives the reference's bits: every
 * device sums in optimizer.h's order, so that replicas on different
 * devices clip by the same norm. Lengths below, at and above the number of
 * partial sums, and values over many decades. */
static void run_sumsq(cf *h) {
    snprintf(h->tag, sizeof h->tag, "optimizer sumsq");
    const mr_kernels *kk = mr_kernels_for(h->dut);
    if (kk == NULL || kk->optimizer == NULL || kk->optimizer->sumsq == NULL) {
        cf_fail(h, "the %s kernel table has no sum of squares", h->dut->ops->name);
        return;
    }
    static float x[ON];
    mr_rng_uniform(300, 307, 0, 0, -1.0f, 1.0f, x, ON);
    for (int i = 0; i < ON; i++)
        x[i] *= powf(10.0f, (float)(i % 9) - 4.0f);
    mr_backend *be[2] = {h->ref, h->dut};
    mr_dfloat *dx[2] = {0};
    mr_error err = {0};
    for (int k = 0; k < 2; k++)
        if (!(dx[k] = cf_upload(h, k, be[k], x, ON))) goto out;
    const size_t lens[4] = {1, MR_SUMSQ_PARTS - 1, MR_SUMSQ_PARTS, ON};
    for (int c = 0; c < 4; c++) {
        double sum[2] = {-1.0, -1.0};
        for (int k = 0; k < 2; k++)
            if (!cf_ok(
                    h, k,
                    mr_kernels_for(be[k])->optimizer->sumsq(be[k], dx[k], lens[c], &sum[k], &err),
                    &err, "sumsq"))
                goto out;
        if (memcmp(&sum[0], &sum[1], sizeof sum[0]) != 0)
            cf_fail(h, "sumsq of %zu floats: reference %.17g, %s %.17g", lens[c], sum[0],
                    h->dut->ops->name, sum[1]);
    }
out:
    for (int k = 0; k < 2; k++)
        mr_backend_free(be[k], dx[k]);
}

/* y += a x (an L2 penalty's gradient): the device's against the
 * reference's, to one rounding of each element. */
static void run_axpy(cf *h) {
    snprintf(h->tag, sizeof h->tag, "optimizer axpy");
    const mr_kernels *kk = mr_kernels_for(h->dut);
    if (kk == NULL || kk->optimizer == NULL || kk->optimizer->axpy == NULL) {
        cf_fail(h, "the %s kernel table has no axpy", h->dut->ops->name);
        return;
    }
    static float x[ON], y[ON], a[ON], b[ON];
    mr_rng_uniform(300, 308, 0, 0, -1.0f, 1.0f, x, ON);
    mr_rng_uniform(300, 309, 0, 0, -1.0f, 1.0f, y, ON);
    mr_backend *be[2] = {h->ref, h->dut};
    mr_dfloat *dx[2] = {0}, *dy[2] = {0};
    mr_error err = {0};
    for (int k = 0; k < 2; k++) {
        if (!(dx[k] = cf_upload(h, k, be[k], x, ON)) || !(dy[k] = cf_upload(h, k, be[k], y, ON)))
            goto out;
        if (!cf_ok(h, k,
                   mr_kernels_for(be[k])->optimizer->axpy(be[k], dy[k], dx[k], ON, 0.02f, &err),
                   &err, "axpy"))
            goto out;
    }
    cf_compare(h, "y += 0.02 x", dy[0], dy[1], ON, tol_for(1), a, b);
out:
    for (int k = 0; k < 2; k++) {
        mr_backend_free(be[k], dx[k]);
        mr_backend_free(be[k], dy[k]);
    }
}

static void run_optimizers(cf *h) {
    mr_optimizer sgd = {.kind = MR_OPTIMIZER_SGD};
    run_optimizer(h, &sgd, 0.01f, "sgd");
    sgd.momentum = 0.9f;
    run_optimizer(h, &sgd, 0.01f, "sgd momentum 0.9");
    sgd.nesterov = 1;
    run_optimizer(h, &sgd, 0.01f, "sgd nesterov 0.9");
    mr_optimizer adam = {
        .kind = MR_OPTIMIZER_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-7f};
    run_optimizer(h, &adam, 1e-3f, "adam");
    mr_optimizer adamw = adam;
    adamw.kind = MR_OPTIMIZER_ADAMW;
    adamw.weight_decay = 0.004f;
    run_optimizer(h, &adamw, 1e-3f, "adamw 0.004");
    mr_optimizer rms = {.kind = MR_OPTIMIZER_RMSPROP, .rho = 0.9f, .epsilon = 1e-7f};
    run_optimizer(h, &rms, 1e-3f, "rmsprop");
    rms.momentum = 0.9f;
    rms.weight_decay = 0.01f;
    run_optimizer(h, &rms, 1e-3f, "rmsprop momentum 0.9, weight decay 0.01");
    /* clipvalue below the gradients' range [-1, 1): some clipped, some not */
    sgd.clipvalue = 0.5f;
    sgd.weight_decay = 0.1f;
    run_optimizer(h, &sgd, 0.01f, "sgd nesterov, clipvalue 0.5, weight decay 0.1");
    run_nonfinite(h);
    run_sumsq(h);
    run_axpy(h);
}

/* ----------------------------------------------------------------- input */

/* A synthetic batch made by the input kernel (models/kernels.h) from
 * example ids in device memory: the reference's floats are those
 * mr_dataset_fill makes of mr_dataset_synthetic's bytes (the host's
 * truth), and the context under test's are the reference's, bit for bit.
 * Ids out of order and repeated; 70 values an example, so examples start
 * inside a Philox call's 16 bytes. */
static void run_synthetic(cf *h) {
    snprintf(h->tag, sizeof h->tag, "input synthetic");
    const mr_kernels *kk = mr_kernels_for(h->dut);
    if (kk == NULL || kk->input == NULL || kk->input->synthetic == NULL) {
        cf_fail(h, "the %s kernel table has no synthetic input", h->dut->ops->name);
        return;
    }
    enum { B = 7, ROW = 70 };
    const int dims[1] = {ROW};
    mr_dataset ds;
    mr_error err = {0};
    if (!cf_ok(h, 0, mr_dataset_synthetic(&ds, 40, 1, dims, 3, 11, &err), &err, "synthetic"))
        return;
    ds.scale = 1.0f / 255.0f;
    const int64_t rows[B] = {39, 0, 17, 17, 5, 38, 1};
    static float want[B * ROW], a[B * ROW], b[B * ROW];
    int32_t y[B];
    mr_dataset_fill(&ds, rows, B, NULL, want, y);
    mr_backend *be[2] = {h->ref, h->dut};
    mr_dfloat *dx[2] = {0};
    void *drows[2] = {0};
    for (int k = 0; k < 2; k++) {
        if (!(dx[k] = cf_upload(h, k, be[k], NULL, B * ROW))) goto out;
        if (!(drows[k] = mr_backend_alloc(be[k], sizeof rows))) {
            cf_fail(h, "out of memory for the ids");
            goto out;
        }
        if (!cf_ok(h, k, mr_backend_to_device(be[k], drows[k], rows, sizeof rows, &err), &err,
                   "to_device") ||
            !cf_ok(h, k,
                   mr_kernels_for(be[k])->input->synthetic(be[k], dx[k], drows[k], B, ROW,
                                                           ds.synthetic_key[0], ds.synthetic_key[1],
                                                           ds.scale, &err),
                   &err, "synthetic"))
            goto out;
    }
    if (!cf_get(h, 0, h->ref, b, dx[0], B * ROW)) goto out;
    cf_check(h, "reference against mr_dataset_fill", b, want, B * ROW, 0.0);
    cf_compare(h, "synthetic batch", dx[0], dx[1], B * ROW, 0.0, a, b);
out:
    for (int k = 0; k < 2; k++) {
        mr_backend_free(be[k], dx[k]);
        mr_backend_free(be[k], drows[k]);
    }
    mr_dataset_free(&ds);
}

/* ----------------------------------------------------------------- tests */

/* One test per group, looped over the contexts under test (_i). */
#define GROUP_TEST(group, fn)                                                                      \
    START_TEST(group) {                                                                            \
        cf h;                                                                                      \
        if (cf_begin(&h, _i)) fn(&h);                                                              \
        cf_end(&h, #group);                                                                        \
    }                                                                                              \
    END_TEST

GROUP_TEST(dense, run_dense)
GROUP_TEST(activation, run_activation)
GROUP_TEST(flatten, run_flatten)
GROUP_TEST(conv2d, run_conv2d)
GROUP_TEST(depthwise, run_depthwise)
GROUP_TEST(pool, run_pool)
GROUP_TEST(dropout, run_dropout)
GROUP_TEST(residual, run_residual)
GROUP_TEST(preprocessing, run_preprocessing)
GROUP_TEST(batchnorm, run_batchnorm)
GROUP_TEST(layernorm, run_layernorm)
GROUP_TEST(keras_layers, run_keras_layers)
GROUP_TEST(loss, run_losses)
GROUP_TEST(optimizer, run_optimizers)
GROUP_TEST(input, run_synthetic)

/* A few cases of each comparison kind, on the copy-mode CPU context. */
static void self_test_cases(cf *h) {
    lcase c = make_case(MR_LAYER_DENSE, flat(13), 4, 10);
    c.cfg.units = 6;
    c.cfg.activation = MR_ACTIVATION_TANH;
    snprintf(c.name, sizeof c.name, "self-test dense");
    run_layer(h, &c);
    lcase d = make_case(MR_LAYER_DROPOUT, img(3, 3, 3), 4, 100);
    d.cfg.rate = 0.3f;
    d.exact = 1;
    snprintf(d.name, sizeof d.name, "self-test dropout");
    run_layer(h, &d);
    run_loss(h, MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1);
    mr_optimizer adam = {
        .kind = MR_OPTIMIZER_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-7f};
    run_optimizer(h, &adam, 1e-3f, "adam");
}

/* The harness can fail: results moved by twice their bound (one ulp where
 * exact, one count) are all reported; moved by half their bound they all
 * pass; unmoved, the copy-mode CPU context agrees bit for bit. */
START_TEST(harness_reports_differences) {
    cf h;
    const double perturb[3] = {2.0, 0.5, 0.0};
    for (int p = 0; p < 3; p++) {
        ck_assert(cf_begin(&h, 0));
        h.perturb = perturb[p];
        h.quiet = p == 0;
        self_test_cases(&h);
        mr_backend_destroy(h.dut);
        mr_backend_destroy(h.ref);
        ck_assert_int_gt(h.compared, 20);
        if (p == 0)
            ck_assert_msg(h.failed == h.compared, "perturbed by 2 x tol: %d of %d reported",
                          h.failed, h.compared);
        else
            ck_assert_msg(h.failed == 0, "perturbed by %g x tol: %d of %d failed; first: %s",
                          perturb[p], h.failed, h.compared, h.first);
        if (p == 1) ck_assert_double_ge(h.worst, 0.49);
        if (p == 2) ck_assert_msg(h.worst == 0.0, "copy mode differs: %g of the bound", h.worst);
    }
    printf("conformance self-test: differences above the bound are reported, below it pass\n");
}
END_TEST

int main(int argc, char **argv) {
    int targets = 1;
    if (argc > 1) {
        dut_kind = mr_backend_kind_find(argv[1]);
        if (dut_kind == NULL || dut_kind->discover == NULL) {
            fprintf(stderr,
                    "usage: %s [KIND]: KIND a device kind of this build with devices "
                    "of its own (not '%s')\n",
                    argv[0], argv[1]);
            return 2;
        }
        const mr_gpu_list *g = mr_backend_kind_devices(dut_kind);
        if (g->count == 0) {
            printf("SKIP: no GPU: %s\n", g->reason[0] ? g->reason : "none visible");
            return 77; /* meson's SKIP */
        }
        targets = g->count;
        for (int i = 0; i < g->count; i++)
            printf("conformance: testing %s:%d: %s (compute capability %d.%d)\n", dut_kind->name, i,
                   g->gpu[i].name, g->gpu[i].cc_major, g->gpu[i].cc_minor);
        /* discovery initialised the CUDA runtime, which a forked child
         * cannot use: run the tests in this process */
        setenv("CK_FORK", "no", 1);
    }
    Suite *s = suite_create("conformance");
    TCase *tc = tcase_create("conformance");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, dense, 0, targets);
    tcase_add_loop_test(tc, activation, 0, targets);
    tcase_add_loop_test(tc, flatten, 0, targets);
    tcase_add_loop_test(tc, conv2d, 0, targets);
    tcase_add_loop_test(tc, depthwise, 0, targets);
    tcase_add_loop_test(tc, pool, 0, targets);
    tcase_add_loop_test(tc, dropout, 0, targets);
    tcase_add_loop_test(tc, residual, 0, targets);
    tcase_add_loop_test(tc, preprocessing, 0, targets);
    tcase_add_loop_test(tc, batchnorm, 0, targets);
    tcase_add_loop_test(tc, layernorm, 0, targets);
    tcase_add_loop_test(tc, keras_layers, 0, targets);
    tcase_add_loop_test(tc, loss, 0, targets);
    tcase_add_loop_test(tc, optimizer, 0, targets);
    tcase_add_loop_test(tc, input, 0, targets);
    if (dut_kind == NULL) tcase_add_test(tc, harness_reports_differences);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
