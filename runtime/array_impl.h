/* array_impl.h: what the array readers of runtime/ share (array.c holds it,
 * with the IDX and HDF5 readers; npy.c reads NPY with it): the size limit
 * and allocation of an array's data, byte order, float64 narrowing, and
 * reading a file's header and payload through zlib's gzread, which reads
 * plain and gzip files alike, so one read path checks truncation, trailing
 * bytes and corrupt streams for IDX and NPY. Only runtime/ includes it. */
#ifndef MR_ARRAY_IMPL_H
#define MR_ARRAY_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <zlib.h>

#include "runtime/array.h"

bool array_host_is_little_endian(void);

/* Reverses the bytes of each of `count` elements of `esize` bytes. */
void array_swap_bytes(void *data, int64_t count, size_t esize);

/* Checks that an array of this shape fits the size limit, without overflowing
 * on the way, and returns its size in bytes. `what` names the source in the
 * message ("path" or "path:/dataset"). */
mr_status array_checked_bytes(const char *what, mr_dtype dtype, int ndim, const int64_t *dims,
                              int64_t *bytes, mr_error *err);

/* Allocates the data of `out` (at least one byte, so data is never NULL). */
mr_status array_alloc_data(const char *what, mr_array *out, int64_t bytes, mr_error *err);

/* The float64 values in out->data (its dtype says I64: 8 bytes each) as
 * float32, in place; a finite value beyond float32's range is refused. */
mr_status array_narrow_f64(const char *path, mr_array *out, mr_error *err);

/* The size of the regular file at `path`, or -1 (not a regular file). */
int64_t array_file_size(const char *path);

/* Opens `path` for gzread (plain or gzip), with a 1 MiB buffer; a path
 * that does not exist is MR_ERR_NOT_FOUND. */
mr_status array_gz_open(const char *path, gzFile *gz, mr_error *err);

/* Reads up to n bytes; returns how many were read (less only at end of
 * input), or -1 on a read or decompression error (array_gz_fail says which). */
int64_t array_gz_read_full(gzFile gz, void *buf, int64_t n);

/* The error gzread reported, as a status naming `path`. */
mr_status array_gz_fail(gzFile gz, const char *path, mr_error *err);

/* Reads exactly `n` bytes of a `format` header that starts at byte
 * `offset`; a short read is a truncated header. */
mr_status array_gz_read_header(gzFile gz, const char *path, const char *format, void *buf,
                               int64_t n, int64_t offset, mr_error *err);

/* Refuses, before anything is allocated, a payload of `n` bytes that a file
 * of `size` bytes (-1: not known) cannot hold. */
mr_status array_gz_check_payload(gzFile gz, const char *path, int64_t size, int64_t n,
                                 mr_error *err);

/* Reads exactly `n` bytes of data and checks that nothing follows them. */
mr_status array_gz_read_payload(gzFile gz, const char *path, void *buf, int64_t n, mr_error *err);

#endif
