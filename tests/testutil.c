/* testutil.c: see testutil.h. */
#include "testutil.h"

#include <check.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

int tu_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
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
