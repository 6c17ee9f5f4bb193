/* mirrored.c: the public C API (include/mirrored.h): loading a model (the
 * one loader, session/session_model.h), its info and summary, saving it.
 * The job, the devices and the statuses are api_job.c, the replicas that
 * hold the weights api_replicas.c, fit api_fit.c, evaluate and predict
 * api_eval.c, caller arrays api_data.c. Nothing here prints: every failure
 * is a status with one line in the caller's error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api_internal.h"
#include "backends/backends.h"
#include "runtime/backend.h"
#include "session/session_checkpoints.h"
#include "session/session_overrides.h"
#include "models/keras_archive.h"

/* ---- the model --------------------------------------------------------- */

/* The .cfg read (cfg filled): its plan, whole archives of [data] named
 * member by member, and its own [net] values kept. */
static mr_status model_ready(mirrored_model *m, mr_error *err) {
    MR_CHECK(mr_model_plan_make(&m->plan, &m->cfg, err));
    const mr_session_overrides none = MR_SESSION_OVERRIDES_NONE;
    MR_CHECK(mr_session_apply_overrides(&none, &m->cfg, NULL, NULL, err));
    m->cfg_epochs = m->cfg.net.epochs;
    m->cfg_batch = m->cfg.net.global_batch;
    m->cfg_seed = m->cfg.net.seed;
    m->cfg_split = m->cfg.net.validation_split;
    atomic_init(&m->stop, 0);
    atomic_init(&m->busy, NULL);
    return MR_OK;
}

/* What path is (a checkpoint, a Keras model file, or a .cfg: the one
 * loader, session/session_model.h); a checkpoint's training stood where
 * it was written, at its rate. */
static mr_status load_file(mirrored_model *m, const char *path, mr_error *err) {
    MR_CHECK(mr_session_open(path, MR_SESSION_OPEN_ANY, &m->cfg, &m->ck, &m->source, err));
    snprintf(m->cfg_path, sizeof m->cfg_path, "%s",
             m->source == MR_SESSION_SOURCE_CKPT && m->ck.cfg_path[0] ? m->ck.cfg_path : path);
    if (m->source != MR_SESSION_SOURCE_CKPT) return MR_OK;
    m->global_step = m->ck.state.global_step;
    m->epochs_done = m->ck.state.epoch;
    m->lr = m->ck.lr;
    return MR_OK;
}

/* What identifies a file's version: the same inode, size and time. */
static int same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* A Keras file's or a checkpoint's weights, read now into m->host (the
 * file is read once, at the load: api_internal.h); `was` is path as the
 * load began: a file changed since is refused, not mixed. */
static mr_status read_weights_now(mirrored_model *m, const char *path, const struct stat *was,
                                  mr_error *err) {
    if (m->source == MR_SESSION_SOURCE_CFG) return MR_OK;
    int loaded;
    MR_CHECK(mr_backend_create(mr_backend_kind_cpu(), 0, &m->host_be, err));
    MR_CHECK(mr_model_init(&m->host, m->host_be, &m->cfg, 1, 0, err));
    MR_CHECK(mr_session_first_weights(path, m->source, &m->ck, &m->cfg, &m->host, &loaded, err));
    struct stat now;
    if (stat(path, &now) != 0 || !same_file(was, &now))
        return mr_error_set(err, MR_ERR_IO, "%s: changed while it was being loaded: load it again",
                            path);
    m->reps.first = &m->host;
    return MR_OK;
}

static mirrored_status model_new(mirrored_model **out, mirrored_error *err) {
    *out = calloc(1, sizeof **out);
    if (*out == NULL) {
        mr_error e = {0};
        mr_error_set(&e, MR_ERR_NOMEM, "out of memory for a model");
        return api_fail(err, &e);
    }
    return MIRRORED_OK;
}

MIRRORED_API mirrored_status mirrored_model_load(const char *path, mirrored_model **out,
                                                 mirrored_error *err) {
    if (path == NULL || out == NULL)
        return api_usage(err, "mirrored_model_load: path or out is NULL");
    *out = NULL;
    mirrored_model *m;
    if (model_new(&m, err) != MIRRORED_OK) return err ? err->status : MIRRORED_ERR_NOMEM;
    mr_error e = {0};
    snprintf(m->path, sizeof m->path, "%s", path);
    const char *base = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
    struct stat was = {0};
    (void)stat(path, &was); /* a path that is not there: load_file says so */
    mr_status st = load_file(m, path, &e);
    if (st == MR_OK) st = model_ready(m, &e);
    if (st == MR_OK) st = read_weights_now(m, path, &was, &e);
    /* under mpirun: one process's missing or damaged file fails them all */
    if (api_agree_call("load", st, api_crc_str(0, path), &e) != MR_OK) {
        mirrored_model_destroy(m);
        return api_fail(err, &e);
    }
    *out = m;
    return api_ok(err);
}

MIRRORED_API mirrored_status mirrored_model_from_config(const char *cfg_text, const char *name,
                                                        const char *folder, mirrored_model **out,
                                                        mirrored_error *err) {
    if (cfg_text == NULL || out == NULL)
        return api_usage(err, "mirrored_model_from_config: cfg_text or out is NULL");
    *out = NULL;
    mirrored_model *m;
    if (model_new(&m, err) != MIRRORED_OK) return err ? err->status : MIRRORED_ERR_NOMEM;
    mr_error e = {0};
    snprintf(m->name, sizeof m->name, "%s", name ? name : "<string>");
    if (folder != NULL && folder[0] != '\0')
        snprintf(m->cfg_path, sizeof m->cfg_path, "%s/%s", folder, m->name);
    else
        snprintf(m->cfg_path, sizeof m->cfg_path, "%s", m->name);
    m->source = MR_SESSION_SOURCE_CFG;
    mr_status st = mr_config_parse(cfg_text, m->name, folder, &m->cfg, &e);
    if (st == MR_OK) st = model_ready(m, &e);
    const uint32_t args =
        api_crc_str(api_crc_str(api_crc_str(0, cfg_text), m->name), folder ? folder : "");
    if (api_agree_call("from_config", st, args, &e) != MR_OK) {
        mirrored_model_destroy(m);
        return api_fail(err, &e);
    }
    *out = m;
    return api_ok(err);
}

MIRRORED_API void mirrored_model_destroy(mirrored_model *m) {
    if (m == NULL) return;
    mr_session_replicas_free(&m->reps);
    mr_model_free(&m->host); /* safe on a model never initialised */
    if (m->host_be != NULL) mr_backend_destroy(m->host_be);
    mr_checkpoint_free(&m->ck);
    mr_config_free(&m->cfg);
    free(m->mean);
    free(m->inv_std);
    free(m);
}

/* what mirrored_model_info.source calls it */
static const char *source_name(mr_session_source s) {
    return s == MR_SESSION_SOURCE_CKPT    ? "checkpoint"
           : s == MR_SESSION_SOURCE_KERAS ? "keras"
                                          : "cfg";
}

MIRRORED_API mirrored_status mirrored_model_get_info(const mirrored_model *m,
                                                     mirrored_model_info *info,
                                                     mirrored_error *err) {
    if (m == NULL || info == NULL)
        return api_usage(err, "mirrored_model_get_info: model or info is NULL");
    /* the counts a fit writes are read: not during one (busy is mutable) */
    mirrored_model *busy = (mirrored_model *)m;
    if (api_enter(busy, "get_info", err) != MIRRORED_OK) return MIRRORED_ERR_USAGE;
    const mr_layer_cfg *in = &m->cfg.layers[0];
    *info = (mirrored_model_info){.input_ndim = in->shape_rank,
                                  .outputs = (int)m->plan.out_size,
                                  .label_width = m->plan.label_width,
                                  .regression = m->plan.regression,
                                  .params = m->plan.n_params + m->plan.n_state,
                                  .epochs = m->cfg_epochs,
                                  .batch_size = m->cfg_batch,
                                  .has_data = m->cfg.data.train_images[0] != '\0',
                                  .metric = m->plan.regression ? "mae" : "accuracy",
                                  .source = source_name(m->source),
                                  .layers = m->plan.n_layers,
                                  .optimizer = mr_optimizer_name(m->cfg.net.optimizer),
                                  .updates = m->global_step};
    if (m->source == MR_SESSION_SOURCE_CKPT) {
        info->scale = m->ck.scale;
        info->standardized = m->ck.mean != NULL;
    } else {
        info->scale = m->cfg.data.scale;
        info->standardized = m->cfg.data.standardize;
    }
    for (int i = 0; i < in->shape_rank; i++)
        info->input_shape[i] = in->shape[i];
    api_leave(busy);
    return api_ok(err);
}

static mirrored_status summary(mirrored_model *m, char *buf, size_t size, mirrored_error *err) {
    mr_error e = {0};
    if (api_eval_strategy(m, NULL, 0, &e) != MR_OK) return api_fail(err, &e);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL) {
        mr_error_set(&e, MR_ERR_NOMEM, "out of memory for the summary");
        return api_fail(err, &e);
    }
    mr_model_summary(mr_strategy_replica(m->reps.s, 0), m->name, f);
    fclose(f);
    snprintf(buf, size, "%s", text ? text : "");
    free(text);
    return api_ok(err);
}

MIRRORED_API mirrored_status mirrored_model_summary(mirrored_model *m, char *buf, size_t size,
                                                    mirrored_error *err) {
    if (m == NULL || buf == NULL || size == 0)
        return api_usage(err, "mirrored_model_summary: model or buf is NULL, or size is 0");
    if (api_enter(m, "summary", err) != MIRRORED_OK) return MIRRORED_ERR_USAGE;
    const mirrored_status st = summary(m, buf, size, err);
    api_leave(m);
    return st;
}

/* ---- save -------------------------------------------------------------- */

/* PATH.h5: a mirrored checkpoint of where training stands (atomic). */
static mr_status save_checkpoint(mirrored_model *m, const char *path, mr_error *err) {
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    mr_dataset pre = {.scale = m->cfg.data.scale, .row = m->plan.in_size};
    if (m->have_stats) pre.mean = m->mean, pre.inv_std = m->inv_std;
    mr_ckpt_run r = {.lead = j->rank == 0,
                     .cfg = &m->cfg,
                     .cfg_path = m->cfg_path,
                     .plan = mr_strategy_plan(m->reps.s),
                     .processes = j->size,
                     .train = &pre,
                     .asked = 1};
    const mr_fit_state state = {.epoch = m->epochs_done, .global_step = m->global_step};
    if (!r.lead) return MR_OK;
    const float lr = m->lr > 0.0f ? m->lr : r.plan->base_lr;
    return mr_ckpt_write(&r, path, &state, mr_strategy_replica(m->reps.s, 0), lr, MR_RUN_END_NONE,
                         err);
}

/* PATH.keras of a model no call has built replicas for: its weights as
 * the load read them (m->host), written as Keras saves them. */
static mr_status save_keras_on_host(mirrored_model *m, const char *path, mr_error *err) {
    const float lr = m->lr > 0.0f ? m->lr : m->cfg.net.learning_rate;
    return mr_keras_archive_save_as(path, &m->host, MR_KERAS_ARCHIVE_SCALED, m->global_step, lr,
                                    err);
}

enum { SAVE_KERAS, SAVE_WEIGHTS, SAVE_CHECKPOINT };

/* PATH.weights.h5: Keras's weights-only file (model.save_weights,
 * load_weights), the model.weights.h5 of the .keras save would write, on
 * its own (atomic). */
static mr_status save_weights_file(const mirrored_model *m, const mr_model *md, const char *path,
                                   float lr, mr_error *err) {
    mr_h5 h;
    MR_CHECK(mr_h5_create(&h, path, err));
    mr_status st =
        mr_keras_write_archive_weights_as(&h, md, MR_KERAS_ARCHIVE_SCALED, m->global_step, lr, err);
    if (st != MR_OK) {
        mr_h5_discard(&h);
        return st;
    }
    return mr_h5_commit(&h, err);
}

/* The file of a save on this process: rank 0 writes .keras and
 * .weights.h5 (the others take part in building the replicas), and the
 * lead process a checkpoint (.h5). */
static mr_status save_file(mirrored_model *m, const char *path, int form, const mr_job *j,
                           mr_error *err) {
    if (m->reps.s == NULL && m->host_be != NULL && form != SAVE_CHECKPOINT) {
        /* a file's weights as they were read: no replicas needed */
        if (j->rank != 0) return MR_OK;
        if (form == SAVE_WEIGHTS) return save_weights_file(m, &m->host, path, 0.0f, err);
        return save_keras_on_host(m, path, err);
    }
    MR_CHECK(api_eval_strategy(m, NULL, 0, err)); /* on every process: a collective */
    if (form == SAVE_CHECKPOINT) return save_checkpoint(m, path, err);
    if (j->rank != 0) return MR_OK;
    const float lr = m->lr > 0.0f ? m->lr : mr_strategy_plan(m->reps.s)->base_lr;
    const mr_model *md = mr_strategy_replica(m->reps.s, 0);
    if (form == SAVE_WEIGHTS) return save_weights_file(m, md, path, lr, err);
    return mr_keras_archive_save_as(path, md, MR_KERAS_ARCHIVE_SCALED, m->global_step, lr, err);
}

static mirrored_status save(mirrored_model *m, const char *path, mirrored_error *err) {
    const size_t n = strlen(path);
    const int h5 = n > 3 && strcmp(path + n - 3, ".h5") == 0;
    const int weights = n > 11 && strcmp(path + n - 11, ".weights.h5") == 0;
    if (!h5 && !mr_keras_archive_named(path))
        return api_usage(err,
                         "%s: save writes PATH.keras (a Keras archive), PATH.weights.h5 (Keras's "
                         "weights-only file) or PATH.h5 (a mirrored checkpoint), not this "
                         "extension",
                         path);
    const int form = weights ? SAVE_WEIGHTS : h5 ? SAVE_CHECKPOINT : SAVE_KERAS;
    mr_error e = {0};
    mr_job *j;
    if (api_job(&j, &e) != MR_OK) return api_fail(err, &e);
    mr_status st = api_agree_call("save", MR_OK, api_crc_str(0, path), &e);
    if (st != MR_OK) return api_fail(err, &e);
    st = save_file(m, path, form, j, &e);
    /* every process returns once rank 0 has written the file, with its status */
    st = api_agree(st, &e);
    return st == MR_OK ? api_ok(err) : api_fail(err, &e);
}

/* PATH.keras from the model's own fit's epoch callback, on the fit's
 * thread (Keras's ModelCheckpoint): replica 0's weights at the end of the
 * epoch reported, the fit waiting meanwhile; rank 0 writes, no agreement
 * (every process is in its own callback). */
static mirrored_status save_in_epoch(mirrored_model *m, const char *path, mirrored_error *err) {
    if (!mr_keras_archive_named(path))
        return api_usage(err,
                         "%s: a save from a fit's epoch callback writes PATH.keras (a Keras "
                         "archive) only",
                         path);
    mr_error e = {0};
    mr_job *j;
    if (api_job(&j, &e) != MR_OK) return api_fail(err, &e);
    /* the strategy's state already counts the epoch reported */
    const mr_fit_state *at = mr_strategy_state(m->reps.s);
    const float lr = at->n_history > 0 ? at->history[at->n_history - 1].lr : m->lr;
    if (j->rank == 0 &&
        mr_keras_archive_save_as(path, mr_strategy_replica(m->reps.s, 0), MR_KERAS_ARCHIVE_SCALED,
                                 at->global_step, lr, &e) != MR_OK)
        return api_fail(err, &e);
    return api_ok(err);
}

MIRRORED_API mirrored_status mirrored_model_save(mirrored_model *m, const char *path,
                                                 mirrored_error *err) {
    if (m == NULL || path == NULL)
        return api_usage(err, "mirrored_model_save: model or path is NULL");
    if (api_in_epoch_callback() == m) return save_in_epoch(m, path, err);
    if (api_enter(m, "save", err) != MIRRORED_OK) return MIRRORED_ERR_USAGE;
    const mirrored_status st = save(m, path, err);
    api_leave(m);
    return st;
}
