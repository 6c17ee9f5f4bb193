/* npy.h: NumPy's .npy files (numpy.save), read and written. An NPY file is
 * a magic string, a version, a header (a Python dict literal giving the
 * dtype, the order and the shape) padded to 64 bytes, then the values.
 * The reader takes the file plain or gzip-compressed and checks everything
 * a broken file can get wrong (magic, header, truncation, trailing bytes),
 * reported as one line naming the path. */
#ifndef MR_NPY_H
#define MR_NPY_H

#include "runtime/array.h"
#include "runtime/error.h"

/* NPY version 1.0/2.0/3.0, C order only. dtypes: |u1 (U8), <i4 (I32), <i8 (I64), <f4 (F32),
 * <f8 (F32, from_float64 set); the other integer widths widen: |i1, <i2, <u2 to I32, <u4 and
 * <u8 to I64 (a uint64 above int64's range is refused). On failure *out is left empty. */
mr_status mr_npy_read(const char *path, mr_array *out, mr_error *err);

/* mr_npy_read on an open descriptor at the start of the NPY bytes (an .npz member copied
 * out, runtime/npz.h); `name` names it in messages ("file.npz:x_train"). Closes fd. */
mr_status mr_npy_read_fd(int fd, const char *name, mr_array *out, mr_error *err);

/* Writes an NPY 1.0 file as numpy.save does (used by tests and tools). */
mr_status mr_npy_write(const char *path, const mr_array *a, mr_error *err);

#endif
