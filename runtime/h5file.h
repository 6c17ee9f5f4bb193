/* h5file.h: the HDF5 objects a checkpoint is made of (libhdf5), written
 * atomically and read back with errors that name the file and the object.
 *
 * Writing goes to a temporary file in the target's folder; mr_h5_commit
 * flushes it, fsyncs it, renames it over the target and fsyncs the folder
 * (runtime/atomic_file.h),
 * so a crash at any moment leaves the previous file whole (the rename is
 * atomic on POSIX file systems). HDF5's own printing of its error stack
 * is off while a file is open here: its innermost message goes into ours
 * ("file.h5: /model_weights/dense: no attribute 'weight_names'").
 *
 * Objects are named by paths relative to a location (the file or a group);
 * writers create the groups on the way. Strings are written as Keras
 * writes them: variable-length, NUL-terminated, ASCII (UTF-8 where asked);
 * readers take variable- and fixed-length strings alike. */
#ifndef MR_H5FILE_H
#define MR_H5FILE_H

#include <hdf5.h>
#include <stdint.h>

#include "runtime/error.h"

#define MR_H5_MAX_DIMS 8

typedef struct mr_h5 {
    hid_t file;
    char path[1024]; /* the file as the user named it */
    char tmp[1100];  /* while writing: the temporary file (runtime/atomic_file.h); "" otherwise */
    int checked;     /* written by mr_h5_create_checked: sealed with checksums */
    H5E_auto2_t saved_func;
    void *saved_data;
} mr_h5;

typedef enum mr_h5_type { MR_H5_F32, MR_H5_F64, MR_H5_I64 } mr_h5_type;

/* Starts writing `path` (through a temporary file beside it). */
mr_status mr_h5_create(mr_h5 *h, const char *path, mr_error *err);
/* The same for a checkpoint: mr_h5_commit adds the checksums (below). */
mr_status mr_h5_create_checked(mr_h5 *h, const char *path, mr_error *err);
/* Finishes writing: flush, fsync, rename over `path`, fsync the folder.
 * On failure the temporary file is removed and `path` is untouched. */
mr_status mr_h5_commit(mr_h5 *h, mr_error *err);
/* Gives up writing: the temporary file is removed, `path` untouched. */
void mr_h5_discard(mr_h5 *h);

/* Opens an existing file for reading; a missing file is MR_ERR_IO, one that
 * is not HDF5 (or is truncated) MR_ERR_DATA, and so is a checkpoint whose
 * checksums do not match (mr_h5_verify, below). */
mr_status mr_h5_open(mr_h5 *h, const char *path, mr_error *err);
void mr_h5_close(mr_h5 *h);

/* The innermost message of HDF5's error stack, into buf (256 bytes). */
const char *mr_h5_last_error(char buf[256]);

/* ---- writing ---- */

/* Group loc/obj (created with its parents if missing); close with H5Gclose. */
mr_status mr_h5_group(mr_h5 *h, hid_t loc, const char *obj, hid_t *out, mr_error *err);
/* A scalar string attribute. */
mr_status mr_h5_attr_str(mr_h5 *h, hid_t loc, const char *name, const char *value, int utf8,
                         mr_error *err);
/* A 1-D string-array attribute; n == 0 writes Keras's empty list (a float64
 * array of shape (0,), as h5py writes an empty numpy array). */
mr_status mr_h5_attr_strs(mr_h5 *h, hid_t loc, const char *name, const char *const *v, int n,
                          mr_error *err);
/* Dataset loc/obj of `type` and shape dims[0..rank) (rank 0: a scalar),
 * from data in the same type, contiguous, little-endian. */
mr_status mr_h5_write(mr_h5 *h, hid_t loc, const char *obj, mr_h5_type type, int rank,
                      const int64_t *dims, const void *data, mr_error *err);

/* A scalar string dataset (fixed-length, ASCII, NUL-terminated). */
mr_status mr_h5_write_str(mr_h5 *h, hid_t loc, const char *obj, const char *value, mr_error *err);

/* ---- reading ---- */

/* 1 if loc/obj exists (a group or a dataset). */
int mr_h5_exists(mr_h5 *h, hid_t loc, const char *obj);
/* Opens group loc/obj; close with H5Gclose. */
mr_status mr_h5_open_group(mr_h5 *h, hid_t loc, const char *obj, hid_t *out, mr_error *err);
/* A scalar string attribute (malloc'd). */
mr_status mr_h5_read_attr_str(mr_h5 *h, hid_t loc, const char *name, char **out, mr_error *err);
/* A 1-D string-array attribute: *out is a malloc'd array of n malloc'd
 * strings (free with mr_h5_free_strs); an empty list of any type gives n 0. */
mr_status mr_h5_read_attr_strs(mr_h5 *h, hid_t loc, const char *name, char ***out, int *n,
                               mr_error *err);
void mr_h5_free_strs(char **v, int n);
/* Shape of dataset loc/obj. */
mr_status mr_h5_shape(mr_h5 *h, hid_t loc, const char *obj, int *rank, int64_t *dims,
                      mr_error *err);
/* Reads dataset loc/obj into data as `type`; its shape must be dims[0..rank)
 * exactly, else MR_ERR_DATA naming both shapes. */
mr_status mr_h5_read(mr_h5 *h, hid_t loc, const char *obj, mr_h5_type type, int rank,
                     const int64_t *dims, void *data, mr_error *err);

/* ---- checksums ----
 *
 * A file made by mr_h5_create_checked (a checkpoint) starts with a user
 * block of MR_H5_USERBLOCK bytes, which HDF5, h5py and Keras skip: the text
 * "mirrored checksum 1\nbytes N\ncrc32c X\n", the file's size and the
 * CRC32C (TensorFlow's checkpoint checksum) of every byte after the block.
 * mr_h5_open checks it before HDF5 reads anything, so no truncation, flipped
 * bit or zeroed block reaches HDF5's parser (which can crash or loop on
 * damaged metadata) or the model.
 *
 * To name what is damaged, the file also carries a table, the fixed-length
 * string dataset MR_H5_CHECKSUMS: "crc32c<TAB>/path<TAB>attribute\n" for
 * every dataset and attribute (attribute empty for a dataset; the CRC of
 * the type class, shape, size and values as read), then
 * "crc32c<TAB>(table)<TAB>\n" over the lines before. When the file's CRC
 * fails, the datasets are checked against it, in order, and the first that
 * differs is named ("FILE: dataset /x/y: checksum mismatch (the file is
 * damaged)"); otherwise the damage is in HDF5's metadata or an attribute,
 * and the line says that. */
#define MR_H5_USERBLOCK 512
#define MR_H5_CHECKSUMS "mirrored/checksums"

/* Checks path's checksum when it has one (*sealed 1); a file without (one
 * Keras wrote) passes with *sealed 0. MR_ERR_DATA with one line naming the
 * file, and the dataset where it can. Called by mr_h5_open. */
mr_status mr_h5_verify(const char *path, int *sealed, mr_error *err);

/* A scalar string dataset, fixed- or variable-length (malloc'd). */
mr_status mr_h5_read_str(mr_h5 *h, hid_t loc, const char *obj, char **out, mr_error *err);

/* "(784, 128)" */
void mr_h5_format_shape(int rank, const int64_t *dims, char *buf, size_t n);

#endif
