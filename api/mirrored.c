/* mirrored.c: the public C API (include/mirrored.h): the job, the devices,
 * loading a model, its info and summary, saving it. Fit is api_fit.c,
 * evaluate and predict api_eval.c, caller arrays api_data.c. Nothing here
 * prints: every failure is a status with one line in the caller's error. */
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api_internal.h"
#include "launch/cli.h"
#include "runtime/backend.h"
#include "launch/train_checkpoints.h"
#include "launch/train_data.h"
#include "models/keras_archive.h"
#include "models/keras_import.h"

/* the API's statuses are the runtime's */
_Static_assert(MIRRORED_OK == (int)MR_OK, "status");
_Static_assert(MIRRORED_ERR_USAGE == (int)MR_ERR_USAGE, "status");
_Static_assert(MIRRORED_ERR_CONFIG == (int)MR_ERR_CONFIG, "status");
_Static_assert(MIRRORED_ERR_IO == (int)MR_ERR_IO, "status");
_Static_assert(MIRRORED_ERR_DATA == (int)MR_ERR_DATA, "status");
_Static_assert(MIRRORED_ERR_NOMEM == (int)MR_ERR_NOMEM, "status");
_Static_assert(MIRRORED_ERR_UNSUPPORTED == (int)MR_ERR_UNSUPPORTED, "status");
_Static_assert(MIRRORED_ERR_RUNTIME == (int)MR_ERR_RUNTIME, "status");
_Static_assert(MIRRORED_ERR_ABORTED == (int)MR_ERR_ABORTED, "status");
_Static_assert(MIRRORED_ERR_NOT_FOUND == (int)MR_ERR_NOT_FOUND, "status");
_Static_assert(sizeof(((mirrored_error *)0)->message) == sizeof(((mr_error *)0)->msg), "message");

/* One job per process. */
static mr_job job;
static int job_started;

mirrored_status api_fail(mirrored_error *err, const mr_error *e) {
    if (err != NULL) {
        err->status = (mirrored_status)e->status;
        snprintf(err->message, sizeof err->message, "%s",
                 e->msg[0] ? e->msg : mr_status_name(e->status));
    }
    return (mirrored_status)e->status;
}

mirrored_status api_ok(mirrored_error *err) {
    if (err != NULL) *err = (mirrored_error){.status = MIRRORED_OK};
    return MIRRORED_OK;
}

mirrored_status api_usage(mirrored_error *err, const char *fmt, ...) {
    if (err != NULL) {
        err->status = MIRRORED_ERR_USAGE;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return MIRRORED_ERR_USAGE;
}

mr_status api_job(mr_job **out, mr_error *err) {
    *out = &job;
    if (job_started) return MR_OK;
    MR_CHECK(mr_cli_job_init(NULL, NULL, &job, err));
    job_started = 1;
    return MR_OK;
}

MIRRORED_API const char *mirrored_version(void) {
    return MR_VERSION;
}

MIRRORED_API mirrored_status mirrored_init(int *argc, char ***argv, mirrored_error *err) {
    mr_error e = {0};
    if (job_started) return api_ok(err);
    if (mr_cli_job_init(argc, argv, &job, &e) != MR_OK) return api_fail(err, &e);
    job_started = 1;
    return api_ok(err);
}

MIRRORED_API mirrored_status mirrored_job(int *rank, int *size, mirrored_error *err) {
    if (rank == NULL || size == NULL) return api_usage(err, "mirrored_job: rank or size is NULL");
    mr_error e = {0};
    mr_job *j;
    if (api_job(&j, &e) != MR_OK) return api_fail(err, &e);
    *rank = j->rank;
    *size = j->size;
    return api_ok(err);
}

MIRRORED_API void mirrored_finalize(void) {
    if (!job_started) return;
    mr_job_finalize(&job);
    job_started = 0;
}

/* "cpu:0\n..." of one kind's set into buf at *used */
static void put_names(const mr_device_set *d, char *buf, size_t size, size_t *used) {
    for (int i = 0; i < d->count; i++) {
        int n = snprintf(buf + *used, size > *used ? size - *used : 0, "%s:%d\n", d->kind,
                         d->ordinals[i]);
        *used += (size_t)(n > 0 ? n : 0);
    }
}

MIRRORED_API mirrored_status mirrored_list_devices(char *buf, size_t size, int *count,
                                                   mirrored_error *err) {
    if (buf == NULL || count == NULL || size == 0)
        return api_usage(err, "mirrored_list_devices: buf or count is NULL, or size is 0");
    mr_error e = {0};
    mr_job *j;
    if (api_job(&j, &e) != MR_OK) return api_fail(err, &e);
    mr_device_env env = {
        .cores = j->cores, .local_rank = j->local_rank, .local_size = j->local_size};
    /* a CPU replica per core this process may use; every GPU it sees */
    mr_device_set cpu = {.kind = "cpu", .count = j->cores > 0 ? j->cores : mr_cpu_cores()},
                  gpu = {0};
    if (cpu.count > MR_MAX_REPLICAS) cpu.count = MR_MAX_REPLICAS;
    for (int i = 0; i < cpu.count; i++)
        cpu.ordinals[i] = i;
    mr_error none = {0};
    if (mr_gpu_count() == 0 || mr_devices_parse("gpu", &env, &gpu, &none) != MR_OK) gpu.count = 0;
    size_t used = 0;
    buf[0] = '\0';
    put_names(&cpu, buf, size, &used);
    put_names(&gpu, buf, size, &used);
    if (used >= size)
        return api_usage(err, "mirrored_list_devices: %zu bytes of room, %zu needed", size,
                         used + 1);
    *count = cpu.count + gpu.count;
    return api_ok(err);
}

/* ---- the model --------------------------------------------------------- */

/* The .cfg read (cfg filled): its plan, whole archives of [data] named
 * member by member, and its own [net] values kept. */
static mr_status model_ready(mirrored_model *m, mr_error *err) {
    MR_CHECK(mr_model_plan_make(&m->plan, &m->cfg, err));
    mr_train_options none = {.epochs = -1, .seed = -1, .validation_split = -1.0};
    MR_CHECK(mr_train_apply_options(&none, &m->cfg, NULL, err));
    m->cfg_epochs = m->cfg.net.epochs;
    m->cfg_batch = m->cfg.net.global_batch;
    m->cfg_seed = m->cfg.net.seed;
    m->cfg_split = m->cfg.net.validation_split;
    atomic_init(&m->stop, 0);
    return MR_OK;
}

/* A mirrored checkpoint: its .cfg text, parsed as mirrored_eval does (data
 * paths from the folder the .cfg was read from); its preprocessing and
 * where its training stood. */
static mr_status load_checkpoint(mirrored_model *m, mr_error *err) {
    char folder[MR_PATH_MAX];
    snprintf(folder, sizeof folder, "%s", m->ck.cfg_path);
    MR_CHECK(mr_config_parse(m->ck.cfg_text, m->ck.cfg_path, dirname(folder), &m->cfg, err));
    m->source = API_SOURCE_CKPT;
    m->global_step = m->ck.state.global_step;
    m->epochs_done = m->ck.state.epoch;
    return MR_OK;
}

/* What path is: a checkpoint, a Keras model file, or a .cfg. */
static mr_status load_file(mirrored_model *m, const char *path, mr_error *err) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return mr_error_set(err, MR_ERR_NOT_FOUND, "%s: no such file", path);
    mr_error ck_err = {0};
    if (mr_checkpoint_load(path, &m->ck, &ck_err) == MR_OK) return load_checkpoint(m, err);
    mr_checkpoint_free(&m->ck);
    m->source = mr_keras_import_is_model(path) ? API_SOURCE_KERAS : API_SOURCE_CFG;
    return mr_keras_import_config_load(path, &m->cfg, err);
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
    if (load_file(m, path, &e) != MR_OK || model_ready(m, &e) != MR_OK) {
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
    m->source = API_SOURCE_CFG;
    if (mr_config_parse(cfg_text, m->name, folder, &m->cfg, &e) != MR_OK ||
        model_ready(m, &e) != MR_OK) {
        mirrored_model_destroy(m);
        return api_fail(err, &e);
    }
    *out = m;
    return api_ok(err);
}

MIRRORED_API void mirrored_model_destroy(mirrored_model *m) {
    if (m == NULL) return;
    mr_strategy_destroy(m->s);
    mr_checkpoint_free(&m->ck);
    mr_config_free(&m->cfg);
    free(m->mean);
    free(m->inv_std);
    free(m);
}

MIRRORED_API mirrored_status mirrored_model_get_info(const mirrored_model *m,
                                                     mirrored_model_info *info,
                                                     mirrored_error *err) {
    if (m == NULL || info == NULL)
        return api_usage(err, "mirrored_model_get_info: model or info is NULL");
    const mr_layer_cfg *in = &m->cfg.layers[0];
    *info = (mirrored_model_info){.input_ndim = in->shape_rank,
                                  .outputs = (int)m->plan.out_size,
                                  .label_width = m->plan.label_width,
                                  .regression = m->plan.regression,
                                  .params = m->plan.n_params + m->plan.n_state,
                                  .epochs = m->cfg_epochs,
                                  .batch_size = m->cfg_batch,
                                  .has_data = m->cfg.data.train_images[0] != '\0',
                                  .metric = m->plan.regression ? "mae" : "accuracy"};
    for (int i = 0; i < in->shape_rank; i++)
        info->input_shape[i] = in->shape[i];
    return api_ok(err);
}

MIRRORED_API mirrored_status mirrored_model_summary(mirrored_model *m, char *buf, size_t size,
                                                    mirrored_error *err) {
    if (m == NULL || buf == NULL || size == 0)
        return api_usage(err, "mirrored_model_summary: model or buf is NULL, or size is 0");
    mr_error e = {0};
    if (api_eval_strategy(m, NULL, &e) != MR_OK) return api_fail(err, &e);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL) {
        mr_error_set(&e, MR_ERR_NOMEM, "out of memory for the summary");
        return api_fail(err, &e);
    }
    mr_model_summary(mr_strategy_replica(m->s, 0), m->name, f);
    fclose(f);
    snprintf(buf, size, "%s", text ? text : "");
    free(text);
    return api_ok(err);
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
                     .cfg_path = m->path[0] ? m->path : m->name,
                     .plan = mr_strategy_plan(m->s),
                     .processes = j->size,
                     .train = &pre};
    const mr_fit_state state = {.epoch = m->epochs_done, .global_step = m->global_step};
    if (!r.lead) return MR_OK;
    const float lr = m->lr > 0.0f ? m->lr : r.plan->base_lr;
    return mr_ckpt_write(&r, path, &state, mr_strategy_replica(m->s, 0), lr, MR_RUN_END_NONE, err);
}

MIRRORED_API mirrored_status mirrored_model_save(mirrored_model *m, const char *path,
                                                 mirrored_error *err) {
    if (m == NULL || path == NULL)
        return api_usage(err, "mirrored_model_save: model or path is NULL");
    const size_t n = strlen(path);
    const int h5 = n > 3 && strcmp(path + n - 3, ".h5") == 0;
    if (!h5 && !mr_keras_archive_named(path))
        return api_usage(err,
                         "%s: save writes PATH.keras (a Keras archive) or PATH.h5 (a mirrored "
                         "checkpoint), not this extension",
                         path);
    mr_error e = {0};
    mr_job *j;
    if (api_job(&j, &e) != MR_OK || api_eval_strategy(m, NULL, &e) != MR_OK)
        return api_fail(err, &e);
    mr_status st = MR_OK;
    if (h5)
        st = save_checkpoint(m, path, &e);
    else if (j->rank == 0)
        st = mr_keras_archive_save(path, mr_strategy_replica(m->s, 0), m->global_step,
                                   m->lr > 0.0f ? m->lr : mr_strategy_plan(m->s)->base_lr, &e);
    return st == MR_OK ? api_ok(err) : api_fail(err, &e);
}
