/* paths.c: input kinds, output collisions and writable outputs (paths.h). */
#include "runtime/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *mr_path_kind(mode_t mode) {
    if (S_ISREG(mode)) return NULL;
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

mr_status mr_path_check_regular(const char *opt, const char *path, int allow_dir, mr_error *err) {
    struct stat sb;
    if (path == NULL || path[0] == '\0' || stat(path, &sb) != 0) return MR_OK;
    if (S_ISREG(sb.st_mode) || (allow_dir && S_ISDIR(sb.st_mode))) return MR_OK;
    return mr_error_set(err, MR_ERR_IO, "%s%s%s: not a regular file (%s)", opt ? opt : "",
                        opt ? " " : "", path, mr_path_kind(sb.st_mode));
}

/* path with "." components and repeated "/" dropped, into out[n] (".."
 * is kept: it means something else behind a symbolic link). */
static void lexical(const char *path, char *out, size_t n) {
    size_t len = 0;
    const char *p = path;
    if (*p == '/' && len + 1 < n) out[len++] = '/';
    while (*p) {
        while (*p == '/')
            p++;
        size_t w = strcspn(p, "/");
        if (w == 0) break;
        if (!(w == 1 && p[0] == '.') && len + w + 2 < n) {
            if (len > 0 && out[len - 1] != '/') out[len++] = '/';
            memcpy(out + len, p, w);
            len += w;
        }
        p += w;
    }
    out[len] = '\0';
}

/* The normalized form of a path that may not exist: its folder resolved
 * (realpath) where the folder exists, then the last name; else lexical. */
static void normalize(const char *path, char *out, size_t n) {
    char lex[PATH_MAX], dir[PATH_MAX], real[PATH_MAX];
    lexical(path, lex, sizeof lex);
    const char *slash = strrchr(lex, '/');
    const char *base = slash ? slash + 1 : lex;
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == lex ? 1 : (int)(slash - lex), lex);
    if (base[0] != '\0' && realpath(dir, real) != NULL)
        snprintf(out, n, "%s/%s", strcmp(real, "/") == 0 ? "" : real, base);
    else
        snprintf(out, n, "%s", lex);
}

int mr_path_same(const char *a, const char *b) {
    struct stat sa, sb;
    const int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb) return 0;
    char na[PATH_MAX + 256], nb[PATH_MAX + 256];
    normalize(a, na, sizeof na);
    normalize(b, nb, sizeof nb);
    return strcmp(na, nb) == 0;
}

/* An output that exists and is no regular file: a device or a pipe, which
 * two outputs may share. */
static int shareable(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode);
}

static int given(const mr_path_use *u) {
    return u->path != NULL && u->path[0] != '\0';
}

mr_status mr_path_check_distinct(const mr_path_use *uses, size_t n, mr_error *err) {
    for (size_t i = 0; i < n; i++) {
        if (!uses[i].output || !given(&uses[i])) continue;
        for (size_t j = 0; j < n; j++) {
            if (j == i || !given(&uses[j]) || (uses[j].output && j < i)) continue;
            if (uses[j].output && shareable(uses[i].path)) continue;
            if (!mr_path_same(uses[i].path, uses[j].path)) continue;
            return mr_error_set(err, MR_ERR_USAGE,
                                "%s %s is also %s (%s): an output may not overwrite an input or "
                                "another output",
                                uses[i].opt, uses[i].path, uses[j].opt, uses[j].path);
        }
    }
    return MR_OK;
}
