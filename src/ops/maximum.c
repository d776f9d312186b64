/* src/ops/maximum.c - maximum(a, b) and minimum(a, b) elementwise, a and b
 * broadcast together (torch.maximum / torch.minimum).
 *
 * Values: the larger (smaller) of a and b, NaN when either is NaN; of two
 * equal values (0.0 and -0.0 too) a's, as PyTorch's CPU kernels.
 *
 * Gradients, as PyTorch 1.13's: with w(p, q) = 1 where p > q, 1/2 where
 * p = q, 0 where p < q and 1 where they are unordered (a NaN),
 *   maximum: da = g w(a, b), db = g w(b, a)
 *   minimum: da = g w(b, a), db = g w(a, b)
 * each summed back to its input's shape: a tie splits g half and half, and
 * a NaN sends all of g to both (torch's where(a == b, g / 2, g) masked to 0
 * where a < b, resp. a > b).  w is a constant, and the products are taken
 * only where w is not 0 (a where with 0 elsewhere, as torch's masked_fill,
 * so an infinite g gives 0 there, not NaN): differentiable again.
 *
 * Integers as torch's: two integer tensors give an integer of their
 * promoted dtype (src/ops/int_arith.c), not recorded; an integer with a
 * float gives the float's dtype. */
#include <assert.h>

#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

TG_EW_BINARY_KERNEL(k_maximum, a != a ? a : b != b ? b : a < b ? b : a)
TG_EW_BINARY_KERNEL(k_minimum, a != a ? a : b != b ? b : b < a ? b : a)
/* w(a, b) of the top of the file. */
TG_EW_BINARY_KERNEL(k_weight, a > b ? 1.0 : a == b ? 0.5 : a < b ? 0.0 : 1.0)

/* Two integer operands give an integer (tg__int_binary), as torch's; an
 * integer with a float is converted to the float's dtype first, and the
 * converted tensor is saved for the backward. */
static int forward(const char *op, bool min, tg_ctx *ctx, tg_tensor **out,
                   tg_tensor *const *in)
{
    if (in[0] && in[1] && !tg_dtype_is_float(in[0]->dtype) && !tg_dtype_is_float(in[1]->dtype))
        return tg__int_binary(op, out, in[0], in[1], min ? TG_INT_MIN : TG_INT_MAX);
    tg_tensor *eff[2], *conv[2];
    TG_TRY(tg__ew_mixed_to_float(op, in, eff, conv));
    int rc = tg__ew_binary(op, out, eff[0], eff[1], min ? k_minimum : k_maximum, 0.0);
    if (rc >= 0 && ctx) {
        rc = tg_op_ctx_save(ctx, eff[0]);
        if (rc >= 0) rc = tg_op_ctx_save(ctx, eff[1]);
        if (rc < 0) {
            tg_tensor_release(*out);
            *out = NULL;
        }
    }
    tg_tensor_release(conv[0]);
    tg_tensor_release(conv[1]);
    return rc;
}

/* gi[i] = sum_to_shape(where(w, g * w, 0)) with w = w(p, q) for input i. */
static int input_grad(const char *op, tg_ctx *ctx, int i, tg_tensor *g, tg_tensor *p,
                      tg_tensor *q, tg_tensor **gi)
{
    tg_tensor *w = NULL, *gw = NULL, *t = NULL;
    tg_dtype dt;
    int nd, rc;
    const int64_t *shape;
    tg_op_ctx_input(ctx, i, &dt, &nd, &shape);
    TG_TRY_GOTO(tg__ew_binary(op, &w, p, q, k_weight, 0.0));   /* a constant */
    TG_TRY_GOTO(tg_mul(&gw, g, w));
    TG_TRY_GOTO(tg__where_or_zero(&t, w, gw));
    TG_TRY_GOTO(tg_sum_to_shape(gi, t, nd, shape));
done:
    tg_tensor_release(w);
    tg_tensor_release(gw);
    tg_tensor_release(t);
    return rc;
}

static int backward(const char *op, bool min, tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *a, *b;
    TG_TRY(tg_op_ctx_saved(ctx, 0, &a));
    TG_TRY(tg_op_ctx_saved(ctx, 1, &b));
    int rc = TG_OK;
    if (tg_op_ctx_needs_grad(ctx, 0)) rc = input_grad(op, ctx, 0, g, min ? b : a, min ? a : b, &gi[0]);
    if (rc >= 0 && tg_op_ctx_needs_grad(ctx, 1))
        rc = input_grad(op, ctx, 1, g, min ? a : b, min ? b : a, &gi[1]);
    if (rc < 0) {
        tg_tensor_release(gi[0]);
        gi[0] = NULL;
    }
    return rc;
}

static int maximum_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    return forward("maximum", false, ctx, out, in);
}

static int minimum_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    return forward("minimum", true, ctx, out, in);
}

static int maximum_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return backward("maximum", false, ctx, g, gi);
}

static int minimum_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    return backward("minimum", true, ctx, g, gi);
}

static const tg_op_schema maximum_op = {.name = "maximum", .arity = 2, .amp = TG_AMP_PROMOTE,
                                        .forward = maximum_forward,
                                        .backward = maximum_backward, .double_backward = true,
                                        .vjp = "da = g where a > b, g / 2 where a = b, "
                                               "0 where a < b (g where either is NaN); "
                                               "db the same with a and b swapped (each summed back "
                                               "to its shape)"};
static const tg_op_schema minimum_op = {.name = "minimum", .arity = 2, .amp = TG_AMP_PROMOTE,
                                        .forward = minimum_forward,
                                        .backward = minimum_backward, .double_backward = true,
                                        .vjp = "da = g where a < b, g / 2 where a = b, "
                                               "0 where a > b (g where either is NaN); "
                                               "db the same with a and b swapped (each summed back "
                                               "to its shape)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__maximum_ops[] = {&maximum_op, &minimum_op};
static_assert(sizeof tg__maximum_ops / sizeof tg__maximum_ops[0] == TG__maximum_N,
              "src/ops/families.h must count the maximum ops");

int tg_maximum(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    TG_CHECK(out != NULL, TG_EINVAL, "maximum: out must not be NULL");
    return tg_op_call(&maximum_op, out, 2, (tg_tensor *[]){a, b}, NULL, 0);
}

int tg_minimum(tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    TG_CHECK(out != NULL, TG_EINVAL, "minimum: out must not be NULL");
    return tg_op_call(&minimum_op, out, 2, (tg_tensor *[]){a, b}, NULL, 0);
}
