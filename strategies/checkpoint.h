/* checkpoint.h: a training checkpoint in one HDF5 file.
 *
 * The model in Keras's legacy .h5 layout (models/keras.h: model_config,
 * /model_weights, /optimizer_weights with the optimizer's slots under
 * Keras's names), so keras.models.load_model and h5py read it; and a group
 * /mirrored with the rest of what resuming exactly needs: the .cfg text and
 * where it was read, the replica and process counts, the global batch and
 * seed, where the fit stood (epoch, updates in it, position in its order,
 * update count, the epoch's partial sums and time), the metrics of every
 * finished epoch, the learning rate, and the preprocessing (scale,
 * per-feature mean and 1/std). The random streams are counter-based
 * (Philox keyed by seed, epoch, step and sample), so the seed and the
 * counters are their whole state. Written through a temporary file renamed
 * into place (runtime/h5file.h): a crash leaves the previous file whole;
 * with CRC32C checksums of the whole file and of every dataset, checked on
 * every load (runtime/h5file.h), so a damaged file is refused naming the
 * damaged dataset. */
#ifndef MR_CHECKPOINT_H
#define MR_CHECKPOINT_H

#include <stdio.h>

#include "models/config.h"
#include "models/model.h"
#include "strategies/strategy.h"

/* Why the run that wrote a checkpoint ended (/mirrored/ended/reason:
 * "epochs", "early_stopping", "max_steps"). */
typedef enum mr_run_end {
    MR_RUN_END_NONE,       /* not recorded: mid-run, a stop, or a file from before the record */
    MR_RUN_END_EPOCHS,     /* its epochs done */
    MR_RUN_END_EARLY_STOP, /* early stopping */
    MR_RUN_END_MAX_STEPS,  /* --max-steps reached */
} mr_run_end;

/* Where a run ended: why, the epochs finished, the updates into the next
 * epoch and the update count (a mr_fit_state's epoch, step, global_step). */
typedef struct mr_checkpoint_end {
    mr_run_end why;
    int epoch;
    int64_t step, global_step;
} mr_checkpoint_end;

typedef struct mr_checkpoint {
    char *cfg_text;             /* the .cfg as trained (malloc'd on load) */
    char cfg_path[MR_PATH_MAX]; /* where it was read: relative data paths start there */
    int replicas, processes;    /* of the run that wrote it */
    int global_batch;
    int64_t seed;
    float lr;              /* learning rate at the checkpoint */
    mr_fit_state state;    /* history malloc'd on load */
    float scale;           /* preprocessing: x * scale, then (x - mean) * inv_std */
    int64_t row;           /* features per example (mean, inv_std lengths) */
    float *mean, *inv_std; /* NULL without standardisation */
    /* seconds the run's save before this one took (0: none before it): what
     * a resumed run expects a save of this model to take (--stop-budget) */
    double previous_save_s;
    /* the classes' names, one per line in label order (an image folder's class folders;
     * /mirrored/class_names), or NULL: none known (older files have none) */
    char *class_names;
    /* training examples an epoch went over (0: not recorded): a resumed
     * run on other data says so */
    int64_t train_examples;
    /* the run's end, in the files written once it ended (its --save file,
     * its last checkpoint, save_best_only's file, whose state is the best
     * epoch's and older than the end): /mirrored/ended, optional */
    mr_checkpoint_end ended;
} mr_checkpoint;

/* "epochs", "early_stopping", "max_steps" ("" for MR_RUN_END_NONE). */
const char *mr_run_end_name(mr_run_end why);

/* Writes model m (weights and optimizer slots) and c to path. */
mr_status mr_checkpoint_save(const char *path, const mr_model *m, const mr_checkpoint *c,
                             mr_error *err);

/* Reads /mirrored of path into c (free with mr_checkpoint_free). */
mr_status mr_checkpoint_load(const char *path, mr_checkpoint *c, mr_error *err);

/* Reads the weights of path into m (and the optimizer slots when
 * with_optimizer); the file's layers must be m's (a checkpoint of another
 * model is named as such). */
mr_status mr_checkpoint_load_model(const char *path, mr_model *m, int with_optimizer,
                                   mr_error *err);

void mr_checkpoint_free(mr_checkpoint *c);

/* Records (or replaces) the run's end in the checkpoint at path, the rest
 * of it kept: its weights and optimizer slots are read into m (m's own
 * are lost; m is the model the file was written from) and the file is
 * written again, atomically. */
mr_status mr_checkpoint_set_ended(const char *path, const mr_checkpoint_end *end, mr_model *m,
                                  mr_error *err);

/* Checkpoint file names: PATTERN "dir/name.h5" gives "dir/name-step<N>.h5",
 * N zero-padded to 9 digits so that names sort by step. */
void mr_checkpoint_name(const char *pattern, int64_t step, char *buf, size_t n);

/* The checkpoint of PATTERN with the most updates (a resume from the
 * newest), into buf; MR_ERR_IO naming the folder when there is none (its
 * message names no argument: the caller's face does). */
mr_status mr_checkpoint_newest(const char *pattern, char *buf, size_t n, mr_error *err);

/* Checks path's checksums (runtime/h5file.h): MR_OK when it is intact. */
mr_status mr_checkpoint_verify(const char *path, mr_error *err);

/* A line for the caller to say as its face does (one line, without its
 * newline, naming no argument: the caller adds its own words). */
typedef void (*mr_checkpoint_note)(void *user, const char *line);

/* A resume from the newest's fall-back: when path (PATTERN's newest) is
 * damaged, the newest older checkpoint of PATTERN that is intact replaces
 * it in path, and note(user, line) (note NULL: nothing) names each damaged
 * file ("<why>; trying the previous checkpoint <older>"). When none is
 * intact, the newest's error. */
mr_status mr_checkpoint_skip_damaged(const char *pattern, char *path, size_t n,
                                     mr_checkpoint_note note, void *user, mr_error *err);

/* Deletes all but the newest `keep` checkpoints of PATTERN (keep >= 1). */
mr_status mr_checkpoint_prune(const char *pattern, int keep, mr_error *err);

#endif
