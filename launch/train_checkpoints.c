/* train_checkpoints.c: see train_checkpoints.h. */
#include "launch/train_checkpoints.h"

#include "launch/cli.h"

#include <errno.h>
#include <libgen.h>
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

mr_status mr_ckpt_write(const mr_ckpt_run *r, const char *path, const mr_fit_state *state,
                        const mr_model *m, float lr, mr_error *err) {
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
                       .inv_std = r->train->inv_std};
    /* relative data paths of the .cfg start from its folder: keep it absolute */
    if (r->cfg_path[0] == '/' || realpath(r->cfg_path, c.cfg_path) == NULL)
        snprintf(c.cfg_path, sizeof c.cfg_path, "%s", r->cfg_path);
    mr_status st = mr_checkpoint_save(path, m, &c, err);
    /* the place was checked before training: failing now (a full disk) is a
     * failure of the run, exit 1, not bad input */
    if (st == MR_ERR_IO) err->status = st = MR_ERR_RUNTIME;
    MR_CHECK(st);
    if (r->out) {
        fprintf(r->out, "Saved %s (epoch %d, step %lld)\n", path, state->epoch + (state->step > 0),
                (long long)state->global_step);
        fflush(r->out);
    }
    return MR_OK;
}

mr_status mr_ckpt_on_save(void *user, const mr_fit_state *state, const mr_model *m, float lr,
                          mr_error *err) {
    const mr_ckpt_run *r = user;
    if (!r->lead || r->pattern == NULL) return MR_OK;
    char path[MR_PATH_MAX + 64];
    mr_checkpoint_name(r->pattern, state->global_step, path, sizeof path);
    MR_CHECK(mr_ckpt_write(r, path, state, m, lr, err));
    if (r->keep > 0) MR_CHECK(mr_checkpoint_prune(r->pattern, r->keep, err));
    return MR_OK;
}

mr_status mr_ckpt_resume_path(const char *arg, const char *pattern, char *path, size_t n,
                              mr_error *err) {
    if (strcmp(arg, "auto") != 0) {
        snprintf(path, n, "%s", arg);
        return MR_OK;
    }
    if (pattern == NULL)
        return mr_error_set(err, MR_ERR_USAGE,
                            "--resume auto: the .cfg has no [net] checkpoint to look for");
    MR_CHECK(mr_checkpoint_newest(pattern, path, n, err));
    return mr_checkpoint_skip_damaged(pattern, path, n, stderr, err); /* the newest damaged */
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
