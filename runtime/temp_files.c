/* temp_files.c: temporary files removed on a fatal signal (temp_files.h). */
#include "runtime/temp_files.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { PATH_BYTES = 1024 };

static char paths[MR_TEMP_FILES_MAX][PATH_BYTES];
static atomic_int used[MR_TEMP_FILES_MAX]; /* 1: paths[i] is a file to remove */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int tracked; /* slots in use (under lock) */
static const int sigs[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT};
static int installed[sizeof sigs / sizeof sigs[0]]; /* ours over SIG_DFL (under lock) */

/* Async-signal-safe: unlink, sigaction, raise. */
static void on_fatal(int sig) {
    for (int i = 0; i < MR_TEMP_FILES_MAX; i++)
        if (atomic_load(&used[i])) unlink(paths[i]);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigaction(sig, &dfl, NULL);
    raise(sig); /* delivered as the handler returns: the process ends by it */
}

/* Ours over every signal whose action is the default (first file). */
static void install(void) {
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        struct sigaction old, ours = {.sa_handler = on_fatal};
        sigemptyset(&ours.sa_mask);
        installed[k] = sigaction(sigs[k], NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
                       sigaction(sigs[k], &ours, NULL) == 0;
    }
}

/* The default back where ours still is (last file). */
static void uninstall(void) {
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        struct sigaction now, dfl = {.sa_handler = SIG_DFL};
        if (installed[k] && sigaction(sigs[k], NULL, &now) == 0 && now.sa_handler == on_fatal)
            sigaction(sigs[k], &dfl, NULL);
        installed[k] = 0;
    }
}

int mr_temp_track(const char *path) {
    if (strlen(path) >= PATH_BYTES) return -1;
    pthread_mutex_lock(&lock);
    int slot = -1;
    for (int i = 0; i < MR_TEMP_FILES_MAX && slot < 0; i++)
        if (!atomic_load(&used[i])) slot = i;
    if (slot >= 0) {
        snprintf(paths[slot], PATH_BYTES, "%s", path);
        atomic_store(&used[slot], 1); /* after the path: the handler reads it then */
        if (tracked++ == 0) install();
    }
    pthread_mutex_unlock(&lock);
    return slot;
}

void mr_temp_untrack(int slot) {
    if (slot < 0 || slot >= MR_TEMP_FILES_MAX) return;
    pthread_mutex_lock(&lock);
    if (atomic_exchange(&used[slot], 0) && --tracked == 0) uninstall();
    pthread_mutex_unlock(&lock);
}
