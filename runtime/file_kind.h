/* file_kind.h: what a file is, told by its first bytes (a folder by what it holds), so that a
 * reader given the wrong kind of file says what the file is and what to do, rather than its
 * format's "wrong magic". Relies on stdio and runtime/error.h only.
 *
 * Known kinds: a zip archive (PK 03 04: a Keras 3 .keras model, a NumPy .npz, or another zip,
 * told apart by the first member's name), a NumPy .npy (93 'NUMPY'), an HDF5 file (its signature at
 * byte 0), a TensorFlow SavedModel folder (saved_model.pb in it). Anything else is left to the
 * reader. */
#ifndef MR_FILE_KIND_H
#define MR_FILE_KIND_H

#include <stddef.h>

#include "runtime/error.h"

typedef enum mr_file_kind {
    MR_FILE_KIND_OTHER,       /* none below, or unreadable: the reader decides */
    MR_FILE_KIND_KERAS,       /* a zip whose first member is a .keras's: a Keras 3 model */
    MR_FILE_KIND_NPZ,         /* a zip of .npy members: numpy.savez */
    MR_FILE_KIND_ZIP,         /* another zip archive */
    MR_FILE_KIND_NPY,         /* numpy.save */
    MR_FILE_KIND_HDF5,        /* a checkpoint, a Keras .h5, or data */
    MR_FILE_KIND_SAVED_MODEL, /* a folder with saved_model.pb */
} mr_file_kind;

/* What a reader expects of the file it opens. */
typedef enum mr_file_want {
    MR_FILE_WANT_IDX,        /* data: IDX, raw or gzip */
    MR_FILE_WANT_NPY,        /* data: a .npy */
    MR_FILE_WANT_HDF5,       /* data: an HDF5 dataset (file.h5:/dataset) */
    MR_FILE_WANT_CFG,        /* a model .cfg (text) */
    MR_FILE_WANT_CHECKPOINT, /* a checkpoint, or a model Keras wrote as HDF5 */
} mr_file_want;

/* The kind of `path` (a file or a folder). */
mr_file_kind mr_file_kind_of(const char *path);

/* "a Keras model archive (zip)", "a NumPy .npz archive", ...; "" for MR_FILE_KIND_OTHER. */
const char *mr_file_kind_name(mr_file_kind kind);

/* MR_OK where `path` may be what `want` reads (its kind fits, or is none of the known ones: the
 * reader checks the rest); otherwise MR_ERR_DATA, one line: "PATH: what it is; what to do". */
mr_status mr_file_check(const char *path, mr_file_want want, mr_error *err);

#endif
