/* mirrored_export: a mirrored checkpoint as a Keras 3 .keras archive.
 *
 *   mirrored_export CHECKPOINT.h5 OUT.keras
 *
 * A client of the public API alone (include/mirrored.h), as
 * examples/fit.c is: mirrored_model_load reads the checkpoint (the model of
 * the .cfg text it carries, its weights and optimizer slots),
 * mirrored_model_save writes the archive as Keras 3.15 writes it
 * (metadata.json, config.json with the Sequential or the Functional,
 * model.weights.h5 with the optimizer's variables). keras.models.load_model
 * reads it back with the optimizer state, so model.fit goes on from it.
 * Nothing half-written is left: OUT is replaced only by a complete
 * archive. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "include/mirrored.h"

static const char *prog = "mirrored_export";

enum { EXIT_BAD_INPUT = 2 };

static void usage(FILE *out) {
    fprintf(out,
            "Usage: %s CHECKPOINT.h5 OUT.keras\n"
            "Write a mirrored checkpoint (mirrored_train --save, or a [net] checkpoint) as a\n"
            "Keras 3 archive: keras.models.load_model(\"OUT.keras\") gives the model with its\n"
            "weights and optimizer state. It takes the raw inputs: a [data] scale is a\n"
            "Rescaling layer after the input (standardize the archive does not carry).\n"
            "\n"
            "Options:\n"
            "  --help, --version\n"
            "\n"
            "Exit status: 0 success; 1 failure while running; 2 bad input.\n",
            prog);
}

typedef struct export_paths {
    const char *checkpoint, *out;
} export_paths;

/* One line on stderr; the exit code of the status (2: bad input). */
static int fail(const mirrored_error *err) {
    fprintf(stderr, "%s: %s\n", prog, err->message);
    switch (err->status) {
    case MIRRORED_ERR_USAGE:
    case MIRRORED_ERR_CONFIG:
    case MIRRORED_ERR_IO:
    case MIRRORED_ERR_NOT_FOUND:
    case MIRRORED_ERR_DATA:
    case MIRRORED_ERR_UNSUPPORTED:
        return EXIT_BAD_INPUT;
    default:
        return EXIT_FAILURE;
    }
}

/* err = status and a formatted line; returns the status */
static mirrored_status say(mirrored_error *err, mirrored_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mirrored_status say(mirrored_error *err, mirrored_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return err->status = st;
}

/* "a FIFO", "a character device", ... for a file that is not a regular one */
static const char *kind_of(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISDIR(mode)) return "a folder";
    return "not a regular file";
}

/* Before any work: the checkpoint is a regular file (a FIFO or a device
 * would block or never end), OUT is not the checkpoint, and a file can be
 * created beside OUT (the temporary an atomic write makes). */
static mirrored_status check_paths(const export_paths *p, mirrored_error *err) {
    struct stat in, out;
    if (stat(p->checkpoint, &in) == 0 && !S_ISREG(in.st_mode))
        return say(err, MIRRORED_ERR_IO, "%s: not a regular file (%s)", p->checkpoint,
                   kind_of(in.st_mode));
    const int out_exists = stat(p->out, &out) == 0;
    if (out_exists && stat(p->checkpoint, &in) == 0 && in.st_dev == out.st_dev &&
        in.st_ino == out.st_ino)
        return say(err, MIRRORED_ERR_USAGE,
                   "OUT.keras %s is also CHECKPOINT.h5 (%s): an output may not overwrite an "
                   "input or another output",
                   p->out, p->checkpoint);
    if (out_exists && S_ISDIR(out.st_mode))
        return say(err, MIRRORED_ERR_IO, "%s: cannot write: %s", p->out, strerror(EISDIR));
    if (out_exists && !S_ISREG(out.st_mode))
        return say(err, MIRRORED_ERR_IO, "%s: cannot write: not a regular file (%s)", p->out,
                   kind_of(out.st_mode));
    char tmp[8192];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", p->out, (int)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return say(err, MIRRORED_ERR_IO, "%s: cannot write: %s", p->out, strerror(errno));
    close(fd);
    unlink(tmp);
    return MIRRORED_OK;
}

/* The checkpoint's model (only a checkpoint: a .cfg or a model Keras saved
 * is no checkpoint to export). */
static mirrored_status load(const export_paths *p, mirrored_model **m, mirrored_model_info *info,
                            mirrored_error *err) {
    static const char need[] = "mirrored_export needs the file mirrored_train --save writes";
    mirrored_status st = mirrored_model_load(p->checkpoint, m, err);
    if (st == MIRRORED_ERR_DATA && strstr(err->message, "no /mirrored group"))
        return say(err, st, "%s: not a mirrored checkpoint (no /mirrored group): %s", p->checkpoint,
                   need);
    if (st == MIRRORED_OK) st = mirrored_model_get_info(*m, info, err);
    if (st == MIRRORED_OK && strcmp(info->source, "checkpoint") != 0)
        return say(err, MIRRORED_ERR_DATA, "%s: not a mirrored checkpoint (a %s model): %s",
                   p->checkpoint, info->source, need);
    return st;
}

static mirrored_status parse(int argc, char **argv, export_paths *p, int *help, int *version,
                             mirrored_error *err) {
    *help = *version = 0;
    const char *pos[2];
    int n = 0, options = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && strcmp(a, "--") == 0) {
            options = 0;
        } else if (options && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            *help = 1;
            return MIRRORED_OK;
        } else if (options && strcmp(a, "--version") == 0) {
            *version = 1;
            return MIRRORED_OK;
        } else if (options && a[0] == '-' && a[1] != '\0') {
            return say(err, MIRRORED_ERR_USAGE, "%s: unknown option (see --help)", a);
        } else if (n == 2) {
            return say(err, MIRRORED_ERR_USAGE,
                       "%s: unexpected argument (give one CHECKPOINT.h5 and one OUT.keras)", a);
        } else {
            pos[n++] = a;
        }
    }
    if (n < 2)
        return say(err, MIRRORED_ERR_USAGE, "missing %s (usage: %s CHECKPOINT.h5 OUT.keras)",
                   n == 0 ? "CHECKPOINT.h5 and OUT.keras" : "OUT.keras", prog);
    p->checkpoint = pos[0];
    p->out = pos[1];
    const char *slash = strrchr(p->out, '/'), *base = slash ? slash + 1 : p->out;
    const size_t len = strlen(p->out), blen = strlen(base);
    if (blen <= 6 || strcmp(base + blen - 6, ".keras") != 0)
        return say(err, MIRRORED_ERR_USAGE,
                   "%s: the archive's name must end in .keras (Keras loads no other)", p->out);
    if (len >= 4096) return say(err, MIRRORED_ERR_USAGE, "%s: path too long", p->out);
    return MIRRORED_OK;
}

int main(int argc, char **argv) {
    mirrored_error err = {0};
    export_paths p = {0};
    int help, version;
    mirrored_status st = parse(argc, argv, &p, &help, &version, &err);
    if (st == MIRRORED_OK && (help || version)) {
        if (help) usage(stdout);
        if (version) printf("mirrored %s\n", mirrored_version());
        return EXIT_SUCCESS;
    }
    if (st != MIRRORED_OK) return fail(&err);
    mirrored_model *m = NULL;
    mirrored_model_info info;
    st = check_paths(&p, &err);
    if (st == MIRRORED_OK) st = load(&p, &m, &info, &err);
    if (st == MIRRORED_OK) {
        /* the paths were checked: a failure now (a full disk) is one while
         * running (exit 1); OUT stays as it was */
        st = mirrored_model_save(m, p.out, &err);
        if (st == MIRRORED_ERR_IO) err.status = st = MIRRORED_ERR_RUNTIME;
    }
    int rc = EXIT_SUCCESS;
    if (st != MIRRORED_OK) {
        rc = fail(&err);
    } else {
        printf("%s: %d layers, %lld parameters, %s at update %lld", p.out, info.layers,
               (long long)info.params, info.optimizer, (long long)info.updates);
        printf("; inputs are x * %g%s\n", info.scale,
               info.standardized ? " then standardised with the training statistics (not in the "
                                   "archive)"
                                 : "");
    }
    mirrored_model_destroy(m);
    mirrored_finalize();
    return rc;
}
