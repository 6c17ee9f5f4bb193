/* mirrored_compare: compare two training runs from their per-epoch metrics
 * CSV files (mirrored_train --metrics, or Keras's CSVLogger).
 *
 *   mirrored_compare A.csv B.csv [--plot OUT.png] [--json OUT.json] [--labels A,B]
 *
 * Columns are found by the header's names, in any order: epoch (required,
 * 0-based), loss, accuracy, val_loss, val_accuracy, learning_rate,
 * samples_per_sec, seconds; other columns are ignored, and a column that is
 * missing, or empty on a line, is absent there. Prints a table of the
 * epochs both files have (A, B, B - A; samples/s B / A), then the
 * differences at the last of them and the overall throughput ratio.
 *
 * This file holds the options and the order of the work; the rest is in
 * launch/compare/: metrics_csv (reading the files), compare (matching the
 * epochs, throughput), report (the table), report_json (--json), plot
 * (--plot through gnuplot). Bad input is found before anything is printed
 * or written. Output files are written beside their destination through
 * runtime/atomic_file.h and renamed into place at the end, so a failure
 * leaves none. Errors: one line "mirrored_compare: message" and an exit
 * code (usage()). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/h5_lock.h"
#include "launch/cli.h"
#include "runtime/paths.h"
#include "launch/compare/compare.h"
#include "launch/compare/metrics_csv.h"
#include "launch/compare/plot.h"
#include "launch/compare/report.h"
#include "launch/compare/report_json.h"
#include "runtime/atomic_file.h"
#include "runtime/error.h"

static const char *prog = "mirrored_compare";

static void usage(FILE *out) {
    fprintf(out,
            "Usage: %s A.csv B.csv [options]\n"
            "Compare two training runs from their per-epoch metrics CSV files\n"
            "(mirrored_train --metrics FILE, or Keras's CSVLogger).\n"
            "\n"
            "Prints, for every epoch both files have, loss, accuracy, val_loss and\n"
            "val_accuracy of A and B with B - A, and samples/s with B / A; then the\n"
            "differences at the last epoch in common and the overall throughput ratio\n"
            "(each run's samples/s weighted by the seconds of its epochs).\n"
            "Columns are found by the header's names, in any order: epoch (required),\n"
            "loss, accuracy, val_loss, val_accuracy, learning_rate, samples_per_sec,\n"
            "seconds; others are ignored, a missing or empty one is absent.\n"
            "Epochs are numbered from 1 in the table and the plot (as mirrored_train\n"
            "prints them), and as in the CSV files (from 0) in --json. B - A is 0 where\n"
            "the two values are equal as written; +0.0000 means a smaller difference.\n"
            "\n"
            "Options:\n"
            "  --labels A,B       names of the two runs (default: the file names)\n"
            "  --json FILE        write the same numbers as JSON\n"
            "  --plot FILE        draw the loss and accuracy curves of both runs as PNG\n"
            "                     (needs gnuplot; Debian: apt-get install gnuplot-nox)\n"
            "  --help             this text\n"
            "  --version          print the version\n"
            "\n"
            "Exit status: 0 success; 1 failure while running (an output file could not be\n"
            "written, gnuplot failed); 2 bad input (options, a missing or malformed CSV\n"
            "file, no epoch in common, --plot without gnuplot).\n",
            prog);
}

/* ---- the command line ------------------------------------------------------ */

static int has_control_char(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20) return 1;
    return 0;
}

typedef struct cli {
    enum { RUN_COMPARE, RUN_HELP, RUN_VERSION } action;
    const char *path_a, *path_b, *json_path, *plot_path;
    char label_a[512], label_b[512];
    int labels; /* --labels given */
} cli;

static mr_status parse_cli(int argc, char **argv, cli *c, mr_error *err) {
    enum { OPT_PLOT = 1000, OPT_JSON, OPT_LABELS, OPT_HELP, OPT_VERSION };
    static const struct option longopts[] = {
        {"plot", required_argument, NULL, OPT_PLOT},
        {"json", required_argument, NULL, OPT_JSON},
        {"labels", required_argument, NULL, OPT_LABELS},
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    memset(c, 0, sizeof *c);
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (o) {
        case OPT_PLOT:
            c->plot_path = optarg;
            break;
        case OPT_JSON:
            c->json_path = optarg;
            break;
        case OPT_LABELS: {
            const char *comma = strchr(optarg, ',');
            if (comma == NULL || comma == optarg || comma[1] == '\0' || strchr(comma + 1, ',') ||
                has_control_char(optarg) || (size_t)(comma - optarg) >= sizeof c->label_a ||
                strlen(comma + 1) >= sizeof c->label_b)
                return mr_error_set(err, MR_ERR_USAGE,
                                    "--labels %s: expected two names separated by a comma, "
                                    "e.g. --labels cpu,gpu",
                                    optarg);
            snprintf(c->label_a, sizeof c->label_a, "%.*s", (int)(comma - optarg), optarg);
            snprintf(c->label_b, sizeof c->label_b, "%s", comma + 1);
            c->labels = 1;
            break;
        }
        case 'h':
        case OPT_HELP:
            c->action = RUN_HELP;
            return MR_OK;
        case OPT_VERSION:
            c->action = RUN_VERSION;
            return MR_OK;
        default:
            return mr_cli_bad_option(argv, err);
        }
    }
    if (argc - optind != 2)
        return mr_error_set(err, MR_ERR_USAGE, "%s (see --help)",
                            argc - optind < 2 ? "expected two CSV files, A.csv B.csv"
                                              : "more than two CSV files given");
    c->path_a = argv[optind];
    c->path_b = argv[optind + 1];
    return MR_OK;
}

/* A failure of an output file (err_io: atomic_file.h's "PATH: cannot
 * write: ..."), as a failure while running, "--json PATH: ...". */
static mr_status output_failed(const char *opt, const mr_error *err_io, mr_error *err) {
    return mr_error_set(err, MR_ERR_RUNTIME, "%s %s", opt, err_io->msg);
}

int main(int argc, char **argv) {
    mr_h5_no_exit_cleanup(); /* runtime/h5_lock.h */
    mr_error err = {0}, err_io = {0};
    cli c;
    mr_cmp_run a = {0}, b = {0};
    mr_cmp_result cmp = {0};
    mr_atomic_file json = {0};
    char gnuplot[4096], png_tmp[MR_ATOMIC_PATH_MAX + 32] = "";
    mr_status st = parse_cli(argc, argv, &c, &err);
    if (st == MR_OK && c.action == RUN_HELP) {
        usage(stdout);
        return MR_EXIT_OK;
    }
    if (st == MR_OK && c.action == RUN_VERSION) {
        printf("mirrored %s\n", MR_VERSION);
        return MR_EXIT_OK;
    }
    /* bad input, found before anything is printed or written */
    if (st == MR_OK) st = mr_cmp_run_load(&a, c.path_a, &err);
    if (st == MR_OK) st = mr_cmp_run_load(&b, c.path_b, &err);
    if (st == MR_OK && c.labels) a.label = c.label_a, b.label = c.label_b;
    if (st == MR_OK) st = mr_cmp_compare(&a, &b, &cmp, &err);
    if (st == MR_OK && c.plot_path != NULL) {
        int loss, acc;
        if (!mr_cmp_find_program("gnuplot", gnuplot, sizeof gnuplot))
            st = mr_error_set(&err, MR_ERR_UNSUPPORTED,
                              "--plot needs gnuplot (Debian: apt-get install gnuplot-nox)");
        else if (mr_cmp_plot_panels(&cmp, &loss, &acc) == 0)
            st = mr_error_set(&err, MR_ERR_DATA,
                              "--plot: neither %s nor %s has loss or accuracy to plot", a.path,
                              b.path);
        else if (has_control_char(c.plot_path) || has_control_char(a.label) ||
                 has_control_char(b.label))
            st = mr_error_set(&err, MR_ERR_USAGE,
                              "--plot: the output path and the run names may not contain "
                              "control characters (use --labels)");
    }
    if (st == MR_OK) st = mr_atomic_check_writable("--plot", c.plot_path, &err);
    if (st == MR_OK) st = mr_atomic_check_writable("--json", c.json_path, &err);
    if (st != MR_OK) goto fail;

    mr_cmp_print_report(stdout, &cmp);
    fflush(stdout);
    /* outputs under temporary names next to their destination, renamed at the end */
    if (c.plot_path != NULL) {
        if (mr_atomic_path_begin(c.plot_path, png_tmp, sizeof png_tmp, &err_io) != MR_OK) {
            st = output_failed("--plot", &err_io, &err);
            goto fail;
        }
        if ((st = mr_cmp_make_plot(&cmp, gnuplot, png_tmp, &err)) != MR_OK) goto fail;
    }
    if (c.json_path != NULL) {
        if (mr_atomic_file_open(&json, c.json_path, &err_io) != MR_OK) {
            st = output_failed("--json", &err_io, &err);
            goto fail;
        }
        if ((st = mr_cmp_write_json(json.f, &cmp, c.json_path, &err)) != MR_OK) goto fail;
    }
    if (png_tmp[0]) {
        mr_status pst = mr_atomic_path_commit(c.plot_path, png_tmp, &err_io);
        png_tmp[0] = '\0'; /* renamed, or removed by the failed commit */
        if (pst != MR_OK) {
            st = output_failed("--plot", &err_io, &err);
            goto fail;
        }
    }
    if (json.f != NULL && mr_atomic_file_commit(&json, &err_io) != MR_OK) {
        st = output_failed("--json", &err_io, &err);
        if (c.plot_path != NULL) unlink(c.plot_path); /* all outputs or none */
        goto fail;
    }
    mr_cmp_result_free(&cmp);
    mr_cmp_run_free(&a);
    mr_cmp_run_free(&b);
    return MR_EXIT_OK;
fail:
    fprintf(stderr, "%s: %s\n", prog, err.msg);
    mr_atomic_path_abort(png_tmp);
    mr_atomic_file_abort(&json);
    mr_cmp_result_free(&cmp);
    mr_cmp_run_free(&a);
    mr_cmp_run_free(&b);
    return mr_cli_exit_code(st);
}
