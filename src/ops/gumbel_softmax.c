/* src/ops/gumbel_softmax.c - F.gumbel_softmax(logits, tau, hard, dim) of
 * PyTorch 1.13, composed of differentiable public ops:
 *
 *   g = -log(E), E ~ Exp(1) = -log(1 - u), u ~ U[0, 1) drawn by rng in f64
 *   y_soft = softmax((logits + g) / tau, dim)
 *   hard:  y = y_hard - detach(y_soft) + y_soft, y_hard the one-hot of
 *          argmax(y_soft, dim) (the first largest, as torch's argmax)
 *
 * The noise g is a constant, so the gradient is softmax's, scaled by
 * 1 / tau; with hard it is the same gradient (the straight-through
 * estimator: y_hard and detach(y_soft) are constants), though the value is
 * the one-hot.  The draws are this library's (counter-based, the same on
 * every machine), not torch's. */
#include <float.h>
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

/* The Gumbel(0, 1) noise of logits' shape, in its dtype: one u per element
 * from rng (its counter advances), u = 0 taken as the smallest double so
 * that E > 0 and g is finite. */
static int gumbel_noise(tg_tensor **out, const tg_tensor *logits, tg_rng *rng)
{
    tg_tensor *u = NULL;
    TG_TRY(tg_tensor_rand(&u, TG_F64, logits->ndim, logits->shape, rng));
    double *d = tg_tensor_data(u);
    for (int64_t i = 0, n = tg_tensor_numel(u); i < n; i++) {
        const double e = -log1p(-fmax(d[i], DBL_MIN));   /* Exp(1), > 0 */
        d[i] = -log(e);
    }
    int rc = logits->dtype == TG_F64 ? (*out = tg_tensor_retain(u), TG_OK)
                                     : tg_to_dtype(out, u, logits->dtype);
    tg_tensor_release(u);
    return rc;
}

static int gumbel_softmax(tg_tensor **out, tg_tensor *logits, double tau, bool hard, int dim,
                          tg_rng *rng)
{
    enum { G, Z, ZT, SOFT, IDX, ZERO, ONEHOT, SD, DIFF, N };
    tg_tensor *t[N] = {NULL};
    int rc;
    TG_TRY_GOTO(gumbel_noise(&t[G], logits, rng));
    TG_TRY_GOTO(tg_add(&t[Z], logits, t[G]));
    TG_TRY_GOTO(tg_div_scalar(&t[ZT], t[Z], tau));
    TG_TRY_GOTO(tg_softmax(hard ? &t[SOFT] : out, t[ZT], dim));
    if (!hard) goto done;
    TG_TRY_GOTO(tg_argmax_dim(&t[IDX], t[SOFT], dim, true));
    TG_TRY_GOTO(tg_tensor_zeros_like(&t[ZERO], t[SOFT]));
    TG_TRY_GOTO(tg_scatter_value(&t[ONEHOT], t[ZERO], dim, t[IDX], 1.0));
    TG_TRY_GOTO(tg_tensor_detach(&t[SD], t[SOFT]));
    TG_TRY_GOTO(tg_sub(&t[DIFF], t[ONEHOT], t[SD]));
    rc = tg_add(out, t[DIFF], t[SOFT]);
done:
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

int tg_gumbel_softmax(tg_tensor **out, tg_tensor *logits, double tau, bool hard, int dim,
                      tg_rng *rng)
{
    const char *op = "gumbel_softmax";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(logits != NULL, TG_EINVAL, "%s: logits must not be NULL", op);
    TG_CHECK(rng != NULL, TG_EINVAL, "%s: rng must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(logits->dtype), TG_EDTYPE,
             "%s: logits has dtype %s; float dtypes only", op, tg_dtype_name(logits->dtype));
    TG_CHECK(!isnan(tau) && tau != 0.0, TG_EINVAL, "%s: tau=%g must be nonzero and not NaN",
             op, tau);
    const int lim = logits->ndim > 0 ? logits->ndim : 1;
    TG_CHECK(dim >= -lim && dim < lim, TG_EINVAL,
             "%s: dim=%d must be in [%d, %d) for logits of %d dims", op, dim, -lim, lim,
             logits->ndim);
    tg__lib_enter();
    const int rc = gumbel_softmax(out, logits, tau, hard, dim, rng);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
