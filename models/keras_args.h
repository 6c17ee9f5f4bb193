/* keras_args.h: how a layer kind's Keras class maps onto its .cfg section,
 * argument by argument, for the importer (models/keras_import.c). Each
 * kind's table is in its own file (mr_layer_ops.keras_args,
 * models/<kind>.c): each argument of the class's config maps to a .cfg
 * key, is held to the one value we compute (data_format "channels_last",
 * dilation_rate (1, 1), a constraint null), or has no effect here (a seed,
 * the initializers of weights the file holds). An argument outside the
 * table is refused by name. */
#ifndef MR_KERAS_ARGS_H
#define MR_KERAS_ARGS_H

#include "runtime/hd.h"

MR_C_BEGIN

typedef enum mr_keras_rule {
    MR_ARG_IGNORE,  /* no effect here: a seed, an initializer of a weight the file holds */
    MR_ARG_INT,     /* integer -> key */
    MR_ARG_NUM,     /* number -> key */
    MR_ARG_BOOL,    /* true/false -> key */
    MR_ARG_INTS,    /* integer or list of integers -> key "a,b" */
    MR_ARG_NUMS,    /* null (key left out) or number or list of numbers -> key */
    MR_ARG_OPTNUM,  /* null (key left out) or a number -> key */
    MR_ARG_STRIDES, /* null (the pool size) or integers -> key */
    MR_ARG_PADDING, /* "valid" or "same" -> key */
    MR_ARG_PADS,    /* ZeroPadding2D's int, (h, w) or ((t, b), (l, r)) -> key */
    MR_ARG_SHAPE,   /* one to three integers -> key "a,b,c" (Reshape's target_shape) */
    MR_ARG_ACT,     /* an activation's name -> key */
    MR_ARG_INIT,    /* a kernel initializer -> key where we have it (else it made the file's
                       weights, which are the ones taken) */
    MR_ARG_L2,      /* null or L2(l2) -> key */
    MR_ARG_NULL,    /* must be null */
    MR_ARG_EQ,      /* must equal the JSON in `key` */
    MR_ARG_STRING,  /* one of the strings of `key` ("a|b|c") -> the .cfg key named like the argument
                     */
} mr_keras_rule;

typedef struct mr_keras_arg {
    const char *keras;
    mr_keras_rule rule;
    const char *key; /* the .cfg key, or MR_ARG_EQ's JSON */
} mr_keras_arg;

/* Rows several classes share, and the end of a table. */
#define MR_KERAS_CHANNELS_LAST                                                                     \
    { "data_format", MR_ARG_EQ, "\"channels_last\"" }
#define MR_KERAS_KERNEL_ARGS                                                                       \
    {"activation", MR_ARG_ACT, "activation"}, {"use_bias", MR_ARG_BOOL, "use_bias"},               \
        {"kernel_initializer", MR_ARG_INIT, "kernel_initializer"},                                 \
        {"bias_initializer", MR_ARG_IGNORE, NULL}, {"kernel_regularizer", MR_ARG_L2, "kernel_l2"}, \
        {"bias_regularizer", MR_ARG_NULL, NULL}, {"activity_regularizer", MR_ARG_NULL, NULL},      \
        {"kernel_constraint", MR_ARG_NULL, NULL}, {"bias_constraint", MR_ARG_NULL, NULL},          \
        {"quantization_config", MR_ARG_NULL, NULL}, {"lora_rank", MR_ARG_NULL, NULL}, {            \
        "lora_alpha", MR_ARG_IGNORE, NULL                                                          \
    }
#define MR_KERAS_ARGS_END                                                                          \
    { NULL, MR_ARG_IGNORE, NULL }

MR_C_END

#endif
