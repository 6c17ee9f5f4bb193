/* mirrored_export: a mirrored checkpoint as a Keras 3 .keras archive.
 *
 *   mirrored_export CHECKPOINT.h5 OUT.keras
 *
 * The model is rebuilt from the .cfg text the checkpoint carries, its
 * weights and optimizer slots read, and the archive written as Keras 3.15
 * writes it (models/keras.h): a zip of three STORED entries in this order,
 * metadata.json, config.json (the Sequential, or the Functional of a
 * model with residual connections, with module keys, build and compile
 * configs) and model.weights.h5 (/layers/<group>/vars/<i>, the
 * optimizer's variables under /optimizer/vars). keras.models.load_model
 * reads it back with the optimizer state, so model.fit goes on from it.
 *
 * Relies on libzip for the zip container. Nothing half-written is left:
 * the weights go to a temporary HDF5 file beside OUT (runtime/h5file.h),
 * the zip to another temporary file there, fsynced and renamed over OUT
 * only when complete; both temporaries are removed on every path. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zip.h>

#include "backends/backends.h"
#include "models/keras.h"
#include "runtime/atomic_file.h"
#include "runtime/paths.h"
#include "strategies/checkpoint.h"
#include "launch/cli.h"

static const char *prog = "mirrored_export";

static void usage(FILE *out) {
    fprintf(out,
            "Usage: %s CHECKPOINT.h5 OUT.keras\n"
            "Write a mirrored checkpoint (mirrored_train --save, or a [net] checkpoint) as a\n"
            "Keras 3 archive: keras.models.load_model(\"OUT.keras\") gives the model with its\n"
            "weights and optimizer state. Its inputs are the training inputs after [data]\n"
            "scale (and standardize, which the archive does not carry).\n"
            "\n"
            "Options:\n"
            "  --help, --version\n"
            "\n"
            "Exit status: 0 success; 1 failure while running; 2 bad input.\n",
            prog);
}

/* The temporary files beside OUT: "OUT.tmp.<pid>" (the zip) and
 * "OUT.weights.<pid>.h5" (model.weights.h5 before it goes in). */
typedef struct export_paths {
    const char *checkpoint, *out;
    char zip_tmp[MR_PATH_MAX + 32];
    char weights_tmp[MR_PATH_MAX + 32];
} export_paths;

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Fails before any work if no file can be created beside OUT: the zip's
 * temporary is made now (runtime/atomic_file.h) and filled at the end. */
static mr_status check_writable(export_paths *p, mr_error *err) {
    return mr_atomic_path_begin(p->out, p->zip_tmp, sizeof p->zip_tmp, err);
}

/* Before any work: the checkpoint is a regular file (a FIFO or a device
 * would block or never end), and OUT is not the checkpoint. */
static mr_status check_paths(const export_paths *p, mr_error *err) {
    MR_CHECK(mr_path_check_regular(NULL, p->checkpoint, 0, err));
    const mr_path_use uses[] = {{"CHECKPOINT.h5", p->checkpoint, 0}, {"OUT.keras", p->out, 1}};
    return mr_path_check_distinct(uses, 2, err);
}

/* The model of the checkpoint: its .cfg (relative paths from the folder it
 * was read from; only the layers matter here), weights and optimizer slots. */
static mr_status load_model(const export_paths *p, mr_checkpoint *ck, mr_config *cfg, mr_model *m,
                            mr_backend *be, mr_error *err) {
    mr_error ck_err = {0};
    mr_status st = mr_checkpoint_load(p->checkpoint, ck, &ck_err);
    if (st == MR_ERR_DATA && strstr(ck_err.msg, "no /mirrored group"))
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: not a mirrored checkpoint (no /mirrored group): mirrored_export "
                            "needs the file mirrored_train --save writes",
                            p->checkpoint);
    if (st != MR_OK) return mr_error_set(err, st, "%s", ck_err.msg);
    char folder[MR_PATH_MAX];
    snprintf(folder, sizeof folder, "%s", ck->cfg_path);
    MR_CHECK(mr_config_parse(ck->cfg_text, ck->cfg_path, dirname(folder), cfg, err));
    MR_CHECK(mr_model_init(m, be, cfg, 1, 0, err));
    return mr_checkpoint_load_model(p->checkpoint, m, 1, err);
}

/* model.weights.h5 into p->weights_tmp (an atomic HDF5 write of its own). */
static mr_status write_weights(const export_paths *p, const mr_model *m, const mr_checkpoint *ck,
                               mr_error *err) {
    mr_h5 h;
    MR_CHECK(mr_h5_create(&h, p->weights_tmp, err));
    mr_status st = mr_keras_write_archive_weights(&h, m, ck->state.global_step, ck->lr, err);
    if (st != MR_OK) {
        mr_h5_discard(&h);
        return st;
    }
    return mr_h5_commit(&h, err);
}

static mr_status zip_failed(const export_paths *p, zip_t *za, zip_error_t *ze, mr_error *err) {
    mr_status st = mr_error_set(err, MR_ERR_IO, "%s: cannot write: %s", p->out,
                                zip_error_strerror(ze != NULL ? ze : zip_get_error(za)));
    if (ze != NULL) zip_error_fini(ze);
    return st;
}

/* Adds one entry, STORED, with Keras's permissions (0600) and date. */
static mr_status add_entry(const export_paths *p, zip_t *za, const char *name, zip_source_t *src,
                           time_t mtime, mr_error *err) {
    if (src == NULL) return zip_failed(p, za, NULL, err);
    zip_int64_t i = zip_file_add(za, name, src, ZIP_FL_ENC_UTF_8);
    if (i < 0) {
        zip_source_free(src);
        return zip_failed(p, za, NULL, err);
    }
    if (zip_set_file_compression(za, (zip_uint64_t)i, ZIP_CM_STORE, 0) != 0 ||
        zip_file_set_external_attributes(za, (zip_uint64_t)i, 0, ZIP_OPSYS_UNIX,
                                         (zip_uint32_t)0600 << 16) != 0 ||
        zip_file_set_mtime(za, (zip_uint64_t)i, mtime, 0) != 0)
        return zip_failed(p, za, NULL, err);
    return MR_OK;
}

/* The archive into p->zip_tmp (libzip writes it at zip_close), then
 * fsynced and renamed over OUT. */
static mr_status write_archive(const export_paths *p, const char *metadata, const char *config,
                               mr_error *err) {
    int zerr = 0;
    /* the temporary exists (empty) since check_writable: libzip replaces it */
    zip_t *za = zip_open(p->zip_tmp, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    if (za == NULL) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        return zip_failed(p, NULL, &ze, err);
    }
    /* the JSON entries carry the DOS epoch, as Keras's zf.open(name, "w") */
    struct tm dos_epoch = {.tm_year = 80, .tm_mon = 0, .tm_mday = 1, .tm_isdst = -1};
    time_t json_time = mktime(&dos_epoch), now = time(NULL);
    mr_status st = add_entry(p, za, "metadata.json",
                             zip_source_buffer(za, metadata, strlen(metadata), 0), json_time, err);
    if (st == MR_OK)
        st = add_entry(p, za, "config.json", zip_source_buffer(za, config, strlen(config), 0),
                       json_time, err);
    if (st == MR_OK)
        st = add_entry(p, za, "model.weights.h5", zip_source_file(za, p->weights_tmp, 0, -1), now,
                       err);
    if (st != MR_OK) {
        zip_discard(za);
        return st;
    }
    if (zip_close(za) != 0) {
        st = zip_failed(p, za, NULL, err);
        zip_discard(za);
        return st;
    }
    /* fsync, rename over OUT, fsync of the folder */
    return mr_atomic_path_commit(p->out, p->zip_tmp, err);
}

/* The weights and the archive, written after the paths were checked: a
 * failure now (a full disk) is one while running (exit 1). */
static mr_status write_outputs(const export_paths *p, const mr_model *m, const mr_checkpoint *ck,
                               const char *metadata, const char *config, mr_error *err) {
    mr_status st = write_weights(p, m, ck, err);
    if (st == MR_OK) st = write_archive(p, metadata, config, err);
    unlink(p->weights_tmp);
    if (st == MR_ERR_IO) err->status = st = MR_ERR_RUNTIME;
    return st;
}

/* metadata.json: {"keras_version": "3.15.1", "date_saved": "%Y-%m-%d@%H:%M:%S"} */
static void format_metadata(char *buf, size_t n) {
    time_t now = time(NULL);
    struct tm tm;
    char date[32];
    localtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", &tm);
    snprintf(buf, n, "{\"keras_version\": \"%s\", \"date_saved\": \"%s\"}", MR_KERAS_VERSION, date);
}

static mr_status parse(int argc, char **argv, export_paths *p, int *help, int *version,
                       mr_error *err) {
    *help = *version = 0;
    const char *pos[2];
    int n = 0, options = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && strcmp(a, "--") == 0) {
            options = 0;
        } else if (options && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            *help = 1;
            return MR_OK;
        } else if (options && strcmp(a, "--version") == 0) {
            *version = 1;
            return MR_OK;
        } else if (options && a[0] == '-' && a[1] != '\0') {
            return mr_error_set(err, MR_ERR_USAGE, "%s: unknown option (see --help)", a);
        } else if (n == 2) {
            return mr_error_set(
                err, MR_ERR_USAGE,
                "%s: unexpected argument (give one CHECKPOINT.h5 and one OUT.keras)", a);
        } else {
            pos[n++] = a;
        }
    }
    if (n < 2)
        return mr_error_set(err, MR_ERR_USAGE, "missing %s (usage: %s CHECKPOINT.h5 OUT.keras)",
                            n == 0 ? "CHECKPOINT.h5 and OUT.keras" : "OUT.keras", prog);
    p->checkpoint = pos[0];
    p->out = pos[1];
    if (!ends_with(p->out, ".keras") || strlen(p->out) == strlen(".keras") ||
        ends_with(p->out, "/.keras"))
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: the archive's name must end in .keras (Keras loads no other)",
                            p->out);
    if (strlen(p->out) >= MR_PATH_MAX)
        return mr_error_set(err, MR_ERR_USAGE, "%s: path too long", p->out);
    snprintf(p->weights_tmp, sizeof p->weights_tmp, "%s.weights.%d.h5", p->out, (int)getpid());
    return MR_OK;
}

int main(int argc, char **argv) {
    mr_error err = {0};
    export_paths p = {0};
    int help, version;
    mr_status st = parse(argc, argv, &p, &help, &version, &err);
    if (st == MR_OK && (help || version)) {
        if (help) usage(stdout);
        if (version) printf("mirrored %s\n", MR_VERSION);
        return MR_EXIT_OK;
    }
    if (st != MR_OK) return mr_cli_die(prog, &err);
    mr_checkpoint ck = {0};
    mr_config cfg = {0};
    mr_model m = {0};
    mr_backend *be = NULL; /* the model lives in host memory: a CPU context */
    char *config = NULL;
    char metadata[128];
    st = check_paths(&p, &err);
    if (st == MR_OK) st = check_writable(&p, &err);
    if (st == MR_OK) st = mr_backend_create(mr_backend_kind_cpu(), 0, &be, &err);
    if (st == MR_OK) st = load_model(&p, &ck, &cfg, &m, be, &err);
    if (st == MR_OK) {
        config = mr_keras_model_config(&m, MR_KERAS_ARCHIVE, ck.lr);
        if (config == NULL) st = mr_error_set(&err, MR_ERR_NOMEM, "out of memory");
    }
    if (st == MR_OK) {
        format_metadata(metadata, sizeof metadata);
        st = write_outputs(&p, &m, &ck, metadata, config, &err);
    }
    int rc = MR_EXIT_OK;
    if (st != MR_OK) {
        mr_atomic_path_abort(p.zip_tmp); /* OUT stays as it was */
        rc = mr_cli_die(prog, &err);
    } else {
        printf("%s: %d layers, %lld parameters, %s at update %lld", p.out, m.n_layers,
               (long long)(m.n_params + m.n_state), mr_optimizer_name(cfg.net.optimizer),
               (long long)ck.state.global_step);
        printf("; inputs are x * %g%s\n", (double)ck.scale,
               ck.mean != NULL ? " then standardised with the training statistics (not in the "
                                 "archive)"
                               : "");
    }
    free(config);
    mr_model_free(&m); /* safe on a model never initialised */
    if (be != NULL) mr_backend_destroy(be);
    mr_config_free(&cfg);
    mr_checkpoint_free(&ck);
    return rc;
}
