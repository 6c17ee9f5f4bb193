/* keras.h: the model in Keras's file formats.
 *
 * The legacy .h5 layout that keras.models.load_model and h5py users read,
 * as Keras 3.15 writes it (observed from its own model.save("m.h5")):
 * root attributes backend, keras_version, model_config (the Sequential's
 * JSON) and training_config; /model_weights with layer_names and one group
 * per layer holding weight_names and the weights at
 * sequential/<layer>/<weight> in Keras shapes (our own shapes: Dense kernel
 * (in, out), Conv2D kernel (kh, kw, in, out)); /optimizer_weights with the
 * optimizer's iteration, learning rate and slots (Adam's momentum and
 * velocity, SGD's momentum: the same quantities Keras keeps). And the parts
 * of a .keras archive: config.json (module keys, build_config,
 * compile_config) and model.weights.h5 (/layers/<group>/vars/<i>).
 * A graph (model.h: input =, [add]) is written as Keras writes a
 * Functional, its layers in Keras's order (by depth, keras.c's
 * keras_order), which files are also read in: each layer with its
 * inbound node, the InputLayer in
 * layer_names, weights at <layer>/<layer>/<weight>, optimizer slots
 * without the model's name.
 * Weights are read back by layer order and checked against the model: the
 * number of layers with weights, each one's weights and shapes, and the
 * layer kinds where the file's names say them; every mismatch is named. */
#ifndef MR_KERAS_H
#define MR_KERAS_H

#include <stdint.h>

#include "runtime/h5file.h"
#include "models/model.h"

/* The Keras version whose layout these files follow. */
#define MR_KERAS_VERSION "3.15.1"

typedef enum mr_keras_form {
    MR_KERAS_LEGACY_H5, /* model_config of a .h5 */
    MR_KERAS_ARCHIVE,   /* config.json of a .keras */
    /* the same, with the .cfg's [data] scale (where not 1) as a Rescaling
     * layer after the input: the file takes the raw inputs (the public
     * API's save; mirrored_export's archive takes the scaled ones) */
    MR_KERAS_ARCHIVE_SCALED,
} mr_keras_form;

/* The pieces a layer's keras_config (models/layer.h) writes with: the
 * JSON of a Keras initializer class ("GlorotUniform", "Zeros", "Ones"),
 * an activation's Keras name ("linear" for none), "same"/"valid". */
const char *mr_keras_initializer(const char *cls);
/* `"kernel_regularizer": null`, or Keras's L2 object for l2 > 0 (a
 * kernel_l2), into b. */
void mr_keras_kernel_regularizer(struct mr_sb *b, float l2);
/* The same under another key ("depthwise_regularizer"). */
void mr_keras_regularizer(struct mr_sb *b, const char *key, float l2);

/* The Keras class of a kernel initializer ("GlorotUniform", "HeNormal"). */
const char *mr_keras_initializer_class(mr_initializer init);
const char *mr_keras_activation(mr_activation a);
const char *mr_keras_padding(mr_padding p);

/* The model's Sequential config as JSON, a graph's Functional config
 * (malloc'd; NULL if out of memory). lr is the learning rate recorded with
 * the optimizer (archive form). */
char *mr_keras_model_config(const mr_model *m, mr_keras_form form, float lr);

/* The layers' indices in the order Keras lists them (model.layers, and so
 * model.get_weights): m->n_layers of them into order. */
void mr_keras_layer_order(const mr_model *m, int *order);

/* The legacy training_config JSON: loss, metrics, optimizer (malloc'd). */
char *mr_keras_training_config(const mr_model *m, float lr);

/* Writes the legacy layout into the file being written: root attributes,
 * /model_weights, /optimizer_weights (iteration = step, learning_rate = lr). */
mr_status mr_keras_write_h5(mr_h5 *h, const mr_model *m, int64_t step, float lr, mr_error *err);

/* Reads /model_weights into m's weights (trainable and state). With
 * same_layers, the file's layer list must be the model's exactly (a
 * checkpoint to resume); without, only the layers with weights must match
 * in order (a file Keras wrote, with its own layer names). */
mr_status mr_keras_read_weights(mr_h5 *h, mr_model *m, int same_layers, mr_error *err);

/* Reads /optimizer_weights (as mr_keras_write_h5 writes them) into m's
 * optimizer slots; *step is the iteration. */
mr_status mr_keras_read_optimizer(mr_h5 *h, mr_model *m, int64_t *step, mr_error *err);

/* Opens path and reads its weights (mr_keras_read_weights, or
 * mr_keras_read_archive_weights for a Keras 3 weights file) and, with
 * `step` (else NULL), its optimizer slots (mr_keras_read_optimizer). A file
 * without our checksums (Keras-made, or not ours at all) is read first in
 * a child process (runtime/isolate.h): HDF5 crashing on a damaged one is
 * then a refusal naming it. */
mr_status mr_keras_load(const char *path, mr_model *m, int same_layers, int64_t *step,
                        mr_error *err);

/* Reads a Keras 3 weights file (model.weights.h5 of a .keras archive, or
 * what model.save_weights("x.weights.h5") writes): /layers/<group>/vars/<i>,
 * one group per layer named by its class and a per-class counter ("dense",
 * "dense_1", counting every layer of the class), whatever the layer's own
 * name. Every layer with weights must
 * find its group with as many weights of its shapes, and no group with
 * weights may be left over. */
mr_status mr_keras_read_archive_weights(mr_h5 *h, mr_model *m, mr_error *err);

/* Writes the weights file of a .keras archive (model.weights.h5). */
mr_status mr_keras_write_archive_weights(mr_h5 *h, const mr_model *m, int64_t step, float lr,
                                         mr_error *err);
/* The same for an archive of `form` (MR_KERAS_ARCHIVE_SCALED: with the
 * data scale's Rescaling, an empty group of its own). */
mr_status mr_keras_write_archive_weights_as(mr_h5 *h, const mr_model *m, mr_keras_form form,
                                            int64_t step, float lr, mr_error *err);

#endif
