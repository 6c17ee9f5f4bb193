/* train_checkpoints.h: the checkpoint side of mirrored_train: [net] checkpoint
 * with checkpoint_every, --save, --keep, --resume and --init-weights.
 * Only the process of global replica 0 writes (`lead`); every process reads
 * a checkpoint it resumes from, as it reads the .cfg and the data. */
#ifndef MR_TRAIN_CHECKPOINTS_H
#define MR_TRAIN_CHECKPOINTS_H

#include <stdio.h>

#include "runtime/dataset.h"
#include "strategies/checkpoint.h"
#include "strategies/strategy.h"

typedef struct mr_ckpt_run {
    const char *pattern; /* [net] checkpoint, or NULL */
    int keep;            /* --keep: checkpoints of the pattern to keep (0: all) */
    int lead;            /* this process writes */
    FILE *out;           /* "Saved ..." lines, or NULL */
    /* what every checkpoint records besides the model and the fit state */
    const mr_config *cfg;
    const char *cfg_path;
    const mr_fit_plan *plan;
    int processes;
    const mr_dataset *train; /* its preprocessing */
} mr_ckpt_run;

/* Fails early, before any training, if a checkpoint could not be written:
 * the pattern's folder (made if missing) and --save's must take a file. */
mr_status mr_ckpt_check_writable(const mr_ckpt_run *r, const char *save_path, mr_error *err);

/* mr_fit_callbacks.save, with user = mr_ckpt_run: writes PATTERN-step<N>.h5
 * and prunes to --keep. */
mr_status mr_ckpt_on_save(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                          mr_error *err);

/* Writes one checkpoint to path (--save, after training). */
mr_status mr_ckpt_write(const mr_ckpt_run *r, const char *path, const mr_fit_state *state,
                        const mr_model *m, float lr, mr_error *err);

/* --resume ARG: ARG itself, or with "auto" the newest checkpoint of the
 * pattern, into path. */
mr_status mr_ckpt_resume_path(const char *arg, const char *pattern, char *path, size_t n,
                              mr_error *err);

/* Puts a checkpoint's preprocessing into a dataset in place of its own (a
 * resumed run and mirrored_eval use the statistics training used). */
mr_status mr_ckpt_apply_preprocessing(const mr_checkpoint *c, mr_dataset *ds, mr_error *err);

/* Fails (MR_ERR_USAGE, naming path) when the checkpoint is beyond the run's
 * `epochs`: past their end, or into the last one or later. One that ends
 * exactly there passes (nothing to train: mr_train_print_resume says so). */
mr_status mr_ckpt_check_epochs(const char *path, const mr_checkpoint *c, int epochs, mr_error *err);

/* Compares the checkpoint's [net] (its .cfg text, and its seed) with cfg's:
 * writes "key old -> new, ...; what is kept and what is dropped" into buf
 * ("" when they agree). Returns 1 if the checkpoint's optimizer slots are
 * to be read (the same optimizer with the same slots), else 0. */
int mr_ckpt_compare_cfg(const mr_checkpoint *c, const mr_config *cfg, char *buf, size_t n);

#endif
