/* config_values.c: the value parsers of the .cfg keys, one per key type
 * (models/config_keys.h): each parses a value's text for its key into its
 * place in the config, or says why it cannot. */
#include "models/config_impl.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int is_blank(const char *s) {
    while (isspace((unsigned char)*s))
        s++;
    return *s == '\0';
}

/* The value parsers, one per key type: each parses val for key k into dst
 * and returns 1, or 0 with *why filled. */

/* MR_KEY_INT (an int) and MR_KEY_INT64 (an int64_t). */
static int parse_int(const mr_config_key *k, const char *val, void *dst, char *why, size_t why_n) {
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (end == val || !is_blank(end) || errno) {
        snprintf(why, why_n, "'%s' is not an integer%s", val, errno == ERANGE ? " of 64 bits" : "");
        return 0;
    }
    /* seed's max, (double)INT64_MAX, is 2^63: every int64 passes */
    if ((double)v < k->min || (double)v > k->max) {
        snprintf(why, why_n, "%lld is out of range [%.15g, %.15g]", v, k->min, k->max);
        return 0;
    }
    if (k->type == MR_KEY_INT)
        *(int *)dst = (int)v;
    else
        *(int64_t *)dst = (int64_t)v;
    return 1;
}

/* MR_KEY_FLOATS: an mr_floats or an mr_class_weights, a count, then room for
 * k->n_ints floats (config.h). */
static int parse_floats(const mr_config_key *k, const char *val, void *dst, char *why,
                        size_t why_n) {
    _Static_assert(offsetof(mr_floats, v) == offsetof(mr_class_weights, v),
                   "MR_KEY_FLOATS destinations share a layout");
    int *count = dst;
    float *list = (float *)((char *)dst + offsetof(mr_floats, v));
    *count = 0;
    const char *p = val;
    char *end;
    while (*p != '\0' && isspace((unsigned char)*p))
        p++;
    while (*p != '\0') {
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v)) {
            snprintf(why, why_n, "'%s' is not a comma-separated list of numbers", val);
            return 0;
        }
        if (*count == k->n_ints) {
            snprintf(why, why_n, "'%s' has more than %d numbers", val, k->n_ints);
            return 0;
        }
        int lo_bad = k->open_min ? v <= k->min : v < k->min;
        if (lo_bad || v > k->max) {
            snprintf(why, why_n, "%g is out of range %c%g, %g]", v, k->open_min ? '(' : '[', k->min,
                     k->max);
            return 0;
        }
        list[(*count)++] = (float)v;
        while (isspace((unsigned char)*end))
            end++;
        if (*end == '\0') break;
        if (*end != ',') {
            snprintf(why, why_n, "'%s' is not a comma-separated list of numbers", val);
            return 0;
        }
        p = end + 1;
    }
    return 1;
}

/* MR_KEY_FLOAT: a number, or a fraction such as 1/255. */
static int parse_float(const mr_config_key *k, const char *val, void *dst, char *why,
                       size_t why_n) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (end != val && *end == '/') {
        const char *den_s = end + 1;
        double den = strtod(den_s, &end);
        if (end == den_s || den == 0.0) {
            snprintf(why, why_n, "'%s' is not a number", val);
            return 0;
        }
        v /= den;
    }
    if (end == val || !is_blank(end) || errno || !isfinite(v)) {
        snprintf(why, why_n, "'%s' is not a number", val);
        return 0;
    }
    int lo_bad = k->open_min ? v <= k->min : v < k->min;
    int hi_bad = k->open_max ? v >= k->max : v > k->max;
    if (lo_bad || hi_bad) {
        snprintf(why, why_n, "%g is out of range %c%g, %g%c", v, k->open_min ? '(' : '[', k->min,
                 k->max, k->open_max ? ')' : ']');
        return 0;
    }
    *(float *)dst = (float)v;
    return 1;
}

static int parse_bool(const char *val, void *dst, char *why, size_t why_n) {
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(val, yes[i]) == 0) return *(int *)dst = 1, 1;
        if (strcasecmp(val, no[i]) == 0) return *(int *)dst = 0, 1;
    }
    snprintf(why, why_n, "'%s' is not a boolean (use 1/0, true/false, yes/no)", val);
    return 0;
}

/* Other spellings of MR_KEY_ENUM values: Keras's long loss names for the short ones. */
static const struct {
    const char *const *names; /* the key's value list */
    const char *alias;
    int index; /* the value it names */
} enum_aliases[] = {
    {mr_loss_names, "mean_squared_error", MR_LOSS_MSE},
    {mr_loss_names, "mean_absolute_error", MR_LOSS_MAE},
};

/* MR_KEY_ENUM: one of k->names or of their enum_aliases, any case, into an int (its index). */
static int parse_enum(const mr_config_key *k, const char *val, void *dst, char *why, size_t why_n) {
    for (int i = 0; k->names[i]; i++)
        if (strcasecmp(val, k->names[i]) == 0) return *(int *)dst = i, 1;
    for (size_t i = 0; i < sizeof enum_aliases / sizeof enum_aliases[0]; i++)
        if (enum_aliases[i].names == k->names && strcasecmp(val, enum_aliases[i].alias) == 0)
            return *(int *)dst = enum_aliases[i].index, 1;
    char list[256] = "";
    for (int i = 0; k->names[i]; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, k->names[i], sizeof list - strlen(list) - 1);
    }
    snprintf(why, why_n, "'%s' is not one of: %s", val, list);
    return 0;
}

/* MR_KEY_PATH: relative to base_dir (if any), into MR_PATH_MAX chars. */
static int parse_path(const char *val, char *out, const char *base_dir, char *why, size_t why_n) {
    if (val[0] == '\0' || val[0] == '/' || base_dir == NULL || base_dir[0] == '\0')
        snprintf(out, MR_PATH_MAX, "%s", val);
    else
        snprintf(out, MR_PATH_MAX, "%s/%s", base_dir, val);
    if (strlen(val) + (base_dir ? strlen(base_dir) : 0) + 2 > MR_PATH_MAX) {
        snprintf(why, why_n, "path too long");
        return 0;
    }
    return 1;
}

/* MR_KEY_EVERY: "N", "N epochs" or "N steps" into an mr_every. */
static int parse_every(const mr_config_key *k, const char *val, mr_every *out, char *why,
                       size_t why_n) {
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    int steps = -1;
    if (*end == '\0' || strcasecmp(end, "epochs") == 0 || strcasecmp(end, "epoch") == 0)
        steps = 0;
    else if (strcasecmp(end, "steps") == 0 || strcasecmp(end, "step") == 0)
        steps = 1;
    if (end == val || errno || steps < 0) {
        snprintf(why, why_n, "'%s' is not N epochs or N steps", val);
        return 0;
    }
    if ((double)v < k->min || (double)v > k->max) {
        snprintf(why, why_n, "%lld is out of range [%.15g, %.15g]", v, k->min, k->max);
        return 0;
    }
    out->n = (int64_t)v;
    out->steps = steps;
    return 1;
}

/* MR_KEY_NAME and MR_KEY_REF: a name, or (a reference only) -N, N sections back. */
static int parse_name(const mr_config_key *k, const char *val, char *dst, char *why, size_t why_n) {
    size_t n = strlen(val);
    if (k->type == MR_KEY_REF && val[0] == '-') {
        char *end;
        errno = 0;
        long v = strtol(val + 1, &end, 10);
        if (end == val + 1 || !is_blank(end) || errno || v < 1 || v > MR_MAX_LAYERS) {
            snprintf(why, why_n, "'%s' is not a layer name or -N (N from 1 to %d)", val,
                     MR_MAX_LAYERS);
            return 0;
        }
    } else {
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)val[i]) && val[i] != '_') {
                snprintf(why, why_n, "'%s' is not a name (letters, digits and _)%s", val,
                         k->type == MR_KEY_REF ? " or -N" : "");
                return 0;
            }
        if (n >= MR_NAME_MAX) {
            snprintf(why, why_n, "'%s' is longer than %d characters", val, MR_NAME_MAX - 1);
            return 0;
        }
    }
    snprintf(dst, MR_NAME_MAX, "%s", val);
    return 1;
}

/* MR_KEY_INTS: integers separated by ',' or 'x', k->n_ints at most; one for a
 * pair means both (size=3 -> 3x3); a layer's shape records its rank. */
/* [zeropad] padding's n numbers in out as top,bottom,left,right: p on every side, ph,pw above
 * and below, left and right, or the four. */
static int pads_of(int n, int out[4], const char *val, char *why, size_t why_n) {
    if (n == 3) {
        snprintf(why, why_n, "'%s' is not p, ph,pw or top,bottom,left,right", val);
        return 0;
    }
    if (n == 1) out[1] = out[2] = out[3] = out[0];
    if (n == 2) out[3] = out[2] = out[1], out[1] = out[0];
    return 1;
}

static int parse_ints(const mr_config_key *k, const char *val, int *out, char *why, size_t why_n) {
    int n = 0;
    const char *p = val;
    char *end;
    while (1) {
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno) {
            snprintf(why, why_n, "'%s' is not a list of integers", val);
            return 0;
        }
        if (n == k->n_ints) {
            snprintf(why, why_n, "'%s' has more than %d numbers", val, k->n_ints);
            return 0;
        }
        if (v < k->min || v > k->max) {
            snprintf(why, why_n, "%ld is out of range [%g, %g]", v, k->min, k->max);
            return 0;
        }
        out[n++] = (int)v;
        while (isspace((unsigned char)*end))
            end++;
        if (*end == '\0') break;
        if (*end != ',' && *end != 'x') {
            snprintf(why, why_n, "'%s' is not a comma-separated list of integers", val);
            return 0;
        }
        p = end + 1;
    }
    if (k->n_ints == 2 && n == 1) out[1] = out[0];
    if (k->offset == MR_LAY(pad) && !pads_of(n, out, val, why, why_n)) return 0;
    if (k->offset == MR_LAY(target_shape)) /* remember its rank */
        ((mr_layer_cfg *)((char *)out - MR_LAY(target_shape)))->target_rank = n;
    if (k->offset == MR_LAY(shape)) {
        /* remember how many numbers the shape had */
        mr_layer_cfg *l = (mr_layer_cfg *)((char *)out - MR_LAY(shape));
        l->shape_rank = n;
        if (n == 2) {
            snprintf(why, why_n, "shape '%s' must be H,W,C or F", val);
            return 0;
        }
    }
    return 1;
}

/* Parses one value of key k into dst. Returns 1, or 0 with *why filled. */
int mr_cfg_parse_value(const mr_config_key *k, const char *val, void *dst, const char *base_dir,
                       char *why, size_t why_n) {
    switch (k->type) {
    case MR_KEY_INT:
    case MR_KEY_INT64:
        return parse_int(k, val, dst, why, why_n);
    case MR_KEY_FLOATS:
        return parse_floats(k, val, dst, why, why_n);
    case MR_KEY_FLOAT:
        return parse_float(k, val, dst, why, why_n);
    case MR_KEY_BOOL:
        return parse_bool(val, dst, why, why_n);
    case MR_KEY_ENUM:
        return parse_enum(k, val, dst, why, why_n);
    case MR_KEY_PATH:
        return parse_path(val, dst, base_dir, why, why_n);
    case MR_KEY_EVERY:
        return parse_every(k, val, dst, why, why_n);
    case MR_KEY_NAME:
    case MR_KEY_REF:
        return parse_name(k, val, dst, why, why_n);
    case MR_KEY_INTS:
        return parse_ints(k, val, dst, why, why_n);
    }
    return 0;
}
