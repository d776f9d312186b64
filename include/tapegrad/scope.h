/* tapegrad/scope.h - scopes that own the temporaries of a block of code.
 *
 * Inside a scope, every tensor an op hands out is owned by the scope and
 * released at tg_scope_end, so a training step needs no release calls:
 *
 *   static int step(tg_module *model, tg_tensor *x, double *l)
 *   {
 *       tg_tensor *y, *loss;
 *       TG_TRY(tg_module_forward(model, &y, x));      // owned by the scope
 *       TG_TRY(tg_mse_loss(&loss, y, x, TG_REDUCTION_MEAN));
 *       TG_TRY(tg_backward(loss, NULL, NULL));
 *       *l = tg_tensor_item(loss);
 *       return TG_OK;
 *   }
 *   ...
 *   TG_TRY(tg_scope_begin());
 *   int rc = step(model, x, &l);
 *   tg_scope_end();           // releases y and loss, also when step failed
 *   TG_TRY(rc);
 *
 * End every scope on every path: a TG_TRY between tg_scope_begin and
 * tg_scope_end in one function returns past the end on an error, leaving
 * the scope open and its tensors held (the next scope then nests in it).
 * Keep the TG_TRYs in a function called between the two, as above, or
 * carry the status in rc to one tg_scope_end.
 *
 * What a scope captures: the result of every differentiable op (ops.h,
 * conv.h, loss.h, the fake-quantize ops), of tg_module_forward,
 * tg_module_forward_n and tg_module_forward_recompute, of tg_recompute (each
 * output), of tg_grad and of tg_grad_scaler_scale, when called
 * from the code between tg_scope_begin and tg_scope_end.  Tensors made by the
 * functions of tensor.h (tg_tensor_zeros, ...), by a data loader or read from
 * a file are not captured: release them, or hand them over with
 * tg_scope_add.  Ops that the library runs itself (inside an op, a loss, a
 * backward, a module's forward) are never captured, so code written without
 * scopes, which releases its own tensors, works unchanged inside a module's
 * forward or a gradient hook even while the caller has a scope open.  Such a
 * callback may open a scope of its own.
 *
 * Scopes nest and are per thread; end each scope in the function that began
 * it, before any scope that encloses it ends.  A scope's tensors are
 * released in the reverse order of their creation.  A tensor released at the
 * end of a scope lives on while something else holds it (a node of the tape
 * saving it, a module): the scope releases its reference, nothing more.  Do
 * not release a captured tensor yourself (that would release it twice): keep
 * it instead.
 */
#ifndef TAPEGRAD_SCOPE_H
#define TAPEGRAD_SCOPE_H

#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens a scope on this thread (nested in the current one, if any).
 * TG_ENOMEM when there is no memory for it (then no scope is opened). */
TG_API int tg_scope_begin(void);
/* Releases every tensor the innermost scope owns and closes it.
 * TG_EINVAL when this thread has no open scope. */
TG_API int tg_scope_end(void);
/* Takes t out of the innermost scope: it survives tg_scope_end and the
 * caller owns that reference (release it, or tg_scope_add it to an outer
 * scope after this one ended).  Returns t.  NULL (with this thread's error
 * message set) when no scope is open or t is not owned by the innermost
 * scope. */
TG_API tg_tensor *tg_scope_keep(tg_tensor *t);
/* Hands t (steals a reference) to the innermost scope, which releases it at
 * its end; returns t, which stays usable until then.  Without an open scope,
 * or when there is no memory, t is released and the result is NULL (with
 * this thread's error message set).  NULL t gives NULL. */
TG_API tg_tensor *tg_scope_add(tg_tensor *t);
/* The number of open scopes on this thread, and the number of tensors the
 * innermost one owns (0 without a scope). */
TG_API int tg_scope_depth(void);
TG_API int tg_scope_size(void);

#ifdef __cplusplus
}
#endif
#endif
