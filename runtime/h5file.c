/* h5file.c: checkpoint HDF5 files (h5file.h). */
#include "runtime/h5file.h"
#include "runtime/atomic_file.h"
#include "runtime/h5_contained.h"
#include "runtime/h5_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

/* A session's start: this thread holds the process's HDF5 lock until
 * unquiet (h5_lock.h), and HDF5's own printing to stderr is off. */
static void quiet(mr_h5 *h) {
    mr_h5_lock();
    H5Eget_auto2(H5E_DEFAULT, &h->saved_func, &h->saved_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void unquiet(mr_h5 *h) {
    H5Eset_auto2(H5E_DEFAULT, h->saved_func, h->saved_data);
    mr_h5_unlock();
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

static mr_status put_table(mr_h5 *h, mr_error *err);
static void seal(char *block, const char *image, size_t size);

/* The file is built in memory (HDF5's core driver, no backing store) and
 * written out by mr_h5_commit with plain write(2): a full disk or a file
 * size limit is then an error of ours, not a failed H5Fclose, after which
 * HDF5 1.10 keeps the file half-open and crashes at exit. */
static mr_status create(mr_h5 *h, const char *path, int checked, mr_error *err) {
    memset(h, 0, sizeof *h);
    h->file = -1;
    h->checked = checked;
    snprintf(h->path, sizeof h->path, "%s", path);
    /* the folder must take the temporary file now, not after all the work */
    MR_CHECK(mr_atomic_path_begin(path, h->tmp, sizeof h->tmp, err));
    quiet(h);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_fapl_core(fapl, 1 << 20, 0);
    if (checked) H5Pset_userblock(fcpl, MR_H5_USERBLOCK);
    h->file = H5Fcreate(h->tmp, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
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

mr_status mr_h5_create(mr_h5 *h, const char *path, mr_error *err) {
    return create(h, path, 0, err);
}

mr_status mr_h5_create_checked(mr_h5 *h, const char *path, mr_error *err) {
    return create(h, path, 1, err);
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
    /* the table covers every object written until now */
    mr_status st = h->checked ? put_table(h, err) : MR_OK;
    if (st != MR_OK) {
        mr_h5_discard(h);
        return st;
    }
    /* the image of the file built in memory */
    ssize_t size =
        H5Fflush(h->file, H5F_SCOPE_GLOBAL) < 0 ? -1 : H5Fget_file_image(h->file, NULL, 0);
    char *image = size > 0 ? malloc((size_t)size) : NULL;
    if (image == NULL || H5Fget_file_image(h->file, image, (size_t)size) != size)
        st = mr_error_set(err, size > 0 ? MR_ERR_NOMEM : MR_ERR_IO, "%s: cannot write (%s)",
                          h->path, mr_h5_last_error(detail));
    /* the image leaves out the user block: ours is written before it */
    char block[MR_H5_USERBLOCK];
    if (st == MR_OK && h->checked) seal(block, image, (size_t)size);
    H5Fclose(h->file); /* in memory: nothing to fail */
    h->file = -1;
    unquiet(h);
    if (st == MR_OK) {
        int fd = open(h->tmp, O_WRONLY | O_TRUNC);
        int bad = fd < 0 || (h->checked && write_all(fd, block, sizeof block) != 0) ||
                  write_all(fd, image, (size_t)size) != 0;
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
    /* KEEP: the bytes a chunk carries over to the next, a signature and
     * its length, so that one across two chunks is seen whole */
    enum { CHUNK = 1 << 20, SIG = 8, KEEP = SIG + 8 };
    static const unsigned char sig[SIG] = {'G', 'C', 'O', 'L', 1, 0, 0, 0};
    unsigned char *buf = malloc(CHUNK + KEEP); /* (keep + CHUNK) bytes */
    if (buf == NULL) return 0;                 /* then HDF5 is on its own */
    struct stat sb;
    int fd = fileno(f);
    int64_t size = fstat(fd, &sb) == 0 ? (int64_t)sb.st_size : 0, bad = 0;
    size_t keep = 0; /* bytes carried over: a signature across two chunks */
    int64_t at = 0;  /* file offset of buf[0] */
    for (;;) {
        size_t got = fread(buf + keep, 1, CHUNK, f), n = keep + got;
        for (size_t i = 0; !bad && i + KEEP <= n; i++) {
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
        keep = n < KEEP ? n : KEEP;
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
    /* our checkpoints are checked whole before HDF5 parses a byte of them */
    int sealed;
    MR_CHECK(mr_h5_verify(path, &sealed, err));
    /* a global heap HDF5 1.10 would loop on forever (files we did not
     * seal: a Keras-made .h5) is refused before HDF5 reads it */
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
    mr_status contained = mr_h5_check_contained(h->file, path, err);
    if (contained != MR_OK) {
        mr_h5_close(h);
        return contained;
    }
    /* a /mirrored group says it is ours: then it must carry its checksum */
    if (!sealed && H5Lexists(h->file, "mirrored", H5P_DEFAULT) > 0) {
        mr_h5_close(h);
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: a mirrored checkpoint without its checksum (the file is damaged, "
                            "or older than mirrored's checksums)",
                            path);
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

mr_status mr_h5_write_str(mr_h5 *h, hid_t loc, const char *obj, const char *value, mr_error *err) {
    char w[600], detail[256];
    /* fixed-length: stored in the dataset, not in HDF5's global heap */
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR), lcpl = make_parents_lcpl();
    H5Tset_size(t, strlen(value) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    hid_t d = H5Dcreate2(loc, obj, t, s, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, value);
    if (d >= 0) H5Dclose(d);
    H5Pclose(lcpl);
    H5Sclose(s);
    H5Tclose(t);
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

/* HDF5 1.10 reads a variable-length string (an attribute's layer names)
 * through its heap ID, stored in the attribute: the string's length (4
 * bytes), its global heap collection's address (8) and the object's index
 * in the collection (4). An index the collection does not hold makes
 * H5HG_read read past its table of objects (a crash; fuzz_checkpoint found
 * it, tests/fuzz/corpus/checkpoint/checkpoint-segv-global-heap-index.h5).
 * Our checkpoints are checked whole by their checksums first, a Keras-made
 * .h5 is not: so before a string attribute is read, its heap IDs are read
 * raw, through a conversion from HDF5's variable-length string to a
 * 16-byte opaque type (this function: HDF5 hands it the attribute's bytes
 * as stored, before it follows any ID; they are the answer as they are),
 * and each object is looked up in its collection. */
#define HEAP_ID_TAG "mirrored: raw heap IDs"
static herr_t raw_heap_ids(hid_t src, hid_t dst, H5T_cdata_t *cdata, size_t n, size_t buf_stride,
                           size_t bkg_stride, void *buf, void *bkg, hid_t dxpl) {
    (void)n, (void)buf_stride, (void)bkg_stride, (void)buf, (void)bkg, (void)dxpl;
    if (cdata->command != H5T_CONV_INIT) return 0; /* H5T_CONV_CONV: in place already */
    if (H5Tis_variable_str(src) <= 0 || H5Tget_class(dst) != H5T_OPAQUE) return -1;
    char *tag = H5Tget_tag(dst);
    /* 16 bytes as stored: 8-byte addresses, as every writer we know uses */
    int ok = tag && strcmp(tag, HEAP_ID_TAG) == 0 && H5Tget_size(src) == 16;
    H5free_memory(tag);
    return ok ? 0 : -1;
}

/* The 16-byte opaque type raw_heap_ids converts to (a new ID each time:
 * no HDF5 object stays open between reads). */
static hid_t heap_id_type(void) {
    hid_t op = H5Tcreate(H5T_OPAQUE, 16);
    if (op >= 0) H5Tset_tag(op, HEAP_ID_TAG);
    return op;
}

static pthread_once_t heap_ids_once = PTHREAD_ONCE_INIT;
static int heap_ids_registered;
static void register_heap_ids(void) {
    hid_t vs = H5Tcopy(H5T_C_S1), op = heap_id_type();
    H5Tset_size(vs, H5T_VARIABLE);
    heap_ids_registered =
        H5Tregister(H5T_PERS_SOFT, "mirrored raw heap IDs", vs, op, raw_heap_ids) >= 0;
    H5Tclose(op);
    H5Tclose(vs);
}

/* The indices collection `addr` (HDF5's address) of h's file holds, a bit
 * each (8 KiB: indices are 16 bits); NULL where there is no collection
 * there (then the ID is refused). Walks it as bad_heap does. */
static unsigned char *collection_indices(mr_h5 *h, uint64_t addr) {
    hsize_t base = 0; /* the user block: HDF5's addresses start after it */
    hid_t fcpl = H5Fget_create_plist(h->file);
    if (fcpl >= 0) H5Pget_userblock(fcpl, &base), H5Pclose(fcpl);
    int fd = open(h->path, O_RDONLY);
    if (fd < 0) return NULL;
    unsigned char head[16], oh[16], *present = NULL;
    const off_t off = (off_t)(base + addr);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || addr > (uint64_t)sb.st_size || pread(fd, head, 16, off) != 16 ||
        memcmp(head, "GCOL\1\0\0\0", 8) != 0)
        goto done;
    uint64_t len = 0;
    for (int b = 7; b >= 0; b--)
        len = len << 8 | head[8 + b];
    if (len < 16 || len > (uint64_t)(sb.st_size - off)) goto done;
    present = calloc(65536 / 8, 1);
    for (uint64_t p = 16; present && p + 16 <= len;) {
        if (pread(fd, oh, 16, off + (off_t)p) != 16) break;
        unsigned idx = oh[0] | oh[1] << 8u;
        uint64_t osize = 0;
        for (int b = 7; b >= 0; b--)
            osize = osize << 8 | oh[8 + b];
        uint64_t need = idx == 0 ? osize : 16 + ((osize + 7) & ~(uint64_t)7);
        if (need == 0 || need > len - p) break; /* bad_heap refused these already */
        /* an object's data must fit in the collection (HDF5 copies it out) */
        if (idx != 0 && osize <= len - p - 16) present[idx / 8] |= (unsigned char)(1u << idx % 8);
        p += need;
    }
done:
    close(fd);
    return present;
}

/* MR_OK when every heap ID of the variable-length strings of `obj` (an
 * attribute if is_attr, else a dataset; count strings) names an object
 * its collection holds; else one line naming `what` and the string. */
static mr_status check_heap_ids(mr_h5 *h, const char *what, hid_t obj, int is_attr, hssize_t count,
                                mr_error *err) {
    pthread_once(&heap_ids_once, register_heap_ids);
    if (!heap_ids_registered || count <= 0) return MR_OK;
    unsigned char *raw = malloc((size_t)count * 16);
    if (raw == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    hid_t op = heap_id_type();
    herr_t rc = op < 0    ? -1
                : is_attr ? H5Aread(obj, op, raw)
                          : H5Dread(obj, op, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw);
    if (op >= 0) H5Tclose(op);
    if (rc < 0) {
        free(raw); /* not 16 bytes as stored: HDF5 reads it as it can */
        H5Eclear2(H5E_DEFAULT);
        return MR_OK;
    }
    uint64_t cached = 0; /* the collection whose indices `present` holds */
    unsigned char *present = NULL;
    mr_status st = MR_OK;
    for (hssize_t i = 0; st == MR_OK && i < count; i++) {
        const unsigned char *id = raw + 16 * i;
        uint32_t seq = 0, idx = 0;
        uint64_t addr = 0;
        for (int b = 3; b >= 0; b--)
            seq = seq << 8 | id[b], idx = idx << 8 | id[12 + b];
        for (int b = 7; b >= 0; b--)
            addr = addr << 8 | id[4 + b];
        if (seq == 0) continue; /* an empty string: HDF5 reads no object */
        if (present == NULL || addr != cached) {
            free(present);
            present = collection_indices(h, addr);
            cached = addr;
        }
        if (present == NULL || idx == 0 || idx > 65535 || !(present[idx / 8] >> idx % 8 & 1)) {
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: %s: string %lld points at object %u of the global heap at "
                              "%llu, which %s (the file is damaged)",
                              h->path, what, (long long)i, idx, (unsigned long long)addr,
                              present ? "does not hold it" : "is not a global heap");
        }
    }
    free(present);
    free(raw);
    return st;
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
        char what[700];
        snprintf(what, sizeof what, "%s: attribute '%s'", where(loc, NULL, w, sizeof w), name);
        st = check_heap_ids(h, what, a, 1, count, err);
        if (st != MR_OK) {
            free(v);
            goto done;
        }
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

mr_status mr_h5_read_str(mr_h5 *h, hid_t loc, const char *obj, char **out, mr_error *err) {
    char w[600], detail[256];
    *out = NULL;
    hid_t d = open_dataset(h, loc, obj, err);
    if (d < 0) return MR_ERR_DATA;
    hid_t ft = H5Dget_type(d), s = H5Dget_space(d);
    mr_status st = MR_OK;
    size_t len = H5Tget_size(ft);
    if (H5Tget_class(ft) != H5T_STRING || H5Sget_simple_extent_type(s) != H5S_SCALAR || len == 0 ||
        len > (1u << 30)) {
        st = mr_error_set(err, MR_ERR_DATA, "%s: %s is not a string", h->path,
                          where(loc, obj, w, sizeof w));
    } else if (H5Tis_variable_str(ft) <= 0) {
        hid_t mt = H5Tcopy(ft);
        char *v = calloc(len + 1, 1);
        if (v == NULL)
            st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
        else if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
            st = mr_error_set(err, MR_ERR_DATA, "%s: cannot read %s (%s)", h->path,
                              where(loc, obj, w, sizeof w), mr_h5_last_error(detail));
        if (st == MR_OK)
            *out = v;
        else
            free(v);
        H5Tclose(mt);
    } else {
        hid_t mt = string_type(H5Tget_cset(ft) == H5T_CSET_UTF8);
        char *raw = NULL;
        st = check_heap_ids(h, where(loc, obj, w, sizeof w), d, 0, 1, err);
        if (st == MR_OK && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, &raw) < 0)
            st = mr_error_set(err, MR_ERR_DATA, "%s: cannot read %s (%s)", h->path,
                              where(loc, obj, w, sizeof w), mr_h5_last_error(detail));
        else if (st == MR_OK && (*out = strdup(raw ? raw : "")) == NULL)
            st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
        if (raw != NULL) H5Dvlen_reclaim(mt, s, H5P_DEFAULT, &raw);
        H5Tclose(mt);
    }
    H5Sclose(s);
    H5Tclose(ft);
    H5Dclose(d);
    return st;
}

/* ---- checksums ---- */

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum
 * TensorFlow's checkpoints keep per tensor; bytewise with a table. */
static uint32_t crc32c(uint32_t crc, const void *p, size_t n) {
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ b[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/* The CRC32C of a dataset's (is_attr 0) or an attribute's content: its
 * type class and size, its shape, then its values as read (numbers in the
 * native type, so a changed file type changes them; strings each with its
 * NUL). -1 when it cannot be read. */
static int64_t content_crc(hid_t obj, int is_attr) {
    hid_t ft = is_attr ? H5Aget_type(obj) : H5Dget_type(obj);
    hid_t s = is_attr ? H5Aget_space(obj) : H5Dget_space(obj);
    int64_t out = -1;
    void *buf = NULL;
    hid_t mt = -1;
    if (ft < 0 || s < 0) goto done;
    H5T_class_t cls = H5Tget_class(ft);
    int rank = H5Sget_simple_extent_ndims(s);
    hssize_t count = H5Sget_simple_extent_npoints(s);
    hsize_t dims[H5S_MAX_RANK];
    if (cls < 0 || rank < 0 || rank > H5S_MAX_RANK || count < 0 ||
        H5Sget_simple_extent_dims(s, dims, NULL) < 0)
        goto done;
    int64_t head[2] = {cls, rank};
    uint32_t crc = crc32c(0, head, sizeof head);
    crc = crc32c(crc, dims, sizeof(hsize_t) * (size_t)rank);
    int vstr = cls == H5T_STRING && H5Tis_variable_str(ft) > 0;
    if (vstr) {
        mt = string_type(H5Tget_cset(ft) == H5T_CSET_UTF8);
    } else if (cls == H5T_STRING) {
        mt = H5Tcopy(ft);
    } else {
        mt = H5Tget_native_type(ft, H5T_DIR_ASCEND);
    }
    size_t size = mt < 0 ? 0 : H5Tget_size(mt);
    if (mt < 0 || size == 0) goto done;
    int64_t sz = (int64_t)size;
    crc = crc32c(crc, &sz, sizeof sz);
    if (count == 0) {
        out = crc;
        goto done;
    }
    /* a damaged shape may claim more than any checkpoint holds */
    if ((uint64_t)count > (1ull << 36) / size) goto done;
    buf = malloc(size * (size_t)count);
    if (buf == NULL) goto done;
    herr_t rc =
        is_attr ? H5Aread(obj, mt, buf) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    if (rc < 0) goto done;
    if (vstr) {
        char **v = buf;
        for (hssize_t i = 0; i < count; i++)
            crc = crc32c(crc, v[i] ? v[i] : "", v[i] ? strlen(v[i]) + 1 : 1);
        H5Dvlen_reclaim(mt, s, H5P_DEFAULT, buf);
    } else {
        crc = crc32c(crc, buf, size * (size_t)count);
    }
    out = crc;
done:
    free(buf);
    if (mt >= 0) H5Tclose(mt);
    if (s >= 0) H5Sclose(s);
    if (ft >= 0) H5Tclose(ft);
    return out;
}

/* One object of the table: "/path" and the attribute ("" for a dataset). */
typedef struct ck_entry {
    uint32_t crc;
    char path[600];
    char attr[256];
    int seen;
} ck_entry;

typedef struct ck_list {
    ck_entry *v;
    int n, cap;
    int bad; /* an object could not be read: which is in `path`, `attr` */
    char path[600], attr[256];
} ck_list;

static int ck_add(ck_list *l, const char *path, const char *attr, int64_t crc) {
    if (crc < 0) {
        l->bad = 1;
        snprintf(l->path, sizeof l->path, "%s", path);
        snprintf(l->attr, sizeof l->attr, "%s", attr);
        return -1;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        ck_entry *more = realloc(l->v, sizeof *more * (size_t)cap);
        if (more == NULL) return -1;
        l->v = more, l->cap = cap;
    }
    ck_entry *e = &l->v[l->n++];
    e->crc = (uint32_t)crc, e->seen = 0;
    snprintf(e->path, sizeof e->path, "%s", path);
    snprintf(e->attr, sizeof e->attr, "%s", attr);
    return 0;
}

/* H5Ovisit's callback: the CRC of every attribute of the object, and of its
 * data when it is a dataset (the table itself excepted). */
static herr_t ck_visit(hid_t root, const char *name, const H5O_info_t *info, void *data) {
    ck_list *l = data;
    char path[600];
    snprintf(path, sizeof path, "/%s", strcmp(name, ".") == 0 ? "" : name);
    if (strcmp(path, "/" MR_H5_CHECKSUMS) == 0) return 0;
    hid_t o = H5Oopen(root, name, H5P_DEFAULT);
    if (o < 0) return ck_add(l, path, "", -1);
    int rc = 0;
    for (hsize_t i = 0; rc == 0 && i < info->num_attrs; i++) {
        char an[256] = "";
        hid_t a = H5Aopen_by_idx(o, ".", H5_INDEX_NAME, H5_ITER_INC, i, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) H5Aget_name(a, sizeof an, an);
        if (an[0] == '\0') snprintf(an, sizeof an, "#%llu", (unsigned long long)i);
        rc = ck_add(l, path, an, a < 0 ? -1 : content_crc(a, 1));
        if (a >= 0) H5Aclose(a);
    }
    if (rc == 0 && info->type == H5O_TYPE_DATASET) rc = ck_add(l, path, "", content_crc(o, 0));
    H5Oclose(o);
    return rc;
}

/* "dataset /a/b" or "attribute 'x' of /a" */
static void ck_name(const char *path, const char *attr, char *buf, size_t n) {
    if (attr[0])
        snprintf(buf, n, "attribute '%s' of %s", attr, path);
    else
        snprintf(buf, n, "dataset %s", path);
}

/* Lists every object of the file with its CRC. */
static mr_status ck_collect(mr_h5 *h, ck_list *l, mr_error *err) {
    memset(l, 0, sizeof *l);
    herr_t rc = H5Ovisit2(h->file, H5_INDEX_NAME, H5_ITER_INC, ck_visit, l,
                          H5O_INFO_BASIC | H5O_INFO_NUM_ATTRS);
    if (rc >= 0) return MR_OK;
    char what[900], detail[256];
    if (l->bad) {
        ck_name(l->path, l->attr, what, sizeof what);
        return mr_error_set(err, MR_ERR_DATA, "%s: %s: cannot be read (%s; the file is damaged)",
                            h->path, what, mr_h5_last_error(detail));
    }
    return mr_error_set(err, MR_ERR_DATA, "%s: cannot list its objects (%s; the file is damaged)",
                        h->path, mr_h5_last_error(detail));
}

/* Writes the table of every object now in the file (runtime/h5file.h). */
static mr_status put_table(mr_h5 *h, mr_error *err) {
    ck_list l;
    MR_CHECK(ck_collect(h, &l, err));
    mr_status st = MR_OK;
    size_t cap = 64;
    for (int i = 0; i < l.n; i++)
        cap += 12 + strlen(l.v[i].path) + strlen(l.v[i].attr);
    char *text = malloc(cap), *p = text;
    if (text == NULL) st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    for (int i = 0; st == MR_OK && i < l.n; i++)
        p += sprintf(p, "%08x\t%s\t%s\n", l.v[i].crc, l.v[i].path, l.v[i].attr);
    if (st == MR_OK) {
        sprintf(p, "%08x\t(table)\t\n", crc32c(0, text, (size_t)(p - text)));
        st = mr_h5_write_str(h, h->file, MR_H5_CHECKSUMS, text, err);
    }
    free(text);
    free(l.v);
    return st;
}

/* The user block's text: MAGIC, then the file's size and the CRC32C of
 * every byte after the user block (HDF5's image of the file, which leaves
 * the user block out). */
#define MAGIC "mirrored checksum 1\n"

static void seal(char *block, const char *image, size_t size) {
    memset(block, 0, MR_H5_USERBLOCK);
    snprintf(block, MR_H5_USERBLOCK, MAGIC "bytes %zu\ncrc32c %08x\n", MR_H5_USERBLOCK + size,
             crc32c(0, image, size));
}

/* Parses the table's lines into l (the last, the table's own, checked). */
static mr_status ck_parse(mr_h5 *h, char *text, ck_list *l, mr_error *err) {
    memset(l, 0, sizeof *l);
    const char *bad = "/" MR_H5_CHECKSUMS;
    size_t len = strlen(text);
    /* the last line: the CRC of everything before it */
    char *last = len > 1 ? text + len - 1 : text;
    while (last > text && last[-1] != '\n')
        last--;
    unsigned self = 0;
    if (len == 0 || text[len - 1] != '\n' || sscanf(last, "%8x\t(table)\t\n", &self) != 1 ||
        crc32c(0, text, (size_t)(last - text)) != self)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: dataset %s: checksum mismatch (the file is damaged)", h->path,
                            bad);
    *last = '\0';
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        *nl = '\0';
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        unsigned crc;
        if (t2 == NULL || sscanf(line, "%8x", &crc) != 1) {
            free(l->v);
            return mr_error_set(err, MR_ERR_DATA,
                                "%s: dataset %s: a line is not 'crc path attribute'", h->path, bad);
        }
        *t1 = *t2 = '\0';
        if (ck_add(l, t1 + 1, t2 + 1, crc) != 0) {
            free(l->v);
            return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
        }
        line = nl + 1;
    }
    return MR_OK;
}

/* After the file's CRC failed: which dataset is damaged, from the table,
 * reading only the table (a fixed-length string) and the datasets' numbers:
 * HDF5's global heap, where variable-length strings live, is never read,
 * because a damaged one can make HDF5 1.10 loop forever. */
static mr_status name_damage(const char *path, mr_error *err) {
    char detail[256];
    mr_h5 h;
    memset(&h, 0, sizeof h);
    snprintf(h.path, sizeof h.path, "%s", path);
    quiet(&h);
    h.file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (h.file < 0) {
        mr_error_set(err, MR_ERR_DATA, "%s: checksum mismatch (the file is damaged: %s)", path,
                     mr_h5_last_error(detail));
        unquiet(&h);
        return MR_ERR_DATA;
    }
    char *text = NULL;
    ck_list want = {0};
    mr_status st = mr_h5_read_str(&h, h.file, MR_H5_CHECKSUMS, &text, err);
    if (st == MR_OK) st = ck_parse(&h, text, &want, err);
    for (int i = 0; st == MR_OK && i < want.n; i++) {
        if (want.v[i].attr[0]) continue; /* attributes: variable-length strings */
        hid_t d = H5Dopen2(h.file, want.v[i].path, H5P_DEFAULT);
        int64_t crc = d < 0 ? -1 : content_crc(d, 0);
        if (d >= 0) H5Dclose(d);
        if (crc != want.v[i].crc)
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: dataset %s: checksum mismatch (the file is damaged)", path,
                              want.v[i].path);
    }
    if (st == MR_OK)
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s: checksum mismatch outside the datasets' values: in HDF5's "
                          "metadata or an attribute (the file is damaged)",
                          path);
    else if (err->status != MR_ERR_DATA || strstr(err->msg, "damaged") == NULL) {
        /* the table itself unreadable */
        mr_error_clear(err);
        st = mr_error_set(err, MR_ERR_DATA, "%s: checksum mismatch (the file is damaged)", path);
    }
    free(text);
    free(want.v);
    H5Fclose(h.file);
    unquiet(&h);
    return st;
}

mr_status mr_h5_verify(const char *path, int *sealed, mr_error *err) {
    *sealed = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char block[MR_H5_USERBLOCK + 1] = "";
    size_t got = fread(block, 1, MR_H5_USERBLOCK, f);
    if (got < strlen(MAGIC) || memcmp(block, MAGIC, strlen(MAGIC)) != 0) {
        fclose(f);
        return MR_OK; /* not one of ours, or its first bytes are damaged: see mr_h5_open */
    }
    *sealed = 1;
    size_t want_size = 0;
    unsigned want_crc = 0;
    if (sscanf(block + strlen(MAGIC), "bytes %zu\ncrc32c %8x", &want_size, &want_crc) != 2 ||
        want_size < MR_H5_USERBLOCK) {
        fclose(f);
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: the checksum at its start is unreadable (the file is damaged)",
                            path);
    }
    uint32_t crc = 0;
    size_t size = got;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        crc = crc32c(crc, buf, n), size += n;
    int bad = ferror(f);
    fclose(f);
    if (bad) return mr_error_set(err, MR_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (size != want_size)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: %zu bytes, but %zu were written (the file is %s)", path, size,
                            want_size, size < want_size ? "truncated" : "damaged");
    if (crc == want_crc) return MR_OK;
    return name_damage(path, err);
}
