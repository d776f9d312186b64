/* src/ops/pointwise_internal.h - what the ops softplus, clamp, where,
 * one_hot, embedding, the hard activations (hardact.c) and the shrinks
 * (shrink.c) share: an elementwise map computed in double; and a gradient
 * of a half input taken in f32 (selu.c, gelu_tanh.c). */
#ifndef TG_OPS_POINTWISE_INTERNAL_H
#define TG_OPS_POINTWISE_INTERNAL_H

#include "ops/elementwise.h"

/* *out: a new contiguous tensor with a's shape and dtype dt whose element i
 * is f(a[i], user), computed in double and rounded once.  TG_ENOMEM. */
int tg__map_f64(tg_tensor **out, const tg_tensor *a, tg_dtype dt,
                double (*f)(double v, const void *user), const void *user);

/* The forward of a one-input float op that is such a map: *out = f(x[i],
 * params) in x's dtype (refused for an integer x, the message naming
 * name); saves x for the backward. */
int tg__map_forward(tg_ctx *ctx, const char *name, tg_tensor **out, tg_tensor *x,
                    double (*f)(double v, const void *user), const void *params);

/* grad(x, g, p) into *gi, differentiable tg_ ops; for an f16 / bf16 x in
 * f32 (x and g cast up) and rounded once to x's dtype at the end. */
int tg__grad_in_f32(int (*grad)(tg_tensor *x, tg_tensor *g, const void *p, tg_tensor **gi),
                    const void *p, tg_tensor *x, tg_tensor *g, tg_tensor **gi);

/* op_forward, the forward of op over tg__map_forward with op1, its map. */
#define TG_MAP_FORWARD(op)                                                    \
    static int op##_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in, \
                            const void *params)                               \
    {                                                                         \
        (void)n;                                                              \
        return tg__map_forward(ctx, #op, out, in[0], op##1, params);          \
    }


#endif
