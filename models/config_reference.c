/* config_reference.c: the reference of every .cfg section and key, and
 * their Keras spellings (--help-config, and docs/usage.md's tables with
 * markdown), from the key tables (models/config_keys.h). */
#include "models/config_impl.h"
#include "models/layer.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static void format_range(const mr_config_key *k, char *out, size_t n) {
    switch (k->type) {
    case MR_KEY_INT:
    case MR_KEY_INT64:
        if (k->max >= (double)INT64_MAX) /* %.0f would print 2^63 */
            snprintf(out, n, "%.0f .. %lld", k->min, (long long)INT64_MAX);
        else
            snprintf(out, n, "%.0f .. %.0f", k->min, k->max);
        break;
    case MR_KEY_FLOAT:
        snprintf(out, n, "%c%g, %g%c", k->open_min ? '(' : '[', k->min, k->max,
                 k->open_max ? ')' : ']');
        break;
    case MR_KEY_BOOL:
        snprintf(out, n, "0 or 1");
        break;
    case MR_KEY_ENUM: {
        out[0] = '\0';
        for (int i = 0; k->names[i]; i++) {
            strncat(out, i ? ", " : "", n - strlen(out) - 1);
            strncat(out, k->names[i], n - strlen(out) - 1);
        }
        break;
    }
    case MR_KEY_PATH:
        snprintf(out, n, "path");
        break;
    case MR_KEY_INTS:
        snprintf(out, n, "%d number%s, each %.0f .. %.0f", k->n_ints,
                 k->n_ints > 1 ? "s at most" : "", k->min, k->max);
        break;
    case MR_KEY_FLOATS:
        snprintf(out, n, "up to %d numbers, each %c%g, %g]", k->n_ints, k->open_min ? '(' : '[',
                 k->min, k->max);
        break;
    case MR_KEY_EVERY:
        snprintf(out, n, "N epochs or N steps, N %.0f .. %.0f", k->min, k->max);
        break;
    case MR_KEY_NAME:
        snprintf(out, n, "letters, digits, _");
        break;
    case MR_KEY_REF:
        snprintf(out, n, "a layer's name, or -N");
        break;
    }
}

static void write_key(FILE *out, int markdown, const char *section, const mr_config_key *k) {
    char range[256];
    format_range(k, range, sizeof range);
    const char *def = k->def == NULL ? "(required)" : k->def[0] ? k->def : "(none)";
    if (markdown)
        fprintf(out, "| `[%s]` | `%s` | %s | %s | %s |\n", section, k->key, def, range, k->help);
    else
        fprintf(out, "    %-17s default %-12s %s; allowed: %s\n", k->key, def, k->help, range);
}

/* Python spellings key k takes beyond quotes, tuples and True/False, as
 * text for the reference ("" none). */
static void py_notes(const mr_config_key *k, char *out, size_t n) {
    out[0] = '\0';
    if (k->py & MR_PY_L2)
        snprintf(out, n, "l2(x), L2(x), L2(l2=x), 'l2' (x 0.01)");
    else if (k->py & MR_PY_PAIRS)
        snprintf(out, n, "((top, bottom), (left, right))");
    if (k->py & MR_PY_NONE) {
        size_t o = strlen(out);
        snprintf(out + o, n - o, "%sNone: %s", o ? "; " : "", k->def[0] ? k->def : "not given");
    }
}

/* Key k's row in the table of Keras spellings, where it has one (a Keras
 * argument name of its own, or Python values). */
static void write_keras_key(FILE *out, int markdown, const mr_config_key *k) {
    if (k->keras == NULL && k->py == 0) return;
    char ours[64], notes[128];
    snprintf(ours, sizeof ours, "[%s] %s", k->section, k->key);
    py_notes(k, notes, sizeof notes);
    const char *keras = k->keras ? k->keras : k->key;
    if (markdown)
        fprintf(out, "| `%s` | `%s` | %s |\n", ours, keras, notes);
    else
        fprintf(out, "    %-28s %s%s%s\n", ours, keras, notes[0] ? "; " : "", notes);
}

/* The Keras spellings of the sections and keys: a layer kind's Keras class
 * and automatic names (its ops'), a key's Keras argument name and the
 * Python values it also takes. */
static void write_keras_names(FILE *out, int markdown) {
    if (markdown)
        fprintf(out, "\nTheir Keras spellings, taken as the names above (any case):\n\n"
                     "| .cfg | Keras | Python values |\n|---|---|---|\n");
    else
        fprintf(out, "[Keras names]  taken as the names above (any case)\n");
    for (size_t s = 0; s < MR_CFG_N_SECTIONS; s++) {
        const int k = mr_cfg_section_layer_kind((int)s);
        if (k < 0) continue;
        const char *kn[2];
        mr_cfg_keras_section_names(k, kn);
        char names[96];
        snprintf(names, sizeof names, markdown ? "`[%s]`" : "[%s]", kn[0]);
        if (strcasecmp(kn[1], kn[0]) != 0 &&
            strcasecmp(kn[1], mr_layer_kind_name((mr_layer_kind)k)) != 0)
            snprintf(names + strlen(names), sizeof names - strlen(names),
                     markdown ? ", `[%s]`" : ", [%s]", kn[1]);
        if (markdown)
            fprintf(out, "| `[%s]` | %s | |\n", mr_layer_kind_name((mr_layer_kind)k), names);
        else
            fprintf(out, "    [%s]%*s %s\n", mr_layer_kind_name((mr_layer_kind)k),
                    26 - (int)strlen(mr_layer_kind_name((mr_layer_kind)k)), "", names);
    }
    /* the generic table's keys, then each layer kind's own, in kind order */
    size_t n_generic;
    const mr_config_key *generic = mr_cfg_generic_keys(&n_generic);
    for (int s = 0; s <= MR_LAYER_KIND_COUNT; s++) {
        const mr_layer_ops *ops = s ? mr_layer_ops_for((mr_layer_kind)(s - 1)) : NULL;
        const mr_config_key *keys = s ? (ops ? ops->keys : NULL) : generic;
        const int n = s ? (ops ? ops->n_keys : 0) : (int)n_generic;
        for (int i = 0; i < n; i++)
            write_keras_key(out, markdown, &keys[i]);
    }
}

void mr_config_write_reference(FILE *out, int markdown) {
    if (markdown) {
        fprintf(out, "| section | key | default | allowed | meaning |\n|---|---|---|---|---|\n");
    }
    for (size_t s = 0; s < MR_CFG_N_SECTIONS; s++) {
        int any = 0;
        if (!markdown)
            fprintf(out, "[%s]  %s\n", mr_cfg_section_name((int)s), mr_cfg_section_help((int)s));
        const mr_config_key *keys[MR_CFG_MAX_KEYS];
        const int n = mr_cfg_section_keys((int)s, 1, keys);
        for (int i = 0; i < n; i++) {
            any = 1;
            write_key(out, markdown, mr_cfg_section_name((int)s), keys[i]);
        }
        if (markdown && !any)
            fprintf(out, "| `[%s]` | | | | %s |\n", mr_cfg_section_name((int)s),
                    mr_cfg_section_help((int)s));
    }
    /* the keys every layer section takes, once */
    if (!markdown) fprintf(out, "[any layer]  keys of every layer section, [input] included\n");
    size_t n_generic;
    const mr_config_key *generic = mr_cfg_generic_keys(&n_generic);
    for (size_t i = 0; i < n_generic; i++)
        if (strcmp(generic[i].section, MR_CFG_ANY_LAYER) == 0)
            write_key(out, markdown, MR_CFG_ANY_LAYER, &generic[i]);
    write_keras_names(out, markdown);
}
