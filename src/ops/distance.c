/* src/ops/distance.c - F.cosine_similarity, F.pairwise_distance, cdist and pdist of
 * PyTorch 1.13, composed of differentiable public ops (derivatives of any
 * order follow), and the gradient-preserving clamp they and
 * gaussian_nll_loss share.
 *
 *   cosine_similarity(x1, x2) = sum(x1 / n1 * x2 / n2) over dim,
 *     n = sqrt(max(sum(x^2), eps^2)), x1 and x2 first expanded to their
 *     broadcast shape (so a stretched extent counts in the norm)
 *   pairwise_distance(x1, x2) = ||x1 - x2 + eps||_p over the last dim of
 *     the broadcast shape
 *   cdist(x1, x2, p)[.., i, j] = ||x1[.., i, :] - x2[.., j, :]||_p, the
 *     batch dims broadcast; as torch's default compute mode, for p = 2 with
 *     more than 25 rows on either side through one product instead:
 *     sqrt(max(|x1_i|^2 - 2 x1_i . x2_j + |x2_j|^2, 0)), whose gradient is
 *     torch's there too (0 where the distance is 0); for p = inf as
 *     torch's CPU kernel: the largest |difference| that is not NaN, and
 *     its gradient, the whole of it to each tied largest |difference| and
 *     NaN at a difference that is NaN or infinite
 *   pdist(x, p)[k] = ||x[i] - x[j]||_p for the k-th pair i < j in row-major
 *     order, the same norms as cdist's direct path
 *
 * torch clamps the squared norms in place under no_grad, so its gradient
 * ignores the clamp: d n / d x = x / n with the clamped n.  The clamp here
 * is tg__clamp_min_through, which keeps that gradient. */
#include <math.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"
#include "tapegrad/scope.h"

/* where(s < lo, (s - detach(s)) + lo, s): lo where s < lo, with the
 * gradient 1 everywhere.  s - detach(s) is exactly 0 for a finite s, so the
 * value is lo itself; NaN stays NaN (the comparison is false). */
int tg__clamp_min_through(tg_tensor **out, tg_tensor *s, double lo)
{
    tg_tensor *d = NULL, *z = NULL, *c = NULL, *m = NULL;
    int rc;
    TG_TRY_GOTO(tg_tensor_detach(&d, s));
    TG_TRY_GOTO(tg_sub(&z, s, d));
    TG_TRY_GOTO(tg_add_scalar(&c, z, lo));
    TG_TRY_GOTO(tg_lt_scalar(&m, s, lo));
    rc = tg_where(out, m, c, s);
done:
    tg_tensor_release(d);
    tg_tensor_release(z);
    tg_tensor_release(c);
    tg_tensor_release(m);
    return rc;
}

/* Non-NULL float x1 and x2 whose shapes broadcast: the broadcast shape in
 * (*nd, sh). */
static int check_pair(const char *op, tg_tensor **out, const tg_tensor *x1, const tg_tensor *x2,
                      int *nd, int64_t *sh)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x1 != NULL, TG_EINVAL, "%s: x1 must not be NULL", op);
    TG_CHECK(x2 != NULL, TG_EINVAL, "%s: x2 must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(x1->dtype), TG_EDTYPE, "%s: x1 has dtype %s; float dtypes only",
             op, tg_dtype_name(x1->dtype));
    TG_CHECK(tg_dtype_is_float(x2->dtype), TG_EDTYPE, "%s: x2 has dtype %s; float dtypes only",
             op, tg_dtype_name(x2->dtype));
    return tg__broadcast_shapes(op, x1->ndim, x1->shape, x2->ndim, x2->shape, nd, sh);
}

/* x / sqrt(max(sum(x^2, dim), eps2)), the sum kept as a dim of extent 1. */
static int normalize(tg_tensor **out, tg_tensor *x, int dim, double eps2)
{
    tg_tensor *sq = NULL, *s = NULL, *c = NULL, *n = NULL;
    int rc;
    TG_TRY_GOTO(tg_mul(&sq, x, x));
    TG_TRY_GOTO(tg_sum_dims(&s, sq, 1, &dim, true));
    TG_TRY_GOTO(tg__clamp_min_through(&c, s, eps2));
    TG_TRY_GOTO(tg_sqrt(&n, c));
    rc = tg_div(out, x, n);
done:
    tg_tensor_release(sq);
    tg_tensor_release(s);
    tg_tensor_release(c);
    tg_tensor_release(n);
    return rc;
}

/* x1 and x2 (new references) in their promoted float dtype
 * (tg_promote_dtypes). */
static int common_dtype(tg_tensor **a, tg_tensor **b, tg_tensor *x1, tg_tensor *x2)
{
    const tg_dtype dt = tg_promote_dtypes(x1->dtype, x2->dtype);
    int rc = x1->dtype == dt ? (*a = tg_tensor_retain(x1), TG_OK) : tg_to_dtype(a, x1, dt);
    if (rc == TG_OK)
        rc = x2->dtype == dt ? (*b = tg_tensor_retain(x2), TG_OK) : tg_to_dtype(b, x2, dt);
    if (rc < 0) {
        tg_tensor_release(*a);
        *a = NULL;
    }
    return rc;
}

static int cosine_similarity(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, int dim, double eps)
{
    const char *op = "cosine_similarity";
    int nd = 0;
    int64_t sh[TG_MAX_DIMS];
    TG_TRY(check_pair(op, out, x1, x2, &nd, sh));
    const int lim = nd > 0 ? nd : 1;   /* a 0-d pair takes dim 0 and -1, as torch */
    TG_CHECK(dim >= -lim && dim < lim, TG_EINVAL,
             "cosine_similarity: dim=%d must be in [%d, %d) for the broadcast shape of %d dims",
             dim, -lim, lim, nd);
    TG_CHECK(!isnan(eps), TG_EINVAL, "cosine_similarity: eps must not be NaN");
    if (dim < 0) dim += lim;
    const int64_t one = 1;
    if (nd == 0) sh[0] = 1;
    tg_tensor *e1 = NULL, *e2 = NULL, *a = NULL, *b = NULL, *p = NULL, *y = NULL;
    int rc;
    /* in the common dtype (the norms too), expanded first, as torch's: a
     * stretched extent of dim counts in the norm */
    TG_TRY_GOTO(common_dtype(&a, &b, x1, x2));
    TG_TRY_GOTO(tg_expand(&e1, a, nd > 0 ? nd : 1, nd > 0 ? sh : &one));
    TG_TRY_GOTO(tg_expand(&e2, b, nd > 0 ? nd : 1, nd > 0 ? sh : &one));
    tg_tensor_release(a);
    tg_tensor_release(b);
    a = b = NULL;
    TG_TRY_GOTO(normalize(&a, e1, dim, eps * eps));
    TG_TRY_GOTO(normalize(&b, e2, dim, eps * eps));
    TG_TRY_GOTO(tg_mul(&p, a, b));
    TG_TRY_GOTO(tg_sum_dims(nd > 0 ? out : &y, p, 1, &dim, false));
    if (nd == 0) rc = tg_reshape(out, y, 0, NULL);
done:
    tg_tensor_release(e1);
    tg_tensor_release(e2);
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_tensor_release(p);
    tg_tensor_release(y);
    return rc;
}

static int pairwise_distance(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, double p, double eps,
                             bool keepdim)
{
    int nd = 0;
    int64_t sh[TG_MAX_DIMS];
    TG_TRY(check_pair("pairwise_distance", out, x1, x2, &nd, sh));
    TG_CHECK(!isnan(p), TG_EINVAL, "pairwise_distance: p must not be NaN");
    TG_CHECK(!isnan(eps), TG_EINVAL, "pairwise_distance: eps must not be NaN");
    tg_tensor *d = NULL, *de = NULL;
    int rc;
    const int last = nd - 1;
    TG_TRY_GOTO(tg_sub(&d, x1, x2));
    TG_TRY_GOTO(tg_add_scalar(&de, d, eps));
    /* a 0-d difference: torch's norm over dim -1 of it is |d + eps| */
    rc = tg_vector_norm(out, de, p, nd > 0 ? 1 : 0, nd > 0 ? &last : NULL, keepdim);
done:
    tg_tensor_release(d);
    tg_tensor_release(de);
    return rc;
}

/* Checks cdist's operands: float, one dtype, 2-d or more, the same number
 * of columns, batch dims that broadcast. */
static int check_cdist(tg_tensor **out, const tg_tensor *x1, const tg_tensor *x2, double p)
{
    const char *op = "cdist";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x1 != NULL, TG_EINVAL, "%s: x1 must not be NULL", op);
    TG_CHECK(x2 != NULL, TG_EINVAL, "%s: x2 must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(x1->dtype), TG_EDTYPE, "%s: x1 has dtype %s; float dtypes only",
             op, tg_dtype_name(x1->dtype));
    TG_CHECK(x1->dtype == x2->dtype, TG_EDTYPE,
             "%s: x1 has dtype %s and x2 %s; they must be the same", op,
             tg_dtype_name(x1->dtype), tg_dtype_name(x2->dtype));
    TG_CHECK(x1->ndim >= 2 && x2->ndim >= 2, TG_EINVAL,
             "%s: x1 has %d dims and x2 %d; each must have at least 2 (rows, columns)", op,
             x1->ndim, x2->ndim);
    const int64_t m1 = x1->shape[x1->ndim - 1], m2 = x2->shape[x2->ndim - 1];
    TG_CHECK(m1 == m2, TG_ESHAPE, "%s: x1 has %lld columns and x2 %lld; they must be the same",
             op, (long long)m1, (long long)m2);
    TG_CHECK(p >= 0, TG_EINVAL, "%s: p=%g must be >= 0 (and not NaN)", op, p);
    int nd = 0;
    int64_t sh[TG_MAX_DIMS];
    return tg__broadcast_shapes(op, x1->ndim - 2, x1->shape, x2->ndim - 2, x2->shape, &nd, sh);
}

/* cat(x * scale, |x|^2 or 1, 1 or |x|^2) along the last dim: the rows of
 * the product whose entries are |x1_i|^2 - 2 x1_i . x2_j + |x2_j|^2. */
static int augment(tg_tensor **out, tg_tensor *x, double scale, bool norm_first)
{
    tg_tensor *sc = NULL, *sq = NULL, *n = NULL, *one = NULL;
    const int last = x->ndim - 1;
    int rc;
    TG_TRY_GOTO(tg_mul_scalar(&sc, x, scale));
    TG_TRY_GOTO(tg_mul(&sq, x, x));
    TG_TRY_GOTO(tg_sum_dims(&n, sq, 1, &last, true));
    TG_TRY_GOTO(tg_tensor_full(&one, n->dtype, n->ndim, n->shape, 1.0));
    rc = tg_cat(out, 3, (tg_tensor *[]){sc, norm_first ? n : one, norm_first ? one : n}, last);
done:
    tg_tensor_release(sc);
    tg_tensor_release(sq);
    tg_tensor_release(n);
    tg_tensor_release(one);
    return rc;
}

/* p = 2 through one product: sqrt(r) where r > 0, else 0 with the gradient
 * 0 (torch's _euclidean_dist and its backward's mask); NaN stays NaN. */
static int cdist_mm(tg_tensor **out, tg_tensor *x1, tg_tensor *x2)
{
    tg_tensor *a = NULL, *b = NULL, *bt = NULL, *r = NULL, *z = NULL, *rs = NULL, *s = NULL;
    int rc;
    TG_TRY_GOTO(augment(&a, x1, -2.0, true));
    TG_TRY_GOTO(augment(&b, x2, 1.0, false));
    TG_TRY_GOTO(tg_transpose(&bt, b, -1, -2));
    TG_TRY_GOTO(tg_matmul(&r, a, bt));
    TG_TRY_GOTO(tg_le_scalar(&z, r, 0.0));
    TG_TRY_GOTO(tg_masked_fill(&rs, r, z, 1.0));
    TG_TRY_GOTO(tg_sqrt(&s, rs));
    rc = tg_masked_fill(out, s, z, 0.0);
done:
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_tensor_release(bt);
    tg_tensor_release(r);
    tg_tensor_release(z);
    tg_tensor_release(rs);
    tg_tensor_release(s);
    return rc;
}

/* The inf-norm of differences d (.., M), M > 0, as torch 1.13's CPU
 * cdist: v = the largest |d_k| that is not NaN (0 when every one is: its
 * running max(agg, |d_k|) passes a NaN over), and the gradient
 * g sign(d_k) (1 - min(1, ceil(||d_k| - v|))) of its _cdist_backward:
 * g sign(d_k) at every k where |d_k| = v (each tie the whole of g), NaN
 * where d_k is NaN or infinite (||d_k| - v| is NaN or infinite there,
 * v being infinite when a d_k is), 0 elsewhere.
 * The value is v, held constant, plus z = s - detach(s) = 0 for
 * s = sum(masked_fill(d (m + n), n is NaN, 0)) with m = sign(d) at the
 * ties, else 0, and n = 0 d (NaN at the non-finite d_k, else 0), both
 * constant.  s is finite and its gradient reaches d through masked_fill
 * (a where, whose gradient is g times its 0/1 mask) and the product:
 * g m at a finite d_k, 0 (m + n) = NaN at the others.  z is set to 0
 * where s overflows. */
static int cdist_inf(tg_tensor **out, tg_tensor *d)
{
    enum { DD, AD, NANS, ADN, VD, VK, OFF, SG, M, K, KNAN, MK, DM, W, S, SD, Z, BIG, ZF, N };
    tg_tensor *t[N] = {NULL};
    const int last = -1;
    int rc;
    TG_TRY_GOTO(tg_tensor_detach(&t[DD], d));
    TG_TRY_GOTO(tg_abs(&t[AD], t[DD]));
    TG_TRY_GOTO(tg_isnan(&t[NANS], t[AD]));
    TG_TRY_GOTO(tg_masked_fill(&t[ADN], t[AD], t[NANS], 0.0));
    TG_TRY_GOTO(tg_amax_dims(&t[VD], t[ADN], 1, &last, false));
    if (!tg_tensor_requires_grad(d)) {
        *out = tg_tensor_retain(t[VD]);
        goto done;
    }
    TG_TRY_GOTO(tg_unsqueeze(&t[VK], t[VD], -1));
    TG_TRY_GOTO(tg_ne(&t[OFF], t[AD], t[VK]));   /* NaN != v: off */
    TG_TRY_GOTO(tg_sign(&t[SG], t[DD]));
    TG_TRY_GOTO(tg_masked_fill(&t[M], t[SG], t[OFF], 0.0));
    TG_TRY_GOTO(tg_mul_scalar(&t[K], t[DD], 0.0));
    TG_TRY_GOTO(tg_isnan(&t[KNAN], t[K]));
    TG_TRY_GOTO(tg_add(&t[MK], t[M], t[K]));
    TG_TRY_GOTO(tg_mul(&t[DM], d, t[MK]));
    TG_TRY_GOTO(tg_masked_fill(&t[W], t[DM], t[KNAN], 0.0));
    TG_TRY_GOTO(tg_sum_dims(&t[S], t[W], 1, &last, false));
    TG_TRY_GOTO(tg_tensor_detach(&t[SD], t[S]));
    TG_TRY_GOTO(tg_sub(&t[Z], t[S], t[SD]));
    TG_TRY_GOTO(tg_isinf(&t[BIG], t[SD]));   /* s >= 0: the ties' |d|, summed */
    TG_TRY_GOTO(tg_masked_fill(&t[ZF], t[Z], t[BIG], 0.0));
    rc = tg_add(out, t[VD], t[ZF]);
done:
    tg__loss_release_all(t, N);
    return rc;
}

/* The p-norm of differences d (.., M) over the last dim, as cdist's and
 * pdist's: no columns give distances of 0 (an empty sum), as torch's for
 * every p; p = inf is cdist_inf. */
static int dist_rows(tg_tensor **out, tg_tensor *d, double p)
{
    const int last = -1;
    return d->shape[d->ndim - 1] == 0 ? tg_sum_dims(out, d, 1, &last, false)
           : isinf(p)                 ? cdist_inf(out, d)
                                      : tg_vector_norm(out, d, p, 1, &last, false);
}

/* The p-norm of every pair's difference, (.., P, 1, M) - (.., 1, R, M). */
static int cdist_direct(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, double p)
{
    tg_tensor *a = NULL, *b = NULL, *d = NULL;
    int rc;
    TG_TRY_GOTO(tg_unsqueeze(&a, x1, x1->ndim - 1));
    TG_TRY_GOTO(tg_unsqueeze(&b, x2, x2->ndim - 2));
    TG_TRY_GOTO(tg_sub(&d, a, b));
    rc = dist_rows(out, d, p);
done:
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_tensor_release(d);
    return rc;
}

int tg_cdist(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, double p)
{
    TG_TRY(check_cdist(out, x1, x2, p));
    tg__lib_enter();
    tg_tensor *c[2];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){x1, x2}, 2);
    if (rc == TG_OK) {
        /* in c's dtype throughout: the product path's matmul is not lowered
         * by an autocast scope (torch's cdist is on its fp32 list) */
        const bool suspended = tg__autocast_suspend(true);
        const int64_t r1 = x1->shape[x1->ndim - 2], r2 = x2->shape[x2->ndim - 2];
        rc = p == 2.0 && (r1 > 25 || r2 > 25) ? cdist_mm(out, c[0], c[1])
                                             : cdist_direct(out, c[0], c[1], p);
        tg__autocast_suspend(suspended);
    }
    tg__lib_leave();
    for (int i = 0; i < 2; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}

/* pdist's rows: x[i] - x[j] for the K = N (N - 1) / 2 pairs i < j in
 * row-major order (triu_indices(N, N, 1)), gathered by index_select, whose
 * gradient scatters back (differentiable to any order); then dist_rows. */
static int pdist_rows(tg_tensor **out, tg_tensor *x, double p)
{
    enum { IJ, IR, JR, I, J, A, B, D, N };
    tg_tensor *t[N] = {NULL};
    const int64_t n = x->shape[0], k = n * (n - 1) / 2;
    int rc;
    TG_TRY_GOTO(tg_triu_indices(&t[IJ], n, n, 1));   /* (2, K) */
    TG_TRY_GOTO(tg_narrow(&t[IR], t[IJ], 0, 0, 1));
    TG_TRY_GOTO(tg_narrow(&t[JR], t[IJ], 0, 1, 1));
    TG_TRY_GOTO(tg_reshape(&t[I], t[IR], 1, &k));
    TG_TRY_GOTO(tg_reshape(&t[J], t[JR], 1, &k));
    TG_TRY_GOTO(tg_index_select(&t[A], x, 0, t[I]));   /* (K, M) */
    TG_TRY_GOTO(tg_index_select(&t[B], x, 0, t[J]));
    TG_TRY_GOTO(tg_sub(&t[D], t[A], t[B]));
    rc = dist_rows(out, t[D], p);
done:
    tg__loss_release_all(t, N);
    return rc;
}

int tg_pdist(tg_tensor **out, tg_tensor *x, double p)
{
    const char *op = "pdist";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "%s: x has dtype %s; float dtypes only",
             op, tg_dtype_name(x->dtype));
    TG_CHECK(x->ndim == 2, TG_ESHAPE, "%s: x has %d dims; it must have 2 (rows, columns)", op,
             x->ndim);
    TG_CHECK(p >= 0, TG_EINVAL, "%s: p=%g must be >= 0 (and not NaN)", op, p);
    tg__lib_enter();
    tg_tensor *c = NULL;
    int rc = tg__loss_amp_f32(&c, &x, 1);
    if (rc == TG_OK) {
        const bool suspended = tg__autocast_suspend(true);
        rc = pdist_rows(out, c, p);
        tg__autocast_suspend(suspended);
    }
    tg__lib_leave();
    tg_tensor_release(c);
    return tg__scope_capture(out, rc);
}

int tg_cosine_similarity(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, int dim, double eps)
{
    tg__lib_enter();
    tg_tensor *c[2];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){x1, x2}, 2);
    if (rc == TG_OK) rc = cosine_similarity(out, c[0], c[1], dim, eps);
    tg__lib_leave();
    for (int i = 0; i < 2; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}

int tg_pairwise_distance(tg_tensor **out, tg_tensor *x1, tg_tensor *x2, double p, double eps,
                         bool keepdim)
{
    tg__lib_enter();
    tg_tensor *c[2];
    int rc = tg__loss_amp_f32(c, (tg_tensor *[]){x1, x2}, 2);
    if (rc == TG_OK) rc = tg__loss_ints_to_float(c, 2);
    if (rc == TG_OK) rc = pairwise_distance(out, c[0], c[1], p, eps, keepdim);
    tg__lib_leave();
    for (int i = 0; i < 2; i++) tg_tensor_release(c[i]);
    return tg__scope_capture(out, rc);
}
