/* json.c: the streaming JSON writer (json.h). */
#include "runtime/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

void mr_json_init(mr_json *j, FILE *f, int indent) {
    *j = (mr_json){.f = f, .indent = indent > 0 ? indent : 0};
}

/* The comma and the line break or space before a member of the innermost container. */
static void separate(mr_json *j) {
    int top = j->depth - 1;
    if (j->open[top].count > 0) fputc(',', j->f);
    if (j->open[top].block)
        fprintf(j->f, "\n%*s", j->indent * j->depth, "");
    else if (j->open[top].count > 0)
        fputc(' ', j->f);
    j->open[top].count++;
}

/* Before any value: where a value may go, and its separator. */
static void before_value(mr_json *j) {
    MR_ASSERT(!j->done);
    if (j->depth == 0) return;
    if (j->open[j->depth - 1].object) {
        MR_ASSERT(j->after_key); /* a member of an object needs its key first */
        j->after_key = 0;
        return;
    }
    separate(j);
}

static void after_value(mr_json *j) {
    if (j->depth == 0) j->done = 1;
}

static void write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\b':
            fputs("\\b", f);
            break;
        case '\f':
            fputs("\\f", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f); /* ASCII, and UTF-8 bytes as they are */
        }
    }
    fputc('"', f);
}

static void begin(mr_json *j, int object, mr_json_layout layout) {
    before_value(j);
    MR_ASSERT(j->depth < MR_JSON_MAX_DEPTH);
    int parent_block = j->depth == 0 || j->open[j->depth - 1].block;
    j->open[j->depth].object = (char)object;
    j->open[j->depth].block = layout == MR_JSON_BLOCK && j->indent > 0 && parent_block;
    j->open[j->depth].count = 0;
    j->depth++;
    fputc(object ? '{' : '[', j->f);
}

static void end(mr_json *j, int object) {
    MR_ASSERT(j->depth > 0 && j->open[j->depth - 1].object == object);
    MR_ASSERT(!j->after_key); /* a key without its value */
    j->depth--;
    if (j->open[j->depth].block && j->open[j->depth].count > 0)
        fprintf(j->f, "\n%*s", j->indent * j->depth, "");
    fputc(object ? '}' : ']', j->f);
    after_value(j);
}

void mr_json_begin_object(mr_json *j, mr_json_layout layout) {
    begin(j, 1, layout);
}

void mr_json_end_object(mr_json *j) {
    end(j, 1);
}

void mr_json_begin_array(mr_json *j, mr_json_layout layout) {
    begin(j, 0, layout);
}

void mr_json_end_array(mr_json *j) {
    end(j, 0);
}

void mr_json_key(mr_json *j, const char *key) {
    MR_ASSERT(j->depth > 0 && j->open[j->depth - 1].object && !j->after_key);
    separate(j);
    write_string(j->f, key);
    fputs(": ", j->f);
    j->after_key = 1;
}

void mr_json_string(mr_json *j, const char *s) {
    before_value(j);
    write_string(j->f, s);
    after_value(j);
}

void mr_json_stringf(mr_json *j, const char *fmt, ...) {
    char small[256], *s = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small) {
        s = malloc((size_t)n + 1);
        if (s != NULL) {
            va_start(ap, fmt);
            vsnprintf(s, (size_t)n + 1, fmt, ap);
            va_end(ap);
        }
    }
    if (n < 0 || s == NULL) {
        j->failed = 1;
        s = small;
        small[0] = '\0';
    }
    mr_json_string(j, s);
    if (s != small) free(s);
}

void mr_json_int(mr_json *j, long long v) {
    before_value(j);
    fprintf(j->f, "%lld", v);
    after_value(j);
}

void mr_json_double(mr_json *j, double v, const char *fmt) {
    before_value(j);
    if (isfinite(v))
        fprintf(j->f, fmt != NULL ? fmt : "%.17g", v);
    else
        fputs("null", j->f);
    after_value(j);
}

void mr_json_bool(mr_json *j, int v) {
    before_value(j);
    fputs(v ? "true" : "false", j->f);
    after_value(j);
}

void mr_json_null(mr_json *j) {
    before_value(j);
    fputs("null", j->f);
    after_value(j);
}

int mr_json_finish(mr_json *j) {
    MR_ASSERT(j->depth == 0 && j->done);
    fputc('\n', j->f);
    int bad = fflush(j->f) != 0;
    return bad || ferror(j->f) || j->failed ? -1 : 0;
}
