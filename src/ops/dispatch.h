/* src/ops/dispatch.h - what every op file shares: the registry's lookup, the
 * built-in families' registration and the reuse rule of backwards
 * (prefix tg__).  The dispatch itself is the public tg_op_call. */
#ifndef TAPEGRAD_OPS_DISPATCH_H
#define TAPEGRAD_OPS_DISPATCH_H

#include "autograd/tape.h"

/* Lookup by name (builds the registry on first use); NULL if unknown, or if
 * the registry cannot be built (message set). */
const tg_op_schema *tg__op_find(const char *name);

/* The built-in op families (src/ops/families.c lists them): registers every
 * one through tg_op_register.  Called once, by the registry's build. */
int tg__register_builtin_ops(void);

/* Whether a backward may write its result over the incoming gradient g
 * (then passing on a new reference to g): g is the only reference to a
 * contiguous, unshared buffer of dtype dt and shape like, outside any graph.
 * The engine hands each backward its own reference to the summed gradient,
 * so this holds unless a hook or a tg_grad result slot kept one.  Only for
 * backwards that build no graph (grad mode off).  On yes the caller writes
 * g in place, so g's version is bumped here, as every in-place write bumps
 * it (what is kept by version: packed bf16 panels, the bytes a dequantized
 * tensor came from). */
static inline bool tg__grad_is_reusable(tg_tensor *g, tg_dtype dt, const tg_tensor *like)
{
    if (g->refcount != 1 || g->storage->refcount != 1 || g->grad_fn || g->requires_grad ||
        g->dtype != dt || g->ndim != like->ndim || !tg_tensor_is_contiguous(g) || g->offset != 0)
        return false;
    for (int d = 0; d < g->ndim; d++)
        if (g->shape[d] != like->shape[d]) return false;
    tg__bump_version(g);
    return true;
}

#endif
