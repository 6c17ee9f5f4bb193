/* train_data.h: --write-data, the training and test examples as the model
 * sees them, into one HDF5 file a later job trains on, and the [data] lines
 * that train on it, printed. Relies on runtime/dataset.h (the examples,
 * preprocessed) and runtime/h5file.h. */
#ifndef MR_TRAIN_DATA_H
#define MR_TRAIN_DATA_H

#include "models/config.h"
#include "runtime/dataset.h"

/* --write-data: the examples as the model sees them (scaled, standardised),
 * float32, with their labels, for a later job to read with scale = 1 and no
 * standardize: a CPU job and a GPU job then train on the same bits. With
 * [data] val_images, train's rows [0, n_train) are the training set and
 * the rest the validation set (mr_dataset_append), written apart. */
mr_status mr_train_write_data(const char *path, const mr_config *cfg, const mr_dataset *train,
                              int64_t n_train, const mr_dataset *test, mr_error *err);

#endif
