/* atomic_file.h: writing a file so that it appears whole or not at all.
 *
 * The content goes to a temporary file beside the target, "TARGET.tmp.<pid>"
 * (the same folder, so the same file system), which commit then flushes,
 * fsyncs, renames over the target and makes durable with an fsync of the
 * folder. A failure at any step, or an abort, removes the temporary and
 * leaves the old target (if any) as it was. Errors are one line naming the
 * target: "PATH: cannot write: <strerror>" (MR_ERR_IO).
 *
 * Two forms: mr_atomic_file gives a FILE* to write into; mr_atomic_path_*
 * gives the temporary's name, for writers that take a path (HDF5, libzip,
 * a child process such as gnuplot). A target that exists and is not a
 * regular file (/dev/null, /dev/stdout, a pipe) cannot be renamed over:
 * the FILE form writes into it directly (commit flushes and checks the
 * writes), the path form refuses it ("not a regular file (a character
 * device)"). Relies on POSIX (open, fsync, rename)
 * and error.h. The temporary is created with mode 0666 less the umask, as
 * fopen does. */
#ifndef MR_ATOMIC_FILE_H
#define MR_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "runtime/error.h"

MR_C_BEGIN

/* Longest target path (the temporary adds ".tmp.<pid>"). */
enum { MR_ATOMIC_PATH_MAX = 4096 };

typedef struct mr_atomic_file {
    FILE *f; /* write here; NULL once committed or aborted */
    char path[MR_ATOMIC_PATH_MAX];
    char tmp[MR_ATOMIC_PATH_MAX + 32];
} mr_atomic_file;

/* Creates the temporary beside `path` (truncated if a stale one is there)
 * and opens it for writing in af->f. Fails at once if the folder is missing
 * or does not take the file, or if path is a folder. On failure af->f is
 * NULL and nothing is left behind. */
mr_status mr_atomic_file_open(mr_atomic_file *af, const char *path, mr_error *err);

/* fflush, a check that every write succeeded, fsync, fclose, rename over
 * the target, fsync of the folder. On failure before the rename the
 * temporary is removed and the target is untouched; a failed fsync of the
 * folder is reported with the new file already in place. af->f is NULL
 * afterwards either way. */
mr_status mr_atomic_file_commit(mr_atomic_file *af, mr_error *err);

/* Closes and removes the temporary; the target is untouched. A no-op after
 * commit, after a failed open, after another abort, and on a zeroed af. */
void mr_atomic_file_abort(mr_atomic_file *af);

/* The path form. begin: the temporary's name, target + ".tmp.<pid>", into
 * tmp[n], and creates it (empty) so that a folder that cannot take it fails
 * now, before the work; the caller then writes the file by that name.
 * On failure tmp is "" and nothing is left behind. */
mr_status mr_atomic_path_begin(const char *target, char *tmp, size_t n, mr_error *err);

/* fsync of the finished temporary (reopened by name), rename over target,
 * fsync of the folder. As mr_atomic_file_commit: on failure before the
 * rename the temporary is removed and the target untouched. */
mr_status mr_atomic_path_commit(const char *target, const char *tmp, mr_error *err);

/* Removes the temporary (tmp "" or NULL: nothing to do). */
void mr_atomic_path_abort(const char *tmp);

/* Which targets' temporaries a sweep removes: 1 for the file name (no
 * folder) of a target. */
typedef int (*mr_atomic_target_fn)(const char *name, void *user);

/* Removes the temporaries "NAME.tmp.<pid>" in folder dir that a killed
 * writer left: is_target(NAME) holds and the process <pid> is gone
 * (kill(pid, 0) fails with ESRCH). A pid is a process of this host: a
 * folder shared with another host's live writer must not be swept. Adds
 * the count to *removed, and the first one's path to first[n] if it was
 * ""; a missing folder is MR_OK. */
mr_status mr_atomic_remove_stale(const char *dir, mr_atomic_target_fn is_target, void *user,
                                 int *removed, char *first, size_t n, mr_error *err);

/* Fails early, before any work, if `path` cannot be created (NULL: fine):
 * a folder, or a place where the temporary of an atomic write cannot
 * go, is MR_ERR_IO "OPT PATH: ...". A
 * device or a pipe is written in place and passes. */
mr_status mr_atomic_check_writable(const char *opt, const char *path, mr_error *err);

MR_C_END

#endif
