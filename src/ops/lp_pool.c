/* src/ops/lp_pool.c - lp_pool (F.lp_pool1d/2d, nn.LPPool1d/2d): the
 * p-norm of each window, composed as torch 1.13 composes it,
 *   a = avg_pool(x^p, kernel, stride, padding 0, ceil_mode)
 *   y = (sign(a) * relu(|a|) * K)^(1/p)       K: the kernel's size
 * so y = (sum of x^p over the window)^(1/p), a window that a ceil_mode
 * output cuts short averaged over its part inside x and then multiplied by
 * the full K, as torch's.  Its gradients are those of the parts, so every
 * order is differentiable; as torch's, a window whose sum is 0 has an
 * infinite or NaN gradient for p > 1 (the root's slope at 0). */
#include <math.h>

#include "core/core.h"
#include "ops/pool_internal.h"
#include "tapegrad/ops.h"
#include "tapegrad/pool.h"

static int lp_pool(tg_tensor **y, tg_tensor *x, int n, double norm_type, const tg_pool_params *p)
{
    tg_pool_params q = TG_POOL_PARAMS_INIT;
    double kprod = 1;
    for (int a = 0; a < n; a++) {
        q.kernel[a] = p->kernel[a];
        q.stride[a] = p->stride[a];
        kprod *= (double)p->kernel[a];
    }
    q.ceil_mode = p->ceil_mode;
    tg_tensor *xp = NULL, *a = NULL, *sg = NULL, *ab = NULL, *r = NULL, *m = NULL, *k = NULL;
    int rc;
    TG_TRY_GOTO(tg_pow_scalar(&xp, x, norm_type));
    TG_TRY_GOTO(tg_avg_pool(&a, xp, n, &q));
    TG_TRY_GOTO(tg_sign(&sg, a));
    TG_TRY_GOTO(tg_abs(&ab, a));
    TG_TRY_GOTO(tg_relu(&r, ab));
    TG_TRY_GOTO(tg_mul(&m, sg, r));
    TG_TRY_GOTO(tg_mul_scalar(&k, m, kprod));
    TG_TRY_GOTO(tg_pow_scalar(y, k, 1.0 / norm_type));
done:
    tg_tensor_release(xp);
    tg_tensor_release(a);
    tg_tensor_release(sg);
    tg_tensor_release(ab);
    tg_tensor_release(r);
    tg_tensor_release(m);
    tg_tensor_release(k);
    return rc;
}

int tg_lp_pool(tg_tensor **out, tg_tensor *x, int n_spatial, double norm_type,
               const tg_pool_params *p)
{
    const char *op = n_spatial == 1 ? "lp_pool1d" : n_spatial == 2 ? "lp_pool2d" : "lp_pool";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL && p != NULL, TG_EINVAL, "%s: x and p must not be NULL", op);
    TG_CHECK(n_spatial == 1 || n_spatial == 2, TG_EINVAL,
             "%s: n_spatial=%d must be 1 or 2 (torch 1.13 has lp_pool1d and lp_pool2d)", op,
             n_spatial);
    TG_CHECK(isfinite(norm_type) && norm_type != 0, TG_EINVAL,
             "%s: norm_type=%g must be finite and not 0", op, norm_type);
    for (int a = 0; a < n_spatial; a++)
        TG_CHECK(p->padding[a] == 0 && p->dilation[a] == 1, TG_EINVAL,
                 "%s: padding[%d]=%lld and dilation[%d]=%lld must be 0 and 1 (lp_pool has "
                 "neither)", op, a, (long long)p->padding[a], a, (long long)p->dilation[a]);
    /* The kernel, stride and the input are checked by avg_pool, whose
     * messages name it. */
    tg_pool_params r;
    TG_TRY(tg__pool_check_params(op, TG__AVG_POOL, n_spatial, p, &r));
    tg__lib_enter();
    const int rc = lp_pool(out, x, n_spatial, norm_type, p);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
