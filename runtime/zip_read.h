/* zip_read.h: reading a zip archive someone else wrote (an .npz, a
 * .keras): its member names checked before any member is read, and a
 * member copied out within bounds.
 *
 * Two members of one name are refused: libzip finds the first, numpy and
 * Keras read the last, so the same file would give different data or
 * weights here and there. So are names that are paths out of the archive
 * (absolute, a ".." part, a backslash), which numpy's and Keras's writers
 * never make. */
#ifndef MR_ZIP_READ_H
#define MR_ZIP_READ_H

#include <stdint.h>
#include <zip.h>

#include "runtime/error.h"

MR_C_BEGIN

/* The most members an archive may have (numpy and Keras write a few). */
#define MR_ZIP_MAX_MEMBERS 65536

/* MR_OK, or MR_ERR_DATA naming path and the member: "PATH: member NAME
 * appears twice ...", "PATH: member NAME is a path ...", or too many
 * members. MR_ERR_NOMEM when the names cannot be sorted. */
mr_status mr_zip_check_names(zip_t *za, const char *path, mr_error *err);

/* Copies member i of za (`name`, "path:member", names it in messages) into
 * fd: refused (MR_ERR_DATA) when its headers give more than limit bytes or
 * more than deflate makes of its compressed bytes (about 1032 to 1: a zip
 * bomb's header), and stopped when it inflates to more than its headers
 * give (a header that lies would otherwise fill memory or disk before
 * libzip's check at the end). MR_ERR_IO when fd cannot take it. */
mr_status mr_zip_copy_member(zip_t *za, zip_int64_t i, const char *name, uint64_t limit, int fd,
                             mr_error *err);

MR_C_END

#endif
