/* src/autograd/tape.h - the tape: nodes, the context an op call's forward and
 * backward share, grad mode and autocast state (prefix tg__).  Below the ops,
 * which record onto it; the backward engine (src/engine) walks it. */
#ifndef TAPEGRAD_AUTOGRAD_TAPE_H
#define TAPEGRAD_AUTOGRAD_TAPE_H

#include "core/core.h"
#include "tapegrad/op.h"
#include "tapegrad/registry.h"

typedef tg_op_ctx tg_ctx;   /* what forward/backward see of their node */

/* ---- nodes (the tape) ----------------------------------------------------- */

#define TG_NODE_MAX_INPUTS TG_OP_MAX_INPUTS
#define TG_NODE_MAX_SAVED TG_OP_MAX_SAVED

typedef struct tg_edge {
    tg_node *fn;          /* the input's node (retained), or NULL */
    tg_tensor *leaf;      /* the input itself if it is a leaf requiring grad (retained) */
} tg_edge;

typedef struct tg_meta {
    tg_dtype dtype;
    int ndim;
    int64_t shape[TG_MAX_DIMS];
} tg_meta;

/* t's dtype and shape into m (t not NULL). */
void tg__meta_of(tg_meta *m, const tg_tensor *t);
/* Whether t has exactly the dtype and shape in m. */
bool tg__meta_matches(const tg_tensor *t, const tg_meta *m);

typedef struct tg_saved {
    tg_tensor *t;         /* retained */
    uint64_t version;     /* storage version when saved */
    /* An AMP cast of an input that the forward saved is kept as the input
     * itself (t) and cast again when backward asks for it (recast, owned):
     * the tape then holds no second copy of the activation in another dtype.
     * recast gets the forward cast's node as its grad_fn, so gradients that
     * reach it (higher derivatives) add up with the first-order ones there
     * before the cast's backward, as they would through the saved cast. */
    bool is_cast;
    tg_dtype cast_to;
    tg_tensor *recast;
    tg_node *cast_fn;     /* the forward cast's node (retained; NULL if not recorded) */
} tg_saved;

struct tg_node {
    _Atomic int refcount;
    const tg_op_schema *op;
    uint64_t seq;                          /* recording order, one process-wide counter */
    int n_inputs;
    tg_edge edges[TG_NODE_MAX_INPUTS];
    tg_meta in_meta[TG_NODE_MAX_INPUTS];   /* dtype/shape of each input (ndim -1: absent) */
    bool needs_grad[TG_NODE_MAX_INPUTS];
    tg_meta out_meta;
    int n_saved;
    tg_saved saved[TG_NODE_MAX_SAVED];
    int n_scalars;
    double scalars[TG_OP_MAX_SCALARS];     /* tg_op_ctx_save_scalar */
    void *params;                          /* copy of the op's params, owned */
    size_t params_size;
    bool released;                         /* saved tensors/params freed after backward */
    tg_hook *hooks;                        /* hooks of the output tensor */
    /* For views of the tape (dot.c, trace, the HTML page).  The output's name
     * is copied here when it is named (tg__grad_fn_renamed), because the node
     * does not own its output (that would be a cycle) and the name must
     * outlive it.  out is the output itself, borrowed: cleared when that
     * tensor is freed.  in_id is each input's address at record time, kept as
     * a number (the input may be freed since) and only compared, to tell
     * which saved tensor is which input: a saved tensor has been alive since
     * the record, so an equal address is the same tensor. */
    char name[32];
    tg_tensor *out;
    uintptr_t in_id[TG_NODE_MAX_INPUTS];
    /* engine scratch during one backward */
    tg_tensor *grad_accum;
    int dependencies;
    uint64_t read_mark;   /* tg__tape_collect_read's visit mark */
};

tg_node *tg__node_retain(tg_node *n);
void tg__node_release(tg_node *n);
/* After a forward: the saved tensors that are the dispatcher's AMP casts of
 * inputs (cast[i] of in[i], NULL where not cast) are replaced by the inputs
 * themselves, to be cast again in tg__ctx_saved. */
void tg__node_save_uncast(tg_node *n, int n_in, tg_tensor *const *in, tg_tensor *const *cast);
/* Releases saved tensors and params after backward (not the edges' nodes). */
void tg__node_release_saved(tg_node *n);
/* A new node (refcount 1, next process-wide seq) for op applied to in[0..n):
 * edges, input metadata and needs_grad filled in; params and out_meta left
 * for the caller.  NULL with TG_ENOMEM set on failure. */
tg_node *tg__node_new(const tg_op_schema *op, int n, tg_tensor *const *in);
/* Number of nodes alive in the process (tests check memory stays flat). */
long tg__node_live_count(void);
/* The nodes reachable from the grad_fn of roots[0..n_roots), sorted by
 * increasing seq, in a malloc'd array (*nodes, freed by the caller; the node
 * pointers are borrowed).  Uses each node's `dependencies` field as a mark and
 * leaves it 0.  TG_ENOMEM, or TG_EGRAD when a backward is already running over
 * the same nodes. */
int tg__tape_collect(tg_tensor *const *roots, int n_roots, tg_node ***nodes, int *count);
/* The same for reading the tape (printing, DOT): marks nodes in read_mark,
 * with a number of its own per call, so it also works while a backward runs
 * over them (from a tg_backward_steps callback).  TG_ENOMEM only. */
int tg__tape_collect_read(tg_tensor *const *roots, int n_roots, tg_node ***nodes, int *count);
/* The seq the next node recorded will get: nodes recorded from now on have
 * seq >= this. */
uint64_t tg__tape_seq_next(void);
/* Walks back from the grad_fn of roots[0..n_roots) through the nodes
 * recorded at or after `since` (seq >= since) only, and sets *older to the
 * first node recorded before since that one of them leads to (borrowed;
 * NULL when none does): whether the graph of a piece of code reached back
 * into a graph made before it ran.  Marks read_mark as
 * tg__tape_collect_read does.  TG_ENOMEM only. */
int tg__tape_find_older(tg_tensor *const *roots, int n_roots, uint64_t since,
                        const tg_node **older);

/* Saves t for backward (retained; its version recorded).  Returns the slot. */
int tg__ctx_save(tg_ctx *ctx, tg_tensor *t);
/* tg__ctx_save when keep is true; otherwise the slot is taken but left
 * empty.  For an operand that only the gradient of another input reads (a of
 * a*b is read for b's gradient alone): when that input needs no gradient,
 * the operand is not kept alive until backward, as PyTorch saves `self` of
 * mul and mm only when `other` requires grad.  Reading an empty slot is a
 * broken invariant of the op (TG_ASSERT). */
int tg__ctx_save_if(tg_ctx *ctx, tg_tensor *t, bool keep);
/* The i-th saved tensor (borrowed) after checking its version:
 * TG_EINPLACE with a message naming the op when it was modified in place,
 * TG_EGRAD when the graph was already freed. */
int tg__ctx_saved(tg_ctx *ctx, int i, tg_tensor **t);
/* For a saved output y of the op itself (saved as a detached alias: saving y
 * would make the cycle y -> node -> y): a new reference to y, after the same
 * checks as tg__ctx_saved.  In grad mode (a create_graph backward) it is an
 * alias whose grad_fn is ctx, as y's own was, so that gradients of the
 * backward's result reach the input through this op again; the caller
 * releases it, so no cycle outlives the call. */
int tg__ctx_saved_output(tg_ctx *ctx, int i, tg_tensor **t);
static inline const void *tg__ctx_params(const tg_ctx *ctx) { return ctx->params; }
static inline bool tg__ctx_needs_grad(const tg_ctx *ctx, int i) { return ctx->needs_grad[i]; }
static inline const tg_meta *tg__ctx_input_meta(const tg_ctx *ctx, int i) { return &ctx->in_meta[i]; }

/* True when TG_TRACE is 1 or 2 (read once); tg__trace_level is that number
 * (0 when unset): 2 adds each backward step's gradients (tg__backward_step). */
bool tg__trace_enabled(void);
int tg__trace_level(void);

/* ---- views of the tape (tape_notes.c) ---- */
/* The vector-Jacobian product op's backward applies, as a formula in g
 * (the output's gradient) and the inputs a, b, ...: tg__vjp_given, the
 * schema's vjp or NULL when it has none (NULL or ""); tg__vjp_formula, the
 * same with a generic text for none.  Static text. */
const char *tg__vjp_given(const tg_op_schema *op);
const char *tg__vjp_formula(const tg_op_schema *op);
/* The scalar operand of n (add_scalar's s, leaky_relu's slope, ...), and
 * the symbol the formula uses for it (the schema's scalar); false when the
 * op has none. */
bool tg__node_scalar(const tg_node *n, double *value, const char **symbol);
/* "[v0, v1, ...]": up to max_elems values of t (row-major), into buf. */
char *tg__values_str(char *buf, size_t size, const tg_tensor *t, int max_elems);
/* One step of a backward (steps.c): prints it when TG_TRACE=2, then calls
 * fn (may be NULL) with it.  g and grad_in are the node's, borrowed. */
int tg__backward_step(tg_backward_step_fn fn, void *user, int index, const tg_node *n,
                      const tg_tensor *g, tg_tensor *const *grad_in);
/* The DOT (and SVG) id of a leaf, and of input i of node n (dot.c). */
void tg__dot_leaf_id(char *buf, size_t size, const tg_tensor *leaf);
void tg__dot_input_id(char *buf, size_t size, const tg_node *n, int i);

/* ---- autocast state (thread-local) --------------------------------------- */
bool tg__autocast_dtype(tg_dtype *dt);
/* Turns autocast off (true) or back on for this thread regardless of the
 * scopes; returns the previous setting.  The backward engine suspends it. */
bool tg__autocast_suspend(bool suspend);
/* Where the thread's autocast scopes stood before tg__autocast_enter. */
typedef struct tg__autocast_mark {
    int depth;
    bool suspended;
} tg__autocast_mark;
/* Opens a scope of autocast on in dt (enabled) or off, lifting a
 * suspension, so that ops run as they did where that state was recorded
 * (a recomputed block run again in the backward).  TG_EINVAL when the
 * scopes are nested too deep.  tg__autocast_leave(mark) closes it and any
 * scope opened inside it left open, and puts the suspension back. */
int tg__autocast_enter(bool enabled, tg_dtype dt, tg__autocast_mark *mark);
void tg__autocast_leave(const tg__autocast_mark *mark);

#endif
