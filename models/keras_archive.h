/* keras_archive.h: a model written as a Keras 3 .keras archive.
 *
 * The archive is what Keras 3.15's model.save("m.keras") writes: a zip of
 * three STORED entries in this order, metadata.json (keras_version,
 * date_saved), config.json (the Sequential, or the Functional of a graph,
 * with module keys, build and compile configs: models/keras.h's
 * mr_keras_model_config) and model.weights.h5 (/layers/<group>/vars/<i>,
 * the optimizer's variables under /optimizer/vars).
 * keras.models.load_model reads it back with the optimizer state, and
 * models/keras_import.h reads it as a model to train.
 *
 * Written atomically (runtime/atomic_file.h): the weights go to a temporary
 * HDF5 file beside the target, the zip to another temporary there, fsynced
 * and renamed over the target only when complete; both temporaries are
 * removed on every path. Relies on libzip. */
#ifndef MR_KERAS_ARCHIVE_H
#define MR_KERAS_ARCHIVE_H

#include <stdint.h>

#include "models/keras.h"
#include "models/model.h"

MR_C_BEGIN

/* 1 when path names a .keras archive: its file name ends in ".keras" after
 * at least one other character. */
int mr_keras_archive_named(const char *path);

/* Writes m as the archive `path` (its name need not end in .keras): step
 * is the optimizer's iteration, lr the learning rate recorded in the
 * compile config and the optimizer's variables. A write that fails leaves
 * path as it was (MR_ERR_IO, naming path). */
mr_status mr_keras_archive_save(const char *path, const mr_model *m, int64_t step, float lr,
                                mr_error *err);

/* The same as an archive of `form` (models/keras.h): MR_KERAS_ARCHIVE_SCALED
 * puts the .cfg's [data] scale in the file as a Rescaling layer after the
 * input, so the file takes the raw inputs (the public API's save). */
mr_status mr_keras_archive_save_as(const char *path, const mr_model *m, mr_keras_form form,
                                   int64_t step, float lr, mr_error *err);

MR_C_END

#endif
