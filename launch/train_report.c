/* train_report.c: what mirrored_train prints and writes about a run
 * (train_report.h). */
#include "launch/train_report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "collectives/hierarchical.h"
#include "launch/train_job.h"
#include "session/session_devices.h"
#include "runtime/atomic_file.h"
#include "runtime/json.h"

/* Process p's devices (`sets`: every process's, check_same_job), as
 * "cpu:2,3" or "gpu:0,1". */
static void rank_devices(const mr_job *job, const mr_device_set *sets, int p, char *buf, size_t n) {
    mr_device_set set = sets[p];
    if (mr_session_numbered_across_job(&set)) {
        set.count = job->replicas[p];
        for (int i = 0; i < set.count && i < MR_MAX_REPLICAS; i++)
            set.ordinals[i] = job->first[p] + i;
    }
    mr_devices_format(&set, buf, n);
}

void mr_train_model_name(const char *cfg_path, char *buf, size_t n) {
    const char *base = strrchr(cfg_path, '/');
    base = base ? base + 1 : cfg_path;
    snprintf(buf, n, "%s", base);
    char *dot = strrchr(buf, '.');
    if (dot) *dot = '\0';
}

/* The start-up line: replicas and where they run, the communicator, the
 * batch, and the learning rate with the rule that made it. */
void mr_train_print_plan(const mr_job *job, mr_strategy *strategy, const mr_device_set *sets,
                         const mr_config *cfg, int64_t n_train, int64_t n_val) {
    const mr_fit_plan *plan = mr_strategy_plan(strategy);
    const mr_comm *comm = mr_strategy_comm(strategy);
    char buf[512];
    printf("%d replica%s", plan->replicas, plan->replicas > 1 ? "s" : "");
    if (job->size > 1) {
        printf(" on %d processes (", job->size);
        int on_node = 0; /* CPU replicas of this process's node */
        for (int p = 0; p < job->size; p++) {
            rank_devices(job, sets, p, buf, sizeof buf);
            printf("%s%s: rank %d %s", p ? "; " : "", job->hosts[p], p, buf);
            if (mr_session_numbered_across_job(&sets[p]) &&
                strcmp(job->hosts[p], job->hosts[job->rank]) == 0)
                on_node += job->replicas[p];
        }
        /* cpu:N numbers the job's replicas (usage.md): with more replicas
         * than cores, cpu:2 on a 2-core node names no core */
        if (job->node_cores > 0 && on_node > job->node_cores)
            printf("; oversubscribed: %d replicas share %d core%s of %s, cpu:N numbers replicas, "
                   "not cores",
                   on_node, job->node_cores, job->node_cores == 1 ? "" : "s",
                   job->hosts[job->rank]);
        printf(")");
    } else {
        rank_devices(job, sets, 0, buf, sizeof buf);
        printf(" (%s)", buf);
    }
    if (plan->replicas > 1) {
        if (strcmp(mr_comm_name(comm), "hierarchical") == 0) {
            mr_comm_hierarchical_describe(comm, buf, sizeof buf);
            printf(", hierarchical all-reduce (%s)", buf);
        } else if (strcmp(mr_comm_name(comm), "mpi") == 0) {
            printf(", MPI all-reduce (mpi)");
        } else if (strcmp(mr_comm_name(comm), "nccl") == 0) {
            printf(", NCCL all-reduce (nccl)");
        } else {
            printf(", shared-memory all-reduce (local)");
        }
    }
    if (!mr_session_numbered_across_job(&sets[job->rank])) {
        /* after the models are built: what each of this process's GPUs holds */
        printf(", device memory in use");
        for (int r = 0; r < plan->local_replicas; r++) {
            mr_backend *be = mr_strategy_replica(strategy, r)->be;
            size_t used = 0, total = 0;
            char dev[32];
            mr_backend_format(be, dev, sizeof dev);
            if (mr_backend_memory(be, &used, &total, NULL) == MR_OK && total > 0)
                printf("%s %s %.2f of %.1f GiB", r ? "," : "", dev, (double)used / 1073741824.0,
                       (double)total / 1073741824.0);
        }
    }
    printf(", batch %d/replica", plan->batch);
    if (plan->accumulate > 1) printf(" x %d accumulated", plan->accumulate);
    float lr = plan->base_lr * plan->lr_factor;
    printf(" = %d global, learning rate ", plan->global_batch);
    if (plan->fixed_global)
        printf("%g (global batch fixed by the .cfg: the same on any replica count", lr);
    else if (plan->lr_factor != 1.0f)
        printf("%g x %g = %g (linear scaling: global batch %d / batch %d", plan->base_lr,
               plan->lr_factor, lr, plan->global_batch, plan->batch);
    else
        printf("%g (%s", lr,
               cfg->net.lr_scaling == MR_LR_SCALING_LINEAR ? "linear scaling, one replica"
                                                           : "no scaling");
    if (plan->warmup_epochs > 0 && plan->lr_factor != 1.0f) /* one replica: nothing to ramp */
        printf(", %g warmup epoch%s from %g", plan->warmup_epochs,
               plan->warmup_epochs == 1 ? "" : "s", plan->base_lr);
    if (plan->schedule == MR_LR_SCHEDULE_COSINE)
        printf(", cosine decay to %g at epoch %d", lr * plan->lr_alpha, cfg->net.epochs);
    for (int i = 0; plan->schedule == MR_LR_SCHEDULE_STEPS && i < plan->boundaries.n; i++)
        printf("%s%g after epoch %g", i ? ", " : ", then ", lr * plan->factors.v[i],
               (double)plan->boundaries.v[i]);
    printf(")");
    /* the update's options, where set (they change what a step does) */
    const mr_net_cfg *net = &cfg->net;
    if (net->weight_decay > 0.0f)
        printf(", %s weight decay %g", mr_optimizer_name(net->optimizer), net->weight_decay);
    if (net->clipnorm > 0.0f) printf(", clipnorm %g per weight", net->clipnorm);
    if (net->global_clipnorm > 0.0f) printf(", global_clipnorm %g", net->global_clipnorm);
    if (net->clipvalue > 0.0f) printf(", clipvalue %g", net->clipvalue);
    /* the training loss's class weights (validation and test take none) */
    for (int i = 0; i < net->class_weight.n && i < 10; i++)
        printf("%s%g", i ? "," : ", class weights ", (double)net->class_weight.v[i]);
    if (net->class_weight.n > 10) printf(",... (%d classes)", net->class_weight.n);
    printf("\n");
    /* what the kernels chose (a GPU's cuDNN algorithms): replica 0's, which
     * every replica of its kind shares */
    const mr_model *m0 = mr_strategy_replica(strategy, 0);
    int said = 0, all_det = 1;
    for (int i = 0; i < m0->n_layers; i++) {
        int det = mr_layer_describe(&m0->layers[i], buf, sizeof buf);
        if (det < 0) continue;
        printf("%s%s: %s", said++ ? "; " : "Kernels: ", m0->layers[i].name, buf);
        all_det &= det;
    }
    if (said)
        printf(" (%s)\n", all_det ? "deterministic: the same bits run after run"
                                  : "NOT deterministic: runs repeat only to float rounding");
    printf("Train on %lld samples", (long long)n_train);
    if (n_val) printf(", validate on %lld samples", (long long)n_val);
    printf(", %lld steps per epoch\n", (long long)plan->steps_per_epoch);
    fflush(stdout);
}

/* "Resuming from ...": where the run stood and, with another replica count,
 * what changes. */
void mr_train_print_resume(const char *path, const mr_checkpoint *ck, const mr_fit_plan *plan,
                           int epochs, const char *changes) {
    const mr_fit_state *s = &ck->state;
    /* mr_ckpt_check_epochs refused a checkpoint beyond the epochs */
    if (s->epoch >= epochs)
        printf("Resuming from %s: it has finished its %d epoch%s (%lld updates): nothing to train "
               "(--epochs N for more)\n",
               path, epochs, epochs == 1 ? "" : "s", (long long)s->global_step);
    else
        printf("Resuming from %s: epoch %d/%d, %lld updates into it, %lld in all\n", path,
               s->epoch + 1, epochs, (long long)s->step, (long long)s->global_step);
    if (changes != NULL && changes[0] != '\0')
        printf("The .cfg differs from the checkpoint's: %s\n", changes);
    if (ck->replicas != plan->replicas || ck->global_batch != plan->global_batch)
        printf("It was trained with %d replica%s and a global batch of %d; now %d and %d: training "
               "goes on from example %lld of the epoch's order, with the learning rate of this "
               "run (above); the rest of the run is not bitwise the uninterrupted one\n",
               ck->replicas, ck->replicas == 1 ? "" : "s", ck->global_batch, plan->replicas,
               plan->global_batch, (long long)s->position);
}

/* "SET_per_class_accuracy": [...], "SET_per_class_examples": [...] from a
 * confusion matrix (classes, classes), [label][predicted] */
static void per_class_json(mr_json *j, const char *set, const double *confusion, int classes) {
    for (int what = 0; what < 2; what++) {
        char key[64];
        snprintf(key, sizeof key, "%s_per_class_%s", set, what ? "examples" : "accuracy");
        mr_json_key(j, key);
        mr_json_begin_array(j, MR_JSON_INLINE);
        for (int c = 0; c < classes; c++) {
            double n = 0.0;
            for (int q = 0; q < classes; q++)
                n += confusion[(size_t)c * (size_t)classes + (size_t)q];
            const double right = confusion[(size_t)c * (size_t)classes + (size_t)c];
            what ? mr_json_double(j, n, "%.0f")
                 : mr_json_double(j, n > 0 ? right / n : 0.0, "%.6f");
        }
        mr_json_end_array(j);
    }
}

/* The summary, via a temporary file renamed into place (MR_ERR_IO "PATH: cannot write"). */
static mr_status write_json_file(const char *path, const mr_progress *pg, const mr_fit_plan *plan,
                                 const mr_job *job, const mr_device_set *sets, const char *comm,
                                 const mr_model *m0, int epochs, int has_test, double test_loss,
                                 double test_acc, const mr_eval_detail *test, uint64_t weights_hash,
                                 mr_error *err) {
    mr_atomic_file af;
    MR_CHECK(mr_atomic_file_open(&af, path, err));
    mr_json j;
    mr_json_init(&j, af.f, 2);
    mr_json_begin_object(&j, MR_JSON_BLOCK);
    mr_json_key(&j, "epochs"), mr_json_int(&j, epochs);
    mr_json_key(&j, "train_samples_per_sec");
    mr_json_double(&j, pg->train_seconds > 0 ? pg->train_samples / pg->train_seconds : 0.0, "%.1f");
    if (pg->throughput != NULL) {
        /* --synthetic, --display-every: after the warm-up (throughput.h) */
        const mr_throughput_figures f = mr_throughput_get(pg->throughput);
        mr_json_key(&j, "images_per_sec");
        f.n > 0 ? mr_json_double(&j, f.total, "%.2f") : mr_json_null(&j);
        mr_json_key(&j, "images_per_sec_per_replica");
        f.n > 0 ? mr_json_double(&j, f.total / plan->replicas, "%.2f") : mr_json_null(&j);
        mr_json_key(&j, "images_per_sec_mean"), mr_json_double(&j, f.mean, "%.2f");
        mr_json_key(&j, "images_per_sec_stderr"), mr_json_double(&j, f.stderr_, "%.2f");
        mr_json_key(&j, "images_per_sec_updates"), mr_json_int(&j, f.n);
        mr_json_key(&j, "warmup_updates"), mr_json_int(&j, pg->throughput->warmup);
    }
    mr_json_key(&j, "test_loss");
    has_test ? mr_json_double(&j, test_loss, "%.6f") : mr_json_null(&j);
    /* a regression's accuracy fields hold Keras's mae metric (progress.h) */
    const char *metric = pg->regression ? "mae" : "accuracy";
    char key[32];
    snprintf(key, sizeof key, "test_%s", metric);
    mr_json_key(&j, key);
    has_test ? mr_json_double(&j, test_acc, "%.6f") : mr_json_null(&j);
    if (pg->top_k > 0) {
        mr_json_key(&j, "test_sparse_top_k_categorical_accuracy");
        has_test &&test ? mr_json_double(&j, test->top_k_accuracy, "%.6f") : mr_json_null(&j);
    }
    if (has_test && test && test->confusion)
        per_class_json(&j, "test", test->confusion, test->classes);
    mr_json_key(&j, "loss"), mr_json_double(&j, pg->last.loss, "%.6f");
    mr_json_key(&j, metric), mr_json_double(&j, pg->last.accuracy, "%.6f");
    if (pg->last.has_val) {
        mr_json_key(&j, "val_loss"), mr_json_double(&j, pg->last.val_loss, "%.6f");
        snprintf(key, sizeof key, "val_%s", metric);
        mr_json_key(&j, key), mr_json_double(&j, pg->last.val_accuracy, "%.6f");
        if (pg->top_k > 0)
            mr_json_key(&j, "val_sparse_top_k_categorical_accuracy"),
                mr_json_double(&j, pg->last.val_top_k, "%.6f");
        if (pg->last.val_confusion)
            per_class_json(&j, "val", pg->last.val_confusion, pg->last.classes);
    }
    /* the last epoch's time fractions (progress.h), null without one */
    mr_time_fractions tf;
    const int have_tf = mr_progress_time_fractions(&pg->last, &tf);
    const char *tf_keys[] = {"time_compute", "time_comm", "time_data", "time_other"};
    const double tf_v[] = {tf.compute, tf.comm, tf.data, tf.other};
    for (int i = 0; i < 4; i++) {
        mr_json_key(&j, tf_keys[i]);
        have_tf ? mr_json_double(&j, tf_v[i], "%.4f") : mr_json_null(&j);
    }
    mr_json_key(&j, "slowest_replica");
    have_tf && pg->last.slowest_replica >= 0 ? mr_json_int(&j, pg->last.slowest_replica)
                                             : mr_json_null(&j);
    mr_json_key(&j, "replicas"), mr_json_int(&j, plan->replicas);
    mr_json_key(&j, "processes"), mr_json_int(&j, job->size);
    mr_json_key(&j, "nodes"), mr_json_int(&j, job->n_nodes);
    mr_json_key(&j, "communicator"), mr_json_string(&j, comm);
    /* CPU replicas numbered across the job; GPUs by their ordinal on their node */
    mr_json_key(&j, "devices");
    mr_json_begin_array(&j, MR_JSON_INLINE);
    for (int p = 0; p < job->size; p++)
        for (int i = 0; i < job->replicas[p]; i++)
            mr_json_stringf(&j, "%s:%d", sets[p].kind,
                            mr_session_numbered_across_job(&sets[p]) ? job->first[p] + i
                                                                     : sets[p].ordinals[i]);
    mr_json_end_array(&j);
    mr_json_key(&j, "ranks");
    mr_json_begin_array(&j, MR_JSON_INLINE);
    for (int p = 0; p < job->size; p++) {
        mr_json_begin_object(&j, MR_JSON_INLINE);
        mr_json_key(&j, "rank"), mr_json_int(&j, p);
        mr_json_key(&j, "host"), mr_json_string(&j, job->hosts[p]);
        mr_json_key(&j, "replicas"), mr_json_int(&j, job->replicas[p]);
        mr_json_end_object(&j);
    }
    mr_json_end_array(&j);
    mr_json_key(&j, "global_batch"), mr_json_int(&j, plan->global_batch);
    mr_json_key(&j, "learning_rate"), mr_json_double(&j, plan->base_lr * plan->lr_factor, "%.8g");
    mr_json_key(&j, "params_hash"),
        mr_json_stringf(&j, "%016llx", (unsigned long long)weights_hash);
    /* what the kernels chose (a GPU's cuDNN algorithms) and whether that is
     * deterministic; {} and true where nothing was chosen (the CPU) */
    mr_json_key(&j, "kernels");
    mr_json_begin_object(&j, MR_JSON_INLINE);
    int all_det = 1;
    for (int i = 0; m0 != NULL && i < m0->n_layers; i++) {
        char buf[256];
        int det = mr_layer_describe(&m0->layers[i], buf, sizeof buf);
        if (det < 0) continue;
        mr_json_key(&j, m0->layers[i].name), mr_json_string(&j, buf);
        all_det &= det;
    }
    mr_json_end_object(&j);
    mr_json_key(&j, "deterministic"), mr_json_bool(&j, all_det);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    mr_json_key(&j, "max_rss_mb"), mr_json_double(&j, (double)ru.ru_maxrss / 1024.0, "%.1f");
    mr_json_key(&j, "train_seconds"), mr_json_double(&j, pg->train_seconds, "%.3f");
    mr_json_end_object(&j);
    if (mr_json_finish(&j) != 0) {
        mr_atomic_file_abort(&af);
        return mr_error_set(err, MR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    return mr_atomic_file_commit(&af, err);
}

/* Writes the JSON summary via a temporary file renamed into place. The
 * path was checked before training: a failure now is a failure while
 * running (exit 1), "--json PATH: cannot write: REASON". */
mr_status mr_train_write_json(const char *path, const mr_progress *pg, const mr_fit_plan *plan,
                              const mr_job *job, const mr_device_set *sets, const char *comm,
                              const mr_model *m0, int epochs, int has_test, double test_loss,
                              double test_acc, const mr_eval_detail *test, uint64_t weights_hash,
                              mr_error *err) {
    mr_error why = {0};
    mr_status st = write_json_file(path, pg, plan, job, sets, comm, m0, epochs, has_test, test_loss,
                                   test_acc, test, weights_hash, &why);
    if (st == MR_OK) return MR_OK;
    return mr_error_set(err, st == MR_ERR_IO ? MR_ERR_RUNTIME : st, "--json %s", why.msg);
}
