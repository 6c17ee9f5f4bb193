/* api_fit.c: mirrored_model_fit and mirrored_model_request_stop
 * (include/mirrored.h), and the replicas that hold a model's weights
 * between calls. A fit goes as mirrored_train's stages do (launch/): the
 * devices (mr_train_choose_devices), the data (the .cfg's through
 * mr_train_load_data, or the caller's arrays), the strategy with the
 * model's weights, normalization's adapt on a fresh model, then
 * mr_strategy_fit with the caller's callbacks, the stop flag and a stop's
 * checkpoint (mr_ckpt_on_stop, as on SIGTERM). */
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "launch/train_checkpoints.h"
#include "launch/train_load.h"
#include "models/keras.h"
#include "strategies/check_sync.h"

mr_status api_devices(mirrored_model *m, const char *spec, int for_fit, mr_device_set *set,
                      mr_error *err) {
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    mr_device_env env;
    char conflict[sizeof err->msg];
    MR_CHECK(mr_devices_job_env(j, &env, conflict, sizeof conflict, err));
    spec = spec != NULL ? spec : "auto";
    *set = (mr_device_set){0};
    if (for_fit) return mr_train_choose_devices(spec, j, &env, &m->cfg, set, err);
    return mr_devices_parse(spec, &env, set, err);
}

static int same_devices(const mr_device_set *a, const mr_device_set *b) {
    if (strcmp(a->kind, b->kind) != 0 || a->count != b->count) return 0;
    for (int i = 0; i < a->count; i++)
        if (a->ordinals[i] != b->ordinals[i]) return 0;
    return 1;
}

static int same_key(const api_key *a, const api_key *b) {
    return same_devices(&a->devices, &b->devices) && a->n_train == b->n_train &&
           a->global_batch == b->global_batch && a->seed == b->seed && a->max_steps == b->max_steps;
}

/* n floats of src's memory `from` into dst's `to`, through the host in
 * pieces the models' staging buffers hold. */
static mr_status copy_floats(const mr_model *src, const mr_dfloat *from, mr_model *dst,
                             mr_dfloat *to, int64_t n, mr_error *err) {
    if (from == NULL || to == NULL || n <= 0) return MR_OK;
    int64_t piece = n;
    if (src->host_floats > 0 && (int64_t)src->host_floats < piece)
        piece = (int64_t)src->host_floats;
    if (dst->host_floats > 0 && (int64_t)dst->host_floats < piece)
        piece = (int64_t)dst->host_floats;
    for (int64_t at = 0; at < n; at += piece) {
        const size_t c = (size_t)(n - at < piece ? n - at : piece);
        const float *h;
        MR_CHECK(mr_model_read(src, mr_dfloat_at_c(from, at), c, &h, err));
        mr_dfloat *t = mr_dfloat_at(to, at);
        float *w = mr_model_host_for(dst, t);
        memmove(w, h, c * sizeof(float));
        MR_CHECK(mr_model_write(dst, t, w, c, err));
    }
    return MR_OK;
}

/* The weights, state and optimizer slots of a's replica 0 into b's. */
static mr_status move_weights(mr_strategy *a, mr_strategy *b, mr_error *err) {
    const mr_model *s = mr_strategy_replica(a, 0);
    mr_model *d = mr_strategy_replica(b, 0);
    MR_CHECK(copy_floats(s, s->params, d, d->params, s->n_params, err));
    MR_CHECK(copy_floats(s, s->state, d, d->state, s->n_state, err));
    for (int k = 0; k < 2; k++)
        MR_CHECK(copy_floats(s, s->slots[k], d, d->slots[k], s->n_params, err));
    return MR_OK;
}

/* The model's first weights into s's replica 0: a checkpoint's (with its
 * optimizer slots where the optimizer is the same), a Keras file's; the
 * seed's are there already. *loaded: 1 where they are to be shared. */
static mr_status first_weights(mirrored_model *m, mr_strategy *s, int *loaded, mr_error *err) {
    mr_model *m0 = mr_strategy_replica(s, 0);
    *loaded = m->source != API_SOURCE_CFG;
    if (m->source == API_SOURCE_CKPT)
        return mr_checkpoint_load_model(m->path, m0, mr_ckpt_compare_cfg(&m->ck, &m->cfg, NULL, 0),
                                        err);
    if (m->source == API_SOURCE_KERAS) return mr_keras_load(m->path, m0, 0, NULL, err);
    return MR_OK;
}

mr_status api_strategy(mirrored_model *m, const api_key *key, mr_error *err) {
    if (m->s != NULL && same_key(&m->key, key)) return MR_OK;
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    const mr_strategy_opts opts = {.devices = key->devices,
                                   .job = j,
                                   .seed = (uint64_t)key->seed,
                                   .max_steps = key->max_steps};
    mr_strategy *s = NULL;
    MR_CHECK(mr_strategy_create(&m->cfg, &opts, key->n_train, &s, err));
    int share = 1;
    mr_status st = m->fitted ? move_weights(m->s, s, err) : first_weights(m, s, &share, err);
    if (st == MR_OK && share) st = mr_strategy_sync_model(s, err);
    if (st != MR_OK) {
        mr_strategy_destroy(s);
        return st;
    }
    mr_strategy_destroy(m->s);
    m->s = s;
    m->key = *key;
    return MR_OK;
}

mr_status api_eval_strategy(mirrored_model *m, const char *spec, mr_error *err) {
    if (m->s != NULL && (spec == NULL || strcmp(spec, "auto") == 0)) return MR_OK;
    mr_device_set set;
    MR_CHECK(api_devices(m, spec, 0, &set, err));
    if (m->s != NULL && same_devices(&m->key.devices, &set)) return MR_OK;
    const api_key key = {
        .devices = set, .global_batch = m->cfg.net.global_batch, .seed = m->cfg.net.seed};
    return api_strategy(m, &key, err);
}

/* ---- one fit ----------------------------------------------------------- */

/* What one call of mirrored_model_fit holds. */
typedef struct fit_run {
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
    if (f->o->on_epoch(f->o->user, &l) != 0) f->stop_after = 1;
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
    if (o->validation_split >= 1.0)
        return mr_error_set(err, MR_ERR_USAGE, "fit: validation_split %g: must be below 1",
                            o->validation_split);
    if ((o->x == NULL) != (o->y == NULL) || (o->val_x == NULL) != (o->val_y == NULL))
        return mr_error_set(err, MR_ERR_USAGE, "fit: give x with y, and val_x with val_y");
    if (o->x == NULL && o->val_x != NULL)
        return mr_error_set(err, MR_ERR_USAGE,
                            "fit: validation_data goes with x and y (the .cfg's data has its own)");
    if (o->x == NULL && m->cfg.data.train_images[0] == '\0')
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: names no training data ([data] train_images): give x and y",
                            m->name);
    if (o->x == NULL && o->validation_split > 0.0 && m->cfg.data.val_images[0] != '\0')
        return mr_error_set(err, MR_ERR_USAGE,
                            "fit: validation_split %g: [data] val_images of %s is the validation "
                            "set already",
                            o->validation_split, m->name);
    return MR_OK;
}

/* The options over the .cfg's [net], as mirrored_train's --epochs,
 * --batch-size, --seed and --validation-split (mr_train_apply_options). */
static void apply_options(mirrored_model *m, const mirrored_fit_options *o) {
    mr_net_cfg *net = &m->cfg.net;
    net->epochs = o->epochs > 0 ? o->epochs : m->cfg_epochs;
    net->global_batch = o->batch_size > 0 ? (int)o->batch_size : m->cfg_batch;
    net->seed = o->seed >= 0 ? o->seed : m->cfg_seed;
    net->validation_split = o->validation_split >= 0.0 ? (float)o->validation_split : m->cfg_split;
}

static void restore_options(mirrored_model *m) {
    mr_net_cfg *net = &m->cfg.net;
    net->epochs = m->cfg_epochs;
    net->global_batch = m->cfg_batch;
    net->seed = m->cfg_seed;
    net->validation_split = m->cfg_split;
}

/* x and y, then validation_data after them (a copy: the rows are joined)
 * or the last validation_split of x held out; preprocessing as a .cfg's
 * data gets it (mr_train_load_data). */
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
    if (m->source == API_SOURCE_CKPT) return api_apply_stats(m, &f->train, err);
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
        mr_status st = mr_train_load_data(&m->cfg, p->in_size, p->classes, p->label_width,
                                          p->regression, &f->train, &test, &f->n_train, err);
        mr_dataset_free(&test);
        MR_CHECK(st);
        if (m->source == API_SOURCE_CKPT)
            MR_CHECK(mr_ckpt_apply_preprocessing(&m->ck, &f->train, err));
    }
    f->n_val = f->train.n - f->n_train;
    return api_keep_stats(m, &f->train, err);
}

/* [augment] on an image input, as mirrored_train's augment stage. */
static mr_status fit_augment(const mirrored_model *m, fit_run *f, mr_error *err) {
    const mr_config *cfg = &m->cfg;
    if (!cfg->augment.flip && !cfg->augment.shift) return MR_OK;
    const mr_layer_cfg *in = &cfg->layers[0];
    if (in->shape_rank != 3)
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [augment] needs an image input shape H,W,C",
                            m->name, cfg->augment.line);
    f->aug = (mr_augment){.flip = cfg->augment.flip,
                          .shift = cfg->augment.shift,
                          .h = in->shape[0],
                          .w = in->shape[1],
                          .c = in->shape[2],
                          .seed = (uint64_t)cfg->net.seed};
    f->augp = &f->aug;
    return MR_OK;
}

/* The replicas for this fit, with the model's weights; a fresh model's
 * [normalization] layers adapt to the training rows, as mirrored_train's
 * load weights stage does. */
static mr_status fit_strategy(mirrored_model *m, const mirrored_fit_options *o, fit_run *f,
                              mr_error *err) {
    api_key key = {.n_train = f->n_train,
                   .global_batch = m->cfg.net.global_batch,
                   .seed = m->cfg.net.seed,
                   .max_steps = o->max_steps > 0 ? m->global_step + o->max_steps : 0};
    MR_CHECK(api_devices(m, o->devices, 1, &key.devices, err));
    MR_CHECK(api_strategy(m, &key, err));
    if (m->fitted || m->source != API_SOURCE_CFG) return MR_OK;
    int adapted = 0;
    MR_CHECK(mr_model_adapt(mr_strategy_replica(m->s, 0), &f->train, f->n_train, &adapted, err));
    return adapted ? mr_strategy_sync_model(m->s, err) : MR_OK;
}

/* The caller's callbacks, the stop flag and where a stop's checkpoint goes. */
static mr_status fit_callbacks(mirrored_model *m, const mirrored_fit_options *o, fit_run *f,
                               mr_error *err) {
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    f->ck_run = (mr_ckpt_run){.lead = j->rank == 0,
                              .cfg = &m->cfg,
                              .cfg_path = m->path[0] ? m->path : m->name,
                              .plan = mr_strategy_plan(m->s),
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
    return mr_strategy_fit(m->s, &f->train, f->n_train, f->n_train, f->n_val, f->first + f->epochs,
                           f->augp, &from, &f->cb, err);
}

/* Where the model stands after the fit, and what the caller is told. */
static mr_status fit_result(mirrored_model *m, const fit_run *f, mirrored_fit_result *r,
                            mr_error *err) {
    const mr_fit_state *at = mr_strategy_state(m->s);
    const int stopped = mr_strategy_stopped(m->s);
    m->global_step = at->global_step;
    m->epochs_done = at->epoch;
    if (f->lr > 0.0f) m->lr = f->lr;
    if (r == NULL) return MR_OK;
    *r = (mirrored_fit_result){.epochs = m->epochs_done,
                               .updates = m->global_step,
                               .stopped = stopped,
                               .early_stopped =
                                   f->stop_after || mr_strategy_fit_end(m->s).early_stopped > 0,
                               .replicas = mr_strategy_plan(m->s)->replicas};
    return mr_params_hash(mr_strategy_replica(m->s, 0), &r->params_hash, err);
}

static mr_status fit(mirrored_model *m, const mirrored_fit_options *o, fit_run *f,
                     mirrored_fit_result *r, mr_error *err) {
    MR_CHECK(check_options(m, o, err));
    apply_options(m, o);
    f->o = o;
    f->epochs = m->cfg.net.epochs;
    f->first = m->epochs_done;
    MR_CHECK(fit_data(m, o, f, err));
    MR_CHECK(fit_augment(m, f, err));
    MR_CHECK(fit_strategy(m, o, f, err));
    MR_CHECK(fit_callbacks(m, o, f, err));
    m->fitted = 1; /* from here the weights are the strategy's */
    MR_CHECK(fit_epochs(m, f, err));
    return fit_result(m, f, r, err);
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
    mr_error e = {0};
    fit_run f = {0};
    const mr_status st = fit(m, o, &f, result, &e);
    atomic_store(&m->stop, 0); /* a stop asked after the last update is not the next fit's */
    restore_options(m);
    api_dataset_free(&f.train, o->x);
    return st == MR_OK ? api_ok(err) : api_fail(err, &e);
}

MIRRORED_API void mirrored_model_request_stop(mirrored_model *m) {
    if (m != NULL) atomic_store(&m->stop, 1);
}
