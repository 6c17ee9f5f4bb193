/* train_checkpoints.c: see train_checkpoints.h. */
#include "launch/train_checkpoints.h"

#include "launch/cli.h"
#include "strategies/early_stop.h"
#include "runtime/clock.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

mr_status mr_ckpt_check_writable(const mr_ckpt_run *r, const char *save_path, mr_error *err) {
    if (!r->lead) return MR_OK;
    if (r->pattern != NULL) {
        char dir[MR_PATH_MAX], name[MR_PATH_MAX + 80];
        snprintf(dir, sizeof dir, "%s", r->pattern);
        const char *folder = dirname(dir);
        struct stat sb;
        if (stat(folder, &sb) != 0 && mkdir(folder, 0777) != 0 && errno != EEXIST)
            return mr_error_set(err, MR_ERR_IO, "[net] checkpoint %s: cannot make its folder: %s",
                                r->pattern, strerror(errno));
        mr_checkpoint_name(r->pattern, 0, name, sizeof name);
        MR_CHECK(mr_cli_check_writable("[net] checkpoint", name, err));
    }
    if (save_path != NULL) MR_CHECK(mr_cli_check_writable("--save", save_path, err));
    return MR_OK;
}

mr_status mr_ckpt_write(mr_ckpt_run *r, const char *path, const mr_fit_state *state,
                        const mr_model *m, float lr, mr_error *err) {
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
                       .previous_save_s = r->last_save_s};
    /* relative data paths of the .cfg start from its folder: keep it absolute */
    if (r->cfg_path[0] == '/' || realpath(r->cfg_path, c.cfg_path) == NULL)
        snprintf(c.cfg_path, sizeof c.cfg_path, "%s", r->cfg_path);
    mr_status st = mr_checkpoint_save(path, m, &c, err);
    /* the place was checked before training: failing now (a full disk) is a
     * failure of the run, exit 1, not bad input */
    if (st == MR_ERR_IO) err->status = st = MR_ERR_RUNTIME;
    MR_CHECK(st);
    /* the write is durable here (mr_checkpoint_save syncs before the rename):
     * what a stop must fit in its budget */
    r->last_save_s = mr_now_s() - t0;
    if (r->out) {
        fprintf(r->out, "Saved %s (epoch %d, step %lld) in %.2f s\n", path,
                state->epoch + (state->step > 0), (long long)state->global_step, r->last_save_s);
        /* a stop on a signal would take at least this long: say so now,
         * not when the VM is going */
        if (r->stop_budget > 0 && r->last_save_s > r->stop_budget)
            fprintf(r->out,
                    "Warning: this save took %.2f s, more than --stop-budget %g s: a stop on a "
                    "signal would not fit\n",
                    r->last_save_s, r->stop_budget);
        fflush(r->out);
    }
    return MR_OK;
}

mr_status mr_ckpt_on_save(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                          mr_error *err) {
    mr_ckpt_run *r = user;
    if (!r->lead || r->pattern == NULL) return MR_OK;
    char path[MR_PATH_MAX + 64];
    mr_checkpoint_name(r->pattern, state->global_step, path, sizeof path);
    MR_CHECK(mr_ckpt_write(r, path, state, m, lr, err));
    if (r->keep > 0) MR_CHECK(mr_checkpoint_prune(r->pattern, r->keep, err));
    return MR_OK;
}

mr_status mr_ckpt_on_save_best(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                               double value, int had_best, double best_before, mr_error *err) {
    mr_ckpt_run *r = user;
    if (!r->lead || r->best_path == NULL) return MR_OK;
    const char *name = mr_monitor_name(r->cfg->net.save_best_only);
    if (r->out && had_best)
        fprintf(r->out, "Epoch %d: %s improved from %.5f to %.5f, saving model to %s\n",
                state->epoch, name, best_before, value, r->best_path);
    else if (r->out) /* Keras starts from inf, or -inf for an accuracy */
        fprintf(r->out, "Epoch %d: %s improved from %sinf to %.5f, saving model to %s\n",
                state->epoch, name, strstr(name, "accuracy") ? "-" : "", value, r->best_path);
    MR_CHECK(mr_ckpt_write(r, r->best_path, state, m, lr, err));
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
        MR_CHECK(mr_ckpt_write(r, r->stopped_at, state, m, lr, err));
        if (r->keep > 0) MR_CHECK(mr_checkpoint_prune(r->pattern, r->keep, err));
    } else if (r->stop_path != NULL) {
        snprintf(r->stopped_at, sizeof r->stopped_at, "%s", r->stop_path);
        MR_CHECK(mr_ckpt_write(r, r->stopped_at, state, m, lr, err));
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

mr_status mr_ckpt_resume_path(const char *arg, const char *pattern, const char *stop_path,
                              char *path, size_t n, mr_error *err) {
    if (strcmp(arg, "auto") != 0) {
        snprintf(path, n, "%s", arg);
        return MR_OK;
    }
    if (pattern == NULL && stop_path == NULL)
        return mr_error_set(err, MR_ERR_USAGE,
                            "--resume auto: the .cfg has no [net] checkpoint to look for (and "
                            "there is no --checkpoint-on-signal, --save or --json to look beside)");
    if (pattern != NULL) {
        mr_error none = {0};
        /* the newest intact one: a damaged newest is named and skipped */
        if (mr_checkpoint_newest(pattern, path, n, &none) == MR_OK)
            return mr_checkpoint_skip_damaged(pattern, path, n, stderr, err);
        /* no folder yet, or no file in it: a first start; a folder that
         * cannot be read is an error, not a reason to start over */
        char dir[MR_PATH_MAX];
        snprintf(dir, sizeof dir, "%s", pattern);
        DIR *d = opendir(dirname(dir));
        if (d == NULL && errno != ENOENT) return mr_error_set(err, none.status, "%s", none.msg);
        if (d != NULL) closedir(d);
        if (none.status == MR_ERR_NOMEM) return mr_error_set(err, none.status, "%s", none.msg);
    }
    /* a stop's checkpoint without a pattern, or none yet: a first start */
    struct stat sb;
    if (pattern == NULL && stat(stop_path, &sb) == 0) {
        snprintf(path, n, "%s", stop_path);
        return MR_OK;
    }
    snprintf(path, n, "%s", "");
    return MR_OK;
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
                               mr_error *err) {
    const mr_fit_state *s = &c->state;
    if (s->epoch < epochs || (s->epoch == epochs && s->step == 0)) return MR_OK;
    char where[96];
    if (s->step == 0)
        snprintf(where, sizeof where, "has finished %d epoch%s", s->epoch,
                 s->epoch == 1 ? "" : "s");
    else
        snprintf(where, sizeof where, "is %lld update%s into epoch %d", (long long)s->step,
                 s->step == 1 ? "" : "s", s->epoch + 1);
    return mr_error_set(err, MR_ERR_USAGE,
                        "--resume %s: the checkpoint %s, beyond the %d epoch%s asked for "
                        "(--epochs or [net] epochs): nothing to train",
                        path, where, epochs, epochs == 1 ? "" : "s");
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
