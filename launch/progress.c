/* progress.c: see progress.h. */
#include "launch/progress.h"
#include "runtime/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* 1 if a launcher (mpirun: OpenMPI, MPICH, PMIx) started this process. It
 * hands its ranks a pseudo-terminal even when its own output goes to a file
 * or a pipe, so isatty says nothing about where the bar would end up. */
static int under_launcher(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

void mr_progress_init(mr_progress *p, FILE *out, int quiet, int epochs, FILE *csv) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->tty = isatty(fileno(out)) && !under_launcher();
    p->quiet = quiet;
    p->epochs = epochs;
    p->csv = csv;
    p->current_epoch = -1;
}

/* The errno of the first failed write to a log (kept in *first), so that
 * its close can say why. */
static void flush_log(FILE *f, int *first) {
    if (f == NULL) return;
    if ((fflush(f) != 0 || ferror(f)) && *first == 0) *first = errno ? errno : EIO;
}

/* Progress is best effort: once stdout is gone (a closed pipe, a full
 * disk) nothing more is written to it, and training goes on. */
static void flush_out(mr_progress *p) {
    if (fflush(p->out) != 0 || ferror(p->out)) p->quiet = 1;
}

static void format_time(double s, char *buf, size_t n) {
    if (s >= 3600)
        snprintf(buf, n, "%d:%02d:%02d", (int)s / 3600, ((int)s / 60) % 60, (int)s % 60);
    else if (s >= 60)
        snprintf(buf, n, "%d:%02d", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, n, "%ds", (int)(s + 0.5));
}

static void begin_epoch(mr_progress *p, int epoch) {
    if (p->current_epoch == epoch) return;
    p->current_epoch = epoch;
    p->epoch_start = mr_now_s();
    p->last_draw = 0.0;
    if (!p->quiet && p->tty) fprintf(p->out, "Epoch %d/%d\n", epoch + 1, p->epochs);
}

/* The figure the logs' accuracy fields hold: Keras's metric name. */
static const char *metric_name(const mr_progress *p) {
    return p->regression ? "mae" : "accuracy";
}

void mr_progress_on_step(void *user, const mr_step_info *info) {
    mr_progress *p = user;
    const int64_t step = info->step, steps = info->steps;
    const double loss = info->loss, acc = info->accuracy;
    begin_epoch(p, info->epoch);
    p->steps = steps;
    if (p->log) {
        fprintf(p->log,
                "{\"step\": %lld, \"epoch\": %d, \"loss\": %.6g, \"learning_rate\": %.8g, "
                "\"step_seconds\": %.6f, \"compute_seconds\": %.6f, \"comm_seconds\": %.6f, "
                "\"data_seconds\": %.6f, \"device\": \"%s\"}\n",
                (long long)info->global_step, info->epoch, info->step_loss, (double)info->lr,
                info->seconds, info->compute_seconds, info->comm_seconds, info->data_seconds,
                p->device ? p->device : "cpu");
    }
    if (p->throughput != NULL) mr_throughput_step(p->throughput, info->global_step, info->seconds);
    if (p->quiet || !p->tty) return;
    double t = mr_now_s();
    if (step != steps && t - p->last_draw < 0.1) return;
    p->last_draw = t;
    const int width = 30;
    int done = (int)((double)width * (double)step / (double)steps);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < done ? '=' : (i == done ? '>' : '.');
    bar[width] = '\0';
    double elapsed = t - p->epoch_start;
    double eta = step > 0 ? elapsed / (double)step * (double)(steps - step) : 0.0;
    char ts[32];
    format_time(eta, ts, sizeof ts);
    fprintf(p->out, "\r%*lld/%lld [%s] - ETA: %s - loss: %.4f - %s: %.4f\033[K",
            (int)snprintf(NULL, 0, "%lld", (long long)steps), (long long)step, (long long)steps,
            bar, ts, loss, metric_name(p), acc);
    flush_out(p);
}

static void csv_header(mr_progress *p) {
    /* Keras CSVLogger sorts its columns: val_sparse_top_k_... after val_loss; a regression's
     * mae after loss */
    if (!p->header_done && p->regression)
        fprintf(p->csv, "epoch,loss,mae,val_loss,val_mae,learning_rate,samples_per_sec,seconds\n");
    else if (!p->header_done)
        fprintf(p->csv,
                "epoch,accuracy,loss,val_accuracy,val_loss,%slearning_rate,samples_per_sec,"
                "seconds\n",
                p->top_k ? "val_sparse_top_k_categorical_accuracy," : "");
    p->header_done = 1;
}

/* restored: the epoch's logs come from a checkpoint, which keeps no top-k
 * figure: that field is left empty */
static void csv_line(mr_progress *p, const mr_epoch_logs *l, int restored) {
    if (p->csv == NULL) return;
    csv_header(p);
    if (p->regression && l->has_val)
        fprintf(p->csv, "%d,%.6f,%.6f,%.6f,%.6f", l->epoch, l->loss, l->accuracy, l->val_loss,
                l->val_accuracy);
    else if (p->regression)
        fprintf(p->csv, "%d,%.6f,%.6f,,", l->epoch, l->loss, l->accuracy);
    else if (l->has_val)
        fprintf(p->csv, "%d,%.6f,%.6f,%.6f,%.6f", l->epoch, l->accuracy, l->loss, l->val_accuracy,
                l->val_loss);
    else
        fprintf(p->csv, "%d,%.6f,%.6f,,", l->epoch, l->accuracy, l->loss);
    if (p->top_k && l->has_val && !restored)
        fprintf(p->csv, ",%.6f", l->val_top_k);
    else if (p->top_k)
        fprintf(p->csv, ",");
    fprintf(p->csv, ",%.8g,%.1f,%.3f\n", (double)l->lr, l->samples_per_sec, l->train_seconds);
    flush_log(p->csv, &p->csv_errno);
}

void mr_progress_replay(mr_progress *p, const mr_epoch_logs *logs, int n) {
    for (int i = 0; i < n; i++) {
        csv_line(p, &logs[i], 1);
        p->last = logs[i];
    }
}

void mr_progress_print_per_class(FILE *out, const char *set, const double *confusion, int classes) {
    fprintf(out, "%s per-class accuracy:", set);
    for (int c = 0; c < classes; c++) {
        double n = 0.0;
        for (int j = 0; j < classes; j++)
            n += confusion[(size_t)c * (size_t)classes + (size_t)j];
        const double right = confusion[(size_t)c * (size_t)classes + (size_t)c];
        fprintf(out, "%s %d %.4f (%.0f)", c ? " |" : "", c, n > 0 ? right / n : 0.0, n);
    }
    fprintf(out, "\n");
}

int mr_progress_time_fractions(const mr_epoch_logs *l, mr_time_fractions *f) {
    *f = (mr_time_fractions){0};
    if (!(l->step_seconds > 0.0)) return 0;
    f->compute = l->compute_seconds / l->step_seconds;
    f->comm = l->comm_seconds / l->step_seconds;
    f->data = l->data_seconds / l->step_seconds;
    f->other = 1.0 - f->compute - f->comm - f->data;
    if (f->other < 0.0) f->other = 0.0; /* clock readings a few ns apart */
    return 1;
}

void mr_progress_on_epoch_end(void *user, const mr_epoch_logs *l) {
    mr_progress *p = user;
    begin_epoch(p, l->epoch);
    p->train_seconds += l->train_seconds;
    p->train_samples += l->samples_per_sec * l->train_seconds;
    p->last = *l;
    csv_line(p, l, 0);
    flush_log(p->log, &p->log_errno);
    if (p->quiet) return;
    char ts[32], val[160] = "";
    format_time(l->train_seconds, ts, sizeof ts);
    if (l->has_val)
        snprintf(val, sizeof val, " - val_loss: %.4f - val_%s: %.4f", l->val_loss, metric_name(p),
                 l->val_accuracy);
    else
        snprintf(val, sizeof val, " - val_loss: n/a - val_%s: n/a", metric_name(p));
    if (p->top_k) {
        size_t used = strlen(val);
        if (l->has_val)
            snprintf(val + used, sizeof val - used,
                     " - val_sparse_top_k_categorical_accuracy: %.4f", l->val_top_k);
        else
            snprintf(val + used, sizeof val - used,
                     " - val_sparse_top_k_categorical_accuracy: n/a");
    }
    if (p->tty) {
        /* the finished bar, as Keras leaves it */
        char bar[40];
        memset(bar, '=', 30);
        bar[30] = '\0';
        fprintf(p->out, "\r\033[K%lld/%lld [%s] - ", (long long)p->steps, (long long)p->steps, bar);
    } else
        fprintf(p->out, "Epoch %d/%d - ", l->epoch + 1, p->epochs);
    fprintf(p->out, "%s - loss: %.4f - %s: %.4f%s - %.0f samples/s", ts, l->loss, metric_name(p),
            l->accuracy, val, l->samples_per_sec);
    /* where the update time went, after the figures that were there before
     * it (they parse as they always have), before the rare skipped count
     * that ends the line */
    mr_time_fractions f;
    if (mr_progress_time_fractions(l, &f)) {
        fprintf(p->out, " - time: compute %.2f comm %.2f data %.2f other %.2f", f.compute, f.comm,
                f.data, f.other);
        if (l->slowest_replica >= 0) fprintf(p->out, ", slowest replica %d", l->slowest_replica);
    }
    /* on_nan = skip: the updates dropped for NaN or Inf (their loss is not in loss) */
    if (l->skipped > 0) fprintf(p->out, " - skipped: %lld", (long long)l->skipped);
    fprintf(p->out, "\n");
    /* [net] per_class: one line, class accuracy (examples of the class) */
    if (l->has_val && l->val_confusion != NULL)
        mr_progress_print_per_class(p->out, "val", l->val_confusion, l->classes);
    /* Keras's ReduceLROnPlateau(verbose=1) line */
    if (l->reduced_lr > 0.0f)
        fprintf(p->out, "Epoch %d: ReduceLROnPlateau reducing learning rate to %g.\n", l->epoch + 1,
                (double)l->reduced_lr);
    flush_out(p);
}

void mr_progress_on_stop(mr_progress *p) {
    /* the CSV has a row per finished epoch only (CSVLogger's format): a stop
     * in the first epoch still leaves the header, not an empty file */
    if (p->csv != NULL) {
        csv_header(p);
        flush_log(p->csv, &p->csv_errno);
    }
    flush_log(p->log, &p->log_errno);
    if (!p->quiet && p->tty) {
        fprintf(p->out, "\n"); /* keep the bar where it stopped */
        flush_out(p);
    }
}

void mr_progress_on_end(mr_progress *p) {
    if (p->csv != NULL) {
        csv_header(p);
        flush_log(p->csv, &p->csv_errno);
    }
    flush_log(p->log, &p->log_errno);
}

mr_status mr_progress_close_file(FILE **f, const char *opt, const char *path, int first_errno,
                                 mr_error *err) {
    if (*f == NULL) return MR_OK;
    errno = 0;
    int bad = fflush(*f) != 0 || ferror(*f), e = first_errno ? first_errno : errno;
    if (fclose(*f) != 0 && !bad) bad = 1, e = errno;
    *f = NULL;
    if (!bad) return MR_OK;
    if (e == 0) return mr_error_set(err, MR_ERR_RUNTIME, "%s %s: cannot write", opt, path);
    return mr_error_set(err, MR_ERR_RUNTIME, "%s %s: cannot write: %s", opt, path, strerror(e));
}
