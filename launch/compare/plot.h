/* plot.h: mirrored_compare --plot: the loss and accuracy curves of both
 * runs (training solid, validation dashed) as a PNG drawn by gnuplot
 * (pngcairo), run with posix_spawn on a script and data written to a fresh
 * temporary directory that is removed afterwards. Errors are one line
 * starting "--plot" (MR_ERR_RUNTIME). */
#ifndef MR_COMPARE_PLOT_H
#define MR_COMPARE_PLOT_H

#include <stddef.h>

#include "launch/compare/compare.h"
#include "runtime/error.h"

/* Finds an executable in $PATH; 1 and its path in buf[n] if found. */
int mr_cmp_find_program(const char *name, char *buf, size_t n);

/* The plot's panels: loss (*loss) and accuracy (*acc), each if either run
 * has it (training or validation); returns how many. */
int mr_cmp_plot_panels(const mr_cmp_result *c, int *loss, int *acc);

/* Draws the plot into png with the gnuplot at path `gnuplot`, then checks
 * that a PNG image is there. Labels and png must hold no control characters. */
mr_status mr_cmp_make_plot(const mr_cmp_result *c, const char *gnuplot, const char *png,
                           mr_error *err);

#endif
