/* config_python.c: .cfg values spelled as Keras's arguments in Python
 * (quotes, tuples and lists, None, l2(x), ZeroPadding2D's pairs), turned
 * into the text the value parsers take (config_values.c). */
#include "models/config_impl.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* s without blanks at either end (in place). */
static char *trim(char *s) {
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* s without one pair of matching outer brackets, "(...)" or "[...]", and
 * the trailing comma of Python's one-tuple "(784,)"; s itself without. */
static char *strip_brackets(char *s) {
    size_t n = strlen(s);
    if (n < 2 || !((s[0] == '(' && s[n - 1] == ')') || (s[0] == '[' && s[n - 1] == ']'))) return s;
    s[n - 1] = '\0';
    s = trim(s + 1);
    n = strlen(s);
    if (n > 0 && s[n - 1] == ',') s[n - 1] = '\0';
    return trim(s);
}

/* MR_PY_PAIRS: "(t, b), (l, r)" (outer brackets gone) into "t,b,l,r" in s: Keras's
 * ZeroPadding2D padding=((t, b), (l, r)). */
static int py_pairs(char *s, char *why, size_t why_n) {
    int v[4], n = 0;
    for (char *p = s; *p && n >= 0;) {
        if (strchr("()[], \t", *p)) {
            p++;
            continue;
        }
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || n == 4 || x < INT_MIN || x > INT_MAX)
            n = -1;
        else
            v[n++] = (int)x, p = end;
    }
    if (n != 4) {
        snprintf(why, why_n, "'%s' is not p, (ph, pw) or ((top, bottom), (left, right))", s);
        return 0;
    }
    snprintf(s, strlen(s) + 1, "%d,%d,%d,%d", v[0], v[1], v[2], v[3]);
    return 1;
}

/* MR_PY_L2: the text of the number x of Keras's regularizer l2(x), L2(x),
 * L2(l2=x) (keras.regularizers. before it or not) or "l2" (Keras's
 * default x 0.01), from s; a number is itself. NULL with *why filled for
 * another regularizer. */
static const char *py_l2(char *s, char *why, size_t why_n) {
    char *open = strchr(s, '(');
    if (open == NULL) {
        if (!isalpha((unsigned char)s[0])) return s; /* a number, or not: parse_float says */
        if (strcasecmp(s, "l2") == 0) return "0.01";
        snprintf(why, why_n, "'%s': the only regularizer here is L2: l2(x)", s);
        return NULL;
    }
    const char *fn = open;
    while (fn > s && (isalnum((unsigned char)fn[-1]) || fn[-1] == '_'))
        fn--;
    size_t n = strlen(s);
    if (s[n - 1] != ')' || fn == open || (fn > s && fn[-1] != '.')) {
        snprintf(why, why_n, "'%s' is not a number or l2(x)", s);
        return NULL;
    }
    if (open - fn != 2 || strncasecmp(fn, "l2", 2) != 0) {
        snprintf(why, why_n, "'%s': the only regularizer here is L2: l2(x)", s);
        return NULL;
    }
    s[n - 1] = '\0';
    char *arg = trim(open + 1);
    if (strncasecmp(arg, "l2", 2) == 0 && strchr(arg, '=')) arg = trim(strchr(arg, '=') + 1);
    return arg[0] ? arg : "0.01";
}

/* The text the parsers above take for value `val` of key k, which may be
 * spelled as a Keras argument in Python: quotes ('same', "relu") off,
 * tuples and lists ((3, 3), [3, 3], (784,)) as numbers with commas, None
 * as the key's default (MR_PY_NONE), and what k->py allows besides. In buf
 * (MR_PY_VALUE_MAX bytes); NULL with *why filled where it cannot be. */
const char *mr_cfg_py_value(const mr_config_key *k, const char *val, char *buf, char *why,
                            size_t why_n) {
    if (strlen(val) >= MR_PY_VALUE_MAX) {
        snprintf(why, why_n, "the value is longer than %d characters", MR_PY_VALUE_MAX - 1);
        return NULL;
    }
    char *s = trim(strcpy(buf, val));
    if ((k->py & MR_PY_NONE) && strcmp(s, "None") == 0) return k->def;
    size_t n = strlen(s);
    if (n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0] &&
        strchr(s + 1, s[0]) == s + n - 1) {
        s[n - 1] = '\0';
        s++;
    }
    if (k->type == MR_KEY_INTS || k->type == MR_KEY_FLOATS) s = strip_brackets(s);
    if ((k->py & MR_PY_PAIRS) && strpbrk(s, "([") && !py_pairs(s, why, why_n)) return NULL;
    return (k->py & MR_PY_L2) ? py_l2(s, why, why_n) : s;
}
