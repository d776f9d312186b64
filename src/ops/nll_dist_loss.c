/* src/ops/nll_dist_loss.c - the negative log-likelihoods of a Gaussian and
 * of a Poisson distribution, F.gaussian_nll_loss and F.poisson_nll_loss of
 * PyTorch 1.13, composed of differentiable public ops (derivatives of any
 * order follow):
 *
 *   gaussian_nll_loss  0.5 (log v + (x - t)^2 / v) [+ 0.5 log(2 pi)],
 *                      v = max(var, eps)
 *   poisson_nll_loss   exp(x) - t x (log_input), x - t log(x + eps)
 *                      (otherwise) [+ t log t - t + 0.5 log(2 pi t) where
 *                      t > 1, the Stirling term of full]
 *
 * torch clamps var in place under no_grad, so its gradient in var ignores
 * the clamp; tg__clamp_min_through keeps that gradient. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

#define TWO_PI 6.283185307179586     /* 2 pi */
#define LOG_2PI 1.8378770664093453   /* log(2 pi) */

/* torch's rule for var's shape: input's, input's without its last dim
 * (*unsq set: var then gets a last dim of 1), or input's with a last dim
 * of 1.  TG_ESHAPE naming both shapes otherwise. */
static int check_var_shape(const tg_tensor *x, const tg_tensor *var, bool *unsq)
{
    const size_t lead = x->ndim > 0 ? (size_t)(x->ndim - 1) * sizeof(int64_t) : 0;
    *unsq = false;
    if (tg_tensor_same_shape(x, var)) return TG_OK;
    if (x->ndim >= 1 && var->ndim == x->ndim - 1 && !memcmp(x->shape, var->shape, lead)) {
        *unsq = true;
        return TG_OK;
    }
    if (x->ndim >= 1 && var->ndim == x->ndim && !memcmp(x->shape, var->shape, lead) &&
        var->shape[var->ndim - 1] == 1)
        return TG_OK;
    char a[96], b[96];
    tg_shape_str(a, sizeof a, var->ndim, var->shape);
    tg_shape_str(b, sizeof b, x->ndim, x->shape);
    return tg__error(TG_ESHAPE, "gaussian_nll_loss: var shape %s must be input shape %s, or "
                     "it without its last dim, or with a last dim of 1", a, b);
}

/* TG_EINVAL when an element of var is negative (torch's "var has negative
 * entry/entries"); NaN passes, as torch's var < 0 test. */
static int check_var_values(const tg_tensor *var)
{
    tg_tensor *m = NULL, *s = NULL;
    int rc = tg_lt_scalar(&m, (tg_tensor *)var, 0.0);
    if (rc == TG_OK) rc = tg_sum(&s, m);
    if (rc == TG_OK && tg_tensor_item(s) > 0)
        rc = tg__error(TG_EINVAL, "gaussian_nll_loss: var has %.0f negative element(s); "
                       "every element must be >= 0", tg_tensor_item(s));
    tg_tensor_release(m);
    tg_tensor_release(s);
    return rc;
}

static int gaussian_check(tg_tensor **out, tg_tensor *x, tg_tensor *t, tg_tensor *var,
                          double eps, tg_reduction red, bool *unsq)
{
    const char *op = "gaussian_nll_loss";
    TG_CHECK(var != NULL, TG_EINVAL, "%s: var must not be NULL", op);
    TG_TRY(tg__loss_check_pair_broadcast(op, out, x, t, red));
    TG_CHECK(tg_dtype_is_float(var->dtype), TG_EDTYPE, "%s: var has dtype %s; float dtypes only",
             op, tg_dtype_name(var->dtype));
    TG_CHECK(!isnan(eps), TG_EINVAL, "%s: eps must not be NaN", op);
    TG_TRY(check_var_shape(x, var, unsq));
    int nd = 0;
    int64_t sh[TG_MAX_DIMS], s2[TG_MAX_DIMS], vs[TG_MAX_DIMS + 1];
    memcpy(vs, var->shape, (size_t)var->ndim * sizeof *vs);
    vs[var->ndim] = 1;
    TG_TRY(tg__broadcast_shapes(op, x->ndim, x->shape, t->ndim, t->shape, &nd, sh));
    TG_TRY(tg__broadcast_shapes(op, nd, sh, var->ndim + *unsq, vs, &nd, s2));
    return check_var_values(var);
}

static int gaussian_nll_loss(tg_tensor **out, tg_tensor *x, tg_tensor *t, tg_tensor *var,
                             bool full, double eps, tg_reduction red)
{
    bool unsq = false;
    TG_TRY(gaussian_check(out, x, t, var, eps, red, &unsq));
    tg_tensor *v[10] = {0};
    int rc;
    if (unsq) TG_TRY_GOTO(tg_unsqueeze(&v[0], var, var->ndim));
    else v[0] = tg_tensor_retain(var);
    TG_TRY_GOTO(tg__clamp_min_through(&v[1], v[0], eps));
    TG_TRY_GOTO(tg_log(&v[2], v[1]));
    TG_TRY_GOTO(tg_sub(&v[3], x, t));
    TG_TRY_GOTO(tg_mul(&v[4], v[3], v[3]));
    TG_TRY_GOTO(tg_div(&v[5], v[4], v[1]));
    TG_TRY_GOTO(tg_add(&v[6], v[2], v[5]));
    TG_TRY_GOTO(tg_mul_scalar(&v[7], v[6], 0.5));
    if (full) TG_TRY_GOTO(tg_add_scalar(&v[8], v[7], 0.5 * LOG_2PI));
    else v[8] = tg_tensor_retain(v[7]);
    rc = tg__loss_reduce(out, v[8], red);
done:
    tg__loss_release_all(v, 10);
    return rc;
}

/* where(t > 1, t log t - t + 0.5 log(2 pi t), 0), computed everywhere then
 * masked, as torch's (so its gradient in t is NaN at t = 0). */
static int stirling(tg_tensor **out, tg_tensor *t)
{
    tg_tensor *v[8] = {0};
    int rc;
    TG_TRY_GOTO(tg_log(&v[0], t));
    TG_TRY_GOTO(tg_mul(&v[1], t, v[0]));
    TG_TRY_GOTO(tg_sub(&v[2], v[1], t));
    TG_TRY_GOTO(tg_mul_scalar(&v[3], t, TWO_PI));
    TG_TRY_GOTO(tg_log(&v[4], v[3]));
    TG_TRY_GOTO(tg_mul_scalar(&v[5], v[4], 0.5));
    TG_TRY_GOTO(tg_add(&v[6], v[2], v[5]));
    TG_TRY_GOTO(tg_le_scalar(&v[7], t, 1.0));
    rc = tg_masked_fill(out, v[6], v[7], 0.0);
done:
    tg__loss_release_all(v, 8);
    return rc;
}

static int poisson_nll_loss(tg_tensor **out, tg_tensor *x, tg_tensor *t, bool log_input,
                            bool full, double eps, tg_reduction red)
{
    const char *op = "poisson_nll_loss";
    TG_TRY(tg__loss_check_pair_broadcast(op, out, x, t, red));
    TG_CHECK(!isnan(eps), TG_EINVAL, "%s: eps must not be NaN", op);
    tg_tensor *v[6] = {0};
    int rc;
    if (log_input) {
        TG_TRY_GOTO(tg_exp(&v[0], x));
        TG_TRY_GOTO(tg_mul(&v[1], t, x));
        TG_TRY_GOTO(tg_sub(&v[2], v[0], v[1]));
    } else {
        TG_TRY_GOTO(tg_add_scalar(&v[0], x, eps));
        TG_TRY_GOTO(tg_log(&v[1], v[0]));
        TG_TRY_GOTO(tg_mul(&v[3], t, v[1]));
        TG_TRY_GOTO(tg_sub(&v[2], x, v[3]));
    }
    if (full) {
        TG_TRY_GOTO(stirling(&v[4], t));
        TG_TRY_GOTO(tg_add(&v[5], v[2], v[4]));
    } else {
        v[5] = tg_tensor_retain(v[2]);
    }
    rc = tg__loss_reduce(out, v[5], red);
done:
    tg__loss_release_all(v, 6);
    return rc;
}

int tg_gaussian_nll_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_tensor *var,
                         bool full, double eps, tg_reduction red)
{
    tg__lib_enter();
    tg_tensor *c[3];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){input, target, var}, 3);
    if (rc == TG_OK) rc = tg__loss_ints_to_float(c, 3);
    if (rc == TG_OK) rc = gaussian_nll_loss(out, c[0], c[1], c[2], full, eps, red);
    tg__lib_leave();
    for (int i = 0; i < 3; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}

int tg_poisson_nll_loss(tg_tensor **out, tg_tensor *input, tg_tensor *target, bool log_input,
                        bool full, double eps, tg_reduction red)
{
    tg__lib_enter();
    tg_tensor *c[2];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){input, target}, 2);
    if (rc == TG_OK) rc = tg__loss_ints_to_float(c, 2);
    if (rc == TG_OK) rc = poisson_nll_loss(out, c[0], c[1], log_input, full, eps, red);
    tg__lib_leave();
    for (int i = 0; i < 2; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}
