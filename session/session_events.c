/* session_events.c: lines and argument names for the faces (session_events.h). */
#include "session/session_events.h"

#include <stdarg.h>
#include <stdio.h>

const mr_session_words mr_session_keras_words = {
    .arg = {
        [MR_SESSION_ARG_DEVICES] = "devices='%s'",
        [MR_SESSION_ARG_EPOCHS] = "epochs=%s",
        [MR_SESSION_ARG_SEED] = "seed=%s",
        [MR_SESSION_ARG_BATCH_SIZE] = "batch_size=%s",
        [MR_SESSION_ARG_VALIDATION_SPLIT] = "validation_split=%s",
        [MR_SESSION_ARG_DATA] = "data='%s'",
    }};

void mr_session_say(const mr_session_events *ev, mr_session_line kind, const char *fmt, ...) {
    if (ev == NULL || ev->line == NULL) return;
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ev->line(ev->user, kind, text);
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
