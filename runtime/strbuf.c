/* strbuf.c: see strbuf.h. */
#include "runtime/strbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mr_sb_init(mr_sb *b) {
    memset(b, 0, sizeof *b);
}

static int grow(mr_sb *b, size_t more) {
    if (b->failed) return 0;
    if (b->len + more + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (s == NULL) {
        b->failed = 1;
        return 0;
    }
    b->s = s, b->cap = cap;
    return 1;
}

void mr_sb_printf(mr_sb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !grow(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void mr_sb_json_str(mr_sb *b, const char *s) {
    mr_sb_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            mr_sb_printf(b, "\\%c", *p);
        else if (*p == '\n')
            mr_sb_printf(b, "\\n");
        else if (*p == '\t')
            mr_sb_printf(b, "\\t");
        else if (*p < 0x20)
            mr_sb_printf(b, "\\u%04x", *p);
        else
            mr_sb_printf(b, "%c", *p);
    }
    mr_sb_printf(b, "\"");
}

void mr_sb_float(mr_sb *b, float v) {
    if (!isfinite(v)) {
        mr_sb_printf(b, "null");
        return;
    }
    char buf[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    /* a JSON reader that sees "2" reads an integer: keep it a float */
    if (!strpbrk(buf, ".eE")) strcat(buf, ".0");
    mr_sb_printf(b, "%s", buf);
}

char *mr_sb_take(mr_sb *b) {
    char *s = b->failed ? NULL : b->s;
    if (s == NULL && !b->failed) s = calloc(1, 1);
    if (b->failed) free(b->s);
    mr_sb_init(b);
    return s;
}

void mr_sb_free(mr_sb *b) {
    free(b->s);
    mr_sb_init(b);
}
