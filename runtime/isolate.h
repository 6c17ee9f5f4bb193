/* isolate.h: running a file reader in a child process first, so that a
 * library that crashes on a damaged file is a refusal, not a crash.
 *
 * HDF5 1.10 is not hardened against damaged files: fuzzing found reads out
 * of bounds in its object-header and global-heap code (docs/fuzzing.md).
 * Our checkpoints carry checksums checked before HDF5 parses a byte; a
 * file without them (a Keras-made .h5 for --init-weights or mirrored_eval)
 * is read once in a fork()ed child: if that child dies, the caller refuses
 * the file with one line naming it; if it lives, the caller reads the file
 * for real (HDF5 reads the same bytes the same way twice). */
#ifndef MR_ISOLATE_H
#define MR_ISOLATE_H

#include "runtime/error.h"

/* Runs fn(arg) in a child process (whose writes the caller never sees:
 * copy-on-write memory, its output to /dev/null). MR_OK when the child
 * returned, whatever fn returned (the caller's own run reports that);
 * MR_ERR_DATA "PATH: WHAT crashed reading it (SIGNAL): the file is
 * damaged" when it died. Where fork fails, MR_OK: the caller reads the
 * file unguarded, as it would have without this. */
mr_status mr_isolate(const char *path, const char *what, mr_status (*fn)(void *arg), void *arg,
                     mr_error *err);

/* The seconds mr_isolate gives its child: far more than HDF5 takes to
 * read any weights file, a bound on a reader that never ends. */
enum { MR_ISOLATE_SECONDS = 600 };

/* mr_isolate with its child killed after `seconds` (SIGALRM): MR_ERR_DATA
 * "PATH: WHAT did not finish reading it in N s". The child dies with the
 * caller too (PR_SET_PDEATHSIG): a caller killed while it waits leaves no
 * orphan behind. */
mr_status mr_isolate_timed(const char *path, const char *what, mr_status (*fn)(void *arg),
                           void *arg, unsigned seconds, mr_error *err);

/* 1 in the child of mr_isolate: it may read files but has no device (a
 * GPU context does not survive fork(), and an emulated GPU's stream
 * threads are not there), so mr_backend_write and mr_backend_read leave
 * device memory alone there; the trial's values are discarded anyway. */
int mr_isolate_in_child(void);

#endif
