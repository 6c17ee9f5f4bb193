/* h5file.c: checkpoint HDF5 files (h5file.h). */
#include "runtime/h5file.h"
#include "runtime/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Copies the innermost description of HDF5's error stack (the most
 * specific: "file signature not found", "unable to open file"). */
static herr_t walk_last(unsigned n, const H5E_error2_t *e, void *data) {
    (void)n;
    char *buf = data;
    if (e->desc != NULL && e->desc[0] != '\0') snprintf(buf, 256, "%s", e->desc);
    return 0;
}

const char *mr_h5_last_error(char buf[256]) {
    snprintf(buf, 256, "no detail from HDF5");
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_last, buf);
    /* one line: HDF5 appends ": time = ..., filename = ..." on a new line */
    buf[strcspn(buf, "\n")] = '\0';
    char *t = strstr(buf, ": time =");
    if (t != NULL) *t = '\0';
    return buf;
}

/* "/model_weights/dense" for messages: loc's own path, then obj. */
static const char *where(hid_t loc, const char *obj, char *buf, size_t n) {
    char base[512] = "";
    if (H5Iget_name(loc, base, sizeof base) < 0) base[0] = '\0';
    if (obj == NULL || obj[0] == '\0' || strcmp(obj, ".") == 0)
        snprintf(buf, n, "%s", base[0] ? base : "/");
    else
        snprintf(buf, n, "%s/%s", strcmp(base, "/") == 0 ? "" : base, obj);
    return buf;
}

static void quiet(mr_h5 *h) {
    H5Eget_auto2(H5E_DEFAULT, &h->saved_func, &h->saved_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void unquiet(mr_h5 *h) {
    H5Eset_auto2(H5E_DEFAULT, h->saved_func, h->saved_data);
}

static hid_t h5_type(mr_h5_type t, int file) {
    switch (t) {
    case MR_H5_F64:
        return file ? H5T_IEEE_F64LE : H5T_NATIVE_DOUBLE;
    case MR_H5_I64:
        return file ? H5T_STD_I64LE : H5T_NATIVE_INT64;
    default:
        return file ? H5T_IEEE_F32LE : H5T_NATIVE_FLOAT;
    }
}

void mr_h5_format_shape(int rank, const int64_t *dims, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (o < n) snprintf(buf + o, n - o, rank == 1 ? ",)" : ")");
}

/* ---- files ---- */

/* The file is built in memory (HDF5's core driver, no backing store) and
 * written out by mr_h5_commit with plain write(2): a full disk or a file
 * size limit is then an error of ours, not a failed H5Fclose, after which
 * HDF5 1.10 keeps the file half-open and crashes at exit. */
mr_status mr_h5_create(mr_h5 *h, const char *path, mr_error *err) {
    memset(h, 0, sizeof *h);
    h->file = -1;
    snprintf(h->path, sizeof h->path, "%s", path);
    /* the folder must take the temporary file now, not after all the work */
    MR_CHECK(mr_atomic_path_begin(path, h->tmp, sizeof h->tmp, err));
    quiet(h);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 20, 0);
    h->file = H5Fcreate(h->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (h->file < 0) {
        char detail[256];
        mr_h5_last_error(detail);
        unquiet(h);
        mr_atomic_path_abort(h->tmp);
        h->tmp[0] = '\0';
        return mr_error_set(err, MR_ERR_NOMEM, "%s: cannot build the file in memory (%s)", path,
                            detail);
    }
    return MR_OK;
}

/* Writes n bytes to fd, all of them or an error (errno). */
static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w, n -= (size_t)w;
    }
    return 0;
}

mr_status mr_h5_commit(mr_h5 *h, mr_error *err) {
    char detail[256];
    mr_status st = MR_OK;
    /* the image of the file built in memory */
    ssize_t size =
        H5Fflush(h->file, H5F_SCOPE_GLOBAL) < 0 ? -1 : H5Fget_file_image(h->file, NULL, 0);
    char *image = size > 0 ? malloc((size_t)size) : NULL;
    if (image == NULL || H5Fget_file_image(h->file, image, (size_t)size) != size)
        st = mr_error_set(err, size > 0 ? MR_ERR_NOMEM : MR_ERR_IO, "%s: cannot write (%s)",
                          h->path, mr_h5_last_error(detail));
    H5Fclose(h->file); /* in memory: nothing to fail */
    h->file = -1;
    unquiet(h);
    if (st == MR_OK) {
        int fd = open(h->tmp, O_WRONLY | O_TRUNC);
        int bad = fd < 0 || write_all(fd, image, (size_t)size) != 0;
        int e = errno;
        if (fd >= 0 && close(fd) != 0 && !bad) bad = 1, e = errno;
        if (bad) st = mr_error_set(err, MR_ERR_IO, "%s: cannot write: %s", h->path, strerror(e));
    }
    free(image);
    /* fsync, rename over the target, fsync of the folder */
    if (st == MR_OK)
        st = mr_atomic_path_commit(h->path, h->tmp, err);
    else
        mr_atomic_path_abort(h->tmp);
    h->tmp[0] = '\0';
    return st;
}

void mr_h5_discard(mr_h5 *h) {
    if (h->file >= 0) {
        H5Fclose(h->file);
        unquiet(h);
    }
    h->file = -1;
    mr_atomic_path_abort(h->tmp);
    h->tmp[0] = '\0';
}

/* HDF5 1.10's reader of a global heap collection (where variable-length
 * strings live: our attributes, h5py's) loops forever on an object whose
 * walk does not advance (H5HG__cache_heap_deserialize: free space, index 0,
 * of size 0; or a size so large that the aligned step wraps to 0), a hang
 * fuzzing found in mr_checkpoint_load (tests/fuzz/corpus/checkpoint/).
 * So before HDF5 reads a file, each collection in it ("GCOL", version 1,
 * 8-byte lengths as every writer we know uses) is walked as HDF5 walks it,
 * and one whose walk would not end is refused. The signature is searched in
 * the whole file; a chance match in raw data is refused only if its walk
 * does not advance. Returns 0, or the collection's offset + 1. */
static int64_t bad_heap(FILE *f) {
    enum { CHUNK = 1 << 20, SIG = 8 };
    static const unsigned char sig[SIG] = {'G', 'C', 'O', 'L', 1, 0, 0, 0};
    unsigned char *buf = malloc(CHUNK + SIG);
    if (buf == NULL) return 0; /* then HDF5 is on its own */
    struct stat sb;
    int fd = fileno(f);
    int64_t size = fstat(fd, &sb) == 0 ? (int64_t)sb.st_size : 0, bad = 0;
    size_t keep = 0; /* bytes carried over: a signature across two chunks */
    int64_t at = 0;  /* file offset of buf[0] */
    for (;;) {
        size_t got = fread(buf + keep, 1, CHUNK, f), n = keep + got;
        for (size_t i = 0; !bad && i + SIG + 8 <= n; i++) {
            if (buf[i] != 'G' || memcmp(buf + i, sig, SIG) != 0) continue;
            int64_t off = at + (int64_t)i;
            uint64_t len = 0;
            for (int b = 7; b >= 0; b--)
                len = len << 8 | buf[i + SIG + b];
            /* a collection past the end of the file: HDF5 fails to read it */
            if (len < 16 || len > (uint64_t)(size - off)) continue;
            uint64_t p = 16, end = len;
            unsigned char oh[16];
            while (!bad && p < end) {
                if (p + 16 > end) break; /* tail too small for a header: free space */
                if (pread(fd, oh, 16, (off_t)(off + (int64_t)p)) != 16) break;
                unsigned idx = oh[0] | oh[1] << 8u;
                uint64_t osize = 0;
                for (int b = 7; b >= 0; b--)
                    osize = osize << 8 | oh[8 + b];
                /* HDF5: p = begin + need, need = the free space's size for
                 * index 0, the header and the 8-aligned size otherwise */
                uint64_t need = idx == 0 ? osize : 16 + ((osize + 7) & ~(uint64_t)7);
                if (need == 0 || need > end - p) bad = off + 1;
                p += need;
            }
        }
        if (bad || got < CHUNK) break;
        keep = n < SIG + 8 ? n : SIG + 8;
        memmove(buf, buf + n - keep, keep);
        at += (int64_t)(n - keep);
    }
    free(buf);
    return bad;
}

mr_status mr_h5_open(mr_h5 *h, const char *path, mr_error *err) {
    memset(h, 0, sizeof *h);
    h->file = -1;
    snprintf(h->path, sizeof h->path, "%s", path);
    /* HDF5 says "unable to open" for a missing file too: ask the OS first */
    FILE *probe = fopen(path, "rb");
    if (probe == NULL)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int64_t heap = bad_heap(probe);
    fclose(probe);
    if (heap != 0)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: not a readable HDF5 file (corrupt global heap at byte %lld)", path,
                            (long long)(heap - 1));
    quiet(h);
    h->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (h->file < 0) {
        char detail[256];
        mr_h5_last_error(detail);
        unquiet(h);
        return mr_error_set(err, MR_ERR_DATA, "%s: not a readable HDF5 file (%s)", path, detail);
    }
    return MR_OK;
}

void mr_h5_close(mr_h5 *h) {
    if (h->file >= 0) {
        H5Fclose(h->file);
        unquiet(h);
    }
    h->file = -1;
}

/* ---- writing ---- */

static hid_t make_parents_lcpl(void) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (lcpl >= 0) H5Pset_create_intermediate_group(lcpl, 1);
    return lcpl;
}

mr_status mr_h5_group(mr_h5 *h, hid_t loc, const char *obj, hid_t *out, mr_error *err) {
    char w[600], detail[256];
    if (H5Lexists(loc, obj, H5P_DEFAULT) > 0) {
        *out = H5Gopen2(loc, obj, H5P_DEFAULT);
    } else {
        hid_t lcpl = make_parents_lcpl();
        *out = H5Gcreate2(loc, obj, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        H5Pclose(lcpl);
    }
    if (*out < 0)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot write group %s (%s)", h->path,
                            where(loc, obj, w, sizeof w), mr_h5_last_error(detail));
    return MR_OK;
}

static hid_t string_type(int utf8) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, utf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    return t;
}

static mr_status write_attr(mr_h5 *h, hid_t loc, const char *name, hid_t type, hid_t space,
                            const void *buf, mr_error *err) {
    char w[600], detail[256];
    if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
    hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, type, buf);
    if (a >= 0) H5Aclose(a);
    if (rc < 0)
        return mr_error_set(err, MR_ERR_IO, "%s: %s: cannot write attribute '%s' (%s)", h->path,
                            where(loc, NULL, w, sizeof w), name, mr_h5_last_error(detail));
    return MR_OK;
}

mr_status mr_h5_attr_str(mr_h5 *h, hid_t loc, const char *name, const char *value, int utf8,
                         mr_error *err) {
    hid_t t = string_type(utf8), s = H5Screate(H5S_SCALAR);
    mr_status st = write_attr(h, loc, name, t, s, &value, err);
    H5Sclose(s);
    H5Tclose(t);
    return st;
}

mr_status mr_h5_attr_strs(mr_h5 *h, hid_t loc, const char *name, const char *const *v, int n,
                          mr_error *err) {
    hsize_t dim = (hsize_t)n;
    hid_t s = H5Screate_simple(1, &dim, NULL);
    mr_status st;
    if (n == 0) {
        double none = 0.0;
        st = write_attr(h, loc, name, H5T_IEEE_F64LE, s, &none, err);
    } else {
        hid_t t = string_type(0);
        st = write_attr(h, loc, name, t, s, v, err);
        H5Tclose(t);
    }
    H5Sclose(s);
    return st;
}

mr_status mr_h5_write(mr_h5 *h, hid_t loc, const char *obj, mr_h5_type type, int rank,
                      const int64_t *dims, const void *data, mr_error *err) {
    char w[600], detail[256];
    hsize_t hd[MR_H5_MAX_DIMS];
    for (int i = 0; i < rank; i++)
        hd[i] = (hsize_t)dims[i];
    hid_t s = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, hd, NULL);
    hid_t lcpl = make_parents_lcpl();
    hid_t d = H5Dcreate2(loc, obj, h5_type(type, 1), s, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : H5Dwrite(d, h5_type(type, 0), H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (d >= 0) H5Dclose(d);
    H5Pclose(lcpl);
    H5Sclose(s);
    if (rc < 0)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot write %s (%s)", h->path,
                            where(loc, obj, w, sizeof w), mr_h5_last_error(detail));
    return MR_OK;
}

/* ---- reading ---- */

int mr_h5_exists(mr_h5 *h, hid_t loc, const char *obj) {
    (void)h;
    /* every link on the way must exist for H5Lexists on the whole path */
    char part[600];
    const char *p = obj;
    while ((p = strchr(p, '/')) != NULL) {
        snprintf(part, sizeof part, "%.*s", (int)(p - obj), obj);
        if (part[0] && H5Lexists(loc, part, H5P_DEFAULT) <= 0) return 0;
        p++;
    }
    return H5Lexists(loc, obj, H5P_DEFAULT) > 0;
}

mr_status mr_h5_open_group(mr_h5 *h, hid_t loc, const char *obj, hid_t *out, mr_error *err) {
    char w[600];
    *out = mr_h5_exists(h, loc, obj) ? H5Gopen2(loc, obj, H5P_DEFAULT) : -1;
    if (*out < 0)
        return mr_error_set(err, MR_ERR_DATA, "%s: no group %s", h->path,
                            where(loc, obj, w, sizeof w));
    return MR_OK;
}

/* Reads attribute `name` of loc as n strings (1 for a scalar). */
static mr_status read_strings(mr_h5 *h, hid_t loc, const char *name, int want_scalar, char ***out,
                              int *n, mr_error *err) {
    char w[600];
    *out = NULL, *n = 0;
    if (H5Aexists(loc, name) <= 0)
        return mr_error_set(err, MR_ERR_DATA, "%s: %s: no attribute '%s'", h->path,
                            where(loc, NULL, w, sizeof w), name);
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), ft = H5Aget_type(a), s = H5Aget_space(a);
    mr_status st = MR_OK;
    hssize_t count = H5Sget_simple_extent_npoints(s);
    int scalar = H5Sget_simple_extent_type(s) == H5S_SCALAR;
    if (H5Tget_class(ft) != H5T_STRING) {
        /* Keras's empty list is a float64 array of shape (0,) */
        if (!want_scalar && count == 0) goto done;
        st = mr_error_set(err, MR_ERR_DATA, "%s: %s: attribute '%s' is not text", h->path,
                          where(loc, NULL, w, sizeof w), name);
        goto done;
    }
    if (count < 0 || (want_scalar && count != 1) || (!want_scalar && scalar)) {
        st = mr_error_set(err, MR_ERR_DATA, "%s: %s: attribute '%s' is not a %s", h->path,
                          where(loc, NULL, w, sizeof w), name,
                          want_scalar ? "single string" : "list of strings");
        goto done;
    }
    char **v = calloc((size_t)(count ? count : 1), sizeof *v);
    if (v == NULL) {
        st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
        goto done;
    }
    herr_t rc;
    if (H5Tis_variable_str(ft) > 0) {
        hid_t mt = string_type(H5Tget_cset(ft) == H5T_CSET_UTF8);
        char **raw = calloc((size_t)(count ? count : 1), sizeof *raw);
        rc = raw ? H5Aread(a, mt, raw) : -1;
        for (hssize_t i = 0; rc >= 0 && i < count; i++)
            v[i] = strdup(raw[i] ? raw[i] : "");
        if (rc >= 0) H5Dvlen_reclaim(mt, s, H5P_DEFAULT, raw);
        free(raw);
        H5Tclose(mt);
    } else {
        size_t len = H5Tget_size(ft);
        hid_t mt = H5Tcopy(ft);
        char *raw = calloc((size_t)count, len + 1);
        rc = raw ? H5Aread(a, mt, raw) : -1;
        for (hssize_t i = 0; rc >= 0 && i < count; i++) {
            v[i] = calloc(len + 1, 1);
            if (v[i]) memcpy(v[i], raw + (size_t)i * len, len);
        }
        free(raw);
        H5Tclose(mt);
    }
    if (rc < 0) {
        char detail[256];
        mr_h5_free_strs(v, (int)count);
        st = mr_error_set(err, MR_ERR_DATA, "%s: %s: cannot read attribute '%s' (%s)", h->path,
                          where(loc, NULL, w, sizeof w), name, mr_h5_last_error(detail));
        goto done;
    }
    *out = v, *n = (int)count;
done:
    H5Sclose(s);
    H5Tclose(ft);
    H5Aclose(a);
    return st;
}

mr_status mr_h5_read_attr_str(mr_h5 *h, hid_t loc, const char *name, char **out, mr_error *err) {
    char **v;
    int n;
    *out = NULL;
    MR_CHECK(read_strings(h, loc, name, 1, &v, &n, err));
    *out = v[0];
    free(v);
    return MR_OK;
}

mr_status mr_h5_read_attr_strs(mr_h5 *h, hid_t loc, const char *name, char ***out, int *n,
                               mr_error *err) {
    return read_strings(h, loc, name, 0, out, n, err);
}

void mr_h5_free_strs(char **v, int n) {
    for (int i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* Opens dataset loc/obj with a message naming it when it is not there. */
static hid_t open_dataset(mr_h5 *h, hid_t loc, const char *obj, mr_error *err) {
    char w[600];
    hid_t d = mr_h5_exists(h, loc, obj) ? H5Dopen2(loc, obj, H5P_DEFAULT) : -1;
    if (d < 0)
        mr_error_set(err, MR_ERR_DATA, "%s: no dataset %s", h->path, where(loc, obj, w, sizeof w));
    return d;
}

mr_status mr_h5_shape(mr_h5 *h, hid_t loc, const char *obj, int *rank, int64_t *dims,
                      mr_error *err) {
    char w[600];
    hid_t d = open_dataset(h, loc, obj, err);
    if (d < 0) return MR_ERR_DATA;
    hid_t s = H5Dget_space(d);
    int r = H5Sget_simple_extent_ndims(s);
    mr_status st = MR_OK;
    if (r < 0 || r > MR_H5_MAX_DIMS) {
        st = mr_error_set(err, MR_ERR_DATA, "%s: %s: %d dimensions", h->path,
                          where(loc, obj, w, sizeof w), r);
    } else {
        hsize_t hd[MR_H5_MAX_DIMS];
        H5Sget_simple_extent_dims(s, hd, NULL);
        for (int i = 0; i < r; i++)
            dims[i] = (int64_t)hd[i];
        *rank = r;
    }
    H5Sclose(s);
    H5Dclose(d);
    return st;
}

mr_status mr_h5_read(mr_h5 *h, hid_t loc, const char *obj, mr_h5_type type, int rank,
                     const int64_t *dims, void *data, mr_error *err) {
    char w[600], a[128], b[128], detail[256];
    int r;
    int64_t got[MR_H5_MAX_DIMS];
    MR_CHECK(mr_h5_shape(h, loc, obj, &r, got, err));
    int same = r == rank;
    for (int i = 0; same && i < r; i++)
        same = got[i] == dims[i];
    if (!same) {
        mr_h5_format_shape(r, got, a, sizeof a);
        mr_h5_format_shape(rank, dims, b, sizeof b);
        return mr_error_set(err, MR_ERR_DATA, "%s: %s has shape %s, the model needs %s", h->path,
                            where(loc, obj, w, sizeof w), a, b);
    }
    hid_t d = H5Dopen2(loc, obj, H5P_DEFAULT);
    /* numbers of at most 8 bytes as stored: HDF5 sizes its conversion
     * buffer by the stored type, and a corrupt one had it allocate 4 GB for
     * a few weights (found by fuzzing, tests/fuzz/corpus/checkpoint/) */
    hid_t ft = d >= 0 ? H5Dget_type(d) : -1;
    H5T_class_t cls = ft >= 0 ? H5Tget_class(ft) : H5T_NO_CLASS;
    size_t size = ft >= 0 ? H5Tget_size(ft) : 0;
    if (ft >= 0) H5Tclose(ft);
    if (d >= 0 && ((cls != H5T_INTEGER && cls != H5T_FLOAT) || size == 0 || size > 8)) {
        H5Dclose(d);
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: %s is stored as %s of %zu bytes, not numbers of 1 to 8 bytes",
                            h->path, where(loc, obj, w, sizeof w),
                            cls == H5T_INTEGER ? "integers"
                            : cls == H5T_FLOAT ? "floats"
                                               : "non-numbers",
                            size);
    }
    herr_t rc = H5Dread(d, h5_type(type, 0), H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (d >= 0) H5Dclose(d);
    if (rc < 0)
        return mr_error_set(err, MR_ERR_DATA, "%s: cannot read %s (%s)", h->path,
                            where(loc, obj, w, sizeof w), mr_h5_last_error(detail));
    return MR_OK;
}
