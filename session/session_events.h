/* session_events.h: how session/ tells its face (the executables, the
 * library) what a run does: lines through a callback, never a FILE *, and
 * an argument named in the face's own words (a flag of the command line,
 * an argument of a Python call), never in session/'s. */
#ifndef MR_SESSION_EVENTS_H
#define MR_SESSION_EVENTS_H

#include <stddef.h>

/* What a line is, for the face to put it where its users look. */
typedef enum mr_session_line {
    MR_SESSION_LINE_INFO, /* the run's own report: "Saved ...", a test set left out */
    MR_SESSION_LINE_NOTE, /* a warning beside the run: a damaged checkpoint skipped */
} mr_session_line;

/* The face's callbacks. Every slot may be NULL: nothing is said. */
typedef struct mr_session_events {
    void *user; /* passed back to every slot */
    /* one line, without its newline */
    void (*line)(void *user, mr_session_line kind, const char *text);
} mr_session_events;

/* The arguments a run takes, which the faces name each their own way. */
typedef enum mr_session_arg {
    MR_SESSION_ARG_DEVICES,          /* the devices: "auto", "cpu:4", "gpu" */
    MR_SESSION_ARG_EPOCHS,           /* [net] epochs */
    MR_SESSION_ARG_SEED,             /* [net] seed */
    MR_SESSION_ARG_BATCH_SIZE,       /* the global batch, [net] global_batch */
    MR_SESSION_ARG_VALIDATION_SPLIT, /* [net] validation_split */
    MR_SESSION_ARG_DATA,             /* an .npz archive of keras.datasets' arrays */
    MR_SESSION_ARG_SAVE,             /* where the model goes at the end */
    MR_SESSION_ARG_RESUME,           /* the checkpoint a run goes on from ("auto": the newest) */
    MR_SESSION_ARG_INIT_WEIGHTS,     /* a file of first weights */
    MR_SESSION_ARG_STOP_CHECKPOINT,  /* where a stop's checkpoint goes */
    MR_SESSION_ARG_STOP_BUDGET,      /* the seconds a stop may take */
    MR_SESSION_ARG_SYNTHETIC,        /* random examples in place of data */
    MR_SESSION_ARG_JSON,             /* a summary file */
    MR_SESSION_ARG_COUNT
} mr_session_arg;

/* How a face names an argument: with its value, one printf format per
 * argument, each with one %s for the value ("--devices %s" on the command
 * line, "devices='%s'" in Python); alone, its name ("--devices",
 * "devices"). */
typedef struct mr_session_words {
    const char *arg[MR_SESSION_ARG_COUNT];
    const char *name[MR_SESSION_ARG_COUNT];
} mr_session_words;

/* The library's words: Keras's argument names (devices='gpu', batch_size=64). */
extern const mr_session_words mr_session_keras_words;

/* A printf-formatted line through ev (ev, or its slot, NULL: nothing). */
void mr_session_say(const mr_session_events *ev, mr_session_line kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Argument a with its value as words name it, into buf[n] ("--batch-size
 * 64", "batch_size=64"); words NULL: the library's. Returns buf. */
const char *mr_session_word(const mr_session_words *words, mr_session_arg a, const char *value,
                            char *buf, size_t n);

/* Argument a's name alone as words name it ("--save", "save"); words
 * NULL: the library's. */
const char *mr_session_name(const mr_session_words *words, mr_session_arg a);

#endif
