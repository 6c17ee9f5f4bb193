/* session_model.c: the one loader of a model (session_model.h). */
#include "session/session_model.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "models/keras.h"
#include "models/keras_import.h"
#include "session/session_checkpoints.h"

/* A checkpoint read: its .cfg text, parsed with data paths from the folder
 * the .cfg was read from. */
static mr_status checkpoint_config(const mr_checkpoint *ck, mr_config *cfg, mr_error *err) {
    char folder[MR_PATH_MAX];
    snprintf(folder, sizeof folder, "%s", ck->cfg_path);
    return mr_config_parse(ck->cfg_text, ck->cfg_path, dirname(folder), cfg, err);
}

mr_status mr_session_open(const char *path, int kinds, mr_config *cfg, mr_checkpoint *ck,
                          mr_session_source *source, mr_error *err) {
    struct stat st;
    if (stat(path, &st) != 0)
        return mr_error_set(err, errno == ENOENT ? MR_ERR_NOT_FOUND : MR_ERR_IO,
                            "%s: cannot open: %s", path,
                            errno == ENOENT ? "no such file" : strerror(errno));
    if (!S_ISREG(st.st_mode))
        return mr_error_set(err, MR_ERR_IO, "%s: a %s, not a model file (.cfg, .keras, .h5)", path,
                            S_ISDIR(st.st_mode) ? "folder" : "special file");
    mr_error ck_err = {0};
    mr_status ck_st = MR_ERR_DATA;
    if (kinds & MR_SESSION_OPEN_CKPT) {
        ck_st = mr_checkpoint_load(path, ck, &ck_err);
        if (ck_st == MR_OK) {
            *source = MR_SESSION_SOURCE_CKPT;
            return checkpoint_config(ck, cfg, err);
        }
        mr_checkpoint_free(ck);
    }
    const int keras = mr_keras_import_is_model(path);
    if (keras && (kinds & MR_SESSION_OPEN_KERAS)) {
        *source = MR_SESSION_SOURCE_KERAS;
        return mr_keras_import_load(path, cfg, err);
    }
    /* an HDF5 file of weights alone: no .cfg to parse it as */
    if (!keras && (kinds & MR_SESSION_OPEN_CKPT) && strstr(ck_err.msg, "no /mirrored group"))
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: not a mirrored checkpoint (no /mirrored group), nor a model "
                            "Keras saved (no model_config)",
                            path);
    if (!(kinds & MR_SESSION_OPEN_CFG)) return mr_error_set(err, ck_st, "%s", ck_err.msg);
    *source = MR_SESSION_SOURCE_CFG;
    return mr_keras_import_config_load(path, cfg, err);
}

mr_status mr_session_first_weights(const char *path, mr_session_source source,
                                   const mr_checkpoint *ck, const mr_config *cfg, mr_model *m,
                                   int *loaded, mr_error *err) {
    *loaded = source != MR_SESSION_SOURCE_CFG;
    if (source == MR_SESSION_SOURCE_CKPT)
        return mr_checkpoint_load_model(path, m, mr_ckpt_compare_cfg(ck, cfg, NULL, 0), err);
    if (source == MR_SESSION_SOURCE_KERAS) return mr_keras_load(path, m, 0, NULL, err);
    return MR_OK;
}
