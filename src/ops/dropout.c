/* src/ops/dropout.c - F.dropout(x, p, training): x times a mask of
 * (u >= p) / (1 - p), u ~ U[0, 1) drawn in x's dtype and shape from a
 * counter-based generator, so the mask depends only on (seed, counter).
 * The product is a recorded tg_mul with a constant mask, so the gradient
 * is g times the same mask, to any order. */
#include "autograd/tape.h"
#include "tapegrad/ops.h"

/* mask = (u >= p) / (1 - p) (0 everywhere for p = 1), in x's dtype. */
static int dropout_mask(tg_tensor **mask, const tg_tensor *x, double p, tg_rng *rng)
{
    tg_tensor *m = NULL;
    TG_TRY(tg_tensor_zeros(&m, x->dtype, x->ndim, x->shape));
    int rc = tg_tensor_rand_uniform(m, rng, 0.0, 1.0);
    if (rc < 0) {
        tg_tensor_release(m);
        return rc;
    }
    const tg_dtype dt = m->dtype;
    void *d = tg_tensor_data(m);
    const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    for (int64_t i = 0, n = tg_tensor_numel(m); i < n; i++)
        tg_dtype_store(dt, d, i, tg_dtype_load(dt, d, i) < p ? 0.0 : scale);
    *mask = m;
    return TG_OK;
}

int tg_dropout(tg_tensor **out, tg_tensor *x, double p, bool training, tg_rng *rng)
{
    TG_CHECK(out != NULL, TG_EINVAL, "dropout: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "dropout: x must not be NULL");
    TG_CHECK(p >= 0.0 && p <= 1.0, TG_EINVAL, "dropout: p=%g must be in [0, 1]", p);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE,
             "dropout: x has dtype %s; float dtypes only", tg_dtype_name(x->dtype));
    TG_CHECK(rng != NULL || !training || p == 0.0, TG_EINVAL,
             "dropout: rng must not be NULL when training with p > 0");
    if (!training || p == 0.0) {   /* the identity: x itself, nothing drawn */
        *out = tg_tensor_retain(x);
        return tg__scope_capture(out, TG_OK);
    }
    tg_tensor *mask = NULL;
    tg__lib_enter();
    int rc = dropout_mask(&mask, x, p, rng);
    if (rc >= 0) rc = tg_mul(out, x, mask);
    tg__lib_leave();
    tg_tensor_release(mask);
    return tg__scope_capture(out, rc);
}
