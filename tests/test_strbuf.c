/* test_strbuf.c: the growing string: formatting past its first allocation,
 * JSON string escapes, floats that read back exactly. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/strbuf.h"
#include "tests/testutil.h"

START_TEST(grows_and_takes) {
    mr_sb b;
    mr_sb_init(&b);
    for (int i = 0; i < 1000; i++)
        mr_sb_printf(&b, "%d,", i);
    char *s = mr_sb_take(&b);
    ck_assert_ptr_nonnull(s);
    ck_assert(strncmp(s, "0,1,2,", 6) == 0);
    ck_assert(strcmp(s + strlen(s) - 4, "999,") == 0);
    ck_assert_int_eq(strlen(s), 3890); /* 10 + 90*2 + 900*3 digits, 1000 commas */
    free(s);
    ck_assert_ptr_null(b.s); /* empty again */
    s = mr_sb_take(&b);      /* nothing written: an empty string, not NULL */
    ck_assert_str_eq(s, "");
    free(s);
}
END_TEST

START_TEST(json_strings) {
    mr_sb b;
    mr_sb_init(&b);
    mr_sb_json_str(&b, "a\"b\\c\nd\te\x01");
    char *s = mr_sb_take(&b);
    ck_assert_str_eq(s, "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
    free(s);
}
END_TEST

START_TEST(floats_round_trip) {
    const float v[] = {0.001f, 0.3f, 0.99f, 1e-7f, 2.0f, -0.5f, 3.14159265f, 1.0f / 3.0f, 0.0f};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        mr_sb b;
        mr_sb_init(&b);
        mr_sb_float(&b, v[i]);
        char *s = mr_sb_take(&b);
        ck_assert_msg(strtof(s, NULL) == v[i], "%s", s);
        ck_assert_msg(strpbrk(s, ".e") != NULL, "%s reads as an integer", s);
        free(s);
    }
    mr_sb b;
    mr_sb_init(&b);
    mr_sb_float(&b, 0.3f);
    mr_sb_printf(&b, " ");
    mr_sb_float(&b, 2.0f);
    mr_sb_printf(&b, " ");
    mr_sb_float(&b, 1.0f / 0.0f);
    char *s = mr_sb_take(&b);
    ck_assert_str_eq(s, "0.3 2.0 null"); /* the shortest form; JSON has no infinity */
    free(s);
}
END_TEST

int main(void) {
    Suite *s = suite_create("strbuf");
    TCase *tc = tcase_create("strbuf");
    tcase_add_test(tc, grows_and_takes);
    tcase_add_test(tc, json_strings);
    tcase_add_test(tc, floats_round_trip);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
