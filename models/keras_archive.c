/* keras_archive.c: a model as a Keras 3 .keras archive (keras_archive.h).
 *
 * The JSON entries and the weights file come from models/keras.h; this
 * file puts them into the zip as Keras's saving_lib does (zipfile, STORED,
 * the JSON entries dated at the DOS epoch, permissions 0600). */
#include "models/keras_archive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zip.h>

#include "models/keras.h"
#include "runtime/atomic_file.h"

/* The temporaries beside the target: "PATH.tmp.<pid>" (the zip) and
 * "PATH.weights.<pid>.h5" (model.weights.h5 before it goes in). */
typedef struct archive_paths {
    const char *out;
    char zip_tmp[MR_ATOMIC_PATH_MAX + 32];
    char weights_tmp[MR_ATOMIC_PATH_MAX + 32];
} archive_paths;

int mr_keras_archive_named(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base), k = strlen(".keras");
    return n > k && strcmp(base + n - k, ".keras") == 0;
}

/* model.weights.h5 into p->weights_tmp (an atomic HDF5 write of its own). */
static mr_status write_weights(const archive_paths *p, const mr_model *m, mr_keras_form form,
                               int64_t step, float lr, mr_error *err) {
    mr_h5 h;
    MR_CHECK(mr_h5_create(&h, p->weights_tmp, err));
    mr_status st = mr_keras_write_archive_weights_as(&h, m, form, step, lr, err);
    if (st != MR_OK) {
        mr_h5_discard(&h);
        return st;
    }
    return mr_h5_commit(&h, err);
}

static mr_status zip_failed(const archive_paths *p, zip_t *za, zip_error_t *ze, mr_error *err) {
    mr_status st = mr_error_set(err, MR_ERR_IO, "%s: cannot write: %s", p->out,
                                zip_error_strerror(ze != NULL ? ze : zip_get_error(za)));
    if (ze != NULL) zip_error_fini(ze);
    return st;
}

/* Adds one entry, STORED, with Keras's permissions (0600) and date. */
static mr_status add_entry(const archive_paths *p, zip_t *za, const char *name, zip_source_t *src,
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

/* The three entries into p->zip_tmp (libzip writes it at zip_close). */
static mr_status write_zip(const archive_paths *p, const char *metadata, const char *config,
                           mr_error *err) {
    int zerr = 0;
    /* the temporary exists (empty) since mr_atomic_path_begin: libzip replaces it */
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
    if (st == MR_OK && zip_close(za) != 0) st = zip_failed(p, za, NULL, err);
    if (st != MR_OK) zip_discard(za);
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

mr_status mr_keras_archive_save(const char *path, const mr_model *m, int64_t step, float lr,
                                mr_error *err) {
    return mr_keras_archive_save_as(path, m, MR_KERAS_ARCHIVE, step, lr, err);
}

mr_status mr_keras_archive_save_as(const char *path, const mr_model *m, mr_keras_form form,
                                   int64_t step, float lr, mr_error *err) {
    archive_paths p = {.out = path};
    if (strlen(path) >= MR_ATOMIC_PATH_MAX)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot write: path too long", path);
    snprintf(p.weights_tmp, sizeof p.weights_tmp, "%s.weights.%d.h5", path, (int)getpid());
    char *config = mr_keras_model_config(m, form, lr);
    if (config == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
    char metadata[128];
    format_metadata(metadata, sizeof metadata);
    mr_status st = mr_atomic_path_begin(path, p.zip_tmp, sizeof p.zip_tmp, err);
    if (st == MR_OK) st = write_weights(&p, m, form, step, lr, err);
    if (st == MR_OK) st = write_zip(&p, metadata, config, err);
    unlink(p.weights_tmp);
    /* fsync, rename over the target, fsync of the folder */
    if (st == MR_OK)
        st = mr_atomic_path_commit(path, p.zip_tmp, err);
    else
        mr_atomic_path_abort(p.zip_tmp);
    free(config);
    return st;
}
