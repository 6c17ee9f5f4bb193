/* plot.c: the gnuplot script and data of --plot, and running gnuplot (plot.h). */
#include "launch/compare/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Finds an executable in $PATH; 1 and its path in buf if found. */
int mr_cmp_find_program(const char *name, char *buf, size_t n) {
    const char *path = getenv("PATH");
    if (path == NULL || path[0] == '\0') path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0)
            snprintf(buf, n, "./%s", name);
        else
            snprintf(buf, n, "%.*s/%s", (int)len, p, name);
        struct stat st;
        if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) return 1;
        if (end == NULL) return 0;
        p = end + 1;
    }
}

/* Writes s as a gnuplot single-quoted string ('' is a quote). */
static void gp_str(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

/* Data for gnuplot: epoch (1-based), loss, accuracy, val_loss, val_accuracy;
 * '?' where absent. */
static mr_status write_plot_data(const char *path, const mr_cmp_run *r, mr_error *err) {
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot write %s: %s", path,
                            strerror(errno));
    static const mr_cmp_metric cols[] = {MR_CMP_LOSS, MR_CMP_ACCURACY, MR_CMP_VAL_LOSS,
                                         MR_CMP_VAL_ACCURACY};
    for (int i = 0; i < r->n; i++) {
        const mr_cmp_row *row = &r->rows[i];
        fprintf(f, "%ld", row->epoch + 1);
        for (int k = 0; k < 4; k++) {
            if (mr_cmp_row_has(row, cols[k]) && isfinite(row->v[cols[k]]))
                fprintf(f, " %.10g", row->v[cols[k]]);
            else
                fputs(" ?", f);
        }
        fputc('\n', f);
    }
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad) return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot write %s", path);
    return MR_OK;
}

/* One panel: mr_cmp_metric m (training, solid) and its validation metric (dashed)
 * of both runs; data column `col` of the data files (val: col + 2). */
static void gp_panel(FILE *f, const mr_cmp_result *c, const char *data[2], mr_cmp_metric m,
                     mr_cmp_metric val_m, int col, const char *key_pos) {
    static const char *colors[2] = {"#1f77b4", "#d62728"};
    const mr_cmp_run *runs[2] = {c->a, c->b};
    fprintf(f, "set title '%s'\nset ylabel '%s'\nset key %s\nplot ", mr_cmp_metric_names[m],
            mr_cmp_metric_names[m], key_pos);
    int k = 0;
    for (int r = 0; r < 2; r++) {
        for (int v = 0; v < 2; v++) {
            if (!mr_cmp_run_has(runs[r], v ? val_m : m)) continue;
            fputs(k++ ? ", \\\n     " : "", f);
            gp_str(f, data[r]);
            fprintf(f, " using 1:%d with linespoints lw 2 pt 7 ps 0.7 dt %d lc rgb '%s' title ",
                    col + (v ? 2 : 0), v ? 2 : 1, colors[r]);
            char title[1200];
            snprintf(title, sizeof title, "%s %s", runs[r]->label, v ? "validation" : "training");
            gp_str(f, title);
        }
    }
    fputc('\n', f);
}

/* The plot's panels: loss and accuracy, each if either run has it. */
int mr_cmp_plot_panels(const mr_cmp_result *c, int *loss, int *acc) {
    *loss = mr_cmp_run_has(c->a, MR_CMP_LOSS) || mr_cmp_run_has(c->b, MR_CMP_LOSS) ||
            mr_cmp_run_has(c->a, MR_CMP_VAL_LOSS) || mr_cmp_run_has(c->b, MR_CMP_VAL_LOSS);
    *acc = mr_cmp_run_has(c->a, MR_CMP_ACCURACY) || mr_cmp_run_has(c->b, MR_CMP_ACCURACY) ||
           mr_cmp_run_has(c->a, MR_CMP_VAL_ACCURACY) || mr_cmp_run_has(c->b, MR_CMP_VAL_ACCURACY);
    return *loss + *acc;
}

static mr_status write_plot_script(const char *path, const mr_cmp_result *c, const char *data[2],
                                   const char *png, mr_error *err) {
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot write %s: %s", path,
                            strerror(errno));
    int loss, acc, panels = mr_cmp_plot_panels(c, &loss, &acc);
    long lo = c->all[0].epoch + 1, hi = c->all[c->n_all - 1].epoch + 1;
    fputs("set terminal pngcairo size 1000,450 noenhanced font 'sans,10'\nset output ", f);
    gp_str(f, png);
    fputs("\nset datafile missing '?'\nset grid\nset xlabel 'epoch'\n", f);
    /* whole epochs on the axis, a margin so the end points are not cut,
     * and a visible range for a single epoch */
    double margin = lo == hi ? 0.5 : 0.03 * (double)(hi - lo);
    fprintf(f, "set xrange [%g:%g]\nset xtics %ld\nset format x '%%.0f'\n", (double)lo - margin,
            (double)hi + margin, hi - lo < 12 ? 1 : (hi - lo + 9) / 10);
    fputs("set offsets 0, 0, graph 0.05, graph 0.05\n", f);
    fprintf(f, "set multiplot layout 1,%d title ", panels);
    char title[2100];
    snprintf(title, sizeof title, "%s vs %s", c->a->label, c->b->label);
    gp_str(f, title);
    fputs(" font ',12'\n", f);
    if (loss) gp_panel(f, c, data, MR_CMP_LOSS, MR_CMP_VAL_LOSS, 2, "top right");
    if (acc) gp_panel(f, c, data, MR_CMP_ACCURACY, MR_CMP_VAL_ACCURACY, 3, "bottom right");
    fputs("unset multiplot\nset output\n", f);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad) return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot write %s", path);
    return MR_OK;
}

/* s without the spaces, tabs and line ends around it (in place). */
static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* The last non-empty line of a file (gnuplot's error), or "" */
static void last_line(const char *path, char *buf, size_t n) {
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        char *s = trim(line);
        if (s[0] != '\0' && s[0] != '^') snprintf(buf, n, "%s", s);
    }
    fclose(f);
}

/* Runs `gnuplot script` with stdout discarded and stderr into errpath. */
static mr_status run_gnuplot(const char *gnuplot, const char *script, const char *errpath,
                             mr_error *err) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char *const argv[] = {(char *)"gnuplot", (char *)script, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, gnuplot, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot run %s: %s", gnuplot,
                            strerror(rc));
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return mr_error_set(err, MR_ERR_RUNTIME, "--plot: waiting for gnuplot: %s",
                                strerror(errno));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char why[512];
        last_line(errpath, why, sizeof why);
        if (WIFEXITED(status))
            return mr_error_set(err, MR_ERR_RUNTIME, "--plot: gnuplot failed (exit %d)%s%s",
                                WEXITSTATUS(status), why[0] ? ": " : "", why);
        return mr_error_set(err, MR_ERR_RUNTIME, "--plot: gnuplot was killed by signal %d",
                            WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    return MR_OK;
}

static int is_png(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char buf[8];
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    int ok = fread(buf, 1, 8, f) == 8 && memcmp(buf, sig, 8) == 0;
    fclose(f);
    return ok;
}

/* Draws the plot into png (a temporary name next to the destination):
 * script and data in a fresh temporary directory, removed afterwards. */
mr_status mr_cmp_make_plot(const mr_cmp_result *c, const char *gnuplot, const char *png,
                           mr_error *err) {
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') base = "/tmp";
    char dir[4096], script[4200], data_a[4200], data_b[4200], errpath[4200];
    snprintf(dir, sizeof dir, "%s/mirrored_compare.XXXXXX", base);
    if (mkdtemp(dir) == NULL)
        return mr_error_set(err, MR_ERR_RUNTIME, "--plot: cannot create a directory in %s: %s",
                            base, strerror(errno));
    snprintf(script, sizeof script, "%s/plot.gp", dir);
    snprintf(data_a, sizeof data_a, "%s/a.dat", dir);
    snprintf(data_b, sizeof data_b, "%s/b.dat", dir);
    snprintf(errpath, sizeof errpath, "%s/gnuplot.err", dir);
    const char *data[2] = {data_a, data_b};
    mr_status st = MR_OK;
    MR_CHECK_GOTO(write_plot_data(data_a, c->a, err), st, done);
    MR_CHECK_GOTO(write_plot_data(data_b, c->b, err), st, done);
    MR_CHECK_GOTO(write_plot_script(script, c, data, png, err), st, done);
    MR_CHECK_GOTO(run_gnuplot(gnuplot, script, errpath, err), st, done);
    if (!is_png(png))
        st = mr_error_set(err, MR_ERR_RUNTIME, "--plot: gnuplot wrote no PNG image (%s)", png);
done:
    unlink(script);
    unlink(data_a);
    unlink(data_b);
    unlink(errpath);
    rmdir(dir);
    return st;
}
