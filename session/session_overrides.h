/* session_overrides.h: a run's arguments over its .cfg, applied and
 * checked once, in Keras fit's terms: epochs, seed, batch_size (the
 * global batch), validation_split, and an .npz archive of keras.datasets'
 * arrays in place of the [data] files; then a set's images naming a whole
 * .npz take its x_<set> and y_<set> (mr_npz_data_paths). A refusal names
 * the argument in its face's words (session_events.h). Relies on
 * runtime/npz.h. */
#ifndef MR_SESSION_OVERRIDES_H
#define MR_SESSION_OVERRIDES_H

#include <stdint.h>

#include "models/config.h"
#include "session/session_events.h"

/* What a run asks for over the .cfg (each: not given leaves the .cfg's). */
typedef struct mr_session_overrides {
    int64_t epochs;          /* [net] epochs; 0 or less: not given */
    int64_t seed;            /* [net] seed; below 0: not given */
    int64_t batch_size;      /* [net] global_batch (Keras's batch_size); 0 or less: not given */
    double validation_split; /* [net] validation_split (refused beside [data] val_images); below
                                0: not given */
    const char *data;        /* an .npz: [data] train from x_train/y_train, test from
                                x_test/y_test (none when it lacks them: a line says so), no
                                val_images; NULL: not given */
    /* 1: the run trains on the caller's arrays (the library's fit(x, y)),
     * which bring their own validation (validation_data, or
     * validation_split of them): [data] val_images and the [net] keys
     * that watch a validation set are not the .cfg's to judge */
    int arrays;
} mr_session_overrides;

/* Nothing given: the .cfg as it is. */
#define MR_SESSION_OVERRIDES_NONE                                                                  \
    ((mr_session_overrides){.epochs = -1, .seed = -1, .batch_size = -1, .validation_split = -1.0})

/* o over cfg, after it is read; a [net] key that watches a validation set
 * needs one. A wrong value or archive is one line naming the argument as
 * `words` do (NULL: the library's) or the file; ev hears of a test set
 * left out (MR_SESSION_LINE_INFO; NULL: silent). */
mr_status mr_session_apply_overrides(const mr_session_overrides *o, mr_config *cfg,
                                     const mr_session_words *words, const mr_session_events *ev,
                                     mr_error *err);

#endif
