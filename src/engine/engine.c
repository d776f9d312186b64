/* The backward engine's run: walking the nodes, summing gradients and
 * delivering them (tg__engine_run; its callers are in backward.c).
 *
 * The nodes reachable from the roots are walked in decreasing seq order.  A
 * node is always recorded after the nodes of its inputs (its inputs existed
 * when it ran), so decreasing seq is a reverse topological order: when a node
 * runs, every consumer of its output has already added its share of the
 * gradient into node->grad_accum.
 *
 * Leaves reached by a gradient and tg_grad's inputs are found through uthash
 * indexes (by pointer), so a lookup costs O(1) whatever the number of leaves
 * or inputs; arrays in first-use or slot order keep every delivery in a
 * fixed order (the indexes are never iterated).  An index that cannot grow
 * (uthash out of memory, src/hash.h) is TG_ENOMEM, with the element not in
 * it and the index as it was. */

#include <pthread.h>
#include <string.h>

#include "core/core.h"
#include "core/profile.h"
#include "autograd/tape.h"
#include "engine/engine.h"
#include "engine/slot_index.h"
#include "ops/elementwise.h"   /* tg__add_over */
#include "tapegrad/ops.h"
#include "tapegrad/profile.h"

/* A leaf reached by a gradient, and the sum of what reached it so far. */
typedef struct touched_leaf {
    tg_tensor *leaf;              /* retained; the key of engine.by_leaf */
    tg_tensor *pending;           /* summed gradient, not yet delivered */
    int ready_at;                 /* early leaves: the index of the last node that feeds
                                   * it (delivered right after it); else -1 */
    UT_hash_handle hh;
} touched_leaf;

typedef struct engine {
    tg__engine_req req;           /* what was asked (engine.h) */
    tg__slot_index by_tensor;     /* every target, by tensor */
    tg__slot_index by_fn;         /* non-leaf targets, by grad_fn */
    tg_node **nodes;              /* increasing seq; node->dependencies = index + 1 */
    int n_nodes;
    bool *flows;                  /* gradient must go through this node's backward */
    touched_leaf **touched;       /* early leaves by increasing ready_at, then the
                                   * others in the order they were first reached */
    int n_touched, cap_touched;
    int n_early;                  /* leaves with post-accumulate hooks: touched[0, n_early) */
    touched_leaf *by_leaf;        /* uthash over the same entries */
    int n_steps;
} engine;

/* The hooks of list, but those removed; a hook may remove itself or any
 * other hook (tg_tensor_remove_hook only marks it while hooks run), and the
 * marked ones of list are freed after the outermost run. */
static int run_hooks(tg_hook **list, tg_tensor **grad)
{
    int rc = TG_OK;
    tg__engine_hooks_running++;
    for (const tg_hook *h = *list; h && rc >= 0; h = h->next) {
        if (h->removed) continue;
        tg__callback_begin();
        rc = tg__callback_end("backward: a gradient hook", h->fn(grad, h->user));
        if (rc >= 0 && *grad == NULL)
            rc = tg__error(TG_EGRAD, "backward: a gradient hook left the gradient NULL "
                                     "(a hook keeps it, or replaces it with a new reference)");
    }
    if (--tg__engine_hooks_running == 0) tg__engine_sweep_hooks(list);
    return rc;
}

/* The gradient g must have exactly the shape and dtype in m. */
static int check_grad(const char *who, int i, const tg_tensor *g, const tg_meta *m)
{
    if (tg__meta_matches(g, m)) return TG_OK;
    char gs[96], ms[96];
    return tg__error(TG_EGRAD,
                     "backward: %s returned a gradient %s %s for input %d of %s %s",
                     who, tg_dtype_name(g->dtype), tg_shape_str(gs, sizeof gs, g->ndim, g->shape),
                     i, tg_dtype_name(m->dtype), tg_shape_str(ms, sizeof ms, m->ndim, m->shape));
}

/* The gradient g that reached leaf, checked (by its node) against the leaf
 * as recorded, against the leaf as it is now (m): they differ when the leaf
 * was converted in place since the record (tg_module_to_dtype), which no
 * saved tensor may have caught (an operand no gradient reads is not
 * checked). */
static int check_leaf_unchanged(const tg_tensor *leaf, const tg_tensor *g, const tg_meta *m)
{
    if (tg__meta_matches(g, m)) return TG_OK;
    char gs[96], ms[96], name[48];
    return tg__error(TG_EINPLACE,
                     "backward: leaf%s is %s %s, but was %s %s when the graph was recorded: "
                     "it was modified in place since",
                     tg__name_note(leaf, false, name), tg_dtype_name(m->dtype),
                     tg_shape_str(ms, sizeof ms, m->ndim, m->shape), tg_dtype_name(g->dtype),
                     tg_shape_str(gs, sizeof gs, g->ndim, g->shape));
}

/* *slot += g (a new reference either way; recorded only with create_graph). */
static int accumulate(tg_tensor **slot, tg_tensor *g)
{
    if (!*slot) {
        *slot = tg_tensor_retain(g);
        return TG_OK;
    }
    tg_tensor *sum = NULL;
    if ((*slot)->sparse || g->sparse) TG_TRY(tg__sparse_grad_sum(&sum, *slot, g));
    else TG_TRY(tg_add(&sum, *slot, g));
    tg_tensor_release(*slot);
    *slot = sum;
    return TG_OK;
}

/* Whether a sum of gradients t (a leaf's .grad or a node's pending one)
 * may take the next term in place: no create_graph (where the sum is
 * recorded), t the backward's own (tg__grad_is_own: no one else holds it
 * or its storage), contiguous from offset 0 and of meta m. */
static bool sums_in_place(const engine *e, const tg_tensor *t, const tg_meta *m)
{
    return t && !e->req.create_graph && tg__grad_is_own(t) && t->offset == 0 &&
           tg__meta_matches(t, m);
}

/* A node's pending gradient *slot += g (borrowed, of meta m, the node's
 * output's), in place when sums_in_place, as into a leaf's own .grad: the
 * pieces of one tensor (the time steps of an RNN, each a slice whose
 * gradient is its input's shape) then add into one buffer instead of a
 * new one each. */
static int accumulate_pending(const engine *e, tg_tensor **slot, tg_tensor *g, const tg_meta *m)
{
    if (!g->sparse && sums_in_place(e, *slot, m)) return tg__add_over(*slot, g);
    return accumulate(slot, g);
}

/* Indexes tg_grad's inputs: each by tensor, and a non-leaf one by grad_fn. */
static int index_targets(engine *e)
{
    if (e->req.n_targets == 0) return TG_OK;
    TG_TRY(tg__slot_index_init(&e->by_tensor, e->req.n_targets));
    TG_TRY(tg__slot_index_init(&e->by_fn, e->req.n_targets));
    for (int j = 0; j < e->req.n_targets; j++) {
        const tg_tensor *t = e->req.targets[j];
        TG_TRY(tg__slot_index_add(&e->by_tensor, t, j));
        if (t->grad_fn) TG_TRY(tg__slot_index_add(&e->by_fn, t->grad_fn, j));
    }
    return TG_OK;
}

static bool leaf_is_target(const engine *e, const tg_tensor *leaf)
{
    if (e->req.accumulate) return leaf->requires_grad;
    return tg__slot_index_first(&e->by_tensor, leaf) >= 0;
}

/* The first slot of an input whose grad_fn is n, or -1. */
static int node_target_slot(const engine *e, const tg_node *n)
{
    return e->req.n_targets ? tg__slot_index_first(&e->by_fn, n) : -1;
}

static bool node_is_target(const engine *e, const tg_node *n)
{
    return node_target_slot(e, n) >= 0;
}

/* leaf's entry in e->touched, added on first use; NULL on TG_ENOMEM. */
static touched_leaf *touch(engine *e, tg_tensor *leaf)
{
    touched_leaf *x = NULL;
    HASH_FIND_PTR(e->by_leaf, &leaf, x);
    if (x) return x;
    if (e->n_touched == e->cap_touched) {
        int cap = e->cap_touched ? 2 * e->cap_touched : 16;
        touched_leaf **p = realloc(e->touched, (size_t)cap * sizeof *p);
        if (!p) return tg__error(TG_ENOMEM, "backward: out of memory"), NULL;
        e->touched = p;
        e->cap_touched = cap;
    }
    x = tg__calloc(1, sizeof *x);
    if (!x) return NULL;
    x->leaf = leaf;
    x->ready_at = -1;
    HASH_ADD_PTR(e->by_leaf, leaf, x);
    if (TG_HASH_ADD_FAILED(x)) {
        free(x);
        return tg__error(TG_ENOMEM, "backward: out of memory indexing the leaves"), NULL;
    }
    tg_tensor_retain(leaf);
    e->touched[e->n_touched++] = x;
    return x;
}

/* Adds g (borrowed), one contribution to leaf's gradient, to its pending sum.
 * Hooks and accumulation wait for the total (deliver_leaves), so a leaf used
 * by several ops sees its hooks run once, as in PyTorch. */
static int route_leaf(engine *e, tg_tensor *leaf, tg_tensor *g)
{
    if (!leaf_is_target(e, leaf)) return TG_OK;
    touched_leaf *x = touch(e, leaf);
    if (!x) return TG_ENOMEM;
    return accumulate(&x->pending, g);
}

/* Guards every leaf's .grad while a backward adds into it: two threads may
 * run backward on their own graphs over shared leaves (the parameters of one
 * model), as PyTorch allows.  One lock for all leaves: it is held only for
 * the additions at the end of a backward. */
static pthread_mutex_t leaf_grad_lock = PTHREAD_MUTEX_INITIALIZER;

/* Without create_graph, a leaf's .grad is a plain contiguous tensor of its
 * own: not on any tape and not aliasing the caller's grad tensor.  Called
 * with leaf_grad_lock held. */
static int finalize_leaf(const engine *e, tg_tensor *leaf)
{
    tg_tensor *g = leaf->grad, *c = NULL;
    if (e->req.create_graph || !g || tg__grad_is_own(g)) return TG_OK;
    if (g->sparse && g->refcount == 1) return TG_OK;   /* its parts are its own */
    TG_TRY(tg_tensor_clone(&c, g));
    tg_tensor_set_grad(leaf, c);
    return TG_OK;
}

/* leaf's .grad += h (the leaf's total gradient, borrowed; m is the leaf's
 * meta).  As PyTorch's AccumulateGrad: without create_graph the sum is
 * written into the existing .grad when that is the leaf's own tensor of its
 * dtype and shape, so a pointer to it stays valid and holds the sum; else
 * (no .grad yet, one shared with anything, or create_graph, where the sum
 * is recorded) .grad becomes a new tensor.  Owning g means that h, which
 * this backward holds, cannot share g's storage.  Called with
 * leaf_grad_lock held. */
static int accumulate_leaf(const engine *e, tg_tensor *leaf, tg_tensor *h, const tg_meta *m)
{
    tg_tensor *g = leaf->grad;
    if (sums_in_place(e, g, m) && h->sparse) {   /* a dense .grad takes a sparse sum in place */
        tg__sparse_add_into(g, h);
        return TG_OK;
    }
    if (sums_in_place(e, g, m)) return tg__add_over(g, h);
    return accumulate(&leaf->grad, h);
}

/* A hook may remove itself or another one: removal only marks a hook while
 * they run, and the marked ones are freed after the last. */
static int run_post_hooks(tg_tensor *leaf)
{
    int rc = TG_OK;
    leaf->post_hooks_running++;
    for (const tg_post_hook *h = leaf->post_hooks; h && rc >= 0; h = h->next) {
        if (h->removed) continue;
        tg__callback_begin();
        rc = tg__callback_end("backward: a post-accumulate hook", h->fn(leaf, h->user));
    }
    if (--leaf->post_hooks_running == 0) tg__engine_sweep_post_hooks(leaf);
    return rc;
}

/* Accumulates touched leaf k's total gradient into .grad after its hooks
 * (tg_backward), then runs its post-accumulate hooks on the final .grad; or
 * hands it to the result slots (tg_grad, which, as PyTorch's autograd.grad,
 * runs no leaf hooks: they belong to accumulation).  Does nothing for a leaf
 * with nothing pending (delivered already, or an early leaf no gradient
 * reached). */
static int deliver_leaf(engine *e, int k)
{
    tg_tensor *leaf = e->touched[k]->leaf, *h = e->touched[k]->pending;
    if (!h) return TG_OK;
    tg_meta m;
    int rc = TG_OK;
    e->touched[k]->pending = NULL;
    tg__meta_of(&m, leaf);
    rc = check_leaf_unchanged(leaf, h, &m);
    if (rc >= 0 && e->req.accumulate) {
        rc = run_hooks(&leaf->hooks, &h);
        if (rc >= 0) rc = check_grad("a hook", 0, h, &m);
        if (rc >= 0) {
            pthread_mutex_lock(&leaf_grad_lock);
            rc = accumulate_leaf(e, leaf, h, &m);
            if (rc >= 0 && leaf->post_hooks) rc = finalize_leaf(e, leaf);
            pthread_mutex_unlock(&leaf_grad_lock);
        }
        if (rc >= 0 && leaf->post_hooks) rc = run_post_hooks(leaf);
    }
    int j = e->req.accumulate ? -1 : tg__slot_index_first(&e->by_tensor, leaf);
    for (; rc >= 0 && j >= 0; j = e->by_tensor.next[j])
        rc = accumulate(&e->req.results[j], h);
    tg_tensor_release(h);
    return rc;
}

static int deliver_leaves(engine *e)
{
    int rc = TG_OK;
    for (int k = 0; k < e->n_touched && rc >= 0; k++) rc = deliver_leaf(e, k);
    return rc;
}

/* tg_backward delivers a leaf with post-accumulate hooks as soon as its
 * gradient is final: right after the lowest-index node with an edge to it
 * has run (nodes run in decreasing index, so none can add to it later).
 * Registering these leaves first, in increasing node index, keeps
 * touched[0, n_early) sorted by ready_at; doing it before any node runs
 * means an index that cannot grow fails the call with nothing delivered. */
static int touch_early_leaves(engine *e)
{
    for (int k = 0; k < e->n_nodes && e->req.accumulate; k++) {
        const tg_node *n = e->nodes[k];
        for (int i = 0; i < n->n_inputs; i++) {
            tg_tensor *leaf = n->edges[i].leaf;
            if (!n->needs_grad[i] || !leaf || !leaf->requires_grad || !leaf->post_hooks)
                continue;
            touched_leaf *x = touch(e, leaf);
            if (!x) return TG_ENOMEM;
            if (x->ready_at < 0) x->ready_at = k;
        }
    }
    e->n_early = e->n_touched;
    return TG_OK;
}

static int index_of(const tg_node *n) { return n->dependencies - 1; }

/* Passes grad_in (borrowed), the gradient of input i of node, on. */
static int route(engine *e, const tg_node *node, int i, tg_tensor *grad_in)
{
    TG_TRY(check_grad(node->op->name, i, grad_in, &node->in_meta[i]));
    const tg_edge *edge = &node->edges[i];
    if (edge->leaf) return route_leaf(e, edge->leaf, grad_in);
    if (!edge->fn) return TG_OK;
    TG_ASSERT(index_of(edge->fn) >= 0 && index_of(edge->fn) < index_of(node));
    if (!e->flows[index_of(edge->fn)] && !node_is_target(e, edge->fn)) return TG_OK;
    return accumulate_pending(e, &edge->fn->grad_accum, grad_in, &node->in_meta[i]);
}

/* flows[k]: some target is reachable through node k's backward.  Producers
 * come first in e->nodes, so one forward pass settles it. */
static void compute_flows(engine *e)
{
    for (int k = 0; k < e->n_nodes; k++) {
        const tg_node *n = e->nodes[k];
        bool f = false;
        for (int i = 0; i < n->n_inputs && !f; i++) {
            if (!n->needs_grad[i]) continue;
            const tg_edge *edge = &n->edges[i];
            if (edge->leaf) f = leaf_is_target(e, edge->leaf);
            else if (edge->fn) f = e->flows[index_of(edge->fn)] || node_is_target(e, edge->fn);
        }
        e->flows[k] = f;
    }
}

/* A backward writes gradients into grad_in[0, n_inputs) only, but is handed
 * all TG_NODE_MAX_INPUTS slots: one it wrote past its inputs is released
 * here (no one else would) and refused, unless rc is an error already. */
static int check_extra_slots(const tg_node *n, tg_tensor **grad_in, int rc)
{
    int first = -1;
    for (int i = n->n_inputs; i < TG_NODE_MAX_INPUTS; i++) {
        if (!grad_in[i]) continue;
        if (first < 0) first = i;
        tg_tensor_release(grad_in[i]);
        grad_in[i] = NULL;
    }
    if (rc < 0 || first < 0) return rc;
    return tg__error(TG_EGRAD, "backward: %s wrote a gradient into grad_in[%d]; the op has %d "
                               "input%s", n->op->name, first, n->n_inputs,
                     n->n_inputs == 1 ? "" : "s");
}

/* run_node_into's answer when the node's input gradient cannot be added
 * in place: run its backward. */
#define TG__NOT_INTO 1

/* Adds node n's input gradient straight into the pending sum of the node
 * that made its input, by the op's backward_into (tapegrad/op.h): when the
 * op's first input is the only one that needs a gradient (an index
 * beside it never does), comes from a node whose gradient is wanted, and
 * whose pending sum is absent (a new zero tensor) or the backward's own.
 * Else TG__NOT_INTO, nothing done. */
static int run_node_into(engine *e, tg_node *n, tg_tensor *g)
{
    const tg_edge *edge = &n->edges[0];
    if (n->n_inputs < 1 || !n->needs_grad[0] || edge->leaf || !edge->fn) return TG__NOT_INTO;
    for (int i = 1; i < n->n_inputs; i++)
        if (n->needs_grad[i]) return TG__NOT_INTO;
    tg_node *to = edge->fn;
    if (!e->flows[index_of(to)] && !node_is_target(e, to)) return TG__NOT_INTO;
    const tg_meta *m = &n->in_meta[0];
    tg_tensor *acc = to->grad_accum;
    if (acc && !sums_in_place(e, acc, m)) return TG__NOT_INTO;
    bool fresh = acc == NULL;
    if (fresh && !(acc = tg__tensor_empty(m->dtype, m->ndim, m->shape))) return TG_ENOMEM;
    if (tg__trace_enabled())
        fprintf(stderr, "[tape] backward #%llu %s (into)\n", (unsigned long long)n->seq,
                n->op->name);
    tg__callback_begin();
    const int prof = tg__prof_enter(n->op->name, TG_PROFILE_BACKWARD);
    int rc = tg__op_callback_end(n->op->name, "the backward", n->op->backward_into(n, g, acc));
    tg__prof_leave(prof);
    if (fresh && rc >= 0) to->grad_accum = acc;
    else if (fresh) tg_tensor_release(acc);
    if (rc >= 0 && !e->req.retain_graph) tg__node_release_saved(n);
    return rc;
}

static int run_node(engine *e, tg_node *n)
{
    tg_tensor *g = n->grad_accum, *grad_in[TG_NODE_MAX_INPUTS] = {0};
    n->grad_accum = NULL;
    int slot = node_target_slot(e, n), rc = TG_OK;
    if (!g || (!e->flows[index_of(n)] && slot < 0)) goto done;
    /* tg_grad returns a non-leaf input's gradient as it arrives; the node's
     * hooks then act on what goes on through it (PyTorch's autograd.grad) */
    for (; rc >= 0 && slot >= 0; slot = e->by_fn.next[slot])
        rc = accumulate(&e->req.results[slot], g);
    if (rc < 0 || !e->flows[index_of(n)]) goto done;
    rc = run_hooks(&n->hooks, &g);
    if (rc >= 0) rc = check_grad("a hook", 0, g, &n->out_meta);
    if (rc < 0) goto done;
    if (g->sparse) {   /* no backward reads a sparse gradient (tapegrad/sparse.h) */
        rc = tg__error(TG_EUNSUPPORTED, "%s: its backward was handed a sparse gradient; a "
                                        "sparse gradient (an Embedding with sparse=true) may "
                                        "only go to a leaf, such as the embedding's weight",
                       n->op->name);
        goto done;
    }
    if (n->released) {
        rc = tg__error(TG_EGRAD, "%s: backward through a graph that was already freed: "
                                 "pass retain_graph", n->op->name);
        goto done;
    }
    if (e->req.create_graph && !n->op->double_backward) {
        /* its backward is not made of recorded ops: a graph of it would give
         * wrong higher derivatives (PyTorch's once_differentiable) */
        rc = tg__error(TG_EGRAD, "%s: create_graph through an op whose backward is not "
                                 "differentiable (its schema says double_backward = false)",
                       n->op->name);
        goto done;
    }
    if (tg__trace_enabled())
        fprintf(stderr, "[tape] backward #%llu %s\n", (unsigned long long)n->seq, n->op->name);
    /* A learner watches (steps.c).  The step shows g as it arrived: the extra
     * reference keeps a backward from reusing g's buffer in place (one it
     * may take when it holds the only reference; the bits are the same). */
    bool watched = e->req.on_step || tg__trace_level() >= 2;
    if (!watched && n->op->backward_into && !e->req.create_graph) {
        rc = run_node_into(e, n, g);
        if (rc != TG__NOT_INTO) goto done;
        rc = TG_OK;
    }
    tg_tensor *shown = watched ? tg_tensor_retain(g) : NULL;
    tg__callback_begin();
    const int prof = tg__prof_enter(n->op->name, TG_PROFILE_BACKWARD);
    rc = tg__op_callback_end(n->op->name, "the backward", n->op->backward(n, g, grad_in));
    tg__prof_leave(prof);
    rc = check_extra_slots(n, grad_in, rc);
    if (rc >= 0 && watched)
        rc = tg__backward_step(e->req.on_step, e->req.step_user, e->n_steps++, n, g, grad_in);
    tg_tensor_release(shown);
    for (int i = 0; rc >= 0 && i < n->n_inputs; i++)
        if (grad_in[i] && n->needs_grad[i]) rc = route(e, n, i, grad_in[i]);
    if (rc >= 0 && !e->req.retain_graph) tg__node_release_saved(n);
done:
    for (int i = 0; i < n->n_inputs; i++) tg_tensor_release(grad_in[i]);
    tg_tensor_release(g);
    return rc;
}

/* Seeds root r with its gradient (borrowed). */
static int seed(engine *e, tg_tensor *root, tg_tensor *g)
{
    if (root->grad_fn) return accumulate(&root->grad_fn->grad_accum, g);
    return route_leaf(e, root, g);
}

static int finalize_leaves(engine *e)
{
    int rc = TG_OK;
    pthread_mutex_lock(&leaf_grad_lock);
    for (int i = 0; i < e->n_touched && rc >= 0; i++) rc = finalize_leaf(e, e->touched[i]->leaf);
    pthread_mutex_unlock(&leaf_grad_lock);
    return rc;
}

static int finalize_results(engine *e)
{
    for (int j = 0; j < e->req.n_targets && !e->req.create_graph; j++) {
        tg_tensor *g = e->req.results[j], *d = NULL;
        if (!g || (!g->requires_grad && !g->grad_fn)) continue;
        TG_TRY(tg_tensor_detach(&d, g));
        tg_tensor_release(g);
        e->req.results[j] = d;
    }
    return TG_OK;
}

_Thread_local const tg__engine_req *tg__engine_current;

static int run(engine *e, int n_roots, tg_tensor *const *roots, tg_tensor *const *grads)
{
    bool prev = tg_set_grad_enabled(e->req.create_graph);
    bool prev_autocast = tg__autocast_suspend(true);   /* grads keep their forward dtypes */
    const tg__engine_req *outer = tg__engine_current;
    tg__engine_current = &e->req;
    int rc = index_targets(e);
    if (rc >= 0) rc = tg__tape_collect(roots, n_roots, &e->nodes, &e->n_nodes);
    if (rc < 0) goto out;
    e->flows = tg__calloc((size_t)e->n_nodes + 1, sizeof *e->flows);
    if (!e->flows) {
        rc = TG_ENOMEM;
        goto out;
    }
    for (int k = 0; k < e->n_nodes; k++) e->nodes[k]->dependencies = k + 1;
    compute_flows(e);
    rc = touch_early_leaves(e);
    for (int r = 0; r < n_roots && rc >= 0; r++) rc = seed(e, roots[r], grads[r]);
    int early = e->n_early - 1;
    for (int k = e->n_nodes - 1; k >= 0 && rc >= 0; k--) {
        rc = run_node(e, e->nodes[k]);
        for (; rc >= 0 && early >= 0 && e->touched[early]->ready_at >= k; early--)
            rc = deliver_leaf(e, early);
    }
    if (rc >= 0) rc = deliver_leaves(e);
out:
    for (int k = 0; k < e->n_nodes; k++) {
        tg_tensor_release(e->nodes[k]->grad_accum);
        e->nodes[k]->grad_accum = NULL;
        e->nodes[k]->dependencies = 0;
    }
    if (rc >= 0) rc = e->req.accumulate ? finalize_leaves(e) : finalize_results(e);
    HASH_CLEAR(hh, e->by_leaf);
    for (int i = 0; i < e->n_touched; i++) {
        tg_tensor_release(e->touched[i]->pending);
        tg_tensor_release(e->touched[i]->leaf);
        free(e->touched[i]);
    }
    free(e->touched);
    tg__slot_index_free(&e->by_tensor);
    tg__slot_index_free(&e->by_fn);
    free(e->flows);
    free(e->nodes);
    tg__engine_current = outer;
    tg__autocast_suspend(prev_autocast);
    tg_set_grad_enabled(prev);
    return rc;
}

int tg__engine_run(const tg__engine_req *r, int n_roots, tg_tensor *const *roots,
                   tg_tensor *const *grads)
{
    engine e = {.req = *r};
    return run(&e, n_roots, roots, grads);
}
