/* tapegrad/op.h - define an op of your own: a forward, a backward (a
 * vector-Jacobian product), a schema, and one registration call.
 *
 * Every built-in op (add, conv_transpose, batch_norm, ...) is registered and
 * called through exactly these functions, so an op written in a program of
 * yours is recorded on the tape, cast under autocast, checked for in-place
 * changes and traced as the built-ins are, and `tg_gradcheck` /
 * `tapegrad gradcheck --plugin` check it the same way.
 *
 *   // y = softplus(x) = log(1 + e^x);  dy/dx = sigmoid(x)
 *   static int sp_forward(tg_op_ctx *ctx, tg_tensor **out, int n,
 *                         tg_tensor *const *in, const void *params)
 *   {
 *       ... compute *out (a new tensor) from in[0] ...
 *       if (ctx) return tg_op_ctx_save(ctx, in[0]);   // recorded: keep x
 *       return TG_OK;
 *   }
 *   static int sp_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
 *   {
 *       tg_tensor *x, *s = NULL;
 *       int rc = tg_op_ctx_saved(ctx, 0, &x);      // borrowed
 *       if (rc == 0) rc = tg_sigmoid(&s, x);       // differentiable ops, so
 *       if (rc == 0) rc = tg_mul(&gi[0], g, s);    // gradients of gradients
 *       tg_tensor_release(s);                       // work too
 *       return rc;
 *   }
 *   static const tg_op_schema softplus_op = {
 *       .name = "my_softplus", .arity = 1, .amp = TG_AMP_FP32,
 *       .forward = sp_forward, .backward = sp_backward, .double_backward = true,
 *       .vjp = "da = g * sigmoid(a)"};             // what the views show
 *   tg_op_register(&softplus_op);                  // once
 *   tg_op_call(&softplus_op, &y, 1, (tg_tensor *[]){x}, NULL, 0);
 *
 * examples/custom_op.c is this program in full, checked by tg_gradcheck.
 *
 * How it compares with PyTorch:
 *  - torch.autograd.Function: forward/backward are the same pair; ctx plays
 *    ctx.save_for_backward (tg_op_ctx_save), ctx.needs_input_grad
 *    (tg_op_ctx_needs_grad) and attributes stored on ctx (params, copied into
 *    the node, or tg_op_ctx_save_scalar).  Unlike a Function, an op here has a
 *    name in a registry and an AMP policy, as torch.library's custom ops do.
 *  - The forward always runs with grad mode off; ctx is NULL when the call is
 *    not recorded (no input requires grad, grad mode off, or no backward),
 *    where PyTorch passes a ctx that is thrown away.
 *  - A backward written with differentiable ops (double_backward = true)
 *    gives higher derivatives through create_graph, as a Function whose
 *    backward uses torch ops.  One written with raw loops says false, and a
 *    create_graph backward through it is refused with a message, where
 *    PyTorch would silently give a wrong second derivative unless the
 *    Function is marked once_differentiable.
 *  - The engine checks every gradient a backward returns against its input's
 *    dtype and shape (TG_EGRAD naming the op), as PyTorch's engine does.
 */
#ifndef TAPEGRAD_OP_H
#define TAPEGRAD_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tapegrad/dtype.h"
#include "tapegrad/export.h"
#include "tapegrad/registry.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most tensor inputs an op takes, saved tensors and saved scalars a
 * recorded call keeps. */
#define TG_OP_MAX_INPUTS 8
#define TG_OP_MAX_SAVED 8
#define TG_OP_MAX_SCALARS 8
/* arity of an op taking 0..TG_OP_MAX_INPUTS inputs. */
#define TG_OP_VARIADIC (-1)

/* What a forward and backward see of their call on the tape (a node);
 * opaque. */
typedef struct tg_node tg_op_ctx;

/* forward: computes *out (a new reference) from in[0..n) (in[i] may be NULL
 * for an absent optional input: the forward decides whether that is
 * allowed).  params is the caller's parameter block (NULL when none).
 * Runs with grad mode off, so ops it calls are not recorded.  ctx is NULL
 * unless the call is being recorded; then the forward saves what backward
 * needs.  On error it returns a negative status (tg_error_set gives the
 * message) and leaves *out unset. */
typedef int (*tg_op_forward_fn)(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                                const void *params);
/* backward: given grad_out, the gradient of the loss with respect to the
 * output (borrowed), writes a new reference into grad_in[i] for each input i
 * with tg_op_ctx_needs_grad(ctx, i); leaving one NULL means zero.  Each
 * gradient must have its input's dtype and shape.  grad_in has
 * TG_OP_MAX_INPUTS slots, all NULL on entry: a gradient written into a slot
 * past the call's inputs is released by the engine and the backward fails
 * with TG_EGRAD naming the op.  Grad mode is on exactly when the engine
 * builds a graph of the backward (create_graph). */
typedef int (*tg_op_backward_fn)(tg_op_ctx *ctx, tg_tensor *grad_out, tg_tensor **grad_in);
/* backward_into (optional, for an op whose first input is the only one
 * that can need a gradient: one input, or others such as an index that
 * never need one): adds what backward would write into grad_in[0] to acc,
 * in place.  acc is a contiguous tensor of the input's dtype and shape
 * that only the engine holds: the sum of the input's gradients so far
 * (zeros for the first).  The engine calls it instead of backward when it
 * builds no graph (grad mode is off), no other input needs a gradient and
 * the input's gradient goes on to the node that made the input (not to a
 * leaf, and not while tg_backward_steps or TG_TRACE=2 watch the steps), so
 * that an op whose input gradient is mostly zeros adds only the rest:
 * slice's is g in the slice, and the slices of one tensor (an RNN's time
 * steps) then cost their own size each, not the whole tensor's;
 * index_select's adds g's rows into acc's, as acc.index_add_(dim, index,
 * g).  Values as backward's followed by the engine's sum; a zero outside
 * what it adds keeps its sign. */
typedef int (*tg_op_backward_into_fn)(tg_op_ctx *ctx, tg_tensor *grad_out, tg_tensor *acc);
/* shape rule (optional): the dtype, ndim and shape (TG_MAX_DIMS entries) of
 * the output the forward will give for these inputs and params, without
 * computing it; a negative status for inputs the op refuses.  When an op
 * has one, dispatch runs it before the forward and checks the forward's
 * output against it. */
typedef int (*tg_op_shape_fn)(int n, tg_tensor *const *in, const void *params, tg_dtype *dtype,
                              int *ndim, int64_t *shape);

typedef struct tg_op_schema {
    const char *name;             /* unique; letters, digits and '_' */
    int arity;                    /* tensor inputs, or TG_OP_VARIADIC */
    tg_amp_policy amp;            /* see registry.h */
    tg_op_forward_fn forward;     /* required */
    tg_op_backward_fn backward;   /* NULL: not differentiable, never recorded */
    tg_op_shape_fn shape;         /* optional */
    bool double_backward;         /* backward is written with differentiable ops */
    /* What the views of the tape (tg_backward_steps, TG_TRACE=2, the viz
     * page, tg_graph_to_dot) say about a node of the op; both optional.
     * vjp: the vector-Jacobian product backward applies, as a formula in g,
     * the gradient of the output (dL/dout), the inputs a, b, ... in order
     * and the output y, where "da" is what backward sends to input a (g
     * times the Jacobian d out / d a): "da = g * b, db = g * a".  NULL or
     * "": the views say "the op's own backward" (the DOT graph nothing).
     * Static text. */
    const char *vjp;
    /* scalar: when params begins with a double that is the op's scalar
     * operand (mul_scalar's s, leaky_relu's slope), the symbol vjp uses for
     * it; tg_graph_to_dot draws it as an input, "s = 0.5".  NULL: none. */
    const char *scalar;
    tg_op_backward_into_fn backward_into;   /* optional; see its type */
} tg_op_schema;

/* Registers op (borrowed: it must stay valid and unchanged for the life of
 * the process, a `static const` schema).  TG_EINVAL naming the field for a
 * bad schema (no name, a name with other characters, arity outside
 * [TG_OP_VARIADIC, TG_OP_MAX_INPUTS], an unknown AMP policy, no forward,
 * double_backward without a backward); TG_EINVAL when an op of that name is
 * registered already; TG_ENOMEM.  On error nothing is registered. */
TG_API int tg_op_register(const tg_op_schema *op);
/* The registered op called name (borrowed) in *out; TG_ENOTFOUND otherwise. */
TG_API int tg_op_find(const tg_op_schema **out, const char *name);

/* Calls op on in[0..n) as every built-in op is called:
 *  1. applies the op's AMP policy to the float inputs (casts are recorded),
 *  2. runs the shape rule, if any,
 *  3. runs forward with grad mode off, with a ctx when the call is recorded
 *     (grad mode on, an input requires grad, the op has a backward),
 *  4. links the output to its new node (TG_TRACE=1 prints it).  An output
 *     of an integer dtype is never recorded and does not require grad, as
 *     PyTorch never makes one differentiable: the node goes, with what the
 *     forward saved.
 * params (params_size bytes, may be 0) is copied into the node for the
 * backward.  *out gets a new reference.  op need not be registered (the
 * registry is for finding ops by name), but n must match its arity.  On error
 * *out is untouched and nothing is left on the tape. */
TG_API int tg_op_call(const tg_op_schema *op, tg_tensor **out, int n, tg_tensor *const *in,
                      const void *params, size_t params_size);

/* ---- the context of a recorded call (forward saves, backward reads) ---- */

/* Saves t for backward (retained, with its storage version): the slot
 * number (0, 1, ...) or TG_EINVAL past TG_OP_MAX_SAVED.  For an input or a
 * tensor the forward made; the output itself goes through
 * tg_op_ctx_save_output. */
TG_API int tg_op_ctx_save(tg_op_ctx *ctx, tg_tensor *t);
/* Saves the forward's own result out (borrowed) as an alias of its storage:
 * saving out itself would make the cycle out -> node -> out.  The slot
 * number, as tg_op_ctx_save. */
TG_API int tg_op_ctx_save_output(tg_op_ctx *ctx, tg_tensor *out);
/* The i-th saved tensor (borrowed, valid during the backward).  TG_EINPLACE
 * with a message naming the op when it was modified in place after it was
 * saved; TG_EGRAD when the graph was freed by an earlier backward. */
TG_API int tg_op_ctx_saved(tg_op_ctx *ctx, int i, tg_tensor **t);
/* A saved output (slot i of tg_op_ctx_save_output) as a new reference the
 * backward releases: in a create_graph backward it carries this op as its
 * grad_fn, so that gradients of the backward flow through the op again, as
 * PyTorch's saved outputs do.  Errors as tg_op_ctx_saved. */
TG_API int tg_op_ctx_saved_output(tg_op_ctx *ctx, int i, tg_tensor **t);
/* Saves a number for backward: the slot number, or TG_EINVAL past
 * TG_OP_MAX_SCALARS. */
TG_API int tg_op_ctx_save_scalar(tg_op_ctx *ctx, double v);
/* The i-th saved number in *v; TG_EINVAL for a slot never saved. */
TG_API int tg_op_ctx_saved_scalar(const tg_op_ctx *ctx, int i, double *v);
/* Whether input i needs a gradient from this backward. */
TG_API bool tg_op_ctx_needs_grad(const tg_op_ctx *ctx, int i);
/* The copy of the call's params (borrowed; NULL when none were given). */
TG_API const void *tg_op_ctx_params(const tg_op_ctx *ctx);
/* Input i's dtype, ndim and shape (borrowed) as it was in the forward; ndim
 * is -1 for an absent input. */
TG_API void tg_op_ctx_input(const tg_op_ctx *ctx, int i, tg_dtype *dtype, int *ndim,
                            const int64_t **shape);
/* The op of the call (borrowed). */
TG_API const tg_op_schema *tg_op_ctx_op(const tg_op_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
