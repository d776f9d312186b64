/* tapegrad/autograd.h - the tape, backward, grad modes, hooks, gradcheck, DOT.
 *
 * Every differentiable op that runs while grad mode is on and has at least one
 * input that requires grad records a node: the op's schema, edges to its
 * inputs (their own nodes, or the leaves themselves), the tensors it saved for
 * backward (with their versions) and a copy of its parameters.  The output
 * tensor keeps a reference to its node (its grad_fn); nodes keep references to
 * the nodes of their inputs.  The nodes reachable from a tensor, ordered by the
 * sequence number they were recorded with, are its tape.
 *
 * tg_backward(loss) walks that tape in reverse order.  Each node's backward is
 * written with the same differentiable ops, so with create_graph the gradients
 * are themselves recorded and can be differentiated again.  Without
 * retain_graph a node's saved tensors and edges are released as soon as its
 * backward has run; a second backward through it is TG_EGRAD.
 *
 * Set TG_TRACE=1 in the environment to print each op as it is recorded and as
 * its backward runs; TG_TRACE=2 adds, at each backward step, the
 * vector-Jacobian product applied and the gradients that go in and out
 * (tg_backward_steps).
 */
#ifndef TAPEGRAD_AUTOGRAD_H
#define TAPEGRAD_AUTOGRAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_backward_opts {
    bool retain_graph;   /* keep saved tensors for another backward */
    bool create_graph;   /* record the backward itself (implies retain_graph) */
} tg_backward_opts;
#define TG_BACKWARD_OPTS_INIT {.retain_graph = false, .create_graph = false}

/* Accumulates d(sum(grad * out))/d(leaf) into the .grad of every leaf that
 * requires grad and is reachable from out.  grad may be NULL only when out has
 * one element (then it is 1); a grad of another float dtype is cast to out's.
 * opts may be NULL for the defaults.
 * With create_graph, a leaf's .grad is on a tape that refers back to the
 * leaf, a cycle that outlives every release: tg_tensor_zero_grad the leaf
 * first (torch warns of the same), or take gradients with tg_grad, which
 * stores nothing.  A leaf whose gradient is 0 by the graph's structure (it
 * reaches out only through a constant, such as relu's mask in a gradient
 * penalty's second backward) gets no .grad, where torch's backward formulas
 * often give a tensor of zeros; an optimizer then skips it for that step.
 * Errors: TG_EGRAD if out does not require grad or the graph was freed,
 * TG_ESHAPE if grad's shape differs, TG_EDTYPE for an integer grad,
 * TG_EINPLACE if a saved tensor was modified. */
TG_API int tg_backward(tg_tensor *out, tg_tensor *grad, const tg_backward_opts *opts);

/* One step of a backward, as a learner watches it: the node whose backward
 * just ran, the gradient g of its output that it received (after the
 * output's hooks), and the gradient its vector-Jacobian product produced for
 * each input, before any of them is added to anything.  Everything is
 * borrowed for the duration of the callback. */
#define TG_STEP_MAX_INPUTS 8
typedef struct tg_backward_step {
    int index;                       /* 0, 1, ... in the order the nodes run */
    const struct tg_node *node;      /* the node itself (opaque) */
    uint64_t seq;                    /* its sequence number, "#12" in tg_tape_print */
    const char *op;                  /* its op, "mul" */
    const char *name;                /* its output's name, "" when it has none */
    const char *vjp;                 /* the product it applies: "da = g * b, db = g * a" */
    const tg_tensor *grad_out;       /* g, the gradient of the node's output */
    int n_inputs;
    /* what input i receives, NULL when it needs none (a constant) */
    const tg_tensor *grad_in[TG_STEP_MAX_INPUTS];
    /* where it goes: the node that made input i (its seq), or 0 with the
     * leaf in input_leaf[i] (NULL for a constant) */
    uint64_t input_seq[TG_STEP_MAX_INPUTS];
    const tg_tensor *input_leaf[TG_STEP_MAX_INPUTS];
} tg_backward_step;

/* Called at each step; a negative return aborts the backward with that
 * status (and the callback's message, tg_error_set). */
typedef int (*tg_backward_step_fn)(const tg_backward_step *step, void *user);

/* tg_backward that calls fn at each node, in the order the engine runs
 * them.  The gradients it accumulates are those of tg_backward, bit for
 * bit.  TG_TRACE=2 prints the same steps on stderr for every backward.
 * Errors as tg_backward, and TG_EINVAL for a NULL fn. */
TG_API int tg_backward_steps(tg_tensor *out, tg_tensor *grad, const tg_backward_opts *opts,
                             tg_backward_step_fn fn, void *user);

/* As torch.autograd.grad: grads_out[i] receives a new reference to
 * d(sum_j <grad_outputs[j], outputs[j]>)/d(inputs[i]) or NULL when inputs[i] is
 * not reachable.  grad_outputs may be NULL (all outputs must then have one
 * element).  Nothing is accumulated into .grad, and leaves' hooks do not run;
 * a non-leaf input's gradient is returned before its node's hooks (as
 * PyTorch 1.13's autograd.grad).  TG_EGRAD when an input does not require
 * grad (as PyTorch).  On error grads_out is all NULL. */
TG_API int tg_grad(tg_tensor **grads_out, int n_outputs, tg_tensor *const *outputs,
                   tg_tensor *const *grad_outputs, int n_inputs, tg_tensor *const *inputs,
                   const tg_backward_opts *opts);

/* Grad mode is thread-local and on by default.  tg_set_grad_enabled returns
 * the previous value so scopes nest:  bool prev = tg_set_grad_enabled(false);
 * ... tg_set_grad_enabled(prev); */
TG_API bool tg_grad_enabled(void);
TG_API bool tg_set_grad_enabled(bool enabled);
/* Shorthand scopes: no_grad_begin pushes "off", no_grad_end restores. */
TG_API void tg_no_grad_begin(void);
TG_API void tg_no_grad_end(void);

/* A gradient hook sees the gradient of t when it is computed (before it is
 * accumulated into a leaf's .grad, or passed on by a non-leaf).  It may replace
 * *grad with a new reference (releasing the old one); leaving it NULL is
 * TG_EGRAD.  Returning a negative status aborts the backward with that
 * status and the hook's message (tg_error_set; without one, backward's
 * message names the hook). */
typedef int (*tg_grad_hook_fn)(tg_tensor **grad, void *user);
TG_API int tg_tensor_register_hook(tg_tensor *t, tg_grad_hook_fn fn, void *user);
/* Removes the first registration of (fn, user) from t (PyTorch's
 * handle.remove()); TG_ENOTFOUND when there is none.  A hook may remove
 * itself or another hook while it runs: a hook removed then does not run
 * again. */
TG_API int tg_tensor_remove_hook(tg_tensor *t, tg_grad_hook_fn fn, void *user);

/* A post-accumulate hook (PyTorch's register_post_accumulate_grad_hook) runs
 * during tg_backward once a leaf's gradient is final: after the last node
 * that feeds the leaf has run, its gradient hooks have run and the sum has
 * been added into .grad.  So it runs while the rest of the backward still
 * goes on, and can start work on the finished .grad (a data-parallel
 * all-reduce).  A leaf with such a hook therefore has its .grad updated as
 * soon as its gradient is final rather than at the end of the backward (if
 * a later node fails, that .grad has changed).  The hook receives the leaf
 * (borrowed; read tg_tensor_grad) and must not start another backward.
 * tg_grad runs none (it accumulates nothing).  Hooks run in registration
 * order; a negative return aborts the backward as a gradient hook's does.
 * Leaves only: TG_EINVAL for a non-leaf, TG_EGRAD if t does not require
 * grad. */
typedef int (*tg_post_accumulate_hook_fn)(tg_tensor *leaf, void *user);
TG_API int tg_tensor_register_post_accumulate_hook(tg_tensor *t, tg_post_accumulate_hook_fn fn,
                                                   void *user);
/* Removes the first registration of (fn, user) from t; TG_ENOTFOUND when there
 * is none.  A hook may remove itself or another hook of t while it runs (a
 * one-shot hook): a hook removed then does not run again, in that backward
 * or later. */
TG_API int tg_tensor_remove_post_accumulate_hook(tg_tensor *t, tg_post_accumulate_hook_fn fn,
                                                 void *user);

/* What tg_graph_to_dot_ex draws besides the nodes and their inputs. */
typedef struct tg_dot_opts {
    bool show_values;   /* up to max_elems values of every tensor still alive */
    bool show_grads;    /* up to max_elems values of each leaf's .grad */
    bool show_saved;    /* tensors saved for backward: dashed edges to the node */
    int max_elems;      /* values shown per tensor, >= 0 */
    bool show_vjp;      /* each op's VJP formula as a last line of its label too */
} tg_dot_opts;
#define TG_DOT_OPTS_INIT                                                      \
    {.show_values = false, .show_grads = false, .show_saved = true,           \
     .max_elems = 4, .show_vjp = false}

/* Writes the graph behind t (its tape) as Graphviz DOT, edges in the
 * direction of the forward computation.  Each op node is a box with its
 * sequence number, op, the output's name (tg_tensor_set_name, kept after the
 * output is freed), dtype and shape; each leaf a rounded box with its name;
 * constant inputs and scalar operands (mul_scalar's s) small grey nodes of
 * their own; each tensor is declared once.  An op node whose schema has a
 * vjp (the formula of its backward, "da = g * b, db = g * a" for mul) carries
 * it as its tooltip, which the SVG shows when the pointer rests on the node;
 * show_vjp writes it in the label as well.  Values are read only from
 * tensors still alive: a leaf, a saved tensor, an output the caller holds.
 * opts may be NULL for TG_DOT_OPTS_INIT.  TG_EINVAL for a NULL f or t or a
 * negative max_elems; nothing is written then. */
TG_API int tg_graph_to_dot_ex(FILE *f, const tg_tensor *t, const tg_dot_opts *opts);
/* tg_graph_to_dot_ex with the default options. */
TG_API int tg_graph_to_dot(FILE *f, const tg_tensor *t);
/* Prints the tape of t, one line per node in recording order:
 * "#12 mul  inputs: #10, leaf 'w'  saved: 2  out: f64 (3, 4)". */
TG_API int tg_tape_print(FILE *f, const tg_tensor *t);

/* ---- gradient checking ---- */

/* The function under test: computes *out (a new reference) from inputs.  It
 * is always called in grad mode (as torch's gradcheck calls it), so it may
 * take gradients itself with tg_grad and create_graph, as a function checked
 * for a higher derivative does. */
typedef int (*tg_gradcheck_fn)(tg_tensor **out, int n, tg_tensor *const *inputs, void *user);

typedef struct tg_gradcheck_opts {
    double eps;          /* central-difference step */
    double atol, rtol;   /* pass when |analytic - numeric| <= atol + rtol * |numeric| */
    bool fast_mode;      /* compare v^T J_i u_i per input i (random u_i, v >= 0,
                          * as torch's fast mode; atol scaled by sum(u_i) sum(v))
                          * instead of the full J */
    uint64_t seed;       /* for fast mode's u, v and gradgradcheck's grad_outputs */
} tg_gradcheck_opts;
#define TG_GRADCHECK_OPTS_INIT {.eps = 1e-6, .atol = 1e-5, .rtol = 1e-3, .fast_mode = false, .seed = 0}

/* Compares analytic gradients with central differences for every input that
 * requires grad (these must be f64, TG_EDTYPE otherwise, and without a
 * stride-0 dimension, as torch refuses an expanded input: TG_EINVAL).  TG_OK when all agree; TG_EGRADCHECK with
 * a message naming the input (by index and name), the element and both values
 * otherwise.  Inputs are restored bit for bit after perturbation, and their
 * version counters do not change (as torch, which perturbs through .data), so
 * a graph that saved them before the check can still run backward.  The
 * output gradients handed to backward are strided views, not contiguous, so
 * a backward that reads its g as a flat array fails the check.  Without
 * fast_mode, the rows of the odd output elements come from fn called on
 * its inputs passed through an identity op (x * 1), so an op whose input
 * is made by another op runs its backward_into (tapegrad/op.h) and that
 * is checked too; fn is called once more for it.  In fast_mode v^T J is
 * taken both ways, each compared with the numeric v^T J u. */
TG_API int tg_gradcheck(tg_gradcheck_fn fn, void *user, int n, tg_tensor *const *inputs,
                        const tg_gradcheck_opts *opts);
/* Checks second derivatives: gradcheck of the function that maps (inputs, v)
 * to the gradients of <fn(inputs), v> (computed with create_graph), at a
 * random grad_output v drawn from opts->seed.  As in torch.autograd.gradgradcheck,
 * v is an input of that map (named 'grad_output', index n in reports) when
 * fn's output is f64, so a backward that takes its grad_output off the tape
 * fails too. */
TG_API int tg_gradgradcheck(tg_gradcheck_fn fn, void *user, int n, tg_tensor *const *inputs,
                            const tg_gradcheck_opts *opts);

/* ---- activation recomputation (torch.utils.checkpoint.checkpoint) ---- */

/* A block: computes outs[0..n_out) (new references) from in[0..n_in).
 * It must compute the same thing each time it is called on the same
 * inputs: tg_recompute calls it once in the forward, with grad mode off,
 * and once more in each backward through its node, with grad mode on. */
typedef int (*tg_recompute_fn)(tg_tensor **outs, int n_out, int n_in, tg_tensor *const *in,
                               void *user);

/* Runs fn(in) with grad mode off, so that none of its activations is kept,
 * and records its outputs as one node (op "recompute") whose inputs are
 * in[0..n_in); the node keeps only the inputs.  Its backward calls fn again
 * with grad mode on, on detached copies of the inputs that require grad as
 * the originals do, and runs a backward from the recomputed outputs with
 * the incoming gradients: the parameters fn uses get their gradients added
 * into .grad as in a plain backward (their hooks run then), and the
 * inputs' gradients go on.  The gradients are those of the plain block bit
 * for bit (the same ops in the same order) for a block whose inputs are
 * used by it alone.  As torch.utils.checkpoint.checkpoint(fn, *in).
 *
 * Rules:
 *  - outs are recorded when grad mode is on and an input requires grad;
 *    else fn runs once and nothing is recorded (with tg_recompute_ex's
 *    params, also when one of them requires grad).
 *  - Several outputs share one dtype (TG_EDTYPE) and are views of one
 *    node's output (their concatenation).
 *  - Random numbers: fn must draw the same numbers when called again.  A
 *    Dropout module run by tg_module_forward_recompute does (its mask
 *    count is wound back for the recomputation); a caller-owned tg_rng
 *    that fn reads is the caller's to keep: copy it before the call and let
 *    fn start each call from the copy.
 *  - The backward is reached through tg_backward only: tg_grad through the
 *    node is TG_EGRAD (the parameters' gradients could not go to its
 *    results), as is create_graph (the recomputed gradients are functions of
 *    the detached copies, so higher derivatives would be wrong; torch's
 *    reentrant checkpoint refuses the same).  Tensors fn reads besides its
 *    inputs must be leaves (parameters) or detached: one with a history
 *    makes the backward TG_EGRAD naming the op that made it (pass it in
 *    `in`).
 *  - Under autocast the node records the scope (on in which dtype, or off)
 *    and fn runs again in it, also when the backward runs after the scope
 *    has closed, as torch's checkpoint does: the recomputed ops cast as they
 *    did in the forward.
 *  - user is borrowed and must stay valid until the backward has run.
 * Errors: TG_EINVAL for a NULL outs, fn, in or in[i], n_out outside
 * [1, 8], n_in outside [1, 8]; fn's own status and message when it fails
 * (in the forward: nothing is recorded; in the backward: the backward
 * fails with it); TG_EGRAD naming the output when the recomputation gives
 * an output of another dtype or shape, and naming the op when fn read a
 * tensor with a history besides its inputs. */
TG_API int tg_recompute(tg_tensor **outs, int n_out, tg_recompute_fn fn, void *user, int n_in,
                        tg_tensor *const *in);
/* tg_recompute with two more things:
 *  - user_size > 0: the user_size bytes at user are copied into the node and
 *    fn receives the copy (user need not outlive the call);
 *  - params[0..n_params): the parameters (leaves) fn reads.  When one of them
 *    requires grad, the outputs are recorded (and require grad) even if no
 *    input does, so that the parameters still receive their gradients, as in
 *    torch's non-reentrant checkpoint (the reentrant one drops them); n_in
 *    must then be < 8.
 * Errors as tg_recompute, and TG_EINVAL for a NULL user with user_size > 0,
 * a negative n_params, a NULL params with n_params > 0 or a NULL params[i]. */
TG_API int tg_recompute_ex(tg_tensor **outs, int n_out, tg_recompute_fn fn, const void *user,
                           size_t user_size, int n_in, tg_tensor *const *in, int n_params,
                           tg_tensor *const *params);

#ifdef __cplusplus
}
#endif
#endif
