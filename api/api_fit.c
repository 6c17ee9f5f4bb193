/* api_fit.c: mirrored_model_fit and mirrored_model_request_stop
 * (include/mirrored.h). A fit goes as mirrored_train's stages do, over
 * session/: the devices (mr_session_choose_devices), the batch the
 * arguments set (mr_session_check_batch), the data (the .cfg's through
 * mr_session_load_data, or the caller's arrays), the replicas with the
 * model's weights (api_replicas.c), normalization's adapt on a fresh model,
 * then mr_strategy_fit with the caller's callbacks, the stop flag and a
 * stop's checkpoint (mr_ckpt_on_stop, as on SIGTERM). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "session/session_checkpoints.h"
#include "session/session_data.h"
#include "session/session_devices.h"
#include "session/session_overrides.h"
#include "models/keras.h"
#include "strategies/check_sync.h"

/* ---- one fit ----------------------------------------------------------- */

/* What one call of mirrored_model_fit holds. */
typedef struct fit_run {
    const mirrored_model *m;
    const mirrored_fit_options *o;
    mr_dataset train; /* rows [0, n_train) train, the n_val after them validate */
    int64_t n_train, n_val;
    int first;      /* the model's epochs before this fit: its epochs go on from there */
    int epochs;     /* of this fit */
    int stop_after; /* the epoch callback asked to stop */
    float lr;       /* the rate at the end of the last epoch (0: none ended) */
    mr_augment aug, *augp;
    mr_ckpt_run ck_run;
    mr_fit_callbacks cb;
} fit_run;

static void on_step(void *user, const mr_step_info *i) {
    const fit_run *f = user;
    const mirrored_step_logs l = {.epoch = i->epoch,
                                  .step = i->step,
                                  .steps = i->steps,
                                  .loss = i->loss,
                                  .metric = i->accuracy};
    f->o->on_step(f->o->user, &l);
}

/* the model whose epoch callback runs on this thread (api_in_epoch_callback):
 * the fit waits there, its replicas' weights those of the epoch reported */
static _Thread_local const mirrored_model *in_epoch;

const mirrored_model *api_in_epoch_callback(void) {
    return in_epoch;
}

static void on_epoch_end(void *user, const mr_epoch_logs *e) {
    fit_run *f = user;
    f->lr = e->lr;
    if (f->o->on_epoch == NULL) return;
    const mirrored_epoch_logs l = {.epoch = e->epoch - f->first,
                                   .epochs = f->epochs,
                                   .loss = e->loss,
                                   .metric = e->accuracy,
                                   .has_val = e->has_val,
                                   .val_loss = e->val_loss,
                                   .val_metric = e->val_accuracy,
                                   .seconds = e->train_seconds,
                                   .samples_per_sec = e->samples_per_sec,
                                   .lr = e->lr};
    in_epoch = f->m;
    if (f->o->on_epoch(f->o->user, &l) != 0) f->stop_after = 1;
    in_epoch = NULL;
}

/* the epoch callback's verdict, asked right after it on the same thread */
static int stop_after_epoch(void *user, const mr_epoch_logs *e) {
    (void)e;
    return ((const fit_run *)user)->stop_after;
}

/* The options' own mistakes, before anything is read. */
static mr_status check_options(const mirrored_model *m, const mirrored_fit_options *o,
                               mr_error *err) {
    if (o->epochs < 0 || o->batch_size < 0 || o->max_steps < 0 || o->batch_size > (1 << 30))
        return mr_error_set(err, MR_ERR_USAGE,
                            "fit: epochs %d, batch_size %lld, max_steps %lld: none may be negative",
                            o->epochs, (long long)o->batch_size, (long long)o->max_steps);
    if (o->validation_split >= 1.0 || isnan(o->validation_split))
        return mr_error_set(err, MR_ERR_USAGE, "fit: validation_split %g: must be below 1",
                            o->validation_split);
    /* epochs go on from the model's: their sum is an int (a Keras epoch index) */
    if (o->epochs > INT_MAX - m->epochs_done)
        return mr_error_set(err, MR_ERR_USAGE,
                            "fit: epochs %d after the model's %d: more than %d in all", o->epochs,
                            m->epochs_done, INT_MAX);
    if ((o->x == NULL) != (o->y == NULL) || (o->val_x == NULL) != (o->val_y == NULL))
        return mr_error_set(err, MR_ERR_USAGE, "fit: give x with y, and val_x with val_y");
    if (o->x == NULL && o->val_x != NULL)
        return mr_error_set(err, MR_ERR_USAGE,
                            "fit: validation_data goes with x and y (the .cfg's data has its own)");
    if (o->x == NULL && m->cfg.data.train_images[0] == '\0')
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: names no training data ([data] train_images): give x and y",
                            m->name);
    return MR_OK;
}

static void restore_options(mirrored_model *m) {
    mr_net_cfg *net = &m->cfg.net;
    net->epochs = m->cfg_epochs;
    net->global_batch = m->cfg_batch;
    net->seed = m->cfg_seed;
    net->validation_split = m->cfg_split;
}

/* The options over the .cfg's [net] for this fit, as mirrored_train's
 * --epochs, --batch-size, --seed and --validation-split: the same session
 * call (mr_session_apply_overrides), its refusals in Keras's words. */
static mr_status apply_options(mirrored_model *m, const mirrored_fit_options *o, mr_error *err) {
    restore_options(m);
    const mr_session_overrides over = {.epochs = o->epochs,
                                       .seed = o->seed,
                                       .batch_size = o->batch_size,
                                       .validation_split = o->validation_split,
                                       .arrays = o->x != NULL};
    return mr_session_apply_overrides(&over, &m->cfg, NULL, NULL, err);
}

/* x and y, then validation_data after them (a copy: the rows are joined)
 * or the last validation_split of x held out; preprocessing as a .cfg's
 * data gets it (mr_session_load_data). */
static mr_status arrays_data(mirrored_model *m, const mirrored_fit_options *o, fit_run *f,
                             mr_error *err) {
    MR_CHECK(api_dataset_from_arrays(m, o->x, o->y, "fit", &f->train, err));
    if (o->val_x != NULL) {
        mr_dataset val;
        mr_status st = api_dataset_from_arrays(m, o->val_x, o->val_y, "validation_data", &val, err);
        const size_t bytes = (size_t)(f->train.n * f->train.row) * mr_dtype_size(f->train.x.dtype);
        void *own = st == MR_OK ? malloc(bytes ? bytes : 1) : NULL;
        if (st == MR_OK && own == NULL)
            st = mr_error_set(err, MR_ERR_NOMEM, "fit: out of memory for validation_data");
        if (own != NULL) f->train.x.data = memcpy(own, o->x->data, bytes);
        f->n_train = f->train.n;
        if (st == MR_OK) st = mr_dataset_append(&f->train, &val, err);
        api_dataset_free(&val, o->val_x);
        MR_CHECK(st);
    } else {
        const double split = m->cfg.net.validation_split;
        f->n_train = (int64_t)((double)f->train.n * (1.0 - split) + 1e-4);
        if (f->n_train < 1)
            return mr_error_set(err, MR_ERR_USAGE,
                                "fit: validation_split %g leaves no training examples of %lld",
                                split, (long long)f->train.n);
    }
    if (m->source == MR_SESSION_SOURCE_CKPT) return api_apply_stats(m, &f->train, err);
    f->train.scale = m->cfg.data.scale;
    if (m->cfg.data.standardize)
        MR_CHECK(mr_dataset_standardize(&f->train, &f->train, 0, f->n_train, err));
    return MR_OK;
}

/* The training data: the caller's arrays, or the .cfg's [data] (with the
 * checkpoint's preprocessing where the model is one, as --resume does). */
static mr_status fit_data(mirrored_model *m, const mirrored_fit_options *o, fit_run *f,
                          mr_error *err) {
    if (o->x != NULL) {
        MR_CHECK(arrays_data(m, o, f, err));
    } else {
        mr_dataset test = {0};
        const mr_model_plan *p = &m->plan;
        mr_status st = mr_session_load_data(&m->cfg, p->in_size, p->classes, p->label_width,
                                            p->regression, &f->train, &test, &f->n_train, err);
        mr_dataset_free(&test);
        MR_CHECK(st);
        if (m->source == MR_SESSION_SOURCE_CKPT)
            MR_CHECK(mr_ckpt_apply_preprocessing(&m->ck, &f->train, err));
    }
    f->n_val = f->train.n - f->n_train;
    return api_keep_stats(m, &f->train, err);
}

/* [augment] on an image input, as mirrored_train's augment stage. */
static mr_status fit_augment(const mirrored_model *m, fit_run *f, mr_error *err) {
    if (!m->cfg.augment.flip && !m->cfg.augment.shift) return MR_OK;
    MR_CHECK(mr_session_augment(&m->cfg, m->name, &f->aug, err));
    f->augp = &f->aug;
    return MR_OK;
}

/* The replicas for this fit, with the model's weights; a fresh model's
 * [normalization] layers adapt to the training rows, as mirrored_train's
 * load weights stage does. */
static mr_status fit_strategy(mirrored_model *m, const mirrored_fit_options *o, fit_run *f,
                              mr_error *err) {
    mr_session_key key = {.n_train = f->n_train,
                          .global_batch = m->cfg.net.global_batch,
                          .seed = m->cfg.net.seed,
                          .max_steps = o->max_steps > 0 ? m->global_step + o->max_steps : 0};
    MR_CHECK(api_devices(m, o->devices, 1, &key.devices, err));
    if (o->batch_size > 0) {
        mr_job *j;
        MR_CHECK(api_job(&j, err));
        MR_CHECK(mr_session_check_batch(o->batch_size, &m->cfg, &key.devices, j, NULL, err));
    }
    MR_CHECK(api_strategy(m, &key, err));
    if (m->reps.fitted || m->source != MR_SESSION_SOURCE_CFG) return MR_OK;
    int adapted = 0;
    MR_CHECK(
        mr_model_adapt(mr_strategy_replica(m->reps.s, 0), &f->train, f->n_train, &adapted, err));
    return adapted ? mr_strategy_sync_model(m->reps.s, err) : MR_OK;
}

/* The caller's callbacks, the stop flag and where a stop's checkpoint goes. */
static mr_status fit_callbacks(mirrored_model *m, const mirrored_fit_options *o, fit_run *f,
                               mr_error *err) {
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    f->ck_run = (mr_ckpt_run){.lead = j->rank == 0,
                              .cfg = &m->cfg,
                              .cfg_path = m->cfg_path,
                              .plan = mr_strategy_plan(m->reps.s),
                              .processes = j->size,
                              .train = &f->train,
                              .train_examples = f->n_train,
                              .stop_path = o->stop_checkpoint};
    f->cb = (mr_fit_callbacks){.user = f,
                               .on_step = o->on_step ? on_step : NULL,
                               .on_epoch_end = on_epoch_end,
                               .stop_after_epoch = o->on_epoch ? stop_after_epoch : NULL,
                               .save_user = &f->ck_run,
                               .stop = &m->stop,
                               .on_stop = mr_ckpt_on_stop};
    return MR_OK;
}

/* The epochs, going on from the model's last fit: its epoch count (so each
 * epoch has its own order of the examples, as the epochs of one fit do) and
 * update count (the learning rate's schedule and Adam's step); fit(1) twice
 * is fit(2) on the same data. */
static mr_status fit_epochs(mirrored_model *m, fit_run *f, mr_error *err) {
    const mr_fit_state from = {.epoch = f->first, .global_step = m->global_step};
    return mr_strategy_fit(m->reps.s, &f->train, f->n_train, f->n_train, f->n_val,
                           f->first + f->epochs, f->augp, &from, &f->cb, err);
}

/* Where the model stands after the fit, and what the caller is told. */
static mr_status fit_result(mirrored_model *m, const fit_run *f, mirrored_fit_result *r,
                            mr_error *err) {
    const mr_fit_state *at = mr_strategy_state(m->reps.s);
    const int stopped = mr_strategy_stopped(m->reps.s);
    m->global_step = at->global_step;
    m->epochs_done = at->epoch;
    if (f->lr > 0.0f) m->lr = f->lr;
    if (r == NULL) return MR_OK;
    *r = (mirrored_fit_result){.epochs = m->epochs_done,
                               .updates = m->global_step,
                               .stopped = stopped,
                               .early_stopped = f->stop_after ||
                                                mr_strategy_fit_end(m->reps.s).early_stopped > 0,
                               .replicas = mr_strategy_plan(m->reps.s)->replicas};
    return mr_params_hash(mr_strategy_replica(m->reps.s, 0), &r->params_hash, err);
}

/* The file's weights read at the load (api_internal.h) are the replicas'
 * once a fit has begun: their host copy goes. */
static void drop_loaded_weights(mirrored_model *m) {
    if (m->host_be == NULL) return;
    m->reps.first = NULL;
    mr_model_free(&m->host);
    m->host = (mr_model){0};
    mr_backend_destroy(m->host_be);
    m->host_be = NULL;
}

/* This process's part before the job's work: the options and the data. */
static mr_status fit_prepare(mirrored_model *m, const mirrored_fit_options *o, fit_run *f,
                             mr_error *err) {
    MR_CHECK(check_options(m, o, err));
    MR_CHECK(apply_options(m, o, err));
    f->m = m;
    f->o = o;
    f->epochs = m->cfg.net.epochs;
    f->first = m->epochs_done;
    MR_CHECK(fit_data(m, o, f, err));
    return fit_augment(m, f, err);
}

/* The fit's arguments, as api_agree_call compares them (the callbacks
 * and their user pointer are each process's own). */
static uint32_t fit_args(const mirrored_fit_options *o) {
    if (!api_many_processes()) return 0;
    const int64_t v[] = {o->epochs, o->batch_size, o->seed, o->max_steps};
    uint32_t c = api_crc(0, v, sizeof v);
    c = api_crc(c, &o->validation_split, sizeof o->validation_split);
    c = api_crc_str(api_crc_str(c, o->devices), o->stop_checkpoint);
    c = api_crc_array(api_crc_array(c, o->x), o->y);
    return api_crc_array(api_crc_array(c, o->val_x), o->val_y);
}

static mr_status fit(mirrored_model *m, const mirrored_fit_options *o, fit_run *f,
                     mirrored_fit_result *r, mr_error *err) {
    MR_CHECK(api_agree_call("fit", fit_prepare(m, o, f, err), fit_args(o), err));
    MR_CHECK(fit_strategy(m, o, f, err));
    MR_CHECK(fit_callbacks(m, o, f, err));
    m->reps.fitted = 1; /* from here the weights are the strategy's */
    drop_loaded_weights(m);
    /* a failed fit (a stop's checkpoint unwritable, a NaN loss) keeps the
     * updates it made in the weights: the counts follow them, and the
     * caller is told them with the failure */
    const mr_status st = fit_epochs(m, f, err);
    mr_error after = {0};
    const mr_status rs = fit_result(m, f, r, st == MR_OK ? err : &after);
    return st != MR_OK ? st : rs;
}

MIRRORED_API mirrored_fit_options mirrored_fit_options_default(void) {
    return (mirrored_fit_options){.struct_version = MIRRORED_FIT_OPTIONS_VERSION,
                                  .devices = "auto",
                                  .validation_split = -1.0,
                                  .seed = -1};
}

MIRRORED_API mirrored_status mirrored_model_fit(mirrored_model *m, const mirrored_fit_options *o,
                                                mirrored_fit_result *result, mirrored_error *err) {
    if (m == NULL || o == NULL)
        return api_usage(err, "mirrored_model_fit: model or options is NULL");
    if (o->struct_version != MIRRORED_FIT_OPTIONS_VERSION)
        return api_usage(err,
                         "mirrored_model_fit: options of struct_version %d; this library reads "
                         "version %d (start from mirrored_fit_options_default())",
                         o->struct_version, MIRRORED_FIT_OPTIONS_VERSION);
    if (result != NULL) *result = (mirrored_fit_result){0};
    if (api_enter(m, "fit", err) != MIRRORED_OK) return MIRRORED_ERR_USAGE;
    mr_error e = {0};
    fit_run f = {0};
    mr_status st = fit(m, o, &f, result, &e);
    st = api_agree(st, &e); /* one process's failure is every process's */
    /* the replicas' communicator may stand aborted after a failure (a
     * failing replica aborts it for its siblings): the next call builds
     * fresh replicas with replica 0's weights, state and slots, on every
     * process alike (after the agreement) */
    if (st != MR_OK) m->reps.stale = 1;
    atomic_store(&m->stop, 0); /* a stop asked after the last update is not the next fit's */
    restore_options(m);
    api_dataset_free(&f.train, o->x);
    api_leave(m);
    return st == MR_OK ? api_ok(err) : api_fail(err, &e);
}

MIRRORED_API void mirrored_model_request_stop(mirrored_model *m) {
    if (m != NULL) atomic_store(&m->stop, 1);
}
