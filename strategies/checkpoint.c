/* checkpoint.c: training checkpoints (checkpoint.h). */
#include "strategies/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/keras.h"
#include "runtime/file_kind.h"
#include "runtime/isolate.h"
#include "runtime/h5file.h"

#define FORMAT "mirrored checkpoint"
/* 2: with the checksums of runtime/h5file.h */
#define FORMAT_VERSION 2

/* ---- writing ----------------------------------------------------------- */

static mr_status put_i64(mr_h5 *h, hid_t g, const char *name, int64_t v, mr_error *err) {
    return mr_h5_write(h, g, name, MR_H5_I64, 0, NULL, &v, err);
}

static mr_status put_f64(mr_h5 *h, hid_t g, const char *name, double v, mr_error *err) {
    return mr_h5_write(h, g, name, MR_H5_F64, 0, NULL, &v, err);
}

/* The finished epochs' logs: one array per field, in /mirrored/history, in
 * the order of put_history's and get_history's field tables. */
#define HISTORY_FIELDS 8
static const char *const history_names[HISTORY_FIELDS] = {
    "history/loss",    "history/accuracy",      "history/val_loss",        "history/val_accuracy",
    "history/has_val", "history/train_seconds", "history/samples_per_sec", "history/learning_rate"};

static mr_status put_history(mr_h5 *h, hid_t g, const mr_fit_state *s, mr_error *err) {
    const int64_t n = s->n_history;
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (v == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    mr_status st = MR_OK;
    for (int f = 0; st == MR_OK && f < HISTORY_FIELDS; f++) {
        for (int64_t e = 0; e < n; e++) {
            const mr_epoch_logs *l = &s->history[e];
            double x[8] = {l->loss,
                           l->accuracy,
                           l->val_loss,
                           l->val_accuracy,
                           (double)l->has_val,
                           l->train_seconds,
                           l->samples_per_sec,
                           (double)l->lr};
            v[e] = x[f];
        }
        st = mr_h5_write(h, g, history_names[f], MR_H5_F64, 1, &n, v, err);
    }
    free(v);
    return st;
}

static const char *const run_end_names[] = {"", "epochs", "early_stopping", "max_steps"};
_Static_assert(sizeof run_end_names / sizeof run_end_names[0] == MR_RUN_END_MAX_STEPS + 1,
               "a name for every mr_run_end");

const char *mr_run_end_name(mr_run_end why) {
    return why > MR_RUN_END_NONE && why <= MR_RUN_END_MAX_STEPS ? run_end_names[why] : "";
}

/* /mirrored/ended: only in a file written after its run ended */
static mr_status put_ended(mr_h5 *h, hid_t g, const mr_checkpoint_end *e, mr_error *err) {
    if (e->why == MR_RUN_END_NONE) return MR_OK;
    MR_CHECK(mr_h5_write_str(h, g, "ended/reason", mr_run_end_name(e->why), err));
    MR_CHECK(put_i64(h, g, "ended/epoch", e->epoch, err));
    MR_CHECK(put_i64(h, g, "ended/step", e->step, err));
    return put_i64(h, g, "ended/global_step", e->global_step, err);
}

static mr_status put_mirrored(mr_h5 *h, const mr_checkpoint *c, mr_error *err) {
    hid_t g;
    MR_CHECK(mr_h5_group(h, h->file, "mirrored", &g, err));
    const mr_fit_state *s = &c->state;
    mr_status st = mr_h5_attr_str(h, g, "format", FORMAT, 0, err);
    if (st == MR_OK) st = mr_h5_attr_str(h, g, "mirrored_version", MR_VERSION, 0, err);
    /* datasets, not attributes: a damaged one is then named by the checksums
     * (runtime/h5file.h) */
    if (st == MR_OK) st = mr_h5_write_str(h, g, "cfg", c->cfg_text ? c->cfg_text : "", err);
    if (st == MR_OK) st = mr_h5_write_str(h, g, "cfg_path", c->cfg_path, err);
    if (st == MR_OK) st = put_i64(h, g, "format_version", FORMAT_VERSION, err);
    if (st == MR_OK) st = put_i64(h, g, "replicas", c->replicas, err);
    if (st == MR_OK) st = put_i64(h, g, "processes", c->processes, err);
    if (st == MR_OK) st = put_i64(h, g, "global_batch", c->global_batch, err);
    if (st == MR_OK) st = put_i64(h, g, "seed", c->seed, err);
    if (st == MR_OK) st = put_i64(h, g, "epoch", s->epoch, err);
    if (st == MR_OK) st = put_i64(h, g, "step", s->step, err);
    if (st == MR_OK) st = put_i64(h, g, "position", s->position, err);
    if (st == MR_OK) st = put_i64(h, g, "global_step", s->global_step, err);
    if (st == MR_OK) st = put_i64(h, g, "seen", s->seen, err);
    if (st == MR_OK) st = put_f64(h, g, "epoch_loss", s->epoch_loss, err);
    if (st == MR_OK) st = put_f64(h, g, "epoch_correct", s->epoch_correct, err);
    if (st == MR_OK) st = put_f64(h, g, "epoch_seconds", s->epoch_seconds, err);
    if (st == MR_OK) st = put_f64(h, g, "previous_save_seconds", c->previous_save_s, err);
    if (st == MR_OK && c->train_examples > 0)
        st = put_i64(h, g, "train_examples", c->train_examples, err);
    if (st == MR_OK) st = mr_h5_write(h, g, "learning_rate", MR_H5_F32, 0, NULL, &c->lr, err);
    if (st == MR_OK) st = put_history(h, g, s, err);
    if (st == MR_OK) st = put_ended(h, g, &c->ended, err);
    if (st == MR_OK)
        st = mr_h5_write(h, g, "preprocessing/scale", MR_H5_F32, 0, NULL, &c->scale, err);
    if (st == MR_OK && c->mean != NULL)
        st = mr_h5_write(h, g, "preprocessing/mean", MR_H5_F32, 1, &c->row, c->mean, err);
    if (st == MR_OK && c->inv_std != NULL)
        st = mr_h5_write(h, g, "preprocessing/inv_std", MR_H5_F32, 1, &c->row, c->inv_std, err);
    if (st == MR_OK && c->class_names != NULL)
        st = mr_h5_write_str(h, g, "class_names", c->class_names, err);
    H5Gclose(g);
    return st;
}

mr_status mr_checkpoint_save(const char *path, const mr_model *m, const mr_checkpoint *c,
                             mr_error *err) {
    mr_h5 h;
    MR_CHECK(mr_h5_create_checked(&h, path, err)); /* commit adds the checksums */
    mr_status st = mr_keras_write_h5(&h, m, c->state.global_step, c->lr, err);
    if (st == MR_OK) st = put_mirrored(&h, c, err);
    if (st != MR_OK) {
        mr_h5_discard(&h);
        return st;
    }
    return mr_h5_commit(&h, err);
}

/* ---- reading ----------------------------------------------------------- */

static mr_status get_i64(mr_h5 *h, hid_t g, const char *name, int64_t *v, mr_error *err) {
    return mr_h5_read(h, g, name, MR_H5_I64, 0, NULL, v, err);
}

static mr_status get_int(mr_h5 *h, hid_t g, const char *name, int *v, mr_error *err) {
    int64_t x = 0;
    MR_CHECK(get_i64(h, g, name, &x, err));
    *v = (int)x;
    return MR_OK;
}

static mr_status get_f64(mr_h5 *h, hid_t g, const char *name, double *v, mr_error *err) {
    return mr_h5_read(h, g, name, MR_H5_F64, 0, NULL, v, err);
}

static mr_status get_history(mr_h5 *h, hid_t g, mr_fit_state *s, mr_error *err) {
    int rank;
    int64_t n;
    MR_CHECK(mr_h5_shape(h, g, "history/loss", &rank, &n, err));
    if (rank != 1 || n < 0 || n > 1000000)
        return mr_error_set(err, MR_ERR_DATA, "%s: /mirrored/history/loss: not a list of epochs",
                            h->path);
    s->history = calloc((size_t)(n ? n : 1), sizeof *s->history);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (s->history == NULL || v == NULL) {
        free(v);
        return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    }
    mr_status st = MR_OK;
    for (int f = 0; st == MR_OK && f < HISTORY_FIELDS; f++) {
        st = mr_h5_read(h, g, history_names[f], MR_H5_F64, 1, &n, v, err);
        for (int64_t e = 0; st == MR_OK && e < n; e++) {
            mr_epoch_logs *l = &s->history[e];
            l->epoch = (int)e;
            double *dst[8] = {&l->loss, &l->accuracy,      &l->val_loss,        &l->val_accuracy,
                              NULL,     &l->train_seconds, &l->samples_per_sec, NULL};
            if (f == 4)
                l->has_val = v[e] != 0.0;
            else if (f == 7)
                l->lr = (float)v[e];
            else
                *dst[f] = v[e];
        }
    }
    free(v);
    s->n_history = (int)n;
    return st;
}

/* /mirrored/ended when the file has it (else why stays MR_RUN_END_NONE) */
static mr_status get_ended(mr_h5 *h, hid_t g, mr_checkpoint_end *e, mr_error *err) {
    if (!mr_h5_exists(h, g, "ended")) return MR_OK;
    char *reason = NULL;
    MR_CHECK(mr_h5_read_str(h, g, "ended/reason", &reason, err));
    for (int i = MR_RUN_END_EPOCHS; i <= MR_RUN_END_MAX_STEPS; i++)
        if (strcmp(reason, run_end_names[i]) == 0) e->why = (mr_run_end)i;
    mr_status st = MR_OK;
    if (e->why == MR_RUN_END_NONE)
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s: /mirrored/ended/reason '%s': not epochs, early_stopping or "
                          "max_steps",
                          h->path, reason);
    free(reason);
    if (st == MR_OK) st = get_int(h, g, "ended/epoch", &e->epoch, err);
    if (st == MR_OK) st = get_i64(h, g, "ended/step", &e->step, err);
    if (st == MR_OK) st = get_i64(h, g, "ended/global_step", &e->global_step, err);
    return st;
}

/* A file without our checksums is refused below (no /mirrored group, or
 * one without its checksum), but HDF5 parses it to say so: tried first in
 * a child process (runtime/isolate.h), a crash there is the refusal. */
static mr_status open_unsealed(void *arg) {
    const char *path = arg;
    mr_h5 h;
    mr_error err = {0};
    MR_CHECK(mr_h5_open(&h, path, &err));
    hid_t g = -1;
    mr_status st = mr_h5_open_group(&h, h.file, "mirrored", &g, &err);
    if (g >= 0) H5Gclose(g);
    mr_h5_close(&h);
    return st;
}

mr_status mr_checkpoint_load(const char *path, mr_checkpoint *c, mr_error *err) {
    memset(c, 0, sizeof *c);
    MR_CHECK(mr_file_check(path, MR_FILE_WANT_CHECKPOINT, err)); /* a .keras, a SavedModel */
    int sealed;
    MR_CHECK(mr_h5_verify(path, &sealed, err));
    if (!sealed) MR_CHECK(mr_isolate(path, "the HDF5 library", open_unsealed, (void *)path, err));
    mr_h5 h;
    MR_CHECK(mr_h5_open(&h, path, err));
    hid_t g = -1;
    char *format = NULL, *cfg_path = NULL;
    int64_t version = 0;
    mr_status st = mr_h5_open_group(&h, h.file, "mirrored", &g, err);
    if (st != MR_OK) {
        mr_error_clear(err);
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s: no /mirrored group: not a mirrored checkpoint (a model Keras "
                          "wrote can start a run with --init-weights)",
                          path);
        goto done;
    }
    st = mr_h5_read_attr_str(&h, g, "format", &format, err);
    if (st == MR_OK && strcmp(format, FORMAT) != 0)
        st = mr_error_set(err, MR_ERR_DATA, "%s: /mirrored: format '%s', not '" FORMAT "'", path,
                          format);
    if (st == MR_OK) st = get_i64(&h, g, "format_version", &version, err);
    if (st == MR_OK && version != FORMAT_VERSION)
        st = mr_error_set(err, MR_ERR_DATA,
                          "%s: checkpoint format version %lld; this mirrored reads version %d",
                          path, (long long)version, FORMAT_VERSION);
    if (st == MR_OK) st = mr_h5_read_str(&h, g, "cfg", &c->cfg_text, err);
    if (st == MR_OK) st = mr_h5_read_str(&h, g, "cfg_path", &cfg_path, err);
    if (st == MR_OK) snprintf(c->cfg_path, sizeof c->cfg_path, "%s", cfg_path);
    mr_fit_state *s = &c->state;
    if (st == MR_OK) st = get_int(&h, g, "replicas", &c->replicas, err);
    if (st == MR_OK) st = get_int(&h, g, "processes", &c->processes, err);
    if (st == MR_OK) st = get_int(&h, g, "global_batch", &c->global_batch, err);
    if (st == MR_OK) st = get_i64(&h, g, "seed", &c->seed, err);
    if (st == MR_OK) st = get_int(&h, g, "epoch", &s->epoch, err);
    if (st == MR_OK) st = get_i64(&h, g, "step", &s->step, err);
    if (st == MR_OK) st = get_i64(&h, g, "position", &s->position, err);
    if (st == MR_OK) st = get_i64(&h, g, "global_step", &s->global_step, err);
    if (st == MR_OK) st = get_i64(&h, g, "seen", &s->seen, err);
    if (st == MR_OK) st = get_f64(&h, g, "epoch_loss", &s->epoch_loss, err);
    if (st == MR_OK) st = get_f64(&h, g, "epoch_correct", &s->epoch_correct, err);
    if (st == MR_OK) st = get_f64(&h, g, "epoch_seconds", &s->epoch_seconds, err);
    if (st == MR_OK) st = get_f64(&h, g, "previous_save_seconds", &c->previous_save_s, err);
    /* absent in files written before it was kept: 0, unknown */
    if (st == MR_OK && mr_h5_exists(&h, g, "train_examples"))
        st = get_i64(&h, g, "train_examples", &c->train_examples, err);
    if (st == MR_OK) st = mr_h5_read(&h, g, "learning_rate", MR_H5_F32, 0, NULL, &c->lr, err);
    if (st == MR_OK) st = get_history(&h, g, s, err);
    if (st == MR_OK) st = get_ended(&h, g, &c->ended, err);
    if (st == MR_OK)
        st = mr_h5_read(&h, g, "preprocessing/scale", MR_H5_F32, 0, NULL, &c->scale, err);
    if (st == MR_OK && mr_h5_exists(&h, g, "preprocessing/mean")) {
        int rank;
        st = mr_h5_shape(&h, g, "preprocessing/mean", &rank, &c->row, err);
        if (st == MR_OK && (rank != 1 || c->row < 1 || c->row > (1 << 28)))
            st =
                mr_error_set(err, MR_ERR_DATA, "%s: /mirrored/preprocessing/mean: bad shape", path);
        if (st == MR_OK) {
            c->mean = malloc(sizeof(float) * (size_t)c->row);
            c->inv_std = malloc(sizeof(float) * (size_t)c->row);
            if (c->mean == NULL || c->inv_std == NULL)
                st = mr_error_set(err, MR_ERR_NOMEM, "out of memory");
        }
        if (st == MR_OK)
            st = mr_h5_read(&h, g, "preprocessing/mean", MR_H5_F32, 1, &c->row, c->mean, err);
        if (st == MR_OK)
            st = mr_h5_read(&h, g, "preprocessing/inv_std", MR_H5_F32, 1, &c->row, c->inv_std, err);
    }
    if (st == MR_OK && mr_h5_exists(&h, g, "class_names"))
        st = mr_h5_read_str(&h, g, "class_names", &c->class_names, err);
    if (st == MR_OK &&
        (c->replicas < 1 || c->global_batch < 1 || s->epoch < 0 || s->step < 0 || s->position < 0 ||
         s->global_step < 0 || s->n_history > s->epoch + 1 ||
         !(c->previous_save_s >= 0.0 && c->previous_save_s < 1e9) ||
         (c->ended.why != MR_RUN_END_NONE && (c->ended.epoch < s->epoch || c->ended.step < 0 ||
                                              c->ended.global_step < s->global_step))))
        st = mr_error_set(err, MR_ERR_DATA, "%s: /mirrored: inconsistent training state", path);
done:
    free(format);
    free(cfg_path);
    if (g >= 0) H5Gclose(g);
    mr_h5_close(&h);
    if (st != MR_OK) mr_checkpoint_free(c);
    return st;
}

mr_status mr_checkpoint_load_model(const char *path, mr_model *m, int with_optimizer,
                                   mr_error *err) {
    int64_t step = 0;
    const int slots = with_optimizer && mr_optimizer_slot_count(&m->opt) > 0;
    return mr_keras_load(path, m, 1, slots ? &step : NULL, err);
}

void mr_checkpoint_free(mr_checkpoint *c) {
    free(c->cfg_text);
    free(c->state.history);
    free(c->mean);
    free(c->inv_std);
    free(c->class_names);
    memset(c, 0, sizeof *c);
}

mr_status mr_checkpoint_set_ended(const char *path, const mr_checkpoint_end *end, mr_model *m,
                                  mr_error *err) {
    mr_checkpoint c;
    MR_CHECK(mr_checkpoint_load(path, &c, err));
    mr_status st = mr_checkpoint_load_model(path, m, 1, err);
    c.ended = *end;
    if (st == MR_OK) st = mr_checkpoint_save(path, m, &c, err);
    mr_checkpoint_free(&c);
    return st;
}

/* ---- file names --------------------------------------------------------- */

/* Splits "dir/name.h5" into dir, "name-step", ".h5"; a folder "dir/"
 * (a trailing slash) into dir, "step", ".h5". */
static void split_pattern(const char *pattern, char *dir, char *stem, char *ext, size_t n) {
    char tmp[MR_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", pattern);
    size_t len = strlen(tmp);
    if (len > 1 && tmp[len - 1] == '/') {
        while (len > 1 && tmp[len - 1] == '/')
            tmp[--len] = '\0';
        snprintf(dir, n, "%s", tmp);
        snprintf(stem, n, "step");
        snprintf(ext, n, ".h5");
        return;
    }
    snprintf(dir, n, "%s", dirname(tmp));
    snprintf(tmp, sizeof tmp, "%s", pattern);
    const char *base = basename(tmp);
    const char *dot = strrchr(base, '.');
    if (dot == NULL || dot == base) dot = base + strlen(base);
    snprintf(stem, n, "%.*s-step", (int)(dot - base), base);
    snprintf(ext, n, "%s", *dot ? dot : ".h5");
}

void mr_checkpoint_name(const char *pattern, int64_t step, char *buf, size_t n) {
    char dir[MR_PATH_MAX], stem[MR_PATH_MAX], ext[MR_PATH_MAX];
    split_pattern(pattern, dir, stem, ext, sizeof dir);
    snprintf(buf, n, "%s/%s%09lld%s", dir, stem, (long long)step, ext);
}

/* The steps of PATTERN's checkpoints in its folder, sorted ascending. */
static mr_status list_steps(const char *pattern, int64_t **steps, int *count, mr_error *err) {
    char dir[MR_PATH_MAX], stem[MR_PATH_MAX], ext[MR_PATH_MAX];
    split_pattern(pattern, dir, stem, ext, sizeof dir);
    *steps = NULL, *count = 0;
    DIR *d = opendir(dir);
    if (d == NULL) return mr_error_set(err, MR_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *e;
    size_t sl = strlen(stem), el = strlen(ext);
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        size_t len = strlen(nm);
        if (len != sl + 9 + el || strncmp(nm, stem, sl) != 0 || strcmp(nm + len - el, ext) != 0)
            continue;
        char digits[10];
        memcpy(digits, nm + sl, 9);
        digits[9] = '\0';
        if (strspn(digits, "0123456789") != 9) continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *more = realloc(*steps, sizeof(int64_t) * (size_t)cap);
            if (more == NULL) {
                closedir(d);
                return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
            }
            *steps = more;
        }
        (*steps)[(*count)++] = atoll(digits);
    }
    closedir(d);
    for (int i = 1; i < *count; i++) /* insertion sort: a few files */
        for (int j = i; j > 0 && (*steps)[j - 1] > (*steps)[j]; j--) {
            int64_t t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
        }
    return MR_OK;
}

mr_status mr_checkpoint_newest(const char *pattern, char *buf, size_t n, mr_error *err) {
    int64_t *steps;
    int count;
    MR_CHECK(list_steps(pattern, &steps, &count, err));
    if (count == 0) {
        char dir[MR_PATH_MAX], stem[MR_PATH_MAX], ext[MR_PATH_MAX];
        split_pattern(pattern, dir, stem, ext, sizeof dir);
        free(steps);
        return mr_error_set(err, MR_ERR_IO, "no checkpoint %s*%s in %s", stem, ext, dir);
    }
    mr_checkpoint_name(pattern, steps[count - 1], buf, n);
    free(steps);
    return MR_OK;
}

mr_status mr_checkpoint_verify(const char *path, mr_error *err) {
    mr_h5 h;
    MR_CHECK(mr_h5_open(&h, path, err)); /* checks the checksums */
    mr_h5_close(&h);
    return MR_OK;
}

mr_status mr_checkpoint_skip_damaged(const char *pattern, char *path, size_t n,
                                     mr_checkpoint_note note, void *user, mr_error *err) {
    if (mr_checkpoint_verify(path, err) == MR_OK) return MR_OK;
    mr_error first = *err; /* reported when no older file is intact */
    int64_t *steps;
    int count;
    MR_CHECK(list_steps(pattern, &steps, &count, err));
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", first.msg);
    mr_status st = MR_ERR_DATA;
    /* from the newest down, skipping the damaged file and any newer one */
    for (int i = count - 1; st != MR_OK && i >= 0; i--) {
        char name[MR_PATH_MAX + 64];
        mr_checkpoint_name(pattern, steps[i], name, sizeof name);
        if (strcmp(name, path) >= 0) continue; /* 9-digit steps: names sort */
        if (note != NULL) {
            char line[sizeof why + sizeof name + 64];
            snprintf(line, sizeof line, "%s; trying the previous checkpoint %s", why, name);
            note(user, line);
        }
        mr_error_clear(err);
        st = mr_checkpoint_verify(name, err);
        if (st == MR_OK)
            snprintf(path, n, "%s", name);
        else
            snprintf(why, sizeof why, "%s", err->msg);
    }
    free(steps);
    if (st != MR_OK) *err = first;
    return st;
}

mr_status mr_checkpoint_prune(const char *pattern, int keep, mr_error *err) {
    int64_t *steps;
    int count;
    MR_CHECK(list_steps(pattern, &steps, &count, err));
    mr_status st = MR_OK;
    for (int i = 0; i + keep < count; i++) {
        char name[MR_PATH_MAX + 64];
        mr_checkpoint_name(pattern, steps[i], name, sizeof name);
        if (unlink(name) != 0 && errno != ENOENT)
            st = mr_error_set(err, MR_ERR_IO, "%s: cannot delete: %s", name, strerror(errno));
    }
    free(steps);
    return st;
}
