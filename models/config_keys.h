/* config_keys.h: what a .cfg key is, for the key tables: the generic one
 * ([net], [data], [augment], the keys of every layer section and [input],
 * models/config_keys.c) and each layer kind's own (mr_layer_ops.keys, in
 * models/<kind>.c). One row per key: its type, where its value goes,
 * default, allowed range, help text and Keras spelling; the rows drive
 * parsing, validation, the error messages, --help-config and
 * docs/usage.md's table (models/config.c, config_reference.c). */
#ifndef MR_CONFIG_KEYS_H
#define MR_CONFIG_KEYS_H

#include <stddef.h>

#include "models/config.h"

MR_C_BEGIN

typedef enum mr_key_type {
    MR_KEY_INT,
    MR_KEY_INT64,
    MR_KEY_FLOAT,
    MR_KEY_BOOL,
    MR_KEY_ENUM,
    MR_KEY_PATH,
    MR_KEY_INTS,
    MR_KEY_FLOATS, /* comma-separated numbers into an mr_floats (or mr_class_weights), n_ints
                      of them at most */
    MR_KEY_EVERY,  /* "N", "N epochs" or "N steps" into an mr_every */
    MR_KEY_NAME,   /* a layer's name: letters, digits, '_', at most MR_NAME_MAX - 1 */
    MR_KEY_REF     /* an earlier layer: its name, or -N (N sections back) */
} mr_key_type;

/* What a value spelled as Python (Keras's arguments) may also be, beyond
 * the quoted strings, True/False and tuples or lists every key takes. */
enum {
    MR_PY_NONE = 1,  /* None: the key's default (Keras's None means the same here) */
    MR_PY_L2 = 2,    /* l2(x), L2(x), L2(l2=x), "l2" (x 0.01): Keras's L2 regularizer, as x */
    MR_PY_PAIRS = 4, /* ((t, b), (l, r)): Keras's ZeroPadding2D padding */
};

typedef struct mr_config_key {
    const char *section; /* its section's name ("any layer": every layer section) */
    const char *key;
    const char *keras; /* Keras's argument name where it differs ("kernel_size"), or NULL */
    unsigned py;       /* MR_PY_* : the Python spellings the key also takes */
    mr_key_type type;
    size_t offset;            /* into mr_net_cfg, mr_data_cfg, mr_augment_cfg or mr_layer_cfg */
    const char *def;          /* default as text; NULL = required */
    double min, max;          /* allowed range (numbers, and counts for MR_KEY_INTS) */
    int open_min;             /* 1: min itself is not allowed */
    int open_max;             /* 1: max itself is not allowed */
    const char *const *names; /* MR_KEY_ENUM: allowed values, NULL-terminated */
    int n_ints;               /* MR_KEY_INTS, MR_KEY_FLOATS: how many numbers at most */
    const char *help;
} mr_config_key;

/* A layer key's place in mr_layer_cfg, and a range without a bound. */
#define MR_LAY(f)  offsetof(mr_layer_cfg, f)
#define MR_KEY_BIG 1e30
/* A kind's key table and its length, for mr_layer_ops's keys and n_keys. */
#define MR_KEYS(t) (t), (int)(sizeof(t) / sizeof((t)[0]))

/* The values of the enum keys, in their enums' order, NULL-terminated. */
extern const char *const mr_activation_names[];
extern const char *const mr_padding_names[];
extern const char *const mr_initializer_names[];

MR_C_END

#endif
