/* test_check_sync.c: the weights' hash (strategies/check_sync.h,
 * mr_params_hash): FNV-1a of the parameters then the state, the same bits
 * whether the context's memory is host memory or is read through staging
 * copies (as a GPU's), and a different hash for one changed weight.
 * --check-sync itself: test_strategy.c (check_sync_names_replica_and_layer). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/hash.h"
#include "strategies/check_sync.h"
#include "tests/strategyutil.h"
#include "tests/testutil.h"

/* The conv/BN model of strategyutil (it has state: BN moving statistics)
 * on a CPU context, staged or not, with the weights of seed 7. */
static void bn_model(int staged, mr_backend **be, mr_config *cfg, mr_model *m) {
    char text[2048];
    snprintf(text, sizeof text, su_bn_text, "");
    mr_error err = {0};
    ck_assert_msg(mr_config_parse(text, "t.cfg", NULL, cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_backend_create(mr_backend_kind_cpu(), 0, be, NULL), MR_OK);
    (*be)->host_memory = !staged;
    ck_assert_msg(mr_model_init(m, *be, cfg, 4, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_model_init_weights(m, 7, &err), MR_OK);
}

/* n floats of p on the host (malloc'd). */
static float *host_copy(const mr_model *m, const mr_dfloat *p, int64_t n) {
    float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(mr_backend_to_host(m->be, h, p, sizeof(float) * (size_t)n, NULL), MR_OK);
    return h;
}

START_TEST(params_then_state) {
    mr_backend *be;
    mr_config cfg;
    mr_model m;
    bn_model(0, &be, &cfg, &m);
    ck_assert(m.n_state > 0);
    float *p = host_copy(&m, m.params, m.n_params), *st = host_copy(&m, m.state, m.n_state);
    uint64_t want = mr_fnv1a(p, sizeof(float) * (size_t)m.n_params, MR_FNV1A_INIT);
    want = mr_fnv1a(st, sizeof(float) * (size_t)m.n_state, want);
    uint64_t h = 0;
    mr_error err = {0};
    ck_assert_int_eq(mr_params_hash(&m, &h, &err), MR_OK);
    ck_assert_uint_eq(h, want);
    free(p), free(st);
    mr_model_free(&m);
    mr_config_free(&cfg);
    mr_backend_destroy(be);
}
END_TEST

START_TEST(staged_reads_give_the_same_hash) {
    uint64_t h[2];
    for (int staged = 0; staged < 2; staged++) {
        mr_backend *be;
        mr_config cfg;
        mr_model m;
        bn_model(staged, &be, &cfg, &m);
        /* staged: read in pieces of the staging buffer, smaller than the whole */
        if (staged) ck_assert(m.host_floats < (size_t)m.n_params);
        mr_error err = {0};
        ck_assert_int_eq(mr_params_hash(&m, &h[staged], &err), MR_OK);
        mr_model_free(&m);
        mr_config_free(&cfg);
        mr_backend_destroy(be);
    }
    ck_assert_uint_eq(h[0], h[1]);
}
END_TEST

START_TEST(one_changed_weight_changes_it) {
    mr_backend *be;
    mr_config cfg;
    mr_model m;
    bn_model(0, &be, &cfg, &m);
    uint64_t a, b, c;
    mr_error err = {0};
    ck_assert_int_eq(mr_params_hash(&m, &a, &err), MR_OK);
    float *st = host_copy(&m, m.state, m.n_state);
    st[m.n_state - 1] += 1.0f; /* the last float of the state */
    ck_assert_int_eq(mr_backend_to_device(be, m.state, st, sizeof(float) * (size_t)m.n_state, NULL),
                     MR_OK);
    ck_assert_int_eq(mr_params_hash(&m, &b, &err), MR_OK);
    ck_assert_uint_ne(a, b);
    st[m.n_state - 1] -= 1.0f;
    ck_assert_int_eq(mr_backend_to_device(be, m.state, st, sizeof(float) * (size_t)m.n_state, NULL),
                     MR_OK);
    ck_assert_int_eq(mr_params_hash(&m, &c, &err), MR_OK);
    ck_assert_uint_eq(a, c);
    free(st);
    mr_model_free(&m);
    mr_config_free(&cfg);
    mr_backend_destroy(be);
}
END_TEST

int main(void) {
    Suite *s = suite_create("check_sync");
    TCase *tc = tcase_create("check_sync");
    tcase_add_test(tc, params_then_state);
    tcase_add_test(tc, staged_reads_give_the_same_hash);
    tcase_add_test(tc, one_changed_weight_changes_it);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
