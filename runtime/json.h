/* json.h: a streaming JSON writer over a FILE*.
 *
 * The writer puts the commas, the ": " after keys and the line breaks
 * itself; the caller says what comes next:
 *
 *     mr_json j;
 *     mr_json_init(&j, f, 2);
 *     mr_json_begin_object(&j, MR_JSON_BLOCK);
 *     mr_json_key(&j, "epochs");
 *     mr_json_int(&j, 3);
 *     mr_json_key(&j, "run");
 *     mr_json_begin_object(&j, MR_JSON_INLINE);
 *     mr_json_key(&j, "label");
 *     mr_json_string(&j, "cpu");
 *     mr_json_end_object(&j);
 *     mr_json_end_object(&j);
 *     mr_json_finish(&j);
 *
 * writes
 *
 *     {
 *       "epochs": 3,
 *       "run": {"label": "cpu"}
 *     }
 *
 * A BLOCK container puts each member on a line of its own, indented by
 * `indent` spaces per level; an INLINE one keeps them on one line, ", "
 * between them, and so does everything inside it. With indent 0 every
 * container is inline. Empty containers are "{}" and "[]".
 *
 * Strings are escaped as JSON requires (quote, backslash, control
 * characters); bytes from 0x80 up are copied, so UTF-8 text stays as it is.
 * Doubles are written with the caller's printf format, and a NaN or an
 * infinity (which JSON cannot hold) as null. Write errors are those of the
 * FILE (mr_json_finish reports them); using the writer out of order (a value
 * in an object without its key, closing what is not open) is a programmer
 * error and aborts through MR_ASSERT. Relies on stdio and error.h. */
#ifndef MR_JSON_H
#define MR_JSON_H

#include <stdio.h>

#include "runtime/error.h"

MR_C_BEGIN

enum { MR_JSON_MAX_DEPTH = 32 };

typedef enum mr_json_layout {
    MR_JSON_BLOCK,  /* one member per line, indented */
    MR_JSON_INLINE, /* all on one line */
} mr_json_layout;

typedef struct mr_json {
    FILE *f;
    int indent;    /* spaces per level of a BLOCK container; 0: all inline */
    int depth;     /* open containers */
    int after_key; /* a key was written, its value is next */
    int done;      /* the top-level value is complete */
    int failed;    /* an allocation failed (mr_json_stringf) */
    struct {
        char object; /* 1 object, 0 array */
        char block;  /* members on lines of their own */
        int count;   /* members written */
    } open[MR_JSON_MAX_DEPTH];
} mr_json;

/* A writer of one JSON value (usually an object) to f. */
void mr_json_init(mr_json *j, FILE *f, int indent);

void mr_json_begin_object(mr_json *j, mr_json_layout layout);
void mr_json_end_object(mr_json *j);
void mr_json_begin_array(mr_json *j, mr_json_layout layout);
void mr_json_end_array(mr_json *j);

/* The key of the next member of the object being written. */
void mr_json_key(mr_json *j, const char *key);

/* Values: in an array, after a key in an object, or the top-level value. */
void mr_json_string(mr_json *j, const char *s);
/* A string from printf-style arguments (escaped like mr_json_string). */
void mr_json_stringf(mr_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mr_json_int(mr_json *j, long long v);
/* v with fmt, a printf format of one double that writes a JSON number
 * ("%.6f", "%.10g"; NULL: "%.17g", which reads back exactly); NaN and
 * infinities as null. */
void mr_json_double(mr_json *j, double v, const char *fmt);
void mr_json_bool(mr_json *j, int v);
void mr_json_null(mr_json *j);

/* Ends the document with a newline and flushes the FILE. The top-level
 * value must be complete (every container closed). Returns 0, or -1 if a
 * write to the FILE failed (then or before: its error indicator is set) or
 * an allocation did. */
int mr_json_finish(mr_json *j);

MR_C_END

#endif
