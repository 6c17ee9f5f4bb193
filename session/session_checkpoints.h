/* session_checkpoints.h: the checkpoints of a run: [net] checkpoint with
 * checkpoint_every, the model saved at the end, how many to keep, which one
 * a run resumes from (auto: the most advanced of the pattern's, the stop's
 * and the end's files), a stop's and the best epoch's files, and the end a
 * run records. Lines go to the face through events (session_events.h).
 * Only the process of global replica 0 writes (`lead`); every process reads
 * a checkpoint it resumes from, as it reads the .cfg and the data. */
#ifndef MR_SESSION_CHECKPOINTS_H
#define MR_SESSION_CHECKPOINTS_H

#include "runtime/dataset.h"
#include "session/session_events.h"
#include "strategies/checkpoint.h"
#include "strategies/strategy.h"

typedef struct mr_ckpt_run {
    const char *pattern;             /* [net] checkpoint, or NULL */
    int keep;                        /* --keep: checkpoints of the pattern to keep (0: all) */
    int lead;                        /* this process writes */
    const mr_session_events *events; /* "Saved ..." lines (MR_SESSION_LINE_INFO), or NULL */
    const mr_session_words *words;   /* how the face names its arguments (NULL: the library's) */
    /* what every checkpoint records besides the model and the fit state */
    const mr_config *cfg;
    const char *cfg_path;
    const mr_fit_plan *plan;
    int processes;
    const mr_dataset *train; /* its preprocessing */
    int64_t train_examples;  /* the rows an epoch goes over */
    /* a planned stop (a signal): where its checkpoint goes without a
     * pattern (--checkpoint-on-signal or its default; NULL: nowhere) */
    const char *stop_path;
    double stop_budget;    /* --stop-budget: a save longer than this is warned of (0: never) */
    const char *best_path; /* [net] save_best_only: --save's path, or NULL */
    int best_saves;        /* filled: how many times best_path was written */
    int64_t max_steps;     /* --max-steps (0: none): a checkpoint there is the run's end */
    int asked;             /* 1: a save the caller asks for now (the library's save): its
                              path was not checked before, so a write that fails is an
                              MR_ERR_IO, not a failure of a run (MR_ERR_RUNTIME) */
    mr_run_end ended;      /* why the run ended, set after the fit (mr_ckpt_record_end) */
    /* filled by the writes: the seconds the last one took (0: none yet),
     * the file a stop wrote ("" if none), and the pattern's file the fit
     * wrote last, with its update count and the end it records ("" if none) */
    double last_save_s;
    char stopped_at[MR_PATH_MAX + 64];
    char last_saved[MR_PATH_MAX + 64];
    int64_t last_saved_step;
    mr_run_end last_saved_end;
} mr_ckpt_run;

/* [net] checkpoint names a file pattern ("ck/run.h5": ck/run-step<N>.h5)
 * or, ending in '/', a folder ("ck/": ck/step<N>.h5); the root folder
 * alone is refused (MR_ERR_CONFIG), as is "" (no pattern: pass NULL). */
mr_status mr_ckpt_check_pattern(const char *pattern, const mr_session_words *words, mr_error *err);

/* Fails early, before any training, if a checkpoint could not be written:
 * the pattern's folder (made if missing, with its parents) and --save's
 * must take a file (r->words name it in a message: "--save"). */
mr_status mr_ckpt_check_writable(const mr_ckpt_run *r, const char *save_path, mr_error *err);

/* Removes the temporaries that killed writers left (runtime/atomic_file.h,
 * mr_atomic_remove_stale) of the pattern's checkpoints, of r->stop_path
 * and of save_path (NULL: none); counts them in *removed, the first's
 * path in first[n]. */
mr_status mr_ckpt_remove_stale(const mr_ckpt_run *r, const char *save_path, int *removed,
                               char *first, size_t n, mr_error *err);

/* At the end of a run (not a stop): deletes r->stop_path, the stop's
 * checkpoint without a pattern, now older than the run's end (as Keras's
 * BackupAndRestore deletes its backup), unless it is save_path. Returns 1
 * if a file was deleted. */
int mr_ckpt_remove_stop(const mr_ckpt_run *r, const char *save_path);

/* mr_fit_callbacks.save, with user = mr_ckpt_run: writes PATTERN-step<N>.h5
 * (recording the run's end when it is at its epochs or --max-steps) and
 * prunes to --keep. */
mr_status mr_ckpt_on_save(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                          mr_error *err);

/* mr_fit_callbacks.save_best, with user = mr_ckpt_run: writes
 * r->best_path (the lead only), after Keras ModelCheckpoint's line
 * "Epoch N: val_loss improved from B to V, saving model to PATH". */
mr_status mr_ckpt_on_save_best(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                               double value, int had_best, double best_before, mr_error *err);

/* mr_fit_callbacks.on_stop, with user = mr_ckpt_run: a stop's checkpoint,
 * PATTERN-step<N>.h5 (pruned to --keep) or else r->stop_path; records it
 * in r->stopped_at. Nowhere to write (neither) is MR_OK, nothing written. */
mr_status mr_ckpt_on_stop(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                          mr_error *err);

/* Writes one checkpoint to path (--save, after training), atomically,
 * and times it (r->last_save_s, printed on the "Saved" line). ended: why
 * the run ended at `state`, recorded in the file (MR_RUN_END_NONE: it
 * goes on, or stopped on a signal). */
mr_status mr_ckpt_write(mr_ckpt_run *r, const char *path, const mr_fit_state *state,
                        const mr_model *m, float lr, mr_run_end ended, mr_error *err);

/* At the end of a run (not a stop), ended at `end` for r->ended's reason:
 * records that end (strategies/checkpoint.h, mr_checkpoint_set_ended)
 * in the files the run wrote before it that a rerun with --resume auto
 * could take for a state to go on from: r->best_path (save_best_only's
 * file, which holds an older epoch) once an epoch has ended, and the
 * pattern's last file when it is the end and records another (early
 * stopping, which its write could not know). m: a model of the run's,
 * whose weights are lost (read from those files). The lead only. */
mr_status mr_ckpt_record_end(const mr_ckpt_run *r, const mr_fit_state *end, mr_model *m,
                             mr_error *err);

/* The default place of a stop's checkpoint without [net] checkpoint or
 * --checkpoint-on-signal: beside --save, else beside --json, with the
 * extension replaced by "-stopped.h5" (out.h5: out-stopped.h5); "" when
 * neither is given. */
void mr_ckpt_default_stop_path(const char *save_path, const char *json_path, char *path, size_t n);

/* --resume ARG: ARG itself; with "auto", of the newest intact checkpoint
 * of the pattern, stop_path (a stop's checkpoint) and save_path (--save's
 * file, when it is a checkpoint mirrored resumes from), the one with the
 * most updates (on a tie --save's, then the stop's), into path; "" when
 * there is none yet (start fresh). A damaged file, and a --save file that
 * is no checkpoint (it will be replaced at the run's end), are named in a
 * line to `note` (MR_SESSION_LINE_NOTE; NULL: none). Neither a pattern nor a stop_path: an
 * MR_ERR_USAGE. */
mr_status mr_ckpt_resume_path(const char *arg, const char *pattern, const char *stop_path,
                              const char *save_path, char *path, size_t n,
                              const mr_session_events *note, const mr_session_words *words,
                              mr_error *err);

/* 1 when a checkpoint is where the run ends: its `epochs` done (and no
 * update into the next), or --max-steps (max_steps > 0) reached, or its
 * run ended by early stopping. A checkpoint that records its run's end
 * (c->ended) is judged by that end, not by its own state. */
int mr_ckpt_finished(const mr_checkpoint *c, int epochs, int64_t max_steps);

/* "early stopping after epoch 2/5, 40 updates" or "epoch 2/2, 40 updates":
 * where c's run ended (c->ended, else c's state), of `epochs`, into buf. */
void mr_ckpt_say_end(const mr_checkpoint *c, int epochs, char *buf, size_t n);

/* --resume auto with save_best_only: 1 when best_path (--save's file, the
 * best epoch's model) records that its run ended, where this run ends
 * (mr_ckpt_finished), after at least `step` updates (the chosen
 * checkpoint's; -1: none), so that the run has nothing to do; the file is
 * then in *c (free with mr_checkpoint_free). A missing file, one that does
 * not load, or one without the record (a run that did not end) is 0, the
 * run goes on without it. */
int mr_ckpt_best_ended(const char *best_path, int64_t step, int epochs, int64_t max_steps,
                       mr_checkpoint *c);

/* Compares the data a resumed run trains on with the checkpoint's: the
 * preprocessing ([data] scale, standardize) must be the checkpoint's, and a
 * checkpoint into an epoch needs as many training examples as it had
 * (else MR_ERR_USAGE, one line naming path). What else changed (the
 * examples at an epoch's end, the files) is written into buf, "" if
 * nothing did. n_train: this run's training rows. */
mr_status mr_ckpt_compare_data(const char *path, const mr_checkpoint *c, const mr_config *cfg,
                               int64_t n_train, char *buf, size_t n, const mr_session_words *words,
                               mr_error *err);

/* Puts a checkpoint's preprocessing into a dataset in place of its own (a
 * resumed run and mirrored_eval use the statistics training used). */
mr_status mr_ckpt_apply_preprocessing(const mr_checkpoint *c, mr_dataset *ds, mr_error *err);

/* Fails (MR_ERR_USAGE, naming path) when the checkpoint is beyond the run's
 * `epochs`: past their end, or into the last one or later. One that ends
 * exactly there passes (nothing to train: mr_train_print_resume says so). */
mr_status mr_ckpt_check_epochs(const char *path, const mr_checkpoint *c, int epochs,
                               const mr_session_words *words, mr_error *err);

/* Compares the checkpoint's [net] (its .cfg text, and its seed) with cfg's:
 * writes "key old -> new, ...; what is kept and what is dropped" into buf
 * ("" when they agree). Returns 1 if the checkpoint's optimizer slots are
 * to be read (the same optimizer with the same slots), else 0. */
int mr_ckpt_compare_cfg(const mr_checkpoint *c, const mr_config *cfg, char *buf, size_t n);

#endif
