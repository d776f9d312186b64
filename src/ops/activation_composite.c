/* src/ops/activation_composite.c - the activations that torch itself
 * writes as compositions of other ops, made of the same ops here:
 *   softsign(x)   = x / (|x| + 1)          (F.softsign)
 *   tanhshrink(x) = x - tanh(x)            (F.tanhshrink)
 *   softmin(x)    = softmax(-x, dim)       (F.softmin)
 *   rrelu(x)      = leaky_relu(x, (lower + upper) / 2), not training
 *                                          (F.rrelu with training=False)
 * Their gradients are those of the parts, so differentiable to any order,
 * and a bf16 x rounds after each part, as torch's does.
 *
 * softsign and tanhshrink of an integer x are f32, as torch's (x converted
 * first: the same values below 2^24); softmin and rrelu refuse integers,
 * as torch's softmax and leaky_relu. */
#include <math.h>

#include "core/core.h"
#include "tapegrad/ops.h"

/* An integer x as f32 in *xf (a new reference), or x itself retained. */
static int as_float(tg_tensor **xf, tg_tensor *x)
{
    if (tg_dtype_is_float(x->dtype)) {
        *xf = tg_tensor_retain(x);
        return TG_OK;
    }
    return tg_to_dtype(xf, x, TG_F32);
}

static int softsign(tg_tensor **out, tg_tensor *x)
{
    tg_tensor *xf = NULL, *ab = NULL, *den = NULL;
    int rc;
    TG_TRY_GOTO(as_float(&xf, x));
    TG_TRY_GOTO(tg_abs(&ab, xf));
    TG_TRY_GOTO(tg_add_scalar(&den, ab, 1.0));
    TG_TRY_GOTO(tg_div(out, xf, den));
done:
    tg_tensor_release(xf);
    tg_tensor_release(ab);
    tg_tensor_release(den);
    return rc;
}

static int tanhshrink(tg_tensor **out, tg_tensor *x)
{
    tg_tensor *xf = NULL, *t = NULL;
    int rc;
    TG_TRY_GOTO(as_float(&xf, x));
    TG_TRY_GOTO(tg_tanh(&t, xf));
    TG_TRY_GOTO(tg_sub(out, xf, t));
done:
    tg_tensor_release(xf);
    tg_tensor_release(t);
    return rc;
}

static int softmin(tg_tensor **out, tg_tensor *x, int dim)
{
    tg_tensor *nx = NULL;
    int rc;
    TG_TRY_GOTO(tg_neg(&nx, x));
    TG_TRY_GOTO(tg_softmax(out, nx, dim));
done:
    tg_tensor_release(nx);
    return rc;
}

/* The checks every composite makes first: out and x not NULL; for
 * float_only, x of a float dtype. */
static int check_x(const char *op, tg_tensor **out, const tg_tensor *x, bool float_only)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    *out = NULL;
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(!float_only || tg_dtype_is_float(x->dtype), TG_EDTYPE,
             "%s: x has dtype %s; float dtypes only", op, tg_dtype_name(x->dtype));
    return TG_OK;
}

/* The ops run on the library's behalf; only the result goes to the
 * caller's scope (tapegrad/scope.h). */
int tg_softsign(tg_tensor **out, tg_tensor *x)
{
    TG_TRY(check_x("softsign", out, x, false));
    tg__lib_enter();
    int rc = softsign(out, x);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_tanhshrink(tg_tensor **out, tg_tensor *x)
{
    TG_TRY(check_x("tanhshrink", out, x, false));
    tg__lib_enter();
    int rc = tanhshrink(out, x);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_softmin(tg_tensor **out, tg_tensor *x, int dim)
{
    TG_TRY(check_x("softmin", out, x, true));
    tg__lib_enter();
    int rc = softmin(out, x, dim);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

int tg_rrelu(tg_tensor **out, tg_tensor *x, double lower, double upper, bool training)
{
    TG_TRY(check_x("rrelu", out, x, true));
    TG_CHECK(!isnan(lower) && !isnan(upper) && lower <= upper, TG_EINVAL,
             "rrelu: lower=%g must be <= upper=%g (neither NaN)", lower, upper);
    TG_CHECK(!training, TG_EINVAL, "rrelu: training=true (random slopes) is not supported; "
             "training=false uses the slope (lower + upper) / 2");
    return tg_leaky_relu(out, x, (lower + upper) / 2);
}
