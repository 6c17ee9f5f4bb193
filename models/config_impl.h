/* config_impl.h: what the files of the .cfg reader share, for them only
 * (models/config*.c): the sections and their keys (config_keys.c), the
 * value parsers (config_values.c), values spelled as Python
 * (config_python.c), the parsing state and its one failure
 * (config.c) and the checks between keys (config_check.c). */
#ifndef MR_CONFIG_IMPL_H
#define MR_CONFIG_IMPL_H

#include <stddef.h>

#include "models/config.h"
#include "models/config_keys.h"

/* The section of the keys that every layer section takes (name, input). */
#define MR_CFG_ANY_LAYER "any layer"

/* Which struct a section's keys live in. */
typedef enum mr_sec_kind { MR_SEC_NET, MR_SEC_DATA, MR_SEC_AUGMENT, MR_SEC_LAYER } mr_sec_kind;

/* The sections, in the order the reference lists them: [net], [data],
 * [augment], then a layer section per kind, in mr_layer_kind's order (its
 * index minus MR_CFG_SINGLETONS). */
#define MR_CFG_SINGLETONS 3
#define MR_CFG_N_SECTIONS (MR_CFG_SINGLETONS + MR_LAYER_KIND_COUNT)
/* The most keys a section takes (its own and those of every layer section). */
#define MR_CFG_MAX_KEYS 64

const char *mr_cfg_section_name(int s);
mr_sec_kind mr_cfg_section_kind(int s);
/* Its line in the reference. */
const char *mr_cfg_section_help(int s);
/* The layer kind of section s, -1 for a singleton section. */
int mr_cfg_section_layer_kind(int s);
/* The keys section s takes into out (MR_CFG_MAX_KEYS), in the order the
 * parser tries them: the keys of every layer section first (in a layer
 * section; [input] takes no `input`), then its own; with own_only its own
 * only. Returns how many. */
int mr_cfg_section_keys(int s, int own_only, const mr_config_key **out);
/* The generic key table ([net], [data], [augment], every layer section's,
 * [input]'s), n rows. */
const mr_config_key *mr_cfg_generic_keys(size_t *n);
/* The section named `name` (any case, ours or a layer kind's Keras
 * names), -1 none; the known name nearest to `name`, or NULL. */
int mr_cfg_section_index(const char *name);
const char *mr_cfg_nearest_section(const char *name);
/* Keras's class name and automatic layer name of layer kind k (NULL:
 * none): its ops', InputLayer's for the model input. */
void mr_cfg_keras_section_names(int k, const char *out[2]);
/* Levenshtein distance, for "did you mean" (short strings only). */
int mr_cfg_edit_distance(const char *a, const char *b);
/* The names of the [net] monitor and loss values (config_keys.c). */
extern const char *const mr_monitor_names[];
extern const char *const mr_loss_names[];

/* Parses one value of key k into dst (config_values.c). Returns 1, or 0
 * with *why filled. Relative paths resolve against base_dir (NULL: none). */
int mr_cfg_parse_value(const mr_config_key *k, const char *val, void *dst, const char *base_dir,
                       char *why, size_t why_n);

/* Longest value text (a line holds no more). */
#define MR_PY_VALUE_MAX 16384
/* The text the value parsers take for value `val` of key k, which may be
 * spelled as a Keras argument in Python (config_python.c). In buf
 * (MR_PY_VALUE_MAX bytes); NULL with *why filled where it cannot be. */
const char *mr_cfg_py_value(const mr_config_key *k, const char *val, char *buf, char *why,
                            size_t why_n);

/* The state of one parse (config.c). */
typedef struct mr_cfg_parse {
    mr_config *cfg;
    mr_error *err;
    const char *name;     /* file name for messages */
    const char *base_dir; /* relative data paths resolve against it */
    const char *text;     /* remaining input for the reader */
    int line;             /* line the reader returned last */
    int failed;
    int sec; /* the current section (mr_cfg_section_*), -1 none */
    int sec_line;
    int seen[MR_CFG_N_SECTIONS]; /* singleton sections seen */
    int n_keys;                  /* the current section's keys (mr_cfg_section_keys) */
    const mr_config_key *keys[MR_CFG_MAX_KEYS];
    unsigned char keys_set[MR_CFG_MAX_KEYS]; /* keys given in the current section */
} mr_cfg_parse;

/* Records "NAME:LINE: what" as the parse's failure (the first one only);
 * returns 0. */
int mr_cfg_fail(mr_cfg_parse *ps, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks between keys, after the whole file is read (config_check.c); the
 * first failure is the message. Returns 1, or 0 after failing. */
int mr_cfg_cross_check(mr_cfg_parse *ps);

#endif
