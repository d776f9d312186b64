/* src/ops/dropout.c - F.dropout(x, p, training) and the channel dropouts
 * F.dropout1d/2d/3d: x times a mask of (u >= p) / (1 - p), u ~ U[0, 1)
 * drawn in x's dtype from a counter-based generator, so the mask depends
 * only on (seed, counter).  F.dropout draws one u per element of x; a
 * channel dropout one per channel, a mask of shape (N, C, 1, ...) or
 * (C, 1, ...) that the product broadcasts over the channel's elements
 * (torch's feature_dropout).  The product is a recorded tg_mul with a
 * constant mask, so the gradient is g times the same mask, to any order.
 * F.alpha_dropout and F.feature_alpha_dropout draw their masks alike
 * (below). */
#include <math.h>

#include "autograd/tape.h"
#include "tapegrad/ops.h"

/* mask = (u >= p) / (1 - p) (0 everywhere for p = 1), in dtype dt and the
 * given shape. */
static int dropout_mask(tg_tensor **mask, tg_dtype dt, int ndim, const int64_t *shape, double p,
                        tg_rng *rng)
{
    tg_tensor *m = NULL;
    TG_TRY(tg_tensor_zeros(&m, dt, ndim, shape));
    int rc = tg_tensor_rand_uniform(m, rng, 0.0, 1.0);
    if (rc < 0) {
        tg_tensor_release(m);
        return rc;
    }
    void *d = tg_tensor_data(m);
    const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    for (int64_t i = 0, n = tg_tensor_numel(m); i < n; i++)
        tg_dtype_store(dt, d, i, tg_dtype_load(dt, d, i) < p ? 0.0 : scale);
    *mask = m;
    return TG_OK;
}

/* The checks both dropouts share (op names the function). */
static int dropout_check(const char *op, tg_tensor **out, const tg_tensor *x, double p,
                         bool training, const tg_rng *rng)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(p >= 0.0 && p <= 1.0, TG_EINVAL, "%s: p=%g must be in [0, 1]", op, p);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "%s: x has dtype %s; float dtypes only", op,
             tg_dtype_name(x->dtype));
    TG_CHECK(rng != NULL || !training || p == 0.0, TG_EINVAL,
             "%s: rng must not be NULL when training with p > 0", op);
    return TG_OK;
}

/* x times a mask of the given shape (x's, or x's with 1s to broadcast). */
static int dropout_apply(tg_tensor **out, tg_tensor *x, int ndim, const int64_t *shape, double p,
                         bool training, tg_rng *rng)
{
    if (!training || p == 0.0) {   /* the identity: x itself, nothing drawn */
        *out = tg_tensor_retain(x);
        return tg__scope_capture(out, TG_OK);
    }
    tg_tensor *mask = NULL;
    tg__lib_enter();
    int rc = dropout_mask(&mask, x->dtype, ndim, shape, p, rng);
    if (rc >= 0) rc = tg_mul(out, x, mask);
    tg__lib_leave();
    tg_tensor_release(mask);
    return tg__scope_capture(out, rc);
}

int tg_dropout(tg_tensor **out, tg_tensor *x, double p, bool training, tg_rng *rng)
{
    TG_TRY(dropout_check("dropout", out, x, p, training, rng));
    return dropout_apply(out, x, x->ndim, x->shape, p, training, rng);
}

/* The number of leading dims that index a channel (torch 1.13's rules):
 * dropout1d (N, C, L) 2 or (C, L) 1; dropout2d always 2, a 3-d x read as
 * (N, C, L); dropout3d (N, C, D, H, W) 2, any other rank 1 (x unbatched). */
static int channel_dims(int n_spatial, int ndim, int *lead)
{
    static const char *const names[] = {"", "dropout1d", "dropout2d", "dropout3d"};
    TG_CHECK(n_spatial >= 1 && n_spatial <= 3, TG_EINVAL,
             "dropout_channels: n_spatial=%d must be 1, 2 or 3", n_spatial);
    const char *op = names[n_spatial];
    if (n_spatial == 1) {
        TG_CHECK(ndim == 2 || ndim == 3, TG_ESHAPE,
                 "%s: x has %d dims; it must be (N, C, L) or (C, L)", op, ndim);
        *lead = ndim - 1;
    } else if (n_spatial == 2) {
        TG_CHECK(ndim >= 2, TG_ESHAPE,
                 "%s: x has %d dims; it must have at least 2, (N, C, ...)", op, ndim);
        *lead = 2;
    } else {
        TG_CHECK(ndim >= 1, TG_ESHAPE, "%s: x has 0 dims; it must be (N, C, D, H, W) or "
                 "(C, D, H, W)", op);
        *lead = ndim == 5 ? 2 : 1;
    }
    return TG_OK;
}

int tg_dropout_channels(tg_tensor **out, tg_tensor *x, int n_spatial, double p, bool training,
                        tg_rng *rng)
{
    TG_TRY(dropout_check("dropout_channels", out, x, p, training, rng));
    int lead = 0;
    TG_TRY(channel_dims(n_spatial, x->ndim, &lead));
    int64_t shape[TG_MAX_DIMS];   /* x's channel dims, then 1s */
    for (int d = 0; d < x->ndim; d++) shape[d] = d < lead ? x->shape[d] : 1;
    return dropout_apply(out, x, x->ndim, shape, p, training, rng);
}

/* ---- alpha dropout ----
 * torch's _dropout_impl with alpha_dropout: with keep ~ Bernoulli(1 - p),
 * alpha' = 1.7580993408473766 (SELU's scale * alpha; -alpha' is SELU's
 * negative saturation) and a = 1 / sqrt((alpha'^2 p + 1) (1 - p)),
 *   y = x * (keep a) + ((keep - 1) alpha' a + alpha' a p)
 * i.e. a x + alpha' a p where kept and alpha' a (p - 1) where dropped, an
 * affine map that keeps the mean 0 and variance 1 of a SELU-normal x.
 * The two constants are one tensor each (x's shape, or (N, C, 1, ...) for
 * the feature form), so the gradient is g (keep a), to any order. */

#define SELU_SCALE_ALPHA 1.7580993408473766   /* torch's alpha in _dropout_impl */

/* mult = keep a and add = (keep - 1) alpha' a + alpha' a p, each computed
 * in double and rounded once to dt, keep drawn as dropout's mask. */
static int alpha_masks(tg_tensor **mult, tg_tensor **add, tg_dtype dt, int ndim,
                       const int64_t *shape, double p, tg_rng *rng)
{
    tg_tensor *m = NULL, *b = NULL;
    int rc = tg_tensor_zeros(&m, dt, ndim, shape);
    if (rc >= 0) rc = tg_tensor_zeros(&b, dt, ndim, shape);
    if (rc >= 0) rc = tg_tensor_rand_uniform(m, rng, 0.0, 1.0);
    if (rc < 0) {
        tg_tensor_release(m);
        tg_tensor_release(b);
        return rc;
    }
    const double al = SELU_SCALE_ALPHA;
    const double a = 1.0 / sqrt((al * al * p + 1.0) * (1.0 - p));
    void *dm = tg_tensor_data(m), *db = tg_tensor_data(b);
    for (int64_t i = 0, n = tg_tensor_numel(m); i < n; i++) {
        const double keep = tg_dtype_load(dt, dm, i) < p ? 0.0 : 1.0;
        tg_dtype_store(dt, dm, i, keep * a);
        tg_dtype_store(dt, db, i, (keep - 1.0) * al * a + al * a * p);
    }
    *mult = m;
    *add = b;
    return TG_OK;
}

/* x * mult + add for masks of the given shape; p = 1 gives x * 0, as
 * torch's (NaN where x is not finite, gradient 0). */
static int alpha_apply(tg_tensor **out, tg_tensor *x, int ndim, const int64_t *shape, double p,
                       tg_rng *rng)
{
    tg_tensor *mult = NULL, *add = NULL, *xm = NULL;
    tg__lib_enter();
    int rc = alpha_masks(&mult, &add, x->dtype, ndim, shape, p, rng);
    if (rc >= 0) rc = tg_mul(&xm, x, mult);
    if (rc >= 0) rc = tg_add(out, xm, add);
    tg__lib_leave();
    tg_tensor_release(mult);
    tg_tensor_release(add);
    tg_tensor_release(xm);
    return tg__scope_capture(out, rc);
}

/* The steps both alpha dropouts share: the identity for p = 0, not
 * training or an empty x; x * 0 for p = 1; else the masks (feature: one
 * per (n, c), x needing 2 dims), in torch's order of these checks. */
static int alpha_dropout(const char *op, tg_tensor **out, tg_tensor *x, double p, bool training,
                         tg_rng *rng, bool feature)
{
    TG_TRY(dropout_check(op, out, x, p, training, rng));
    if (!training || p == 0.0 || tg_tensor_numel(x) == 0) {
        *out = tg_tensor_retain(x);
        return tg__scope_capture(out, TG_OK);
    }
    if (p == 1.0) {
        tg__lib_enter();
        int rc = tg_mul_scalar(out, x, 0.0);
        tg__lib_leave();
        return tg__scope_capture(out, rc);
    }
    if (!feature) return alpha_apply(out, x, x->ndim, x->shape, p, rng);
    TG_CHECK(x->ndim >= 2, TG_ESHAPE,
             "%s: x has %d dims; feature dropout needs at least 2 (N, C, ...), as torch's", op,
             x->ndim);
    int64_t shape[TG_MAX_DIMS];   /* (N, C, 1, ...) */
    for (int d = 0; d < x->ndim; d++) shape[d] = d < 2 ? x->shape[d] : 1;
    return alpha_apply(out, x, x->ndim, shape, p, rng);
}

int tg_alpha_dropout(tg_tensor **out, tg_tensor *x, double p, bool training, tg_rng *rng)
{
    return alpha_dropout("alpha_dropout", out, x, p, training, rng, false);
}

int tg_feature_alpha_dropout(tg_tensor **out, tg_tensor *x, double p, bool training,
                             tg_rng *rng)
{
    return alpha_dropout("feature_alpha_dropout", out, x, p, training, rng, true);
}
