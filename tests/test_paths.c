/* test_paths.c: inputs that are not regular files are refused without
 * blocking (a FIFO with no writer); outputs that are the same file as an
 * input or another output are found by inode and by normalized path;
 * devices may be shared by outputs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/paths.h"
#include "tests/testutil.h"

START_TEST(input_kinds) {
    const char *dir = tu_tmpdir();
    char *reg = tu_write_text(dir, "a.txt", "x"), fifo[4096];
    snprintf(fifo, sizeof fifo, "%s/p.fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    mr_error err = {0};
    err = (mr_error){0};
    ck_assert_int_eq(mr_path_check_regular("--resume", reg, 0, &err), MR_OK);
    err = (mr_error){0};
    ck_assert_int_eq(mr_path_check_regular("--resume", "no/such/file", 0, &err), MR_OK);
    err = (mr_error){0};
    ck_assert_int_eq(mr_path_check_regular(NULL, dir, 1, &err), MR_OK);
    err = (mr_error){0};
    ck_assert_int_eq(mr_path_check_regular(NULL, dir, 0, &err), MR_ERR_IO);
    ck_assert_msg(strstr(err.msg, "not a regular file (a folder)"), "%s", err.msg);
    err = (mr_error){0};
    ck_assert_int_eq(mr_path_check_regular("--resume", fifo, 0, &err), MR_ERR_IO);
    ck_assert_msg(strstr(err.msg, "--resume ") == err.msg && strstr(err.msg, "(a FIFO)"), "%s",
                  err.msg);
    err = (mr_error){0};
    ck_assert_int_eq(mr_path_check_regular(NULL, "/dev/zero", 1, &err), MR_ERR_IO);
    ck_assert_msg(strcmp(err.msg, "/dev/zero: not a regular file (a character device)") == 0, "%s",
                  err.msg);
    ck_assert_str_eq(mr_path_kind(S_IFSOCK), "a socket");
    ck_assert_ptr_null(mr_path_kind(S_IFREG));
    free(reg);
}
END_TEST

START_TEST(same_file) {
    const char *dir = tu_tmpdir();
    char *reg = tu_write_text(dir, "m.cfg", "x"), alias[4096], missing[4096], missing2[4096];
    snprintf(alias, sizeof alias, "%s//./m.cfg", dir);
    ck_assert(mr_path_same(reg, alias));
    snprintf(alias, sizeof alias, "%s/hard.cfg", dir);
    ck_assert_int_eq(link(reg, alias), 0);
    ck_assert(mr_path_same(reg, alias)); /* a hard link: the same inode */
    snprintf(missing, sizeof missing, "%s/out.csv", dir);
    snprintf(missing2, sizeof missing2, "%s/./out.csv", dir);
    ck_assert(mr_path_same(missing, missing2));
    ck_assert(!mr_path_same(missing, reg));
    ck_assert(mr_path_same("a/../b/x", "a/../b//x")); /* no such folder: lexical */
    free(reg);
}
END_TEST

START_TEST(distinct) {
    const char *dir = tu_tmpdir();
    char *cfg = tu_write_text(dir, "d.cfg", "x"), out[4096];
    snprintf(out, sizeof out, "%s/new.json", dir);
    mr_error err = {0};
    mr_path_use uses[] = {{"MODEL.cfg", cfg, 0},
                          {"--json", out, 1},
                          {"--metrics", "/dev/null", 1},
                          {"--log", "/dev/null", 1},
                          {"--save", NULL, 1}};
    err = (mr_error){0};
    ck_assert_int_eq(mr_path_check_distinct(uses, 5, &err), MR_OK);
    uses[4].path = cfg;
    err = (mr_error){0};
    ck_assert_int_eq(mr_path_check_distinct(uses, 5, &err), MR_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "--save ") == err.msg && strstr(err.msg, "is also MODEL.cfg"),
                  "%s", err.msg);
    uses[4].path = out; /* two outputs, one file that does not exist yet */
    err = (mr_error){0};
    ck_assert_int_eq(mr_path_check_distinct(uses, 5, &err), MR_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "--json ") == err.msg && strstr(err.msg, "is also --save"), "%s",
                  err.msg);
    free(cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("paths");
    TCase *tc = tcase_create("paths");
    tcase_add_test(tc, input_kinds);
    tcase_add_test(tc, same_file);
    tcase_add_test(tc, distinct);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
