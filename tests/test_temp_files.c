/* test_temp_files.c: a tracked temporary file is removed when a signal
 * ends the process (which still ends by that signal); an untracked one,
 * or one under a program's own handler, is left to its owner; the default
 * action comes back with the last file; a full table says so. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/temp_files.h"
#include "tests/testutil.h"

static void make_file(const char *path) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("weights", f);
    fclose(f);
}

/* Forks a child that makes `path`, tracks it (untracks it again if
 * untrack), then raises sig; its wait status. */
static int child_raises(const char *path, int untrack, int sig) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        make_file(path);
        int slot = mr_temp_track(path);
        if (slot < 0) _exit(3);
        if (untrack) mr_temp_untrack(slot);
        raise(sig);
        _exit(0);
    }
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    return ws;
}

START_TEST(signal_removes_tracked) {
    const int sigs[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT};
    char path[512];
    snprintf(path, sizeof path, "%s/tmp%d.h5", tu_tmpdir(), _i);
    signal(sigs[_i], SIG_DFL); /* as a program that set none */
    const int ws = child_raises(path, 0, sigs[_i]);
    ck_assert_msg(WIFSIGNALED(ws) && WTERMSIG(ws) == sigs[_i], "status %d", ws);
    ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

START_TEST(untracked_is_left) {
    char path[512];
    snprintf(path, sizeof path, "%s/kept.h5", tu_tmpdir());
    signal(SIGTERM, SIG_DFL);
    const int ws = child_raises(path, 1, SIGTERM);
    ck_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGTERM);
    ck_assert_int_eq(access(path, F_OK), 0);
    unlink(path);
}
END_TEST

static volatile sig_atomic_t handled;
static void own_handler(int sig) {
    handled = sig;
}

/* A program's own handler stays, and the file is its to remove. */
START_TEST(own_handler_left_alone) {
    char path[512];
    snprintf(path, sizeof path, "%s/own.h5", tu_tmpdir());
    make_file(path);
    signal(SIGTERM, own_handler);
    int slot = mr_temp_track(path);
    ck_assert_int_ge(slot, 0);
    raise(SIGTERM);
    ck_assert_int_eq(handled, SIGTERM);
    ck_assert_int_eq(access(path, F_OK), 0);
    mr_temp_untrack(slot);
    struct sigaction now;
    ck_assert_int_eq(sigaction(SIGTERM, NULL, &now), 0);
    ck_assert_ptr_eq(now.sa_handler, own_handler);
    signal(SIGTERM, SIG_DFL);
    unlink(path);
}
END_TEST

/* The default action is back once no file is tracked; a full table and a
 * path too long give -1. */
START_TEST(default_back_and_full) {
    signal(SIGHUP, SIG_DFL);
    int slots[MR_TEMP_FILES_MAX];
    for (int i = 0; i < MR_TEMP_FILES_MAX; i++)
        ck_assert_int_ge(slots[i] = mr_temp_track("/nonexistent/x"), 0);
    ck_assert_int_eq(mr_temp_track("/nonexistent/y"), -1);
    struct sigaction now;
    ck_assert_int_eq(sigaction(SIGHUP, NULL, &now), 0);
    ck_assert_ptr_ne(now.sa_handler, SIG_DFL);
    for (int i = 0; i < MR_TEMP_FILES_MAX; i++)
        mr_temp_untrack(slots[i]);
    mr_temp_untrack(-1);
    ck_assert_int_eq(sigaction(SIGHUP, NULL, &now), 0);
    ck_assert_ptr_eq(now.sa_handler, SIG_DFL);
    char *longer = malloc(5000);
    memset(longer, 'a', 4999);
    longer[4999] = '\0';
    ck_assert_int_eq(mr_temp_track(longer), -1);
    free(longer);
}
END_TEST

int main(void) {
    Suite *s = suite_create("temp_files");
    TCase *tc = tcase_create("temp_files");
    tcase_add_loop_test(tc, signal_removes_tracked, 0, 4);
    tcase_add_test(tc, untracked_is_left);
    tcase_add_test(tc, own_handler_left_alone);
    tcase_add_test(tc, default_back_and_full);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
