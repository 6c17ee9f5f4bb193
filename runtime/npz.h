/* npz.h: NumPy .npz archives (numpy.savez, stored; numpy.savez_compressed,
 * deflated), as Keras's dataset files are (keras.datasets' mnist.npz holds
 * x_train, y_train, x_test, y_test). An archive is a zip of .npy members:
 * libzip opens it and each member goes through the NPY reader
 * (runtime/npy.h), so a member is checked as a .npy file is.
 *
 * In [data] and on the command line an archive is named two ways:
 *   "f.npz:x_train"  one member (".npy" may be added or left off)
 *   "f.npz"          a set's images and labels: x_<set> and y_<set>
 *                    (mr_npz_data_paths; set train, val or test) */
#ifndef MR_NPZ_H
#define MR_NPZ_H

#include <stddef.h>

#include "runtime/array.h"
#include "runtime/error.h"

/* Reads the member `member` ("x_train" or "x_train.npy") of the archive at
 * `path`. A missing member is MR_ERR_DATA naming the archive and listing the
 * members it has; a damaged one names "path:member". */
mr_status mr_npz_read(const char *path, const char *member, mr_array *out, mr_error *err);

/* The archive's members, their names without ".npy", separated by ", " in
 * archive order, into list (size n; cut short if longer). */
mr_status mr_npz_members(const char *path, char *list, size_t n, mr_error *err);

/* 1 if the archive at `path` opens and has `member` (with or without .npy), else 0. */
int mr_npz_has(const char *path, const char *member);

/* Whether `spec` names a whole archive: it ends in ".npz" (no member after it). */
int mr_npz_is_archive(const char *spec);

/* The [data] rule for one set ("train", "val" or "test"): images a whole
 * archive "f.npz" becomes "f.npz:x_<set>", and labels "" or the same
 * archive become "f.npz:y_<set>"; anything else is copied as it is. The
 * outputs have n bytes each; MR_ERR_CONFIG if a path does not fit. */
mr_status mr_npz_data_paths(const char *images, const char *labels, const char *set,
                            char *images_out, char *labels_out, size_t n, mr_error *err);

#endif
