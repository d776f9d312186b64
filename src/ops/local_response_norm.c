/* src/ops/local_response_norm.c - F.local_response_norm(x, size, alpha,
 * beta, k) of PyTorch 1.13, composed of differentiable public ops
 * (derivatives of any order follow).
 *
 * For x (N, C, *) and channel c, with the squares zero-padded by
 * size/2 channels before and (size-1)/2 after:
 *
 *   avg[n, c, s] = (1/size) sum_{c' = c - size/2}^{c + (size-1)/2} x[n, c', s]^2
 *   y = x / (k + alpha * avg)^beta
 *
 * The window sum is torch's own: the squares read as (N, 1, C, L) with L
 * the product of the trailing dims, padded along C and average-pooled with
 * a (size, 1) window at stride 1 (torch pools 3-d inputs with avg_pool2d
 * and others with avg_pool3d over (size, 1, 1), the same windows).  A side
 * of the window longer than C - 1 channels reaches past every channel, so
 * each side is cut to at most C - 1 (the sums stay the same) and the
 * average over the cut window k' rescaled by k' / size: the padding, and
 * the work, stay within 3 C channels whatever the size. */
#include "core/core.h"
#include "tapegrad/ops.h"
#include "tapegrad/pool.h"

static int check_lrn(tg_tensor **out, const tg_tensor *x, int64_t size, double alpha,
                     double beta, double k)
{
    const char *op = "local_response_norm";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "%s: x has dtype %s; float dtypes only", op,
             tg_dtype_name(x->dtype));
    TG_CHECK(x->ndim >= 3, TG_ESHAPE,
             "%s: x has %d dims; it must have at least 3 (N, C, *), as torch's", op, x->ndim);
    TG_CHECK(size >= 1 && size <= TG_POOL_MAX_PARAM, TG_EINVAL,
             "%s: size=%lld must be in [1, 2^31 - 1]", op, (long long)size);
    TG_CHECK(alpha == alpha && beta == beta && k == k, TG_EINVAL,
             "%s: alpha, beta and k must not be NaN", op);
    return TG_OK;
}

/* The op itself, its arguments checked and x not empty. */
static int lrn(tg_tensor **out, tg_tensor *x, int64_t size, double alpha, double beta, double k)
{
    const int64_t n = x->shape[0], c = x->shape[1];
    const int64_t l = tg_tensor_numel(x) / (n * c);
    /* the window of channel q: q - before .. q + after, each side cut to
     * C - 1 channels */
    const int64_t before = size / 2 < c - 1 ? size / 2 : c - 1;
    const int64_t after = (size - 1) / 2 < c - 1 ? (size - 1) / 2 : c - 1;
    const int64_t k_cut = before + after + 1;
    enum { SQ, SQ4, PADDED, AVG, AVGX, SCALED, SHIFTED, DIV, N_T };
    tg_tensor *t[N_T] = {NULL};
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    p.kernel[0] = k_cut, p.kernel[1] = 1;
    p.stride[0] = 1, p.stride[1] = 1;
    int rc;
    TG_TRY_GOTO(tg_mul(&t[SQ], x, x));
    TG_TRY_GOTO(tg_reshape(&t[SQ4], t[SQ], 4, (const int64_t[]){n, 1, c, l}));
    /* tg_pad's order: the last dim's (before, after) first, then C's */
    TG_TRY_GOTO(tg_pad(&t[PADDED], t[SQ4], 4, (const int64_t[]){0, 0, before, after},
                       TG_PAD_CONSTANT, 0.0));
    TG_TRY_GOTO(tg_avg_pool(&t[AVG], t[PADDED], 2, &p));   /* (N, 1, C, L) */
    TG_TRY_GOTO(tg_reshape(&t[AVGX], t[AVG], x->ndim, x->shape));
    /* alpha * sum / size = alpha * (k' / size) * (sum / k') */
    TG_TRY_GOTO(tg_mul_scalar(&t[SCALED], t[AVGX], alpha * (double)k_cut / (double)size));
    TG_TRY_GOTO(tg_add_scalar(&t[SHIFTED], t[SCALED], k));
    TG_TRY_GOTO(tg_pow_scalar(&t[DIV], t[SHIFTED], beta));
    rc = tg_div(out, x, t[DIV]);
done:
    for (int i = 0; i < N_T; i++) tg_tensor_release(t[i]);
    return rc;
}

int tg_local_response_norm(tg_tensor **out, tg_tensor *x, int64_t size, double alpha,
                           double beta, double k)
{
    TG_TRY(check_lrn(out, x, size, alpha, beta, k));
    if (tg_tensor_numel(x) == 0) {   /* x itself, as torch's */
        *out = tg_tensor_retain(x);
        return tg__scope_capture(out, TG_OK);
    }
    tg_tensor *y = NULL;
    tg__lib_enter();
    int rc = lrn(&y, x, size, alpha, beta, k);
    tg__lib_leave();
    if (rc >= 0) *out = y;
    return tg__scope_capture(out, rc);
}
