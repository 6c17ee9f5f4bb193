/* test_atomic_file.c: files written whole or not at all: commit replaces
 * the target and leaves no temporary; abort, and every failure (a missing
 * or unwritable folder, a folder as the target, a write that fails, a
 * rename that fails), leave the old target intact, no temporary behind, and
 * one line naming the path. Both forms: FILE* and path. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/atomic_file.h"
#include "tests/testutil.h"

static char dir[4096];

static void setup(void) {
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
}

/* Entries of dir (without . and ..). */
static int count_entries(const char *path) {
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "%s", path);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void in_dir(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", dir, name);
}

/* Asserts that the file holds exactly `text`. */
static void assert_text(const char *path, const char *text) {
    char *got = tu_read_file(path, NULL);
    ck_assert_msg(got != NULL, "%s missing", path);
    ck_assert_str_eq(got, text);
    free(got);
}

/* Asserts a one-line I/O error that starts with "path: cannot write" and holds `reason`. */
static void assert_error(mr_status st, const mr_error *err, const char *path, const char *reason) {
    char want[8300];
    snprintf(want, sizeof want, "%s: cannot write", path);
    ck_assert_int_eq(st, MR_ERR_IO);
    ck_assert_int_eq(err->status, MR_ERR_IO);
    ck_assert_msg(strncmp(err->msg, want, strlen(want)) == 0, "'%s', want '%s...'", err->msg, want);
    ck_assert_msg(strstr(err->msg, reason) != NULL, "'%s' lacks '%s'", err->msg, reason);
    ck_assert_msg(strchr(err->msg, '\n') == NULL, "not one line: '%s'", err->msg);
}

START_TEST(file_commit_new_and_replace) {
    char path[4200], tmp[4300];
    in_dir("out.json", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    mr_error err = {0};
    mr_atomic_file af;
    /* a new file */
    ck_assert_int_eq(mr_atomic_file_open(&af, path, &err), MR_OK);
    ck_assert_ptr_nonnull(af.f);
    ck_assert_str_eq(af.tmp, tmp); /* beside the target */
    ck_assert(tu_exists(tmp));
    ck_assert(!tu_exists(path)); /* nothing at the target before commit */
    fputs("first\n", af.f);
    ck_assert_int_eq(mr_atomic_file_commit(&af, &err), MR_OK);
    ck_assert_ptr_null(af.f);
    assert_text(path, "first\n");
    ck_assert_int_eq(count_entries(dir), 1);
    /* over an existing one, which stays as it was until the commit */
    ck_assert_int_eq(mr_atomic_file_open(&af, path, &err), MR_OK);
    fprintf(af.f, "second %d\n", 2);
    fflush(af.f);
    assert_text(path, "first\n");
    ck_assert_int_eq(mr_atomic_file_commit(&af, &err), MR_OK);
    assert_text(path, "second 2\n");
    ck_assert_int_eq(count_entries(dir), 1);
    mr_atomic_file_abort(&af); /* after commit: nothing to do */
    assert_text(path, "second 2\n");
    ck_assert_int_eq(err.status, MR_OK);
}
END_TEST

START_TEST(file_abort_keeps_old) {
    char path[4200];
    in_dir("out.json", path, sizeof path);
    free(tu_write_text(dir, "out.json", "old\n"));
    mr_error err = {0};
    mr_atomic_file af;
    ck_assert_int_eq(mr_atomic_file_open(&af, path, &err), MR_OK);
    fputs("new, half written", af.f);
    ck_assert_int_eq(count_entries(dir), 2);
    mr_atomic_file_abort(&af);
    ck_assert_ptr_null(af.f);
    assert_text(path, "old\n");
    ck_assert_int_eq(count_entries(dir), 1);
    mr_atomic_file_abort(&af); /* twice: a no-op */
    mr_atomic_file zeroed = {0};
    mr_atomic_file_abort(&zeroed); /* never opened: a no-op */
    assert_text(path, "old\n");
    ck_assert_int_eq(count_entries(dir), 1);
}
END_TEST

START_TEST(file_open_fails) {
    char path[4200];
    mr_error err = {0};
    mr_atomic_file af;
    /* a missing folder */
    in_dir("no/such/out.json", path, sizeof path);
    mr_status st = mr_atomic_file_open(&af, path, &err);
    assert_error(st, &err, path, "No such file or directory");
    ck_assert_ptr_null(af.f);
    mr_atomic_file_abort(&af); /* after a failed open: a no-op */
    ck_assert_int_eq(count_entries(dir), 0);
    /* a folder as the target */
    mr_error_clear(&err);
    in_dir("sub", path, sizeof path);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    assert_error(mr_atomic_file_open(&af, path, &err), &err, path, "Is a directory");
    ck_assert_int_eq(count_entries(dir), 1);
    ck_assert_int_eq(count_entries(path), 0);
    /* a path too long for a temporary name */
    mr_error_clear(&err);
    char long_path[MR_ATOMIC_PATH_MAX + 10];
    memset(long_path, 'x', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    st = mr_atomic_file_open(&af, long_path, &err);
    ck_assert_int_eq(st, MR_ERR_IO); /* the message, path first, is cut at 1023 characters */
    ck_assert_msg(strncmp(err.msg, long_path, 100) == 0, "%s", err.msg);
    ck_assert_ptr_null(af.f);
    ck_assert_int_eq(count_entries(dir), 1);
    /* a folder that does not take files (root writes anywhere: not tested as root) */
    if (geteuid() != 0) {
        mr_error_clear(&err);
        char ro[4100];
        in_dir("ro", ro, sizeof ro);
        ck_assert_int_eq(mkdir(ro, 0500), 0);
        snprintf(path, sizeof path, "%s/out.json", ro);
        assert_error(mr_atomic_file_open(&af, path, &err), &err, path, "Permission denied");
        ck_assert_int_eq(count_entries(ro), 0);
        chmod(ro, 0700);
    }
}
END_TEST

/* Writes past a file size limit: the writes (or the flush at commit) fail,
 * commit reports it, removes the temporary and keeps the old target. */
START_TEST(file_commit_write_fails) {
    char path[4200];
    in_dir("out.json", path, sizeof path);
    free(tu_write_text(dir, "out.json", "old\n"));
    mr_error err = {0};
    mr_atomic_file af;
    ck_assert_int_eq(mr_atomic_file_open(&af, path, &err), MR_OK);
    struct rlimit saved, small = {.rlim_cur = 4096, .rlim_max = 0};
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    small.rlim_max = saved.rlim_max;
    signal(SIGXFSZ, SIG_IGN); /* EFBIG instead of the signal */
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    for (int i = 0; i < 10000; i++)
        fprintf(af.f, "line %d of a file larger than the limit\n", i);
    mr_status st = mr_atomic_file_commit(&af, &err);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, SIG_DFL);
    assert_error(st, &err, path, "");
    ck_assert_ptr_null(af.f);
    assert_text(path, "old\n");
    ck_assert_int_eq(count_entries(dir), 1);
}
END_TEST

/* The rename fails (a folder appeared at the target): the temporary goes. */
START_TEST(file_commit_rename_fails) {
    char path[4200];
    in_dir("out.json", path, sizeof path);
    mr_error err = {0};
    mr_atomic_file af;
    ck_assert_int_eq(mr_atomic_file_open(&af, path, &err), MR_OK);
    fputs("data\n", af.f);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    assert_error(mr_atomic_file_commit(&af, &err), &err, path, "Is a directory");
    ck_assert_int_eq(count_entries(dir), 1); /* the folder only */
    ck_assert_int_eq(count_entries(path), 0);
}
END_TEST

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(path_commit_and_abort) {
    char path[4200], want[4300], tmp[4300];
    in_dir("weights.h5", path, sizeof path);
    snprintf(want, sizeof want, "%s.tmp.%d", path, (int)getpid());
    mr_error err = {0};
    /* begin names and creates the temporary (empty); the writer fills it by name */
    ck_assert_int_eq(mr_atomic_path_begin(path, tmp, sizeof tmp, &err), MR_OK);
    ck_assert_str_eq(tmp, want);
    assert_text(tmp, "");
    ck_assert(!tu_exists(path));
    write_text(tmp, "new\n");
    ck_assert_int_eq(mr_atomic_path_commit(path, tmp, &err), MR_OK);
    assert_text(path, "new\n");
    ck_assert_int_eq(count_entries(dir), 1);
    /* abort: the old file stays */
    ck_assert_int_eq(mr_atomic_path_begin(path, tmp, sizeof tmp, &err), MR_OK);
    write_text(tmp, "newer\n");
    mr_atomic_path_abort(tmp);
    assert_text(path, "new\n");
    ck_assert_int_eq(count_entries(dir), 1);
    mr_atomic_path_abort("");   /* nothing to do */
    mr_atomic_path_abort(NULL); /* nor here */
    ck_assert_int_eq(err.status, MR_OK);
}
END_TEST

START_TEST(path_failures) {
    char path[4200], tmp[4300];
    mr_error err = {0};
    /* begin in a missing folder: nothing created, tmp "" */
    in_dir("no/such/weights.h5", path, sizeof path);
    assert_error(mr_atomic_path_begin(path, tmp, sizeof tmp, &err), &err, path,
                 "No such file or directory");
    ck_assert_str_eq(tmp, "");
    ck_assert_int_eq(count_entries(dir), 0);
    /* a buffer too small for the temporary's name */
    mr_error_clear(&err);
    in_dir("weights.h5", path, sizeof path);
    char small[8];
    assert_error(mr_atomic_path_begin(path, small, sizeof small, &err), &err, path,
                 "File name too long");
    ck_assert_str_eq(small, "");
    ck_assert_int_eq(count_entries(dir), 0);
    /* commit of a temporary that is gone */
    mr_error_clear(&err);
    free(tu_write_text(dir, "weights.h5", "old\n"));
    ck_assert_int_eq(mr_atomic_path_begin(path, tmp, sizeof tmp, &err), MR_OK);
    ck_assert_int_eq(unlink(tmp), 0);
    assert_error(mr_atomic_path_commit(path, tmp, &err), &err, path, "No such file or directory");
    assert_text(path, "old\n");
    /* a rename that fails (a folder appeared at the target): the temporary goes */
    mr_error_clear(&err);
    in_dir("late.h5", path, sizeof path);
    ck_assert_int_eq(mr_atomic_path_begin(path, tmp, sizeof tmp, &err), MR_OK);
    write_text(tmp, "data\n");
    ck_assert_int_eq(mkdir(path, 0700), 0);
    assert_error(mr_atomic_path_commit(path, tmp, &err), &err, path, "Is a directory");
    ck_assert(!tu_exists(tmp));
    ck_assert_int_eq(count_entries(dir), 2); /* weights.h5 and the folder late.h5 */
    ck_assert_int_eq(count_entries(path), 0);
    /* begin on a folder */
    mr_error_clear(&err);
    assert_error(mr_atomic_path_begin(path, tmp, sizeof tmp, &err), &err, path, "Is a directory");
    ck_assert_str_eq(tmp, "");
    ck_assert_int_eq(count_entries(dir), 2);
}
END_TEST

/* mr_atomic_target_fn: targets named "a.h5" */
static int is_a(const char *name, void *user) {
    return strcmp(name, user) == 0;
}

/* A pid no process has now: a child's that has been waited for. */
static pid_t dead_pid(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    ck_assert(pid > 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    return pid;
}

/* The temporaries of a killed writer go, a live writer's and other
 * targets' stay; a missing folder is no error. */
START_TEST(remove_stale_temporaries) {
    char name[64], path[8300], first[8300] = "";
    const pid_t dead = dead_pid();
    snprintf(name, sizeof name, "a.h5.tmp.%d", (int)dead);
    free(tu_write_text(dir, name, "x"));
    snprintf(name, sizeof name, "a.h5.tmp.%d", (int)getpid()); /* alive: this test */
    free(tu_write_text(dir, name, "x"));
    snprintf(name, sizeof name, "b.h5.tmp.%d", (int)dead); /* not a target */
    free(tu_write_text(dir, name, "x"));
    free(tu_write_text(dir, "a.h5.tmp.x1", "x")); /* not a temporary's name */
    free(tu_write_text(dir, "a.h5", "x"));
    int removed = 0;
    mr_error err = {0};
    ck_assert_int_eq(mr_atomic_remove_stale(dir, is_a, "a.h5", &removed, first, sizeof first, &err),
                     MR_OK);
    ck_assert_int_eq(removed, 1);
    snprintf(path, sizeof path, "%s/a.h5.tmp.%d", dir, (int)dead);
    ck_assert_str_eq(first, path);
    ck_assert(!tu_exists(path));
    ck_assert_int_eq(count_entries(dir), 4);
    in_dir("none", path, sizeof path);
    ck_assert_int_eq(mr_atomic_remove_stale(path, is_a, "a.h5", &removed, NULL, 0, &err), MR_OK);
    ck_assert_int_eq(removed, 1);
}
END_TEST

/* A folder or a missing parent fails before any work, naming the option;
 * a new file in a writable folder and a device pass, leaving nothing. */
START_TEST(check_writable) {
    char path[8300];
    mr_error err = {0};
    ck_assert_int_eq(mr_atomic_check_writable("--save", NULL, &err), MR_OK);
    in_dir("new.h5", path, sizeof path);
    ck_assert_int_eq(mr_atomic_check_writable("--save", path, &err), MR_OK);
    ck_assert_int_eq(count_entries(dir), 0);
    ck_assert_int_eq(mr_atomic_check_writable("--log", "/dev/null", &err), MR_OK);
    ck_assert_int_eq(mr_atomic_check_writable("--save", dir, &err), MR_ERR_IO);
    ck_assert_msg(strncmp(err.msg, "--save ", 7) == 0 && strstr(err.msg, "Is a directory"), "%s",
                  err.msg);
    mr_error_clear(&err);
    in_dir("none/new.h5", path, sizeof path);
    ck_assert_int_eq(mr_atomic_check_writable("--json", path, &err), MR_ERR_IO);
    ck_assert_msg(strncmp(err.msg, "--json ", 7) == 0, "%s", err.msg);
    ck_assert_msg(strchr(err.msg, '\n') == NULL, "not one line: %s", err.msg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("atomic_file");
    TCase *tc = tcase_create("atomic_file");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, file_commit_new_and_replace);
    tcase_add_test(tc, file_abort_keeps_old);
    tcase_add_test(tc, file_open_fails);
    tcase_add_test(tc, file_commit_write_fails);
    tcase_add_test(tc, file_commit_rename_fails);
    tcase_add_test(tc, path_commit_and_abort);
    tcase_add_test(tc, path_failures);
    tcase_add_test(tc, remove_stale_temporaries);
    tcase_add_test(tc, check_writable);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
