/* session_data.h: the data a run reads before it builds its replicas: the
 * .cfg's [data] (or synthetic examples), checked against the model, with
 * the preprocessing set. Relies on runtime/dataset.h. */
#ifndef MR_SESSION_DATA_H
#define MR_SESSION_DATA_H

#include <stdint.h>

#include "models/config.h"
#include "runtime/dataset.h"
#include "session/session_events.h"

/* The .cfg's [data]: the training set in train (with [data] val_images'
 * rows appended after its *n_train training rows, else the last
 * validation_split fraction held out), the test set in test (n 0 when the
 * .cfg names none), each checked against the model (in_size values per
 * example, `classes` outputs, label_width labels, float targets for a
 * regression); scale and standardize (the training rows' statistics) set. */
mr_status mr_session_load_data(const mr_config *cfg, int64_t in_size, int classes, int label_width,
                               int regression, mr_dataset *train, mr_dataset *test,
                               int64_t *n_train, mr_error *err);

/* --synthetic: n random examples of the model's input shape and classes,
 * the same on every process (keyed by the seed); no test set.
 * validation_split, scale and standardize apply as to files. */
mr_status mr_session_synthetic_data(const mr_config *cfg, int64_t n, int classes, int label_width,
                                    int regression, mr_dataset *train, int64_t *n_train,
                                    const mr_session_words *words, mr_error *err);

/* One set of [data] (`set`: "train", "val" or "test", for messages):
 * images and labels read as mr_session_load_data reads them and checked
 * against the model; no preprocessing set. */
mr_status mr_session_load_set(const mr_config *cfg, const char *set, const char *images,
                              const char *labels, int64_t in_size, int classes, int label_width,
                              int regression, mr_dataset *ds, mr_error *err);

/* [augment] of cfg (flip, shift; keyed by [net] seed) on an image input:
 * *aug filled; an input that is no image (H,W,C) is MR_ERR_CONFIG naming
 * `name` (the model's file) and the section's line. */
mr_status mr_session_augment(const mr_config *cfg, const char *name, mr_augment *aug,
                             mr_error *err);

#endif
