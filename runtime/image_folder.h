/* image_folder.h: a folder of class folders as a dataset, as Keras's
 * image_dataset_from_directory(labels="inferred", shuffle=False) reads it.
 *
 * DIR/<class>/.../<file>: the classes are DIR's subfolders (not those whose
 * name starts with '.') in sorted byte order, labelled 0, 1, ...; each
 * class's files are found as Keras's os.walk does (folders by full path in
 * sorted order, then each folder's files by name, symlinked folders not
 * entered), and those whose name ends, in any case, in .png, .jpg, .jpeg,
 * .bmp or .gif are the images. PNG (libpng) and JPEG (libjpeg-turbo) are
 * decoded, as TensorFlow's decode_image(channels=C) does; BMP and GIF are
 * refused. Each image is then resized to (H, W) with tf.image.resize's
 * bilinear interpolation (half-pixel centres, no antialiasing), float32
 * values 0..255, unscaled. A file's bytes are held only while it decodes. */
#ifndef MR_IMAGE_FOLDER_H
#define MR_IMAGE_FOLDER_H

#include <stdint.h>

#include "runtime/array.h"
#include "runtime/error.h"

/* An image decoded: (h, w, c) uint8, row-major. */
typedef struct mr_image {
    int h, w, c;
    uint8_t *data; /* owned; free with mr_image_free */
} mr_image;

/* 1 if path is a folder (following a symlink), else 0. */
int mr_image_folder_is(const char *path);

/* Decodes the PNG or JPEG file `path` (told by its first bytes, not its
 * name) into c channels as TensorFlow's decode_image(channels=c) does:
 * c 1: grey (colour PNG: libpng's rgb_to_gray with weights 0.299, 0.587;
 * colour JPEG: libjpeg's luminance, Y of YCbCr), alpha dropped; c 3: RGB
 * (grey repeated), alpha dropped; c 4: RGBA (PNG only; opaque where the
 * file has no alpha). 16-bit PNG samples keep their high byte. A file
 * that is not PNG or JPEG, or is broken or truncated, is an error naming
 * the path. On failure *img is left empty. */
mr_status mr_image_decode(const char *path, int c, mr_image *img, mr_error *err);

/* tf.image.resize(method="bilinear", antialias=False) of src (sh, sw, c)
 * uint8 into dst (dh, dw, c) float32: the source point of output pixel i
 * is (i + 0.5) * (in / out) - 0.5 on each axis, its neighbours clamped to
 * the image, interpolated along x then y, in float as TensorFlow's CPU
 * kernel computes it. Fails only for want of memory. */
mr_status mr_image_resize_bilinear(const uint8_t *src, int sh, int sw, int c, float *dst, int dh,
                                   int dw, mr_error *err);

/* Reads the folder `dir` into x (n, h, w, c) and y (n) class ids, n and the
 * class count: uint8 when every image already is (h, w) (the values are
 * then exact), float32 otherwise. class_names (NULL: not wanted): the
 * class folders' names in label order, one per line, malloc'd. Errors (one
 * line, naming the folder or file): no class folders, a class folder
 * without images, a file that does not decode. */
mr_status mr_image_folder_read(const char *dir, int h, int w, int c, mr_array *x, int32_t **y,
                               int *classes, char **class_names, mr_error *err);

/* 1 if the folder `dir` has a class folder (a subfolder whose name does
 * not start with '.'), else 0. */
int mr_image_folder_has_classes(const char *dir);

/* A folder of images without labels (new images to predict, Keras's
 * image_dataset_from_directory(labels=None) of a flat folder): dir's own
 * image files, sorted by name, into x as mr_image_folder_read does;
 * *file_names: their names within dir, one per line in x's order,
 * malloc'd. A folder without images is an error naming it. */
mr_status mr_image_folder_read_flat(const char *dir, int h, int w, int c, mr_array *x,
                                    char **file_names, mr_error *err);

void mr_image_free(mr_image *img);

#endif
