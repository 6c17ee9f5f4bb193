/* session_model.h: the one loader of a model, for every face: a mirrored
 * checkpoint (its .cfg text, its weights and optimizer state), a model
 * Keras saved (.keras, or an .h5 with its architecture; its weights), or a
 * .cfg (file or text; the seed's weights); and a model's first weights.
 * Relies on strategies/checkpoint.h and models/keras_import.h. */
#ifndef MR_SESSION_MODEL_H
#define MR_SESSION_MODEL_H

#include "models/config.h"
#include "models/model.h"
#include "strategies/checkpoint.h"

/* Where a model (and its first weights) comes from. */
typedef enum mr_session_source {
    MR_SESSION_SOURCE_CFG,   /* a .cfg: the seed's weights */
    MR_SESSION_SOURCE_KERAS, /* a model Keras saved: its weights */
    MR_SESSION_SOURCE_CKPT,  /* a mirrored checkpoint: its weights and optimizer slots */
} mr_session_source;

/* The kinds of file a face opens (or-ed). */
enum {
    MR_SESSION_OPEN_CFG = 1 << MR_SESSION_SOURCE_CFG,
    MR_SESSION_OPEN_KERAS = 1 << MR_SESSION_SOURCE_KERAS,
    MR_SESSION_OPEN_CKPT = 1 << MR_SESSION_SOURCE_CKPT,
    MR_SESSION_OPEN_ANY = MR_SESSION_OPEN_CFG | MR_SESSION_OPEN_KERAS | MR_SESSION_OPEN_CKPT,
};

/* Opens path as the first of `kinds` it is: a checkpoint (into *ck, free
 * with mr_checkpoint_free; its .cfg parsed with data paths from the folder
 * it was read from), a Keras model file, else a .cfg; cfg filled (free
 * with mr_config_free), *source says which. ck may be NULL without
 * MR_SESSION_OPEN_CKPT. A missing file is MR_ERR_NOT_FOUND "PATH: cannot open: no such file";
 * an HDF5 file that is neither ours nor Keras's, MR_ERR_DATA "PATH: not a
 * mirrored checkpoint ..."; without MR_SESSION_OPEN_CFG, a file that is
 * no checkpoint is the checkpoint reader's error. */
mr_status mr_session_open(const char *path, int kinds, mr_config *cfg, mr_checkpoint *ck,
                          mr_session_source *source, mr_error *err);

/* The first weights of a model opened from path (source, ck and cfg as
 * mr_session_open gave them) into m, replica 0 of a run: a checkpoint's
 * (with its optimizer slots where the optimizer is the same,
 * mr_ckpt_compare_cfg), a Keras file's; a .cfg's are the seed's, there
 * already. *loaded: 1 where they were read (the replicas take them). */
mr_status mr_session_first_weights(const char *path, mr_session_source source,
                                   const mr_checkpoint *ck, const mr_config *cfg, mr_model *m,
                                   int *loaded, mr_error *err);

#endif
