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
#include "runtime/host_memory.h"
#include "runtime/device_trace.h"
#include "runtime/trace.h"

/* Floats that one training pass may touch (weights and their gradients,
 * activations, input, the two gradient buffers): 5 MiB, about a core's
 * share of the cache. fashion_cnn.cfg (71,098 floats a row) then runs
 * batch 32 as two passes of 16, which scales best on 2 cores
 * (docs/performance.md, "Why a batch runs in cache-sized passes"). */
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

/* Takes the plan into m (zeroed first): the layers as their ops set them
 * up, the shapes, the graph, the weight layout and the loss's decisions. */
static void adopt_plan(mr_model *m, mr_backend *be, const mr_model_plan *p, int max_batch,
                       size_t grads_extra) {
    memset(m, 0, sizeof *m);
    m->cfg = p->cfg;
    m->be = be;
    m->max_batch = max_batch;
    m->grads_extra = grads_extra;
    m->opt = mr_optimizer_from_config(&p->cfg->net);
    m->in_shape = p->in_shape;
    m->in_size = p->in_size;
    m->out_size = p->out_size;
    m->fused_softmax = p->fused_softmax;
    m->classes = p->classes;
    m->label_width = p->label_width;
    m->regression = p->regression;
    m->n_params = p->n_params;
    m->n_state = p->n_state;
    m->graph = p->graph;
    m->n_layers = p->n_layers;
    memcpy(m->layers, p->layers, sizeof(mr_layer) * (size_t)p->n_layers);
    memcpy(m->src, p->src, sizeof m->src);
    memcpy(m->param_offset, p->param_offset, sizeof m->param_offset);
}

/* Each layer's kernels of the context's device kind and their state;
 * *scratch: the most scratch floats one of them needs at max_batch. */
static mr_status setup_kernels(mr_model *m, size_t *scratch, mr_error *err) {
    *scratch = 0;
    for (int i = 0; i < m->n_layers; i++) {
        mr_layer *l = &m->layers[i];
        l->scratch_floats *= (size_t)m->max_batch; /* the plan's is one row's */
        MR_CHECK(mr_layer_setup_kernels(l, m->be, m->max_batch, m->cfg->path, err));
        if (l->scratch_floats > *scratch) *scratch = l->scratch_floats;
    }
    return MR_OK;
}

/* Floats per row of the activation buffers the model owns: each layer's
 * output, and in a graph its gradient (dacts) as well; a view's (in a
 * chain) and a fused ReLU's are another layer's. */
static int64_t own_act_floats(const mr_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->n_layers; i++)
        if ((!m->layers[i].ops->view || m->graph) && !m->layers[i].fused)
            n += (m->graph ? 2 : 1) * mr_shape_size(m->layers[i].out);
    return n;
}

/* The weights (params), their gradients and the extra floats after them,
 * the optimizer's slots, the non-trainable state. */
static void alloc_weights(mr_model *m) {
    m->params = alloc_floats(m, m->n_params);
    m->grads = alloc_floats(m, m->n_params + (int64_t)m->grads_extra);
    for (int s = 0; s < mr_optimizer_slot_count(&m->opt); s++)
        m->slots[s] = alloc_floats(m, m->n_params);
    m->state = m->n_state ? alloc_floats(m, m->n_state) : NULL;
}

/* The input: one buffer filled in place, or two used in turn (model.h). */
static void alloc_inputs(mr_model *m) {
    mr_backend *be = m->be;
    for (int i = 0; i < (be->host_memory ? 1 : 2); i++) {
        m->inputs[i] = alloc_floats(m, (int64_t)m->max_batch * m->in_size);
        if (be->host_memory) continue;
        /* a batch, or its example ids (mr_model_input_synthetic: 2 floats'
         * bytes a row, more than a batch of one-feature rows) */
        const int64_t row = m->in_size > 2 ? m->in_size : 2;
        m->input_host[i] =
            mr_backend_alloc_host(be, sizeof(float) * (size_t)(m->max_batch * row + 1));
        /* here, not at the first synthetic batch: the allocation's zeroing
         * is queued on the compute stream, and an upload's copy waits only
         * for what was queued before the previous upload */
        m->input_rows[i] = mr_backend_alloc(be, sizeof(int64_t) * (size_t)m->max_batch);
    }
    m->input = m->inputs[0];
    m->next_input = 0;
}

/* Each layer's output (and in a graph its gradient), (max_batch, out of
 * the layer), and the two gradient buffers (max_batch, widest). */
static void alloc_activations(mr_model *m, int64_t widest) {
    for (int i = 0; i < m->n_layers; i++) {
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
        const int64_t n = (int64_t)m->max_batch * mr_shape_size(m->layers[i].out);
        m->acts[i] = alloc_floats(m, n);
        if (m->acts[i] == NULL) break;
        if (m->graph && (m->dacts[i] = alloc_floats(m, n)) == NULL) break;
    }
    m->dbuf[0] = alloc_floats(m, (int64_t)m->max_batch * widest);
    m->dbuf[1] = alloc_floats(m, (int64_t)m->max_batch * widest);
}

/* Host staging where the context's memory is not host memory: a batch of
 * output, the extra floats, or the largest weight (the input has its own,
 * input_host). */
static void alloc_host(mr_model *m, int64_t largest_weight) {
    if (m->be->host_memory) return;
    int64_t h = (int64_t)m->max_batch * m->out_size;
    if (h < (int64_t)m->grads_extra) h = (int64_t)m->grads_extra; /* mr_model_read_extra */
    m->host_floats = (size_t)(h > largest_weight ? h : largest_weight);
    m->host = mr_backend_alloc_host(m->be, sizeof(float) * (m->host_floats ? m->host_floats : 1));
}

/* 1 when every buffer the model needs was made. */
static int buffers_made(const mr_model *m) {
    const int host = m->be->host_memory;
    int ok = m->params && m->grads && m->input && m->dbuf[0] && m->dbuf[1] &&
             (m->n_state == 0 || m->state) && (host || m->host);
    for (int i = 0; i < (host ? 1 : 2); i++)
        ok = ok && m->inputs[i] && (host || (m->input_host[i] && m->input_rows[i]));
    for (int s = 0; s < mr_optimizer_slot_count(&m->opt); s++)
        ok = ok && m->slots[s];
    for (int i = 0; i < m->n_layers; i++)
        ok = ok && m->acts[i] && (!m->graph || m->dacts[i]);
    return ok;
}

/* The floats of every buffer alloc_buffers makes: parameters, gradients
 * and their extra floats, optimizer slots, state, the two gradient
 * buffers, scratch, the inputs (and their host staging) and the
 * activations, at max_batch rows. */
static int64_t wanted_floats(const mr_model *m, int64_t widest, size_t scratch) {
    const int64_t max_batch = m->max_batch;
    return m->n_params * (2 + mr_optimizer_slot_count(&m->opt)) + (int64_t)m->grads_extra +
           m->n_state + 2 * max_batch * widest + (int64_t)scratch +
           (m->be->host_memory ? 1 : 2) * max_batch * m->in_size + max_batch * own_act_floats(m);
}

/* The failure to make the buffers: frees the model first, then says what
 * was asked for and what the device has left (a GPU's memory is shared with
 * the other contexts and processes on it; host memory: what the kernel can
 * still give, `available`, -1 when not asked). */
static mr_status out_of_memory(mr_model *m, int64_t widest, size_t scratch, int64_t available,
                               mr_error *err) {
    mr_backend *be = m->be;
    const mr_config *cfg = m->cfg;
    const int max_batch = m->max_batch;
    const int64_t want = wanted_floats(m, widest, scratch);
    mr_model_free(m);
    char dev[32], mem[96] = "";
    size_t used = 0, total = 0;
    mr_backend_format(be, dev, sizeof dev);
    if (available >= 0)
        snprintf(mem, sizeof mem, "; %.1f MiB available: a smaller batch needs less",
                 (double)available / 1048576.0);
    else if (mr_backend_memory(be, &used, &total, NULL) == MR_OK && total > 0)
        snprintf(mem, sizeof mem, "; %.1f MiB of %.1f MiB free", (double)(total - used) / 1048576.0,
                 (double)total / 1048576.0);
    return mr_error_set(err, MR_ERR_NOMEM,
                        "%s: %s: out of memory for the model at batch %d (parameters, "
                        "optimizer slots, activations and scratch: %.1f MiB%s)",
                        cfg->path, dev, max_batch, (double)want * 4.0 / 1048576.0, mem);
}

/* Every buffer in the context's memory, and the layers' scratch. */
static mr_status alloc_buffers(mr_model *m, const mr_model_plan *p, size_t scratch, mr_error *err) {
    /* in host memory, what the kernel cannot give is refused before any
     * of it is asked for: Linux would give it, then kill the process as
     * it is filled (host_memory.h) */
    if (m->be->host_memory) {
        const int64_t available = mr_host_memory_available("/proc/meminfo");
        if (available >= 0 && wanted_floats(m, p->widest, scratch) > available / 4)
            return out_of_memory(m, p->widest, scratch, available, err);
    }
    alloc_weights(m);
    alloc_inputs(m);
    alloc_activations(m, p->widest);
    const mr_status sst = mr_backend_reserve_scratch(m->be, scratch, NULL);
    alloc_host(m, p->largest_weight);
    if (sst == MR_OK && buffers_made(m)) return MR_OK;
    return out_of_memory(m, p->widest, scratch, -1, err);
}

/* [net] class_weight onto the device, for the training loss. */
static mr_status upload_class_weight(mr_model *m, mr_error *err) {
    const mr_class_weights *cw = &m->cfg->net.class_weight;
    if (cw->n == 0) return MR_OK;
    m->class_weight = alloc_floats(m, cw->n);
    if (m->class_weight == NULL)
        return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory for class_weight", m->cfg->path);
    return mr_backend_to_device(m->be, m->class_weight, cw->v, sizeof(float) * (size_t)cw->n, err);
}

/* Each weight's views at its offset: params and grads, or state. */
static void bind_weights(mr_model *m) {
    for (int i = 0; i < m->n_layers; i++)
        for (int w = 0; w < m->layers[i].n_weights; w++) {
            mr_weight *wt = &m->layers[i].w[w];
            if (wt->trainable) {
                wt->data = mr_dfloat_at(m->params, wt->offset);
                wt->grad = mr_dfloat_at(m->grads, wt->offset);
            } else {
                wt->data = mr_dfloat_at(m->state, wt->offset);
            }
        }
}

/* Training passes (model.h, pass_rows): every pass reads the weights and
 * adds into their gradients, and each row touches the input, the two
 * gradient buffers and the activations the model owns. The budget is a CPU
 * cache's: a GPU (no cache_passes) runs the whole batch at once. */
static int pass_rows(const mr_model *m, int64_t widest, int whole_batch) {
    const int64_t per_row = m->in_size + 2 * widest + own_act_floats(m);
    int64_t c = (MR_PASS_FLOATS - 2 * m->n_params) / per_row; /* < 1: big weights, one pass */
    if (c >= 8) c -= c % 8;                                   /* GEMM-friendly row counts */
    if (c < 1) c = m->max_batch;
    return whole_batch || c > m->max_batch || !m->be->ops->cache_passes ? m->max_batch : (int)c;
}

mr_status mr_model_init_from_plan(mr_model *m, mr_backend *be, const mr_model_plan *p,
                                  int max_batch, size_t grads_extra, mr_error *err) {
    adopt_plan(m, be, p, max_batch, grads_extra);
    size_t scratch = 0;
    mr_status st;
    MR_CHECK_GOTO(setup_kernels(m, &scratch, err), st, fail);
    fuse_relus(m);
    MR_CHECK_GOTO(alloc_buffers(m, p, scratch, err), st, fail);
    MR_CHECK_GOTO(upload_class_weight(m, err), st, fail);
    bind_weights(m);
    m->run.be = be;
    m->run.scratch = mr_backend_scratch(be);
    m->pass_rows = pass_rows(m, p->widest, p->whole_batch);
    return MR_OK;
fail:
    mr_model_free(m); /* (a no-op after out_of_memory, which freed it) */
    return st;
}

mr_status mr_model_init(mr_model *m, mr_backend *be, const mr_config *cfg, int max_batch,
                        size_t grads_extra, mr_error *err) {
    memset(m, 0, sizeof *m);
    /* (on the heap: MR_MAX_LAYERS layers, too much for a replica thread's stack) */
    mr_model_plan *p = malloc(sizeof *p);
    if (p == NULL)
        return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory for the model", cfg->path);
    mr_status st = mr_model_plan_make(p, cfg, err);
    if (st == MR_OK) st = mr_model_init_from_plan(m, be, p, max_batch, grads_extra, err);
    free(p);
    return st;
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
    return m->label_width;
}

int mr_model_regression(const mr_model *m) {
    return m->regression;
}

/* mr_loss_compute's `fused_softmax`: the model's, or that the labels are float targets. */
static int loss_mode(const mr_model *m) {
    return m->regression ? MR_LOSS_FLOAT_TARGETS : m->fused_softmax;
}

int mr_model_classes(const mr_model *m) {
    return m->classes;
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
        MR_ASSERT(done[i]); /* config_check.c: every output but the last feeds a later layer */
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

/* The loss of out (batch, k) against labels, its sum added to *loss_sum (dy, when not NULL, its
 * gradient), and the metric's numerator to *correct: the correct count (an integer, exact in a
 * double), or for a regression the sum of |out - t| over every output (the MAE loss's per-example
 * means times k), so that *correct / (examples x k) is Keras's mae metric as multi-label's matched
 * outputs / (examples x k) is its binary accuracy. in_top_k as mr_model_eval_batch's. */
static mr_status loss_and_metric(mr_model *m, const mr_dfloat *out, const int32_t *labels,
                                 const mr_dfloat *cw, int batch, float norm, mr_dfloat *dy,
                                 double *loss_sum, double *correct, int64_t *in_top_k,
                                 mr_error *err) {
    const int k = (int)m->out_size;
    int64_t hits = 0;
    if (loss_sum == NULL) { /* the sums stay on the device (mr_model_train_batch) */
        MR_ASSERT(!m->regression && in_top_k == NULL);
        return mr_loss_compute_queued(m->be, m->cfg->net.loss, loss_mode(m),
                                      m->cfg->net.label_smoothing, out, labels, cw, batch, k, norm,
                                      dy, err);
    }
    MR_CHECK(mr_loss_compute(m->be, m->cfg->net.loss, loss_mode(m), m->cfg->net.label_smoothing,
                             out, labels, cw, batch, k, norm, dy, loss_sum, &hits,
                             in_top_k ? m->cfg->net.top_k : 0, in_top_k, err));
    *correct += (double)hits;
    if (!m->regression) return MR_OK;
    double abs_sum = 0.0;
    MR_CHECK(mr_loss_compute(m->be, MR_LOSS_MAE, MR_LOSS_FLOAT_TARGETS, 0.0f, out, labels, NULL,
                             batch, k, 1.0f, NULL, &abs_sum, &hits, 0, NULL, err));
    *correct += abs_sum * k;
    return MR_OK;
}

/* 1 where every layer before layer i is a view (a [flatten] of the
 * input): layer i's input gradient would go nowhere, so it gets no dx. */
static int after_views_only(const mr_model *m, int i) {
    for (int j = 0; j < i; j++)
        if (!m->layers[j].ops->view) return 0;
    return 1;
}

/* Forward, loss and backward of `batch` rows starting at `in` (labels
 * alongside); after_layer only when this pass completes the gradients. */
static mr_status train_rows(mr_model *m, const mr_dfloat *in, const int32_t *labels, int batch,
                            float norm, double *loss_sum, double *correct,
                            void (*after_layer)(void *ctx, int64_t ready), void *ctx) {
    const mr_dfloat *out;
    MR_CHECK(forward_rows(m, in, batch, &out));
    int cur = 0; /* dy lives in dbuf[cur], dx goes to the other one */
    mr_dfloat *dy = m->graph ? m->dacts[m->n_layers - 1] : m->dbuf[cur];
    const span sl = span_begin(m);
    MR_CHECK(loss_and_metric(m, out, labels, m->class_weight, batch, norm, dy, loss_sum, correct,
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
            mr_dfloat *dx = after_views_only(m, i) ? NULL : m->dbuf[cur ^ 1];
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
                               double *loss_sum, double *correct,
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
                              double *correct, int64_t *in_top_k, mr_error *err) {
    MR_CHECK(mr_model_forward(m, batch, 0, err));
    return loss_and_metric(m, mr_model_output(m), labels, NULL, batch, 1.0f, NULL, loss_sum,
                           correct, in_top_k, err);
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

mr_status mr_model_grads_nonfinite_begin(mr_model *m, const double **flag, mr_error *err) {
    return mr_optimizer_nonfinite_begin(m->be, m->grads, (size_t)m->n_params, flag, err);
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
    /* queued, no wait: the staging is next touched by mr_model_read_extra
     * (or another read), whose copy back runs after this one */
    return mr_backend_write_queued(m->be, dst, host, n, err);
}

int mr_model_queues_sums(const mr_model *m) {
    const mr_kernels *kern = mr_kernels_for(m->be);
    return kern != NULL && kern->loss->compute_queued != NULL && kern->loss->take_sums != NULL &&
           kern->optimizer->nonfinite_begin != NULL && !m->regression;
}

mr_status mr_model_take_sums(mr_model *m, mr_error *err) {
    MR_ASSERT(m->grads_extra >= 3);
    return mr_loss_take_sums(m->be, mr_dfloat_at(m->grads, m->n_params), err);
}

mr_status mr_model_read_extra(const mr_model *m, float *v, size_t n, mr_error *err) {
    MR_ASSERT(n <= m->grads_extra && (m->be->host_memory || n <= m->host_floats));
    const float *host;
    MR_CHECK(mr_backend_read(m->be, mr_dfloat_at_c(m->grads, m->n_params), n, m->host, &host, err));
    memcpy(v, host, sizeof(float) * n);
    return MR_OK;
}

/* Weights a device keeps in its own order (mr_layer_device_order: a GPU
 * convolution's kernel as cuDNN's KRSC) cross to and from the host in
 * Keras's, so files, params_hash and the host's views never see the
 * device's order. The parameters, their gradients and the optimizer slots
 * share one layout: a range of any of them is converted where it overlaps
 * such a weight (off the step's path: checkpoints, hashes, copies). */

/* p's offset in floats in params, grads or an optimizer slot (*base: that
 * buffer), or -1 where p is in none of them. */
static int64_t param_offset_of(const mr_model *m, const mr_dfloat *p, const mr_dfloat **base) {
    const mr_dfloat *bufs[4] = {m->params, m->grads, m->slots[0], m->slots[1]};
    const uintptr_t q = (uintptr_t)p;
    for (int b = 0; b < 4; b++) {
        const uintptr_t s = (uintptr_t)bufs[b];
        if (bufs[b] != NULL && q >= s && q < s + sizeof(float) * (size_t)m->n_params) {
            *base = bufs[b];
            return (int64_t)((q - s) / sizeof(float));
        }
    }
    return -1;
}

/* The first weight kept in a device order that ends after offset `at` of
 * the parameters (*layer, *w), or NULL. */
static const mr_weight *next_reordered(const mr_model *m, int64_t at, int *layer, int *w) {
    const mr_weight *best = NULL;
    for (int i = 0; i < m->n_layers; i++)
        for (int k = 0; k < m->layers[i].n_weights; k++) {
            const mr_weight *wt = &m->layers[i].w[k];
            if (!wt->trainable || wt->offset + wt->size <= at ||
                !mr_layer_device_order(&m->layers[i], k, 0, NULL, NULL))
                continue;
            if (best == NULL || wt->offset < best->offset) best = wt, *layer = i, *w = k;
        }
    return best;
}

/* The whole of weight (layer, w) at base + its offset, in Keras's order,
 * into keras (its size floats; tmp: as many, scratch). */
static mr_status read_weight_keras(const mr_model *m, const mr_dfloat *base, int layer, int w,
                                   float *keras, float *tmp, mr_error *err) {
    const mr_weight *wt = &m->layers[layer].w[w];
    const float *dev;
    MR_CHECK(
        mr_backend_read(m->be, mr_dfloat_at_c(base, wt->offset), (size_t)wt->size, tmp, &dev, err));
    mr_layer_device_order(&m->layers[layer], w, 0, dev, keras);
    return MR_OK;
}

/* host (the n floats read at parameter offset off of base) with the parts
 * of device-ordered weights put in Keras's order. */
static mr_status read_reorder(const mr_model *m, const mr_dfloat *base, int64_t off, size_t n,
                              float *host, mr_error *err) {
    int layer, w;
    /* n reaches 0 where the range ends inside a weight: that weight still
     * ends after off, so the loop stops on n, not on next_reordered */
    for (const mr_weight *wt; n > 0 && (wt = next_reordered(m, off, &layer, &w)) != NULL;) {
        if (wt->offset >= off + (int64_t)n) break;
        float *tmp = malloc(2 * sizeof(float) * (size_t)wt->size);
        if (tmp == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
        mr_status st = read_weight_keras(m, base, layer, w, tmp, tmp + wt->size, err);
        const int64_t lo = wt->offset > off ? wt->offset : off,
                      hi = wt->offset + wt->size < off + (int64_t)n ? wt->offset + wt->size
                                                                    : off + (int64_t)n;
        if (st == MR_OK)
            memcpy(host + (lo - off), tmp + (lo - wt->offset), sizeof(float) * (size_t)(hi - lo));
        free(tmp);
        MR_CHECK(st);
        n -= (size_t)(hi - off), host += hi - off, off = hi;
    }
    return MR_OK;
}

mr_status mr_model_read(const mr_model *m, const mr_dfloat *p, size_t n, const float **host,
                        mr_error *err) {
    MR_ASSERT(m->be->host_memory || n <= m->host_floats);
    MR_CHECK(mr_backend_read(m->be, p, n, m->host, host, err));
    const mr_dfloat *base;
    const int64_t off = param_offset_of(m, p, &base);
    if (off < 0 || *host != m->host) return MR_OK; /* a host view: the device's own order */
    return read_reorder(m, base, off, n, m->host, err);
}

/* Weight (layer, w) at base with its floats [lo, hi) (parameter offsets)
 * from src, in Keras's order, and the rest as they are. */
static mr_status write_weight_part(const mr_model *m, const mr_dfloat *base, int layer, int w,
                                   int64_t lo, int64_t hi, const float *src, mr_error *err) {
    const mr_weight *wt = &m->layers[layer].w[w];
    float *tmp = malloc(2 * sizeof(float) * (size_t)wt->size);
    if (tmp == NULL) return mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    mr_status st = MR_OK;
    if (lo > wt->offset || hi < wt->offset + wt->size)
        st = read_weight_keras(m, base, layer, w, tmp, tmp + wt->size, err);
    if (st == MR_OK) {
        memcpy(tmp + (lo - wt->offset), src, sizeof(float) * (size_t)(hi - lo));
        mr_layer_device_order(&m->layers[layer], w, 1, tmp, tmp + wt->size);
        st = mr_backend_write(m->be, mr_dfloat_at((mr_dfloat *)base, wt->offset), tmp + wt->size,
                              (size_t)wt->size, err);
    }
    free(tmp);
    return st;
}

float *mr_model_host_for(const mr_model *m, mr_dfloat *p) {
    float *view = mr_backend_host_view(m->be, p);
    return view ? view : m->host;
}

mr_status mr_model_write(const mr_model *m, mr_dfloat *p, const float *host, size_t n,
                         mr_error *err) {
    MR_ASSERT(m->be->host_memory || n <= m->host_floats);
    const mr_dfloat *base;
    int64_t off = param_offset_of(m, p, &base);
    if (off < 0 || mr_backend_host_view(m->be, p) != NULL)
        return mr_backend_write(m->be, p, host, n, err);
    /* runs in Keras's order as they are; device-ordered weights whole */
    const int64_t end = off + (int64_t)n;
    int layer, w;
    while (off < end) {
        const mr_weight *wt = next_reordered(m, off, &layer, &w);
        const int64_t run_end = wt == NULL || wt->offset > end ? end : wt->offset;
        if (run_end > off) {
            MR_CHECK(mr_backend_write(m->be, mr_dfloat_at((mr_dfloat *)base, off), host,
                                      (size_t)(run_end - off), err));
            host += run_end - off, off = run_end;
            continue;
        }
        const int64_t hi = wt->offset + wt->size < end ? wt->offset + wt->size : end;
        MR_CHECK(write_weight_part(m, base, layer, w, off, hi, host, err));
        host += hi - off, off = hi;
    }
    return MR_OK;
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
