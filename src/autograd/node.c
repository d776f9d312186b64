/* Tape nodes: creation, refcounting (iterative release, so a long tape cannot
 * overflow the C stack), saved tensors with their version check, and the
 * walk that collects a tape. */
#include <stdatomic.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"

/* One counter for the process, not per thread: a graph may be recorded on
 * several threads (a tensor made on one, used on another), and the engine's
 * order needs every node numbered after the nodes of its inputs.  Relaxed is
 * enough: a thread that uses a tensor saw its creation happen before, and
 * the modification order of one atomic respects happens-before. */
static atomic_uint_fast64_t tg__next_seq = 1;
static atomic_long tg__live_nodes;

long tg__node_live_count(void) { return atomic_load(&tg__live_nodes); }

int tg__trace_level(void)
{
    /* Read once; racing first calls compute the same value. */
    static atomic_int cached = -1;
    int v = atomic_load(&cached);
    if (v < 0) {
        const char *e = getenv("TG_TRACE");
        v = e && (e[0] == '1' || e[0] == '2') && e[1] == '\0' ? e[0] - '0' : 0;
        atomic_store(&cached, v);
    }
    return v;
}

bool tg__trace_enabled(void) { return tg__trace_level() >= 1; }

void tg__meta_of(tg_meta *m, const tg_tensor *t)
{
    m->dtype = t->dtype;
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

bool tg__meta_matches(const tg_tensor *t, const tg_meta *m)
{
    bool ok = t->dtype == m->dtype && t->ndim == m->ndim;
    for (int d = 0; ok && d < m->ndim; d++) ok = t->shape[d] == m->shape[d];
    return ok;
}

/* An absent input (NULL) has ndim -1. */
static void fill_meta(tg_meta *m, const tg_tensor *t)
{
    if (!t) {
        m->dtype = TG_F32;
        m->ndim = -1;
        return;
    }
    tg__meta_of(m, t);
}

/* Core's calls into the tape (core.h): t, made by n, is freed or renamed. */
static void output_freed(tg_node *n, const tg_tensor *t)
{
    if (n->out == t) n->out = NULL;
    tg__node_release(n);
}

static void output_renamed(tg_node *n, const tg_tensor *t)
{
    if (n->out == t) memcpy(n->name, t->name, sizeof n->name);
}

tg_node *tg__node_new(const tg_op_schema *op, int n, tg_tensor *const *in)
{
    TG_ASSERT(op && n >= 0 && n <= TG_NODE_MAX_INPUTS);
    tg_node *node = tg__calloc(1, sizeof *node);
    if (!node) return NULL;
    /* from now on a tensor may own a node: core reaches it through these */
    atomic_store_explicit(&tg__grad_fn_release, output_freed, memory_order_release);
    atomic_store_explicit(&tg__grad_fn_renamed, output_renamed, memory_order_release);
    node->refcount = 1;
    node->op = op;
    node->seq = atomic_fetch_add_explicit(&tg__next_seq, 1, memory_order_relaxed);
    node->n_inputs = n;
    for (int i = 0; i < n; i++) {
        tg_tensor *t = in[i];
        fill_meta(&node->in_meta[i], t);
        node->in_id[i] = (uintptr_t)t;
        node->needs_grad[i] = t && t->requires_grad;
        if (!t) continue;
        if (t->grad_fn) node->edges[i].fn = tg__node_retain(t->grad_fn);
        else if (t->requires_grad) node->edges[i].leaf = tg_tensor_retain(t);
    }
    atomic_fetch_add(&tg__live_nodes, 1);
    return node;
}

tg_node *tg__node_retain(tg_node *n)
{
    if (n) {
        TG_ASSERT(n->refcount > 0);
        n->refcount++;
    }
    return n;
}

/* A growable stack of nodes whose refcount reached zero. */
typedef struct node_stack {
    tg_node **items;
    size_t len, cap;
    tg_node *local[32];
} node_stack;

static void stack_push(node_stack *s, tg_node *n)
{
    if (s->len == s->cap) {
        size_t cap = s->cap * 2;
        tg_node **items = s->items == s->local ? malloc(cap * sizeof *items)
                                               : realloc(s->items, cap * sizeof *items);
        TG_ASSERT(items != NULL);   /* cannot report an error from a release */
        if (s->items == s->local) memcpy(items, s->local, s->len * sizeof *items);
        s->items = items;
        s->cap = cap;
    }
    s->items[s->len++] = n;
}

/* Drops one reference to n; pushes it when that was the last. */
static void unref_onto(node_stack *s, tg_node *n)
{
    if (!n) return;
    TG_ASSERT(n->refcount > 0);
    if (--n->refcount == 0) stack_push(s, n);
}

/* Releases a tensor held by a node.  When this is its last reference, its
 * grad_fn is taken over first and queued on s, so that freeing a chain
 * x1 = f(x0), x2 = f(x1), ... does not recurse through tg_tensor_release. */
static void release_tensor_onto(node_stack *s, tg_tensor *t)
{
    if (!t) return;
    if (t->refcount == 1 && t->grad_fn) {
        tg_node *fn = t->grad_fn;
        if (fn->out == t) fn->out = NULL;
        t->grad_fn = NULL;
        unref_onto(s, fn);
    }
    tg_tensor_release(t);
}

static void free_saved(node_stack *s, tg_node *n)
{
    for (int i = 0; i < n->n_saved; i++) {
        release_tensor_onto(s, n->saved[i].recast);
        release_tensor_onto(s, n->saved[i].t);
        unref_onto(s, n->saved[i].cast_fn);
        n->saved[i].t = n->saved[i].recast = NULL;
        n->saved[i].cast_fn = NULL;
    }
    n->n_saved = 0;
    free(n->params);
    n->params = NULL;
    n->params_size = 0;
}

static void free_node(node_stack *s, tg_node *n)
{
    for (int i = 0; i < n->n_inputs; i++) {
        unref_onto(s, n->edges[i].fn);
        release_tensor_onto(s, n->edges[i].leaf);
    }
    free_saved(s, n);
    release_tensor_onto(s, n->grad_accum);
    for (tg_hook *h = n->hooks, *next; h; h = next) {
        next = h->next;
        free(h);
    }
    free(n);
    atomic_fetch_sub(&tg__live_nodes, 1);
}

void tg__node_release(tg_node *n)
{
    if (!n) return;
    node_stack s = {.items = NULL, .len = 0, .cap = 32};
    s.items = s.local;
    unref_onto(&s, n);
    while (s.len > 0) free_node(&s, s.items[--s.len]);
    if (s.items != s.local) free(s.items);
}

void tg__node_release_saved(tg_node *n)
{
    if (!n) return;
    node_stack s = {.items = NULL, .len = 0, .cap = 32};
    s.items = s.local;
    free_saved(&s, n);
    n->released = true;
    while (s.len > 0) free_node(&s, s.items[--s.len]);
    if (s.items != s.local) free(s.items);
}

int tg__ctx_save(tg_ctx *ctx, tg_tensor *t)
{
    TG_ASSERT(ctx != NULL && t != NULL);
    TG_ASSERT(ctx->n_saved < TG_NODE_MAX_SAVED);
    int slot = ctx->n_saved++;
    ctx->saved[slot] = (tg_saved){.t = tg_tensor_retain(t), .version = t->storage->version};
    return slot;
}

int tg__ctx_save_if(tg_ctx *ctx, tg_tensor *t, bool keep)
{
    if (keep) return tg__ctx_save(ctx, t);
    TG_ASSERT(ctx != NULL && ctx->n_saved < TG_NODE_MAX_SAVED);
    int slot = ctx->n_saved++;
    ctx->saved[slot] = (tg_saved){0};
    return slot;
}

void tg__node_save_uncast(tg_node *n, int n_in, tg_tensor *const *in, tg_tensor *const *cast)
{
    for (int k = 0; k < n->n_saved; k++)
        for (int i = 0; i < n_in; i++) {
            tg_saved *sv = &n->saved[k];
            if (!cast[i] || sv->t != cast[i] || sv->is_cast) continue;
            /* the cast's own reference is still held by the caller */
            tg_tensor_release(sv->t);
            *sv = (tg_saved){.t = tg_tensor_retain(in[i]), .version = in[i]->storage->version,
                             .is_cast = true, .cast_to = cast[i]->dtype,
                             .cast_fn = tg__node_retain(cast[i]->grad_fn)};
            break;
        }
}

int tg__ctx_saved(tg_ctx *ctx, int i, tg_tensor **t)
{
    TG_ASSERT(ctx != NULL && t != NULL);
    TG_CHECK(!ctx->released, TG_EGRAD,
             "%s: backward through a graph that was already freed: pass retain_graph",
             ctx->op->name);
    TG_ASSERT(i >= 0 && i < ctx->n_saved);
    tg_saved *sv = &ctx->saved[i];
    TG_ASSERT(sv->t != NULL);   /* an empty slot of tg__ctx_save_if */
    if (sv->t->storage->version != sv->version) {
        char desc[160], shape[80];
        tg_shape_str(shape, sizeof shape, sv->t->ndim, sv->t->shape);
        if (sv->t->name[0]) snprintf(desc, sizeof desc, "'%s' %s", sv->t->name, shape);
        else snprintf(desc, sizeof desc, "of shape %s", shape);
        return tg__error(TG_EINPLACE,
                         "%s: saved tensor #%d %s was modified in place (version %llu, "
                         "saved at version %llu)",
                         ctx->op->name, i, desc, (unsigned long long)sv->t->storage->version,
                         (unsigned long long)sv->version);
    }
    if (sv->is_cast) {
        /* cast again; linked to the forward's cast node, so that higher
         * derivatives reach the input through it (see tg_saved) */
        if (!sv->recast) {
            bool prev = tg_set_grad_enabled(false);
            int rc = tg_tensor_to_dtype(&sv->recast, sv->t, sv->cast_to);   /* as to_dtype's forward */
            if (rc == TG_OK) tg__bf16_note_cast(sv->recast, sv->t);
            tg_set_grad_enabled(prev);
            TG_TRY(rc);
            if (sv->cast_fn) {
                sv->recast->grad_fn = tg__node_retain(sv->cast_fn);
                sv->recast->requires_grad = true;
            }
        }
        *t = sv->recast;
        return TG_OK;
    }
    *t = sv->t;
    return TG_OK;
}

int tg__ctx_saved_output(tg_ctx *ctx, int i, tg_tensor **t)
{
    tg_tensor *y = NULL;
    TG_TRY(tg__ctx_saved(ctx, i, &y));
    if (!tg_grad_enabled()) {
        *t = tg_tensor_retain(y);
        return TG_OK;
    }
    tg_tensor *alias;
    TG_TRY(tg_tensor_detach(&alias, y));
    alias->grad_fn = tg__node_retain(ctx);
    alias->requires_grad = true;
    *t = alias;
    return TG_OK;
}

/* ---- collecting a tape ----------------------------------------------------- */

static int cmp_seq(const void *a, const void *b)
{
    const tg_node *x = *(tg_node *const *)a, *y = *(tg_node *const *)b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Appends n to the growable array (*arr, *len, *cap); false on ENOMEM. */
static bool push_node(tg_node ***arr, int *len, int *cap, tg_node *n)
{
    if (*len == *cap) {
        int ncap = *cap ? *cap * 2 : 64;
        tg_node **p = realloc(*arr, (size_t)ncap * sizeof *p);
        if (!p) return false;
        *arr = p;
        *cap = ncap;
    }
    (*arr)[(*len)++] = n;
    return true;
}

/* Discovers n: marks it and pushes it on both the result and the work stack.
 * For a backward (read 0) the mark is `dependencies == -1`, and a node that
 * a running backward counts is refused; for reading, read_mark == read. */
static int discover(tg_node *n, uint64_t read, tg_node ***out, int *len, int *cap,
                    tg_node ***work, int *wlen, int *wcap)
{
    if (!n || (read ? n->read_mark == read : n->dependencies == -1)) return TG_OK;
    if (read) {
        n->read_mark = read;
    } else {
        TG_CHECK(n->dependencies == 0, TG_EGRAD,
                 "backward: node #%llu (%s) is already part of a running backward",
                 (unsigned long long)n->seq, n->op->name);
        n->dependencies = -1;
    }
    if (!push_node(out, len, cap, n)) {
        if (!read) n->dependencies = 0;
        return tg__error(TG_ENOMEM, "backward: out of memory collecting the tape");
    }
    /* On failure here n is in *out, whose marks the caller clears. */
    if (!push_node(work, wlen, wcap, n))
        return tg__error(TG_ENOMEM, "backward: out of memory collecting the tape");
    return TG_OK;
}

static int collect(tg_tensor *const *roots, int n_roots, uint64_t read, tg_node ***nodes,
                   int *count)
{
    tg_node **out = NULL, **work = NULL;
    int len = 0, cap = 0, wlen = 0, wcap = 0, rc = TG_OK;
    /* Iterative DFS over the marks discover sets. */
    for (int r = 0; r < n_roots && rc == TG_OK; r++)
        if (roots[r])
            rc = discover(roots[r]->grad_fn, read, &out, &len, &cap, &work, &wlen, &wcap);
    while (rc == TG_OK && wlen > 0) {
        tg_node *n = work[--wlen];
        for (int i = 0; i < n->n_inputs && rc == TG_OK; i++)
            rc = discover(n->edges[i].fn, read, &out, &len, &cap, &work, &wlen, &wcap);
    }
    free(work);
    if (!read)
        for (int i = 0; i < len; i++) out[i]->dependencies = 0;
    if (rc < 0) {
        free(out);
        return rc;
    }
    if (len > 1) qsort(out, (size_t)len, sizeof *out, cmp_seq);
    *nodes = out;
    *count = len;
    return TG_OK;
}

int tg__tape_collect(tg_tensor *const *roots, int n_roots, tg_node ***nodes, int *count)
{
    return collect(roots, n_roots, 0, nodes, count);
}

/* A read_mark of its own for one walk over the tape (0 is no mark). */
static uint64_t next_read_mark(void)
{
    static _Atomic uint64_t reads;
    return atomic_fetch_add(&reads, 1) + 1;
}

int tg__tape_collect_read(tg_tensor *const *roots, int n_roots, tg_node ***nodes, int *count)
{
    return collect(roots, n_roots, next_read_mark(), nodes, count);
}

uint64_t tg__tape_seq_next(void)
{
    return atomic_load_explicit(&tg__next_seq, memory_order_relaxed);
}

/* Enters n in tg__tape_find_older's walk: nothing for none or a node seen
 * already; a node recorded before since ends the walk as *older; any other
 * is marked and pushed on the work stack.  TG_ENOMEM when it cannot be. */
static int enter_newer(tg_node *n, uint64_t since, uint64_t mark, const tg_node **older,
                       tg_node ***work, int *wlen, int *wcap)
{
    if (!n || n->read_mark == mark) return TG_OK;
    if (n->seq < since) {
        *older = n;
        return TG_OK;
    }
    n->read_mark = mark;
    return push_node(work, wlen, wcap, n) ? TG_OK : TG_ENOMEM;
}

int tg__tape_find_older(tg_tensor *const *roots, int n_roots, uint64_t since,
                        const tg_node **older)
{
    *older = NULL;
    const uint64_t mark = next_read_mark();
    tg_node **work = NULL;
    int wlen = 0, wcap = 0, rc = TG_OK;
    /* a DFS from each root in turn that enters only nodes recorded at or
     * after since */
    for (int r = 0; r < n_roots && rc == TG_OK && !*older; r++) {
        if (roots[r]) rc = enter_newer(roots[r]->grad_fn, since, mark, older, &work, &wlen, &wcap);
        while (rc == TG_OK && !*older && wlen > 0) {
            tg_node *m = work[--wlen];
            for (int i = 0; i < m->n_inputs && rc == TG_OK && !*older; i++)
                rc = enter_newer(m->edges[i].fn, since, mark, older, &work, &wlen, &wcap);
        }
    }
    free(work);
    if (rc < 0) return tg__error(TG_ENOMEM, "backward: out of memory walking the tape");
    return TG_OK;
}
