/* src/ops/linalg_compose.c - the torch.linalg functions made of others, so
 * that their gradients of any order come from those of their parts:
 * matrix_norm (svdvals, abs, sums, amax / amin), pinv (an op: svd or eigh
 * as torch's, reciprocal singular values above a tolerance, and torch's
 * pinv_backward formula written with matmuls), matrix_rank (a
 * count, not differentiable), matrix_power (repeated squaring by matmul,
 * inv for a negative power, in torch's order), logdet (slogdet: NaN for a
 * negative determinant) and multi_dot (matmuls in the cheapest order). */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/linalg_la.h"
#include "tapegrad/linalg.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

/* ---- matrix_norm --------------------------------------------------------- */

typedef enum norm_ord {
    ORD_FRO, ORD_NUC, ORD_2, ORD_M2, ORD_1, ORD_M1, ORD_INF, ORD_MINF
} norm_ord;

static int parse_ord(const char *ord, norm_ord *o)
{
    static const char *const names[] = {"fro", "nuc", "2", "-2", "1", "-1", "inf", "-inf"};
    TG_CHECK(ord != NULL, TG_EINVAL, "linalg.matrix_norm: ord is NULL");
    for (int i = 0; i < 8; i++)
        if (!strcmp(ord, names[i])) {
            *o = (norm_ord)i;
            return TG_OK;
        }
    return tg__error(TG_EINVAL, "linalg.matrix_norm: Order %s not supported (fro, nuc, 2, -2, "
                     "1, -1, inf or -inf)", ord);
}

/* The norm of A's matrices along its last two dims (rows -2, columns -1). */
static int norm_last2(tg_tensor *A, norm_ord o, tg_tensor **out)
{
    tg_tensor *t = NULL, *u = NULL;
    int rc;
    switch (o) {
    case ORD_FRO:
        return tg_vector_norm(out, A, 2, 2, (int[]){-2, -1}, false);
    case ORD_NUC:
    case ORD_2:
    case ORD_M2:
        rc = tg_linalg_svdvals(&t, A);
        if (rc >= 0 && o == ORD_NUC) rc = tg_sum_dims(out, t, 1, (int[]){-1}, false);
        else if (rc >= 0 && o == ORD_2) rc = tg_amax_dims(out, t, 1, (int[]){-1}, false);
        else if (rc >= 0) rc = tg_amin_dims(out, t, 1, (int[]){-1}, false);
        break;
    default: {   /* 1, -1: the column sums of |A|; inf, -inf: the row sums */
        const bool cols = o == ORD_1 || o == ORD_M1, largest = o == ORD_1 || o == ORD_INF;
        rc = tg_abs(&t, A);
        if (rc >= 0) rc = tg_sum_dims(&u, t, 1, (int[]){cols ? -2 : -1}, false);
        if (rc >= 0 && largest) rc = tg_amax_dims(out, u, 1, (int[]){-1}, false);
        else if (rc >= 0) rc = tg_amin_dims(out, u, 1, (int[]){-1}, false);
        break;
    }
    }
    tg_tensor_release(t);
    tg_tensor_release(u);
    return rc;
}

int tg_linalg_matrix_norm(tg_tensor **out, tg_tensor *A, const char *ord, const int *dims,
                          bool keepdim)
{
    static const char fn[] = "linalg.matrix_norm";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    norm_ord o = ORD_FRO;
    TG_TRY(parse_ord(ord, &o));
    TG_TRY(tg__la_check(fn, "A", A, false));
    const int nd = tg_tensor_ndim(A);
    int d[2] = {-2, -1};
    if (dims) d[0] = dims[0], d[1] = dims[1];
    for (int i = 0; i < 2; i++) {
        TG_CHECK(d[i] >= -nd && d[i] < nd, TG_EINVAL,
                 "%s: dim[%d]=%d out of range for a tensor of %d dims", fn, i, d[i], nd);
        if (d[i] < 0) d[i] += nd;
    }
    TG_CHECK(d[0] != d[1], TG_EINVAL, "%s: dims must be different. Got (%d, %d)", fn, d[0], d[1]);
    tg__lib_enter();
    tg_tensor *m = NULL, *r = NULL, *k = NULL;
    int rc = tg_movedim(&m, A, 2, d, (int[]){nd - 2, nd - 1});
    if (rc >= 0) rc = norm_last2(m, o, &r);
    if (rc >= 0 && keepdim) {   /* the two dims back as extents of 1, in order */
        const int lo = d[0] < d[1] ? d[0] : d[1], hi = d[0] < d[1] ? d[1] : d[0];
        rc = tg_unsqueeze(&k, r, lo);
        tg_tensor_release(r);
        r = NULL;
        if (rc >= 0) rc = tg_unsqueeze(&r, k, hi);
    }
    tg_tensor_release(m);
    tg_tensor_release(k);
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return tg__scope_capture(out, rc);
}

/* ---- pinv and matrix_rank ------------------------------------------------ */

/* torch's tolerance: atol and rtol < 0 are unset; both unset: rtol = eps
 * max(m, n); atol set above 0 and rtol unset: rtol = 0.  tol = max(atol,
 * rtol * the largest |value| of each matrix), from vals (..., k), shaped
 * (..., 1).  Not recorded (a threshold has no gradient). */
static int tolerance(tg_tensor *vals, tg_tensor *A, double atol, double rtol, tg_tensor **tol)
{
    const int64_t m = tg_tensor_dim(A, -2), n = tg_tensor_dim(A, -1);
    const double eps = tg_tensor_dtype(A) == TG_F64 ? 0x1p-52 : 0x1p-23;
    if (rtol < 0) rtol = atol > 0 ? 0 : eps * (double)(m > n ? m : n);
    if (atol < 0) atol = 0;
    tg_tensor *a = NULL, *mx = NULL, *s = NULL;
    bool prev = tg_set_grad_enabled(false);
    int rc = tg_abs(&a, vals);
    if (rc >= 0) rc = tg_amax_dims(&mx, a, 1, (int[]){-1}, true);
    if (rc >= 0) rc = tg_mul_scalar(&s, mx, rtol);
    if (rc >= 0) rc = tg_clamp(tol, s, atol, INFINITY);
    tg_set_grad_enabled(prev);
    tg_tensor_release(a);
    tg_tensor_release(mx);
    tg_tensor_release(s);
    return rc;
}

/* The singular values (or |eigenvalues|, hermitian) of A, with U and Vh
 * (or Q and Q^T) when wanted. */
static int spectrum(tg_tensor *A, bool hermitian, tg_tensor **vals, tg_tensor **u,
                    tg_tensor **vh)
{
    if (!hermitian) return tg_linalg_svd(u, vals, vh, A, false);
    tg_tensor *q = NULL;
    int rc = tg_linalg_eigh(vals, u ? &q : NULL, A, false);
    if (rc >= 0 && u) {
        *u = q;
        rc = tg__la_mT(vh, q);
    }
    return rc;
}

typedef struct pinv_params {
    double atol, rtol;
    bool hermitian;
} pinv_params;

/* V diag(1/S) U^T (hermitian: Q diag(1/L) Q^T), values at or below the
 * tolerance counted as zero; run by the op's forward, not recorded. */
static int pinv_forward(tg_ctx *ctx, tg_tensor **out, int n_in, tg_tensor *const *in,
                        const void *params)
{
    (void)n_in;
    const pinv_params *p = params;
    tg_tensor *A = in[0];
    TG_TRY(tg__la_check("linalg.pinv", "A", A, p && p->hermitian));
    tg_tensor *s = NULL, *u = NULL, *vh = NULL, *tol = NULL, *keep = NULL, *abs = NULL,
              *inv = NULL, *zero = NULL, *sp = NULL, *v = NULL, *vs = NULL, *ut = NULL,
              *spu = NULL, *r = NULL;
    int rc = spectrum(A, p && p->hermitian, &s, &u, &vh);
    if (rc >= 0) rc = tolerance(s, A, p ? p->atol : -1, p ? p->rtol : -1, &tol);
    if (rc >= 0) rc = tg_abs(&abs, s);
    if (rc >= 0) rc = tg_gt(&keep, abs, tol);
    if (rc >= 0) rc = tg_reciprocal(&inv, s);
    if (rc >= 0) rc = tg_tensor_zeros(&zero, tg_tensor_dtype(s), 0, NULL);
    if (rc >= 0) rc = tg_where(&sp, keep, inv, zero);
    if (rc >= 0) rc = tg__la_mT(&v, vh);                  /* V */
    if (rc >= 0) rc = tg_unsqueeze(&spu, sp, -2);
    if (rc >= 0) rc = tg_mul(&vs, v, spu);                /* V diag(1/S) */
    if (rc >= 0) rc = tg__la_mT(&ut, u);
    if (rc >= 0) rc = tg_matmul(&r, vs, ut);              /* V diag(1/S) U^T */
    tg_tensor *tmp[13] = {s, u, vh, tol, keep, abs, inv, zero, sp, v, vs, ut, spu};
    for (int i = 0; i < 13; i++) tg_tensor_release(tmp[i]);
    if (rc >= 0 && ctx) rc = tg__ctx_save(ctx, A);
    if (rc >= 0 && ctx) rc = tg_op_ctx_save_output(ctx, r);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}

/* torch's pinv_backward (P = pinv(A), m x n A, g the gradient of P):
 *   m <= n: K = g^T P;  dA = -(P K)^T + K P^T - A P K P^T + P^T P (g^T - K A)
 *   m > n:  K = P g^T;  dA = -(K P)^T + (g^T - A K) P P^T + P^T K - P^T K P A
 * the derivative where A's rank does not change (every entry of A taken as
 * independent, for a hermitian A too). */
static int pinv_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *A, *P = NULL, *pt = NULL, *gt = NULL, *t[16] = {NULL};
    int rc;
    TG_TRY_GOTO(tg__ctx_saved(ctx, 0, &A));
    TG_TRY_GOTO(tg__ctx_saved_output(ctx, 1, &P));
    TG_TRY_GOTO(tg__la_mT(&pt, P));
    TG_TRY_GOTO(tg__la_mT(&gt, g));
    if (tg_tensor_dim(A, -2) <= tg_tensor_dim(A, -1)) {
        TG_TRY_GOTO(tg_matmul(&t[0], gt, P));           /* K */
        TG_TRY_GOTO(tg_matmul(&t[1], t[0], pt));        /* K P^T */
        TG_TRY_GOTO(tg_matmul(&t[2], P, t[0]));
        TG_TRY_GOTO(tg__la_mT(&t[3], t[2]));            /* (P K)^T */
        TG_TRY_GOTO(tg_matmul(&t[4], A, P));
        TG_TRY_GOTO(tg_matmul(&t[5], t[4], t[1]));      /* A P K P^T */
        TG_TRY_GOTO(tg_matmul(&t[6], pt, P));
        TG_TRY_GOTO(tg_matmul(&t[7], t[0], A));
        TG_TRY_GOTO(tg_sub(&t[8], gt, t[7]));
        TG_TRY_GOTO(tg_matmul(&t[9], t[6], t[8]));      /* P^T P (g^T - K A) */
    } else {
        TG_TRY_GOTO(tg_matmul(&t[0], P, gt));           /* K */
        TG_TRY_GOTO(tg_matmul(&t[1], pt, t[0]));        /* P^T K */
        TG_TRY_GOTO(tg_matmul(&t[2], t[0], P));
        TG_TRY_GOTO(tg__la_mT(&t[3], t[2]));            /* (K P)^T */
        TG_TRY_GOTO(tg_matmul(&t[4], t[1], P));
        TG_TRY_GOTO(tg_matmul(&t[5], t[4], A));         /* P^T K P A */
        TG_TRY_GOTO(tg_matmul(&t[6], A, t[0]));
        TG_TRY_GOTO(tg_sub(&t[7], gt, t[6]));
        TG_TRY_GOTO(tg_matmul(&t[8], t[7], P));
        TG_TRY_GOTO(tg_matmul(&t[9], t[8], pt));        /* (g^T - A K) P P^T */
    }
    TG_TRY_GOTO(tg_sub(&t[10], t[1], t[3]));
    TG_TRY_GOTO(tg_sub(&t[11], t[10], t[5]));
    TG_TRY_GOTO(tg_add(&gi[0], t[11], t[9]));
done:
    tg_tensor_release(P);
    tg_tensor_release(pt);
    tg_tensor_release(gt);
    for (int i = 0; i < 16; i++) tg_tensor_release(t[i]);
    return rc;
}

/* KEEP: torch's CPU autocast lists no pinv. */
static const tg_op_schema pinv_op = {
    .name = "linalg_pinv", .arity = 1, .amp = TG_AMP_KEEP, .forward = pinv_forward,
    .backward = pinv_backward, .double_backward = true,
    .vjp = "torch's pinv_backward: da = -(y K)^T + K y^T - a y K y^T + y^T y (g^T - K a), "
           "K = g^T y (m <= n)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__linalg_compose_ops[] = {&pinv_op};
static_assert(sizeof tg__linalg_compose_ops / sizeof tg__linalg_compose_ops[0] ==
                  TG__linalg_compose_N,
              "src/ops/families.h must count the linalg_compose ops");

int tg_linalg_pinv(tg_tensor **out, tg_tensor *A, double atol, double rtol, bool hermitian)
{
    static const char fn[] = "linalg.pinv";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    TG_CHECK(!isnan(atol) && !isnan(rtol), TG_EINVAL, "%s: atol and rtol must not be NaN", fn);
    const pinv_params p = {.atol = atol, .rtol = rtol, .hermitian = hermitian};
    return tg_op_call(&pinv_op, out, 1, &A, &p, sizeof p);
}

int tg_linalg_matrix_rank(tg_tensor **out, tg_tensor *A, double atol, double rtol, bool hermitian)
{
    static const char fn[] = "linalg.matrix_rank";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    TG_TRY(tg__la_check(fn, "A", A, hermitian));
    TG_CHECK(!isnan(atol) && !isnan(rtol), TG_EINVAL, "%s: atol and rtol must not be NaN", fn);
    tg__lib_enter();
    const bool prev = tg_set_grad_enabled(false);
    tg_tensor *s = NULL, *tol = NULL, *abs = NULL, *keep = NULL, *k = NULL, *r = NULL;
    int rc = spectrum(A, hermitian, &s, NULL, NULL);
    if (rc >= 0) rc = tolerance(s, A, atol, rtol, &tol);
    if (rc >= 0) rc = tg_abs(&abs, s);
    if (rc >= 0) rc = tg_gt(&keep, abs, tol);
    if (rc >= 0) rc = tg_to_dtype(&k, keep, TG_I64);
    if (rc >= 0) rc = tg_sum_dims(&r, k, 1, (int[]){-1}, false);
    tg_set_grad_enabled(prev);
    tg_tensor *tmp[5] = {s, tol, abs, keep, k};
    for (int i = 0; i < 5; i++) tg_tensor_release(tmp[i]);
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return tg__scope_capture(out, rc);
}

/* ---- matrix_power, logdet, multi_dot ------------------------------------- */

/* A^n for n >= 1 by torch's binary powering: z runs over A^(2^i), the
 * result gathers those of n's set bits, low bits first. */
static int power_pos(tg_tensor *A, int64_t n, tg_tensor **out)
{
    tg_tensor *z = NULL, *res = NULL, *t = NULL;
    int rc = TG_OK;
    while (n > 0 && rc >= 0) {
        if (!z) z = tg_tensor_retain(A);
        else {
            rc = tg_matmul(&t, z, z);
            tg_tensor_release(z);
            z = t;
            t = NULL;
        }
        if (rc >= 0 && (n & 1)) {
            if (!res) res = tg_tensor_retain(z);
            else {
                rc = tg_matmul(&t, res, z);
                tg_tensor_release(res);
                res = t;
                t = NULL;
            }
        }
        n >>= 1;
    }
    tg_tensor_release(z);
    if (rc < 0) {
        tg_tensor_release(res);
        return rc;
    }
    *out = res;
    return TG_OK;
}

int tg_linalg_matrix_power(tg_tensor **out, tg_tensor *A, int64_t n)
{
    static const char fn[] = "linalg.matrix_power";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    TG_CHECK(A != NULL, TG_EINVAL, "%s: A is NULL", fn);
    TG_CHECK(n != INT64_MIN, TG_EINVAL, "%s: n=%lld is out of range", fn, (long long)n);
    TG_CHECK(tg_tensor_ndim(A) >= 2 && tg_tensor_dim(A, -1) == tg_tensor_dim(A, -2), TG_ESHAPE,
             "%s: A must be batches of square matrices, got shape with %d dims", fn,
             tg_tensor_ndim(A));
    if (n < 0) TG_TRY(tg__la_check(fn, "A", A, true));   /* inv's dtypes */
    tg__lib_enter();
    tg_tensor *r = NULL, *e = NULL, *ai = NULL;
    int rc = TG_OK;
    if (n == 0) {   /* the identity in A's shape, a zero gradient to A (torch's copy_) */
        const int64_t k = tg_tensor_dim(A, -1);
        tg_tensor *all = NULL;
        rc = tg_tensor_eye(&e, tg_tensor_dtype(A), k, k);
        if (rc >= 0) rc = tg_tensor_full(&all, TG_U8, 0, NULL, 1);
        if (rc >= 0) rc = tg_where(&r, all, e, A);
        tg_tensor_release(all);
    } else if (n > 0) {
        rc = power_pos(A, n, &r);
        if (rc >= 0 && n == 1) {   /* a copy, as torch's clone */
            tg_tensor *c = NULL;
            rc = tg_mul_scalar(&c, r, 1.0);
            tg_tensor_release(r);
            r = c;
        }
    } else {
        rc = tg_linalg_inv(&ai, A);
        if (rc >= 0) rc = power_pos(ai, -n, &r);
    }
    tg_tensor_release(e);
    tg_tensor_release(ai);
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return tg__scope_capture(out, rc);
}

int tg_logdet(tg_tensor **out, tg_tensor *A)
{
    TG_CHECK(out != NULL, TG_EINVAL, "logdet: out is NULL");
    tg__lib_enter();
    tg_tensor *s = NULL, *l = NULL, *neg = NULL, *nan = NULL, *r = NULL;
    int rc = tg_linalg_slogdet(&s, &l, A);
    if (rc >= 0) rc = tg_lt_scalar(&neg, s, 0);
    if (rc >= 0) rc = tg_tensor_full(&nan, tg_tensor_dtype(l), 0, NULL, NAN);
    if (rc >= 0) rc = tg_where(&r, neg, nan, l);
    tg_tensor *tmp[4] = {s, l, neg, nan};
    for (int i = 0; i < 4; i++) tg_tensor_release(tmp[i]);
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return tg__scope_capture(out, rc);
}

/* The product of ts[i..j] (inclusive) in the split order of the table s. */
static int chain(tg_tensor *const *ts, const int *s, int n, int i, int j, tg_tensor **out)
{
    if (i == j) {
        *out = tg_tensor_retain(ts[i]);
        return TG_OK;
    }
    const int k = s[i * n + j];
    tg_tensor *a = NULL, *b = NULL;
    int rc = chain(ts, s, n, i, k, &a);
    if (rc >= 0) rc = chain(ts, s, n, k + 1, j, &b);
    if (rc >= 0) rc = tg_matmul(out, a, b);
    tg_tensor_release(a);
    tg_tensor_release(b);
    return rc;
}

int tg_linalg_multi_dot(tg_tensor **out, int n, tg_tensor *const *ts)
{
    static const char fn[] = "linalg.multi_dot";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", fn);
    TG_CHECK(ts != NULL && n >= 2 && n <= 64, TG_EINVAL,
             "%s: expected at least 2 tensors (at most 64) but got %d", fn, n);
    for (int i = 0; i < n; i++) {
        TG_CHECK(ts[i] != NULL, TG_EINVAL, "%s: tensors[%d] is NULL", fn, i);
        const int nd = tg_tensor_ndim(ts[i]);
        const bool end = i == 0 || i == n - 1;
        TG_CHECK(nd == 2 || (end && nd == 1), TG_ESHAPE,
                 "%s: tensor %d must be %s, but got %dD", fn, i, end ? "1D or 2D" : "2D", nd);
    }
    tg__lib_enter();
    tg_tensor *m[64] = {NULL}, *r = NULL;
    int rc = TG_OK;
    for (int i = 0; i < n && rc >= 0; i++) {   /* vectors at the ends as matrices */
        const bool v = tg_tensor_ndim(ts[i]) == 1;
        if (v) rc = tg_unsqueeze(&m[i], ts[i], i == 0 ? 0 : -1);
        else m[i] = tg_tensor_retain(ts[i]);
    }
    for (int i = 0; i + 1 < n && rc >= 0; i++)
        if (tg_tensor_dim(m[i], 1) != tg_tensor_dim(m[i + 1], 0))
            rc = tg__error(TG_ESHAPE, "%s: tensors %d and %d with shapes (%lld, %lld) and "
                           "(%lld, %lld) cannot be multiplied", fn, i, i + 1,
                           (long long)tg_tensor_dim(m[i], 0), (long long)tg_tensor_dim(m[i], 1),
                           (long long)tg_tensor_dim(m[i + 1], 0),
                           (long long)tg_tensor_dim(m[i + 1], 1));
    /* the cheapest order: the matrix-chain table over p[0..n] */
    double *cost = NULL;
    int *split = NULL;
    if (rc >= 0) {
        cost = tg__calloc((size_t)n * (size_t)n, sizeof *cost);
        split = tg__calloc((size_t)n * (size_t)n, sizeof *split);
        if (!cost || !split) rc = TG_ENOMEM;
    }
    if (rc >= 0) {
        double p[65];
        for (int i = 0; i < n; i++) p[i] = (double)tg_tensor_dim(m[i], 0);
        p[n] = (double)tg_tensor_dim(m[n - 1], 1);
        for (int len = 1; len < n; len++)
            for (int i = 0; i + len < n; i++) {
                const int j = i + len;
                cost[i * n + j] = INFINITY;
                for (int k = i; k < j; k++) {
                    const double c = cost[i * n + k] + cost[(k + 1) * n + j] +
                                     p[i] * p[k + 1] * p[j + 1];
                    if (c < cost[i * n + j]) cost[i * n + j] = c, split[i * n + j] = k;
                }
            }
        rc = chain(m, split, n, 0, n - 1, &r);
    }
    free(cost);
    free(split);
    /* the vectors' dims go again */
    const bool v0 = tg_tensor_ndim(ts[0]) == 1, v1 = tg_tensor_ndim(ts[n - 1]) == 1;
    for (int q = 0; q < 2 && rc >= 0; q++) {
        if (!(q == 0 ? v1 : v0)) continue;
        tg_tensor *t = NULL;
        rc = tg_squeeze(&t, r, q == 0 ? -1 : 0);
        tg_tensor_release(r);
        r = t;
    }
    for (int i = 0; i < n; i++) tg_tensor_release(m[i]);
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return tg__scope_capture(out, rc);
}
