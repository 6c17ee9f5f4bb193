/* session_events.c: lines and argument names for the faces (session_events.h). */
#include "session/session_events.h"

#include <stdarg.h>
#include <stdio.h>

/* Keras fit's arguments; a file the library loads or saves, by its call */
const mr_session_words mr_session_keras_words = {
    .arg = {[MR_SESSION_ARG_DEVICES] = "devices='%s'",
            [MR_SESSION_ARG_EPOCHS] = "epochs=%s",
            [MR_SESSION_ARG_SEED] = "seed=%s",
            [MR_SESSION_ARG_BATCH_SIZE] = "batch_size=%s",
            [MR_SESSION_ARG_VALIDATION_SPLIT] = "validation_split=%s",
            [MR_SESSION_ARG_DATA] = "data='%s'",
            [MR_SESSION_ARG_SAVE] = "save('%s')",
            [MR_SESSION_ARG_RESUME] = "load('%s')",
            [MR_SESSION_ARG_INIT_WEIGHTS] = "load('%s')",
            [MR_SESSION_ARG_STOP_CHECKPOINT] = "stop_checkpoint='%s'",
            [MR_SESSION_ARG_STOP_BUDGET] = "stop_budget=%s",
            [MR_SESSION_ARG_SYNTHETIC] = "synthetic=%s",
            [MR_SESSION_ARG_JSON] = "json='%s'"},
    .name = {[MR_SESSION_ARG_DEVICES] = "devices",
             [MR_SESSION_ARG_EPOCHS] = "epochs",
             [MR_SESSION_ARG_SEED] = "seed",
             [MR_SESSION_ARG_BATCH_SIZE] = "batch_size",
             [MR_SESSION_ARG_VALIDATION_SPLIT] = "validation_split",
             [MR_SESSION_ARG_DATA] = "data",
             [MR_SESSION_ARG_SAVE] = "save()",
             [MR_SESSION_ARG_RESUME] = "load()",
             [MR_SESSION_ARG_INIT_WEIGHTS] = "load()",
             [MR_SESSION_ARG_STOP_CHECKPOINT] = "stop_checkpoint",
             [MR_SESSION_ARG_STOP_BUDGET] = "stop_budget",
             [MR_SESSION_ARG_SYNTHETIC] = "synthetic",
             [MR_SESSION_ARG_JSON] = "json"}};

void mr_session_say(const mr_session_events *ev, mr_session_line kind, const char *fmt, ...) {
    if (ev == NULL || ev->line == NULL) return;
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ev->line(ev->user, kind, text);
}

const char *mr_session_name(const mr_session_words *words, mr_session_arg a) {
    return (words != NULL ? words : &mr_session_keras_words)->name[a];
}

const char *mr_session_word(const mr_session_words *words, mr_session_arg a, const char *value,
                            char *buf, size_t n) {
    const mr_session_words *w = words != NULL ? words : &mr_session_keras_words;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(buf, n, w->arg[a], value);
#pragma GCC diagnostic pop
    return buf;
}
