/* h5_lock.h: one HDF5 user at a time in this process, and none inside
 * HDF5 when mr_isolate forks.
 *
 * Debian's libhdf5 is thread-safe: one global lock, held by a thread for
 * the length of each HDF5 call. fork() copies that lock as it is; if
 * another thread was inside HDF5 at that moment, the child's only thread
 * waits on it forever (a valid file then looked like a reader that never
 * ends). Every use of HDF5 in this library (runtime/h5file.c's sessions,
 * from open or create to close or commit, and array.c's one read) holds
 * this lock, and mr_isolate forks holding it: no thread is inside HDF5
 * then. The lock is recursive (a session may open a second file); in the
 * child of mr_isolate, which has one thread, both calls do nothing
 * (mr_h5_lock_in_child). */
#ifndef MR_H5_LOCK_H
#define MR_H5_LOCK_H

/* Takes the process's HDF5 lock (waits for another thread's session). */
void mr_h5_lock(void);

/* Gives back one mr_h5_lock of this thread. */
void mr_h5_unlock(void);

/* Called first in the child of a fork made holding the lock: the lock
 * stays the parent thread's there, and the child's one thread needs none,
 * so mr_h5_lock and mr_h5_unlock do nothing from now on. */
void mr_h5_lock_in_child(void);

/* Asks HDF5 not to close itself at exit (H5dont_atexit), before any HDF5
 * call: a damaged file HDF5 read but could not close again made it print
 * "HDF5: infinite loop closing library" and a line of its interfaces after
 * a program's last line. The executables call it first in main: their
 * HDF5 files are built in memory and written by their own write(2), and
 * what HDF5 only reads needs no closing. The library does not: another
 * HDF5 user of its process (h5py) may count on HDF5 to close its files. */
void mr_h5_no_exit_cleanup(void);

#endif
