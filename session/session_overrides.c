/* session_overrides.c: a run's arguments over its .cfg (session_overrides.h). */
#include "session/session_overrides.h"

#include <stdio.h>
#include <string.h>

#include "runtime/npz.h"

/* dst (a [data] path, MR_PATH_MAX bytes) = "archive:member". */
static mr_status set_member(char *dst, const char *archive, const char *member,
                            const mr_session_words *words, mr_error *err) {
    int n = snprintf(dst, MR_PATH_MAX, "%s:%s", archive, member);
    char word[MR_PATH_MAX + 64];
    if (n < 0 || n >= MR_PATH_MAX)
        return mr_error_set(
            err, MR_ERR_USAGE, "%s: path too long",
            mr_session_word(words, MR_SESSION_ARG_DATA, archive, word, sizeof word));
    return MR_OK;
}

/* An .npz: the [data] files become the archive's arrays by keras.datasets' names. */
static mr_status apply_npz(const char *path, mr_config *cfg, const mr_session_words *words,
                           const mr_session_events *ev, mr_error *err) {
    mr_data_cfg *d = &cfg->data;
    char word[MR_PATH_MAX + 64];
    if (!mr_npz_is_archive(path))
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: expected an .npz archive with x_train and y_train (as "
                            "keras.datasets' files); other files go in the .cfg's [data]",
                            mr_session_word(words, MR_SESSION_ARG_DATA, path, word, sizeof word));
    char list[1024];
    MR_CHECK(mr_npz_members(path, list, sizeof list, err));
    if (!mr_npz_has(path, "x_train") || !mr_npz_has(path, "y_train"))
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: no x_train and y_train (keras.datasets' names: x_train, y_train, "
                            "x_test, y_test); the archive has: %s",
                            path, list[0] ? list : "no members");
    MR_CHECK(set_member(d->train_images, path, "x_train", words, err));
    MR_CHECK(set_member(d->train_labels, path, "y_train", words, err));
    d->val_images[0] = d->val_labels[0] = '\0';
    if (mr_npz_has(path, "x_test") && mr_npz_has(path, "y_test")) {
        MR_CHECK(set_member(d->test_images, path, "x_test", words, err));
        return set_member(d->test_labels, path, "y_test", words, err);
    }
    d->test_images[0] = d->test_labels[0] = '\0';
    mr_session_say(ev, MR_SESSION_LINE_INFO, "%s has no x_test and y_test: no test evaluation",
                   path);
    return MR_OK;
}

/* validation_split, and a validation set for the [net] keys that watch one. */
static mr_status apply_split(double split, int arrays, mr_config *cfg,
                             const mr_session_words *words, mr_error *err) {
    char value[64], word[128];
    if (split >= 0.0) {
        snprintf(value, sizeof value, "%g", split);
        if (!arrays && split > 0.0 && cfg->data.val_images[0] != '\0')
            return mr_error_set(
                err, MR_ERR_USAGE,
                "%s: [data] val_images of %s is the validation set already: give "
                "one of them",
                mr_session_word(words, MR_SESSION_ARG_VALIDATION_SPLIT, value, word, sizeof word),
                cfg->path);
        cfg->net.validation_split = (float)split;
    }
    if (arrays || cfg->data.val_images[0] != '\0' || cfg->net.validation_split > 0.0f) return MR_OK;
    const struct {
        const char *key;
        mr_monitor mon;
    } watchers[] = {{"early_stopping", cfg->net.early_stopping},
                    {"save_best_only", cfg->net.save_best_only},
                    {"reduce_lr_on_plateau", cfg->net.reduce_lr_on_plateau}};
    for (size_t i = 0; i < sizeof watchers / sizeof watchers[0]; i++)
        if (watchers[i].mon == MR_MONITOR_VAL_LOSS || watchers[i].mon == MR_MONITOR_VAL_ACCURACY)
            return mr_error_set(
                err, MR_ERR_USAGE,
                "%s: [net] %s watches the validation set, and the run leaves none: give %s",
                cfg->path, watchers[i].key,
                mr_session_word(words, MR_SESSION_ARG_VALIDATION_SPLIT, "F", word, sizeof word));
    return MR_OK;
}

mr_status mr_session_apply_overrides(const mr_session_overrides *o, mr_config *cfg,
                                     const mr_session_words *words, const mr_session_events *ev,
                                     mr_error *err) {
    if (o->epochs > 0) cfg->net.epochs = (int)o->epochs;
    if (o->seed >= 0) cfg->net.seed = o->seed;
    if (o->batch_size > 0) cfg->net.global_batch = (int)o->batch_size;
    if (o->data != NULL) MR_CHECK(apply_npz(o->data, cfg, words, ev, err));
    MR_CHECK(apply_split(o->validation_split, o->arrays, cfg, words, err));
    /* [data] naming a whole archive: each set's x_ and y_ members */
    mr_data_cfg *d = &cfg->data;
    char images[MR_PATH_MAX], labels[MR_PATH_MAX];
    struct {
        const char *set;
        char *images, *labels;
    } sets[] = {{"train", d->train_images, d->train_labels},
                {"val", d->val_images, d->val_labels},
                {"test", d->test_images, d->test_labels}};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        MR_CHECK(mr_npz_data_paths(sets[i].images, sets[i].labels, sets[i].set, images, labels,
                                   sizeof images, err));
        memcpy(sets[i].images, images, sizeof images);
        memcpy(sets[i].labels, labels, sizeof labels);
    }
    return MR_OK;
}
