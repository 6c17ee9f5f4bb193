/* testutil.c: see testutil.h. */
#include "tests/testutil.h"

#include "backends/backends.h"

#include <check.h>

#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/array.h"
#include "runtime/npy.h"
#include "runtime/backend.h"
#include "runtime/rng.h"

const char *tu_tmpdir(void) {
    static char path[4096];
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') base = "/tmp";
    snprintf(path, sizeof path, "%s/mr_test_XXXXXX", base);
    if (mkdtemp(path) == NULL) {
        perror("mkdtemp");
        abort();
    }
    return path;
}

char *tu_write_file(const char *dir, const char *name, const void *data, size_t len) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        perror(path);
        abort();
    }
    if (len > 0 && fwrite(data, 1, len, f) != len) abort();
    fclose(f);
    return path;
}

char *tu_write_text(const char *dir, const char *name, const char *text) {
    return tu_write_file(dir, name, text, strlen(text));
}

static char *join_env(const char *var, const char *fallback, const char *rel) {
    const char *root = getenv(var);
    if (root == NULL) root = fallback;
    size_t n = strlen(root) + strlen(rel) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", root, rel);
    return p;
}

char *tu_source_path(const char *rel) {
    return join_env("MR_SOURCE_ROOT", "..", rel);
}

char *tu_build_path(const char *rel) {
    return join_env("MR_BUILD_ROOT", ".", rel);
}

int tu_run(const char *cmd, char **output) {
    size_t n = strlen(cmd) + 16;
    char *full = malloc(n);
    snprintf(full, n, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    free(full);
    if (p == NULL) return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = '\0';
    int st = pclose(p);
    if (output != NULL)
        *output = buf;
    else
        free(buf);
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

char *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)sz + 1);
    size_t got = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    buf[got] = '\0';
    if (len != NULL) *len = got;
    return buf;
}

char *tu_read_in(const char *dir, const char *name) {
    char p[8192];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return tu_read_file(p, NULL);
}

void tu_params_hash(const char *dir, const char *json_name, char *hash) {
    static const char key[] = "\"params_hash\": \"";
    char *j = tu_read_in(dir, json_name);
    ck_assert_msg(j != NULL, "%s missing", json_name);
    const char *h = strstr(j, key);
    ck_assert_msg(h != NULL, "%s has no params_hash", json_name);
    snprintf(hash, 17, "%s", h + strlen(key));
    free(j);
}

int tu_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

mr_backend *tu_cpu_backend(void) {
    static mr_backend *be;
    if (be == NULL && mr_backend_create(mr_backend_kind_cpu(), 0, &be, NULL) != MR_OK) {
        fprintf(stderr, "tu_cpu_backend: cannot create a CPU context\n");
        abort();
    }
    return be;
}

double tu_rel_diff(const float *a, const float *b, size_t n) {
    double maxb = 0.0, maxd = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > maxd) maxd = d;
        if (fabs((double)b[i]) > maxb) maxb = fabs((double)b[i]);
    }
    return maxd / (maxb > 1e-30 ? maxb : 1e-30);
}

int tu_run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}

void tu_write_image_data(const char *dir, const char *name_x, const char *name_y, int64_t n,
                         int classes) {
    mr_array x = {.dtype = MR_DTYPE_U8, .ndim = 3, .dims = {n, 8, 8}};
    mr_array y = {.dtype = MR_DTYPE_U8, .ndim = 1, .dims = {n}};
    uint8_t *px = malloc((size_t)(n * 64)), *py = malloc((size_t)n);
    float *u = malloc(sizeof(float) * (size_t)(n * 64));
    mr_rng_uniform(1, 1, 0, 0, 0.0f, 1.0f, u, n * 64);
    for (int64_t i = 0; i < n; i++) {
        py[i] = (uint8_t)(i % classes);
        for (int j = 0; j < 64; j++) /* class-dependent brightness: learnable */
            px[i * 64 + j] = (uint8_t)(u[i * 64 + j] * 100 + (j % classes == py[i] ? 120 : 0));
    }
    x.data = px, y.data = py;
    char path[8192];
    mr_error err = {0};
    snprintf(path, sizeof path, "%s/%s", dir, name_x);
    ck_assert(mr_npy_write(path, &x, &err) == MR_OK);
    snprintf(path, sizeof path, "%s/%s", dir, name_y);
    ck_assert(mr_npy_write(path, &y, &err) == MR_OK);
    free(px), free(py), free(u);
}

void tu_write_multi_hot_labels(const char *dir, const char *name_y, int64_t n) {
    mr_array y = {.dtype = MR_DTYPE_F32, .ndim = 2, .dims = {n, 3}};
    float *py = malloc(sizeof(float) * (size_t)(n * 3));
    for (int64_t i = 0; i < n; i++) {
        const int c = (int)(i % 4);
        py[i * 3] = (float)(c & 1), py[i * 3 + 1] = (float)(c >> 1), py[i * 3 + 2] = c == 3;
    }
    y.data = py;
    char path[8192];
    mr_error err = {0};
    snprintf(path, sizeof path, "%s/%s", dir, name_y);
    ck_assert(mr_npy_write(path, &y, &err) == MR_OK);
    free(py);
}

const mr_gpu_list *tu_gpus(void) {
    return mr_backend_kind_devices(mr_backend_kind_find("gpu"));
}

int tu_cuda_built(void) {
    return mr_backend_kind_find("gpu") != NULL;
}

char *tu_metrics_without_timing(const char *dir, const char *name) {
    char *csv = tu_read_in(dir, name);
    ck_assert_msg(csv != NULL, "%s missing", name);
    char *out = csv;
    for (char *line = csv; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *cut = line + len;
        for (int k = 0; k < 2 && cut > line; k++)
            for (cut--; cut > line && *cut != ','; cut--)
                ;
        memmove(out, line, (size_t)(cut - line));
        out += cut - line;
        *out++ = '\n';
        line = end ? end + 1 : line + len;
    }
    *out = '\0';
    return csv;
}

void tu_same_run(const char *dir, const char *json_a, const char *csv_a, const char *json_b,
                 const char *csv_b) {
    char a[17], b[17];
    tu_params_hash(dir, json_a, a);
    tu_params_hash(dir, json_b, b);
    ck_assert_msg(strcmp(a, b) == 0, "weights differ: %s %s, %s %s", json_a, a, json_b, b);
    if (csv_a == NULL) return;
    char *ma = tu_metrics_without_timing(dir, csv_a), *mb = tu_metrics_without_timing(dir, csv_b);
    ck_assert_msg(strcmp(ma, mb) == 0, "metrics differ:\n%s\n%s", ma, mb);
    free(ma), free(mb);
}

char *tu_write_png(const char *dir, const char *name, int h, int w, int c, const uint8_t *pixels) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    snprintf(path, n, "%s/%s", dir, name);
    /* the folders on the way (name may be "class/sub/x.png") */
    for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        mkdir(path, 0755);
        *s = '/';
    }
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    ck_assert(png != NULL && info != NULL && setjmp(png_jmpbuf(png)) == 0);
    static const int types[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                PNG_COLOR_TYPE_RGB_ALPHA};
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, types[c - 1], PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < h; y++)
        png_write_row(png, pixels + (size_t)y * (size_t)w * (size_t)c);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
    return path;
}
