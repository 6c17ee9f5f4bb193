/* session_checkpoints.c: see session_checkpoints.h. */
#include "session/session_checkpoints.h"

#include "models/keras_archive.h"
#include "strategies/early_stop.h"
#include "runtime/atomic_file.h"
#include "runtime/clock.h"
#include "runtime/paths.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A checkpoint to resume from is HDF5: a .keras archive has no training state. */
static mr_status keras_refused(const char *what, const char *path, const mr_session_words *words,
                               mr_error *err) {
    char save[64];
    return mr_error_set(err, MR_ERR_CONFIG,
                        "%s %s: a checkpoint is an HDF5 file (.h5); a .keras archive holds no "
                        "training state to resume from (%s writes one)",
                        what, path,
                        mr_session_word(words, MR_SESSION_ARG_SAVE, "x.keras", save, sizeof save));
}

mr_status mr_ckpt_check_pattern(const char *pattern, const mr_session_words *words, mr_error *err) {
    if (pattern == NULL) return MR_OK;
    if (mr_keras_archive_named(pattern))
        return keras_refused("[net] checkpoint", pattern, words, err);
    if (pattern[0] != '\0' && strspn(pattern, "/") < strlen(pattern)) return MR_OK;
    return mr_error_set(err, MR_ERR_CONFIG,
                        "[net] checkpoint %s: the root folder is no place for checkpoints: name a "
                        "folder (ck/: ck/step<N>.h5) or a file pattern (ck/run.h5: "
                        "ck/run-step<N>.h5)",
                        pattern);
}

/* The folder of the pattern's checkpoints into dir[n]. */
static void pattern_folder(const char *pattern, char *dir, size_t n) {
    char name[MR_PATH_MAX + 80];
    mr_checkpoint_name(pattern, 0, name, sizeof name);
    snprintf(dir, n, "%s", dirname(name));
}

/* mkdir -p: folder and every missing parent. 0, or -1 with errno. */
static int make_folders(const char *folder) {
    char p[MR_PATH_MAX];
    snprintf(p, sizeof p, "%s", folder);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
        *s = '/';
    }
    return mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

mr_status mr_ckpt_check_writable(const mr_ckpt_run *r, const char *save_path, mr_error *err) {
    if (!r->lead) return MR_OK;
    if (r->pattern != NULL) {
        char folder[MR_PATH_MAX], name[MR_PATH_MAX + 80];
        MR_CHECK(mr_ckpt_check_pattern(r->pattern, r->words, err));
        pattern_folder(r->pattern, folder, sizeof folder);
        if (make_folders(folder) != 0)
            return mr_error_set(err, MR_ERR_IO, "[net] checkpoint %s: cannot make its folder: %s",
                                r->pattern, strerror(errno));
        mr_checkpoint_name(r->pattern, 0, name, sizeof name);
        MR_CHECK(mr_atomic_check_writable("[net] checkpoint", name, err));
    }
    if (save_path != NULL)
        MR_CHECK(mr_atomic_check_writable(mr_session_name(r->words, MR_SESSION_ARG_SAVE), save_path,
                                          err));
    return MR_OK;
}

/* mr_atomic_target_fn of a pattern's checkpoints: the name of step 0 and
 * of step 111111111 differ in the 9 digits alone, where name has digits. */
static int is_pattern_name(const char *name, void *user) {
    char a[MR_PATH_MAX + 80], b[MR_PATH_MAX + 80];
    mr_checkpoint_name(user, 0, a, sizeof a);
    mr_checkpoint_name(user, 111111111, b, sizeof b);
    const char *ba = strrchr(a, '/') + 1, *bb = strrchr(b, '/') + 1;
    if (strlen(name) != strlen(ba)) return 0;
    for (size_t i = 0; name[i]; i++)
        if (ba[i] == bb[i] ? name[i] != ba[i] : (name[i] < '0' || name[i] > '9')) return 0;
    return 1;
}

/* mr_atomic_target_fn of one file: user is its name */
static int is_file_name(const char *name, void *user) {
    return strcmp(name, user) == 0;
}

/* The stale temporaries of one file, path. */
static mr_status remove_stale_of(const char *path, int *removed, char *first, size_t n,
                                 mr_error *err) {
    char a[MR_PATH_MAX], b[MR_PATH_MAX];
    snprintf(a, sizeof a, "%s", path);
    snprintf(b, sizeof b, "%s", path);
    return mr_atomic_remove_stale(dirname(a), is_file_name, basename(b), removed, first, n, err);
}

mr_status mr_ckpt_remove_stale(const mr_ckpt_run *r, const char *save_path, int *removed,
                               char *first, size_t n, mr_error *err) {
    *removed = 0;
    if (n) first[0] = '\0';
    if (!r->lead) return MR_OK;
    if (r->pattern != NULL) {
        char folder[MR_PATH_MAX];
        pattern_folder(r->pattern, folder, sizeof folder);
        MR_CHECK(mr_atomic_remove_stale(folder, is_pattern_name, (void *)r->pattern, removed, first,
                                        n, err));
    }
    if (r->stop_path != NULL) MR_CHECK(remove_stale_of(r->stop_path, removed, first, n, err));
    if (save_path != NULL) MR_CHECK(remove_stale_of(save_path, removed, first, n, err));
    return MR_OK;
}

int mr_ckpt_remove_stop(const mr_ckpt_run *r, const char *save_path) {
    if (!r->lead || r->stop_path == NULL) return 0;
    if (save_path != NULL && strcmp(save_path, r->stop_path) == 0) return 0;
    return unlink(r->stop_path) == 0;
}

mr_status mr_ckpt_write(mr_ckpt_run *r, const char *path, const mr_fit_state *state,
                        const mr_model *m, float lr, mr_run_end ended, mr_error *err) {
    double t0 = mr_now_s();
    mr_checkpoint c = {.cfg_text = r->cfg->text,
                       .replicas = r->plan->replicas,
                       .processes = r->processes,
                       .global_batch = r->plan->global_batch,
                       .seed = r->cfg->net.seed,
                       .lr = lr,
                       .state = *state,
                       .scale = r->train->scale,
                       .row = r->train->row,
                       .mean = r->train->mean,
                       .inv_std = r->train->inv_std,
                       .class_names = r->train->class_names,
                       .previous_save_s = r->last_save_s,
                       .train_examples = r->train_examples};
    if (ended != MR_RUN_END_NONE)
        c.ended = (mr_checkpoint_end){.why = ended,
                                      .epoch = state->epoch,
                                      .step = state->step,
                                      .global_step = state->global_step};
    /* relative data paths of the .cfg start from its folder: keep it absolute */
    if (r->cfg_path[0] == '/' || realpath(r->cfg_path, c.cfg_path) == NULL)
        snprintf(c.cfg_path, sizeof c.cfg_path, "%s", r->cfg_path);
    /* a .keras --save is the model as Keras saves it, not a checkpoint: it
     * takes the raw inputs, [data] scale a Rescaling in it */
    mr_status st = mr_keras_archive_named(path)
                       ? mr_keras_archive_save_as(path, m, MR_KERAS_ARCHIVE_SCALED,
                                                  state->global_step, lr, err)
                       : mr_checkpoint_save(path, m, &c, err);
    /* the place was checked before training: failing now (a full disk) is a
     * failure of the run, exit 1, not bad input; a save asked for now is
     * the caller's path to fix */
    if (st == MR_ERR_IO && !r->asked) err->status = st = MR_ERR_RUNTIME;
    MR_CHECK(st);
    /* the write is durable here (mr_checkpoint_save syncs before the rename):
     * what a stop must fit in its budget */
    r->last_save_s = mr_now_s() - t0;
    mr_session_say(r->events, MR_SESSION_LINE_INFO, "Saved %s (epoch %d, step %lld) in %.2f s",
                   path, state->epoch + (state->step > 0), (long long)state->global_step,
                   r->last_save_s);
    /* a stop on a signal would take at least this long: say so now, not
     * when the VM is going */
    if (r->stop_budget > 0 && r->last_save_s > r->stop_budget)
        mr_session_say(r->events, MR_SESSION_LINE_INFO,
                       "Warning: this save took %.2f s, more than %s %g s: a stop on a signal "
                       "would not fit",
                       r->last_save_s, mr_session_name(r->words, MR_SESSION_ARG_STOP_BUDGET),
                       r->stop_budget);
    return MR_OK;
}

mr_status mr_ckpt_on_save(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                          mr_error *err) {
    mr_ckpt_run *r = user;
    if (!r->lead || r->pattern == NULL) return MR_OK;
    char path[MR_PATH_MAX + 64];
    mr_checkpoint_name(r->pattern, state->global_step, path, sizeof path);
    /* the end by epochs or --max-steps is known here; early stopping's
     * only after the fit (mr_ckpt_record_end) */
    const mr_run_end ended =
        state->epoch >= r->cfg->net.epochs && state->step == 0   ? MR_RUN_END_EPOCHS
        : r->max_steps > 0 && state->global_step >= r->max_steps ? MR_RUN_END_MAX_STEPS
                                                                 : MR_RUN_END_NONE;
    MR_CHECK(mr_ckpt_write(r, path, state, m, lr, ended, err));
    snprintf(r->last_saved, sizeof r->last_saved, "%s", path);
    r->last_saved_step = state->global_step;
    r->last_saved_end = ended;
    if (r->keep > 0) MR_CHECK(mr_checkpoint_prune(r->pattern, r->keep, err));
    return MR_OK;
}

mr_status mr_ckpt_record_end(const mr_ckpt_run *r, const mr_fit_state *end, mr_model *m,
                             mr_error *err) {
    if (!r->lead || r->ended == MR_RUN_END_NONE) return MR_OK;
    const mr_checkpoint_end e = {
        .why = r->ended, .epoch = end->epoch, .step = end->step, .global_step = end->global_step};
    struct stat sb;
    /* no epoch ended: no best of this run, the file (if any) is another's */
    if (r->best_path != NULL && !mr_keras_archive_named(r->best_path) && end->n_history > 0 &&
        stat(r->best_path, &sb) == 0)
        MR_CHECK(mr_checkpoint_set_ended(r->best_path, &e, m, err));
    if (r->last_saved[0] && r->last_saved_step == end->global_step && stat(r->last_saved, &sb) == 0)
        MR_CHECK(mr_checkpoint_set_ended(r->last_saved, &e, m, err));
    return MR_OK;
}

mr_status mr_ckpt_on_save_best(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                               double value, int had_best, double best_before, mr_error *err) {
    mr_ckpt_run *r = user;
    if (!r->lead || r->best_path == NULL) return MR_OK;
    const char *name = mr_monitor_name(r->cfg->net.save_best_only);
    if (had_best)
        mr_session_say(r->events, MR_SESSION_LINE_INFO,
                       "Epoch %d: %s improved from %.5f to %.5f, saving model to %s", state->epoch,
                       name, best_before, value, r->best_path);
    else /* Keras starts from inf, or -inf for an accuracy */
        mr_session_say(r->events, MR_SESSION_LINE_INFO,
                       "Epoch %d: %s improved from %sinf to %.5f, saving model to %s", state->epoch,
                       name, strstr(name, "accuracy") ? "-" : "", value, r->best_path);
    MR_CHECK(mr_ckpt_write(r, r->best_path, state, m, lr, MR_RUN_END_NONE, err));
    r->best_saves++;
    return MR_OK;
}

mr_status mr_ckpt_on_stop(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                          mr_error *err) {
    mr_ckpt_run *r = user;
    r->stopped_at[0] = '\0';
    if (!r->lead) return MR_OK;
    if (r->pattern != NULL) {
        mr_checkpoint_name(r->pattern, state->global_step, r->stopped_at, sizeof r->stopped_at);
        MR_CHECK(mr_ckpt_write(r, r->stopped_at, state, m, lr, MR_RUN_END_NONE, err));
        if (r->keep > 0) MR_CHECK(mr_checkpoint_prune(r->pattern, r->keep, err));
    } else if (r->stop_path != NULL) {
        snprintf(r->stopped_at, sizeof r->stopped_at, "%s", r->stop_path);
        MR_CHECK(mr_ckpt_write(r, r->stopped_at, state, m, lr, MR_RUN_END_NONE, err));
    }
    return MR_OK;
}

void mr_ckpt_default_stop_path(const char *save_path, const char *json_path, char *path, size_t n) {
    const char *base = save_path ? save_path : json_path;
    if (base == NULL) {
        snprintf(path, n, "%s", "");
        return;
    }
    /* the extension of the file name only (a dot in a folder name is not one) */
    const char *slash = strrchr(base, '/'), *dot = strrchr(base, '.');
    int stem = dot && dot > (slash ? slash : base) ? (int)(dot - base) : (int)strlen(base);
    snprintf(path, n, "%.*s-stopped.h5", stem, base);
}

/* Where mr_checkpoint_skip_damaged's lines go: the face's events, each
 * line after the argument as the face names it. */
typedef struct skip_note {
    const mr_session_events *events;
    const char *auto_word; /* "--resume auto", "load('auto')" */
} skip_note;

static void say_skipped(void *user, const char *line) {
    const skip_note *n = user;
    mr_session_say(n->events, MR_SESSION_LINE_NOTE, "%s: %s", n->auto_word, line);
}

/* mr_checkpoint_skip_damaged, its lines said through note in the face's
 * words (auto_word). */
static mr_status skip_damaged(const char *pattern, char *path, size_t n,
                              const mr_session_events *note, const char *auto_word, mr_error *err) {
    skip_note said = {.events = note, .auto_word = auto_word};
    return mr_checkpoint_skip_damaged(pattern, path, n, say_skipped, &said, err);
}

/* --resume auto's file of the pattern: its newest intact checkpoint, or
 * "" when it has none yet (a first start). */
static mr_status newest_of_pattern(const char *pattern, char *path, size_t n,
                                   const mr_session_events *note, const char *auto_word,
                                   mr_error *err) {
    mr_error none = {0};
    path[0] = '\0';
    /* the newest intact one: a damaged newest is named and skipped */
    if (mr_checkpoint_newest(pattern, path, n, &none) == MR_OK)
        return skip_damaged(pattern, path, n, note, auto_word, err);
    path[0] = '\0';
    /* no folder yet, or no file in it: a first start; a folder that
     * cannot be read is an error, not a reason to start over */
    char dir[MR_PATH_MAX];
    pattern_folder(pattern, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (d == NULL && errno != ENOENT) return mr_error_set(err, none.status, "%s", none.msg);
    if (d != NULL) closedir(d);
    if (none.status == MR_ERR_NOMEM) return mr_error_set(err, none.status, "%s", none.msg);
    return MR_OK;
}

/* One candidate of --resume auto: when path holds a checkpoint with at
 * least *best updates, it becomes the choice (into choice[n]). A file that
 * is missing is skipped; one that does not load is named to `note` as
 * `what` says. */
static void consider(const char *path, const char *what, int64_t *best, char *choice, size_t n,
                     const mr_session_events *note, const char *auto_word) {
    struct stat sb;
    if (path == NULL || path[0] == '\0' || stat(path, &sb) != 0) return;
    mr_checkpoint c;
    mr_error e = {0};
    if (mr_checkpoint_load(path, &c, &e) != MR_OK) {
        mr_session_say(note, MR_SESSION_LINE_NOTE, "%s: %s: %s", auto_word, e.msg, what);
        return;
    }
    if (c.state.global_step >= *best) {
        *best = c.state.global_step;
        snprintf(choice, n, "%s", path);
    }
    mr_checkpoint_free(&c);
}

/* --resume auto with --save x.keras: the archive is the model Keras loads,
 * never a state to go on from (the stop's checkpoint, x-stopped.h5, is);
 * when it exists, a line says so. */
static void say_archive_skipped(const char *save_path, const mr_session_events *note,
                                const char *auto_word) {
    struct stat sb;
    if (stat(save_path, &sb) == 0)
        mr_session_say(note, MR_SESSION_LINE_NOTE,
                       "%s: %s is a Keras archive, not a checkpoint to resume from: skipped, and "
                       "this run replaces it when it ends",
                       auto_word, save_path);
}

mr_status mr_ckpt_resume_path(const char *arg, const char *pattern, const char *stop_path,
                              const char *save_path, char *path, size_t n,
                              const mr_session_events *note, const mr_session_words *words,
                              mr_error *err) {
    if (strcmp(arg, "auto") != 0) {
        snprintf(path, n, "%s", arg);
        return MR_OK;
    }
    char auto_word[64], save_said[256];
    mr_session_word(words, MR_SESSION_ARG_RESUME, "auto", auto_word, sizeof auto_word);
    if (pattern == NULL && stop_path == NULL)
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: the .cfg has no [net] checkpoint to look for (and there is no %s, "
                            "%s or %s to look beside)",
                            auto_word, mr_session_name(words, MR_SESSION_ARG_STOP_CHECKPOINT),
                            mr_session_name(words, MR_SESSION_ARG_SAVE),
                            mr_session_name(words, MR_SESSION_ARG_JSON));
    char newest[MR_PATH_MAX + 64] = "";
    if (pattern != NULL)
        MR_CHECK(newest_of_pattern(pattern, newest, sizeof newest, note, auto_word, err));
    /* the most updates wins; a tie goes to the later candidate: the same
     * state, and --save's file is the run's own end */
    int64_t best = -1;
    path[0] = '\0';
    if (newest[0]) snprintf(path, n, "%s", newest), best = 0;
    consider(newest, "", &best, path, n, NULL, auto_word);
    if (stop_path != NULL && (save_path == NULL || strcmp(stop_path, save_path) != 0))
        consider(stop_path, "skipped", &best, path, n, note, auto_word);
    snprintf(save_said, sizeof save_said,
             "%s's file is no checkpoint to resume from: skipped, and this run replaces it when "
             "it ends",
             mr_session_name(words, MR_SESSION_ARG_SAVE));
    if (save_path != NULL && mr_keras_archive_named(save_path))
        say_archive_skipped(save_path, note, auto_word);
    else
        consider(save_path, save_said, &best, path, n, note, auto_word);
    return MR_OK;
}

/* Where c's run ended: its record, else c's own state. */
static mr_checkpoint_end end_of(const mr_checkpoint *c) {
    if (c->ended.why != MR_RUN_END_NONE) return c->ended;
    const mr_fit_state *s = &c->state;
    return (mr_checkpoint_end){.epoch = s->epoch, .step = s->step, .global_step = s->global_step};
}

int mr_ckpt_finished(const mr_checkpoint *c, int epochs, int64_t max_steps) {
    const mr_checkpoint_end e = end_of(c);
    if (e.why == MR_RUN_END_EARLY_STOP) return 1;
    if (max_steps > 0 && e.global_step >= max_steps) return 1;
    return e.epoch == epochs && e.step == 0;
}

void mr_ckpt_say_end(const mr_checkpoint *c, int epochs, char *buf, size_t n) {
    const mr_checkpoint_end e = end_of(c);
    snprintf(buf, n, "%sepoch %d/%d, %lld updates",
             e.why == MR_RUN_END_EARLY_STOP ? "early stopping after " : "", e.epoch + (e.step > 0),
             epochs, (long long)e.global_step);
}

int mr_ckpt_best_ended(const char *best_path, int64_t step, int epochs, int64_t max_steps,
                       mr_checkpoint *c) {
    struct stat sb;
    mr_error e = {0};
    if (best_path == NULL || stat(best_path, &sb) != 0 ||
        mr_checkpoint_load(best_path, c, &e) != MR_OK)
        return 0;
    if (c->ended.why != MR_RUN_END_NONE && c->ended.global_step >= step &&
        mr_ckpt_finished(c, epochs, max_steps))
        return 1;
    mr_checkpoint_free(c);
    return 0;
}

mr_status mr_ckpt_apply_preprocessing(const mr_checkpoint *c, mr_dataset *ds, mr_error *err) {
    ds->scale = c->scale;
    free(ds->mean), free(ds->inv_std);
    ds->mean = ds->inv_std = NULL;
    if (c->mean == NULL) return MR_OK;
    if (c->row != ds->row)
        return mr_error_set(err, MR_ERR_DATA,
                            "the checkpoint's standardisation has %lld features, the data %lld",
                            (long long)c->row, (long long)ds->row);
    ds->mean = malloc(sizeof(float) * (size_t)c->row);
    ds->inv_std = malloc(sizeof(float) * (size_t)c->row);
    if (ds->mean == NULL || ds->inv_std == NULL)
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    memcpy(ds->mean, c->mean, sizeof(float) * (size_t)c->row);
    memcpy(ds->inv_std, c->inv_std, sizeof(float) * (size_t)c->row);
    return MR_OK;
}

mr_status mr_ckpt_check_epochs(const char *path, const mr_checkpoint *c, int epochs,
                               const mr_session_words *words, mr_error *err) {
    const mr_fit_state *s = &c->state;
    if (s->epoch < epochs || (s->epoch == epochs && s->step == 0)) return MR_OK;
    char where[96];
    if (s->step == 0)
        snprintf(where, sizeof where, "has finished %d epoch%s", s->epoch,
                 s->epoch == 1 ? "" : "s");
    else
        snprintf(where, sizeof where, "is %lld update%s into epoch %d", (long long)s->step,
                 s->step == 1 ? "" : "s", s->epoch + 1);
    char resume[MR_PATH_MAX + 64];
    return mr_error_set(
        err, MR_ERR_USAGE,
        "%s: the checkpoint %s, beyond the %d epoch%s asked for (%s or [net] epochs): nothing to "
        "train",
        mr_session_word(words, MR_SESSION_ARG_RESUME, path, resume, sizeof resume), where, epochs,
        epochs == 1 ? "" : "s", mr_session_name(words, MR_SESSION_ARG_EPOCHS));
}

/* The [net] keys whose change a resumed run reports: a float or an int (or
 * enum) of mr_net_cfg. */
static const struct {
    const char *key;
    size_t offset;
    int is_float;
} net_keys[] = {
    {"learning_rate", offsetof(mr_net_cfg, learning_rate), 1},
    {"momentum", offsetof(mr_net_cfg, momentum), 1},
    {"nesterov", offsetof(mr_net_cfg, nesterov), 0},
    {"beta1", offsetof(mr_net_cfg, beta1), 1},
    {"beta2", offsetof(mr_net_cfg, beta2), 1},
    {"epsilon", offsetof(mr_net_cfg, epsilon), 1},
    {"rho", offsetof(mr_net_cfg, rho), 1},
    {"weight_decay", offsetof(mr_net_cfg, weight_decay), 1},
    {"clipnorm", offsetof(mr_net_cfg, clipnorm), 1},
    {"global_clipnorm", offsetof(mr_net_cfg, global_clipnorm), 1},
    {"clipvalue", offsetof(mr_net_cfg, clipvalue), 1},
    {"lr_scaling", offsetof(mr_net_cfg, lr_scaling), 0},
    {"warmup_epochs", offsetof(mr_net_cfg, warmup_epochs), 1},
    {"lr_schedule", offsetof(mr_net_cfg, lr_schedule), 0},
    {"lr_alpha", offsetof(mr_net_cfg, lr_alpha), 1},
    {"shuffle", offsetof(mr_net_cfg, shuffle), 0},
    {"validation_split", offsetof(mr_net_cfg, validation_split), 1},
};

/* What an optimizer's slots are, as the resume message names them after
 * its name ("adam moments", "sgd momentum"). */
static const char *slots_said(mr_optimizer_kind k) {
    if (k == MR_OPTIMIZER_SGD) return "momentum";
    return k == MR_OPTIMIZER_RMSPROP ? "mean squares" : "moments";
}

/* "0.5,2,1" (its first ten, then ",..."), or "none", appended at buf + *o. */
static void say_floats(const mr_class_weights *f, char *buf, size_t n, size_t *o) {
    for (int i = 0; i < f->n && i < 10 && *o < n; i++)
        *o += (size_t)snprintf(buf + *o, n - *o, "%s%g", i ? "," : "", (double)f->v[i]);
    if (*o < n && (f->n == 0 || f->n > 10))
        *o += (size_t)snprintf(buf + *o, n - *o, "%s", f->n ? ",..." : "none");
}

int mr_ckpt_compare_cfg(const mr_checkpoint *c, const mr_config *cfg, char *buf, size_t n) {
    if (n) buf[0] = '\0';
    mr_config old;
    mr_error err = {0};
    if (c->cfg_text == NULL ||
        mr_config_parse(c->cfg_text, "checkpoint", NULL, &old, &err) != MR_OK)
        return 1; /* nothing to compare with: the file's slots decide */
    const mr_net_cfg *a = &old.net, *b = &cfg->net;
    size_t o = 0;
#define SAY(...)                                                                                   \
    do {                                                                                           \
        if (o < n) o += (size_t)snprintf(buf + o, n - o, __VA_ARGS__);                             \
    } while (0)
    if (a->optimizer != b->optimizer)
        SAY("%soptimizer %s -> %s", o ? ", " : "", mr_optimizer_name(a->optimizer),
            mr_optimizer_name(b->optimizer));
    if (a->loss != b->loss)
        SAY("%sloss %s -> %s", o ? ", " : "", mr_loss_name(a->loss), mr_loss_name(b->loss));
    if (a->class_weight.n != b->class_weight.n ||
        memcmp(a->class_weight.v, b->class_weight.v, sizeof(float) * (size_t)a->class_weight.n)) {
        SAY("%sclass_weight ", o ? ", " : "");
        say_floats(&a->class_weight, buf, n, &o);
        SAY(" -> ");
        say_floats(&b->class_weight, buf, n, &o);
    }
    for (size_t i = 0; i < sizeof net_keys / sizeof net_keys[0]; i++) {
        const char *pa = (const char *)a + net_keys[i].offset;
        const char *pb = (const char *)b + net_keys[i].offset;
        if (net_keys[i].is_float && *(const float *)pa != *(const float *)pb)
            SAY("%s%s %g -> %g", o ? ", " : "", net_keys[i].key, (double)*(const float *)pa,
                (double)*(const float *)pb);
        else if (!net_keys[i].is_float && *(const int *)pa != *(const int *)pb)
            SAY("%s%s %d -> %d", o ? ", " : "", net_keys[i].key, *(const int *)pa,
                *(const int *)pb);
    }
    if (c->seed != b->seed)
        SAY("%sseed %lld -> %lld", o ? ", " : "", (long long)c->seed, (long long)b->seed);
    /* the optimizer's slots carry over only to the same optimizer with the
     * same slots (sgd has a momentum slot only with momentum > 0, rmsprop
     * a second one with it) */
    const mr_optimizer oa = mr_optimizer_from_config(a), ob = mr_optimizer_from_config(b);
    const int na = mr_optimizer_slot_count(&oa), nb = mr_optimizer_slot_count(&ob);
    int keep = a->optimizer == b->optimizer && na == nb;
    if (o > 0 && na > 0 && keep)
        SAY("; the weights, the position in training and the optimizer state (%s) kept",
            mr_optimizer_name(a->optimizer));
    else if (o > 0 && na > 0)
        SAY("; the weights and the position in training kept, the optimizer state (%s %s) "
            "dropped",
            mr_optimizer_name(a->optimizer), slots_said(a->optimizer));
    else if (o > 0)
        SAY("; the weights and the position in training kept (%s without momentum had no "
            "optimizer state)",
            mr_optimizer_name(a->optimizer));
    /* Adam's bias correction counts every update of the run (global_step),
     * so zero moments at update N are not a fresh Adam's first step */
    if (o > 0 && !keep && (b->optimizer == MR_OPTIMIZER_ADAM || b->optimizer == MR_OPTIMIZER_ADAMW))
        SAY(": %s starts from zero moments, its bias correction at update %lld",
            mr_optimizer_name(b->optimizer), (long long)c->state.global_step + 1);
    else if (o > 0 && !keep && nb > 0)
        SAY(": %s starts from zero %s", mr_optimizer_name(b->optimizer), slots_said(b->optimizer));
#undef SAY
    mr_config_free(&old);
    return keep;
}

/* The [data] files that decide the training rows, by key. */
static const struct {
    const char *key;
    size_t offset;
} data_files[] = {
    {"train_images", offsetof(mr_data_cfg, train_images)},
    {"train_labels", offsetof(mr_data_cfg, train_labels)},
    {"val_images", offsetof(mr_data_cfg, val_images)},
    {"val_labels", offsetof(mr_data_cfg, val_labels)},
};

/* The same file: the same path, or (both existing) the same file after
 * realpath, so that "./x.npy" and "x.npy" agree. */
static int same_file(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) != NULL && realpath(b, rb) != NULL && strcmp(ra, rb) == 0;
}

/* "train_images A -> B, ..." of the files that differ, into buf[n]. */
static void say_files(const mr_data_cfg *a, const mr_data_cfg *b, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof data_files / sizeof data_files[0] && o < n; i++) {
        const char *pa = (const char *)a + data_files[i].offset;
        const char *pb = (const char *)b + data_files[i].offset;
        if (!same_file(pa, pb))
            o += (size_t)snprintf(buf + o, n - o, "%s%s %s -> %s", o ? ", " : "", data_files[i].key,
                                  pa[0] ? pa : "none", pb[0] ? pb : "none");
    }
}

/* The preprocessing a resume cannot change: the weights were trained on
 * inputs of the checkpoint's. */
static mr_status check_preprocessing(const char *path, const mr_checkpoint *c, const mr_config *cfg,
                                     const mr_session_words *words, mr_error *err) {
    char how[128], resume[MR_PATH_MAX + 64];
    snprintf(how, sizeof how, "undo the edit, or start a new run from its weights with %s",
             mr_session_name(words, MR_SESSION_ARG_INIT_WEIGHTS));
    mr_session_word(words, MR_SESSION_ARG_RESUME, path, resume, sizeof resume);
    if (c->scale != cfg->data.scale)
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: [data] scale %g -> %g: its weights were trained on inputs of "
                            "scale %g; %s %s",
                            resume, (double)c->scale, (double)cfg->data.scale, (double)c->scale,
                            how, path);
    if ((c->mean != NULL) != (cfg->data.standardize != 0))
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: [data] standardize %d -> %d: its weights were trained on inputs "
                            "%s standardisation; %s %s",
                            resume, c->mean != NULL, cfg->data.standardize != 0,
                            c->mean != NULL ? "with" : "without", how, path);
    return MR_OK;
}

mr_status mr_ckpt_compare_data(const char *path, const mr_checkpoint *c, const mr_config *cfg,
                               int64_t n_train, char *buf, size_t n, const mr_session_words *words,
                               mr_error *err) {
    if (n) buf[0] = '\0';
    MR_CHECK(check_preprocessing(path, c, cfg, words, err));
    char resume[MR_PATH_MAX + 64];
    mr_session_word(words, MR_SESSION_ARG_RESUME, path, resume, sizeof resume);
    char files[1024] = "", dir[MR_PATH_MAX];
    mr_config old;
    mr_error perr = {0};
    snprintf(dir, sizeof dir, "%s", c->cfg_path);
    if (c->cfg_text != NULL &&
        mr_config_parse(c->cfg_text, "checkpoint", dirname(dir), &old, &perr) == MR_OK) {
        say_files(&old.data, &cfg->data, files, sizeof files);
        mr_config_free(&old);
    }
    const mr_fit_state *s = &c->state;
    const int more = c->train_examples > 0 && c->train_examples != n_train;
    if (more && s->step > 0)
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: the checkpoint is %lld updates into epoch %d of %lld training "
                            "examples, and the data has %lld now%s%s: its place in that epoch is "
                            "not one of this data; undo the edit, or resume from a checkpoint at "
                            "an epoch's end",
                            resume, (long long)s->step, s->epoch + 1, (long long)c->train_examples,
                            (long long)n_train, files[0] ? ": " : "", files);
    if (more)
        snprintf(
            buf, n,
            "The training data differs from the checkpoint's (%lld examples then, %lld now%s%s): "
            "training goes on with this data from the start of epoch %d, the weights and the "
            "optimizer state kept",
            (long long)c->train_examples, (long long)n_train, files[0] ? "; " : "", files,
            s->epoch + 1);
    else if (files[0])
        snprintf(buf, n,
                 "The data files differ from the checkpoint's (%s), with as many training examples "
                 "(%lld): training goes on from update %lld of epoch %d, as the uninterrupted run "
                 "only if the examples are the same",
                 files, (long long)n_train, (long long)s->step, s->epoch + 1);
    return MR_OK;
}
