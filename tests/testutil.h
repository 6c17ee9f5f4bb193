/* testutil.h: small helpers shared by the Check tests. */
#ifndef MR_TESTUTIL_H
#define MR_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* One test case alone: MR_TEST=NAME (a START_TEST's name, or several
 * separated by commas) adds only those to their TCase, so
 *     MR_TEST=one_loader meson test -C build session -v
 * runs one case of tests/test_session.c (Check's CK_RUN_CASE picks a whole
 * TCase). Unset, every case runs. */
int tu_selected(const char *name);
#undef tcase_add_test
#define tcase_add_test(tc, tf)                                                                     \
    do {                                                                                           \
        if (tu_selected(#tf)) _tcase_add_test((tc), (tf), 0, 0, 0, 1);                             \
    } while (0)
#undef tcase_add_loop_test
#define tcase_add_loop_test(tc, tf, s, e)                                                          \
    do {                                                                                           \
        if (tu_selected(#tf)) _tcase_add_test((tc), (tf), 0, 0, (s), (e));                         \
    } while (0)

/* Makes a fresh temporary directory (under $TMPDIR or /tmp) and returns its
 * path in a static buffer; each call makes a new one. */
const char *tu_tmpdir(void);

/* Writes `len` bytes to `dir/name`, returns the full path (malloc'd). */
char *tu_write_file(const char *dir, const char *name, const void *data, size_t len);

/* Same for a NUL-terminated string. */
char *tu_write_text(const char *dir, const char *name, const char *text);

/* Path of a file in the source tree (MR_SOURCE_ROOT/rel), malloc'd. */
char *tu_source_path(const char *rel);

/* Path of a file in the build tree (MR_BUILD_ROOT/rel), malloc'd. */
char *tu_build_path(const char *rel);

/* Runs a shell command, captures stdout+stderr (malloc'd, NUL-terminated, in
 * *output if not NULL) and returns its exit status (-1 if it did not exit). */
int tu_run(const char *cmd, char **output);

/* Reads a whole file (malloc'd, NUL-terminated); NULL if it cannot. */
char *tu_read_file(const char *path, size_t *len);

/* tu_read_file of dir/name. */
char *tu_read_in(const char *dir, const char *name);

/* The "params_hash" (16 hex digits) of the --json file dir/json_name into
 * hash[17]; fails the test when the file or the key is missing. */
void tu_params_hash(const char *dir, const char *json_name, char *hash);

/* dir/name, a --metrics CSV, without its timing columns (the last two:
 * samples/s, seconds), which differ between runs that train alike. */
char *tu_metrics_without_timing(const char *dir, const char *name);

/* Asserts that two runs in dir trained alike: the params_hash of their
 * --json files, and (csv_a not NULL) their --metrics but the timings. */
void tu_same_run(const char *dir, const char *json_a, const char *csv_a, const char *json_b,
                 const char *csv_b);

/* 1 if the file exists. */
int tu_exists(const char *path);

/* Writes dir/name_x (n 8x8x1 uint8 images, NPY) and dir/name_y (n labels in
 * [0, classes), NPY): each class brightens its own pixels, so a model
 * learns it. The same bits on every call. */
void tu_write_image_data(const char *dir, const char *name_x, const char *name_y, int64_t n,
                         int classes);

/* Writes dir/name_y: multi-hot labels (n, 3) float32 0.0/1.0 for tu_write_image_data's images
 * of 4 classes: example i of class c = i % 4 has (c & 1, c >> 1, c == 3), learnable from the
 * pixels its class brightens; any number of 1s per row. */
void tu_write_multi_hot_labels(const char *dir, const char *name_y, int64_t n);

/* Writes dir/name (folders made as needed), an 8-bit PNG (h, w, c) of
 * `pixels` through libpng: c 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA. Returns
 * the full path (malloc'd). */
char *tu_write_png(const char *dir, const char *name, int h, int w, int c, const uint8_t *pixels);

/* Runs every test of suite s (Check's forking mode), frees it, and returns the
 * process exit status: 0 when all passed. */
struct Suite;
int tu_run_suite(struct Suite *s);

/* 1 in a build with a GPU backend (whether or not a GPU is there). */
int tu_cuda_built(void);
/* The GPUs this process sees (the build's "gpu" kind's; none, with the
 * reason, in a build without one). */
struct mr_gpu_list;
const struct mr_gpu_list *tu_gpus(void);

/* A CPU backend context for the whole test process (made on first use,
 * never freed): what a test passes where a replica's context is wanted. */
struct mr_backend;
struct mr_backend *tu_cpu_backend(void);

/* Largest |a-b| / max(1e-30, max|b|) over n floats: a normalised error. */
double tu_rel_diff(const float *a, const float *b, size_t n);

#endif
