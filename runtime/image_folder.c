/* image_folder.c: see image_folder.h. Relies on libpng and libjpeg(-turbo);
 * the decoders' settings are those of TensorFlow's decode_image op (its
 * PNG reader's transforms, its JPEG flags), which Keras's
 * image_dataset_from_directory calls. */
#include "runtime/image_folder.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* after the stdio header: they use FILE */
#include <jerror.h>
#include <jpeglib.h>

/* The largest decoded image (h * w * c bytes): a header can claim any
 * size, and a file of a few bytes should not ask for gigabytes. */
#define MAX_IMAGE_BYTES (1ull << 30)

int mr_image_folder_is(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

void mr_image_free(mr_image *img) {
    free(img->data);
    memset(img, 0, sizeof *img);
}

/* ---- PNG ------------------------------------------------------------------ */

typedef struct png_err {
    jmp_buf jmp;
    char msg[200];
} png_err;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_err *e = png_get_error_ptr(png);
    snprintf(e->msg, sizeof e->msg, "%s", msg);
    longjmp(e->jmp, 1);
}

/* warnings (a bad ancillary chunk) do not stop TensorFlow's decoder either */
static void png_on_warning(png_structp png, png_const_charp msg) {
    (void)png, (void)msg;
}

static mr_status decode_png(const char *path, FILE *f, int c, mr_image *img, mr_error *err) {
    png_err e = {.msg = ""};
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &e, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (info == NULL) {
        png_destroy_read_struct(&png, NULL, NULL);
        return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory for the PNG decoder", path);
    }
    /* volatile: set after setjmp and read after a longjmp */
    uint8_t *volatile data = NULL;
    png_bytep *volatile rows = NULL;
    if (setjmp(e.jmp)) {
        free(data), free(rows);
        png_destroy_read_struct(&png, &info, NULL);
        return mr_error_set(err, MR_ERR_DATA, "%s: not a readable PNG image: %s", path, e.msg);
    }
    png_init_io(png, f);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, type;
    png_get_IHDR(png, info, &w, &h, &depth, &type, NULL, NULL, NULL);
    if ((unsigned long long)w * h * (unsigned)c > MAX_IMAGE_BYTES) {
        png_destroy_read_struct(&png, &info, NULL);
        return mr_error_set(err, MR_ERR_DATA, "%s: a %ux%u image is over 1 GiB decoded", path,
                            (unsigned)w, (unsigned)h);
    }
    /* decode_image's transforms, in its order: alpha as asked, 8 bits,
     * palette to RGB, grey to 8 bits, then grey <-> RGB */
    const int has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    const int has_alpha = (type & PNG_COLOR_MASK_ALPHA) != 0;
    if (c == 4) {
        if (!has_alpha && has_trns)
            png_set_tRNS_to_alpha(png);
        else if (!has_alpha)
            png_set_add_alpha(png, (1u << depth) - 1, PNG_FILLER_AFTER);
    } else if (has_alpha || has_trns) {
        png_set_strip_alpha(png);
    }
    if (depth > 8) png_set_strip_16(png); /* the high byte, as decode_image's uint8 */
    png_set_packing(png);
    const int passes = png_set_interlace_handling(png);
    if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    const int is_gray = !(type & PNG_COLOR_MASK_COLOR);
    if (is_gray && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (c == 1 && !is_gray) png_set_rgb_to_gray(png, 1, 0.299, 0.587); /* Rec. 601 */
    if (c > 1 && is_gray) png_set_gray_to_rgb(png);
    png_read_update_info(png, info);
    if (png_get_channels(png, info) != c || png_get_bit_depth(png, info) != 8)
        png_error(png, "unexpected channels after conversion");
    data = malloc((size_t)w * h * (size_t)c);
    rows = malloc(sizeof(png_bytep) * h);
    if (data == NULL || rows == NULL) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = data + (size_t)y * w * (size_t)c;
    for (int p = 0; p < passes; p++)
        for (png_uint_32 y = 0; y < h; y++)
            png_read_row(png, rows[y], NULL);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    img->h = (int)h, img->w = (int)w, img->c = c, img->data = data;
    return MR_OK;
}

/* ---- JPEG ----------------------------------------------------------------- */

typedef struct jpeg_err {
    struct jpeg_error_mgr mgr; /* first: libjpeg's err pointer is cast back */
    jmp_buf jmp;
    int truncated;
} jpeg_err;

static void jpeg_on_error(j_common_ptr cinfo) {
    longjmp(((jpeg_err *)cinfo->err)->jmp, 1);
}

/* libjpeg warns and goes on with grey where the data ends early; that is
 * a truncated file, which decode_image refuses; other warnings (corrupt
 * bytes between markers) it decodes through, as TensorFlow does */
static void jpeg_on_message(j_common_ptr cinfo, int level) {
    jpeg_err *e = (jpeg_err *)cinfo->err;
    if (level < 0 && e->mgr.msg_code == JWRN_JPEG_EOF) e->truncated = 1;
}

static mr_status decode_jpeg(const char *path, FILE *f, int c, mr_image *img, mr_error *err) {
    if (c == 4)
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: a JPEG has no alpha channel, and [input] asks for 4 channels "
                            "(RGBA); Keras refuses it too",
                            path);
    struct jpeg_decompress_struct cinfo;
    jpeg_err e;
    cinfo.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = jpeg_on_error;
    e.mgr.emit_message = jpeg_on_message;
    e.truncated = 0;
    uint8_t *volatile data = NULL;
    if (setjmp(e.jmp)) {
        char msg[JMSG_LENGTH_MAX];
        e.mgr.format_message((j_common_ptr)&cinfo, msg);
        jpeg_destroy_decompress(&cinfo);
        free(data);
        return mr_error_set(err, MR_ERR_DATA, "%s: not a readable JPEG image: %s", path, msg);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_stdio_src(&cinfo, f);
    jpeg_read_header(&cinfo, TRUE);
    if ((unsigned long long)cinfo.image_width * cinfo.image_height * (unsigned)c >
        MAX_IMAGE_BYTES) {
        const unsigned iw = cinfo.image_width, ih = cinfo.image_height;
        jpeg_destroy_decompress(&cinfo);
        return mr_error_set(err, MR_ERR_DATA, "%s: a %ux%u image is over 1 GiB decoded", path, iw,
                            ih);
    }
    cinfo.out_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    cinfo.dct_method = JDCT_IFAST; /* TensorFlow's default for decode_image */
    jpeg_start_decompress(&cinfo);
    const int w = (int)cinfo.output_width, h = (int)cinfo.output_height;
    data = malloc((size_t)w * (size_t)h * (size_t)c);
    if (data == NULL) {
        jpeg_destroy_decompress(&cinfo);
        return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory for a %dx%d image", path, w, h);
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = data + (size_t)cinfo.output_scanline * (size_t)w * (size_t)c;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    if (e.truncated) {
        free(data);
        return mr_error_set(err, MR_ERR_DATA, "%s: truncated JPEG image (the data ends early)",
                            path);
    }
    img->h = h, img->w = w, img->c = c, img->data = data;
    return MR_OK;
}

mr_status mr_image_decode(const char *path, int c, mr_image *img, mr_error *err) {
    memset(img, 0, sizeof *img);
    if (c != 1 && c != 3 && c != 4)
        return mr_error_set(err, MR_ERR_USAGE, "%s: images have 1, 3 or 4 channels, not %d", path,
                            c);
    FILE *f = fopen(path, "rb");
    if (f == NULL) return mr_error_set(err, MR_ERR_IO, "%s: cannot open", path);
    uint8_t magic[8] = {0};
    const size_t got = fread(magic, 1, sizeof magic, f);
    rewind(f);
    mr_status st;
    /* told by content, as decode_image does, whatever the name says */
    if (got == 8 && png_sig_cmp(magic, 0, 8) == 0)
        st = decode_png(path, f, c, img, err);
    else if (got >= 3 && magic[0] == 0xFF && magic[1] == 0xD8 && magic[2] == 0xFF)
        st = decode_jpeg(path, f, c, img, err);
    else if (got >= 4 && memcmp(magic, "GIF8", 4) == 0)
        st = mr_error_set(err, MR_ERR_UNSUPPORTED,
                          "%s: GIF images are not supported (PNG and JPEG are): convert it", path);
    else if (got >= 2 && memcmp(magic, "BM", 2) == 0)
        st = mr_error_set(err, MR_ERR_UNSUPPORTED,
                          "%s: BMP images are not supported (PNG and JPEG are): convert it", path);
    else
        st = mr_error_set(err, MR_ERR_DATA, "%s: not a PNG or JPEG image (%zu bytes)", path, got);
    fclose(f);
    return st;
}

/* ---- resize --------------------------------------------------------------- */

/* One axis of TensorFlow's compute_interpolation_weights (half-pixel
 * centres): the two source indices and the weight of the upper one. */
typedef struct axis_w {
    int lo, hi;
    float lerp;
} axis_w;

static void axis_weights(int in, int out, axis_w *a) {
    const float scale = (float)in / (float)out;
    for (int i = 0; i < out; i++) {
        const float src = ((float)i + 0.5f) * scale - 0.5f;
        const float fl = floorf(src);
        a[i].lo = fl > 0.0f ? (int)fl : 0;
        a[i].hi = (int)ceilf(src) < in - 1 ? (int)ceilf(src) : in - 1;
        a[i].lerp = src - fl;
    }
}

mr_status mr_image_resize_bilinear(const uint8_t *src, int sh, int sw, int c, float *dst, int dh,
                                   int dw, mr_error *err) {
    axis_w *ys = malloc(sizeof(axis_w) * (size_t)dh), *xs = malloc(sizeof(axis_w) * (size_t)dw);
    if (ys == NULL || xs == NULL) {
        free(ys), free(xs);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory resizing to %dx%d", dh, dw);
    }
    axis_weights(sh, dh, ys);
    axis_weights(sw, dw, xs);
    for (int y = 0; y < dh; y++) {
        const uint8_t *top = src + (size_t)ys[y].lo * (size_t)sw * (size_t)c;
        const uint8_t *bot = src + (size_t)ys[y].hi * (size_t)sw * (size_t)c;
        for (int x = 0; x < dw; x++)
            for (int k = 0; k < c; k++) {
                const float tl = top[xs[x].lo * c + k], tr = top[xs[x].hi * c + k];
                const float bl = bot[xs[x].lo * c + k], br = bot[xs[x].hi * c + k];
                /* TensorFlow's compute_lerp: x first, then y */
                const float t = tl + (tr - tl) * xs[x].lerp;
                const float b = bl + (br - bl) * xs[x].lerp;
                dst[((size_t)y * (size_t)dw + (size_t)x) * (size_t)c + (size_t)k] =
                    t + (b - t) * ys[y].lerp;
            }
    }
    free(ys), free(xs);
    return MR_OK;
}

/* ---- the folder ----------------------------------------------------------- */

typedef struct names {
    char **v;
    int n, cap;
} names;

static int names_add(names *l, const char *s) {
    if (l->n == l->cap) {
        const int cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, sizeof(char *) * (size_t)cap);
        if (v == NULL) return 0;
        l->v = v, l->cap = cap;
    }
    if ((l->v[l->n] = strdup(s)) == NULL) return 0;
    l->n++;
    return 1;
}

static void names_free(names *l) {
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Python's sorted() of str: code points, which is byte order in UTF-8 */
static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_sort(names *l) {
    if (l->n > 1) qsort(l->v, (size_t)l->n, sizeof(char *), cmp_str);
}

static char *join(const char *dir, const char *name) {
    const size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p != NULL) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The entries of `dir` but . and .., sorted; kind 'd': folders (stat,
 * following links, as os.path.isdir), 'w': folders os.walk enters (lstat:
 * not symlinks), 'f': what os.walk lists as files (not a folder, links
 * followed). Returns 0 when the folder cannot be read. */
static int list_dir(const char *dir, char kind, names *out) {
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    struct dirent *e;
    int ok = 1;
    while (ok && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *p = join(dir, e->d_name);
        if (p == NULL) {
            ok = 0;
            break;
        }
        struct stat sb, lb;
        const int is_dir = stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        const int is_link = lstat(p, &lb) == 0 && S_ISLNK(lb.st_mode);
        const int want = kind == 'd' ? is_dir : kind == 'w' ? is_dir && !is_link : !is_dir;
        if (want) ok = names_add(out, e->d_name);
        free(p);
    }
    closedir(d);
    names_sort(out);
    return ok;
}

/* Keras's ALLOWLIST_FORMATS, matched on the lower-cased name */
static int is_image_name(const char *name) {
    static const char *const ext[] = {".bmp", ".gif", ".jpeg", ".jpg", ".png"};
    const size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        const size_t m = strlen(ext[i]);
        if (n < m) continue;
        size_t j = 0;
        while (j < m && tolower((unsigned char)name[n - m + j]) == ext[i][j])
            j++;
        if (j == m) return 1;
    }
    return 0;
}

/* Every folder under `root` os.walk visits (root included), full paths. */
static int walk_dirs(const char *root, names *out) {
    if (!names_add(out, root)) return 0;
    names sub = {0};
    int ok = list_dir(root, 'w', &sub);
    for (int i = 0; ok && i < sub.n; i++) {
        char *p = join(root, sub.v[i]);
        ok = p != NULL && walk_dirs(p, out);
        free(p);
    }
    names_free(&sub);
    return ok;
}

/* The image files of one class folder, in Keras's order: folders sorted by
 * full path (os.walk's results sorted by root), each one's files by name. */
static int class_files(const char *class_dir, names *files) {
    names dirs = {0};
    int ok = walk_dirs(class_dir, &dirs);
    names_sort(&dirs);
    for (int i = 0; ok && i < dirs.n; i++) {
        names fs = {0};
        ok = list_dir(dirs.v[i], 'f', &fs);
        for (int j = 0; ok && j < fs.n; j++)
            if (is_image_name(fs.v[j])) {
                char *p = join(dirs.v[i], fs.v[j]);
                ok = p != NULL && names_add(files, p);
                free(p);
            }
        names_free(&fs);
    }
    names_free(&dirs);
    return ok;
}

/* float32 in place of the uint8 values x[0, count): from the end, so no
 * value is overwritten before it is read (4 bytes for 1). */
static int widen_to_float(mr_array *x, int64_t total, int64_t count) {
    float *f = realloc(x->data, sizeof(float) * (size_t)total);
    if (f == NULL) return 0;
    const uint8_t *u = (const uint8_t *)f;
    for (int64_t i = count - 1; i >= 0; i--)
        f[i] = (float)u[i];
    x->data = f;
    x->dtype = MR_DTYPE_F32;
    return 1;
}

/* Names joined one per line, malloc'd; each from byte `skip` on. NULL for want of memory. */
static char *join_lines(const names *l, size_t skip) {
    size_t n = 1;
    for (int i = 0; i < l->n; i++)
        n += strlen(l->v[i] + skip) + 1;
    char *s = malloc(n), *p = s;
    for (int i = 0; s != NULL && i < l->n; i++)
        p += sprintf(p, "%s%s", i ? "\n" : "", l->v[i] + skip);
    if (s != NULL) *p = '\0';
    return s;
}

/* The files decoded, in order, into x (n, h, w, c): uint8 while every image is (h, w) (exact
 * values), float32 from the first that is resized. On failure x is freed. */
static mr_status decode_files(const char *dir, const names *files, int h, int w, int c, mr_array *x,
                              mr_error *err) {
    const int64_t n = files->n, row = (int64_t)h * w * c;
    mr_status st = MR_OK;
    x->dtype = MR_DTYPE_U8;
    x->ndim = 4;
    x->dims[0] = n, x->dims[1] = h, x->dims[2] = w, x->dims[3] = c;
    x->data = malloc((size_t)(n * row));
    if (x->data == NULL) goto nomem;
    /* one file at a time: its bytes and pixels are freed before the next */
    for (int64_t i = 0; i < n && st == MR_OK; i++) {
        mr_image img;
        if ((st = mr_image_decode(files->v[i], c, &img, err)) != MR_OK) break;
        if (img.h == h && img.w == w) {
            /* the same size: resizing would give back the values, exactly */
            if (x->dtype == MR_DTYPE_U8)
                memcpy((uint8_t *)x->data + i * row, img.data, (size_t)row);
            else
                for (int64_t j = 0; j < row; j++)
                    ((float *)x->data)[i * row + j] = img.data[j];
        } else {
            if (x->dtype == MR_DTYPE_U8 && !widen_to_float(x, n * row, i * row)) {
                mr_image_free(&img);
                goto nomem;
            }
            st = mr_image_resize_bilinear(img.data, img.h, img.w, c, (float *)x->data + i * row, h,
                                          w, err);
        }
        mr_image_free(&img);
    }
    if (st != MR_OK) mr_array_free(x);
    return st;
nomem:
    mr_array_free(x);
    return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory for %d images", dir, files->n);
}

/* dir's class folders: its subfolders but hidden ones (Keras skips .ipynb_checkpoints, ...). */
static int class_folders(const char *dir, names *cls) {
    if (!list_dir(dir, 'd', cls)) return 0;
    int k = 0;
    for (int i = 0; i < cls->n; i++) {
        if (cls->v[i][0] == '.')
            free(cls->v[i]);
        else
            cls->v[k++] = cls->v[i];
    }
    cls->n = k;
    return 1;
}

int mr_image_folder_has_classes(const char *dir) {
    names cls = {0};
    const int has = class_folders(dir, &cls) && cls.n > 0;
    names_free(&cls);
    return has;
}

/* Every class folder's image files, in label order, into files; first[i] the index of class i's
 * first file (first[cls.n] = files.n). */
static mr_status list_classes(const char *dir, const names *cls, names *files, int *first,
                              mr_error *err) {
    for (int i = 0; i < cls->n; i++) {
        char *p = join(dir, cls->v[i]);
        first[i] = files->n;
        mr_status st = MR_OK;
        if (p == NULL || !class_files(p, files))
            st = mr_error_set(err, MR_ERR_IO, "%s: cannot read the folder", p ? p : dir);
        else if (files->n == first[i])
            st = mr_error_set(err, MR_ERR_DATA,
                              "%s: class folder without images (files named *.png, *.jpg, "
                              "*.jpeg, *.bmp or *.gif, in any case)",
                              p);
        free(p);
        MR_CHECK(st);
    }
    first[cls->n] = files->n;
    return MR_OK;
}

mr_status mr_image_folder_read(const char *dir, int h, int w, int c, mr_array *x, int32_t **y,
                               int *classes, char **class_names, mr_error *err) {
    memset(x, 0, sizeof *x);
    *y = NULL;
    *classes = 0;
    if (class_names != NULL) *class_names = NULL;
    mr_status st = MR_OK;
    names cls = {0}, files = {0};
    int *first = NULL; /* (classes + 1) index of each class's first file */
    if (!class_folders(dir, &cls)) {
        names_free(&cls);
        return mr_error_set(err, MR_ERR_IO, "%s: cannot read the folder", dir);
    }
    if (cls.n == 0) {
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s: no class folders in it: images go in one subfolder per class "
                          "(DIR/<class>/<image>); a folder of images alone is for "
                          "mirrored_eval --predict",
                          dir);
        goto out;
    }
    first = malloc(sizeof(int) * (size_t)(cls.n + 1));
    if (first == NULL) goto nomem;
    if ((st = list_classes(dir, &cls, &files, first, err)) != MR_OK) goto out;
    *y = malloc(sizeof(int32_t) * (size_t)(files.n ? files.n : 1));
    if (*y == NULL) goto nomem;
    for (int i = 0; i < cls.n; i++)
        for (int j = first[i]; j < first[i + 1]; j++)
            (*y)[j] = i;
    if (class_names != NULL && (*class_names = join_lines(&cls, 0)) == NULL) goto nomem;
    if ((st = decode_files(dir, &files, h, w, c, x, err)) != MR_OK) goto out;
    *classes = cls.n;
    goto out;
nomem:
    st = mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory for %d images", dir, files.n);
out:
    names_free(&cls);
    names_free(&files);
    free(first);
    if (st != MR_OK) {
        mr_array_free(x);
        free(*y);
        *y = NULL;
        *classes = 0;
        if (class_names != NULL) free(*class_names), *class_names = NULL;
    }
    return st;
}

mr_status mr_image_folder_read_flat(const char *dir, int h, int w, int c, mr_array *x,
                                    char **file_names, mr_error *err) {
    memset(x, 0, sizeof *x);
    *file_names = NULL;
    names fs = {0}, files = {0};
    mr_status st = MR_OK;
    if (!list_dir(dir, 'f', &fs)) {
        names_free(&fs);
        return mr_error_set(err, MR_ERR_IO, "%s: cannot read the folder", dir);
    }
    for (int i = 0; i < fs.n && st == MR_OK; i++) {
        char *p = is_image_name(fs.v[i]) ? join(dir, fs.v[i]) : NULL;
        if (is_image_name(fs.v[i]) && (p == NULL || !names_add(&files, p)))
            st = mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", dir);
        free(p);
    }
    if (st == MR_OK && files.n == 0)
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s: no images in it (files named *.png, *.jpg, *.jpeg, *.bmp or "
                          "*.gif, in any case)",
                          dir);
    /* the names as they are in dir: past "dir/" */
    if (st == MR_OK && (*file_names = join_lines(&files, strlen(dir) + 1)) == NULL)
        st = mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", dir);
    if (st == MR_OK) st = decode_files(dir, &files, h, w, c, x, err);
    names_free(&fs);
    names_free(&files);
    if (st != MR_OK) free(*file_names), *file_names = NULL;
    return st;
}
