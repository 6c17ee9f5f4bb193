/* keras_import.h: a model Keras saved (a .keras archive, or a .h5 with model_config) as the
 * model to train or evaluate.
 *
 * The architecture JSON (Sequential or Functional) and the compile config (optimizer and its
 * settings, loss with from_logits and label_smoothing, metrics) become the text of a .cfg,
 * which mr_config_parse then reads: every check of a .cfg applies, and a checkpoint keeps that
 * text as its model. Only what maps exactly is taken: a Keras class, argument or compile
 * setting without an exact counterpart here is refused, one line naming the layer (its name
 * and class) or the setting. Weights are not read here: models/keras.h's mr_keras_load reads
 * them from the same file. Relies on jansson (JSON), libzip (config.json of an archive) and
 * runtime/h5file.h (the attributes of a .h5). */
#ifndef MR_KERAS_IMPORT_H
#define MR_KERAS_IMPORT_H

#include "models/config.h"
#include "runtime/error.h"

MR_C_BEGIN

/* The Keras classes taken, comma-separated ("InputLayer, Dense, ..."), for messages and
 * --help. */
const char *mr_keras_import_classes(void);

/* 1 if path is a model Keras saved: a .keras archive, or an HDF5 file whose root has a
 * model_config attribute (and no /mirrored group: not one of our checkpoints). */
int mr_keras_import_is_model(const char *path);

/* The .cfg text (malloc'd, into *text) of a model's architecture JSON (model_config, or
 * config.json of an archive) and its compile config JSON (compile_config of config.json, or
 * a .h5's training_config; NULL: none, refused). `name` stands for the file in messages:
 * "NAME: layer 'lstm' (LSTM): not supported by mirrored (supported: ...)". MR_ERR_CONFIG for
 * what is refused, MR_ERR_DATA for JSON that is not a Keras model. */
mr_status mr_keras_import_text(const char *model_json, const char *compile_json, const char *name,
                               char **text, mr_error *err);

/* Reads path's architecture and compile config and parses the .cfg they make into cfg (free
 * with mr_config_free); relative paths resolve against path's folder. */
mr_status mr_keras_import_load(const char *path, mr_config *cfg, mr_error *err);

/* The model of a command line: a Keras model file (mr_keras_import_load) or a .cfg
 * (mr_config_load). */
mr_status mr_keras_import_config_load(const char *path, mr_config *cfg, mr_error *err);

MR_C_END

#endif
