/* array.c: the array type (array.h), what its readers share (array_impl.h),
 * and the IDX (raw or gzip) and HDF5 readers. NPY is runtime/npy.c, .npz
 * archives runtime/npz.c; array_read.c picks the reader a spec names.
 *
 * IDX and NPY go through zlib's gzread, which reads plain and gzip files
 * alike, so one read path checks truncation, trailing bytes and corrupt
 * streams for both. HDF5 uses the serial C API with its automatic error
 * printing switched off (library code never prints); the innermost message of
 * HDF5's error stack is appended where it says more than we can. */
#include "runtime/array.h"
#include "runtime/array_impl.h"
#include "runtime/file_kind.h"
#include "runtime/h5_contained.h"
#include "runtime/h5_lock.h"
#include "runtime/h5file.h"
#include "runtime/isolate.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>
#include <zlib.h>

/* Larger arrays are refused with a message rather than attempted: a corrupt
 * header asking for terabytes must not end in a failed malloc or the OOM
 * killer, and no data set this runtime trains on comes near it. */
#define ARRAY_MAX_BYTES ((int64_t)16 << 30)

/* gzread takes an unsigned length and returns an int: read in 1 GiB pieces. */
#define GZ_CHUNK (1u << 30)

size_t mr_dtype_size(mr_dtype dtype) {
    switch (dtype) {
    case MR_DTYPE_U8:
        return 1;
    case MR_DTYPE_I32:
        return 4;
    case MR_DTYPE_I64:
        return 8;
    case MR_DTYPE_F32:
        return 4;
    }
    return 0;
}

const char *mr_dtype_name(mr_dtype dtype) {
    switch (dtype) {
    case MR_DTYPE_U8:
        return "uint8";
    case MR_DTYPE_I32:
        return "int32";
    case MR_DTYPE_I64:
        return "int64";
    case MR_DTYPE_F32:
        return "float32";
    }
    return "unknown";
}

int64_t mr_array_count(const mr_array *a) {
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++)
        n *= a->dims[i];
    return n;
}

int64_t mr_array_row_size(const mr_array *a) {
    int64_t n = 1;
    for (int i = 1; i < a->ndim; i++)
        n *= a->dims[i];
    return n;
}

void mr_array_free(mr_array *a) {
    if (a == NULL) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---- shared helpers ---------------------------------------------------- */

bool array_host_is_little_endian(void) {
    const uint16_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Reverses the bytes of each of `count` elements of `esize` bytes. */
void array_swap_bytes(void *data, int64_t count, size_t esize) {
    uint8_t *p = data;
    for (int64_t i = 0; i < count; i++, p += esize) {
        for (size_t a = 0, b = esize - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
    }
}

static uint32_t load_be32(const uint8_t *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* "60000x28x28" (or "scalar") for messages. */
static const char *format_shape(char *buf, size_t n, int ndim, const int64_t *dims) {
    if (ndim == 0) {
        snprintf(buf, n, "scalar");
        return buf;
    }
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? "x" : "", (long long)dims[i]);
    return buf;
}

/* Checks that an array of this shape fits the size limit, without overflowing
 * on the way, and returns its size in bytes. `what` names the source in the
 * message ("path" or "path:/dataset"). */
mr_status array_checked_bytes(const char *what, mr_dtype dtype, int ndim, const int64_t *dims,
                              int64_t *bytes, mr_error *err) {
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0) return mr_error_set(err, MR_ERR_DATA, "%s: negative dimension", what);
        if (dims[i] == 0) empty = true;
    }
    int64_t total = (int64_t)mr_dtype_size(dtype);
    for (int i = 0; i < ndim && !empty; i++) {
        if (total > ARRAY_MAX_BYTES / dims[i]) {
            char shape[256];
            return mr_error_set(err, MR_ERR_DATA,
                                "%s: array of shape %s (%s) is larger than the %lld GiB limit",
                                what, format_shape(shape, sizeof shape, ndim, dims),
                                mr_dtype_name(dtype), (long long)(ARRAY_MAX_BYTES >> 30));
        }
        total *= dims[i];
    }
    if (empty) total = 0; /* a zero dim makes the array empty, whatever the others say */
    *bytes = total;
    return MR_OK;
}

/* Allocates the data of `out` (at least one byte, so data is never NULL). */
mr_status array_alloc_data(const char *what, mr_array *out, int64_t bytes, mr_error *err) {
    out->data = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (out->data == NULL)
        return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory allocating %lld bytes", what,
                            (long long)bytes);
    return MR_OK;
}

/* ---- reading through zlib (IDX and NPY) -------------------------------- */

/* Reads up to n bytes; returns how many were read (less only at end of
 * input), or -1 on a read or decompression error (gzerror says which). */
int64_t array_gz_read_full(gzFile gz, void *buf, int64_t n) {
    int64_t done = 0;
    while (done < n) {
        unsigned want = n - done > GZ_CHUNK ? GZ_CHUNK : (unsigned)(n - done);
        int got = gzread(gz, (char *)buf + done, want);
        if (got < 0) return -1;
        if (got == 0) break;
        done += got;
    }
    return done;
}

/* Turns the error gzread reported into a status. zlib prefixes its message
 * with the path; we drop that since our message starts with it already. */
mr_status array_gz_fail(gzFile gz, const char *path, mr_error *err) {
    int errnum = Z_OK;
    const char *msg = gzerror(gz, &errnum);
    size_t plen = strlen(path);
    if (strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0) msg += plen + 2;
    if (errnum == Z_ERRNO) return mr_error_set(err, MR_ERR_IO, "%s: read error: %s", path, msg);
    if (errnum == Z_MEM_ERROR) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
    return mr_error_set(err, MR_ERR_DATA, "%s: corrupt gzip data: %s", path, msg);
}

mr_status array_gz_open(const char *path, gzFile *gz, mr_error *err) {
    errno = 0;
    *gz = gzopen(path, "rb");
    if (*gz == NULL) {
        /* zlib leaves errno at 0 when it was its own allocation that failed */
        if (errno == 0) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
        return mr_error_set(err, errno == ENOENT ? MR_ERR_NOT_FOUND : MR_ERR_IO,
                            "%s: cannot open: %s", path, strerror(errno));
    }
    gzbuffer(*gz, 1u << 20); /* the 8 KiB default makes large files slow */
    return MR_OK;
}

/* Reads exactly `n` bytes of header; a short read is a truncated header. */
mr_status array_gz_read_header(gzFile gz, const char *path, const char *format, void *buf,
                               int64_t n, int64_t offset, mr_error *err) {
    int64_t got = array_gz_read_full(gz, buf, n);
    if (got < 0) return array_gz_fail(gz, path, err);
    if (got < n)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: truncated: %s header needs %lld bytes, file has %lld", path,
                            format, (long long)(offset + n), (long long)(offset + got));
    return MR_OK;
}

/* deflate's largest expansion: 1032 bytes out per byte in (zlib's FAQ), so
 * a file of size s unzips to at most 1032 * s bytes */
#define GZ_MAX_RATIO 1032

/* Refuses, before anything is allocated, a payload of `n` bytes that the
 * file cannot hold: a broken header's dims would otherwise have us allocate
 * up to ARRAY_MAX_BYTES for a file of a few bytes (found by fuzzing,
 * tests/fuzz/corpus/idx/). Raw files: exactly what is left after the header;
 * gzip: at most GZ_MAX_RATIO times the file's size. `size` is the file's
 * size in bytes, or -1 where it is not known (a pipe: read and see). */
mr_status array_gz_check_payload(gzFile gz, const char *path, int64_t size, int64_t n,
                                 mr_error *err) {
    if (size < 0) return MR_OK;
    if (gzdirect(gz)) {
        int64_t left = size - (int64_t)gztell(gz);
        if (n > left)
            return mr_error_set(err, MR_ERR_DATA,
                                "%s: truncated: header says %lld bytes of data, file has %lld",
                                path, (long long)n, (long long)(left > 0 ? left : 0));
    } else if (n / GZ_MAX_RATIO > size) {
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: truncated: header says %lld bytes of data, more than %lld bytes "
                            "of gzip data can hold",
                            path, (long long)n, (long long)size);
    }
    return MR_OK;
}

/* The size of the regular file at `path`, or -1 (not a regular file). */
int64_t array_file_size(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
    return (int64_t)sb.st_size;
}

/* Whether the gzip members of `f` (from its start) end exactly at its end: inflates each
 * member, output discarded; *end is the offset where the last member ended. -1: not gzip data
 * there or a read error (gzread would have said which first). */
static int gz_members_end(FILE *f, int64_t *end) {
    unsigned char in[1 << 16], out[1 << 16];
    z_stream z = {0};
    if (inflateInit2(&z, 15 + 16) != Z_OK) return -1;
    int64_t consumed = 0;
    int rc = Z_OK, ok = 0;
    for (;;) {
        if (z.avail_in == 0) {
            z.avail_in = (uInt)fread(in, 1, sizeof in, f);
            z.next_in = in;
            if (z.avail_in == 0) break; /* the end of the file */
        }
        z.next_out = out, z.avail_out = sizeof out;
        const uInt before = z.avail_in;
        rc = inflate(&z, Z_NO_FLUSH);
        consumed += before - z.avail_in;
        if (rc == Z_STREAM_END) {
            *end = consumed, ok = 1;
            /* another member follows only where a gzip header (1F 8B) starts */
            if (z.avail_in == 0) {
                int c = fgetc(f);
                if (c == EOF) break;
                ungetc(c, f);
                z.avail_in = (uInt)fread(in, 1, sizeof in, f), z.next_in = in;
            }
            if (z.avail_in < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b) break;
            inflateReset(&z), ok = 0;
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            break;
        }
    }
    inflateEnd(&z);
    return ok ? 0 : -1;
}

/* Refuses bytes after the last gzip member, which zlib's gzread skips without a word. Every
 * member's trailer ends with its uncompressed size mod 2^32 (ISIZE), so a one-member file whose
 * last 4 bytes give the size gzread produced ends with its trailer; otherwise (several members,
 * or something appended) the members are inflated again to find where they end. */
static mr_status gz_check_end(gzFile gz, const char *path, mr_error *err) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return MR_OK; /* gzread read it all: nothing to add */
    unsigned char tail[4];
    const uint32_t produced = (uint32_t)(uint64_t)gztell(gz);
    int ok = fseeko(f, -4, SEEK_END) == 0 && fread(tail, 1, 4, f) == 4 &&
             ((uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 |
              (uint32_t)tail[3] << 24) == produced;
    int64_t end = 0, size = 0;
    if (!ok && fseeko(f, 0, SEEK_END) == 0) size = (int64_t)ftello(f);
    if (!ok) {
        rewind(f);
        ok = gz_members_end(f, &end) == 0 && end == size;
    }
    fclose(f);
    if (ok) return MR_OK;
    return mr_error_set(err, MR_ERR_DATA,
                        "%s: trailing data after the gzip stream: it ends at byte %lld of %lld; "
                        "the file is damaged or has something appended",
                        path, (long long)end, (long long)size);
}

/* Reads exactly `n` bytes of data and checks that nothing follows them: extra
 * bytes mean the header's dims do not describe the file. */
mr_status array_gz_read_payload(gzFile gz, const char *path, void *buf, int64_t n, mr_error *err) {
    const char *unzipped = gzdirect(gz) ? "" : " after decompression";
    int64_t got = array_gz_read_full(gz, buf, n);
    if (got < 0) return array_gz_fail(gz, path, err);
    if (got < n)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: truncated: header says %lld bytes of data, file has %lld%s", path,
                            (long long)n, (long long)got, unzipped);
    char scratch[8192];
    int64_t extra = 0;
    int r;
    while ((r = gzread(gz, scratch, sizeof scratch)) > 0)
        extra += r;
    if (r < 0) return array_gz_fail(gz, path, err);
    if (extra > 0)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: trailing data: header says %lld bytes of data, file has %lld%s",
                            path, (long long)n, (long long)(n + extra), unzipped);
    return gzdirect(gz) ? MR_OK : gz_check_end(gz, path, err);
}

/* The float64 values in out->data (its dtype says I64: 8 bytes each) as
 * float32, in place: value i's 4 bytes go where value i/2's 8 were, read
 * before they are written over. A finite value beyond float32's range is
 * refused (it would become an infinity); NaN stays NaN, for the readers'
 * non-finite check to name. */
mr_status array_narrow_f64(const char *path, mr_array *out, mr_error *err) {
    const int64_t n = mr_array_count(out);
    unsigned char *b = out->data; /* bytes: the doubles and the floats share them */
    for (int64_t i = 0; i < n; i++) {
        double v;
        memcpy(&v, b + 8 * i, sizeof v);
        const float x = (float)v;
        if (isfinite(v) && !isfinite(x))
            return mr_error_set(err, MR_ERR_DATA,
                                "%s: float64 value %g (element %lld) is beyond float32's range",
                                path, v, (long long)i);
        memcpy(b + 4 * i, &x, sizeof x);
    }
    out->dtype = MR_DTYPE_F32;
    out->from_float64 = 1;
    float *shrunk = realloc(out->data, sizeof(float) * (size_t)(n ? n : 1));
    if (shrunk != NULL) out->data = shrunk;
    return MR_OK;
}

/* ---- IDX ----------------------------------------------------------------- */

static const char *idx_type_name(int type) {
    switch (type) {
    case 0x08:
        return "uint8";
    case 0x09:
        return "int8";
    case 0x0B:
        return "int16";
    case 0x0C:
        return "int32";
    case 0x0D:
        return "float32";
    case 0x0E:
        return "float64";
    }
    return "not an IDX type";
}

static mr_status idx_read(gzFile gz, const char *path, mr_array *out, mr_error *err) {
    uint8_t magic[4];
    MR_CHECK(array_gz_read_header(gz, path, "IDX", magic, 4, 0, err));
    uint32_t m = load_be32(magic);
    if (magic[0] != 0 || magic[1] != 0)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: wrong IDX magic 0x%08X (expected 0x0000TTNN: two zero bytes, "
                            "element type TT, dimension count NN)",
                            path, m);
    switch (magic[2]) {
    case 0x08:
        out->dtype = MR_DTYPE_U8;
        break;
    case 0x0C:
        out->dtype = MR_DTYPE_I32;
        break;
    case 0x0D:
        out->dtype = MR_DTYPE_F32;
        break;
    default:
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: unsupported IDX element type 0x%02X (%s) in magic 0x%08X; "
                            "supported: 0x08 uint8, 0x0C int32, 0x0D float32",
                            path, magic[2], idx_type_name(magic[2]), m);
    }
    int ndim = magic[3];
    if (ndim < 1 || ndim > MR_ARRAY_MAX_DIMS)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: IDX magic 0x%08X gives %d dimensions (supported: 1 to %d)", path,
                            m, ndim, MR_ARRAY_MAX_DIMS);

    uint8_t raw[4 * MR_ARRAY_MAX_DIMS];
    MR_CHECK(array_gz_read_header(gz, path, "IDX", raw, 4 * ndim, 4, err));
    for (int i = 0; i < ndim; i++) {
        out->dims[i] = load_be32(raw + 4 * i);
        if (out->dims[i] == 0)
            return mr_error_set(err, MR_ERR_DATA, "%s: IDX dimension %d of %d is 0", path, i + 1,
                                ndim);
    }
    out->ndim = ndim;

    int64_t bytes;
    MR_CHECK(array_checked_bytes(path, out->dtype, ndim, out->dims, &bytes, err));
    MR_CHECK(array_gz_check_payload(gz, path, array_file_size(path), bytes, err));
    MR_CHECK(array_alloc_data(path, out, bytes, err));
    MR_CHECK(array_gz_read_payload(gz, path, out->data, bytes, err));
    /* IDX stores multi-byte elements big-endian */
    if (out->dtype != MR_DTYPE_U8 && array_host_is_little_endian())
        array_swap_bytes(out->data, mr_array_count(out), mr_dtype_size(out->dtype));
    return MR_OK;
}

mr_status mr_array_read_idx(const char *path, mr_array *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    MR_CHECK(mr_file_check(path, MR_FILE_WANT_IDX, err)); /* a model, an .npz: say so */
    gzFile gz;
    MR_CHECK(array_gz_open(path, &gz, err));
    mr_status st = idx_read(gz, path, out, err);
    gzclose(gz); /* its status only repeats what the reads already reported */
    if (st != MR_OK) mr_array_free(out);
    return st;
}

/* ---- HDF5 ---------------------------------------------------------------- */

static const char *h5_class_name(H5T_class_t c) {
    switch (c) {
    case H5T_TIME:
        return "time";
    case H5T_STRING:
        return "string";
    case H5T_BITFIELD:
        return "bitfield";
    case H5T_OPAQUE:
        return "opaque";
    case H5T_COMPOUND:
        return "compound";
    case H5T_REFERENCE:
        return "reference";
    case H5T_ENUM:
        return "enum";
    case H5T_VLEN:
        return "variable-length";
    case H5T_ARRAY:
        return "array";
    default:
        return "unknown";
    }
}

/* Reads the open dataset `ds` into out; `path` and `name` are for messages. */
static mr_status h5_read_dataset(hid_t ds, const char *path, const char *name, mr_array *out,
                                 mr_error *err) {
    char detail[256];
    mr_status st = MR_OK;
    hid_t ftype = H5Dget_type(ds), space = -1;
    if (ftype < 0) {
        st = mr_error_set(err, MR_ERR_DATA, "%s:%s: cannot read the type (%s)", path, name,
                          mr_h5_last_error(detail));
        goto done;
    }
    /* the memory type asks HDF5 to convert: any byte order, and integer
     * widths we do not keep, widened to int64 */
    hid_t mtype;
    H5T_class_t cls = H5Tget_class(ftype);
    size_t tsize = H5Tget_size(ftype);
    if (cls == H5T_INTEGER) {
        H5T_sign_t sign = H5Tget_sign(ftype);
        if (tsize == 1 && sign == H5T_SGN_NONE)
            out->dtype = MR_DTYPE_U8, mtype = H5T_NATIVE_UINT8;
        else if (tsize == 4 && sign == H5T_SGN_2)
            out->dtype = MR_DTYPE_I32, mtype = H5T_NATIVE_INT32;
        else /* int8, (u)int16, uint32, (u)int64; uint64 above INT64_MAX clips */
            out->dtype = MR_DTYPE_I64, mtype = H5T_NATIVE_INT64;
    } else if (cls == H5T_FLOAT) {
        out->dtype = MR_DTYPE_F32, mtype = H5T_NATIVE_FLOAT;
        out->from_float64 = tsize > 4;
    } else {
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s:%s: unsupported HDF5 type class %s (supported: integer, float)", path,
                          name, h5_class_name(cls));
        goto done;
    }

    space = H5Dget_space(ds);
    H5S_class_t sclass = space < 0 ? H5S_NO_CLASS : H5Sget_simple_extent_type(space);
    if (sclass != H5S_SIMPLE && sclass != H5S_SCALAR) {
        st = mr_error_set(err, MR_ERR_DATA, "%s:%s: dataset has no data (null dataspace)", path,
                          name);
        goto done;
    }
    int ndim = H5Sget_simple_extent_ndims(space);
    if (ndim < 0 || ndim > MR_ARRAY_MAX_DIMS) {
        st = mr_error_set(err, MR_ERR_DATA, "%s:%s: dataset has %d dimensions (supported: 0 to %d)",
                          path, name, ndim, MR_ARRAY_MAX_DIMS);
        goto done;
    }
    hsize_t hdims[MR_ARRAY_MAX_DIMS];
    H5Sget_simple_extent_dims(space, hdims, NULL);
    for (int i = 0; i < ndim; i++) {
        if (hdims[i] > (hsize_t)ARRAY_MAX_BYTES) hdims[i] = (hsize_t)ARRAY_MAX_BYTES + 1;
        out->dims[i] = (int64_t)hdims[i];
    }
    out->ndim = ndim;

    char what[1024];
    snprintf(what, sizeof what, "%s:%s", path, name);
    int64_t bytes;
    MR_CHECK_GOTO(array_checked_bytes(what, out->dtype, ndim, out->dims, &bytes, err), st, done);
    MR_CHECK_GOTO(array_alloc_data(what, out, bytes, err), st, done);
    if (bytes > 0 && H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->data) < 0)
        st = mr_error_set(err, MR_ERR_DATA, "%s: read failed (%s)", what, mr_h5_last_error(detail));
done:
    if (space >= 0) H5Sclose(space);
    if (ftype >= 0) H5Tclose(ftype);
    return st;
}

static mr_status read_h5_now(const char *path, const char *dataset, mr_array *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    /* HDF5 would say "cannot open" for a missing file too; ask the OS first so
     * a missing or unreadable file is an I/O error with the real reason */
    FILE *probe = fopen(path, "rb");
    if (probe == NULL)
        return mr_error_set(err, errno == ENOENT ? MR_ERR_NOT_FOUND : MR_ERR_IO,
                            "%s: cannot open: %s", path, strerror(errno));
    fclose(probe);

    /* the process's HDF5 lock (h5_lock.h); HDF5's own printing to stderr
     * silenced for our calls only */
    mr_h5_lock();
    H5E_auto2_t old_func = NULL;
    void *old_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    char detail[256];
    mr_status st = MR_OK;
    hid_t file = -1, ds = -1;
    file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        st = mr_error_set(err, MR_ERR_DATA, "%s: cannot open as HDF5 (%s)", path,
                          mr_h5_last_error(detail));
        goto done;
    }
    if ((st = mr_h5_check_contained(file, path, err)) != MR_OK) goto done;
    ds = H5Dopen2(file, dataset, H5P_DEFAULT);
    if (ds < 0) {
        /* say whether the name is missing or names something else */
        hid_t obj = H5Oopen(file, dataset, H5P_DEFAULT);
        if (obj >= 0) {
            H5I_type_t kind = H5Iget_type(obj);
            H5Oclose(obj);
            st = mr_error_set(err, MR_ERR_DATA, "%s:%s: is a %s, not a dataset", path, dataset,
                              kind == H5I_GROUP ? "group" : "named type");
        } else {
            st = mr_error_set(err, MR_ERR_DATA, "%s:%s: no such dataset", path, dataset);
        }
        goto done;
    }
    st = h5_read_dataset(ds, path, dataset, out, err);
done:
    if (ds >= 0) H5Dclose(ds);
    if (file >= 0) H5Fclose(file);
    H5Eset_auto2(H5E_DEFAULT, old_func, old_data);
    mr_h5_unlock();
    if (st != MR_OK) mr_array_free(out);
    return st;
}

typedef struct h5_trial {
    const char *path, *dataset;
} h5_trial;

static mr_status read_h5_trial(void *arg) {
    const h5_trial *t = arg;
    mr_array a;
    mr_error err = {0};
    mr_status st = read_h5_now(t->path, t->dataset, &a, &err);
    mr_array_free(&a);
    return st;
}

/* HDF5 1.10 crashes on some damaged files (docs/fuzzing.md), and a data
 * file carries no checksum: the read is tried first in a child process
 * (runtime/isolate.h), at the cost of reading the dataset twice. */
mr_status mr_array_read_h5(const char *path, const char *dataset, mr_array *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    MR_CHECK(mr_file_check(path, MR_FILE_WANT_HDF5, err)); /* a model, an .npz: say so */
    h5_trial t = {.path = path, .dataset = dataset};
    MR_CHECK(mr_isolate(path, "the HDF5 library", read_h5_trial, &t, err));
    return read_h5_now(path, dataset, out, err);
}
