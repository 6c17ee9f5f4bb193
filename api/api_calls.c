/* api_calls.c: one call at a time per model. A model's replicas, weights
 * and counts belong to the call using them: a second call on the same
 * model (another thread's, or one from a fit's own callback) is refused at
 * once with the name of the call in progress, instead of racing it
 * (mirrored_model_request_stop is the one call that may come meanwhile). */
#include "api/api_internal.h"

mirrored_status api_enter(mirrored_model *m, const char *call, mirrored_error *err) {
    const char *now = NULL;
    if (atomic_compare_exchange_strong(&m->busy, &now, call)) return MIRRORED_OK;
    return api_usage(err,
                     "%s: %s refused: %s is in progress on this model (one call at a time per "
                     "model; wait for it to return, or stop a fit first)",
                     m->name, call, now);
}

void api_leave(mirrored_model *m) {
    atomic_store(&m->busy, NULL);
}
