/* src/ops/bce_logits_weighted.c - binary cross entropy with logits, with
 * a weight per element and a weight of the positive class
 * (F.binary_cross_entropy_with_logits(x, t, weight, pos_weight=p)),
 * composed of differentiable public ops, as torch's formula:
 *   lw   = 1 + (p - 1) * t
 *   loss = weight * ((1 - t) * x + lw * (log1p(exp(-|x|)) + max(-x, 0)))
 * log1p(exp(-|x|)) + max(-x, 0) is softplus(-x) = -log(sigmoid(x)) with
 * no exp of a positive number, so the loss stays finite for |x| = 1000.
 * Gradients flow to x, t, weight and p, to any order. */
#include "core/core.h"
#include "ops/loss.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

/* softplus(-x) = log1p(exp(-|x|)) + relu(-x). */
static int softplus_neg(tg_tensor **out, tg_tensor *x)
{
    tg_tensor *a = NULL, *na = NULL, *e = NULL, *l = NULL, *nx = NULL, *r = NULL;
    int rc;
    TG_TRY_GOTO(tg_abs(&a, x));
    TG_TRY_GOTO(tg_neg(&na, a));
    TG_TRY_GOTO(tg_exp(&e, na));
    TG_TRY_GOTO(tg_log1p(&l, e));
    TG_TRY_GOTO(tg_neg(&nx, x));
    TG_TRY_GOTO(tg_relu(&r, nx));
    rc = tg_add(out, l, r);
done:
    tg_tensor_release(a);
    tg_tensor_release(na);
    tg_tensor_release(e);
    tg_tensor_release(l);
    tg_tensor_release(nx);
    tg_tensor_release(r);
    return rc;
}

/* The unreduced loss of the file's comment. */
static int pointwise(tg_tensor **out, tg_tensor *x, tg_tensor *t, tg_tensor *w, tg_tensor *p)
{
    tg_tensor *omt = NULL, *a = NULL, *sp = NULL, *pm1 = NULL, *pt = NULL, *lw = NULL;
    tg_tensor *b = NULL, *l = NULL;
    int rc;
    TG_TRY_GOTO(tg_rsub_scalar(&omt, t, 1.0));
    TG_TRY_GOTO(tg_mul(&a, omt, x));
    TG_TRY_GOTO(softplus_neg(&sp, x));
    if (p) {
        TG_TRY_GOTO(tg_sub_scalar(&pm1, p, 1.0));
        TG_TRY_GOTO(tg_mul(&pt, pm1, t));
        TG_TRY_GOTO(tg_add_scalar(&lw, pt, 1.0));
        TG_TRY_GOTO(tg_mul(&b, lw, sp));
    } else {
        b = tg_tensor_retain(sp);
    }
    if (!w) {
        rc = tg_add(out, a, b);
        goto done;
    }
    TG_TRY_GOTO(tg_add(&l, a, b));
    rc = tg_mul(out, l, w);
done:
    tg_tensor_release(omt);
    tg_tensor_release(a);
    tg_tensor_release(sp);
    tg_tensor_release(pm1);
    tg_tensor_release(pt);
    tg_tensor_release(lw);
    tg_tensor_release(b);
    tg_tensor_release(l);
    return rc;
}

static int bce_weighted(tg_tensor **out, tg_tensor *x, tg_tensor *t, tg_tensor *w,
                        tg_tensor *p, tg_reduction red)
{
    TG_TRY(tg__loss_check_pair("bce_with_logits_weighted", out, x, t, red));
    TG_TRY(tg__loss_check_weight("bce_with_logits_weighted", "weight", w, x));
    TG_TRY(tg__loss_check_weight("bce_with_logits_weighted", "pos_weight", p, x));
    tg_tensor *l = NULL;
    int rc = pointwise(&l, x, t, w, p);
    if (rc == TG_OK) rc = tg__loss_reduce(out, l, red);
    tg_tensor_release(l);
    return rc;
}

int tg_bce_with_logits_weighted(tg_tensor **out, tg_tensor *logits, tg_tensor *target,
                                tg_tensor *weight, tg_tensor *pos_weight, tg_reduction red)
{
    tg__lib_enter();
    int rc = bce_weighted(out, logits, target, weight, pos_weight, red);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
