/* train_options.h: mirrored_train's command line: the options, their
 * checks (values in range, one MODEL.cfg, no --resume with --init-weights)
 * (no --dry-run with --write-data) and the --help text. Relies on launch/cli.h for option values
 * and usage errors; what the options do is up to mirrored_train.c. */
#ifndef MR_TRAIN_OPTIONS_H
#define MR_TRAIN_OPTIONS_H

#include <stdio.h>

#include "models/config.h"
#include "runtime/error.h"

#define MR_TRAIN_MAX_STOP_SIGNALS 8

/* What mirrored_train is asked to do. */
typedef enum mr_train_action {
    MR_TRAIN_RUN,         /* train MODEL.cfg */
    MR_TRAIN_HELP,        /* --help */
    MR_TRAIN_VERSION,     /* --version */
    MR_TRAIN_HELP_CONFIG, /* --help-config[=markdown] */
    MR_TRAIN_LIST,        /* --list-devices */
} mr_train_action;

/* What the command line asks for (-1: not given, for epochs and seed). */
typedef struct mr_train_options {
    mr_train_action action;
    int markdown; /* --help-config=markdown */
    long long epochs, seed, check_sync, keep;
    long long max_steps; /* --max-steps: stop after this many updates in all (0: no limit) */
    int dry_run;         /* --dry-run: build and print the plan, train and write nothing */
    int no_cuda_graphs;  /* --no-cuda-graphs: [net] cuda_graphs = 0 (every call queued each step) */
    /* --synthetic N: N random examples of the model's input shape instead of
     * the [data] files (0: off); --display-every N: an images/sec line every
     * N updates after --warmup-steps W (-1: not given; with --synthetic the
     * defaults are 10 and 10, as tf_cnn_benchmarks) */
    long long synthetic, display_every, warmup_steps;
    double bucket_mb, timeout;
    const char *metrics_path, *json_path, *devices_spec, *cfg_path;
    const char *save_path, *resume, *init_weights, *log_path, *data_out;
    const char *trace_path; /* --trace: rank 0's file (others: PATH.rankN.json) */
    int quiet;
    int no_bar; /* --verbose 2: one line per epoch even on a terminal */
    /* a planned stop (preemption): the signals that ask for it (--stop-signals,
     * default SIGTERM, SIGINT, SIGUSR1; none: n_stop_signals 0), the seconds
     * the stop may take (--stop-budget, default 25: GCP's 30 s notice less a
     * margin), and where its checkpoint goes without [net] checkpoint
     * (--checkpoint-on-signal, or NULL) */
    int stop_signals[MR_TRAIN_MAX_STOP_SIGNALS];
    int n_stop_signals;
    double stop_budget;
    const char *stop_path;
    /* Keras fit's arguments: --data F.npz (x_train, y_train, x_test, y_test in place of the
     * [data] files, or NULL), --batch-size N (the global batch, [net] global_batch; -1: not
     * given), --validation-split F ([net] validation_split; -1: not given) */
    const char *data_path;
    long long batch_size;
    double validation_split;
} mr_train_options;

/* "TERM,INT,USR1" (names with or without SIG, or numbers; "none": no
 * signal) into sigs[0..*n); a name that is no signal, or a signal that
 * cannot be caught (KILL, STOP), is an MR_ERR_USAGE naming it. */
mr_status mr_train_parse_stop_signals(const char *list, int *sigs, int *n, mr_error *err);

/* The --help text, naming the executable `prog`. */
void mr_train_usage(FILE *out, const char *prog);

/* Reads argv (getopt_long; argv[0] is skipped) into *c; an unknown option,
 * a missing or bad value or a wrong MODEL.cfg count is an MR_ERR_USAGE
 * with a one-line message. --help, --version, --help-config and
 * --list-devices stop the parse: c->action says which. */
mr_status mr_train_parse_options(int argc, char **argv, mr_train_options *c, mr_error *err);

/* The files of a run, checked before any is opened (runtime/paths.h):
 * training data to read (--synthetic, or [data] train_images, which --data
 * sets; else one line naming MODEL and what to give), and
 * the inputs (MODEL.cfg, the [data] files or --data unless --synthetic, --resume
 * FILE, --init-weights) must be regular files (the data files may be
 * folders of class folders), as must the HDF5 outputs (--save,
 * --write-data, --checkpoint-on-signal); no output (--save, --json,
 * --metrics, --log, --trace, --write-data, --checkpoint-on-signal) may be
 * the same file as an input or another output, except that --save and
 * --checkpoint-on-signal may replace the --resume file (an atomic write
 * after the read, as --resume auto's checkpoints). MR_ERR_IO or MR_ERR_USAGE,
 * one line naming the options and the path. */
mr_status mr_train_check_paths(const mr_train_options *c, const mr_config *cfg, mr_error *err);

#endif
