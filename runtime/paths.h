/* paths.h: is a path safe to read, or to write, before the work starts.
 *
 * Inputs must be regular files (or, where the caller allows it, folders):
 * open() on a FIFO blocks until a writer comes, and a character device
 * such as /dev/zero never ends. The check is a stat(), which neither
 * blocks nor reads. Outputs may be anything writable (/dev/null,
 * /dev/stdout, a pipe), but an output that is the same file as an input or
 * as another output would destroy it: the same device and inode where the
 * file exists, the same normalized path (its folder resolved, "." and
 * repeated "/" dropped) where it does not. Relies on POSIX stat/realpath
 * and error.h. */
#ifndef MR_PATHS_H
#define MR_PATHS_H

#include <stddef.h>
#include <sys/types.h>

#include "runtime/error.h"

MR_C_BEGIN

/* "a FIFO", "a character device", "a block device", "a socket", "a
 * folder", "a symbolic link" or "not a regular file" for a st_mode that is
 * no regular file; NULL for a regular file. */
const char *mr_path_kind(mode_t mode);

/* MR_OK when path is a regular file (a folder too with allow_dir), or does
 * not exist (the reader says so in its own words); else MR_ERR_IO
 * "[OPT ]PATH: not a regular file (a FIFO)". opt may be NULL. */
mr_status mr_path_check_regular(const char *opt, const char *path, int allow_dir, mr_error *err);

/* One file a command reads or writes: the option that names it ("MODEL.cfg",
 * "--save", "[data] train_images") and its path (NULL or "": none). */
typedef struct mr_path_use {
    const char *opt;
    const char *path;
    int output; /* 1: written by the command */
} mr_path_use;

/* 1 if a and b name the same file (see above), else 0. */
int mr_path_same(const char *a, const char *b);

/* MR_OK unless an output is the same file as an input or as another
 * output: MR_ERR_USAGE "OUT PATH is also IN (PATH2): an output may not
 * overwrite an input or another output". An existing output that is not a
 * regular file (/dev/null, /dev/stdout) may be named twice. */
mr_status mr_path_check_distinct(const mr_path_use *uses, size_t n, mr_error *err);

/* Fails early, before any work, if `path` cannot be created (NULL: fine):
 * a folder, or a place where the temporary of an atomic write
 * (runtime/atomic_file.h) cannot go, is MR_ERR_IO "OPT PATH: ...". A
 * device or a pipe is written in place and passes. */
mr_status mr_path_check_writable(const char *opt, const char *path, mr_error *err);

MR_C_END

#endif
