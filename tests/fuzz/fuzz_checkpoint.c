/* fuzz_checkpoint.c: libFuzzer harness of the checkpoint reader: what
 * mirrored_train --resume, --init-weights and mirrored_eval load.
 * Input: a whole .h5 file, read as
 *   - a mirrored checkpoint (strategies/checkpoint.c: mr_checkpoint_load,
 *     /mirrored), and its .cfg text parsed as mirrored_eval does;
 *   - the weights and optimizer slots to resume (mr_checkpoint_load_model,
 *     the file's layers must be the model's);
 *   - weights Keras wrote (models/keras.c: mr_keras_read_weights without
 *     same_layers, --init-weights).
 * The model read into is fixed (MODEL below, the cfg of the seeds in
 * tests/fuzz/corpus/checkpoint/, made by tests/fuzz/make_seeds.sh): a
 * model built from fuzzed text could ask for any amount of memory, and the
 * .cfg parser has its own harness (fuzz_config.c). */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backends.h"
#include "models/keras.h"
#include "models/model.h"
#include "runtime/h5file.h"
#include "strategies/checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Weights of every kind with a state and slots: conv2d (3,3,1,2) + bias,
 * batchnorm gamma, beta and moving mean and variance (2), dense (32,3) +
 * bias; adam: two slots per weight. Input (4,4,1). */
static const char MODEL[] = "[net]\nbatch=4\nepochs=1\noptimizer=adam\nlearning_rate=0.01\n"
                            "[data]\ntrain_images=x.npy\ntrain_labels=y.npy\nstandardize=true\n"
                            "[input]\nshape=4,4,1\n"
                            "[conv2d]\nfilters=2\nsize=3\nstride=1\npadding=same\n"
                            "[batchnorm]\n[activation]\nactivation=relu\n"
                            "[flatten]\n[dense]\nunits=3\nactivation=softmax\n";

static mr_config cfg;
static mr_model model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    mr_error err = {0};
    mr_backend *be = NULL;
    if (mr_config_parse(MODEL, "model.cfg", NULL, &cfg, &err) != MR_OK ||
        mr_backend_create(mr_backend_kind_cpu(), 0, &be, &err) != MR_OK ||
        mr_model_init(&model, be, &cfg, 4, 0, &err) != MR_OK) {
        fprintf(stderr, "fuzz_checkpoint: cannot build the model: %s\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file(data, size);
    mr_error err = {0};
    mr_checkpoint ck;
    mr_status st = mr_checkpoint_load(path, &ck, &err);
    fz_check_refusal(st, &err, path);
    if (st == MR_OK) {
        /* mirrored_eval: the .cfg the checkpoint carries, against its folder */
        mr_config *c = calloc(1, sizeof *c);
        char folder[MR_PATH_MAX];
        snprintf(folder, sizeof folder, "%s", ck.cfg_path);
        mr_error cerr = {0};
        if (c != NULL) {
            fz_check_refusal(mr_config_parse(ck.cfg_text, ck.cfg_path, dirname(folder), c, &cerr),
                             &cerr, NULL);
            mr_config_free(c);
        }
        free(c);
    }
    mr_checkpoint_free(&ck);
    /* --resume */
    mr_error_clear(&err);
    fz_check_refusal(mr_checkpoint_load_model(path, &model, 1, &err), &err, path);
    /* --init-weights, mirrored_eval --cfg */
    mr_error_clear(&err);
    fz_check_refusal(mr_keras_load(path, &model, 0, NULL, &err), &err, path);
    fz_check_h5_closed();
    return 0;
}
