/* test_image_folder.c: unit tests of runtime/image_folder.c: PNGs (libpng)
 * and JPEGs (libjpeg) of known pixels written here, decoded to 1, 3 and 4
 * channels (libpng's Rec. 601 grey in fixed point, as TensorFlow asks for
 * it), bilinear resizing against values TensorFlow 2.21's tf.image.resize
 * printed, folders read in Keras's order with their labels, uint8 kept
 * where no image is resized, and one-line errors naming the file or
 * folder; mr_dataset_load_input on a folder. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h> /* after the stdio header: it uses FILE */

#include <zlib.h>

#include "runtime/dataset.h"
#include "runtime/image_folder.h"
#include "tests/testutil.h"

/* ---- helpers ------------------------------------------------------------- */

/* A JPEG (h, w, c) of `pixels`, c 1 or 3, at quality 100. */
static char *write_jpeg(const char *dir, const char *name, int h, int w, int c,
                        const uint8_t *pixels) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w, ci.image_height = (JDIMENSION)h;
    ci.input_components = c;
    ci.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 100, TRUE);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)ci.next_scanline * (size_t)w * (size_t)c);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    fclose(f);
    return path;
}

/* A constant (h, w) grey PNG of value v at dir/name. */
static void grey_png(const char *dir, const char *name, int h, int w, uint8_t v) {
    uint8_t *p = malloc((size_t)(h * w));
    memset(p, v, (size_t)(h * w));
    free(tu_write_png(dir, name, h, w, 1, p));
    free(p);
}

/* Cuts the last `drop` bytes off the file at `path`. */
static void cut_end(const char *path, long drop) {
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_gt(sb.st_size, drop);
    ck_assert_int_eq(truncate(path, sb.st_size - drop), 0);
}

static void make_dir(const char *dir, const char *name) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    ck_assert_int_eq(mkdir(p, 0755), 0);
}

/* Reads the folder expecting failure; checks one line naming `what`. */
static void read_fails(const char *dir, int c, mr_status want, const char *what) {
    mr_array x;
    int32_t *y;
    int k;
    mr_error err = {0};
    mr_status st = mr_image_folder_read(dir, 4, 4, c, &x, &y, &k, NULL, &err);
    ck_assert_msg(st == want, "%s: status %s, expected %s (%s)", dir, mr_status_name(st),
                  mr_status_name(want), err.msg);
    ck_assert_msg(strstr(err.msg, what) != NULL, "message does not name %s: %s", what, err.msg);
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    ck_assert_ptr_null(x.data);
    ck_assert_ptr_null(y);
}

/* ---- decoding -------------------------------------------------------------- */

/* RGB PNG: exact at 3 channels, opaque at 4, libpng's grey at 1:
 * (9798 r + 19235 g + 3735 b) >> 15, i.e. 0.299, 0.587, 0.114 truncated. */
START_TEST(png_rgb_to_channels) {
    const char *dir = tu_tmpdir();
    const uint8_t px[4 * 3] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 200, 30};
    char *path = tu_write_png(dir, "rgb.png", 2, 2, 3, px);
    mr_image img;
    mr_error err = {0};
    ck_assert_msg(mr_image_decode(path, 3, &img, &err) == MR_OK, "%s", err.msg);
    ck_assert(img.h == 2 && img.w == 2 && img.c == 3);
    ck_assert_mem_eq(img.data, px, sizeof px);
    mr_image_free(&img);
    ck_assert(mr_image_decode(path, 4, &img, &err) == MR_OK);
    for (int i = 0; i < 4; i++) {
        ck_assert_mem_eq(img.data + 4 * i, px + 3 * i, 3);
        ck_assert_int_eq(img.data[4 * i + 3], 255);
    }
    mr_image_free(&img);
    ck_assert(mr_image_decode(path, 1, &img, &err) == MR_OK);
    const uint8_t grey[4] = {76, 149, 29, 123}; /* hand-computed from the formula above */
    ck_assert_mem_eq(img.data, grey, 4);
    mr_image_free(&img);
    free(path);
}
END_TEST

/* RGBA: alpha dropped for 3 and 1; grey and grey+alpha widened to RGB(A). */
START_TEST(png_alpha_and_grey) {
    const char *dir = tu_tmpdir();
    const uint8_t rgba[4] = {10, 20, 30, 40}, ga[2] = {77, 9}, g[1] = {200};
    char *p4 = tu_write_png(dir, "a.png", 1, 1, 4, rgba);
    char *p2 = tu_write_png(dir, "ga.png", 1, 1, 2, ga);
    char *p1 = tu_write_png(dir, "g.png", 1, 1, 1, g);
    mr_image img;
    mr_error err = {0};
    ck_assert(mr_image_decode(p4, 4, &img, &err) == MR_OK);
    ck_assert_mem_eq(img.data, rgba, 4);
    mr_image_free(&img);
    ck_assert(mr_image_decode(p4, 3, &img, &err) == MR_OK);
    ck_assert_mem_eq(img.data, rgba, 3);
    mr_image_free(&img);
    ck_assert(mr_image_decode(p2, 4, &img, &err) == MR_OK);
    const uint8_t ga4[4] = {77, 77, 77, 9};
    ck_assert_mem_eq(img.data, ga4, 4);
    mr_image_free(&img);
    ck_assert(mr_image_decode(p2, 1, &img, &err) == MR_OK);
    ck_assert_int_eq(img.data[0], 77);
    mr_image_free(&img);
    ck_assert(mr_image_decode(p1, 3, &img, &err) == MR_OK);
    const uint8_t g3[3] = {200, 200, 200};
    ck_assert_mem_eq(img.data, g3, 3);
    mr_image_free(&img);
    ck_assert(mr_image_decode(p1, 4, &img, &err) == MR_OK);
    const uint8_t g4[4] = {200, 200, 200, 255};
    ck_assert_mem_eq(img.data, g4, 4);
    mr_image_free(&img);
    free(p4), free(p2), free(p1);
}
END_TEST

/* JPEG: constant 8x8 blocks decode to their value (DC only, quality 100);
 * grey from colour is the luminance, RGB within JPEG's rounding; no RGBA. */
START_TEST(jpeg_decode) {
    const char *dir = tu_tmpdir();
    uint8_t g[64], rgb[64 * 3];
    memset(g, 100, sizeof g);
    for (int i = 0; i < 64; i++)
        rgb[3 * i] = 200, rgb[3 * i + 1] = 100, rgb[3 * i + 2] = 50;
    char *pg = write_jpeg(dir, "g.jpg", 8, 8, 1, g);
    char *pc = write_jpeg(dir, "c.JPEG", 8, 8, 3, rgb);
    mr_image img;
    mr_error err = {0};
    ck_assert_msg(mr_image_decode(pg, 1, &img, &err) == MR_OK, "%s", err.msg);
    ck_assert(img.h == 8 && img.w == 8 && img.c == 1);
    ck_assert_mem_eq(img.data, g, 64);
    mr_image_free(&img);
    ck_assert(mr_image_decode(pg, 3, &img, &err) == MR_OK);
    for (int i = 0; i < 64 * 3; i++)
        ck_assert_int_eq(img.data[i], 100);
    mr_image_free(&img);
    ck_assert(mr_image_decode(pc, 3, &img, &err) == MR_OK);
    for (int i = 0; i < 64 * 3; i++)
        ck_assert_msg(abs((int)img.data[i] - (int)rgb[i]) <= 2, "%d: %d vs %d", i, img.data[i],
                      rgb[i]);
    mr_image_free(&img);
    ck_assert(mr_image_decode(pc, 1, &img, &err) == MR_OK);
    /* 0.299 * 200 + 0.587 * 100 + 0.114 * 50 = 124.2 */
    for (int i = 0; i < 64; i++)
        ck_assert_msg(abs((int)img.data[i] - 124) <= 1, "%d", img.data[i]);
    mr_image_free(&img);
    ck_assert_int_eq(mr_image_decode(pc, 4, &img, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, pc) && strstr(err.msg, "4 channels"), "%s", err.msg);
    ck_assert_ptr_null(img.data);
    free(pg), free(pc);
}
END_TEST

/* Broken files: one line naming the file, nothing left allocated. */
START_TEST(decode_errors) {
    const char *dir = tu_tmpdir();
    uint8_t px[32 * 32 * 3]; /* noise: files too big to compress away */
    uint32_t r = 1;
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)((r = r * 1664525u + 1013904223u) >> 24);
    char *png = tu_write_png(dir, "t.png", 32, 32, 3, px);
    char *jpg = write_jpeg(dir, "t.jpg", 32, 32, 3, px);
    cut_end(png, 200);
    cut_end(jpg, 200);
    char *txt = tu_write_text(dir, "x.png", "just text, named .png");
    char *gif = tu_write_text(dir, "x.gif", "GIF89a....");
    char *bmp = tu_write_text(dir, "x.bmp", "BM......");
    const struct {
        const char *path, *what;
        mr_status st;
    } cases[] = {{png, "not a readable PNG", MR_ERR_DATA},
                 {jpg, "truncated JPEG", MR_ERR_DATA},
                 {txt, "not a PNG or JPEG", MR_ERR_DATA},
                 {gif, "GIF images are not supported", MR_ERR_UNSUPPORTED},
                 {bmp, "BMP images are not supported", MR_ERR_UNSUPPORTED}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mr_image img;
        mr_error err = {0};
        ck_assert_int_eq(mr_image_decode(cases[i].path, 3, &img, &err), cases[i].st);
        ck_assert_msg(strstr(err.msg, cases[i].path) && strstr(err.msg, cases[i].what), "%s",
                      err.msg);
        ck_assert_ptr_null(strchr(err.msg, '\n'));
        ck_assert_ptr_null(img.data);
    }
    mr_image img;
    mr_error err = {0};
    /* a header claiming 40000x40000 (4.8 GB of RGB): refused before any
     * allocation; IHDR's width and height at bytes 16..23, its CRC (of
     * bytes 12..28) at 29..32 */
    const uint8_t one[3] = {1, 2, 3};
    char *big = tu_write_png(dir, "big.png", 1, 1, 3, one);
    size_t len;
    uint8_t *b = (uint8_t *)tu_read_file(big, &len);
    for (int k = 0; k < 2; k++)
        b[16 + 4 * k] = 0, b[17 + 4 * k] = 0, b[18 + 4 * k] = 0x9c, b[19 + 4 * k] = 0x40;
    const uint32_t crc = (uint32_t)crc32(0, b + 12, 17);
    b[29] = (uint8_t)(crc >> 24), b[30] = (uint8_t)(crc >> 16), b[31] = (uint8_t)(crc >> 8);
    b[32] = (uint8_t)crc;
    free(tu_write_file(dir, "big.png", b, len));
    ck_assert_int_eq(mr_image_decode(big, 3, &img, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, big) && strstr(err.msg, "40000x40000 image is over 1 GiB"), "%s",
                  err.msg);
    ck_assert_ptr_null(img.data);
    free(b), free(big);
    mr_error_clear(&err);
    ck_assert_int_eq(mr_image_decode("/nonexistent/a.png", 3, &img, &err), MR_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/a.png"));
    free(png), free(jpg), free(txt), free(gif), free(bmp);
}
END_TEST

/* ---- resizing -------------------------------------------------------------- */

/* (3, 4) of 0, 20, ..., 220 to (2, 3) and (5, 7): the values
 * tf.image.resize(x, size) printed (TensorFlow 2.21, float32, shortest
 * round-trip repr), compared bit for bit. */
START_TEST(resize_matches_tensorflow) {
    uint8_t src[12];
    for (int i = 0; i < 12; i++)
        src[i] = (uint8_t)(20 * i);
    float down[6];
    mr_error err = {0};
    ck_assert(mr_image_resize_bilinear(src, 3, 4, 1, down, 2, 3, &err) == MR_OK);
    const float want_down[6] = {23.333334f, 50.0f, 76.66667f, 143.33333f, 170.0f, 196.66667f};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(down[i] == want_down[i], "%d: %.9g vs %.9g", i, (double)down[i],
                      (double)want_down[i]);
    float up[35];
    ck_assert(mr_image_resize_bilinear(src, 3, 4, 1, up, 5, 7, &err) == MR_OK);
    const float want_up[35] = {
        0.0f,       7.1428585f, 18.57143f,  30.0f,      41.428574f, 52.857147f, 60.0f,
        32.000004f, 39.14286f,  50.571434f, 62.000004f, 73.42857f,  84.85715f,  92.0f,
        80.0f,      87.14286f,  98.57143f,  110.0f,     121.42857f, 132.85715f, 140.0f,
        128.00002f, 135.14287f, 146.57144f, 158.00002f, 169.42859f, 180.85716f, 188.00002f,
        160.0f,     167.14285f, 178.57143f, 190.0f,     201.42857f, 212.85715f, 220.0f};
    for (int i = 0; i < 35; i++)
        ck_assert_msg(up[i] == want_up[i], "%d: %.9g vs %.9g", i, (double)up[i],
                      (double)want_up[i]);
    /* channels interleaved: each resized on its own; same size: the values */
    const uint8_t rgb[2 * 3] = {0, 100, 255, 50, 100, 5};
    float same[6], one[3];
    ck_assert(mr_image_resize_bilinear(rgb, 1, 2, 3, same, 1, 2, &err) == MR_OK);
    for (int i = 0; i < 6; i++)
        ck_assert(same[i] == (float)rgb[i]);
    ck_assert(mr_image_resize_bilinear(rgb, 1, 2, 3, one, 1, 1, &err) == MR_OK);
    ck_assert(one[0] == 25.0f && one[1] == 100.0f && one[2] == 130.0f);
}
END_TEST

/* ---- the folder ------------------------------------------------------------ */

/* Classes in byte order ("A" < "a_cls" < "b"), hidden folders and other
 * files skipped, extensions in any case, subfolders of a class by full
 * path ("b/s-t" before "b/s/u"), each image a constant telling it apart. */
START_TEST(folder_order_and_labels) {
    const char *dir = tu_tmpdir();
    grey_png(dir, "b/2.png", 4, 4, 21);
    grey_png(dir, "b/10.PNG", 4, 4, 20); /* "10.PNG" < "2.png": byte order */
    grey_png(dir, "b/s/u/x.png", 4, 4, 23);
    grey_png(dir, "b/s-t/y.png", 4, 4, 22); /* "b/s-t" < "b/s/u": '-' < '/' */
    grey_png(dir, "a_cls/z.png", 4, 4, 10);
    grey_png(dir, "A/only.png", 4, 4, 1);
    grey_png(dir, ".hidden/h.png", 4, 4, 99);
    grey_png(dir, "top.png", 4, 4, 98); /* not in a class folder */
    free(tu_write_text(dir, "a_cls/readme.txt", "not an image"));
    uint8_t g[64];
    memset(g, 11, sizeof g);
    free(write_jpeg(dir, "a_cls/z2.jpg", 8, 8, 1, g)); /* 8x8: resized to 4x4, still 11 */
    mr_array x;
    int32_t *y;
    int k;
    mr_error err = {0};
    ck_assert_msg(mr_image_folder_read(dir, 4, 4, 1, &x, &y, &k, NULL, &err) == MR_OK, "%s",
                  err.msg);
    ck_assert_int_eq(k, 3);
    ck_assert(x.ndim == 4 && x.dims[0] == 7 && x.dims[1] == 4 && x.dims[2] == 4 && x.dims[3] == 1);
    ck_assert_int_eq(x.dtype, MR_DTYPE_F32); /* one image was resized */
    const int32_t want_y[7] = {0, 1, 1, 2, 2, 2, 2};
    const float want_v[7] = {1, 10, 11, 20, 21, 22, 23};
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(y[i], want_y[i]);
        for (int j = 0; j < 16; j++)
            ck_assert_msg(((float *)x.data)[i * 16 + j] == want_v[i], "image %d: %g", i,
                          (double)((float *)x.data)[i * 16 + j]);
    }
    mr_array_free(&x);
    free(y);
}
END_TEST

/* All at the [input] size: uint8, the pixels exactly; RGB kept in order. */
START_TEST(folder_uint8_when_no_resize) {
    const char *dir = tu_tmpdir();
    uint8_t px[2 * 3 * 3];
    for (int i = 0; i < 18; i++)
        px[i] = (uint8_t)(i * 13);
    free(tu_write_png(dir, "c0/a.png", 2, 3, 3, px));
    free(tu_write_png(dir, "c1/b.png", 2, 3, 3, px + 0));
    mr_array x;
    int32_t *y;
    int k;
    mr_error err = {0};
    ck_assert_msg(mr_image_folder_read(dir, 2, 3, 3, &x, &y, &k, NULL, &err) == MR_OK, "%s",
                  err.msg);
    ck_assert_int_eq(x.dtype, MR_DTYPE_U8);
    ck_assert_int_eq(k, 2);
    ck_assert_mem_eq(x.data, px, 18);
    ck_assert_mem_eq((uint8_t *)x.data + 18, px, 18);
    ck_assert(y[0] == 0 && y[1] == 1);
    mr_array_free(&x);
    free(y);
    /* mixed sizes: the first one stays exact when a later one widens x */
    grey_png(dir, "c1/c.png", 4, 6, 100);
    ck_assert(mr_image_folder_read(dir, 2, 3, 3, &x, &y, &k, NULL, &err) == MR_OK);
    ck_assert_int_eq(x.dtype, MR_DTYPE_F32);
    ck_assert_int_eq(x.dims[0], 3);
    for (int i = 0; i < 18; i++)
        ck_assert(((float *)x.data)[i] == px[i] && ((float *)x.data)[18 + i] == px[i]);
    for (int i = 36; i < 54; i++)
        ck_assert(((float *)x.data)[i] == 100.0f);
    mr_array_free(&x);
    free(y);
}
END_TEST

START_TEST(folder_errors) {
    /* no class folders */
    const char *d1 = tu_tmpdir();
    grey_png(d1, "a.png", 4, 4, 1);
    read_fails(d1, 1, MR_ERR_DATA, "no class folders");
    /* a class folder without images (a text file does not count) */
    const char *d2 = tu_tmpdir();
    grey_png(d2, "a/a.png", 4, 4, 1);
    make_dir(d2, "b");
    free(tu_write_text(d2, "b/x.txt", "no"));
    read_fails(d2, 1, MR_ERR_DATA, "/b: class folder without images");
    /* a truncated image names itself */
    const char *d3 = tu_tmpdir();
    uint8_t px[16 * 16];
    uint32_t r = 7;
    for (int i = 0; i < 256; i++)
        px[i] = (uint8_t)((r = r * 1664525u + 1013904223u) >> 24);
    char *p = tu_write_png(d3, "a/t.png", 16, 16, 1, px);
    cut_end(p, 40);
    read_fails(d3, 1, MR_ERR_DATA, p);
    free(p);
    /* not a folder */
    read_fails("/nonexistent-folder", 1, MR_ERR_IO, "/nonexistent-folder");
}
END_TEST

START_TEST(folder_is) {
    const char *dir = tu_tmpdir();
    ck_assert_int_eq(mr_image_folder_is(dir), 1);
    char *f = tu_write_text(dir, "f", "x");
    ck_assert_int_eq(mr_image_folder_is(f), 0);
    ck_assert_int_eq(mr_image_folder_is("/nonexistent"), 0);
    free(f);
}
END_TEST

/* The dataset loader on a folder: shape from [input], labels from the
 * folders, the note, the class check against the model's outputs; a
 * labels file beside a folder, or a shape that is not (h, w, c), refused. */
START_TEST(dataset_from_folder) {
    const char *dir = tu_tmpdir();
    grey_png(dir, "cat/a.png", 4, 4, 5);
    grey_png(dir, "dog/b.png", 4, 4, 6);
    grey_png(dir, "dog/c.png", 4, 4, 7);
    const int shape[3] = {4, 4, 1};
    mr_dataset ds;
    mr_error err = {0};
    ck_assert_msg(mr_dataset_load_input(&ds, dir, NULL, 3, shape, &err) == MR_OK, "%s", err.msg);
    ck_assert(ds.n == 3 && ds.row == 16 && ds.classes == 2);
    ck_assert(ds.y[0] == 0 && ds.y[1] == 1 && ds.y[2] == 1);
    ck_assert_msg(strstr(ds.note, "found 3 files belonging to 2 classes"), "%s", ds.note);
    ck_assert_str_eq(ds.class_names, "cat\ndog");
    ck_assert(mr_dataset_check_labels(&ds, 2, dir, &err) == MR_OK);
    ck_assert_int_eq(mr_dataset_check_labels(&ds, 3, dir, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, "2 class folders, but the model has 3"),
                  "%s", err.msg);
    mr_dataset_free(&ds);
    mr_error_clear(&err); /* err keeps the first message */
    ck_assert_int_eq(mr_dataset_load_input(&ds, dir, "y.npy", 3, shape, &err), MR_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, "give no labels file"), "%s", err.msg);
    ck_assert_ptr_null(ds.x.data);
    const int flat[1] = {16};
    mr_error_clear(&err);
    ck_assert_int_eq(mr_dataset_load_input(&ds, dir, NULL, 1, flat, &err), MR_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "height, width, channels"), "%s", err.msg);
    const int two[3] = {4, 4, 2};
    ck_assert_int_eq(mr_dataset_load_input(&ds, dir, NULL, 3, two, &err), MR_ERR_USAGE);
}
END_TEST

/* A folder of images without class folders, to predict: its own image files by name (other
 * files and hidden folders left out), their names in order; a folder without images, or with
 * class folders, is not one. */
START_TEST(flat_folder) {
    const char *dir = tu_tmpdir();
    grey_png(dir, "b.png", 4, 4, 2);
    grey_png(dir, "A.PNG", 8, 8, 1); /* resized: float32 */
    grey_png(dir, ".hidden/h.png", 4, 4, 9);
    free(tu_write_text(dir, "notes.txt", "x"));
    ck_assert_int_eq(mr_image_folder_has_classes(dir), 0);
    mr_array x;
    char *names = NULL;
    mr_error err = {0};
    ck_assert_msg(mr_image_folder_read_flat(dir, 4, 4, 1, &x, &names, &err) == MR_OK, "%s",
                  err.msg);
    ck_assert_str_eq(names, "A.PNG\nb.png");
    ck_assert(x.ndim == 4 && x.dims[0] == 2 && x.dtype == MR_DTYPE_F32);
    ck_assert(((float *)x.data)[0] == 1.0f && ((float *)x.data)[16] == 2.0f);
    mr_array_free(&x);
    free(names);
    const int shape[3] = {4, 4, 1};
    mr_dataset ds;
    ck_assert_msg(mr_dataset_load_images(&ds, dir, 3, shape, &err) == MR_OK, "%s", err.msg);
    ck_assert(ds.n == 2 && ds.row == 16 && ds.classes == 0 && ds.y[0] == 0 && ds.y[1] == 0);
    ck_assert_str_eq(ds.file_names, "A.PNG\nb.png");
    ck_assert_msg(strstr(ds.note, "found 2 files, no labels"), "%s", ds.note);
    mr_dataset_free(&ds);
    const int flat[1] = {16};
    ck_assert_int_eq(mr_dataset_load_images(&ds, dir, 1, flat, &err), MR_ERR_USAGE);
    /* no images; and a folder of class folders */
    const char *empty = tu_tmpdir();
    free(tu_write_text(empty, "notes.txt", "x"));
    mr_error_clear(&err);
    ck_assert_int_eq(mr_image_folder_read_flat(empty, 4, 4, 1, &x, &names, &err), MR_ERR_DATA);
    ck_assert_msg(strstr(err.msg, empty) && strstr(err.msg, "no images in it"), "%s", err.msg);
    ck_assert_ptr_null(names);
    ck_assert_ptr_null(x.data);
    grey_png(empty, "cls/a.png", 4, 4, 1);
    ck_assert_int_eq(mr_image_folder_has_classes(empty), 1);
    ck_assert_int_eq(mr_image_folder_has_classes("/nonexistent"), 0);
    /* the class folders' names, in label order */
    int32_t *y;
    int k;
    grey_png(empty, "Abc/a.png", 4, 4, 1);
    ck_assert_msg(mr_image_folder_read(empty, 4, 4, 1, &x, &y, &k, &names, &err) == MR_OK, "%s",
                  err.msg);
    ck_assert_str_eq(names, "Abc\ncls");
    mr_array_free(&x);
    free(y), free(names);
}
END_TEST

static Suite *image_folder_suite(void) {
    Suite *s = suite_create("image_folder");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, png_rgb_to_channels);
    tcase_add_test(tc, png_alpha_and_grey);
    tcase_add_test(tc, jpeg_decode);
    tcase_add_test(tc, decode_errors);
    tcase_add_test(tc, resize_matches_tensorflow);
    tcase_add_test(tc, folder_order_and_labels);
    tcase_add_test(tc, folder_uint8_when_no_resize);
    tcase_add_test(tc, folder_errors);
    tcase_add_test(tc, folder_is);
    tcase_add_test(tc, dataset_from_folder);
    tcase_add_test(tc, flat_folder);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tu_run_suite(image_folder_suite());
}
