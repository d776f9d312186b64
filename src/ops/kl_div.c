/* src/ops/kl_div.c - the Kullback-Leibler divergence loss (F.kl_div),
 * composed of differentiable public ops, so gradients in input and target
 * and derivatives of any order follow:
 *   log_target false:  xlogy(t, t) - t * x,  xlogy(t, t) = 0 where t = 0
 *   log_target true:   exp(t) * (t - x)
 * with x the input (log-probabilities) and t the target, broadcast together
 * as torch's ops do.  As torch 1.13, a negative t gives NaN, and the
 * gradient in t at t = 0 is NaN (0 / 0). */
#include <math.h>

#include "core/core.h"
#include "ops/loss.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

/* xlogy(t, t): where(t == 0, 0, t * log t). */
static int xlogx(tg_tensor **out, tg_tensor *t)
{
    tg_tensor *lg = NULL, *p = NULL, *z = NULL;
    int rc;
    TG_TRY_GOTO(tg_log(&lg, t));
    TG_TRY_GOTO(tg_mul(&p, t, lg));
    TG_TRY_GOTO(tg_eq_scalar(&z, t, 0.0));
    rc = tg_masked_fill(out, p, z, 0.0);
done:
    tg_tensor_release(lg);
    tg_tensor_release(p);
    tg_tensor_release(z);
    return rc;
}

/* The pointwise loss of the header's comment. */
static int kl_pointwise(tg_tensor **out, tg_tensor *x, tg_tensor *t, bool log_target)
{
    tg_tensor *a = NULL, *b = NULL;
    int rc;
    if (log_target) {
        TG_TRY_GOTO(tg_exp(&a, t));
        TG_TRY_GOTO(tg_sub(&b, t, x));
        rc = tg_mul(out, a, b);
    } else {
        TG_TRY_GOTO(xlogx(&a, t));
        TG_TRY_GOTO(tg_mul(&b, t, x));
        rc = tg_sub(out, a, b);
    }
done:
    tg_tensor_release(a);
    tg_tensor_release(b);
    return rc;
}

static int kl_div(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red,
                  bool log_target)
{
    const bool batchmean = red == TG_REDUCTION_BATCHMEAN;
    TG_TRY(tg__loss_check_pair_broadcast("kl_div", out, input, target,
                                         batchmean ? TG_REDUCTION_SUM : red));
    tg_tensor *l = NULL, *s = NULL;
    int rc = kl_pointwise(&l, input, target, log_target);
    if (rc == TG_OK && !batchmean) rc = tg__loss_reduce(out, l, red);
    else if (rc == TG_OK) {   /* sum / input.size(0); the sum for a 0-d input, as torch */
        rc = tg_sum(&s, l);
        if (rc == TG_OK && input->ndim > 0) rc = tg_div_scalar(out, s, (double)input->shape[0]);
        else if (rc == TG_OK) *out = tg_tensor_retain(s);
    }
    tg_tensor_release(l);
    tg_tensor_release(s);
    return rc;
}

int tg_kl_div(tg_tensor **out, tg_tensor *input, tg_tensor *target, tg_reduction red,
              bool log_target)
{
    tg__lib_enter();
    int rc = kl_div(out, input, target, red, log_target);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
