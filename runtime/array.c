/* array.c: readers for IDX (raw or gzip), NPY (also from an .npz member,
 * runtime/npz.c) and HDF5 arrays, and an NPY writer (see array.h).
 *
 * IDX and NPY go through zlib's gzread, which reads plain and gzip files
 * alike, so one read path checks truncation, trailing bytes and corrupt
 * streams for both. HDF5 uses the serial C API with its automatic error
 * printing switched off (library code never prints); the innermost message of
 * HDF5's error stack is appended where it says more than we can. */
#include "runtime/array.h"
#include "runtime/file_kind.h"
#include "runtime/h5file.h"
#include "runtime/isolate.h"
#include "runtime/npz.h"

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

/* NPY headers are a few hundred bytes; a larger length means a corrupt file. */
#define NPY_MAX_HEADER (1u << 20)

static const char NPY_MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

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

static bool host_is_little_endian(void) {
    const uint16_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Reverses the bytes of each of `count` elements of `esize` bytes. */
static void swap_bytes(void *data, int64_t count, size_t esize) {
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
static mr_status checked_bytes(const char *what, mr_dtype dtype, int ndim, const int64_t *dims,
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
static mr_status alloc_data(const char *what, mr_array *out, int64_t bytes, mr_error *err) {
    out->data = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (out->data == NULL)
        return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory allocating %lld bytes", what,
                            (long long)bytes);
    return MR_OK;
}

/* ---- reading through zlib (IDX and NPY) -------------------------------- */

/* Reads up to n bytes; returns how many were read (less only at end of
 * input), or -1 on a read or decompression error (gzerror says which). */
static int64_t gz_read_full(gzFile gz, void *buf, int64_t n) {
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
static mr_status gz_fail(gzFile gz, const char *path, mr_error *err) {
    int errnum = Z_OK;
    const char *msg = gzerror(gz, &errnum);
    size_t plen = strlen(path);
    if (strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0) msg += plen + 2;
    if (errnum == Z_ERRNO) return mr_error_set(err, MR_ERR_IO, "%s: read error: %s", path, msg);
    if (errnum == Z_MEM_ERROR) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
    return mr_error_set(err, MR_ERR_DATA, "%s: corrupt gzip data: %s", path, msg);
}

static mr_status gz_open(const char *path, gzFile *gz, mr_error *err) {
    errno = 0;
    *gz = gzopen(path, "rb");
    if (*gz == NULL) {
        /* zlib leaves errno at 0 when it was its own allocation that failed */
        if (errno == 0) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
        return mr_error_set(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    gzbuffer(*gz, 1u << 20); /* the 8 KiB default makes large files slow */
    return MR_OK;
}

/* Reads exactly `n` bytes of header; a short read is a truncated header. */
static mr_status gz_read_header(gzFile gz, const char *path, const char *format, void *buf,
                                int64_t n, int64_t offset, mr_error *err) {
    int64_t got = gz_read_full(gz, buf, n);
    if (got < 0) return gz_fail(gz, path, err);
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
static mr_status gz_check_payload(gzFile gz, const char *path, int64_t size, int64_t n,
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
static int64_t file_size(const char *path) {
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
static mr_status gz_read_payload(gzFile gz, const char *path, void *buf, int64_t n, mr_error *err) {
    const char *unzipped = gzdirect(gz) ? "" : " after decompression";
    int64_t got = gz_read_full(gz, buf, n);
    if (got < 0) return gz_fail(gz, path, err);
    if (got < n)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: truncated: header says %lld bytes of data, file has %lld%s", path,
                            (long long)n, (long long)got, unzipped);
    char scratch[8192];
    int64_t extra = 0;
    int r;
    while ((r = gzread(gz, scratch, sizeof scratch)) > 0)
        extra += r;
    if (r < 0) return gz_fail(gz, path, err);
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
static mr_status narrow_f64(const char *path, mr_array *out, mr_error *err) {
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
    MR_CHECK(gz_read_header(gz, path, "IDX", magic, 4, 0, err));
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
    MR_CHECK(gz_read_header(gz, path, "IDX", raw, 4 * ndim, 4, err));
    for (int i = 0; i < ndim; i++) {
        out->dims[i] = load_be32(raw + 4 * i);
        if (out->dims[i] == 0)
            return mr_error_set(err, MR_ERR_DATA, "%s: IDX dimension %d of %d is 0", path, i + 1,
                                ndim);
    }
    out->ndim = ndim;

    int64_t bytes;
    MR_CHECK(checked_bytes(path, out->dtype, ndim, out->dims, &bytes, err));
    MR_CHECK(gz_check_payload(gz, path, file_size(path), bytes, err));
    MR_CHECK(alloc_data(path, out, bytes, err));
    MR_CHECK(gz_read_payload(gz, path, out->data, bytes, err));
    /* IDX stores multi-byte elements big-endian */
    if (out->dtype != MR_DTYPE_U8 && host_is_little_endian())
        swap_bytes(out->data, mr_array_count(out), mr_dtype_size(out->dtype));
    return MR_OK;
}

mr_status mr_array_read_idx(const char *path, mr_array *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    MR_CHECK(mr_file_check(path, MR_FILE_WANT_IDX, err)); /* a model, an .npz: say so */
    gzFile gz;
    MR_CHECK(gz_open(path, &gz, err));
    mr_status st = idx_read(gz, path, out, err);
    gzclose(gz); /* its status only repeats what the reads already reported */
    if (st != MR_OK) mr_array_free(out);
    return st;
}

/* ---- NPY ----------------------------------------------------------------- */

/* The header is a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 * parsed here just far enough for the three keys numpy writes. */
typedef struct npy_header {
    char descr[32];
    bool fortran_order;
    int ndim;
    int64_t dims[MR_ARRAY_MAX_DIMS];
} npy_header;

static void npy_skip_space(const char **p) {
    while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')
        (*p)++;
}

/* A quoted string ('...' or "..."); false if malformed or too long. */
static bool npy_parse_string(const char **p, char *out, size_t n) {
    char quote = **p;
    if (quote != '\'' && quote != '"') return false;
    const char *s = *p + 1, *end = strchr(s, quote);
    if (end == NULL || (size_t)(end - s) >= n) return false;
    memcpy(out, s, (size_t)(end - s));
    out[end - s] = '\0';
    *p = end + 1;
    return true;
}

static bool npy_parse_dim(const char **p, int64_t *v) {
    if (**p < '0' || **p > '9') return false;
    int64_t x = 0;
    while (**p >= '0' && **p <= '9') {
        if (x > (INT64_MAX - 9) / 10) return false;
        x = x * 10 + (**p - '0');
        (*p)++;
    }
    if (**p == 'L') (*p)++; /* Python 2 longs, in files written long ago */
    *v = x;
    return true;
}

/* "(a, b, c)", "(n,)" or "()". */
static bool npy_parse_shape(const char **p, npy_header *h, const char **why) {
    if (**p != '(') return *why = "shape is not a tuple", false;
    (*p)++;
    h->ndim = 0;
    for (;;) {
        npy_skip_space(p);
        if (**p == ')') break;
        if (h->ndim == MR_ARRAY_MAX_DIMS) return *why = "shape has more than 8 dimensions", false;
        if (!npy_parse_dim(p, &h->dims[h->ndim]))
            return *why = "shape holds something other than non-negative integers", false;
        h->ndim++;
        npy_skip_space(p);
        if (**p == ',')
            (*p)++;
        else if (**p != ')')
            return *why = "shape is not a tuple", false;
    }
    (*p)++;
    return true;
}

/* Parses the dict; on failure *why says what is wrong. */
static bool npy_parse_header(const char *text, npy_header *h, const char **why) {
    const char *p = text;
    bool have_descr = false, have_order = false, have_shape = false;
    npy_skip_space(&p);
    if (*p != '{') return *why = "not a dict", false;
    p++;
    for (;;) {
        npy_skip_space(&p);
        if (*p == '}') break;
        char key[32];
        if (!npy_parse_string(&p, key, sizeof key)) return *why = "expected a quoted key", false;
        npy_skip_space(&p);
        if (*p != ':') return *why = "expected ':' after a key", false;
        p++;
        npy_skip_space(&p);
        if (strcmp(key, "descr") == 0) {
            if (*p == '[') return *why = "structured dtypes are not supported", false;
            if (!npy_parse_string(&p, h->descr, sizeof h->descr))
                return *why = "descr is not a dtype string", false;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (strncmp(p, "True", 4) == 0)
                h->fortran_order = true, p += 4;
            else if (strncmp(p, "False", 5) == 0)
                h->fortran_order = false, p += 5;
            else
                return *why = "fortran_order is neither True nor False", false;
            have_order = true;
        } else if (strcmp(key, "shape") == 0) {
            if (!npy_parse_shape(&p, h, why)) return false;
            have_shape = true;
        } else {
            return *why = "unknown key (expected descr, fortran_order, shape)", false;
        }
        npy_skip_space(&p);
        if (*p == ',')
            p++;
        else if (*p != '}')
            return *why = "expected ',' or '}' after a value", false;
    }
    if (!have_descr || !have_order || !have_shape)
        return *why = "missing one of the keys descr, fortran_order, shape", false;
    return true;
}

/* The NPY dtypes read: `dtype` in memory, `esize` bytes a value in the file.
 * float64 (numpy's default float) becomes float32, what the model computes
 * in; the integer widths other than uint8, int32 and int64 (labels saved as
 * numpy made them: Keras's mnist.npz has uint8, others int16 or uint64)
 * become int32 or int64, whichever holds every value of the dtype. */
typedef enum npy_convert {
    NPY_AS_IS,      /* the file's bytes are the values */
    NPY_NARROW_F64, /* float64 to float32 (narrow_f64) */
    NPY_WIDEN_INT,  /* signed integers to a wider dtype */
    NPY_WIDEN_UINT, /* unsigned integers to a wider dtype */
} npy_convert;

typedef struct npy_dtype {
    const char *descr;
    mr_dtype dtype;
    size_t esize;
    npy_convert convert;
} npy_dtype;

static const npy_dtype NPY_DTYPES[] = {
    {"|u1", MR_DTYPE_U8, 1, NPY_AS_IS},       {"<u1", MR_DTYPE_U8, 1, NPY_AS_IS},
    {"<i4", MR_DTYPE_I32, 4, NPY_AS_IS},      {"<i8", MR_DTYPE_I64, 8, NPY_AS_IS},
    {"<f4", MR_DTYPE_F32, 4, NPY_AS_IS},      {"<f8", MR_DTYPE_F32, 8, NPY_NARROW_F64},
    {"|i1", MR_DTYPE_I32, 1, NPY_WIDEN_INT},  {"<i1", MR_DTYPE_I32, 1, NPY_WIDEN_INT},
    {"<i2", MR_DTYPE_I32, 2, NPY_WIDEN_INT},  {"<u2", MR_DTYPE_I32, 2, NPY_WIDEN_UINT},
    {"<u4", MR_DTYPE_I64, 4, NPY_WIDEN_UINT}, {"<u8", MR_DTYPE_I64, 8, NPY_WIDEN_UINT},
};

static const npy_dtype *npy_find_dtype(const char *descr) {
    for (size_t i = 0; i < sizeof NPY_DTYPES / sizeof NPY_DTYPES[0]; i++)
        if (strcmp(NPY_DTYPES[i].descr, descr) == 0) return &NPY_DTYPES[i];
    return NULL;
}

/* The `esize`-byte integers at the start of out->data (little-endian now) as
 * out->dtype's, in place: the last value first, since value i's new place
 * starts at or after its old one and before no later value's old place. A
 * uint64 above int64's range is refused. */
static mr_status widen_ints(const char *path, const npy_dtype *t, mr_array *out, mr_error *err) {
    const int64_t n = mr_array_count(out);
    const size_t to = mr_dtype_size(out->dtype);
    unsigned char *b = out->data;
    for (int64_t i = n - 1; i >= 0; i--) {
        uint64_t u = 0;
        for (size_t k = 0; k < t->esize; k++)
            u |= (uint64_t)b[t->esize * (size_t)i + k] << (8 * k);
        int64_t v = (int64_t)u;
        if (t->convert == NPY_WIDEN_INT && t->esize < 8 && (u >> (8 * t->esize - 1)) & 1)
            v = (int64_t)(u | ~(uint64_t)0 << (8 * t->esize)); /* sign-extend */
        if (t->convert == NPY_WIDEN_UINT && u > (uint64_t)INT64_MAX)
            return mr_error_set(err, MR_ERR_DATA,
                                "%s: uint64 value %llu (element %lld) is beyond int64's range",
                                path, (unsigned long long)u, (long long)i);
        if (to == 4) {
            const int32_t x = (int32_t)v;
            memcpy(b + 4 * (size_t)i, &x, 4);
        } else {
            memcpy(b + 8 * (size_t)i, &v, 8);
        }
    }
    return MR_OK;
}

/* The values after the header: out's dtype and dims are set; the file holds
 * t->esize bytes a value, converted as t says. */
static mr_status npy_read_data(gzFile gz, const char *path, int64_t size, const npy_dtype *t,
                               mr_array *out, mr_error *err) {
    /* the larger of the file's and memory's bytes a value, for the checks and the buffer */
    const size_t mem = mr_dtype_size(out->dtype), big = t->esize > mem ? t->esize : mem;
    const mr_dtype sized = big == 8 ? MR_DTYPE_I64 : big == 4 ? MR_DTYPE_I32 : MR_DTYPE_U8;
    int64_t bytes;
    MR_CHECK(checked_bytes(path, sized, out->ndim, out->dims, &bytes, err));
    const int64_t raw = bytes / (int64_t)big * (int64_t)t->esize;
    MR_CHECK(gz_check_payload(gz, path, size, raw, err));
    MR_CHECK(alloc_data(path, out, bytes, err));
    MR_CHECK(gz_read_payload(gz, path, out->data, raw, err));
    if (t->esize > 1 && !host_is_little_endian())
        swap_bytes(out->data, mr_array_count(out), t->esize);
    if (t->convert == NPY_NARROW_F64) {
        out->dtype = MR_DTYPE_I64; /* narrow_f64 reads 8 bytes a value */
        return narrow_f64(path, out, err);
    }
    if (t->convert == NPY_WIDEN_INT || t->convert == NPY_WIDEN_UINT)
        return widen_ints(path, t, out, err);
    return MR_OK;
}

static mr_status npy_read(gzFile gz, const char *path, int64_t size, mr_array *out, mr_error *err) {
    uint8_t pre[8];
    int64_t got = gz_read_full(gz, pre, 8);
    if (got < 0) return gz_fail(gz, path, err);
    if (got < 6 || memcmp(pre, NPY_MAGIC, 6) != 0) {
        char seen[32] = "";
        size_t len = 0;
        for (int64_t i = 0; i < got && i < 6; i++)
            len += (size_t)snprintf(seen + len, sizeof seen - len, "%s%02X", i ? " " : "", pre[i]);
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: wrong NPY magic (expected 93 4E 55 4D 50 59 = \\x93NUMPY, "
                            "found %s)",
                            path, got > 0 ? seen : "an empty file");
    }
    if (got < 8)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: truncated: NPY header needs 8 bytes, file has %lld", path,
                            (long long)got);
    int major = pre[6], minor = pre[7];
    /* 1.0 has a 2-byte header length; 2.0 and 3.0 (UTF-8 header) a 4-byte one */
    int64_t len_bytes = major == 1 ? 2 : 4;
    if (major < 1 || major > 3 || minor != 0)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: unsupported NPY version %d.%d (supported: 1.0, 2.0, 3.0)", path,
                            major, minor);
    uint8_t lenbuf[4];
    MR_CHECK(gz_read_header(gz, path, "NPY", lenbuf, len_bytes, 8, err));
    uint32_t hlen = (uint32_t)lenbuf[0] | (uint32_t)lenbuf[1] << 8;
    if (len_bytes == 4) hlen |= (uint32_t)lenbuf[2] << 16 | (uint32_t)lenbuf[3] << 24;
    if (hlen > NPY_MAX_HEADER)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: NPY header length %u is implausible (corrupt file?)", path, hlen);

    char *text = malloc(hlen + 1);
    if (text == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
    mr_status st = gz_read_header(gz, path, "NPY", text, hlen, 8 + len_bytes, err);
    if (st != MR_OK) {
        free(text);
        return st;
    }
    text[hlen] = '\0';
    npy_header h = {0};
    const char *why = NULL;
    bool ok = npy_parse_header(text, &h, &why);
    if (!ok) {
        /* quote the header (without its padding) so the problem can be seen */
        size_t n = strlen(text);
        while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\n'))
            n--;
        for (size_t i = 0; i < n; i++)
            if (text[i] == '\n' || text[i] == '\r') text[i] = ' ';
        mr_error_set(err, MR_ERR_DATA, "%s: bad NPY header: %s: %.*s", path, why,
                     (int)(n > 200 ? 200 : n), text);
    }
    free(text);
    if (!ok) return MR_ERR_DATA;

    const npy_dtype *t = npy_find_dtype(h.descr);
    if (t == NULL) {
        /* the dtype string as the file has it, but on one line */
        for (char *c = h.descr; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: unsupported NPY dtype '%s' (supported: |u1, |i1, <i2, <u2, <i4, "
                            "<u4, <i8, <u8, <f4, <f8; convert with astype)",
                            path, h.descr);
    }
    if (h.fortran_order)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: NPY array is in Fortran order; only C order is supported "
                            "(save np.ascontiguousarray(a))",
                            path);
    out->dtype = t->dtype;
    out->ndim = h.ndim;
    memcpy(out->dims, h.dims, sizeof h.dims);
    return npy_read_data(gz, path, size, t, out, err);
}

mr_status mr_array_read_npy(const char *path, mr_array *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    MR_CHECK(mr_file_check(path, MR_FILE_WANT_NPY, err)); /* a model, an .npz: say so */
    gzFile gz;
    MR_CHECK(gz_open(path, &gz, err));
    mr_status st = npy_read(gz, path, file_size(path), out, err);
    gzclose(gz);
    if (st != MR_OK) mr_array_free(out);
    return st;
}

mr_status mr_array_read_npy_fd(int fd, const char *name, mr_array *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    struct stat sb;
    const int64_t size = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? (int64_t)sb.st_size : -1;
    errno = 0;
    gzFile gz = gzdopen(fd, "rb");
    if (gz == NULL) {
        close(fd);
        return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", name);
    }
    gzbuffer(gz, 1u << 20);
    mr_status st = npy_read(gz, name, size, out, err);
    gzclose(gz); /* closes fd */
    if (st != MR_OK) mr_array_free(out);
    return st;
}

static const char *npy_descr(mr_dtype dtype) {
    switch (dtype) {
    case MR_DTYPE_U8:
        return "|u1";
    case MR_DTYPE_I32:
        return "<i4";
    case MR_DTYPE_I64:
        return "<i8";
    case MR_DTYPE_F32:
        return "<f4";
    }
    return NULL;
}

/* Writes the data little-endian: directly on little-endian hosts, through a
 * swapped bounce buffer elsewhere. */
static bool npy_write_data(FILE *f, const mr_array *a, int64_t bytes) {
    size_t esize = mr_dtype_size(a->dtype);
    if (esize == 1 || host_is_little_endian())
        return bytes == 0 || fwrite(a->data, 1, (size_t)bytes, f) == (size_t)bytes;
    uint8_t buf[1 << 16];
    for (int64_t off = 0; off < bytes; off += (int64_t)sizeof buf) {
        size_t n = bytes - off < (int64_t)sizeof buf ? (size_t)(bytes - off) : sizeof buf;
        memcpy(buf, (const uint8_t *)a->data + off, n);
        swap_bytes(buf, (int64_t)(n / esize), esize);
        if (fwrite(buf, 1, n, f) != n) return false;
    }
    return true;
}

mr_status mr_array_write_npy(const char *path, const mr_array *a, mr_error *err) {
    const char *descr = npy_descr(a->dtype);
    if (descr == NULL)
        return mr_error_set(err, MR_ERR_DATA, "%s: cannot write NPY: invalid dtype %d", path,
                            (int)a->dtype);
    if (a->ndim < 0 || a->ndim > MR_ARRAY_MAX_DIMS)
        return mr_error_set(err, MR_ERR_DATA, "%s: cannot write NPY: ndim %d (supported: 0 to %d)",
                            path, a->ndim, MR_ARRAY_MAX_DIMS);
    int64_t bytes;
    MR_CHECK(checked_bytes(path, a->dtype, a->ndim, a->dims, &bytes, err));
    if (bytes > 0 && a->data == NULL)
        return mr_error_set(err, MR_ERR_DATA, "%s: cannot write NPY: array has no data", path);

    /* numpy's layout: a 1-D shape is "(n,)"; the header ends in '\n' and is
     * padded with spaces so the data starts at a multiple of 64 bytes */
    char shape[256] = "", header[512];
    size_t slen = 0;
    for (int i = 0; i < a->ndim; i++)
        slen += (size_t)snprintf(shape + slen, sizeof shape - slen, "%s%lld", i ? ", " : "",
                                 (long long)a->dims[i]);
    if (a->ndim == 1) snprintf(shape + slen, sizeof shape - slen, ",");
    int hlen = snprintf(header, sizeof header,
                        "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    int total = 10 + hlen + 1;
    int padded = (total + 63) / 64 * 64;
    memset(header + hlen, ' ', (size_t)(padded - total));
    hlen += padded - total;
    header[hlen++] = '\n';

    uint8_t pre[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 0xFF), (uint8_t)(hlen >> 8)};
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    bool ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre &&
              fwrite(header, 1, (size_t)hlen, f) == (size_t)hlen && npy_write_data(f, a, bytes);
    int saved = errno;
    if (fclose(f) != 0 && ok) ok = false, saved = errno;
    if (!ok) {
        unlink(path); /* a half-written file would only fail later, less clearly */
        return mr_error_set(err, MR_ERR_IO, "%s: write failed: %s", path, strerror(saved));
    }
    return MR_OK;
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
    MR_CHECK_GOTO(checked_bytes(what, out->dtype, ndim, out->dims, &bytes, err), st, done);
    MR_CHECK_GOTO(alloc_data(what, out, bytes, err), st, done);
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
        return mr_error_set(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    fclose(probe);

    /* silence HDF5's own printing to stderr for our calls only */
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

/* ---- dispatch ------------------------------------------------------------ */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Refuses a float array with a NaN or an infinity: one would poison every
 * weight it reaches in the first step. Names the example (row) and the
 * element within it, counted from 0. Integer arrays are always finite. */
static mr_status check_finite(const char *spec, mr_array *a, mr_error *err) {
    if (a->dtype != MR_DTYPE_F32) return MR_OK;
    const float *x = a->data;
    const int64_t n = mr_array_count(a), row = mr_array_row_size(a);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            mr_status st = mr_error_set(err, MR_ERR_DATA,
                                        "%s: example %lld has a non-finite value (%s) at element "
                                        "%lld; NaN and infinity are refused",
                                        spec, (long long)(i / row), isnan(x[i]) ? "NaN" : "Inf",
                                        (long long)(i % row));
            mr_array_free(a);
            return st;
        }
    return MR_OK;
}

static mr_status read_any(const char *spec, mr_array *out, mr_error *err);

/* "file.npz:member", the archive's path the first n bytes of spec. */
static mr_status read_npz_member(const char *spec, size_t n, mr_array *out, mr_error *err) {
    if (spec[n + 1] == '\0')
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: no member named after ':' (write %.*s:NAME, e.g. x_train)", spec,
                            (int)n, spec);
    char *path = malloc(n + 1);
    if (path == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", spec);
    memcpy(path, spec, n);
    path[n] = '\0';
    mr_status st = mr_npz_read(path, spec + n + 1, out, err);
    free(path);
    return st;
}

mr_status mr_array_read(const char *spec, mr_array *out, mr_error *err) {
    MR_CHECK(read_any(spec, out, err));
    return check_finite(spec, out, err);
}

static mr_status read_any(const char *spec, mr_array *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    /* "file.h5:/dataset": split at the colon after the extension, so paths
     * with colons elsewhere still work */
    const char *h5 = strstr(spec, ".h5:"), *hdf5 = strstr(spec, ".hdf5:");
    const char *colon = NULL;
    if (h5 != NULL && (hdf5 == NULL || h5 < hdf5))
        colon = h5 + 3;
    else if (hdf5 != NULL)
        colon = hdf5 + 5;
    if (colon != NULL) {
        size_t n = (size_t)(colon - spec);
        if (colon[1] == '\0')
            return mr_error_set(err, MR_ERR_CONFIG,
                                "%s: no dataset named after ':' (write %.*s:/dataset)", spec,
                                (int)n, spec);
        char *path = malloc(n + 1);
        if (path == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", spec);
        memcpy(path, spec, n);
        path[n] = '\0';
        mr_status st = mr_array_read_h5(path, colon + 1, out, err);
        free(path);
        return st;
    }
    /* without a dataset the HDF5 file would be read as IDX and fail on its
     * magic, which would not tell the user what to change */
    if (ends_with(spec, ".h5") || ends_with(spec, ".hdf5"))
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: an HDF5 file needs a dataset name: write %s:/dataset", spec, spec);
    const char *npz = strstr(spec, ".npz:");
    if (npz != NULL) return read_npz_member(spec, (size_t)(npz + 4 - spec), out, err);
    if (mr_npz_is_archive(spec)) {
        char list[1024] = "";
        MR_CHECK(mr_npz_members(spec, list, sizeof list, err));
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: an .npz needs a member name: write %s:NAME (it has: %s)", spec,
                            spec, list[0] ? list : "no members");
    }
    if (ends_with(spec, ".npy")) return mr_array_read_npy(spec, out, err);
    return mr_array_read_idx(spec, out, err);
}
