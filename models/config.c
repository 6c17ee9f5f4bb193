/* config.c: .cfg parsing with inih, driven by the key tables
 * (config_keys.h).
 *
 * inih reports key=value pairs but not section headers (Debian builds it
 * without INI_CALL_HANDLER_ON_NEW_SECTION), and layer sections repeat
 * ([dense] twice) and may be empty ([flatten]). So we feed inih through
 * ini_parse_stream with our own line reader: the reader sees every raw line,
 * counts lines (for error messages) and opens a new section record whenever a
 * header goes by; the key handler then fills the most recent section.
 *
 * The sections and their keys are config_keys.c's (a layer kind's own keys
 * are its definition's, mr_layer_ops); a value's text is parsed by
 * config_values.c after config_python.c has read it as Python where Keras
 * spells it so; the checks between keys, once the file is read, are
 * config_check.c's. Keras's spellings read as ours: a layer section's
 * Keras class and automatic names, a key's Keras argument name. */
#include "models/config.h"
#include "models/config_impl.h"
#include "runtime/file_kind.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* Keras's names for something that differs here: refused, with the key to use. */
static const struct {
    const char *section, *name, *hint;
} key_hints[] = {
    {"net", "lr",
     "did you mean 'learning_rate'? (the rate for a batch of `batch`, scaled with the replica "
     "count by lr_scaling; with global_batch: the rate of that global batch)"},
    {"net", "batch_size",
     "did you mean 'global_batch' (Keras's batch_size under MirroredStrategy: the global batch) "
     "or 'batch' (per replica)?"},
};

static void *section_base(mr_cfg_parse *ps) {
    switch (mr_cfg_section_kind(ps->sec)) {
    case MR_SEC_NET:
        return &ps->cfg->net;
    case MR_SEC_DATA:
        return &ps->cfg->data;
    case MR_SEC_AUGMENT:
        return &ps->cfg->augment;
    case MR_SEC_LAYER:
        return &ps->cfg->layers[ps->cfg->n_layers - 1];
    }
    return NULL;
}

/* Fills section s's struct at base with its keys' defaults. */
static void apply_defaults(int s, void *base) {
    const mr_config_key *keys[MR_CFG_MAX_KEYS];
    const int n = mr_cfg_section_keys(s, 0, keys);
    for (int i = 0; i < n; i++) {
        if (keys[i]->def == NULL) continue;
        char why[256];
        if (!mr_cfg_parse_value(keys[i], keys[i]->def, (char *)base + keys[i]->offset, NULL, why,
                                sizeof why))
            MR_ASSERT(!"bad default in the key table");
    }
}

/* Checks the keys required in the section that just ended. */
static int close_section(mr_cfg_parse *ps) {
    if (ps->sec < 0 || ps->failed) return !ps->failed;
    for (int i = 0; i < ps->n_keys; i++)
        if (ps->keys[i]->def == NULL && !ps->keys_set[i])
            return mr_cfg_fail(ps, ps->sec_line, "[%s] is missing the required key '%s' (%s)",
                               mr_cfg_section_name(ps->sec), ps->keys[i]->key, ps->keys[i]->help);
    /* Keras AdamW's own default weight decay, where the file gives none */
    mr_net_cfg *net = &ps->cfg->net;
    if (mr_cfg_section_kind(ps->sec) == MR_SEC_NET && net->optimizer == MR_OPTIMIZER_ADAMW) {
        for (int i = 0; i < ps->n_keys; i++)
            if (strcmp(ps->keys[i]->key, "weight_decay") == 0 && !ps->keys_set[i])
                net->weight_decay = MR_ADAMW_WEIGHT_DECAY;
    }
    return 1;
}

static int open_section(mr_cfg_parse *ps, const char *name, int line) {
    if (!close_section(ps)) return 0;
    int s = mr_cfg_section_index(name);
    if (s < 0) {
        const char *best = mr_cfg_nearest_section(name);
        if (best)
            return mr_cfg_fail(ps, line, "unknown section [%s]; did you mean [%s]?", name, best);
        return mr_cfg_fail(ps, line, "unknown section [%s]", name);
    }
    ps->sec = s;
    ps->sec_line = line;
    memset(ps->keys_set, 0, sizeof ps->keys_set);
    ps->n_keys = mr_cfg_section_keys(s, 0, ps->keys);
    mr_config *cfg = ps->cfg;
    if (mr_cfg_section_kind(s) != MR_SEC_LAYER) {
        if (ps->seen[s])
            return mr_cfg_fail(ps, line, "section [%s] appears twice", mr_cfg_section_name(s));
        ps->seen[s] = 1;
        if (mr_cfg_section_kind(s) == MR_SEC_AUGMENT)
            cfg->augment.present = 1, cfg->augment.line = line;
    } else {
        int kind = mr_cfg_section_layer_kind(s);
        if (cfg->n_layers == 0 && kind != MR_LAYER_INPUT)
            return mr_cfg_fail(ps, line,
                               "[%s] comes before [input]: the first layer section must be [input]",
                               mr_cfg_section_name(s));
        if (cfg->n_layers > 0 && kind == MR_LAYER_INPUT)
            return mr_cfg_fail(ps, line,
                               "a second [input] section: only the first layer may be [input]");
        if (cfg->n_layers == MR_MAX_LAYERS)
            return mr_cfg_fail(ps, line, "too many layers (at most %d)", MR_MAX_LAYERS);
        mr_layer_cfg *l = &cfg->layers[cfg->n_layers++];
        memset(l, 0, sizeof *l);
        l->kind = (mr_layer_kind)kind;
        l->line = line;
    }
    apply_defaults(s, section_base(ps));
    /* [softmax] is an activation layer of softmax: the loss rules read it so */
    if (mr_cfg_section_layer_kind(s) == MR_LAYER_SOFTMAX)
        cfg->layers[cfg->n_layers - 1].activation = MR_ACTIVATION_SOFTMAX;
    return 1;
}

/* Cuts a comment off a header or key line: ';' or '#' after a blank starts
 * one, for every key (inih alone would cut ';' only, and only after the
 * value); without a blank before it the character is part of the value
 * (a path "run#2.h5"). The newline stays, so inih counts the line. */
static void strip_comment(char *line) {
    for (char *c = line + 1; *c; c++)
        if ((*c == ';' || *c == '#') && (c[-1] == ' ' || c[-1] == '\t')) {
            c[0] = '\n', c[1] = '\0';
            return;
        }
}

/* inih reader: returns the next line, and opens a section when the line is a header. */
static char *reader(char *str, int num, void *stream) {
    mr_cfg_parse *ps = stream;
    /* a UTF-8 byte order mark before the first line (inih would skip it, but
     * it never sees it: this reader finds the headers) */
    if (ps->line == 0 && strncmp(ps->text, "\xEF\xBB\xBF", 3) == 0) ps->text += 3;
    if (*ps->text == '\0') return NULL;
    const char *nl = strchr(ps->text, '\n');
    size_t len = nl ? (size_t)(nl - ps->text) + 1 : strlen(ps->text);
    ps->line++;
    if (len >= (size_t)num) {
        mr_cfg_fail(ps, ps->line, "line longer than %d characters", num - 2);
        /* hand inih an empty line and skip the rest */
        ps->text += len;
        str[0] = '\n', str[1] = '\0';
        return str;
    }
    memcpy(str, ps->text, len);
    str[len] = '\0';
    ps->text += len;
    const char *p = str;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == ';' || *p == '#') return str; /* a comment line */
    strip_comment(str);
    /* a section header: [name] with optional blanks and a trailing comment */
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (close == NULL) {
            char *e = str + strlen(str);
            while (e > p && isspace((unsigned char)e[-1]))
                *--e = '\0';
            mr_cfg_fail(ps, ps->line, "section header '%s' has no closing ']'", p);
        } else {
            char name[64];
            size_t n = (size_t)(close - p - 1);
            if (n >= sizeof name) n = sizeof name - 1;
            memcpy(name, p + 1, n);
            name[n] = '\0';
            /* trim */
            char *s = name;
            while (isspace((unsigned char)*s))
                s++;
            char *e = s + strlen(s);
            while (e > s && isspace((unsigned char)e[-1]))
                *--e = '\0';
            if (!ps->failed) open_section(ps, s, ps->line);
        }
    }
    return str;
}

/* ps->keys index of the key named `name` (any case, ours or Keras's) in
 * the current section; -1 none. */
static int key_index(const mr_cfg_parse *ps, const char *name) {
    for (int i = 0; i < ps->n_keys; i++)
        if (strcasecmp(ps->keys[i]->key, name) == 0 ||
            (ps->keys[i]->keras && strcasecmp(ps->keys[i]->keras, name) == 0))
            return i;
    return -1;
}

/* Fails on key `name`, unknown in the current section: a hint where Keras
 * means another thing by it, else the nearest key in either spelling. */
static int unknown_key(mr_cfg_parse *ps, int line, const char *name) {
    const char *sname = mr_cfg_section_name(ps->sec);
    for (size_t h = 0; h < sizeof key_hints / sizeof key_hints[0]; h++)
        if (strcmp(key_hints[h].section, sname) == 0 && strcasecmp(key_hints[h].name, name) == 0)
            return mr_cfg_fail(ps, line, "unknown key '%s' in [%s]; %s", name, sname,
                               key_hints[h].hint);
    const char *best = NULL;
    int bd = 99, any = 0;
    for (int i = 0; i < ps->n_keys; i++) {
        any |= strcmp(ps->keys[i]->section, sname) == 0; /* a key of its own */
        const char *cand[2] = {ps->keys[i]->key, ps->keys[i]->keras};
        for (int j = 0; j < 2; j++) {
            int d = cand[j] ? mr_cfg_edit_distance(name, cand[j]) : 99;
            if (d < bd) bd = d, best = cand[j];
        }
    }
    if (!any && bd > 2)
        return mr_cfg_fail(ps, line,
                           "[%s] takes no keys of its own (only name and input, as every layer), "
                           "but has '%s'",
                           sname, name);
    if (bd <= 3 || (best && strlen(name) > 3 && strstr(best, name)))
        return mr_cfg_fail(ps, line, "unknown key '%s' in [%s]; did you mean '%s'?", name, sname,
                           best);
    return mr_cfg_fail(ps, line, "unknown key '%s' in [%s]", name, sname);
}

static int handler(void *user, const char *section, const char *name, const char *value) {
    mr_cfg_parse *ps = user;
    (void)section;
    if (ps->failed) return 1; /* first error already recorded; keep inih quiet */
    int line = ps->line;
    if (ps->sec < 0) return mr_cfg_fail(ps, line, "'%s' before any [section]", name);
    const char *sname = mr_cfg_section_name(ps->sec);
    int found = key_index(ps, name);
    if (found < 0) return unknown_key(ps, line, name);
    const mr_config_key *k = ps->keys[found];
    int alias = strcasecmp(k->key, name) != 0; /* written as Keras's name */
    if (ps->keys_set[found])
        return mr_cfg_fail(ps, line, "key '%s' given twice in [%s]%s%s%s", k->key, sname,
                           alias ? " (as '" : "", alias ? name : "", alias ? "')" : "");
    ps->keys_set[found] = 1;
    char why[400], text[MR_PY_VALUE_MAX];
    const char *v = mr_cfg_py_value(k, value, text, why, sizeof why);
    void *dst = (char *)section_base(ps) + k->offset;
    if (v == NULL || !mr_cfg_parse_value(k, v, dst, ps->base_dir, why, sizeof why))
        return mr_cfg_fail(ps, line, "[%s] %s: %s", sname, name, why);
    return 1;
}

mr_status mr_config_parse(const char *text, const char *name, const char *base_dir, mr_config *cfg,
                          mr_error *err) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->path, sizeof cfg->path, "%s", name);
    cfg->text = strdup(text);
    if (cfg->text == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", name);
    mr_cfg_parse ps = {
        .cfg = cfg, .err = err, .name = name, .base_dir = base_dir, .text = text, .sec = -1};
    /* defaults of the singleton sections, so a file without [augment] has them */
    for (int s = 0; s < MR_CFG_SINGLETONS; s++) {
        ps.sec = s;
        apply_defaults(s, section_base(&ps));
    }
    ps.sec = -1;
    int rc = ini_parse_stream(reader, &ps, handler, &ps);
    if (!ps.failed && rc > 0)
        mr_cfg_fail(&ps, rc, "cannot parse this line (expected [section] or key = value)");
    if (!ps.failed) close_section(&ps);
    if (!ps.failed) mr_cfg_cross_check(&ps);
    if (ps.failed) {
        mr_config_free(cfg);
        return MR_ERR_CONFIG;
    }
    return MR_OK;
}

mr_status mr_config_load(const char *path, mr_config *cfg, mr_error *err) {
    memset(cfg, 0, sizeof *cfg);
    MR_CHECK(mr_file_check(path, MR_FILE_WANT_CFG, err)); /* a .keras, a SavedModel, a .h5 */
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    /* fopen opens a folder, and ftell then gives a huge size */
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return mr_error_set(err, MR_ERR_IO, "%s: is a directory, not a model .cfg", path);
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return mr_error_set(err, MR_ERR_IO, "%s: cannot read (is it a directory?)", path);
    }
    long size = ftell(f);
    if (size < 0 || size > (1 << 20)) {
        fclose(f);
        return mr_error_set(err, MR_ERR_IO, "%s: %s", path,
                            size < 0 ? "cannot read (is it a directory?)"
                                     : "larger than 1 MiB: not a model .cfg");
    }
    rewind(f);
    char *text = malloc((size_t)size + 1);
    if (text == NULL) {
        fclose(f);
        return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(text, 1, (size_t)size, f);
    fclose(f);
    text[got] = '\0';
    if (strlen(text) != got) {
        free(text);
        return mr_error_set(err, MR_ERR_CONFIG, "%s: contains a NUL byte: not a text .cfg file",
                            path);
    }
    /* relative data paths resolve against the .cfg file's folder */
    char dir[MR_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        dir[0] = '\0';
    mr_status st = mr_config_parse(text, path, slash ? dir : NULL, cfg, err);
    free(text);
    return st;
}

void mr_config_free(mr_config *cfg) {
    free(cfg->text);
    cfg->text = NULL;
}
