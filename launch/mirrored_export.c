/* mirrored_export: a mirrored checkpoint as a Keras 3 .keras archive.
 *
 *   mirrored_export CHECKPOINT.h5 OUT.keras
 *
 * The model is rebuilt from the .cfg text the checkpoint carries, its
 * weights and optimizer slots read, and the archive written as Keras 3.15
 * writes it (models/keras_archive.h: metadata.json, config.json with the
 * Sequential or the Functional, model.weights.h5 with the optimizer's
 * variables). keras.models.load_model reads it back with the optimizer
 * state, so model.fit goes on from it. Nothing half-written is left: OUT
 * is replaced only by a complete archive. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backends.h"
#include "models/keras.h"
#include "models/keras_archive.h"
#include "runtime/atomic_file.h"
#include "runtime/paths.h"
#include "strategies/checkpoint.h"
#include "launch/cli.h"

static const char *prog = "mirrored_export";

static void usage(FILE *out) {
    fprintf(out,
            "Usage: %s CHECKPOINT.h5 OUT.keras\n"
            "Write a mirrored checkpoint (mirrored_train --save, or a [net] checkpoint) as a\n"
            "Keras 3 archive: keras.models.load_model(\"OUT.keras\") gives the model with its\n"
            "weights and optimizer state. Its inputs are the training inputs after [data]\n"
            "scale (and standardize, which the archive does not carry).\n"
            "\n"
            "Options:\n"
            "  --help, --version\n"
            "\n"
            "Exit status: 0 success; 1 failure while running; 2 bad input.\n",
            prog);
}

typedef struct export_paths {
    const char *checkpoint, *out;
} export_paths;

/* Fails before any work if no file can be created beside OUT (the
 * temporary an atomic write makes, runtime/atomic_file.h). */
static mr_status check_writable(const export_paths *p, mr_error *err) {
    char tmp[MR_PATH_MAX + 32];
    MR_CHECK(mr_atomic_path_begin(p->out, tmp, sizeof tmp, err));
    mr_atomic_path_abort(tmp);
    return MR_OK;
}

/* Before any work: the checkpoint is a regular file (a FIFO or a device
 * would block or never end), and OUT is not the checkpoint. */
static mr_status check_paths(const export_paths *p, mr_error *err) {
    MR_CHECK(mr_path_check_regular(NULL, p->checkpoint, 0, err));
    const mr_path_use uses[] = {{"CHECKPOINT.h5", p->checkpoint, 0}, {"OUT.keras", p->out, 1}};
    return mr_path_check_distinct(uses, 2, err);
}

/* The model of the checkpoint: its .cfg (relative paths from the folder it
 * was read from; only the layers matter here), weights and optimizer slots. */
static mr_status load_model(const export_paths *p, mr_checkpoint *ck, mr_config *cfg, mr_model *m,
                            mr_backend *be, mr_error *err) {
    mr_error ck_err = {0};
    mr_status st = mr_checkpoint_load(p->checkpoint, ck, &ck_err);
    if (st == MR_ERR_DATA && strstr(ck_err.msg, "no /mirrored group"))
        return mr_error_set(err, MR_ERR_DATA,
                            "%s: not a mirrored checkpoint (no /mirrored group): mirrored_export "
                            "needs the file mirrored_train --save writes",
                            p->checkpoint);
    if (st != MR_OK) return mr_error_set(err, st, "%s", ck_err.msg);
    char folder[MR_PATH_MAX];
    snprintf(folder, sizeof folder, "%s", ck->cfg_path);
    MR_CHECK(mr_config_parse(ck->cfg_text, ck->cfg_path, dirname(folder), cfg, err));
    MR_CHECK(mr_model_init(m, be, cfg, 1, 0, err));
    return mr_checkpoint_load_model(p->checkpoint, m, 1, err);
}

static mr_status parse(int argc, char **argv, export_paths *p, int *help, int *version,
                       mr_error *err) {
    *help = *version = 0;
    const char *pos[2];
    int n = 0, options = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && strcmp(a, "--") == 0) {
            options = 0;
        } else if (options && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            *help = 1;
            return MR_OK;
        } else if (options && strcmp(a, "--version") == 0) {
            *version = 1;
            return MR_OK;
        } else if (options && a[0] == '-' && a[1] != '\0') {
            return mr_error_set(err, MR_ERR_USAGE, "%s: unknown option (see --help)", a);
        } else if (n == 2) {
            return mr_error_set(
                err, MR_ERR_USAGE,
                "%s: unexpected argument (give one CHECKPOINT.h5 and one OUT.keras)", a);
        } else {
            pos[n++] = a;
        }
    }
    if (n < 2)
        return mr_error_set(err, MR_ERR_USAGE, "missing %s (usage: %s CHECKPOINT.h5 OUT.keras)",
                            n == 0 ? "CHECKPOINT.h5 and OUT.keras" : "OUT.keras", prog);
    p->checkpoint = pos[0];
    p->out = pos[1];
    if (!mr_keras_archive_named(p->out))
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: the archive's name must end in .keras (Keras loads no other)",
                            p->out);
    if (strlen(p->out) >= MR_PATH_MAX)
        return mr_error_set(err, MR_ERR_USAGE, "%s: path too long", p->out);
    return MR_OK;
}

int main(int argc, char **argv) {
    mr_error err = {0};
    export_paths p = {0};
    int help, version;
    mr_status st = parse(argc, argv, &p, &help, &version, &err);
    if (st == MR_OK && (help || version)) {
        if (help) usage(stdout);
        if (version) printf("mirrored %s\n", MR_VERSION);
        return MR_EXIT_OK;
    }
    if (st != MR_OK) return mr_cli_die(prog, &err);
    mr_checkpoint ck = {0};
    mr_config cfg = {0};
    mr_model m = {0};
    mr_backend *be = NULL; /* the model lives in host memory: a CPU context */
    st = check_paths(&p, &err);
    if (st == MR_OK) st = check_writable(&p, &err);
    if (st == MR_OK) st = mr_backend_create(mr_backend_kind_cpu(), 0, &be, &err);
    if (st == MR_OK) st = load_model(&p, &ck, &cfg, &m, be, &err);
    if (st == MR_OK) {
        /* the paths were checked: a failure now (a full disk) is one while
         * running (exit 1); OUT stays as it was */
        st = mr_keras_archive_save(p.out, &m, ck.state.global_step, ck.lr, &err);
        if (st == MR_ERR_IO) err.status = st = MR_ERR_RUNTIME;
    }
    int rc = MR_EXIT_OK;
    if (st != MR_OK) {
        rc = mr_cli_die(prog, &err);
    } else {
        printf("%s: %d layers, %lld parameters, %s at update %lld", p.out, m.n_layers,
               (long long)(m.n_params + m.n_state), mr_optimizer_name(cfg.net.optimizer),
               (long long)ck.state.global_step);
        printf("; inputs are x * %g%s\n", (double)ck.scale,
               ck.mean != NULL ? " then standardised with the training statistics (not in the "
                                 "archive)"
                               : "");
    }
    mr_model_free(&m); /* safe on a model never initialised */
    if (be != NULL) mr_backend_destroy(be);
    mr_config_free(&cfg);
    mr_checkpoint_free(&ck);
    return rc;
}
