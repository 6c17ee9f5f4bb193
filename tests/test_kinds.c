/* test_kinds.c: every table made from the list of layer kinds
 * (models/layer_kinds.def) has an entry for every kind: the layer
 * definitions (mr_layer_ops_for, models/layer.c) with what the .cfg
 * reader and the Keras importer read in them, each device kind's kernels
 * (backends/cpu/kernels_cpu.c, backends/cuda/kernels_cuda.c), the .cfg
 * section names (mr_layer_kind_name, models/layer_kinds.c) and their
 * place among the sections the parser and the reference know. Each of
 * those tables checks its size against MR_LAYER_KIND_COUNT at compile
 * time; this test checks what the compiler cannot: an entry's contents. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backends.h"
#include "models/config.h"
#include "models/config_keys.h"
#include "models/kernels.h"
#include "tests/testutil.h"

/* Every kind has a .cfg section name of its own, and the bounds say "?". */
START_TEST(every_kind_named) {
    for (int k = 0; k < MR_LAYER_KIND_COUNT; k++) {
        const char *name = mr_layer_kind_name((mr_layer_kind)k);
        ck_assert_msg(name != NULL && name[0] != '\0' && strcmp(name, "?") != 0,
                      "layer kind %d has no section name", k);
        for (int j = 0; j < k; j++)
            ck_assert_msg(strcmp(name, mr_layer_kind_name((mr_layer_kind)j)) != 0,
                          "layer kinds %d and %d are both [%s]", j, k, name);
    }
    ck_assert_str_eq(mr_layer_kind_name(MR_LAYER_KIND_COUNT), "?");
    ck_assert_str_eq(mr_layer_kind_name((mr_layer_kind)-1), "?");
}
END_TEST

/* Every kind's section is one the parser opens as that kind (its keys may
 * still be missing: only the section is asked about). */
START_TEST(every_kind_parsed) {
    const char *head = "[net]\n[data]\ntrain_images=a\ntrain_labels=b\n[input]\nshape=4,4,2\n";
    for (int k = MR_LAYER_INPUT + 1; k < MR_LAYER_KIND_COUNT; k++) {
        const char *name = mr_layer_kind_name((mr_layer_kind)k);
        char text[256];
        snprintf(text, sizeof text, "%s[%s]\n", head, name);
        mr_config cfg;
        mr_error err = {0};
        mr_status st = mr_config_parse(text, "t.cfg", NULL, &cfg, &err);
        if (st == MR_OK) {
            ck_assert_int_ge(cfg.n_layers, 2);
            ck_assert_int_eq(cfg.layers[1].kind, k);
            mr_config_free(&cfg);
        } else {
            ck_assert_msg(strstr(err.msg, "unknown section") == NULL, "[%s]: %s", name, err.msg);
        }
    }
}
END_TEST

/* Every kind's section has a line in the reference (--help-config). */
START_TEST(every_kind_in_the_reference) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    mr_config_write_reference(f, 0);
    fclose(f);
    for (int k = 0; k < MR_LAYER_KIND_COUNT; k++) {
        char want[64];
        snprintf(want, sizeof want, "[%s]", mr_layer_kind_name((mr_layer_kind)k));
        ck_assert_msg(strstr(text, want) != NULL, "%s is not in the reference", want);
    }
    free(text);
}
END_TEST

/* Every kind but the input has its definition, with the Keras names the
 * summary and the .keras archives need. */
START_TEST(every_kind_defined) {
    ck_assert_ptr_null(mr_layer_ops_for(MR_LAYER_INPUT));
    for (int k = MR_LAYER_INPUT + 1; k < MR_LAYER_KIND_COUNT; k++) {
        const mr_layer_ops *ops = mr_layer_ops_for((mr_layer_kind)k);
        const char *name = mr_layer_kind_name((mr_layer_kind)k);
        ck_assert_msg(ops != NULL, "[%s] has no mr_layer_ops (models/layer.c)", name);
        ck_assert_msg(ops->setup != NULL, "[%s] has no setup", name);
        ck_assert_msg(ops->class_name && ops->keras_name, "[%s] has no Keras names", name);
        ck_assert_msg(ops->section_help && ops->section_help[0], "[%s] has no section_help", name);
        ck_assert_msg(ops->keras_args != NULL, "[%s] has no Keras import table", name);
        ck_assert_msg((ops->keys == NULL) == (ops->n_keys == 0), "[%s]: keys and n_keys", name);
        /* each key row names its own section, as the reference prints it */
        for (int i = 0; i < ops->n_keys; i++)
            ck_assert_msg(strcmp(ops->keys[i].section, name) == 0, "[%s] key %s is of [%s]", name,
                          ops->keys[i].key, ops->keys[i].section);
    }
    ck_assert_ptr_null(mr_layer_ops_for(MR_LAYER_KIND_COUNT));
    ck_assert_ptr_null(mr_layer_ops_for((mr_layer_kind)-1));
}
END_TEST

/* Every device kind of the build has every layer kind's kernels. */
START_TEST(every_kind_has_kernels_everywhere) {
    int n = 0;
    const mr_backend_kind *const *kinds = mr_backend_kinds(&n);
    ck_assert_int_ge(n, 1);
    for (int i = 0; i < n; i++) {
        const mr_kernels *kt = kinds[i]->ops->kernels;
        ck_assert_ptr_nonnull(kt);
        ck_assert_ptr_nonnull(kt->layer);
        ck_assert_ptr_null(kt->layer[MR_LAYER_INPUT]);
        for (int k = MR_LAYER_INPUT + 1; k < MR_LAYER_KIND_COUNT; k++) {
            const mr_layer_kernels *lk = kt->layer[k];
            ck_assert_msg(lk != NULL && lk->forward != NULL && lk->backward != NULL,
                          "no %s kernels for [%s]", kinds[i]->name,
                          mr_layer_kind_name((mr_layer_kind)k));
        }
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("kinds");
    TCase *tc = tcase_create("kinds");
    tcase_add_test(tc, every_kind_named);
    tcase_add_test(tc, every_kind_parsed);
    tcase_add_test(tc, every_kind_in_the_reference);
    tcase_add_test(tc, every_kind_defined);
    tcase_add_test(tc, every_kind_has_kernels_everywhere);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
