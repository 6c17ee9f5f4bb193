/* zip_names.h: the member names of a zip archive (an .npz, a .keras),
 * checked before any member is read.
 *
 * Two members of one name are refused: libzip finds the first, numpy and
 * Keras read the last, so the same file would give different data or
 * weights here and there. So are names that are paths out of the archive
 * (absolute, a ".." part, a backslash), which numpy's and Keras's writers
 * never make. */
#ifndef MR_ZIP_NAMES_H
#define MR_ZIP_NAMES_H

#include <zip.h>

#include "runtime/error.h"

MR_C_BEGIN

/* The most members an archive may have (numpy and Keras write a few). */
#define MR_ZIP_MAX_MEMBERS 65536

/* MR_OK, or MR_ERR_DATA naming path and the member: "PATH: member NAME
 * appears twice ...", "PATH: member NAME is a path ...", or too many
 * members. MR_ERR_NOMEM when the names cannot be sorted. */
mr_status mr_zip_check_names(zip_t *za, const char *path, mr_error *err);

MR_C_END

#endif
