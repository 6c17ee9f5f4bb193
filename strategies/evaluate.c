/* evaluate.c: sharded evaluation (mr_strategy_evaluate*): each replica
 * evaluates its batches of the range, then one all-reduce of the sums as
 * doubles. Relies on the model's host staging for the batches and on the
 * communicator for the sums. */
#include <stdlib.h>
#include <string.h>

#include "strategies/strategy_impl.h"

/* Loss and correct sums over this replica's shards of [begin, begin+count),
 * then one all-reduce of the sums as doubles (with `detail`, also the
 * top-k count and, when detail->confusion is not NULL, the confusion
 * matrix: counts as doubles stay exact). */
mr_status strategy_evaluate_replica(replica *rep, const mr_dataset *ds, int64_t begin,
                                    int64_t count, double *loss, double *acc,
                                    mr_eval_detail *detail) {
    mr_strategy *s = rep->s;
    mr_model *m = &rep->model;
    int B = m->max_batch;
    /* the confusion matrix (k, k) only where asked for (and not for multi-hot labels, which
     * are no classes): it takes the predictions, a read of the outputs */
    const int k =
        detail && detail->confusion && mr_model_label_width(m) == 1 && !mr_model_regression(m)
            ? detail->classes
            : 0;
    double loss_sum = 0.0, correct = 0.0; /* correct: mr_model_eval_batch's metric numerator */
    int64_t in_top_k = 0;
    int64_t batches = (count + B - 1) / B;
    /* sums: loss, correct, in top k, then the confusion matrix */
    size_t nsum = 3 + (size_t)k * (size_t)k;
    double *sums = calloc(nsum, sizeof(double));
    int32_t *pred = detail ? malloc(sizeof(int32_t) * (size_t)B) : NULL;
    float *probs = detail && detail->on_probs
                       ? malloc(sizeof(float) * (size_t)B * (size_t)detail->classes)
                       : NULL;
    if (sums == NULL || (detail && pred == NULL) || (detail && detail->on_probs && !probs)) {
        free(sums), free(pred), free(probs);
        return mr_error_set(&rep->err, MR_ERR_NOMEM, "out of memory for the evaluation");
    }
    for (int64_t c = rep->g; c < batches; c += s->R) {
        int64_t start = begin + c * B;
        int n = (int)(start + B <= begin + count ? B : begin + count - start);
        for (int i = 0; i < n; i++)
            rep->rows[i] = start + i;
        mr_dataset_fill(ds, rep->rows, n, NULL, mr_model_input_host(m), rep->labels);
        mr_status st = mr_model_input_upload(m, n, &rep->err);
        if (st == MR_OK)
            st = mr_model_eval_batch(m, rep->labels, n, &loss_sum, &correct,
                                     detail ? &in_top_k : NULL, &rep->err);
        if (st == MR_OK && (k || probs)) st = mr_model_predictions(m, n, pred, probs, &rep->err);
        if (st != MR_OK) {
            free(sums), free(pred), free(probs);
            return st;
        }
        for (int i = 0; i < n && k; i++)
            sums[3 + (size_t)rep->labels[i] * (size_t)k + (size_t)pred[i]] += 1.0;
        if (probs) detail->on_probs(detail->user, start - begin, n, probs);
    }
    sums[0] = loss_sum, sums[1] = correct, sums[2] = (double)in_top_k;
    mr_status st = mr_comm_allreduce_sum_f64(s->comm, rep->r, sums, nsum, &rep->err);
    /* kernel_l2: Keras's evaluation loss adds the penalty (0 without) */
    double penalty = 0.0;
    if (st == MR_OK) st = mr_model_l2_penalty(m, &penalty, &rep->err);
    if (st == MR_OK) {
        *loss = count ? sums[0] / (double)count + penalty : 0.0;
        /* multi-label: correct counts matched outputs, k per example; regression: the mae */
        *acc = count ? sums[1] / ((double)count * mr_model_label_width(m)) : 0.0;
        if (detail && rep->r == 0) {
            detail->top_k_accuracy = count ? sums[2] / (double)count : 0.0;
            if (k) memcpy(detail->confusion, sums + 3, sizeof(double) * (nsum - 3));
        }
    }
    free(sums), free(pred), free(probs);
    return st;
}

static mr_status task_evaluate(replica *rep) {
    mr_strategy *s = rep->s;
    double loss, acc;
    MR_CHECK(strategy_evaluate_replica(rep, s->ds, s->eval_begin, s->eval_count, &loss, &acc,
                                       s->eval_detail));
    if (rep->r == 0) s->eval_loss = loss, s->eval_acc = acc;
    return MR_OK;
}

mr_status mr_strategy_evaluate(mr_strategy *s, const mr_dataset *ds, int64_t begin, int64_t count,
                               double *loss, double *accuracy, mr_error *err) {
    return mr_strategy_evaluate_detail(s, ds, begin, count, loss, accuracy, NULL, err);
}

mr_status mr_strategy_evaluate_detail(mr_strategy *s, const mr_dataset *ds, int64_t begin,
                                      int64_t count, double *loss, double *accuracy,
                                      mr_eval_detail *detail, mr_error *err) {
    s->ds = ds;
    s->eval_begin = begin;
    s->eval_count = count;
    s->eval_detail = detail;
    MR_CHECK(strategy_run_replicas(s, task_evaluate, err));
    *loss = s->eval_loss;
    *accuracy = s->eval_acc;
    return MR_OK;
}
