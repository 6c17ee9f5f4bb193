/* test_json.c: the streaming JSON writer: commas, keys and line breaks of
 * BLOCK and INLINE containers at any depth, empty containers, indent 0,
 * string escapes (checked as text and read back by Python's json module),
 * UTF-8 passed through, integers, doubles in a given format and non-finite
 * ones as null, booleans, null, write errors reported by finish, and
 * misuse caught by an assertion. */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/json.h"
#include "tests/testutil.h"

/* A writer into memory: begin, then take() returns the text (malloc'd). */
static FILE *mem;
static char *mem_buf;
static size_t mem_len;

static mr_json *begin(mr_json *j, int indent) {
    mem = open_memstream(&mem_buf, &mem_len);
    ck_assert_ptr_nonnull(mem);
    mr_json_init(j, mem, indent);
    return j;
}

static char *take(mr_json *j) {
    ck_assert_int_eq(mr_json_finish(j), 0);
    fclose(mem);
    return mem_buf;
}

static void assert_text(char *got, const char *want) {
    ck_assert_msg(strcmp(got, want) == 0, "got:\n%s\nwant:\n%s", got, want);
    free(got);
}

START_TEST(block_and_inline) {
    mr_json j;
    begin(&j, 2);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_key(&j, "epochs");
    mr_json_int(&j, 3);
    mr_json_key(&j, "run");
    mr_json_begin_object(&j, MR_JSON_INLINE);
    mr_json_key(&j, "label");
    mr_json_string(&j, "cpu");
    mr_json_key(&j, "epochs");
    mr_json_int(&j, 3);
    mr_json_key(&j, "nested");
    mr_json_begin_array(&j, MR_JSON_BLOCK); /* inside an inline container: inline too */
    mr_json_int(&j, 1);
    mr_json_int(&j, 2);
    mr_json_end_array(&j);
    mr_json_end_object(&j);
    mr_json_key(&j, "only_in_a");
    mr_json_begin_array(&j, MR_JSON_INLINE);
    mr_json_end_array(&j);
    mr_json_key(&j, "empty_block");
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_end_object(&j);
    mr_json_key(&j, "per_epoch");
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    for (int e = 0; e < 2; e++) {
        mr_json_begin_object(&j, MR_JSON_INLINE);
        mr_json_key(&j, "epoch");
        mr_json_int(&j, e);
        mr_json_key(&j, "loss");
        mr_json_begin_object(&j, MR_JSON_INLINE);
        mr_json_key(&j, "a");
        mr_json_double(&j, 0.5 + e, "%.10g");
        mr_json_key(&j, "b");
        mr_json_null(&j);
        mr_json_end_object(&j);
        mr_json_end_object(&j);
    }
    mr_json_end_array(&j);
    mr_json_key(&j, "confusion");
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    for (int r = 0; r < 2; r++) {
        mr_json_begin_array(&j, MR_JSON_INLINE);
        for (int c = 0; c < 3; c++)
            mr_json_double(&j, r * 3 + c, "%.0f");
        mr_json_end_array(&j);
    }
    mr_json_end_array(&j);
    mr_json_end_object(&j);
    assert_text(take(&j), "{\n"
                          "  \"epochs\": 3,\n"
                          "  \"run\": {\"label\": \"cpu\", \"epochs\": 3, \"nested\": [1, 2]},\n"
                          "  \"only_in_a\": [],\n"
                          "  \"empty_block\": {},\n"
                          "  \"per_epoch\": [\n"
                          "    {\"epoch\": 0, \"loss\": {\"a\": 0.5, \"b\": null}},\n"
                          "    {\"epoch\": 1, \"loss\": {\"a\": 1.5, \"b\": null}}\n"
                          "  ],\n"
                          "  \"confusion\": [\n"
                          "    [0, 1, 2],\n"
                          "    [3, 4, 5]\n"
                          "  ]\n"
                          "}\n");
}
END_TEST

/* indent 0: everything on one line; a wider indent; a top-level array and scalar. */
START_TEST(indent_and_top_level) {
    mr_json j;
    begin(&j, 0);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_key(&j, "a");
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    mr_json_bool(&j, 1);
    mr_json_bool(&j, 0);
    mr_json_end_array(&j);
    mr_json_key(&j, "b");
    mr_json_null(&j);
    mr_json_end_object(&j);
    assert_text(take(&j), "{\"a\": [true, false], \"b\": null}\n");

    begin(&j, 4);
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    mr_json_int(&j, 1);
    mr_json_end_array(&j);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_end_object(&j);
    mr_json_end_array(&j);
    assert_text(take(&j), "[\n    [\n        1\n    ],\n    {}\n]\n");

    begin(&j, 2);
    mr_json_string(&j, "alone");
    assert_text(take(&j), "\"alone\"\n");
}
END_TEST

/* Every escape, in values and keys; UTF-8 and DEL as they are. */
static const char tricky[] = "q\"b\\s/ \b\f\n\r\t\x01\x1f\x7f caf\xc3\xa9 \xe2\x82\xac";
static const char tricky_json[] =
    "\"q\\\"b\\\\s/ \\b\\f\\n\\r\\t\\u0001\\u001f\x7f caf\xc3\xa9 \xe2\x82\xac\"";

START_TEST(string_escapes) {
    mr_json j;
    begin(&j, 0);
    mr_json_string(&j, tricky);
    char want[256];
    snprintf(want, sizeof want, "%s\n", tricky_json);
    assert_text(take(&j), want);

    begin(&j, 0);
    mr_json_begin_object(&j, MR_JSON_INLINE);
    mr_json_key(&j, tricky);
    mr_json_string(&j, "");
    mr_json_end_object(&j);
    snprintf(want, sizeof want, "{%s: \"\"}\n", tricky_json);
    assert_text(take(&j), want);
}
END_TEST

/* The same strings read back by a JSON parser give the bytes written. */
START_TEST(strings_read_back) {
    char *dir = strdup(tu_tmpdir());
    char path[4200];
    snprintf(path, sizeof path, "%s/t.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    mr_json j;
    mr_json_init(&j, f, 2);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_key(&j, tricky);
    mr_json_string(&j, tricky);
    mr_json_end_object(&j);
    ck_assert_int_eq(mr_json_finish(&j), 0);
    ck_assert_int_eq(fclose(f), 0);
    char cmd[8192], *out;
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys; d = json.load(open(sys.argv[1], encoding=\"utf-8\")); "
             "[(k, v)] = d.items(); assert k == v, (k, v); sys.stdout.buffer.write(v.encode())' "
             "'%s'",
             path);
    int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "%s", out);
    ck_assert_msg(strcmp(out, tricky) == 0, "read back: '%s'", out);
    free(out);
    free(dir);
}
END_TEST

START_TEST(numbers) {
    mr_json j;
    begin(&j, 0);
    mr_json_begin_array(&j, MR_JSON_INLINE);
    mr_json_int(&j, 0);
    mr_json_int(&j, -42);
    mr_json_int(&j, LLONG_MAX);
    mr_json_int(&j, LLONG_MIN);
    mr_json_double(&j, 0.25, "%.6f");
    mr_json_double(&j, 2000.0, "%.10g");
    mr_json_double(&j, 1.0 / 3.0, "%.3g");
    mr_json_double(&j, 0.1, NULL); /* reads back exactly */
    mr_json_double(&j, NAN, "%.6f");
    mr_json_double(&j, INFINITY, "%.6f");
    mr_json_double(&j, -INFINITY, NULL);
    mr_json_end_array(&j);
    assert_text(take(&j), "[0, -42, 9223372036854775807, -9223372036854775808, 0.250000, 2000, "
                          "0.333, 0.10000000000000001, null, null, null]\n");
    ck_assert(strtod("0.10000000000000001", NULL) == 0.1);
}
END_TEST

START_TEST(stringf_short_and_long) {
    mr_json j;
    begin(&j, 0);
    mr_json_begin_array(&j, MR_JSON_INLINE);
    mr_json_stringf(&j, "%s:%d", "gpu", 1);
    mr_json_stringf(&j, "%016llx", 0xabcull);
    char long_text[1001];
    memset(long_text, 'y', 1000);
    long_text[1000] = '\0';
    mr_json_stringf(&j, "\"%s\"", long_text); /* past the writer's stack buffer, escaped */
    mr_json_end_array(&j);
    char *got = take(&j);
    char head[] = "[\"gpu:1\", \"0000000000000abc\", \"\\\"yyy";
    ck_assert_msg(strncmp(got, head, strlen(head)) == 0, "%s", got);
    ck_assert_int_eq(strlen(got), strlen(head) - 3 + 1000 + strlen("\\\"\"]\n"));
    ck_assert_str_eq(got + strlen(got) - 6, "y\\\"\"]\n");
    free(got);
}
END_TEST

/* A FILE whose writes fail: finish says so. */
START_TEST(finish_reports_write_errors) {
    FILE *f = fopen("/dev/full", "w");
    if (f == NULL) {
        fprintf(stderr, "test_json: finish_reports_write_errors SKIPPED: no /dev/full\n");
        return;
    }
    mr_json j;
    mr_json_init(&j, f, 2);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_key(&j, "k");
    mr_json_string(&j, "v");
    mr_json_end_object(&j);
    ck_assert_int_eq(mr_json_finish(&j), -1);
    fclose(f);
}
END_TEST

/* Misuse is a programmer error: MR_ASSERT aborts. */
START_TEST(value_without_key_aborts) {
    mr_json j;
    begin(&j, 2);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_int(&j, 1);
}
END_TEST

START_TEST(mismatched_end_aborts) {
    mr_json j;
    begin(&j, 2);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_end_array(&j);
}
END_TEST

START_TEST(unfinished_document_aborts) {
    mr_json j;
    begin(&j, 2);
    mr_json_begin_array(&j, MR_JSON_BLOCK);
    mr_json_finish(&j);
}
END_TEST

int main(void) {
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, block_and_inline);
    tcase_add_test(tc, indent_and_top_level);
    tcase_add_test(tc, string_escapes);
    tcase_add_test(tc, strings_read_back);
    tcase_add_test(tc, numbers);
    tcase_add_test(tc, stringf_short_and_long);
    tcase_add_test(tc, finish_reports_write_errors);
    tcase_add_test_raise_signal(tc, value_without_key_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, mismatched_end_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, unfinished_document_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
