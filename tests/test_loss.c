/* test_loss.c: unit tests of models/loss.c. For each loss the gradient is
 * checked against central finite differences of the loss itself (as a
 * function of the output values, evaluated by the float implementation and
 * differenced in double), then the 1/norm scaling, values and correct counts
 * against small cases worked by hand, the stability of the fused
 * softmax cross-entropy at extreme logits, the top-k counts (ties
 * included) against cases worked by hand; class weights by hand and by
 * finite differences; binary_crossentropy (fused and on probabilities,
 * smoothed, weighted) by hand and by finite differences; its multi-label rows
 * (k = 3, multi-hot targets) by hand, against Keras, and by finite differences; mse, mae and
 * huber on float targets against Keras and by finite differences. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/loss.h"
#include "models/loss_row.h"
#include "runtime/rng.h"
#include "runtime/dmem_impl.h"
#include "tests/testutil.h"

enum { B = 4, K = 5 };

/* the class weights (K, or the by-hand case's k) loss_smoothed applies, or NULL */
static const float *class_weight;

/* mr_loss_compute through the CPU context's kernels, on host arrays (CPU
 * device memory is host memory). */
static void loss_smoothed(mr_loss_kind kind, int fused, float ls, const float *out,
                          const int32_t *labels, int batch, int k, float norm, float *dy,
                          double *sum, int64_t *correct) {
    ck_assert_int_eq(mr_loss_compute(tu_cpu_backend(), kind, fused, ls, mr_dfloat_cof(out), labels,
                                     class_weight ? mr_dfloat_cof(class_weight) : NULL, batch, k,
                                     norm, mr_dfloat_of(dy), sum, correct, 0, NULL, NULL),
                     MR_OK);
}

/* the label smoothing loss_compute (and so fd_error) applies */
static float smoothing;

static void loss_compute(mr_loss_kind kind, int fused, const float *out, const int32_t *labels,
                         int batch, int k, float norm, float *dy, double *sum, int64_t *correct) {
    loss_smoothed(kind, fused, smoothing, out, labels, batch, k, norm, dy, sum, correct);
}

/* The scalar the gradient is of: sum of per-example losses / norm. */
static double loss_of(mr_loss_kind kind, int fused, const float *out, const int32_t *labels,
                      int batch, int k, float norm) {
    double sum = 0.0;
    int64_t correct = 0;
    loss_compute(kind, fused, out, labels, batch, k, norm, NULL, &sum, &correct);
    return sum / norm;
}

/* Largest |numeric - analytic| over every output, times norm (so it is on
 * the scale of one example's gradient, whatever the batch). The step is the
 * float difference actually taken, (z + h) - (z - h) after rounding. */
static double fd_error(mr_loss_kind kind, int fused, float *out, const int32_t *labels, int batch,
                       int k, float norm, float h) {
    float *dy = malloc(sizeof(float) * (size_t)(batch * k));
    double sum = 0.0;
    int64_t correct = 0;
    loss_compute(kind, fused, out, labels, batch, k, norm, dy, &sum, &correct);
    double worst = 0.0;
    for (int i = 0; i < batch * k; i++) {
        float z = out[i];
        float zp = z + h, zm = z - h;
        out[i] = zp;
        double lp = loss_of(kind, fused, out, labels, batch, k, norm);
        out[i] = zm;
        double lm = loss_of(kind, fused, out, labels, batch, k, norm);
        out[i] = z;
        double num = (lp - lm) / ((double)zp - (double)zm);
        double e = fabs(num - dy[i]) * norm;
        if (e > worst) worst = e;
    }
    free(dy);
    return worst;
}

/* Logits uniform in [-3, 3), labels covering several classes. */
static void make_logits(float *out, int32_t *labels, uint32_t seed) {
    mr_rng_uniform(2024, MR_RNG_STREAM_INIT, seed, 0, -3.0f, 3.0f, out, B * K);
    for (int i = 0; i < B; i++)
        labels[i] = (int32_t)((i * 3 + (int)seed) % K);
}

/* Rows of probabilities, each >= 1/9 (uniform [1, 2) normalised over 5). */
static void make_probs(float *out, int32_t *labels, uint32_t seed) {
    mr_rng_uniform(2024, MR_RNG_STREAM_INIT, seed, 1, 1.0f, 2.0f, out, B * K);
    for (int i = 0; i < B; i++) {
        float s = 0.0f;
        for (int j = 0; j < K; j++)
            s += out[i * K + j];
        for (int j = 0; j < K; j++)
            out[i * K + j] /= s;
        labels[i] = (int32_t)((i * 2 + (int)seed) % K);
    }
}

/* ---- gradients by finite differences --------------------------------------- */

/* Fused softmax cross-entropy, h = 1e-2. The float evaluation of one
 * example's loss (log-sum-exp of logits below 3 in magnitude, ~4.6) is off by
 * a few ulps, delta <= ~1.5e-6; the central difference turns that into at
 * most delta / h = 1.5e-4. Truncation is h^2 / 6 * |f'''| with |f'''| < 0.1
 * for log-sum-exp: 2e-6. Bound 1e-3: above both with margin, and far below
 * what a wrong gradient gives (a dropped term or factor is >= 0.05 here). */
START_TEST(test_fd_fused_crossentropy) {
    const mr_loss_kind kinds[2] = {MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                                   MR_LOSS_CATEGORICAL_CROSSENTROPY};
    for (int kk = 0; kk < 2; kk++)
        for (uint32_t seed = 0; seed < 3; seed++) {
            float out[B * K];
            int32_t labels[B];
            make_logits(out, labels, seed);
            double e = fd_error(kinds[kk], 1, out, labels, B, K, (float)B, 1e-2f);
            ck_assert_msg(e < 1e-3, "kind %d seed %u: gradient error %g", kinds[kk], seed, e);
        }
}
END_TEST

/* Cross-entropy on probabilities (no softmax), h = 5e-4. The loss is
 * -log(p_y) evaluated in double, so rounding adds nothing measurable;
 * truncation is h^2 / 6 * 2 / p^3 <= 6e-5 for p >= 1/9. Same bound 1e-3
 * against gradients up to 9 per example. */
START_TEST(test_fd_crossentropy_on_probabilities) {
    const mr_loss_kind kinds[2] = {MR_LOSS_CATEGORICAL_CROSSENTROPY,
                                   MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY};
    for (int kk = 0; kk < 2; kk++)
        for (uint32_t seed = 0; seed < 3; seed++) {
            float out[B * K];
            int32_t labels[B];
            make_probs(out, labels, seed);
            double e = fd_error(kinds[kk], 0, out, labels, B, K, (float)B, 5e-4f);
            ck_assert_msg(e < 1e-3, "kind %d seed %u: gradient error %g", kinds[kk], seed, e);
        }
}
END_TEST

/* Mean squared error on class ids, h = 1e-2: quadratic, so no truncation error; the
 * float residual (z - onehot) is rounded to ~1e-7 relative before squaring
 * in double, delta ~ 1e-7 and delta / h ~ 1e-5. Bound 1e-3. (The flag's other value,
 * MR_LOSS_FLOAT_TARGETS, is test_fd_regression's.) */
START_TEST(test_fd_mse) {
    for (uint32_t seed = 0; seed < 3; seed++) {
        float out[B * K];
        int32_t labels[B];
        make_logits(out, labels, seed);
        double e = fd_error(MR_LOSS_MSE, 0, out, labels, B, K, (float)B, 1e-2f);
        ck_assert_msg(e < 1e-3, "seed %u: gradient error %g", seed, e);
    }
}
END_TEST

/* ---- the 1/norm scaling ---------------------------------------------------- */

/* norm is the global batch: with two replicas of B each, norm = 2B halves
 * every gradient; the loss and correct sums do not depend on it. */
START_TEST(test_norm_scaling) {
    const struct {
        mr_loss_kind kind;
        int fused;
    } cases[3] = {{MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1},
                  {MR_LOSS_CATEGORICAL_CROSSENTROPY, 0},
                  {MR_LOSS_MSE, 0}};
    for (int c = 0; c < 3; c++) {
        float out[B * K], d1[B * K], d2[B * K], half[B * K];
        int32_t labels[B];
        if (cases[c].fused || cases[c].kind == MR_LOSS_MSE)
            make_logits(out, labels, 1);
        else
            make_probs(out, labels, 1);
        double s1 = 0.0, s2 = 0.0;
        int64_t c1 = 0, c2 = 0;
        loss_compute(cases[c].kind, cases[c].fused, out, labels, B, K, (float)B, d1, &s1, &c1);
        loss_compute(cases[c].kind, cases[c].fused, out, labels, B, K, (float)(2 * B), d2, &s2,
                     &c2);
        for (int i = 0; i < B * K; i++)
            half[i] = 0.5f * d1[i];
        ck_assert_msg(tu_rel_diff(d2, half, B * K) < 1e-6, "case %d: dy(norm=2B) != dy(norm=B)/2",
                      c);
        ck_assert(fabs(s1 - s2) <= 1e-12 * fabs(s1));
        ck_assert_int_eq(c1, c2);
        /* and the loss is not divided by norm: it is the plain sum */
        double s3 = 0.0;
        int64_t c3 = 0;
        loss_compute(cases[c].kind, cases[c].fused, out, labels, B, K, 1.0f, NULL, &s3, &c3);
        ck_assert(fabs(s1 - s3) <= 1e-12 * fabs(s1));
    }
}
END_TEST

/* ---- values by hand ------------------------------------------------------------ */

START_TEST(test_fused_values_by_hand) {
    /* example 0: logits (1, 2, 3), label 2: log(e + e^2 + e^3) - 3 = 0.4076060,
     *            argmax 2, right;
     * example 1: logits (0, 1, 0.5), label 0: log(1 + e + e^0.5) = 1.6802697,
     *            argmax 1, wrong */
    const float out[6] = {1.0f, 2.0f, 3.0f, 0.0f, 1.0f, 0.5f};
    const int32_t labels[2] = {2, 0};
    float dy[6];
    double sum = 10.0; /* added to, not overwritten */
    int64_t correct = 5;
    loss_compute(MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1, out, labels, 2, 3, 2.0f, dy, &sum,
                 &correct);
    ck_assert_msg(fabs(sum - (10.0 + 0.40760596444438 + 1.68026967064173)) < 1e-5, "sum %.9g", sum);
    ck_assert_int_eq(correct, 6);
    /* dy = (softmax - onehot) / norm */
    double e1 = exp(1.0), e2 = exp(2.0), e3 = exp(3.0), s = e1 + e2 + e3;
    const double want0[3] = {e1 / s / 2, e2 / s / 2, (e3 / s - 1) / 2};
    double t = 1 + exp(1.0) + exp(0.5);
    const double want1[3] = {(1 / t - 1) / 2, exp(1.0) / t / 2, exp(0.5) / t / 2};
    for (int j = 0; j < 3; j++) {
        ck_assert_msg(fabs(dy[j] - want0[j]) < 1e-6, "dy[0][%d] = %.9g, want %.9g", j, dy[j],
                      want0[j]);
        ck_assert_msg(fabs(dy[3 + j] - want1[j]) < 1e-6, "dy[1][%d] = %.9g, want %.9g", j,
                      dy[3 + j], want1[j]);
    }
    /* categorical (one-hot) and sparse agree on integer labels */
    double sum2 = 10.0;
    int64_t correct2 = 5;
    float dy2[6];
    loss_compute(MR_LOSS_CATEGORICAL_CROSSENTROPY, 1, out, labels, 2, 3, 2.0f, dy2, &sum2,
                 &correct2);
    ck_assert(fabs(sum2 - sum) < 1e-12);
    ck_assert_int_eq(correct2, correct);
    ck_assert_mem_eq(dy2, dy, sizeof dy);
    /* without dy: the same sums */
    double sum3 = 10.0;
    int64_t correct3 = 5;
    loss_compute(MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1, out, labels, 2, 3, 2.0f, NULL, &sum3,
                 &correct3);
    ck_assert(fabs(sum3 - sum) < 1e-12);
    ck_assert_int_eq(correct3, correct);
}
END_TEST

START_TEST(test_probabilities_values_by_hand) {
    /* example 0: p = (0.2, 0.7, 0.1), label 1: -log 0.7 = 0.3566749, right;
     * example 1: p = (0.5, 0.25, 0.25), label 2: -log 0.25 = 1.3862944, wrong */
    const float out[6] = {0.2f, 0.7f, 0.1f, 0.5f, 0.25f, 0.25f};
    const int32_t labels[2] = {1, 2};
    float dy[6];
    double sum = 0.0;
    int64_t correct = 0;
    loss_compute(MR_LOSS_CATEGORICAL_CROSSENTROPY, 0, out, labels, 2, 3, 4.0f, dy, &sum, &correct);
    ck_assert_msg(fabs(sum - (0.35667494393873 + 1.38629436111989)) < 1e-6, "sum %.9g", sum);
    ck_assert_int_eq(correct, 1);
    /* d(-log p_y)/dp = -1/p_y at the label, 0 elsewhere; over norm 4 */
    const double want[6] = {0, -1 / 0.7 / 4, 0, 0, 0, -1 / 0.25 / 4};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(fabs(dy[i] - want[i]) < 1e-6, "dy[%d] = %.9g, want %.9g", i, dy[i], want[i]);
}
END_TEST

/* Keras clips probabilities to [1e-7, 1 - 1e-7]: p_y = 0 gives -log(1e-7)
 * = 16.118, not infinity, and a finite gradient. */
START_TEST(test_probabilities_clipped) {
    const float out[3] = {0.0f, 1.0f, 0.0f};
    const int32_t labels[1] = {0};
    float dy[3];
    double sum = 0.0;
    int64_t correct = 0;
    loss_compute(MR_LOSS_CATEGORICAL_CROSSENTROPY, 0, out, labels, 1, 3, 1.0f, dy, &sum, &correct);
    ck_assert_msg(isfinite(sum) && fabs(sum - 16.11809565) < 1e-4, "loss %.9g", sum);
    for (int j = 0; j < 3; j++)
        ck_assert(isfinite(dy[j]));
    ck_assert_int_eq(correct, 0);
}
END_TEST

START_TEST(test_mse_values_by_hand) {
    /* example 0: out (0.5, -1, 2), label 0: residuals (-0.5, -1, 2),
     *            mean square 5.25 / 3 = 1.75, argmax 2, wrong;
     * example 1: out (0, 0.9, 0.1), label 1: residuals (0, -0.1, 0.1),
     *            mean square 0.02 / 3, right */
    const float out[6] = {0.5f, -1.0f, 2.0f, 0.0f, 0.9f, 0.1f};
    const int32_t labels[2] = {0, 1};
    float dy[6];
    double sum = 0.0;
    int64_t correct = 0;
    loss_compute(MR_LOSS_MSE, 0, out, labels, 2, 3, 2.0f, dy, &sum, &correct);
    ck_assert_msg(fabs(sum - (1.75 + 0.02 / 3)) < 1e-6, "sum %.9g", sum);
    ck_assert_int_eq(correct, 1);
    /* d/dz of mean_j (z_j - t_j)^2 = 2 (z_j - t_j) / k; over norm 2 */
    const double res[6] = {-0.5, -1.0, 2.0, 0.0, -0.1, 0.1};
    for (int i = 0; i < 6; i++) {
        double want = 2.0 * res[i] / 3.0 / 2.0;
        ck_assert_msg(fabs(dy[i] - want) < 1e-6, "dy[%d] = %.9g, want %.9g", i, dy[i], want);
    }
}
END_TEST

/* ---- stability --------------------------------------------------------------------- */

START_TEST(test_fused_extreme_logits) {
    /* example 0: (1000, -1000, 0), label 1: loss 2000, dy = (1, -1, 0) / norm
     * example 1: (-1000, -1000, -1000), label 0: loss log 3, dy = (1/3 - 1, 1/3, 1/3)
     * example 2: (1000, 1000, -1000), label 0: loss log 2, dy = (-1/2, 1/2, 0) */
    const float out[9] = {1000.0f,  -1000.0f, 0.0f,    -1000.0f, -1000.0f,
                          -1000.0f, 1000.0f,  1000.0f, -1000.0f};
    const int32_t labels[3] = {1, 0, 0};
    float dy[9];
    double sum = 0.0;
    int64_t correct = 0;
    loss_compute(MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1, out, labels, 3, 3, 1.0f, dy, &sum,
                 &correct);
    ck_assert_msg(isfinite(sum), "loss %g", sum);
    ck_assert_msg(fabs(sum - (2000.0 + log(3.0) + log(2.0))) < 1e-3, "loss %.9g", sum);
    const double want[9] = {1, -1, 0, 1.0 / 3 - 1, 1.0 / 3, 1.0 / 3, -0.5, 0.5, 0};
    for (int i = 0; i < 9; i++) {
        ck_assert_msg(isfinite(dy[i]), "dy[%d] = %g", i, dy[i]);
        ck_assert_msg(fabs(dy[i] - want[i]) < 1e-6, "dy[%d] = %.9g, want %.9g", i, dy[i], want[i]);
    }
    /* example 0 is wrong (argmax 0); 1 and 2 are right, ties going to the
     * first index as numpy's and Keras's argmax */
    ck_assert_int_eq(correct, 2);
}
END_TEST

/* Label smoothing (Keras CategoricalCrossentropy): the gradient is the
 * loss's, from logits and from probabilities, for both cross-entropies */
START_TEST(test_fd_label_smoothing) {
    const mr_loss_kind kinds[2] = {MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                                   MR_LOSS_CATEGORICAL_CROSSENTROPY};
    smoothing = 0.1f;
    for (int kk = 0; kk < 2; kk++)
        for (uint32_t seed = 0; seed < 3; seed++) {
            float out[B * K];
            int32_t labels[B];
            make_logits(out, labels, seed);
            double e = fd_error(kinds[kk], 1, out, labels, B, K, (float)B, 1e-2f);
            ck_assert_msg(e < 1e-3, "logits, kind %d seed %u: gradient error %g", kinds[kk], seed,
                          e);
            make_probs(out, labels, seed);
            e = fd_error(kinds[kk], 0, out, labels, B, K, (float)B, 5e-4f);
            ck_assert_msg(e < 1e-3, "probabilities, kind %d seed %u: gradient error %g", kinds[kk],
                          seed, e);
        }
    smoothing = 0.0f;
}
END_TEST

/* Label smoothing 0.1 over 4 classes, by hand: targets 0.025 and 0.925;
 * the loss of logits z is logsumexp(z) - sum t z, of probabilities
 * -sum t log p; dy = softmax - t and -t / p */
START_TEST(test_label_smoothing_by_hand) {
    const float z[4] = {1.0f, 2.0f, 0.0f, -1.0f}, p[4] = {0.1f, 0.6f, 0.2f, 0.1f};
    const int32_t y = 1;
    const double t[4] = {0.025, 0.925, 0.025, 0.025};
    double lse = log(exp(1.0) + exp(2.0) + exp(0.0) + exp(-1.0)), want = lse;
    for (int j = 0; j < 4; j++)
        want -= t[j] * z[j];
    float dy[4];
    double sum = 0.0;
    int64_t correct = 0;
    loss_smoothed(MR_LOSS_CATEGORICAL_CROSSENTROPY, 1, 0.1f, z, &y, 1, 4, 2.0f, dy, &sum, &correct);
    ck_assert_msg(fabs(sum - want) < 1e-5, "loss %.9g, want %.9g", sum, want);
    for (int j = 0; j < 4; j++) {
        double g = (exp((double)z[j] - lse) - t[j]) / 2.0;
        ck_assert_msg(fabs(dy[j] - g) < 1e-6, "dy[%d] = %.9g, want %.9g", j, dy[j], g);
    }
    ck_assert_int_eq(correct, 1);
    want = 0.0;
    for (int j = 0; j < 4; j++)
        want -= t[j] * log((double)p[j]);
    sum = 0.0;
    loss_smoothed(MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 0, 0.1f, p, &y, 1, 4, 1.0f, dy, &sum,
                  &correct);
    ck_assert_msg(fabs(sum - want) < 1e-5, "loss %.9g, want %.9g", sum, want);
    for (int j = 0; j < 4; j++)
        ck_assert_msg(fabs(dy[j] + t[j] / p[j]) < 1e-5, "dy[%d] = %.9g", j, dy[j]);
}
END_TEST

/* Class weights (0.5, 1, 2) on the fused by-hand case: example 0 (label
 * 2) counts twice, example 1 (label 0) half; the sum is not divided by the
 * weights' sum (Keras's sum_over_batch_size), dy is weighted the same, the
 * correct count is not (Keras's accuracy takes no class_weight). */
START_TEST(test_class_weight_by_hand) {
    const float out[6] = {1.0f, 2.0f, 3.0f, 0.0f, 1.0f, 0.5f}, cw[3] = {0.5f, 1.0f, 2.0f};
    const int32_t labels[2] = {2, 0};
    float dy[6], dyw[6];
    double sum = 0.0, sumw = 1.0;
    int64_t correct = 0, correctw = 0;
    loss_compute(MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1, out, labels, 2, 3, 2.0f, dy, &sum,
                 &correct);
    class_weight = cw;
    loss_compute(MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1, out, labels, 2, 3, 2.0f, dyw, &sumw,
                 &correctw);
    const double want = 1.0 + 2.0 * 0.40760596444438 + 0.5 * 1.68026967064173;
    ck_assert_msg(fabs(sumw - want) < 1e-5, "sum %.9g, want %.9g", sumw, want);
    ck_assert_int_eq(correctw, correct);
    for (int j = 0; j < 3; j++) {
        ck_assert_msg(fabs(dyw[j] - 2.0 * dy[j]) < 1e-7, "dy[0][%d] %.9g", j, dyw[j]);
        ck_assert_msg(fabs(dyw[3 + j] - 0.5 * dy[3 + j]) < 1e-7, "dy[1][%d] %.9g", j, dyw[3 + j]);
    }
    /* a class of weight 0: no loss, no gradient; MSE and probabilities too */
    const float zero[3] = {1.0f, 0.0f, 1.0f};
    class_weight = zero;
    const mr_loss_kind kinds[3] = {MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, MR_LOSS_MSE,
                                   MR_LOSS_CATEGORICAL_CROSSENTROPY};
    const float probs[6] = {0.2f, 0.3f, 0.5f, 0.1f, 0.6f, 0.3f};
    const int32_t one[2] = {1, 1};
    for (int c = 0; c < 3; c++) {
        double s0 = 0.0;
        int64_t c0 = 0;
        loss_compute(kinds[c], 0, c == 1 ? out : probs, one, 2, 3, 2.0f, dyw, &s0, &c0);
        ck_assert_msg(s0 == 0.0, "kind %d: loss %g", kinds[c], s0);
        for (int j = 0; j < 6; j++)
            ck_assert_msg(dyw[j] == 0.0f, "kind %d: dy[%d] %g", kinds[c], j, dyw[j]);
    }
    /* probabilities by hand: -w log p_y */
    class_weight = cw;
    double sp = 0.0;
    int64_t cp = 0;
    loss_compute(MR_LOSS_CATEGORICAL_CROSSENTROPY, 0, probs, labels, 2, 3, 1.0f, dyw, &sp, &cp);
    const double wantp = -2.0 * log(0.5) - 0.5 * log(0.1);
    ck_assert_msg(fabs(sp - wantp) < 1e-6, "sum %.9g, want %.9g", sp, wantp);
    ck_assert_msg(fabs(dyw[2] + 2.0 / 0.5) < 1e-5 && fabs(dyw[3] + 0.5 / 0.1) < 1e-5, "dy %g %g",
                  dyw[2], dyw[3]);
    class_weight = NULL;
}
END_TEST

/* The gradients with class weights, by finite differences, with the
 * bounds of the unweighted tests (every weight is at most 2.5). */
START_TEST(test_fd_class_weight) {
    static const float cw[K] = {0.5f, 2.5f, 0.0f, 1.0f, 1.75f};
    class_weight = cw;
    for (uint32_t seed = 0; seed < 3; seed++) {
        float out[B * K];
        int32_t labels[B];
        make_logits(out, labels, seed);
        double e = fd_error(MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1, out, labels, B, K, (float)B,
                            1e-2f);
        ck_assert_msg(e < 1e-3, "logits seed %u: gradient error %g", seed, e);
        e = fd_error(MR_LOSS_MSE, 0, out, labels, B, K, (float)B, 1e-2f);
        ck_assert_msg(e < 1e-3, "mse seed %u: gradient error %g", seed, e);
        make_probs(out, labels, seed);
        e = fd_error(MR_LOSS_CATEGORICAL_CROSSENTROPY, 0, out, labels, B, K, (float)B, 5e-4f);
        ck_assert_msg(e < 1e-3, "probabilities seed %u: gradient error %g", seed, e);
    }
    class_weight = NULL;
}
END_TEST

START_TEST(test_fuses_softmax) {
    ck_assert_int_eq(mr_loss_fuses_softmax(MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY), 1);
    ck_assert_int_eq(mr_loss_fuses_softmax(MR_LOSS_CATEGORICAL_CROSSENTROPY), 1);
    ck_assert_int_eq(mr_loss_fuses_softmax(MR_LOSS_MSE), 0);
    ck_assert_int_eq(mr_loss_fuses_softmax(MR_LOSS_BINARY_CROSSENTROPY), 0);
}
END_TEST

/* ---- binary_crossentropy (one output, labels 0 and 1) ----------------------- */

/* The reference: -(t log p + (1 - t) log(1 - p)), p = sigmoid(z), in double through
 * log1p (a different formula from loss_row.h's max(z, 0) - z t + log1p(exp(-|z|))). */
static double bce_by_hand(double z, double t) {
    return t * log1p(exp(-z)) + (1.0 - t) * log1p(exp(z));
}

/* Logits, fused (a final sigmoid or from_logits), plain and smoothed (t = (1 - s) y + s / 2,
 * Keras BinaryCrossentropy): loss, dy = (sigmoid(z) - t) / norm, and binary_accuracy, z > 0
 * against the label: rows 0 and 2 right (z = 0 is p = 0.5, not above: class 0). */
START_TEST(test_bce_fused_by_hand) {
    const float out[5] = {2.0f, -1.0f, 0.0f, 30.0f, -30.0f};
    const int32_t labels[5] = {1, 1, 0, 0, 1};
    const float ls[2] = {0.0f, 0.2f};
    for (int c = 0; c < 2; c++) {
        float dy[5];
        double sum = 0.0, want = 0.0;
        int64_t correct = 0;
        loss_smoothed(MR_LOSS_BINARY_CROSSENTROPY, 1, ls[c], out, labels, 5, 1, 2.0f, dy, &sum,
                      &correct);
        for (int i = 0; i < 5; i++) {
            const double t = labels[i] * (1.0 - ls[c]) + 0.5 * ls[c];
            want += bce_by_hand(out[i], t);
            const double g = (1.0 / (1.0 + exp(-(double)out[i])) - t) / 2.0;
            ck_assert_msg(fabs(dy[i] - g) < 1e-6, "s %g dy[%d] = %.9g, want %.9g", ls[c], i, dy[i],
                          g);
        }
        ck_assert_msg(fabs(sum - want) < 1e-5 * want, "s %g: loss %.9g, want %.9g", ls[c], sum,
                      want);
        ck_assert_int_eq(correct, 2);
    }
}
END_TEST

/* Probabilities (another last activation): clipped to [1e-7, 1 - 1e-7] as Keras, no gradient
 * where clipped; binary_accuracy p > 0.5: rows 0 and 2 right. */
START_TEST(test_bce_probabilities_by_hand) {
    const float out[5] = {0.9f, 0.2f, 0.5f, 1.0f, 0.0f};
    const int32_t labels[5] = {1, 1, 0, 0, 1};
    float dy[5];
    double sum = 0.0;
    int64_t correct = 0;
    loss_smoothed(MR_LOSS_BINARY_CROSSENTROPY, 0, 0.0f, out, labels, 5, 1, 1.0f, dy, &sum,
                  &correct);
    const double want = -log((double)0.9f) - log((double)0.2f) - log(1.0 - (double)0.5f) -
                        log(1.0 - (double)(1.0f - 1e-7f)) - log((double)1e-7f);
    ck_assert_msg(fabs(sum - want) < 1e-9 * want, "loss %.12g, want %.12g", sum, want);
    const double g[5] = {-1.0 / 0.9f, -1.0 / 0.2f, 1.0 / 0.5, 0.0, 0.0};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(fabs(dy[i] - g[i]) < 1e-5, "dy[%d] = %.9g, want %.9g", i, dy[i], g[i]);
    ck_assert_int_eq(correct, 2);
}
END_TEST

/* Gradients by finite differences (one output, B rows, labels alternating): logits in
 * [-3, 3), h = 1e-2, the float loss off by ~1e-7 relative (delta / h ~ 1e-5), truncation
 * h^2 / 6 * |third derivative| < 2e-6; probabilities in [0.1, 0.9), h = 5e-4, the loss in
 * double, truncation h^2 / 6 * 2 / p^3 < 1e-4. Bound 1e-3, plain, smoothed and class
 * weighted. */
START_TEST(test_fd_bce) {
    for (int fused = 0; fused <= 1; fused++)
        for (int c = 0; c < 3; c++)
            for (uint32_t seed = 0; seed < 3; seed++) {
                const float cw[2] = {0.5f, 3.0f};
                float out[B];
                int32_t labels[B];
                mr_rng_uniform(2024, MR_RNG_STREAM_INIT, seed, 2, fused ? -3.0f : 0.1f,
                               fused ? 3.0f : 0.9f, out, B);
                for (int i = 0; i < B; i++)
                    labels[i] = (int32_t)((i + (int)seed) % 2);
                smoothing = c == 1 ? 0.1f : 0.0f;
                class_weight = c == 2 ? cw : NULL;
                double e = fd_error(MR_LOSS_BINARY_CROSSENTROPY, fused, out, labels, B, 1, (float)B,
                                    fused ? 1e-2f : 5e-4f);
                ck_assert_msg(e < 1e-3, "fused %d case %d seed %u: gradient error %g", fused, c,
                              seed, e);
            }
    smoothing = 0.0f;
    class_weight = NULL;
}
END_TEST

/* class_weight with one output: the weight of the 0/1 label, on the loss and dy */
START_TEST(test_bce_class_weight_by_hand) {
    const float out[2] = {0.5f, -2.0f}, cw[2] = {0.25f, 4.0f};
    const int32_t labels[2] = {0, 1};
    float dy[2];
    double sum = 0.0;
    int64_t correct = 0;
    class_weight = cw;
    loss_smoothed(MR_LOSS_BINARY_CROSSENTROPY, 1, 0.0f, out, labels, 2, 1, 2.0f, dy, &sum,
                  &correct);
    class_weight = NULL;
    const double want = 0.25 * bce_by_hand(0.5, 0.0) + 4.0 * bce_by_hand(-2.0, 1.0);
    ck_assert_msg(fabs(sum - want) < 1e-5 * want, "loss %.9g, want %.9g", sum, want);
    const double g0 = 0.25 * (1.0 / (1.0 + exp(-0.5))) / 2.0,
                 g1 = 4.0 * (1.0 / (1.0 + exp(2.0)) - 1.0) / 2.0;
    ck_assert_msg(fabs(dy[0] - g0) < 1e-6 && fabs(dy[1] - g1) < 1e-6, "dy %g %g, want %g %g", dy[0],
                  dy[1], g0, g1);
    ck_assert_int_eq(correct, 0);
}
END_TEST

/* ---- multi-label binary_crossentropy (k sigmoid outputs, 0/1 targets) ------- */

/* k = 3, two rows, logits (fused): Keras 3.15's BinaryCrossentropy(from_logits=True,
 * reduction=None) gives these rows 0.37777898 and 0.8831975 (the mean over the 3 outputs),
 * and BinaryAccuracy on their sigmoids 0.8333 = 5 of the 6 outputs (z = 0 is p = 0.5, class
 * 0: right). dy = (sigmoid(z) - t) / k / norm; smoothed t = (1 - s) t + s / 2 too. */
START_TEST(test_bce_multi_by_hand) {
    const float z[6] = {2.0f, -1.0f, 0.0f, 0.5f, 3.0f, -2.0f};
    const int32_t t[6] = {1, 0, 0, 1, 1, 1};
    const double keras[2] = {0.37777898, 0.8831975};
    const float ls[2] = {0.0f, 0.2f};
    for (int c = 0; c < 2; c++) {
        int hits = 0;
        for (int i = 0; i < 2; i++) {
            float d[3];
            const double l = mr_bce_multi_row(1, ls[c], z + 3 * i, t + 3 * i, 3, 0.5f, d);
            double want = 0.0;
            for (int j = 0; j < 3; j++) {
                const double tj = t[3 * i + j] * (1.0 - ls[c]) + 0.5 * ls[c];
                want += bce_by_hand(z[3 * i + j], tj) / 3.0;
                const double g = (1.0 / (1.0 + exp(-(double)z[3 * i + j])) - tj) / 3.0 * 0.5;
                ck_assert_msg(fabs(d[j] - g) < 1e-7, "s %g row %d dy[%d] = %.9g, want %.9g", ls[c],
                              i, j, d[j], g);
            }
            ck_assert_msg(fabs(l - want) < 1e-6, "s %g row %d: loss %.9g, want %.9g", ls[c], i, l,
                          want);
            if (c == 0)
                ck_assert_msg(fabs(l - keras[i]) < 1e-6, "row %d: loss %.9g, Keras %.9g", i, l,
                              keras[i]);
            hits += mr_bce_multi_hits(1, z + 3 * i, t + 3 * i, 3);
        }
        ck_assert_int_eq(hits, 5);
    }
    /* probabilities: p > 0.5 against the targets; 0.5 is class 0 */
    const float p[3] = {0.9f, 0.5f, 0.2f};
    const int32_t tp[3] = {1, 1, 0};
    ck_assert_int_eq(mr_bce_multi_hits(0, p, tp, 3), 2);
    const double want = (-log((double)0.9f) - log(0.5) - log(1.0 - (double)0.2f)) / 3.0;
    ck_assert_msg(fabs(mr_bce_multi_row(0, 0.0f, p, tp, 3, 1.0f, NULL) - want) < 1e-9,
                  "probabilities: loss %.12g, want %.12g",
                  mr_bce_multi_row(0, 0.0f, p, tp, 3, 1.0f, NULL), want);
}
END_TEST

/* The loss kernel (mr_loss_compute on the CPU) with labels (batch, k) multi-hot, k = 3: the
 * rows of test_bce_multi_by_hand, so the sum is Keras's 0.37777898 + 0.8831975, dy
 * (sigmoid(z) - t) / k / norm per output, correct the 5 matched outputs of 6 (an accuracy of
 * 5 / (2 x 3)); and by finite differences through the kernel (fd_error) for logits and
 * probabilities. */
START_TEST(test_bce_multi_kernel) {
    const float z[6] = {2.0f, -1.0f, 0.0f, 0.5f, 3.0f, -2.0f};
    const int32_t t[6] = {1, 0, 0, 1, 1, 1};
    float dy[6];
    double sum = 0.0;
    int64_t correct = 0;
    loss_smoothed(MR_LOSS_BINARY_CROSSENTROPY, 1, 0.0f, z, t, 2, 3, 4.0f, dy, &sum, &correct);
    ck_assert_msg(fabs(sum - (0.37777898 + 0.8831975)) < 1e-6, "loss sum %.9g", sum);
    ck_assert_int_eq(correct, 5);
    for (int i = 0; i < 6; i++) {
        const double g = (1.0 / (1.0 + exp(-(double)z[i])) - t[i]) / 3.0 / 4.0;
        ck_assert_msg(fabs(dy[i] - g) < 1e-7, "dy[%d] = %.9g, want %.9g", i, dy[i], g);
    }
    float out[B * 3], probs[B * 3];
    int32_t lab[B * 3];
    mr_rng_uniform(7, MR_RNG_STREAM_INIT, 0, 3, -3.0f, 3.0f, out, B * 3);
    mr_rng_uniform(7, MR_RNG_STREAM_INIT, 1, 3, 0.1f, 0.9f, probs, B * 3);
    for (int i = 0; i < B * 3; i++)
        lab[i] = (i * 5) % 3 != 1;
    double e = fd_error(MR_LOSS_BINARY_CROSSENTROPY, 1, out, lab, B, 3, (float)B, 1e-2f);
    ck_assert_msg(e < 1e-3, "logits: gradient error %g", e);
    e = fd_error(MR_LOSS_BINARY_CROSSENTROPY, 0, probs, lab, B, 3, (float)B, 5e-4f);
    ck_assert_msg(e < 1e-3, "probabilities: gradient error %g", e);
}
END_TEST

/* Gradients by finite differences, k = 3, B rows of multi-hot targets: the scalar is
 * sum over rows of mr_bce_multi_row / B, differenced in double; logits in [-3, 3) with
 * h = 1e-2 and probabilities in [0.1, 0.9) with h = 5e-4 as test_fd_bce, plain and smoothed.
 * Error times B x k (one output's gradient scale), bound 1e-3. */
START_TEST(test_fd_bce_multi) {
    enum { KM = 3 };
    for (int fused = 0; fused <= 1; fused++)
        for (int c = 0; c < 2; c++)
            for (uint32_t seed = 0; seed < 3; seed++) {
                const float ls = c ? 0.1f : 0.0f, h = fused ? 1e-2f : 5e-4f, inv = 1.0f / B;
                float z[B * KM], d[B * KM];
                int32_t t[B * KM];
                mr_rng_uniform(2024, MR_RNG_STREAM_INIT, seed, 3, fused ? -3.0f : 0.1f,
                               fused ? 3.0f : 0.9f, z, B * KM);
                for (int i = 0; i < B * KM; i++)
                    t[i] = (int32_t)((i * 7 + (int)seed) % 3 == 0);
                for (int i = 0; i < B; i++)
                    mr_bce_multi_row(fused, ls, z + KM * i, t + KM * i, KM, inv, d + KM * i);
                double worst = 0.0;
                for (int i = 0; i < B * KM; i++) {
                    const int r = i / KM;
                    const float z0 = z[i], zp = z0 + h, zm = z0 - h;
                    z[i] = zp;
                    const double lp =
                        mr_bce_multi_row(fused, ls, z + KM * r, t + KM * r, KM, inv, NULL);
                    z[i] = zm;
                    const double lm =
                        mr_bce_multi_row(fused, ls, z + KM * r, t + KM * r, KM, inv, NULL);
                    z[i] = z0;
                    const double num = (lp - lm) / ((double)zp - (double)zm) / B;
                    const double e = fabs(num - d[i]) * B * KM;
                    if (e > worst) worst = e;
                }
                ck_assert_msg(worst < 1e-3, "fused %d case %d seed %u: gradient error %g", fused, c,
                              seed, worst);
            }
}
END_TEST

/* [net] top_k: a row counts when fewer than top_k outputs are strictly
 * above its label's (TensorFlow's in_top_k, Keras 3's
 * SparseTopKCategoricalAccuracy: these rows were checked there, k = 2,
 * each 1 but the last two); every loss kind counts alike, the other sums
 * are untouched, and top_k = 0 counts nothing. */
START_TEST(test_top_k_by_hand) {
    const float out[] = {
        0.2f, 0.5f, 0.5f, 0.5f, /* label 1: 0 above (a three-way tie at the top) */
        0.2f, 0.5f, 0.5f, 0.5f, /* label 3: the same, the tie straddles k = 2 */
        0.9f, 0.5f, 0.5f, 0.1f, /* label 2: 1 above */
        0.1f, 0.1f, 0.1f, 0.1f, /* label 0: all tied, 0 above */
        0.1f, 0.3f, 0.2f, 0.0f, /* label 0: 2 above: a miss at k = 2 */
        0.1f, 0.3f, 0.2f, 0.0f, /* label 3: 3 above */
        0.9f, NAN,  0.1f, 0.0f, /* label 0: a NaN in the row: a miss, as in_top_k */
    };
    const int32_t labels[] = {1, 3, 2, 0, 0, 3, 0};
    const int n = 7;
    /* hits per k: k = 1 rows 0, 1, 3; k = 2 also row 2; k = 3 also row 4 */
    const int64_t want[4] = {0, 3, 4, 5};
    const mr_loss_kind kinds[3] = {MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                                   MR_LOSS_CATEGORICAL_CROSSENTROPY, MR_LOSS_MSE};
    for (int c = 0; c < 3; c++)
        for (int top_k = 0; top_k <= 3; top_k++) {
            double sum = 0.0, sum0 = 0.0;
            int64_t correct = 0, correct0 = 0, top = 5;
            ck_assert_int_eq(mr_loss_compute(tu_cpu_backend(), kinds[c], c < 2, 0.0f,
                                             mr_dfloat_cof(out), labels, NULL, n, 4, 1.0f, NULL,
                                             &sum, &correct, top_k, top_k ? &top : NULL, NULL),
                             MR_OK);
            ck_assert_int_eq(mr_loss_compute(tu_cpu_backend(), kinds[c], c < 2, 0.0f,
                                             mr_dfloat_cof(out), labels, NULL, n, 4, 1.0f, NULL,
                                             &sum0, &correct0, 0, NULL, NULL),
                             MR_OK);
            /* added to what was there (5) */
            if (top_k) ck_assert_int_eq(top, 5 + want[top_k]);
            ck_assert_int_eq(correct, correct0);
            ck_assert(sum == sum0 || (isnan(sum) && isnan(sum0)));
        }
}
END_TEST

/* Float targets as label words (mr_label_float's bit patterns). */
static void targets_to_words(const float *t, int32_t *w, int n) {
    memcpy(w, t, sizeof(float) * (size_t)n);
}

/* mse, mae, huber on float targets (batch 2, k 3) against Keras 3.15's MeanSquaredError,
 * MeanAbsoluteError, Huber (per-example losses, reduction=None) and the gradients TensorFlow
 * takes of their batch means (e = 0 has gradient 0 for mae and huber). */
START_TEST(test_regression_keras) {
    const float z[6] = {0.5f, -1.25f, 2.0f, 3.0f, 0.1f, -0.4f};
    const float t[6] = {1.0f, 0.25f, -0.5f, 0.5f, 0.1f, -2.0f};
    int32_t w[6];
    targets_to_words(t, w, 6);
    static const struct {
        mr_loss_kind kind;
        double loss[2];
        float grad[6];
    } cases[] = {
        {MR_LOSS_MSE, {2.9166667461395264, 2.93666672706604}, {0}},
        {MR_LOSS_MAE,
         {1.5, 1.3666666746139526},
         {-1 / 6.f, -1 / 6.f, 1 / 6.f, 1 / 6.f, 0.0f, 1 / 6.f}},
        {MR_LOSS_HUBER,
         {1.0416666269302368, 1.0333333015441895},
         {-0.0833333358f, -1 / 6.f, 1 / 6.f, 1 / 6.f, 0.0f, 1 / 6.f}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float dy[6];
        double sum = 0.0;
        int64_t correct = 7;
        loss_smoothed(cases[c].kind, MR_LOSS_FLOAT_TARGETS, 0.0f, z, w, 2, 3, 2.0f, dy, &sum,
                      &correct);
        ck_assert_msg(fabs(sum - (cases[c].loss[0] + cases[c].loss[1])) < 1e-5, "case %zu: %g", c,
                      sum);
        ck_assert_int_eq(correct, 7); /* no accuracy */
        for (int i = 0; i < 6; i++) {
            const float want = cases[c].kind == MR_LOSS_MSE ? 2.0f * (z[i] - t[i]) / 3.0f / 2.0f
                                                            : cases[c].grad[i];
            ck_assert_msg(fabsf(dy[i] - want) < 1e-6f, "case %zu dy[%d] %g want %g", c, i,
                          (double)dy[i], (double)want);
        }
    }
}
END_TEST

/* The regression losses' gradients against finite differences, on float targets and on class
 * ids (a softmax's one-hot targets), errors kept away from the kinks (0; huber's +-1). */
START_TEST(test_fd_regression) {
    const mr_loss_kind kinds[3] = {MR_LOSS_MSE, MR_LOSS_MAE, MR_LOSS_HUBER};
    float out[B * K], t[B * K];
    int32_t words[B * K], ids[B] = {0, 4, 2, 1};
    for (int i = 0; i < B * K; i++) {
        t[i] = (float)((i * 7) % 5) * 0.6f - 1.2f;
        out[i] = t[i] + ((i % 3) - 1 ? 0.35f : -2.3f) * (i % 2 ? 1.0f : -1.0f);
    }
    targets_to_words(t, words, B * K);
    for (int c = 0; c < 3; c++) {
        double e = fd_error(kinds[c], MR_LOSS_FLOAT_TARGETS, out, words, B, K, (float)B, 1e-2f);
        ck_assert_msg(e < 1e-3, "kind %d on float targets: %g", kinds[c], e);
        float o[B * K];
        for (int i = 0; i < B * K; i++)
            o[i] = 0.3f * (float)(i % 4) + 0.1f - (i % 5 == 2 ? 1.9f : 0.0f);
        e = fd_error(kinds[c], 0, o, ids, B, K, (float)B, 1e-2f);
        ck_assert_msg(e < 1e-3, "kind %d on class ids: %g", kinds[c], e);
    }
}
END_TEST

static Suite *loss_suite(void) {
    Suite *s = suite_create("loss");
    TCase *tc = tcase_create("gradients");
    tcase_add_test(tc, test_fd_fused_crossentropy);
    tcase_add_test(tc, test_fd_crossentropy_on_probabilities);
    tcase_add_test(tc, test_fd_mse);
    tcase_add_test(tc, test_fd_regression);
    tcase_add_test(tc, test_regression_keras);
    tcase_add_test(tc, test_norm_scaling);
    tcase_add_test(tc, test_fd_label_smoothing);
    tcase_add_test(tc, test_fd_bce);
    tcase_add_test(tc, test_fd_bce_multi);
    suite_add_tcase(s, tc);
    tc = tcase_create("values");
    tcase_add_test(tc, test_fused_values_by_hand);
    tcase_add_test(tc, test_probabilities_values_by_hand);
    tcase_add_test(tc, test_probabilities_clipped);
    tcase_add_test(tc, test_mse_values_by_hand);
    tcase_add_test(tc, test_fused_extreme_logits);
    tcase_add_test(tc, test_label_smoothing_by_hand);
    tcase_add_test(tc, test_fuses_softmax);
    tcase_add_test(tc, test_top_k_by_hand);
    tcase_add_test(tc, test_class_weight_by_hand);
    tcase_add_test(tc, test_fd_class_weight);
    tcase_add_test(tc, test_bce_fused_by_hand);
    tcase_add_test(tc, test_bce_probabilities_by_hand);
    tcase_add_test(tc, test_bce_class_weight_by_hand);
    tcase_add_test(tc, test_bce_multi_by_hand);
    tcase_add_test(tc, test_bce_multi_kernel);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(loss_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
