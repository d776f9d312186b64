/* src/ops/vector_norm.c - vector norms over chosen dims or the whole tensor
 * (torch.linalg.vector_norm(x, ord, dim, keepdim)).
 *
 * Each result element reduces a row of N elements (dim_rows.h), in double,
 * rounded once to x's dtype:
 *   ord = 2          sqrt(sum x^2)
 *   ord = 1          sum |x|
 *   ord = +-inf      max |x| / min |x|  (NaN when the row holds one)
 *   ord = 0          the number of elements != 0 (NaN counts)
 *   any other ord    (sum |x|^ord)^(1/ord)
 * A row of no elements gives 0 for ord >= 0; for ord < 0 and the
 * inf-norms, which have no identity, it is TG_ESHAPE, as torch.
 *
 * Gradients, as torch's norm_backward, with g and the norm y kept as
 * extents of 1 at the reduced dims and s = sign(x) (0 at 0 and NaN), a
 * constant:
 *   ord = 0          0
 *   ord = 1          s * g
 *   ord > 1          s * |x|^(ord-1) * where(y != 0, g / y^(ord-1), 0)
 *                    (ord = 2: x * where(y != 0, g / y, 0))
 *   ord < 1          s * |x|^(ord-1) * g * y^(1-ord)   (0 where x = 0)
 *   ord = +-inf      s * (g / c) * m, m the 0/1 mask of the row's elements
 *                    with |x| = y or NaN, c its count (amax's rule)
 * written with differentiable ops, so derivatives of any order follow.  x
 * multiplies the masked quotient (not x / y masked, as torch's ord 2), and
 * the power of |x| reads its zeros as 1 (s is 0 there): the second
 * derivatives at a zero are 0 where torch's are NaN (0 * inf). */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/dim_rows.h"
#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "ops/reduce_internal.h"
#include "tapegrad/ops.h"

typedef struct norm_params {
    double ord;
    int ndims;
    int dims[TG_MAX_DIMS];
    bool keepdim;
} norm_params;

/* The reduced dims: every dim when no dims are listed (torch's dim=None). */
static int norm_mask(const tg_tensor *x, const norm_params *p, unsigned *mask)
{
    if (p->ndims == 0) {
        *mask = tg__dims_all(x->ndim);
    } else {
        TG_TRY(tg__dims_mask("vector_norm", p->ndims, p->dims, x->ndim, mask));
    }
    if (p->ord < 0 || isinf(p->ord)) {   /* no identity: a row needs an element */
        TG_CHECK(tg_tensor_numel(x) > 0 || p->ndims > 0, TG_ESHAPE,
                 "vector_norm: x is empty; the norm of ord=%g of no elements is undefined",
                 p->ord);
        TG_TRY(tg__dims_nonempty("vector_norm", x, *mask));
    }
    return TG_OK;
}

/* A tg__row_f64_fn, arg the ord (a double). */
static double row_norm(const double *row, int64_t n, const void *arg)
{
    const double ord = *(const double *)arg;
    double acc = 0;
    if (isinf(ord)) {
        acc = fabs(row[0]);
        for (int64_t k = 1; k < n && !isnan(acc); k++) {
            const double a = fabs(row[k]);
            if (isnan(a) || (ord > 0 ? a > acc : a < acc)) acc = a;
        }
        return acc;
    }
    if (ord == 0) {
        for (int64_t k = 0; k < n; k++) acc += row[k] != 0;
        return acc;
    }
    if (ord == 1) {
        for (int64_t k = 0; k < n; k++) acc += fabs(row[k]);
        return acc;
    }
    if (ord == 2) {
        for (int64_t k = 0; k < n; k++) acc += row[k] * row[k];
        return sqrt(acc);
    }
    for (int64_t k = 0; k < n; k++) acc += pow(fabs(row[k]), ord);
    return pow(acc, 1.0 / ord);
}

static int norm_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)n;
    const norm_params *p = params;
    tg_tensor *x = in[0];
    unsigned mask;
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "vector_norm: x has dtype %s; float "
             "dtypes only (tg_to_dtype first)", tg_dtype_name(x->dtype));
    TG_TRY(norm_mask(x, p, &mask));
    tg__rows_f64_job j = {.fn = row_norm, .arg = &p->ord};
    return tg__dim_rows_reduce(ctx, out, x, mask, p->keepdim, TG_F64, tg__rows_f64, &j, true);
}

/* sign(v): -1, 0 or 1, 0 for NaN (as torch.sign); a tg__map_f64 map. */
static double sign_d(double v, const void *user)
{
    (void)user;
    return (v > 0) - (v < 0);
}

/* dx for ord = +-inf: s * (gk / c) * m. */
static int inf_grad(tg_tensor *x, tg_tensor *y, unsigned mask, tg_tensor *gk, tg_tensor *s,
                    tg_tensor **dx)
{
    tg_tensor *m = NULL, *c = NULL, *t = NULL, *u = NULL;
    int rc;
    TG_TRY_GOTO(tg__tie_mask(x, y, mask, true, true, gk->dtype, &m, &c));
    TG_TRY_GOTO(tg_div(&t, gk, c));
    TG_TRY_GOTO(tg_mul(&u, t, m));
    rc = tg_mul(dx, s, u);
done:
    tg_tensor_release(m);
    tg_tensor_release(c);
    tg_tensor_release(t);
    tg_tensor_release(u);
    return rc;
}

/* s * |x|^(ord-1), the power taken of |x| with its zeros read as 1 (s is 0
 * there), so that no inf stands where a second derivative would multiply it
 * by 0. */
static int sign_pow(double ord, tg_tensor *x, tg_tensor *s, tg_tensor **xs)
{
    tg_tensor *a = NULL, *nz = NULL, *one = NULL, *as = NULL, *ap = NULL;
    int rc;
    TG_TRY_GOTO(tg_abs(&a, x));
    TG_TRY_GOTO(tg_ne_scalar(&nz, a, 0.0));
    TG_TRY_GOTO(tg_tensor_scalar(&one, x->dtype, 1.0));
    TG_TRY_GOTO(tg_where(&as, nz, a, one));
    TG_TRY_GOTO(tg_pow_scalar(&ap, as, ord - 1));
    rc = tg_mul(xs, s, ap);
done:
    tg_tensor_release(a);
    tg_tensor_release(nz);
    tg_tensor_release(one);
    tg_tensor_release(as);
    tg_tensor_release(ap);
    return rc;
}

/* The factor of dx that holds g and y: where(y != 0, gk / y^(ord-1), 0)
 * for ord > 1, gk * y^(1-ord) for ord < 1. */
static int g_factor(double ord, tg_tensor *yk, tg_tensor *gk, tg_tensor **q)
{
    tg_tensor *yp = NULL, *t = NULL, *nz = NULL;
    int rc;
    TG_TRY_GOTO(tg_pow_scalar(&yp, yk, ord > 1 ? ord - 1 : 1 - ord));
    if (ord < 1) {
        rc = tg_mul(q, gk, yp);
        goto done;
    }
    TG_TRY_GOTO(tg_div(&t, gk, yp));
    TG_TRY_GOTO(tg_ne_scalar(&nz, yk, 0.0));
    rc = tg__where_or_zero(q, nz, t);
done:
    tg_tensor_release(yp);
    tg_tensor_release(t);
    tg_tensor_release(nz);
    return rc;
}

static int norm_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const norm_params *p = tg_op_ctx_params(ctx);
    const double ord = p->ord;
    tg_tensor *x, *y = NULL, *gk = NULL, *yk = NULL, *s = NULL;
    unsigned mask;
    int kn, rc;
    int64_t kept[TG_MAX_DIMS];
    TG_TRY(tg_op_ctx_saved(ctx, 0, &x));
    TG_TRY_GOTO(tg_op_ctx_saved_output(ctx, 1, &y));
    TG_TRY_GOTO(norm_mask(x, p, &mask));
    if (ord == 0) {
        rc = tg_tensor_zeros(&gi[0], g->dtype, x->ndim, x->shape);
        goto done;
    }
    tg__dims_out_shape(x->ndim, x->shape, mask, true, &kn, kept);
    TG_TRY_GOTO(tg_reshape(&gk, g, kn, kept));   /* the reduced dims as 1 */
    TG_TRY_GOTO(tg_reshape(&yk, y, kn, kept));
    if (ord != 2)   /* the other gradients hold sign(x), a constant */
        TG_TRY_GOTO(tg__map_f64(&s, x, g->dtype, sign_d, NULL));
    if (isinf(ord)) rc = inf_grad(x, yk, mask, gk, s, &gi[0]);
    else if (ord == 1) rc = tg_mul(&gi[0], s, gk);
    else {   /* x (ord 2) or s |x|^(ord-1), times the factor of g */
        tg_tensor *xs = NULL, *q = NULL;
        rc = ord == 2 ? (xs = tg_tensor_retain(x), TG_OK) : sign_pow(ord, x, s, &xs);
        if (rc >= 0) rc = g_factor(ord, yk, gk, &q);
        if (rc >= 0) rc = tg_mul(&gi[0], xs, q);
        tg_tensor_release(xs);
        tg_tensor_release(q);
    }
done:
    tg_tensor_release(y);
    tg_tensor_release(gk);
    tg_tensor_release(yk);
    tg_tensor_release(s);
    return rc;
}

/* FP32, as sum and var: a half x inside an autocast scope gives an f32 norm
 * (torch's CUDA autocast lists norm as fp32; its CPU autocast leaves it in
 * x's dtype). */
static const tg_op_schema norm_op = {
    .name = "vector_norm", .arity = 1, .amp = TG_AMP_FP32, .forward = norm_forward,
    .backward = norm_backward, .double_backward = true,
    .vjp = "da = sign(a) |a|^(ord-1) g / y^(ord-1) (0 where y = 0; ord 2: a g / y); "
           "ord 1: sign(a) g; ord inf: g shared by the largest |a|; ord 0: 0"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__vector_norm_ops[] = {&norm_op};
static_assert(sizeof tg__vector_norm_ops / sizeof tg__vector_norm_ops[0] == TG__vector_norm_N,
              "src/ops/families.h must count the vector_norm ops");

int tg_vector_norm(tg_tensor **out, tg_tensor *x, double ord, int ndims, const int *dims,
                   bool keepdim)
{
    norm_params p;
    memset(&p, 0, sizeof p);
    TG_TRY(tg__dims_args("vector_norm", "x", out, x, ndims, dims, &p.ndims, p.dims));
    TG_CHECK(!isnan(ord), TG_EINVAL, "vector_norm: ord is NaN; it must be a number or +-inf");
    p.ord = ord;
    p.keepdim = keepdim;
    return tg_op_call(&norm_op, out, 1, &x, &p, sizeof p);
}
