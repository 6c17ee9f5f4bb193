/* strbuf.h: a growing string for the JSON and text the runtime writes
 * (Keras configs, JSON lines, summaries). An allocation failure is kept
 * and reported once at the end (mr_sb_take returns NULL), so writers need
 * no check after every append. */
#ifndef MR_STRBUF_H
#define MR_STRBUF_H

#include <stddef.h>

typedef struct mr_sb {
    char *s;
    size_t len, cap;
    int failed; /* an allocation failed: the contents are incomplete */
} mr_sb;

void mr_sb_init(mr_sb *b);
/* Appends printf-formatted text. */
void mr_sb_printf(mr_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quotes, escapes). */
void mr_sb_json_str(mr_sb *b, const char *s);
/* Appends the shortest decimal that reads back as the same float (JSON
 * number; "NaN"/"Infinity" have no JSON form and become null). */
void mr_sb_float(mr_sb *b, float v);
/* The text (malloc'd, the caller frees), or NULL if an allocation failed;
 * b is empty afterwards. */
char *mr_sb_take(mr_sb *b);
void mr_sb_free(mr_sb *b);

#endif
