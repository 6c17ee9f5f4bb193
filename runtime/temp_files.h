/* temp_files.h: temporary files that a signal ending the process does not
 * leave behind.
 *
 * A .keras's weights are unpacked into a temporary file for HDF5 (it reads
 * by path): a SIGTERM while that runs would leave up to the weights' limit
 * in $TMPDIR. A tracked file is unlinked by a handler of SIGTERM, SIGHUP,
 * SIGINT and SIGQUIT, which then ends the process by the same signal, as
 * it would have ended. The handler is installed only over a signal's
 * default action, and only while a file is tracked: a program's own
 * handlers (mirrored_train's stop, Python's KeyboardInterrupt) are left
 * alone, and its temporaries are its own to remove. */
#ifndef MR_TEMP_FILES_H
#define MR_TEMP_FILES_H

/* At most this many files tracked at once (one per thread that unpacks);
 * a file past them is not tracked (it is removed as before, not on a
 * signal). */
enum { MR_TEMP_FILES_MAX = 16 };

/* Tracks `path` until mr_temp_untrack(slot): a slot, or -1 where none is
 * free or the path does not fit one. */
int mr_temp_track(const char *path);

/* Stops tracking (the caller removes the file itself); -1 is ignored. */
void mr_temp_untrack(int slot);

#endif
