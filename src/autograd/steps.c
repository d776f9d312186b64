/* A backward watched step by step: the record handed to tg_backward_steps'
 * callback, and its TG_TRACE=2 printout.  The engine calls tg__backward_step
 * right after a node's backward, before the gradients it produced are added
 * to anything, so what a learner sees is exactly one vector-Jacobian
 * product. */
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"

_Static_assert(TG_STEP_MAX_INPUTS == TG_NODE_MAX_INPUTS,
               "a step reports every input a node can have");

/* Tensors up to this many elements are printed in full by the trace. */
enum { TRACE_FULL_ELEMS = 16 };

/* "f64 (3) [1, 2, 3]" for a small t; "f64 (100, 10) min .. max, mean m,
 * [first four, ...]" for a large one. */
static void trace_tensor(FILE *f, const tg_tensor *t)
{
    char shape[96], vals[1024];
    int64_t n = tg_tensor_numel(t);
    fprintf(f, "%s %s ", tg_dtype_name(t->dtype),
            tg_shape_str(shape, sizeof shape, t->ndim, t->shape));
    if (n <= TRACE_FULL_ELEMS) {
        fprintf(f, "%s\n", tg__values_str(vals, sizeof vals, t, TRACE_FULL_ELEMS));
        return;
    }
    double lo = INFINITY, hi = -INFINITY, sum = 0, v = 0;
    for (int64_t i = 0; i < n && tg_tensor_get_flat(t, i, &v) >= 0; i++) {
        lo = fmin(lo, v);
        hi = fmax(hi, v);
        sum += v;
    }
    fprintf(f, "min %.4g max %.4g mean %.4g %s\n", lo, hi, sum / (double)n,
            tg__values_str(vals, sizeof vals, t, 4));
}

static void trace_step(const tg_backward_step *s)
{
    FILE *f = stderr;
    fprintf(f, "[tape] step %d: #%llu %s%s%s%s\n", s->index, (unsigned long long)s->seq, s->op,
            s->name[0] ? " '" : "", s->name, s->name[0] ? "'" : "");
    fprintf(f, "[tape]   vjp: %s\n[tape]   g: ", s->vjp);
    trace_tensor(f, s->grad_out);
    for (int i = 0; i < s->n_inputs; i++) {
        if (!s->grad_in[i]) continue;
        fprintf(f, "[tape]   -> input %d (", i);
        char nb[48];
        if (s->input_seq[i]) fprintf(f, "#%llu", (unsigned long long)s->input_seq[i]);
        else fprintf(f, "leaf%s", tg__name_note(s->input_leaf[i], false, nb));
        fprintf(f, "): ");
        trace_tensor(f, s->grad_in[i]);
    }
}

int tg__backward_step(tg_backward_step_fn fn, void *user, int index, const tg_node *n,
                      const tg_tensor *g, tg_tensor *const *grad_in)
{
    tg_backward_step s = {.index = index, .node = n, .seq = n->seq, .op = n->op->name,
                          .name = n->name, .vjp = tg__vjp_formula(n->op),
                          .grad_out = g, .n_inputs = n->n_inputs};
    for (int i = 0; i < n->n_inputs; i++) {
        /* as the engine: a gradient for an input that needs none is dropped */
        s.grad_in[i] = n->needs_grad[i] ? grad_in[i] : NULL;
        s.input_seq[i] = n->edges[i].fn ? n->edges[i].fn->seq : 0;
        s.input_leaf[i] = n->edges[i].leaf;
    }
    if (tg__trace_level() >= 2) trace_step(&s);
    if (!fn) return TG_OK;
    tg__callback_begin();
    return tg__callback_end("backward_steps: the step callback", fn(&s, user));
}
