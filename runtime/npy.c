/* npy.c: NumPy's .npy format (see npy.h): the header (a Python dict literal)
 * parsed and written, the dtypes read and how they convert, the data read
 * through the readers' shared zlib path (runtime/array_impl.h), so an NPY
 * file may also be gzip-compressed. */
#include "runtime/npy.h"
#include "runtime/array_impl.h"
#include "runtime/file_kind.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

/* NPY headers are a few hundred bytes; a larger length means a corrupt file. */
#define NPY_MAX_HEADER (1u << 20)

static const char NPY_MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

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
    NPY_NARROW_F64, /* float64 to float32 (array_narrow_f64) */
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
    MR_CHECK(array_checked_bytes(path, sized, out->ndim, out->dims, &bytes, err));
    const int64_t raw = bytes / (int64_t)big * (int64_t)t->esize;
    MR_CHECK(array_gz_check_payload(gz, path, size, raw, err));
    MR_CHECK(array_alloc_data(path, out, bytes, err));
    MR_CHECK(array_gz_read_payload(gz, path, out->data, raw, err));
    if (t->esize > 1 && !array_host_is_little_endian())
        array_swap_bytes(out->data, mr_array_count(out), t->esize);
    if (t->convert == NPY_NARROW_F64) {
        out->dtype = MR_DTYPE_I64; /* array_narrow_f64 reads 8 bytes a value */
        return array_narrow_f64(path, out, err);
    }
    if (t->convert == NPY_WIDEN_INT || t->convert == NPY_WIDEN_UINT)
        return widen_ints(path, t, out, err);
    return MR_OK;
}

static mr_status npy_read(gzFile gz, const char *path, int64_t size, mr_array *out, mr_error *err) {
    uint8_t pre[8];
    int64_t got = array_gz_read_full(gz, pre, 8);
    if (got < 0) return array_gz_fail(gz, path, err);
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
    MR_CHECK(array_gz_read_header(gz, path, "NPY", lenbuf, len_bytes, 8, err));
    uint32_t hlen = (uint32_t)lenbuf[0] | (uint32_t)lenbuf[1] << 8;
    if (len_bytes == 4) hlen |= (uint32_t)lenbuf[2] << 16 | (uint32_t)lenbuf[3] << 24;
    if (hlen > NPY_MAX_HEADER)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: NPY header length %u is implausible (corrupt file?)", path, hlen);

    char *text = malloc(hlen + 1);
    if (text == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
    mr_status st = array_gz_read_header(gz, path, "NPY", text, hlen, 8 + len_bytes, err);
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

mr_status mr_npy_read(const char *path, mr_array *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    MR_CHECK(mr_file_check(path, MR_FILE_WANT_NPY, err)); /* a model, an .npz: say so */
    gzFile gz;
    MR_CHECK(array_gz_open(path, &gz, err));
    mr_status st = npy_read(gz, path, array_file_size(path), out, err);
    gzclose(gz);
    if (st != MR_OK) mr_array_free(out);
    return st;
}

mr_status mr_npy_read_fd(int fd, const char *name, mr_array *out, mr_error *err) {
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
    if (esize == 1 || array_host_is_little_endian())
        return bytes == 0 || fwrite(a->data, 1, (size_t)bytes, f) == (size_t)bytes;
    uint8_t buf[1 << 16];
    for (int64_t off = 0; off < bytes; off += (int64_t)sizeof buf) {
        size_t n = bytes - off < (int64_t)sizeof buf ? (size_t)(bytes - off) : sizeof buf;
        memcpy(buf, (const uint8_t *)a->data + off, n);
        array_swap_bytes(buf, (int64_t)(n / esize), esize);
        if (fwrite(buf, 1, n, f) != n) return false;
    }
    return true;
}

mr_status mr_npy_write(const char *path, const mr_array *a, mr_error *err) {
    const char *descr = npy_descr(a->dtype);
    if (descr == NULL)
        return mr_error_set(err, MR_ERR_DATA, "%s: cannot write NPY: invalid dtype %d", path,
                            (int)a->dtype);
    if (a->ndim < 0 || a->ndim > MR_ARRAY_MAX_DIMS)
        return mr_error_set(err, MR_ERR_DATA, "%s: cannot write NPY: ndim %d (supported: 0 to %d)",
                            path, a->ndim, MR_ARRAY_MAX_DIMS);
    int64_t bytes;
    MR_CHECK(array_checked_bytes(path, a->dtype, a->ndim, a->dims, &bytes, err));
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
