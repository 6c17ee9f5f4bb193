/* isolate.c: a reader's trial run in a child process (isolate.h). */
#include "runtime/isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/h5_lock.h"

/* Under a sanitizer (the tests, the fuzz harnesses) its death callback
 * would report the child's crash as the parent's (libFuzzer writes its
 * crash file): the child clears it. Weak: absent from a plain build. */
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

enum { CHILD_OK = 0, CHILD_REFUSED = 3 };

/* The child, before fn: it dies with its parent (a parent killed while it
 * waits leaves no orphan reading on), and after `seconds`; a crash or a
 * signal kills it outright (no sanitizer report, no core, none of the
 * parent's handlers); its output goes to /dev/null. */
static void child_setup(pid_t parent, unsigned seconds) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(CHILD_OK);
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(NULL);
    const int sigs[] = {SIGSEGV, SIGBUS,  SIGFPE,  SIGILL, SIGABRT, SIGTERM,
                        SIGINT,  SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT, SIGALRM};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    alarm(seconds);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
}

mr_status mr_isolate(const char *path, const char *what, mr_status (*fn)(void *arg), void *arg,
                     mr_error *err) {
    return mr_isolate_timed(path, what, fn, arg, MR_ISOLATE_SECONDS, err);
}

static int in_child;

int mr_isolate_in_child(void) {
    return in_child;
}

mr_status mr_isolate_timed(const char *path, const char *what, mr_status (*fn)(void *arg),
                           void *arg, unsigned seconds, mr_error *err) {
    fflush(NULL); /* nothing buffered is written twice */
    const pid_t parent = getpid();
    /* no other thread inside HDF5 while the child is made (h5_lock.h) */
    mr_h5_lock();
    pid_t pid = fork();
    if (pid != 0) mr_h5_unlock(); /* the child never gives it back: it has no other thread */
    if (pid < 0) return MR_OK;
    if (pid == 0) {
        in_child = 1;
        mr_h5_lock_in_child();
        child_setup(parent, seconds);
        mr_status st = fn(arg);
        _exit(st == MR_OK ? CHILD_OK : CHILD_REFUSED); /* no atexit: HDF5, leak checks */
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR) return MR_OK;
    if (WIFEXITED(ws) && (WEXITSTATUS(ws) == CHILD_OK || WEXITSTATUS(ws) == CHILD_REFUSED))
        return MR_OK;
    if (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGALRM)
        return mr_error_set(err, MR_ERR_DATA, "%s: %s did not finish reading it in %u s", path,
                            what, seconds);
    char how[64];
    if (WIFSIGNALED(ws))
        snprintf(how, sizeof how, "SIG%s",
                 sigabbrev_np(WTERMSIG(ws)) ? sigabbrev_np(WTERMSIG(ws)) : "?");
    else
        snprintf(how, sizeof how, "exit %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    return mr_error_set(err, MR_ERR_DATA, "%s: %s crashed reading it (%s): the file is damaged",
                        path, what, how);
}
