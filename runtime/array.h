/* array.h: n-dimensional arrays read from data files (IDX, NPY, NPZ members, HDF5).
 * The type and the IDX and HDF5 readers are array.c, mr_array_read
 * array_read.c; NPY files are runtime/npy.h, .npz archives runtime/npz.h.
 *
 * The loader keeps images in the dtype they arrive in (uint8 stays uint8, a
 * quarter of the memory of float32) and converts per batch. Readers check
 * everything a broken file can get wrong (magic, header, truncation, sizes)
 * and report it as one line naming the path. */
#ifndef MR_ARRAY_H
#define MR_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/error.h"

#define MR_ARRAY_MAX_DIMS 8

typedef enum mr_dtype {
    MR_DTYPE_U8,
    MR_DTYPE_I32,
    MR_DTYPE_I64,
    MR_DTYPE_F32,
} mr_dtype;

typedef struct mr_array {
    mr_dtype dtype;
    int ndim;
    int64_t dims[MR_ARRAY_MAX_DIMS]; /* row-major; dims[0] is the sample count */
    void *data;                      /* owned; free with mr_array_free */
    int from_float64;                /* read from float64 (NPY '<f8', HDF5), now float32 */
} mr_array;

/* Bytes per element of a dtype. */
size_t mr_dtype_size(mr_dtype dtype);

/* Name of a dtype ("uint8", "int32", "int64", "float32"). */
const char *mr_dtype_name(mr_dtype dtype);

/* Total number of elements (product of dims; 1 for ndim == 0). */
int64_t mr_array_count(const mr_array *a);

/* Elements per row: the product of dims[1..ndim) (1 for 1-D arrays). */
int64_t mr_array_row_size(const mr_array *a);

/* Reads an array, choosing the format from the spec:
 *   "file.h5:/group/dataset" or "file.hdf5:/dataset"  -> HDF5 dataset
 *   "file.npz:member" (member with or without .npy)   -> a member of an .npz (runtime/npz.h)
 *   "*.npy"                                           -> NPY (runtime/npy.h)
 *   anything else                                     -> IDX (raw or gzip, detected by content)
 * A float array with a NaN or an infinity is refused (MR_ERR_DATA, naming
 * the spec, the example, i.e. the index along dims[0], and the element).
 * On failure *out is left empty ({0}) and err says what and where. */
mr_status mr_array_read(const char *spec, mr_array *out, mr_error *err);

/* IDX (LeCun's MNIST format), raw or gzip-compressed (zlib's gzread reads both).
 * Accepts element types 0x08 (uint8 -> U8), 0x0C (int32 -> I32, big-endian
 * on disk) and 0x0D (float32 -> F32, big-endian on disk). */
mr_status mr_array_read_idx(const char *path, mr_array *out, mr_error *err);

/* One HDF5 dataset; native types mapped to U8, I32, I64 or F32
 * (other integer widths are converted to I64, other floats to F32). */
mr_status mr_array_read_h5(const char *path, const char *dataset, mr_array *out, mr_error *err);

/* Frees the data and zeroes the struct. Safe on a zeroed array. */
void mr_array_free(mr_array *a);

#endif
