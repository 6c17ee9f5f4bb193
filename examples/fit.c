/* fit.c: a program that embeds mirrored through its public C API alone
 * (include/mirrored.h), as any tool would after `meson install`:
 *
 *     cc fit.c $(pkg-config --cflags --libs mirrored) -o fit
 *     ./fit MODEL.cfg|MODEL.keras|CHECKPOINT.h5 [DEVICES [EPOCHS [OUT.h5|OUT.keras]]]
 *
 * It trains the model on its .cfg's own [data] (DEVICES default "auto",
 * EPOCHS default the .cfg's), prints one line per epoch from the epoch
 * callback, stops cleanly on Ctrl-C (the signal handler only asks for a
 * stop; the update in flight finishes), evaluates the .cfg's test set if
 * it names one, and saves. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mirrored.h>

static mirrored_model *model; /* read by the signal handler */

static void on_sigint(int sig) {
    (void)sig;
    mirrored_model_request_stop(model); /* async-signal-safe */
}

static int print_epoch(void *user, const mirrored_epoch_logs *l) {
    const char *metric = user;
    printf("Epoch %d/%d - loss: %.4f - %s: %.4f", l->epoch + 1, l->epochs, l->loss, metric,
           l->metric);
    if (l->has_val) printf(" - val_loss: %.4f - val_%s: %.4f", l->val_loss, metric, l->val_metric);
    printf(" - %.0f samples/s\n", l->samples_per_sec);
    return 0; /* go on */
}

/* the message of a failed call, and the exit code of mirrored_train */
static int fail(const mirrored_error *err) {
    fprintf(stderr, "fit: %s\n", err->message);
    return err->status == MIRRORED_ERR_USAGE || err->status == MIRRORED_ERR_CONFIG ? 2 : 1;
}

static int run(int argc, char **argv, mirrored_error *err) {
    if (mirrored_model_load(argv[1], &model, err) != MIRRORED_OK) return fail(err);
    mirrored_model_info info;
    if (mirrored_model_get_info(model, &info, err) != MIRRORED_OK) return fail(err);
    mirrored_fit_options o = mirrored_fit_options_default();
    o.devices = argc > 2 ? argv[2] : "auto";
    o.epochs = argc > 3 ? atoi(argv[3]) : 0;
    o.on_epoch = print_epoch;
    o.user = (void *)info.metric;
    o.stop_checkpoint = "fit-stopped.h5";
    signal(SIGINT, on_sigint);
    mirrored_fit_result r;
    if (mirrored_model_fit(model, &o, &r, err) != MIRRORED_OK) return fail(err);
    printf("%d replicas, %lld updates, params_hash %016llx%s\n", r.replicas, (long long)r.updates,
           (unsigned long long)r.params_hash, r.stopped ? ", stopped: fit-stopped.h5" : "");
    double loss, metric;
    const mirrored_status st =
        mirrored_model_evaluate(model, NULL, 0, NULL, NULL, &loss, &metric, err);
    if (st == MIRRORED_OK) printf("test loss: %.4f - test %s: %.4f\n", loss, info.metric, metric);
    if (st != MIRRORED_OK && st != MIRRORED_ERR_USAGE) return fail(err); /* USAGE: no test set */
    if (argc > 4 && mirrored_model_save(model, argv[4], err) != MIRRORED_OK) return fail(err);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fit MODEL [DEVICES [EPOCHS [OUT.h5|OUT.keras]]]\n");
        return 2;
    }
    mirrored_error err = {0};
    if (mirrored_init(&argc, &argv, &err) != MIRRORED_OK) return fail(&err);
    const int rc = run(argc, argv, &err);
    mirrored_model_destroy(model);
    mirrored_finalize();
    return rc;
}
