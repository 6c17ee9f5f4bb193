/* h5_lock.c: the process's HDF5 lock (h5_lock.h). */
#include "runtime/h5_lock.h"

#include <pthread.h>

#include "runtime/isolate.h"

static pthread_mutex_t h5_mutex = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void mr_h5_lock(void) {
    if (!mr_isolate_in_child()) pthread_mutex_lock(&h5_mutex);
}

void mr_h5_unlock(void) {
    if (!mr_isolate_in_child()) pthread_mutex_unlock(&h5_mutex);
}
