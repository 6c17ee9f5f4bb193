/* atomic_file.c: temporary file, fsync, rename, fsync of the folder (atomic_file.h). */
#include "runtime/atomic_file.h"
#include "runtime/paths.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "PATH: cannot write: <strerror(e)>", or without the reason when none is known. */
static mr_status write_failed(const char *path, int e, mr_error *err) {
    if (e == 0) return mr_error_set(err, MR_ERR_IO, "%s: cannot write", path);
    return mr_error_set(err, MR_ERR_IO, "%s: cannot write: %s", path, strerror(e));
}

/* target + ".tmp.<pid>" into tmp[n]; 0, or -1 if it does not fit. */
static int tmp_name(const char *target, char *tmp, size_t n) {
    int len = snprintf(tmp, n, "%s.tmp.%d", target, (int)getpid());
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* Creates (truncates) the temporary for target; the fd, or -1 (err filled, tmp ""). */
static int create_tmp(const char *target, char *tmp, size_t n, mr_error *err) {
    struct stat sb;
    if (target[0] == '\0' || strlen(target) >= MR_ATOMIC_PATH_MAX || tmp_name(target, tmp, n)) {
        if (n > 0) tmp[0] = '\0';
        write_failed(target, target[0] == '\0' ? ENOENT : ENAMETOOLONG, err);
        return -1;
    }
    if (stat(target, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        tmp[0] = '\0';
        write_failed(target, EISDIR, err);
        return -1;
    }
    if (stat(target, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        /* a device or a pipe cannot be renamed over: the path form refuses it */
        tmp[0] = '\0';
        mr_error_set(err, MR_ERR_IO, "%s: cannot write: not a regular file (%s)", target,
                     mr_path_kind(sb.st_mode));
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        write_failed(target, errno, err);
        tmp[0] = '\0';
    }
    return fd;
}

/* fsync of the folder that holds path, so that the rename survives a crash. */
static mr_status sync_folder(const char *path, mr_error *err) {
    char *copy = strdup(path);
    if (copy == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int bad = fd < 0 || fsync(fd) != 0;
    int e = errno;
    if (fd >= 0) close(fd);
    free(copy);
    if (bad)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot sync its folder: %s", path, strerror(e));
    return MR_OK;
}

/* Renames tmp over target (removing tmp if that fails), then syncs the folder. */
static mr_status rename_into_place(const char *target, const char *tmp, mr_error *err) {
    if (rename(tmp, target) != 0) {
        int e = errno;
        unlink(tmp);
        return write_failed(target, e, err);
    }
    return sync_folder(target, err);
}

/* A target that exists and is no regular file or folder (/dev/null,
 * /dev/stdout, a pipe): written in place, as a stream. */
static int is_stream(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode);
}

mr_status mr_atomic_file_open(mr_atomic_file *af, const char *path, mr_error *err) {
    af->f = NULL;
    snprintf(af->path, sizeof af->path, "%s", path);
    if (is_stream(path)) {
        af->tmp[0] = '\0';
        af->f = fopen(path, "w");
        return af->f ? MR_OK : write_failed(path, errno, err);
    }
    int fd = create_tmp(path, af->tmp, sizeof af->tmp, err);
    if (fd < 0) return MR_ERR_IO;
    af->f = fdopen(fd, "w");
    if (af->f == NULL) {
        int e = errno;
        close(fd);
        unlink(af->tmp);
        af->tmp[0] = '\0';
        return write_failed(path, e, err);
    }
    return MR_OK;
}

mr_status mr_atomic_file_commit(mr_atomic_file *af, mr_error *err) {
    MR_ASSERT(af->f != NULL);
    FILE *f = af->f;
    af->f = NULL;
    /* errno of the failing call; 0 if only an earlier write failed (its errno is gone) */
    errno = 0;
    int bad = fflush(f) != 0 || ferror(f);
    const int stream = af->tmp[0] == '\0'; /* no temporary, no fsync: a device or a pipe */
    if (!bad && !stream) bad = fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) bad = 1, e = errno;
    if (bad && !stream) unlink(af->tmp);
    if (bad) {
        af->tmp[0] = '\0';
        return write_failed(af->path, e, err);
    }
    if (stream) return MR_OK;
    mr_status st = rename_into_place(af->path, af->tmp, err);
    af->tmp[0] = '\0';
    return st;
}

void mr_atomic_file_abort(mr_atomic_file *af) {
    if (af->f != NULL) fclose(af->f);
    af->f = NULL;
    if (af->tmp[0] != '\0') unlink(af->tmp);
    af->tmp[0] = '\0';
}

mr_status mr_atomic_path_begin(const char *target, char *tmp, size_t n, mr_error *err) {
    int fd = create_tmp(target, tmp, n, err);
    if (fd < 0) return MR_ERR_IO;
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        tmp[0] = '\0';
        return write_failed(target, e, err);
    }
    return MR_OK;
}

mr_status mr_atomic_path_commit(const char *target, const char *tmp, mr_error *err) {
    int fd = open(tmp, O_RDONLY | O_CLOEXEC);
    int bad = fd < 0 || fsync(fd) != 0;
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && !bad) bad = 1, e = errno;
    if (bad) {
        unlink(tmp);
        return write_failed(target, e, err);
    }
    return rename_into_place(target, tmp, err);
}

void mr_atomic_path_abort(const char *tmp) {
    if (tmp != NULL && tmp[0] != '\0') unlink(tmp);
}

/* The writer's pid of a temporary's name "NAME.tmp.<pid>" (NAME cut off at
 * the ".tmp." into target[n]), or 0 if it is not one. */
static long tmp_writer(const char *name, char *target, size_t n) {
    const char *at = NULL;
    for (const char *p = strstr(name, ".tmp."); p != NULL; p = strstr(p + 1, ".tmp."))
        at = p; /* the last one: NAME may hold ".tmp." itself */
    if (at == NULL || at == name) return 0;
    const char *digits = at + 5;
    if (*digits == '\0' || strspn(digits, "0123456789") != strlen(digits) || strlen(digits) > 9)
        return 0;
    if ((size_t)(at - name) >= n) return 0;
    snprintf(target, n, "%.*s", (int)(at - name), name);
    return atol(digits);
}

mr_status mr_atomic_remove_stale(const char *dir, mr_atomic_target_fn is_target, void *user,
                                 int *removed, char *first, size_t n, mr_error *err) {
    DIR *d = opendir(dir);
    if (d == NULL && errno == ENOENT) return MR_OK;
    if (d == NULL) return mr_error_set(err, MR_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    mr_status st = MR_OK;
    struct dirent *e;
    while (st == MR_OK && (e = readdir(d)) != NULL) {
        char target[MR_ATOMIC_PATH_MAX], path[2 * MR_ATOMIC_PATH_MAX];
        const long pid = tmp_writer(e->d_name, target, sizeof target);
        if (pid <= 0 || !is_target(target, user)) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to ask */
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0 && errno != ENOENT) {
            st = mr_error_set(err, MR_ERR_IO, "%s: cannot delete: %s", path, strerror(errno));
            break;
        }
        if (*removed == 0 && first != NULL && n > 0 && first[0] == '\0')
            snprintf(first, n, "%s", path);
        (*removed)++;
    }
    closedir(d);
    return st;
}

mr_status mr_atomic_check_writable(const char *opt, const char *path, mr_error *err) {
    if (path == NULL) return MR_OK;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return mr_error_set(err, MR_ERR_IO, "%s %s: cannot write: Is a directory", opt, path);
    /* a device or a pipe is written in place (an HDF5 file must be regular) */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) return MR_OK;
    /* the temporary an atomic write of path would make (runtime/atomic_file.h) */
    char tmp[4200];
    mr_error why = {0};
    if (mr_atomic_path_begin(path, tmp, sizeof tmp, &why) != MR_OK)
        return mr_error_set(err, MR_ERR_IO, "%s %s", opt, why.msg);
    mr_atomic_path_abort(tmp);
    return MR_OK;
}
