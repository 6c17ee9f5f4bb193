/* strategyutil.h: small models, generated data and a one-epoch training
 * run, shared by the strategy tests in one process (test_strategy.c) and
 * across processes under mpirun (test_mpi.c). */
#ifndef MR_STRATEGYUTIL_H
#define MR_STRATEGYUTIL_H

#include <stdint.h>

#include "strategies/strategy.h"

/* .cfg texts on 6x6x1 images with 4 classes; "%s" takes more [net] lines. */
extern const char *su_mlp_text; /* Flatten, Dense 16 relu, Dense 4 softmax */
extern const char *su_cnn_text; /* Conv 4 3x3 relu, MaxPool 2, Flatten, Dense 4 */
extern const char *su_bn_text;  /* Conv, SyncBN, relu, Dropout 0.3, Flatten, Dense */
/* A residual graph: Conv `stem`, Conv, SyncBN, Add stem, relu `block`;
 * ZeroPad 1, Conv stride 2 `down` and, from `block`, a 1x1 stride-2 Conv,
 * Add; GlobalAveragePool, Dense 4 */
extern const char *su_res_text;
extern const char *su_sgd;  /* SGD 0.1 with momentum 0.9 */
extern const char *su_adam; /* Adam 0.01 */

/* Equivalence bound (test_strategy.c says where it comes from). */
#define SU_BOUND 2e-5

/* n examples of 6x6x1 float images whose 4 classes depend on the image;
 * the same bits on every process. */
void su_make_data(mr_dataset *ds, int64_t n);

typedef struct su_run {
    const char *text;
    const char *net_extra; /* more [net] lines */
    int replicas;          /* in this process */
    int batch;
    int64_t n;
    size_t bucket_floats;
    int check_sync;
    int64_t perturb;
    const char *kind; /* of the replicas (ordinals 0..replicas-1); NULL: "cpu" */
    int staged;       /* the replicas' contexts stage host access (mr_fault.staged) */
    int epochs;       /* 0: 1 */
    int64_t n_val;    /* > 0: the last n_val of the n examples validate after each epoch */
    mr_job *job;      /* NULL: this process alone */
    int binary;       /* labels 0 and 1 (the low bit of su_make_data's) for binary_crossentropy */
    int multi_hot;    /* 3: multi-hot rows (n, 3) for multi-label binary_crossentropy: the two
                         bits of su_make_data's class, then whether pixel 14 is above 0.5 */
    /* 1: mr_dataset_synthetic's examples (6x6x1 bytes, 4 classes, scale 1/255)
     * instead of su_make_data's, so a replica whose memory is not host memory
     * makes its batches itself; 2: the same examples with ds.synthetic
     * cleared, every batch converted on the host and uploaded */
    int synthetic;
} su_run;

/* Trains o->epochs epochs (seed 5); returns replica 0's parameters followed by its
 * state copied to the host (malloc'd; *np floats), after checking that every
 * replica of this process holds the same bits. *logs (may be NULL) receives the epoch's
 * logs where global replica 0 lives, else stays zeroed. */
float *su_train(const su_run *o, int64_t *np, mr_epoch_logs *logs, mr_status *status,
                mr_error *err);

/* su_train that must succeed. */
float *su_train_ok(const su_run *o, int64_t *np, mr_epoch_logs *logs);

#endif
