/* mirrored.h: the public C API of mirrored, the data-parallel training runtime.
 *
 * A program (the Python package `mirrored`, a C tool, a test) loads a model,
 * trains it on a set of replicas (every core, every GPU, or the processes of
 * an mpirun job), evaluates it, predicts with it and saves it, through one
 * opaque handle:
 *
 *     mirrored_error err = {0};
 *     mirrored_model *m = NULL;
 *     if (mirrored_model_load("fashion_mlp.cfg", &m, &err) != MIRRORED_OK) {
 *         fprintf(stderr, "%s\n", err.message);
 *         return 1;
 *     }
 *     mirrored_fit_options o = mirrored_fit_options_default();
 *     o.devices = "cpu:2";
 *     o.epochs = 1;
 *     mirrored_fit_result r;
 *     mirrored_model_fit(m, &o, &r, &err);   // the .cfg's [data]
 *     mirrored_model_save(m, "out.keras", &err);
 *     mirrored_model_destroy(m);
 *
 * Rules that hold for every call:
 *   - A call returns MIRRORED_OK or a status, and fills `err` (may be NULL)
 *     with one line naming the path, the .cfg line or the argument at fault.
 *     A file that is not there is MIRRORED_ERR_NOT_FOUND, whatever the
 *     message says.
 *     No call exits or aborts the process on bad input.
 *   - Arrays are the caller's, C-contiguous, channels last; the library
 *     reads them during the call and keeps no pointer after it returns
 *     (uint8 and float32 inputs are read in place, not copied).
 *   - One call at a time per model: a call made while another is in
 *     progress on the same model (another thread's, or a fit's callback
 *     calling back into its model) returns MIRRORED_ERR_USAGE at once,
 *     naming the call in progress. mirrored_model_request_stop is the
 *     exception: any thread or a signal handler may call it while a fit
 *     runs; and mirrored_model_save of a PATH.keras from the fit's own
 *     epoch callback (Keras's ModelCheckpoint) writes the weights of the
 *     epoch just ended. mirrored_model_destroy must not overlap any call on the model.
 *   - Under mpirun every process makes the same calls in the same order with
 *     the same arguments: they are one job, replica 0 of rank 0 is the one
 *     that writes files. mirrored_init starts the job (MPI); without it, the
 *     first call that needs the job starts it.
 *
 * The library prints nothing: progress reaches the caller through the fit's
 * callbacks. Link with `pkg-config --cflags --libs mirrored`. */
#ifndef MIRRORED_H
#define MIRRORED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MIRRORED_API __attribute__((visibility("default")))
#else
#define MIRRORED_API
#endif

#define MIRRORED_API_VERSION 1

/* The same values as the runtime's statuses; the executables' exit codes
 * follow them (usage and config: 2, the rest: 1). */
typedef enum mirrored_status {
    MIRRORED_OK = 0,
    MIRRORED_ERR_USAGE,       /* a bad argument (NULL handle, unknown device, bad shape) */
    MIRRORED_ERR_CONFIG,      /* a bad .cfg or model file's architecture */
    MIRRORED_ERR_IO,          /* a file missing, unreadable or unwritable */
    MIRRORED_ERR_DATA,        /* data readable but wrong (labels out of range, shape) */
    MIRRORED_ERR_NOMEM,       /* allocation failed */
    MIRRORED_ERR_UNSUPPORTED, /* asked for what this build or machine cannot do (gpu:0 here) */
    MIRRORED_ERR_RUNTIME,     /* failure while running: a collective timed out, NaN loss */
    MIRRORED_ERR_ABORTED,     /* another process of the job failed first */
    MIRRORED_ERR_NOT_FOUND,   /* a file or folder that does not exist (an I/O error) */
} mirrored_status;

typedef struct mirrored_error {
    mirrored_status status;
    char message[1024]; /* one line, no trailing newline; "" when status is MIRRORED_OK */
} mirrored_error;

/* "0.1.0" */
MIRRORED_API const char *mirrored_version(void);

/* Starts the job: under mpirun, MPI with every process of it (argc, argv
 * may be NULL); alone, a job of one process. Call it once, before any other
 * call, from the main thread. Calling it again returns MIRRORED_OK. */
MIRRORED_API mirrored_status mirrored_init(int *argc, char ***argv, mirrored_error *err);

/* This process's rank and the job's process count (0 and 1 alone);
 * starts the job where mirrored_init was not called. */
MIRRORED_API mirrored_status mirrored_job(int *rank, int *size, mirrored_error *err);

/* Ends the job (MPI_Finalize). Models must be destroyed before. Every call
 * after it returns MIRRORED_ERR_USAGE (MPI cannot start again). */
MIRRORED_API void mirrored_finalize(void);

/* The devices replicas can run on, one name per line ("cpu:0\ncpu:1\n", or
 * "gpu:0\n..." where GPUs are found), into buf (size bytes, NUL-ended);
 * *count their number. A buf too small is MIRRORED_ERR_USAGE. */
MIRRORED_API mirrored_status mirrored_list_devices(char *buf, size_t size, int *count,
                                                   mirrored_error *err);

/* ---- arrays ------------------------------------------------------------ */

typedef enum mirrored_dtype {
    MIRRORED_UINT8 = 0,
    MIRRORED_INT32,
    MIRRORED_FLOAT32,
} mirrored_dtype;

#define MIRRORED_MAX_DIMS 8

/* A caller-owned C-contiguous array. Inputs x: (n, ...) uint8 or float32,
 * the model's input shape after n (a trailing axis of 1 may be added or
 * dropped, as Keras does). Labels y: int32 class ids (n) or (n, 1);
 * float32 0/1 rows (n, k) for multi-label binary_crossentropy; float32
 * targets (n) or (n, k) for mse, mae and huber. */
typedef struct mirrored_array {
    mirrored_dtype dtype;
    int ndim;
    int64_t shape[MIRRORED_MAX_DIMS];
    const void *data;
} mirrored_array;

/* ---- the model --------------------------------------------------------- */

typedef struct mirrored_model mirrored_model;

/* Loads a model: a .cfg file; a Keras model file (.keras, or an .h5 with
 * its architecture), with its weights; or a mirrored checkpoint (.h5
 * written by mirrored_train, --save or mirrored_model_save), with its
 * weights and optimizer state. Data paths in a .cfg are relative to its
 * folder. The file is read once, here, weights included (on the host):
 * a file renamed over the path or written over later changes nothing.
 * Nothing is built on a device yet. */
MIRRORED_API mirrored_status mirrored_model_load(const char *path, mirrored_model **out,
                                                 mirrored_error *err);

/* A model from .cfg text; `name` (may be NULL) is what messages call it, and
 * data paths in it are relative to `folder` (NULL: the working folder). */
MIRRORED_API mirrored_status mirrored_model_from_config(const char *cfg_text, const char *name,
                                                        const char *folder, mirrored_model **out,
                                                        mirrored_error *err);

/* Frees the model and its replicas. NULL is a no-op. Not while a call on
 * the model is in progress (the caller's to order: a fit first stops,
 * mirrored_model_request_stop, and returns). */
MIRRORED_API void mirrored_model_destroy(mirrored_model *m);

/* What the model takes and gives. */
typedef struct mirrored_model_info {
    int input_ndim;
    int64_t input_shape[MIRRORED_MAX_DIMS]; /* one example's shape, channels last */
    int outputs;        /* values per example the last layer gives (classes, or targets) */
    int label_width;    /* labels per example: 1 (class ids), k (multi-hot or k targets) */
    int regression;     /* 1: loss mse, mae or huber on float targets; the metric is "mae" */
    int64_t params;     /* trainable and non-trainable weights */
    int epochs;         /* the .cfg's [net] epochs */
    int64_t batch_size; /* the .cfg's global batch */
    int has_data;       /* 1: the .cfg names training data ([data] train_images) */
    const char *metric; /* "accuracy" or "mae" */
    /* where the model comes from: "cfg" (the seed's weights), "keras" (a
     * model Keras saved) or "checkpoint" (a mirrored checkpoint's weights
     * and optimizer state) */
    const char *source;
    int layers;            /* layers after the input */
    const char *optimizer; /* the .cfg's [net] optimizer: "sgd", "adam", ... */
    int64_t updates;       /* updates trained so far (a checkpoint's, then the fits') */
    /* the preprocessing the inputs get: x * scale, then standardised with
     * the training statistics where standardized is 1 */
    double scale;
    int standardized;
} mirrored_model_info;
MIRRORED_API mirrored_status mirrored_model_get_info(const mirrored_model *m,
                                                     mirrored_model_info *info,
                                                     mirrored_error *err);

/* Keras's model.summary(): the layers, their output shapes and weights,
 * into buf (size bytes, NUL-ended, cut where it is too small). */
MIRRORED_API mirrored_status mirrored_model_summary(mirrored_model *m, char *buf, size_t size,
                                                    mirrored_error *err);

/* ---- fit --------------------------------------------------------------- */

/* After each update, on the thread of the job's replica 0 (rank 0's process
 * under mpirun; not the caller's thread: a callback must be quick and
 * thread-safe). */
typedef struct mirrored_step_logs {
    int epoch;           /* 0-based */
    int64_t step, steps; /* 1-based update in the epoch, updates in the epoch */
    double loss, metric; /* running means over the epoch so far */
} mirrored_step_logs;

/* After each epoch (validation done), on the thread of each process's
 * replica 0: the job's figures, the same on every process. */
typedef struct mirrored_epoch_logs {
    int epoch;           /* 0-based, counted in this fit */
    int epochs;          /* of this fit */
    double loss, metric; /* the epoch's training means; metric: accuracy or mae */
    int has_val;
    double val_loss, val_metric;
    double seconds; /* training time of the epoch, validation excluded */
    double samples_per_sec;
    float lr; /* learning rate at the end of the epoch */
} mirrored_epoch_logs;

/* Return non-zero to stop the fit after this epoch (Keras's
 * model.stop_training = True); under mpirun, one process's stop ends the
 * fit of all. */
typedef int (*mirrored_epoch_fn)(void *user, const mirrored_epoch_logs *logs);
typedef void (*mirrored_step_fn)(void *user, const mirrored_step_logs *logs);

/* The layout of mirrored_fit_options this header describes. A program
 * built against another header passes its own: mirrored_model_fit refuses
 * a version it does not know (MIRRORED_ERR_USAGE) rather than read fields
 * that are not there. */
#define MIRRORED_FIT_OPTIONS_VERSION 1

typedef struct mirrored_fit_options {
    int struct_version;      /* MIRRORED_FIT_OPTIONS_VERSION (mirrored_fit_options_default) */
    const char *devices;     /* "auto" (NULL: auto), "cpu:2", "gpu:0,1" */
    int epochs;              /* 0: the .cfg's */
    int64_t batch_size;      /* the global batch; 0: the .cfg's */
    double validation_split; /* < 0: the .cfg's; else the last fraction of x, before shuffling */
    /* The training data: x and y, or both NULL for the .cfg's [data] (its
     * scale and standardize apply to x too: they are part of a .cfg model). */
    const mirrored_array *x, *y;
    /* Keras's validation_data (both NULL: none; overrides validation_split). */
    const mirrored_array *val_x, *val_y;
    int64_t seed;      /* < 0: the .cfg's */
    int64_t max_steps; /* end after this many updates of this fit (0: no limit) */
    /* Where a stop (mirrored_model_request_stop) writes the checkpoint of
     * the update it ended on, as mirrored_train does on SIGTERM; NULL: the
     * stop writes nothing. */
    const char *stop_checkpoint;
    mirrored_step_fn on_step;   /* NULL: none */
    mirrored_epoch_fn on_epoch; /* NULL: none */
    void *user;
} mirrored_fit_options;

/* The defaults above: this header's struct_version, devices auto, the
 * .cfg's epochs, batch, split and seed. */
MIRRORED_API mirrored_fit_options mirrored_fit_options_default(void);

typedef struct mirrored_fit_result {
    int epochs;           /* epochs completed by the model in all (resumed ones included) */
    int64_t updates;      /* updates applied in all */
    int stopped;          /* 1: ended by mirrored_model_request_stop */
    int early_stopped;    /* 1: ended by an epoch callback or [net] early_stopping */
    int replicas;         /* the job's replicas */
    uint64_t params_hash; /* mirrored_train --json's params_hash of the weights */
} mirrored_fit_result;

/* Trains the model on the chosen replicas from where it stands (its seed's
 * weights, a Keras file's, a checkpoint's, or the last fit's), as Keras's
 * fit does: a second call goes on with the same weights and optimizer
 * state. The same .cfg, seed and devices give the same params_hash as
 * mirrored_train. result may be NULL. A fit that fails after its first
 * update still fills result (epochs, updates, params_hash) with where the
 * weights stand, and the model's counts follow them. */
MIRRORED_API mirrored_status mirrored_model_fit(mirrored_model *m, const mirrored_fit_options *o,
                                                mirrored_fit_result *result, mirrored_error *err);

/* Asks a running fit to stop after the update in flight, on every replica
 * of the job; its checkpoint goes to the fit's stop_checkpoint. Async-
 * signal-safe and thread-safe. A stop asked before a fit starts applies to
 * its first update; a fit drops any stop request when it returns. */
MIRRORED_API void mirrored_model_request_stop(mirrored_model *m);

/* ---- evaluate, predict, save ------------------------------------------- */

/* Mean loss and metric (accuracy, or mae for a regression) over x, y; both
 * NULL: the .cfg's test set (MIRRORED_ERR_USAGE if it names none). devices
 * as for fit (NULL: auto). batch_size: the rows of one step over all the
 * replicas, Keras's batch_size (0: the batch the replicas have, the .cfg's
 * or the last fit's); memory for activations is bounded by it, whatever
 * the rows of x. */
MIRRORED_API mirrored_status mirrored_model_evaluate(mirrored_model *m, const char *devices,
                                                     int64_t batch_size, const mirrored_array *x,
                                                     const mirrored_array *y, double *loss,
                                                     double *metric, mirrored_error *err);

/* The model's outputs for x, into out: (n, outputs) float32, `count`
 * floats of room (class probabilities, sigmoid outputs or regression
 * values, as Keras's predict gives them). devices and batch_size as for
 * evaluate. Under mpirun every process gets every row. */
MIRRORED_API mirrored_status mirrored_model_predict(mirrored_model *m, const char *devices,
                                                    int64_t batch_size, const mirrored_array *x,
                                                    float *out, int64_t count, mirrored_error *err);

/* Keras's get_weights, one array at a time: weight `index` (0-based, in
 * Keras's order: the layers as model.layers lists them, each layer's
 * weights in its own order, kernel before bias) of the weights as they
 * stand (a file's, or the replicas' after a call built them): its
 * dtype (float32), ndim and shape (Keras's) into w (w->data set NULL);
 * where out is not NULL, its floats (the shape's product, `room` floats
 * of room at most) into out. *count (may be NULL): the model's number of
 * weights; w NULL asks only that. From the model's own fit's epoch
 * callback (on its thread): the weights of the epoch just ended. */
MIRRORED_API mirrored_status mirrored_model_get_weight(mirrored_model *m, int index,
                                                       mirrored_array *w, float *out, int64_t room,
                                                       int *count, mirrored_error *err);

/* Keras's set_weights, one array: w float32 of weight `index`'s shape,
 * written to every replica (a fit goes on from it). Not during a fit,
 * its epoch callback included (MIRRORED_ERR_USAGE). */
MIRRORED_API mirrored_status mirrored_model_set_weight(mirrored_model *m, int index,
                                                       const mirrored_array *w,
                                                       mirrored_error *err);

/* Keras's load_weights: the weights of a PATH.weights.h5 (Keras's
 * save_weights, or mirrored_model_save's), of a Keras .h5 or .keras, or of
 * a mirrored checkpoint, paired with the model's layers as those files
 * are (their shapes must match), written to every replica. Not during a
 * fit (MIRRORED_ERR_USAGE). */
MIRRORED_API mirrored_status mirrored_model_load_weights(mirrored_model *m, const char *path,
                                                         mirrored_error *err);

/* Writes the model: PATH.keras a Keras 3 archive (keras.models.load_model
 * opens it); PATH.weights.h5 Keras's weights-only file (a Keras model of
 * the archive's architecture reads it with load_weights); PATH.h5 a
 * mirrored checkpoint (weights, optimizer state, the
 * .cfg: mirrored_model_load, mirrored_eval and --resume read it), atomically.
 * From the model's own fit's epoch callback (on its thread): PATH.keras
 * only, the weights of the epoch just ended, written by rank 0 alone. */
MIRRORED_API mirrored_status mirrored_model_save(mirrored_model *m, const char *path,
                                                 mirrored_error *err);

#ifdef __cplusplus
}
#endif

#endif
