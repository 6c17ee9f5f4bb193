/* h5_lock.c: the process's HDF5 lock (h5_lock.h). */
#include "runtime/h5_lock.h"

#include <pthread.h>

#include <hdf5.h>

static pthread_mutex_t h5_mutex = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int in_child; /* of a fork made holding the lock: one thread, no locking */

void mr_h5_lock(void) {
    if (!in_child) pthread_mutex_lock(&h5_mutex);
}

void mr_h5_no_exit_cleanup(void) {
    (void)H5dont_atexit(); /* fails, harmlessly, where HDF5 is already in use */
}

void mr_h5_unlock(void) {
    if (!in_child) pthread_mutex_unlock(&h5_mutex);
}

void mr_h5_lock_in_child(void) {
    in_child = 1;
}
