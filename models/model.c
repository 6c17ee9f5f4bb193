/* model.c: building, running and updating a model (see model.h). Runs on
 * the host for every device kind: it hands device memory to the layers'
 * kernels, the loss and the optimizer, and never reads it itself. */
#include "models/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/kernels.h"
#include "models/loss.h"
#include "runtime/elementwise.h"
#include "runtime/device_trace.h"
#include "runtime/trace.h"

/* Floats that one training pass may touch (weights and their gradients,
 * activations, input, the two gradient buffers): 5 MiB. fashion_cnn.cfg (71,098 floats a row) then
 * runs batch 32 as two passes of 16; measured there, 2 replicas on 2 cores, the median of 5 epochs
 * each: 16 rows 1.87x one unsplit replica, 12 rows 1.79x, 32 rows (no split) 1.82x
 * (docs/performance.md, "Weak scaling"). */
#define MR_PASS_FLOATS (5 << 18)

static mr_dfloat *alloc_floats(mr_model *m, int64_t n) {
    return mr_backend_alloc_floats(m->be, (size_t)(n > 0 ? n : 1));
}

static void free_floats(mr_model *m, mr_dfloat **p) {
    mr_backend_free(m->be, *p);
    *p = NULL;
}

/* The layer whose output layer j takes (its first input): -1 for the
 * model's input. */
static int producer(const mr_model *m, int j) {
    return m->graph ? m->src[j][0] : j - 1;
}

/* Fuses each ReLU [activation] into the layer before it where that layer's
 * kernels apply it in their own pass (mr_layer_kernels.fuses_relu:
 * BatchNormalization and Add on the CPU), saving the activation's passes
 * over memory: forward reads and writes the output once, backward masks dy
 * as it reads it. Only where the activation is the one consumer of that
 * output (another would need it before the ReLU). The per-element math is
 * the activation kernel's, so the bits are those of the unfused model
 * (tests/test_model.c). A chain's layer before the activation is its
 * producer; a view (Flatten) never fuses. */
static void fuse_relus(mr_model *m) {
    for (int j = 0; j < m->n_layers; j++) {
        mr_layer *a = &m->layers[j];
        const int i = producer(m, j);
        if (a->cfg->kind != MR_LAYER_ACTIVATION || a->cfg->activation != MR_ACTIVATION_RELU ||
            a->logits_out || i < 0)
            continue;
        mr_layer *p = &m->layers[i];
        if (p->kern == NULL || !p->kern->fuses_relu || p->relu_fused || p->ops->view) continue;
        int consumers = 1; /* a chain's layer feeds the next one only */
        if (m->graph) {
            consumers = 0;
            for (int k = i + 1; k < m->n_layers; k++)
                consumers += (m->src[k][0] == i) + (m->src[k][1] == i);
        }
        if (consumers != 1) continue;
        p->relu_fused = 1;
        a->fused = 1;
    }
}

mr_status mr_model_init(mr_model *m, mr_backend *be, const mr_config *cfg, int max_batch,
                        size_t grads_extra, mr_error *err) {
    memset(m, 0, sizeof *m);
    m->cfg = cfg;
    m->be = be;
    m->max_batch = max_batch;
    m->grads_extra = grads_extra;
    m->opt = mr_optimizer_from_config(&cfg->net);
    const mr_layer_cfg *in = &cfg->layers[0];
    MR_ASSERT(in->kind == MR_LAYER_INPUT);
    m->in_shape.rank = in->shape_rank;
    for (int i = 0; i < in->shape_rank; i++)
        m->in_shape.d[i] = in->shape[i];
    m->in_size = mr_shape_size(m->in_shape);

    int counts[MR_LAYER_KIND_COUNT] = {0};
    mr_shape cur = m->in_shape;
    size_t scratch = 0;
    m->graph = cfg->graph;
    for (int i = 1; i < cfg->n_layers; i++) {
        mr_layer *l = &m->layers[m->n_layers++];
        l->cfg = &cfg->layers[i];
        l->ops = mr_layer_ops_for(l->cfg->kind);
        l->index = i;
        l->in = cur;
        if (m->graph) { /* config index j is model layer j - 1; 0, [input], is -1 */
            int *src = m->src[i - 1];
            src[0] = l->cfg->src[0] - 1;
            src[1] = l->cfg->src[1] >= 0 ? l->cfg->src[1] - 1 : -1;
            l->in = src[0] < 0 ? m->in_shape : m->layers[src[0]].out;
            if (mr_layer_kind_merges(l->cfg->kind))
                l->in2 = src[1] < 0 ? m->in_shape : m->layers[src[1]].out;
        }
        /* as Keras, a name given does not use up an automatic one */
        int c = l->cfg->name[0] ? -1 : counts[l->cfg->kind]++;
        if (c < 0)
            snprintf(l->name, sizeof l->name, "%s", l->cfg->name);
        else if (c == 0)
            snprintf(l->name, sizeof l->name, "%s", l->ops->keras_name);
        else
            snprintf(l->name, sizeof l->name, "%s_%d", l->ops->keras_name, c);
        mr_status st = mr_layer_setup(l, be, max_batch, cfg->path, err);
        if (st != MR_OK) {
            mr_model_free(m);
            return st;
        }
        if (mr_shape_size(l->out) <= 0) {
            mr_model_free(m);
            return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [%s] would output an empty shape",
                                cfg->path, l->cfg->line, mr_layer_kind_name(l->cfg->kind));
        }
        if (l->scratch_floats > scratch) scratch = l->scratch_floats;
        cur = l->out;
    }
    /* names given with name = may not take an automatic one (Keras refuses
     * two layers of one name, and checkpoints store weights by name) */
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->n_layers; j++)
            if (j != i && m->layers[i].cfg->name[0] &&
                strcmp(m->layers[i].name, m->layers[j].name) == 0) {
                int line = m->layers[i].cfg->line;
                mr_layer_kind k = m->layers[j].cfg->kind;
                int other = m->layers[j].cfg->line;
                char name[MR_NAME_MAX];
                snprintf(name, sizeof name, "%s", m->layers[i].name);
                mr_model_free(m);
                return mr_error_set(err, MR_ERR_CONFIG,
                                    "%s:%d: name = %s is the automatic name of the [%s] of line "
                                    "%d; choose another",
                                    cfg->path, line, name, mr_layer_kind_name(k), other);
            }
    mr_layer *last = &m->layers[m->n_layers - 1];
    m->out_size = mr_shape_size(last->out);
    if (last->out.rank != 1) {
        int line = last->cfg->line;
        mr_model_free(m);
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: the last layer must output class scores (a flat vector); "
                            "add [flatten] and a [dense] layer",
                            cfg->path, line);
    }
    /* softmax + cross-entropy are computed together from logits (stable) */
    int last_is_softmax =
        (last->cfg->kind == MR_LAYER_DENSE || last->cfg->kind == MR_LAYER_ACTIVATION ||
         last->cfg->kind == MR_LAYER_CONV2D) &&
        last->cfg->activation == MR_ACTIVATION_SOFTMAX;
    /* from_logits: the outputs are logits already (a linear or other last
     * activation); softmax probabilities are not logits (Keras would take
     * them for logits, a softmax applied twice), and a linear last layer
     * read as probabilities trains nowhere (issue 21): both are refused */
    const int bce = cfg->net.loss == MR_LOSS_BINARY_CROSSENTROPY;
    const int ce = mr_loss_fuses_softmax(cfg->net.loss) || bce;
    const int last_is_sigmoid =
        (last->cfg->kind == MR_LAYER_DENSE || last->cfg->kind == MR_LAYER_ACTIVATION ||
         last->cfg->kind == MR_LAYER_CONV2D) &&
        last->cfg->activation == MR_ACTIVATION_SIGMOID;
    /* binary_crossentropy: one output, the probability of class 1 (a sigmoid) or its logit; a
     * softmax over one output is always 1, and a sigmoid's output is no logit */
    /* k > 1 outputs: multi-label, k independent sigmoids and multi-hot labels (batch, k); Keras
     * has no class_weight for those (a class per output, not per example) */
    if (bce && (last_is_softmax || (cfg->net.from_logits && last_is_sigmoid) ||
                (m->out_size > 1 && cfg->net.class_weight.n > 0))) {
        int line = last->cfg->line;
        const char *why = last_is_softmax ? "needs activation = sigmoid on the last layer, not "
                                            "softmax"
                          : m->out_size > 1 && cfg->net.class_weight.n > 0
                              ? "with more than one output (multi-label) takes no class_weight"
                              : "with from_logits = 1 needs a linear last layer, not a sigmoid "
                                "(drop from_logits)";
        mr_model_free(m);
        return mr_error_set(err, MR_ERR_CONFIG, "%s:%d: [net] loss = binary_crossentropy %s",
                            cfg->path, line, why);
    }
    if (!ce && (cfg->net.from_logits || cfg->net.label_smoothing > 0.0f)) {
        mr_model_free(m);
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: [net] %s applies to the cross-entropy losses, not to loss = mse",
                            cfg->path, cfg->net.from_logits ? "from_logits" : "label_smoothing");
    }
    if (cfg->net.label_smoothing > 0.0f &&
        cfg->net.loss == MR_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY) {
        mr_model_free(m);
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s: [net] label_smoothing needs loss = categorical_crossentropy "
                            "(Keras's SparseCategoricalCrossentropy has no label smoothing)",
                            cfg->path);
    }
    if (ce && cfg->net.from_logits && last_is_softmax) {
        mr_model_free(m);
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [net] from_logits = 1, but the last layer is a softmax: its "
                            "outputs are probabilities (drop from_logits, or make it linear)",
                            cfg->path, last->cfg->line);
    }
    const int last_is_linear =
        last->cfg->activation == MR_ACTIVATION_LINEAR &&
        (last->cfg->kind == MR_LAYER_DENSE || last->cfg->kind == MR_LAYER_CONV2D ||
         last->cfg->kind == MR_LAYER_ACTIVATION);
    if (ce && !cfg->net.from_logits && last_is_linear) {
        mr_model_free(m);
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: the last layer is linear and the loss a cross-entropy: set "
                            "[net] from_logits = 1 (its outputs are logits) or activation = %s",
                            cfg->path, last->cfg->line, bce ? "sigmoid" : "softmax");
    }
    /* [net] top_k: a label is always among k or more of k classes */
    if (cfg->net.top_k >= (int)m->out_size) {
        mr_model_free(m);
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [net] top_k = %d must be below the %d classes the last layer "
                            "outputs",
                            cfg->path, last->cfg->line, cfg->net.top_k, (int)m->out_size);
    }
    /* class_weight: one weight per class the last layer outputs (Keras
     * raises on a class without one); binary_crossentropy's one output has classes 0 and 1 */
    if (cfg->net.class_weight.n > 0 && cfg->net.class_weight.n != mr_model_classes(m)) {
        int line = last->cfg->line;
        int given = cfg->net.class_weight.n;
        mr_model_free(m);
        return mr_error_set(err, MR_ERR_CONFIG,
                            "%s:%d: [net] class_weight has %d weights, but the last layer outputs "
                            "%d classes: give one weight per class",
                            cfg->path, line, given, mr_model_classes(m));
    }
    if (ce && (last_is_softmax || cfg->net.from_logits)) {
        last->logits_out = last_is_softmax;
        m->fused_softmax = 1;
    }
    /* a final sigmoid is fused with binary_crossentropy as the softmax is with the others: Keras
     * 3 computes the loss from the sigmoid's input (loss_row.h), so the fused form is its numbers
     */
    if (bce && last_is_sigmoid) {
        last->logits_out = 1;
        m->fused_softmax = 1;
    }

    fuse_relus(m);
    /* weights: trainable in reverse layer order into params, the rest into state */
    int64_t np = 0, ns = 0, biggest = 0;
    for (int i = m->n_layers - 1; i >= 0; i--) {
        m->param_offset[i] = np;
        for (int w = 0; w < m->layers[i].n_weights; w++) {
            mr_weight *wt = &m->layers[i].w[w];
            wt->offset = wt->trainable ? np : ns;
            if (wt->trainable)
                np += wt->size;
            else
                ns += wt->size;
            if (wt->size > biggest) biggest = wt->size;
        }
    }
    m->n_params = np;
    m->n_state = ns;
    m->params = alloc_floats(m, np);
    m->grads = alloc_floats(m, np + (int64_t)grads_extra);
    int nslots = mr_optimizer_slot_count(&m->opt);
    for (int s = 0; s < nslots; s++)
        m->slots[s] = alloc_floats(m, np);
    m->state = ns ? alloc_floats(m, ns) : NULL;
    /* the input: one buffer filled in place, or two used in turn (model.h) */
    const int n_inputs = be->host_memory ? 1 : 2;
    for (int i = 0; i < n_inputs; i++) {
        m->inputs[i] = alloc_floats(m, (int64_t)max_batch * m->in_size);
        if (!be->host_memory) {
            /* a batch, or its example ids (mr_model_input_synthetic: 2 floats'
             * bytes a row, more than a batch of one-feature rows) */
            const int64_t row = m->in_size > 2 ? m->in_size : 2;
            m->input_host[i] =
                mr_backend_alloc_host(be, sizeof(float) * (size_t)(max_batch * row + 1));
            /* here, not at the first synthetic batch: the allocation's zeroing
             * is queued on the compute stream, and an upload's copy waits
             * only for what was queued before the previous upload */
            m->input_rows[i] = mr_backend_alloc(be, sizeof(int64_t) * (size_t)max_batch);
        }
    }
    m->input = m->inputs[0];
    m->next_input = 0;
    int64_t widest = m->in_size;
    for (int i = 0; i < m->n_layers; i++) {
        int64_t o = mr_shape_size(m->layers[i].out);
        if (o > widest) widest = o;
        /* a view's y is x's buffer in a chain: nothing to allocate or copy */
        if (m->layers[i].ops->view && !m->graph) {
            m->acts[i] = i > 0 ? m->acts[i - 1] : m->input;
            continue;
        }
        if (m->layers[i].fused) { /* a ReLU in its producer's pass: that layer's buffers */
            m->acts[i] = m->acts[producer(m, i)];
            m->dacts[i] = m->dacts[producer(m, i)];
            continue;
        }
        m->acts[i] = alloc_floats(m, (int64_t)max_batch * o);
        if (m->acts[i] == NULL) break;
        if (m->graph && (m->dacts[i] = alloc_floats(m, (int64_t)max_batch * o)) == NULL) break;
    }
    m->dbuf[0] = alloc_floats(m, (int64_t)max_batch * widest);
    m->dbuf[1] = alloc_floats(m, (int64_t)max_batch * widest);
    mr_status sst = mr_backend_reserve_scratch(be, scratch, NULL);
    /* host staging: a batch of output, or the largest weight (the input
     * has its own: input_host) */
    if (!be->host_memory) {
        int64_t h = (int64_t)max_batch * m->out_size;
        if (h < (int64_t)grads_extra) h = (int64_t)grads_extra; /* mr_model_read_extra */
        m->host_floats = (size_t)(h > biggest ? h : biggest);
        m->host = mr_backend_alloc_host(be, sizeof(float) * (m->host_floats ? m->host_floats : 1));
    }
    int ok = m->params && m->grads && m->input && m->dbuf[0] && m->dbuf[1] && sst == MR_OK &&
             (ns == 0 || m->state) && (be->host_memory || m->host);
    for (int i = 0; i < n_inputs; i++)
        ok = ok && m->inputs[i] && (be->host_memory || (m->input_host[i] && m->input_rows[i]));
    for (int s = 0; s < nslots; s++)
        ok = ok && m->slots[s];
    for (int i = 0; i < m->n_layers; i++)
        ok = ok && m->acts[i] && (!m->graph || m->dacts[i]);
    if (!ok) {
        /* what was asked for, and what the device had: a GPU's memory is
         * shared with the other contexts and processes on it */
        int64_t want = np * (2 + nslots) + (int64_t)grads_extra + ns + 2 * max_batch * widest +
                       (int64_t)scratch + n_inputs * (int64_t)max_batch * m->in_size;
        for (int i = 0; i < m->n_layers; i++)
            if ((!m->layers[i].ops->view || m->graph) && !m->layers[i].fused)
                want += (m->graph ? 2 : 1) * max_batch * mr_shape_size(m->layers[i].out);
        mr_model_free(m);
        char dev[32], mem[96] = "";
        size_t used = 0, total = 0;
        mr_backend_format(be, dev, sizeof dev);
        if (mr_backend_memory(be, &used, &total, NULL) == MR_OK && total > 0)
            snprintf(mem, sizeof mem, "; %.1f MiB of %.1f MiB free",
                     (double)(total - used) / 1048576.0, (double)total / 1048576.0);
        return mr_error_set(err, MR_ERR_NOMEM,
                            "%s: %s: out of memory for the model at batch %d (parameters, "
                            "optimizer slots, activations and scratch: %.1f MiB%s)",
                            cfg->path, dev, max_batch, (double)want * 4.0 / 1048576.0, mem);
    }
    const int ncw = cfg->net.class_weight.n;
    if (ncw > 0) {
        m->class_weight = alloc_floats(m, ncw);
        mr_status cst =
            m->class_weight
                ? mr_backend_to_device(be, m->class_weight, cfg->net.class_weight.v,
                                       sizeof(float) * (size_t)ncw, err)
                : mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory for class_weight", cfg->path);
        if (cst != MR_OK) {
            mr_model_free(m);
            return cst;
        }
    }
    for (int i = m->n_layers - 1; i >= 0; i--) {
        mr_layer *l = &m->layers[i];
        for (int w = 0; w < l->n_weights; w++) {
            mr_weight *wt = &l->w[w];
            if (wt->trainable) {
                wt->data = mr_dfloat_at(m->params, wt->offset);
                wt->grad = mr_dfloat_at(m->grads, wt->offset);
            } else {
                wt->data = mr_dfloat_at(m->state, wt->offset);
            }
        }
    }
    m->run.be = be;
    m->run.scratch = mr_backend_scratch(be);
    /* training passes (model.h, pass_rows): every pass reads the weights and
     * adds into their gradients, and each row touches per_row floats */
    int64_t per_row = m->in_size + 2 * widest;
    int whole = 0;
    for (int i = 0; i < m->n_layers; i++) {
        if ((!m->layers[i].ops->view || m->graph) && !m->layers[i].fused)    /* (their own) */
            per_row += (m->graph ? 2 : 1) * mr_shape_size(m->layers[i].out); /* graph: dacts */
        whole |= m->layers[i].ops->whole_batch;
    }
    int64_t c = (MR_PASS_FLOATS - 2 * np) / per_row; /* < 1: big weights, one pass */
    if (c >= 8) c -= c % 8;                          /* GEMM-friendly row counts */
    if (c < 1) c = max_batch;
    /* the budget is a CPU cache's: a GPU runs the whole batch at once */
    m->pass_rows = whole || c > max_batch || !be->ops->cache_passes ? max_batch : (int)c;
    return MR_OK;
}

void mr_model_free(mr_model *m) {
    if (m->be == NULL) return;
    mr_device_trace_destroy(m->dtrace);
    m->dtrace = NULL;
    for (int i = 0; i < m->n_layers; i++) {
        mr_layer_destroy(&m->layers[i]);
        if ((m->layers[i].ops && m->layers[i].ops->view && !m->graph) || m->layers[i].fused) {
            m->acts[i] = NULL; /* borrowed from the layer before */
            m->dacts[i] = NULL;
        } else {
            free_floats(m, &m->acts[i]);
            free_floats(m, &m->dacts[i]);
        }
    }
    free_floats(m, &m->params);
    free_floats(m, &m->grads);
    free_floats(m, &m->slots[0]);
    free_floats(m, &m->slots[1]);
    free_floats(m, &m->state);
    free_floats(m, &m->class_weight);
    for (int i = 0; i < 2; i++) {
        free_floats(m, &m->inputs[i]);
        mr_backend_free_host(m->be, m->input_host[i]);
        m->input_host[i] = NULL;
        mr_backend_free(m->be, m->input_rows[i]);
        m->input_rows[i] = NULL;
    }
    m->input = NULL;
    free_floats(m, &m->dbuf[0]);
    free_floats(m, &m->dbuf[1]);
    mr_backend_free_host(m->be, m->host);
    m->host = NULL;
    m->be = NULL;
}

mr_status mr_model_init_weights(mr_model *m, uint64_t seed, mr_error *err) {
    for (int i = 0; i < m->n_layers; i++)
        MR_CHECK(mr_layer_init(&m->layers[i], seed, m->host, err));
    int nslots = mr_optimizer_slot_count(&m->opt);
    for (int s = 0; s < nslots; s++)
        MR_CHECK(mr_backend_zero(m->be, m->slots[s], sizeof(float) * (size_t)m->n_params, err));
    return MR_OK;
}

int mr_model_label_width(const mr_model *m) {
    return m->cfg->net.loss == MR_LOSS_BINARY_CROSSENTROPY && m->out_size > 1 ? (int)m->out_size
                                                                              : 1;
}

int mr_model_classes(const mr_model *m) {
    /* binary_crossentropy: one output, two classes (labels 0 and 1) */
    if (m->cfg->net.loss == MR_LOSS_BINARY_CROSSENTROPY && m->out_size == 1) return 2;
    return (int)m->out_size;
}

float *mr_model_input_host(mr_model *m) {
    return m->be->host_memory ? mr_backend_host_view(m->be, m->input)
                              : m->input_host[m->next_input];
}

mr_status mr_model_input_upload(mr_model *m, int batch, mr_error *err) {
    MR_ASSERT(batch >= 0 && batch <= m->max_batch);
    if (m->be->host_memory) return MR_OK; /* filled in place */
    const int i = m->next_input;
    MR_CHECK(mr_backend_upload(m->be, m->inputs[i], m->input_host[i],
                               sizeof(float) * (size_t)batch * (size_t)m->in_size, err));
    m->input = m->inputs[i];
    m->next_input = i ^ 1;
    return MR_OK;
}

mr_status mr_model_input_synthetic(mr_model *m, const int64_t *rows, int batch, uint32_t k0,
                                   uint32_t k1, float scale, mr_error *err) {
    MR_ASSERT(batch >= 0 && batch <= m->max_batch && !m->be->host_memory);
    const int i = m->next_input;
    /* the ids through the pinned buffer the batch would take (free now:
     * the upload before the last one, which read it, is done) */
    memcpy(m->input_host[i], rows, sizeof(int64_t) * (size_t)batch);
    MR_CHECK(mr_backend_upload(m->be, m->input_rows[i], m->input_host[i],
                               sizeof(int64_t) * (size_t)batch, err));
    MR_CHECK(mr_kernels_for(m->be)->input->synthetic(m->be, m->inputs[i], m->input_rows[i], batch,
                                                     m->in_size, k0, k1, scale, err));
    m->input = m->inputs[i];
    m->next_input = i ^ 1;
    return MR_OK;
}

/* --trace's span of work: host time (the lane), and on a GPU device time
 * between marks (runtime/device_trace.h); both off: NULL checks. */
typedef struct span {
    double t0;
    int mark;
} span;

static span span_begin(mr_model *m) {
    return (span){mr_trace_now(m->trace), mr_device_trace_begin(m->dtrace)};
}

static void span_end(mr_model *m, const char *cat, const char *name, span s) {
    mr_trace_end(m->trace, cat, name, s.t0);
    mr_device_trace_end(m->dtrace, cat, name, s.mark);
}

/* The output of layer i of a graph, or the model's input `in` (i = -1). */
static mr_dfloat *graph_act(mr_model *m, const mr_dfloat *in, int i) {
    return i < 0 ? (mr_dfloat *)in : m->acts[i];
}

/* Runs the layers on `in` (batch rows, in_size each) into m->acts. */
static mr_status forward_rows(mr_model *m, const mr_dfloat *in, int batch, const mr_dfloat **out) {
    if (m->graph) {
        for (int i = 0; i < m->n_layers; i++) {
            mr_layer *l = &m->layers[i];
            if (mr_layer_kind_merges(l->cfg->kind)) l->x2 = graph_act(m, in, m->src[i][1]);
            const span sp = span_begin(m);
            if (!l->fused) /* (a fused ReLU ran in its producer's pass) */
                MR_CHECK(mr_layer_forward(l, &m->run, batch, graph_act(m, in, m->src[i][0]),
                                          m->acts[i]));
            span_end(m, "forward", l->name, sp);
        }
        *out = m->acts[m->n_layers - 1];
        return MR_OK;
    }
    const mr_dfloat *x = in;
    for (int i = 0; i < m->n_layers; i++) {
        const span sp = span_begin(m);
        if (m->layers[i].ops->view || m->layers[i].fused) {
            /* a view passes its input's buffer on; a fused ReLU ran in
             * the pass that wrote it */
            m->acts[i] = (mr_dfloat *)x;
        } else {
            MR_CHECK(mr_layer_forward(&m->layers[i], &m->run, batch, x, m->acts[i]));
            x = m->acts[i];
        }
        /* a view too, so a trace has each layer once per pass */
        span_end(m, "forward", m->layers[i].name, sp);
    }
    *out = x;
    return MR_OK;
}

mr_status mr_model_forward(mr_model *m, int batch, int training, mr_error *err) {
    MR_ASSERT(batch >= 0 && batch <= m->max_batch); /* 0: an empty shard (see strategy.c) */
    m->run.training = training;
    m->run.err = err;
    const mr_dfloat *out;
    return forward_rows(m, m->input, batch, &out);
}

const mr_dfloat *mr_model_output(const mr_model *m) {
    return m->acts[m->n_layers - 1];
}

/* dst (batch, shape s) += add: the [add] kernels of the device, on a
 * layer made here (they keep no state), y = x + x2 in place. */
static mr_status add_into(mr_model *m, mr_dfloat *dst, const mr_dfloat *add, mr_shape s,
                          int batch) {
    mr_layer sum;
    memset(&sum, 0, sizeof sum);
    sum.ops = &mr_add_ops;
    sum.kern = mr_kernels_for(m->be)->layer[MR_LAYER_ADD];
    sum.be = m->be;
    sum.in = sum.in2 = sum.out = s;
    sum.x2 = add;
    return mr_layer_forward(&sum, &m->run, batch, dst, dst);
}

/* Backward of a graph from the loss's gradient in dacts[last]: in reverse
 * order, each layer's backward writes the gradient of an input straight
 * into that input's dacts where nothing is there yet this pass, else into
 * dbuf[k], which is then added to it (an output feeding several layers
 * gets the sum). done[j]: dacts[j] holds a gradient. */
static mr_status graph_backward(mr_model *m, const mr_dfloat *in, int batch,
                                void (*after_layer)(void *ctx, int64_t ready), void *ctx) {
    unsigned char done[MR_MAX_LAYERS] = {0};
    done[m->n_layers - 1] = 1;
    for (int i = m->n_layers - 1; i >= 0; i--) {
        mr_layer *l = &m->layers[i];
        MR_ASSERT(done[i]); /* config.c: every output but the last feeds a later layer */
        if (l->fused) {
            /* its gradient is its producer's buffer already (the one
             * consumer of it), which masks it in its own backward */
            const span sp = span_begin(m);
            done[m->src[i][0]] = 1;
            span_end(m, "backward", l->name, sp);
            if (after_layer) after_layer(ctx, i > 0 ? m->param_offset[i - 1] : m->n_params);
            continue;
        }
        const int n_in = mr_layer_kind_merges(l->cfg->kind) ? 2 : 1;
        mr_dfloat *dx[2] = {NULL, NULL};
        int add_later[2] = {0, 0};
        for (int k = 0; k < n_in; k++) {
            int s = m->src[i][k];
            if (s < 0) continue; /* the model's input: no gradient */
            if (!done[s]) {
                dx[k] = m->dacts[s];
                done[s] = 1;
            } else {
                dx[k] = m->dbuf[k];
                add_later[k] = 1;
            }
        }
        if (n_in == 2) {
            l->x2 = graph_act(m, in, m->src[i][1]);
            l->dx2 = dx[1];
        }
        const span sp = span_begin(m);
        MR_CHECK(mr_layer_backward(l, &m->run, batch, graph_act(m, in, m->src[i][0]), m->acts[i],
                                   m->dacts[i], dx[0]));
        for (int k = 0; k < n_in; k++)
            if (add_later[k]) {
                int s = m->src[i][k];
                MR_CHECK(add_into(m, m->dacts[s], dx[k], m->layers[s].out, batch));
            }
        span_end(m, "backward", l->name, sp);
        if (after_layer) after_layer(ctx, i > 0 ? m->param_offset[i - 1] : m->n_params);
    }
    return MR_OK;
}

/* Forward, loss and backward of `batch` rows starting at `in` (labels
 * alongside); after_layer only when this pass completes the gradients. */
static mr_status train_rows(mr_model *m, const mr_dfloat *in, const int32_t *labels, int batch,
                            float norm, double *loss_sum, int64_t *correct,
                            void (*after_layer)(void *ctx, int64_t ready), void *ctx) {
    const mr_dfloat *out;
    MR_CHECK(forward_rows(m, in, batch, &out));
    int k = (int)m->out_size;
    int cur = 0; /* dy lives in dbuf[cur], dx goes to the other one */
    mr_dfloat *dy = m->graph ? m->dacts[m->n_layers - 1] : m->dbuf[cur];
    const span sl = span_begin(m);
    MR_CHECK(mr_loss_compute(m->be, m->cfg->net.loss, m->fused_softmax, m->cfg->net.label_smoothing,
                             out, labels, m->class_weight, batch, k, norm, dy, loss_sum, correct, 0,
                             NULL, m->run.err));
    span_end(m, "loss", "loss", sl);
    if (m->graph) return graph_backward(m, in, batch, after_layer, ctx);
    for (int i = m->n_layers - 1; i >= 0; i--) {
        mr_layer *l = &m->layers[i];
        const span sp = span_begin(m);
        /* a view's dx is dy under the input's shape; a fused ReLU's dy is
         * masked by its producer's backward */
        if (!l->ops->view && !l->fused) {
            const mr_dfloat *x = i > 0 ? m->acts[i - 1] : in;
            mr_dfloat *dx = i > 0 ? m->dbuf[cur ^ 1] : NULL;
            MR_CHECK(mr_layer_backward(l, &m->run, batch, x, m->acts[i], dy, dx));
            dy = dx;
            cur ^= 1;
        }
        span_end(m, "backward", l->name, sp);
        if (after_layer) after_layer(ctx, i > 0 ? m->param_offset[i - 1] : m->n_params);
    }
    return MR_OK;
}

mr_status mr_model_train_batch(mr_model *m, const int32_t *labels, int batch, float norm,
                               double *loss_sum, int64_t *correct,
                               void (*after_layer)(void *ctx, int64_t ready), void *ctx,
                               mr_error *err) {
    MR_ASSERT(batch >= 0 && batch <= m->max_batch);
    m->run.err = err;
    m->run.training = 1;
    /* In passes of m->pass_rows rows, each reusing rows [0, pass_rows) of the
     * activation buffers: the gradients add up across passes (the layers'
     * contract), and one pass's activations stay in cache from its forward
     * to its backward (model.h, pass_rows). */
    const int rows = m->pass_rows > 0 && m->pass_rows < batch ? m->pass_rows : batch;
    const int64_t base = m->run.sample_base;
    mr_status st = MR_OK;
    int c0 = 0;
    do {
        int n = batch - c0 < rows ? batch - c0 : rows;
        m->run.sample_base = base + c0; /* dropout masks follow the sample */
        st = train_rows(m, mr_dfloat_at_c(m->input, (int64_t)c0 * m->in_size),
                        labels + (int64_t)c0 * mr_model_label_width(m), n, norm, loss_sum, correct,
                        c0 + n >= batch ? after_layer : NULL, ctx);
        c0 += n;
    } while (st == MR_OK && c0 < batch);
    m->run.sample_base = base;
    return st;
}

mr_status mr_model_eval_batch(mr_model *m, const int32_t *labels, int batch, double *loss_sum,
                              int64_t *correct, int64_t *in_top_k, mr_error *err) {
    MR_CHECK(mr_model_forward(m, batch, 0, err));
    return mr_loss_compute(m->be, m->cfg->net.loss, m->fused_softmax, m->cfg->net.label_smoothing,
                           mr_model_output(m), labels, NULL, batch, (int)m->out_size, 1.0f, NULL,
                           loss_sum, correct, in_top_k ? m->cfg->net.top_k : 0, in_top_k, err);
}

mr_status mr_model_predictions(const mr_model *m, int batch, int32_t *pred, float *probs,
                               mr_error *err) {
    const int k = (int)m->out_size;
    const float *out;
    MR_CHECK(mr_model_read(m, mr_model_output(m), (size_t)batch * (size_t)k, &out, err));
    if (m->cfg->net.loss == MR_LOSS_BINARY_CROSSENTROPY && k > 1) {
        /* multi-label: k independent sigmoids, probs (batch, k) = sigmoid(z) when fused, else z;
         * pred, a class per example, has no meaning here: the first output above 0.5 (or 0) */
        for (int64_t b = 0; b < batch; b++) {
            pred[b] = 0;
            for (int j = k - 1; j >= 0; j--) {
                const float z = out[b * k + j];
                if (m->fused_softmax ? z > 0.0f : z > 0.5f) pred[b] = j;
                if (probs)
                    probs[b * k + j] =
                        m->fused_softmax ? (float)(1.0 / (1.0 + exp(-(double)z))) : z;
            }
        }
        return MR_OK;
    }
    if (m->cfg->net.loss == MR_LOSS_BINARY_CROSSENTROPY) {
        /* one output z (batch, 1): class 1 when p > 0.5 (binary_accuracy's threshold); probs
         * (batch, 2) = (1 - p, p), p = sigmoid(z) when fused, else z */
        for (int b = 0; b < batch; b++) {
            const float z = out[b];
            const double p = m->fused_softmax ? 1.0 / (1.0 + exp(-(double)z)) : (double)z;
            pred[b] = m->fused_softmax ? z > 0.0f : z > 0.5f;
            if (probs) probs[2 * b] = (float)(1.0 - p), probs[2 * b + 1] = (float)p;
        }
        return MR_OK;
    }
    for (int b = 0; b < batch; b++) {
        const float *z = out + (int64_t)b * k;
        int best = 0;
        for (int j = 1; j < k; j++)
            if (z[j] > z[best]) best = j;
        pred[b] = best;
        if (probs == NULL) continue;
        float *p = probs + (int64_t)b * k;
        if (!m->fused_softmax) {
            memcpy(p, z, sizeof(float) * (size_t)k);
            continue;
        }
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += exp((double)z[j] - (double)z[best]);
        for (int j = 0; j < k; j++)
            p[j] = (float)(exp((double)z[j] - (double)z[best]) / sum);
    }
    return MR_OK;
}

mr_status mr_model_zero_grads(mr_model *m, mr_error *err) {
    return mr_backend_zero(m->be, m->grads,
                           sizeof(float) * (size_t)(m->n_params + (int64_t)m->grads_extra), err);
}

/* The L2 factor of layer l's kernel (its weight 0): kernel_l2, or 0 where
 * the layer has no trainable kernel or no penalty. */
static float kernel_l2(const mr_layer *l) {
    const int kernel = l->n_weights > 0 && l->w[0].trainable && strcmp(l->w[0].name, "kernel") == 0;
    return kernel ? l->cfg->kernel_l2 : 0.0f;
}

mr_status mr_model_l2_penalty(const mr_model *m, double *penalty, mr_error *err) {
    *penalty = 0.0;
    for (int i = 0; i < m->n_layers; i++) {
        const float l2 = kernel_l2(&m->layers[i]);
        if (l2 <= 0.0f) continue;
        const mr_weight *wt = &m->layers[i].w[0];
        double p;
        MR_CHECK(mr_optimizer_l2(m->be, wt->data, NULL, (size_t)wt->size, l2, &p, err));
        *penalty += p;
    }
    return MR_OK;
}

mr_status mr_model_apply_update(mr_model *m, float lr, int64_t t, int *bad, mr_error *err) {
    /* the regularizers' gradients belong to the loss's: before clipping */
    for (int i = 0; i < m->n_layers; i++) {
        const float l2 = kernel_l2(&m->layers[i]);
        if (l2 <= 0.0f) continue;
        const mr_weight *wt = &m->layers[i].w[0];
        MR_CHECK(mr_optimizer_l2(m->be, wt->data, wt->grad, (size_t)wt->size, l2, NULL, err));
    }
    /* Keras's norm clipping: all gradients together, or weight by weight
     * (each weight's gradients are contiguous in grads) */
    if (m->opt.global_clipnorm > 0.0f)
        MR_CHECK(mr_optimizer_clip_norm(m->be, m->grads, (size_t)m->n_params,
                                        m->opt.global_clipnorm, err));
    if (m->opt.clipnorm > 0.0f)
        for (int i = 0; i < m->n_layers; i++)
            for (int w = 0; w < m->layers[i].n_weights; w++) {
                const mr_weight *wt = &m->layers[i].w[w];
                if (wt->trainable)
                    MR_CHECK(mr_optimizer_clip_norm(m->be, wt->grad, (size_t)wt->size,
                                                    m->opt.clipnorm, err));
            }
    return mr_optimizer_step(&m->opt, m->be, lr, t, m->params, m->grads, m->slots[0], m->slots[1],
                             (size_t)m->n_params, bad, err);
}

mr_status mr_model_grads_nonfinite(mr_model *m, int *any, mr_error *err) {
    return mr_optimizer_nonfinite(m->be, m->grads, (size_t)m->n_params, any, err);
}

mr_status mr_model_params_nonfinite(mr_model *m, int *any, mr_error *err) {
    MR_CHECK(mr_optimizer_nonfinite(m->be, m->params, (size_t)m->n_params, any, err));
    if (*any || m->n_state == 0) return MR_OK;
    return mr_optimizer_nonfinite(m->be, m->state, (size_t)m->n_state, any, err);
}

mr_status mr_model_first_nonfinite_layer(const mr_model *m, int *layer, mr_error *err) {
    *layer = -1;
    for (int i = m->n_layers - 1; i >= 0; i--) {
        const mr_layer *l = &m->layers[i];
        for (int w = 0; w < l->n_weights; w++) {
            const mr_weight *wt = &l->w[w];
            if (!wt->trainable) continue; /* no gradient */
            /* one weight at a time: host_floats holds the biggest (mr_model_init) */
            const float *g;
            MR_CHECK(
                mr_model_read(m, mr_dfloat_at_c(m->grads, wt->offset), (size_t)wt->size, &g, err));
            for (int64_t j = 0; j < wt->size; j++)
                if (mr_nonfinite(g[j])) {
                    *layer = i;
                    return MR_OK;
                }
        }
    }
    return MR_OK;
}

/* The extra floats go through the model's host staging, not straight from
 * or to v (the caller's stack): on a GPU the staging is pinned memory, and
 * a copy to or from pageable memory blocks inside the CUDA runtime until
 * the device gets to it, past the backend's timed wait, so a collective
 * whose peer never comes would hang there instead of failing. */
mr_status mr_model_write_extra(mr_model *m, const float *v, size_t n, mr_error *err) {
    MR_ASSERT(n <= m->grads_extra && (m->be->host_memory || n <= m->host_floats));
    mr_dfloat *dst = mr_dfloat_at(m->grads, m->n_params);
    float *host = mr_model_host_for(m, dst);
    memcpy(host, v, sizeof(float) * n);
    return mr_backend_write(m->be, dst, host, n, err);
}

mr_status mr_model_read_extra(const mr_model *m, float *v, size_t n, mr_error *err) {
    MR_ASSERT(n <= m->grads_extra && (m->be->host_memory || n <= m->host_floats));
    const float *host;
    MR_CHECK(mr_backend_read(m->be, mr_dfloat_at_c(m->grads, m->n_params), n, m->host, &host, err));
    memcpy(v, host, sizeof(float) * n);
    return MR_OK;
}

mr_status mr_model_read(const mr_model *m, const mr_dfloat *p, size_t n, const float **host,
                        mr_error *err) {
    MR_ASSERT(m->be->host_memory || n <= m->host_floats);
    return mr_backend_read(m->be, p, n, m->host, host, err);
}

float *mr_model_host_for(const mr_model *m, mr_dfloat *p) {
    float *view = mr_backend_host_view(m->be, p);
    return view ? view : m->host;
}

mr_status mr_model_write(const mr_model *m, mr_dfloat *p, const float *host, size_t n,
                         mr_error *err) {
    MR_ASSERT(m->be->host_memory || n <= m->host_floats);
    return mr_backend_write(m->be, p, host, n, err);
}

void mr_shape_format(mr_shape s, char *buf, size_t n) {
    if (s.rank == 1)
        snprintf(buf, n, "(None, %d)", s.d[0]);
    else
        snprintf(buf, n, "(None, %d, %d, %d)", s.d[0], s.d[1], s.d[2]);
}

static void thousands(int64_t v, char *buf, size_t n) {
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)v);
    int len = (int)strlen(raw), o = 0;
    for (int i = 0; i < len && o + 2 < (int)n; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
}

/* A graph's "Connected to" of layer i: its inputs as Keras prints them
 * ("conv2d[0][0], a[0][0]"), "-" for the input layer (i = -1). */
static void connected_to(const mr_model *m, int i, char *buf, size_t n) {
    const char *in_name = m->cfg->layers[0].name[0] ? m->cfg->layers[0].name : "input";
    snprintf(buf, n, "-");
    if (i < 0) return;
    size_t o = 0;
    for (int k = 0; k < 2 && o < n; k++) {
        int s = m->src[i][k];
        if (k == 1 && !mr_layer_kind_merges(m->layers[i].cfg->kind)) break;
        o += (size_t)snprintf(buf + o, n - o, "%s%s[0][0]", k ? ", " : "",
                              s < 0 ? in_name : m->layers[s].name);
    }
}

void mr_model_summary(const mr_model *m, const char *name, FILE *out) {
    /* Columns as Keras 2 printed them (28 wide for "name (Class)"), wider
     * where a name does not fit ("layer_normalization (LayerNormalization)"),
     * so every row's shape starts under "Output Shape"; the rules grow alike. */
    char shape[64], label[80], num[32], conn[2 * MR_NAME_MAX + 16];
    int w = 28;
    for (int i = 0; i < m->n_layers; i++) {
        int len = snprintf(label, sizeof label, "%s (%s)", m->layers[i].name,
                           m->layers[i].ops->class_name);
        if (len > w) w = len < (int)sizeof label ? len : (int)sizeof label - 1;
    }
    char rule[160], dbl[160];
    int rule_len = 65 + (w - 28);
    memset(rule, '_', (size_t)rule_len);
    memset(dbl, '=', (size_t)rule_len);
    rule[rule_len] = dbl[rule_len] = '\0';
    /* a graph adds Keras's Functional column: each layer's inputs */
    const int g = m->graph;
    fprintf(out, "Model: \"%s\"\n%s\n", name, rule);
    if (g)
        fprintf(out, " %-*s %-25s %-10s %s\n%s\n", w, "Layer (type)", "Output Shape", "Param #",
                "Connected to", dbl);
    else
        fprintf(out, " %-*s %-25s %s\n%s\n", w, "Layer (type)", "Output Shape", "Param #", dbl);
    mr_shape_format(m->in_shape, shape, sizeof shape);
    if (g) {
        const char *in_name = m->cfg->layers[0].name[0] ? m->cfg->layers[0].name : "input";
        snprintf(label, sizeof label, "%s (InputLayer)", in_name);
        fprintf(out, " %-*s %-25s %-10s %s\n", w, label, shape, "0", "-");
    } else {
        fprintf(out, " %-*s %-25s %s\n", w, "input (InputLayer)", shape, "0");
    }
    int64_t trainable = 0, frozen = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const mr_layer *l = &m->layers[i];
        int64_t p = 0;
        for (int w = 0; w < l->n_weights; w++) {
            p += l->w[w].size;
            if (l->w[w].trainable)
                trainable += l->w[w].size;
            else
                frozen += l->w[w].size;
        }
        snprintf(label, sizeof label, "%s (%s)", l->name, l->ops->class_name);
        mr_shape_format(l->out, shape, sizeof shape);
        snprintf(num, sizeof num, "%lld", (long long)p);
        if (g) {
            connected_to(m, i, conn, sizeof conn);
            fprintf(out, " %-*s %-25s %-10s %s\n", w, label, shape, num, conn);
        } else {
            fprintf(out, " %-*s %-25s %s\n", w, label, shape, num);
        }
    }
    fprintf(out, "%s\n", dbl);
    thousands(trainable + frozen, num, sizeof num);
    fprintf(out, "Total params: %s\n", num);
    thousands(trainable, num, sizeof num);
    fprintf(out, "Trainable params: %s\n", num);
    thousands(frozen, num, sizeof num);
    fprintf(out, "Non-trainable params: %s\n%s\n", num, rule);
}
