/* train_data.h: the command line's data and fit options applied to the .cfg
 * (--data F.npz, --batch-size, --validation-split, --epochs, --seed) with
 * [data]'s whole .npz archives named member by member; and --write-data,
 * the training and test examples as the model sees them, into one HDF5 file
 * a later job trains on, and the [data] lines that train on it, printed.
 * Relies on session/session_overrides.h, runtime/dataset.h (the examples,
 * preprocessed) and runtime/h5file.h. */
#ifndef MR_TRAIN_DATA_H
#define MR_TRAIN_DATA_H

#include <stdio.h>

#include "launch/train_options.h"
#include "models/config.h"
#include "runtime/dataset.h"

/* The options of `c` that change the .cfg, applied to cfg after it is read:
 *   --epochs, --seed          [net] epochs, seed
 *   --batch-size N            [net] global_batch = N (Keras's batch_size: the global batch)
 *   --validation-split F      [net] validation_split = F (refused beside [data] val_images)
 *   --data F.npz              [data] train from F's x_train/y_train, test from x_test/y_test
 *                             (none when the archive lacks them: a line to `say` says so),
 *                             no val_images
 * then a set's images naming a whole .npz take its x_<set> and y_<set>: the command line's
 * face of mr_session_apply_overrides (session/session_overrides.h), a refusal in flag names.
 * `say` NULL: silent. A wrong value or archive is one line naming the option or file. */
mr_status mr_train_apply_options(const mr_train_options *c, mr_config *cfg, FILE *say,
                                 mr_error *err);

/* --write-data: the examples as the model sees them (scaled, standardised),
 * float32, with their labels, for a later job to read with scale = 1 and no
 * standardize: a CPU job and a GPU job then train on the same bits. With
 * [data] val_images, train's rows [0, n_train) are the training set and
 * the rest the validation set (mr_dataset_append), written apart. */
mr_status mr_train_write_data(const char *path, const mr_config *cfg, const mr_dataset *train,
                              int64_t n_train, const mr_dataset *test, mr_error *err);

#endif
