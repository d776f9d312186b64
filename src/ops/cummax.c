/* src/ops/cummax.c - running extremes and log-sum-exps along a dim:
 * cummax and cummin (torch.cummax / torch.cummin: values and indices) and
 * logcumsumexp (torch.logcumsumexp).
 *
 * One op, cummax_indices, walks each line along dim keeping the index of
 * the running maximum (minimum) with torch's CPU rule: element k is taken
 * when it is NaN, or when the kept one is not NaN and x[k] >= kept (<= for
 * the minimum), so among equal elements the later index wins and a NaN
 * stays kept until the next NaN.  The values are gather(x, dim, indices):
 * dx = scatter_add(zeros_like(x), dim, indices, g), gather's backward,
 * differentiable to any order, as torch's cummaxmin_backward.  The indices
 * get no gradient.  An integer x's values (not recorded) come from a
 * second walk that keeps the extremes themselves.
 *
 * logcumsumexp runs y[k] = log(exp(x[k]) + exp(y[k - 1])) in double with
 * torch's log-add-exp (log1p(exp(min - max)) + max, two equal infinities
 * giving that infinity), rounded once to x's dtype.  Its gradient is
 * dx[j] = sum_{k >= j} g[k] exp(x[j] - y[k]), computed as torch does, in
 * logs and split by g's sign so that nothing overflows:
 *   dx = exp(rlcse(log g+ - y) + x) - exp(rlcse(log g- - y) + x)
 * with log g+ = log|g| where g > 0 and the dtype's lowest number
 * elsewhere (log g- likewise for g < 0) and rlcse(t) the reversed running
 * logcumsumexp flip(logcumsumexp(flip(t))); written with logcumsumexp
 * itself, so differentiable to any order.  As torch's, it is NaN at an
 * x[j] = -inf whose y[j] is -inf and at an x[j] = +inf. */
#include <assert.h>
#include <math.h>

#include "autograd/tape.h"
#include "ops/cum_internal.h"
#include "ops/families.h"
#include "ops/shape_internal.h"
#include "tapegrad/ops.h"

typedef struct cummax_params {
    int dim;    /* wrapped into [0, ndim); 0 for a 0-d x */
    bool min;   /* cummin */
} cummax_params;

/* ---- cummax / cummin ------------------------------------------------------------- */

/* What cummax_line leaves in a line: the running extreme's indices, or
 * (an integer line, whose values are not recorded) the extremes. */
typedef struct cummax_walk {
    bool min, values;
} cummax_walk;

/* A line's running extreme's indices (doubles for a float line) or, for an
 * integer line with values, the extremes themselves, in place. */
static void cummax_line(void *line, tg_dtype as, int64_t n, const void *arg)
{
    const bool min = ((const cummax_walk *)arg)->min;
    const bool values = ((const cummax_walk *)arg)->values;
    int64_t idx = 0;
    if (as == TG_F64) {
        double *v = line, kept = n > 0 ? v[0] : 0.0;
        for (int64_t k = 0; k < n; k++) {
            const double e = v[k];
            if (isnan(e) || (!isnan(kept) && (min ? e <= kept : e >= kept))) {
                kept = e;
                idx = k;
            }
            v[k] = (double)idx;
        }
    } else {
        int64_t *v = line, kept = n > 0 ? v[0] : 0;
        for (int64_t k = 0; k < n; k++) {
            const int64_t e = v[k];
            if (min ? e <= kept : e >= kept) {
                kept = e;
                idx = k;
            }
            v[k] = values ? kept : idx;
        }
    }
}

static int cummax_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)ctx;
    (void)n;
    const cummax_params *p = params;
    const tg_tensor *x = in[0];
    const tg_dtype as = tg_dtype_is_float(x->dtype) ? TG_F64 : TG_I64;
    const cummax_walk w = {.min = p->min};
    return tg__cum_lines(out, x, p->dim, as, TG_I64, cummax_line, &w);
}

static const tg_op_schema cummax_op = {
    .name = "cummax_indices", .arity = 1, .amp = TG_AMP_KEEP, .forward = cummax_forward,
    .vjp = "no gradient: the result is indices"};

/* ---- logcumsumexp ---------------------------------------------------------------- */

/* torch's log_add_exp_helper(x, y), NaN in either giving NaN. */
static double log_add_exp(double x, double y)
{
    const double mn = isnan(y) ? y : (y < x ? y : x);
    const double mx = isnan(y) ? y : (x < y ? y : x);
    if (mn != mx || isfinite(mn)) return log1p(exp(mn - mx)) + mx;
    return x;
}

static void lcse_line(void *line, tg_dtype as, int64_t n, const void *arg)
{
    (void)as;
    (void)arg;
    double *v = line, acc = -INFINITY;
    for (int64_t k = 0; k < n; k++) {
        acc = log_add_exp(v[k], acc);
        v[k] = acc;
    }
}

static int lcse_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)n;
    tg_tensor *x = in[0], *y = NULL;
    TG_TRY(tg__cum_lines(&y, x, ((const cummax_params *)params)->dim, TG_F64, x->dtype,
                         lcse_line, NULL));
    return tg__cum_save_and_return(ctx, out, x, y);
}

/* exp(rlcse(where(cond(g), lg, lowest) - y) + x), cond g > 0 or g < 0. */
static int lcse_part(tg_tensor **out, tg_tensor *g, tg_tensor *lg, tg_tensor *x, tg_tensor *y,
                     int d, bool positive)
{
    tg_tensor *c = NULL, *lo = NULL, *w = NULL, *t = NULL, *f = NULL, *l = NULL, *r = NULL;
    tg_tensor *s = NULL;
    int rc;
    if (positive) TG_TRY_GOTO(tg_gt_scalar(&c, g, 0.0));
    else TG_TRY_GOTO(tg_lt_scalar(&c, g, 0.0));
    TG_TRY_GOTO(tg_tensor_scalar(&lo, g->dtype, -tg__dtype_finite_max(g->dtype)));
    TG_TRY_GOTO(tg_where(&w, c, lg, lo));
    TG_TRY_GOTO(tg_sub(&t, w, y));
    TG_TRY_GOTO(tg_flip(&f, t, 1, &d));
    TG_TRY_GOTO(tg_logcumsumexp(&l, f, d));
    TG_TRY_GOTO(tg_flip(&r, l, 1, &d));
    TG_TRY_GOTO(tg_add(&s, r, x));
    rc = tg_exp(out, s);
done:;
    tg_tensor *all[] = {c, lo, w, t, f, l, r, s};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) tg_tensor_release(all[k]);
    return rc;
}

static int lcse_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const int d = ((const cummax_params *)tg_op_ctx_params(ctx))->dim;
    tg_tensor *x, *y = NULL, *a = NULL, *lg = NULL, *pos = NULL, *neg = NULL;
    int rc;
    TG_TRY(tg_op_ctx_saved(ctx, 0, &x));
    TG_TRY(tg_op_ctx_saved_output(ctx, 1, &y));
    TG_TRY_GOTO(tg_abs(&a, g));
    TG_TRY_GOTO(tg_log(&lg, a));
    TG_TRY_GOTO(lcse_part(&pos, g, lg, x, y, d, true));
    TG_TRY_GOTO(lcse_part(&neg, g, lg, x, y, d, false));
    rc = tg_sub(&gi[0], pos, neg);
done:
    tg_tensor_release(y);
    tg_tensor_release(a);
    tg_tensor_release(lg);
    tg_tensor_release(pos);
    tg_tensor_release(neg);
    return rc;
}

static const tg_op_schema lcse_op = {
    .name = "logcumsumexp", .arity = 1, .amp = TG_AMP_KEEP, .forward = lcse_forward,
    .backward = lcse_backward, .double_backward = true,
    .vjp = "da[j] = sum_{k >= j} g[k] exp(a[j] - y[k]) along dim"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__cummax_ops[] = {&cummax_op, &lcse_op};
static_assert(sizeof tg__cummax_ops / sizeof tg__cummax_ops[0] == TG__cummax_N,
              "src/ops/families.h must count the cummax ops");

/* ---- public calls ---------------------------------------------------------------- */

/* indices (and values) for a 0-d x through x as one element along dim 0 */
static int cummax_run(tg_tensor **v, tg_tensor **ind, tg_tensor *x, const cummax_params *p)
{
    tg_tensor *xv = NULL, *i = NULL;
    int rc = TG_OK;
    if (x->ndim == 0) TG_TRY_GOTO(tg_reshape(&xv, x, 1, (const int64_t[]){1}));
    else xv = tg_tensor_retain(x);
    TG_TRY_GOTO(tg_op_call(&cummax_op, &i, 1, &xv, p, sizeof *p));
    if (v && tg_dtype_is_float(x->dtype)) TG_TRY_GOTO(tg_gather(v, xv, p->dim, i));
    else if (v) {   /* an integer x's extremes, walked again (exact int64 bits) */
        const cummax_walk w = {.min = p->min, .values = true};
        TG_TRY_GOTO(tg__cum_lines(v, xv, p->dim, TG_I64, x->dtype, cummax_line, &w));
    }
    if (x->ndim == 0 && v) {
        tg_tensor *v0 = NULL;
        rc = tg_reshape(&v0, *v, 0, NULL);
        tg_tensor_release(*v);
        *v = v0;
        if (rc < 0) goto done;
    }
    if (x->ndim == 0) TG_TRY_GOTO(tg_reshape(ind, i, 0, NULL));
    else *ind = tg_tensor_retain(i);
done:
    tg_tensor_release(xv);
    tg_tensor_release(i);
    return rc;
}

static int cummax_call(const char *op, tg_tensor **values, tg_tensor **indices, tg_tensor *x,
                       int dim, bool min)
{
    TG_CHECK(values != NULL || indices != NULL, TG_EINVAL,
             "%s: values and indices must not both be NULL", op);
    TG_CHECK(values != indices, TG_EINVAL,
             "%s: values and indices must be two different places", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    cummax_params p = {.min = min};
    TG_TRY(tg__shape_wrap_dim(op, "dim", dim, x->ndim > 0 ? x->ndim : 1, &p.dim));
    tg_tensor *v = NULL, *ind = NULL;
    tg__lib_enter();
    int rc = cummax_run(values ? &v : NULL, &ind, x, &p);
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(v);
        tg_tensor_release(ind);
        return rc;
    }
    if (!values) return tg__scope_capture_pair(indices, ind, NULL, NULL, rc);
    if (!indices) {
        tg_tensor_release(ind);
        ind = NULL;
    }
    return tg__scope_capture_pair(values, v, indices, ind, rc);
}

int tg_cummax(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim)
{
    return cummax_call("cummax", values, indices, x, dim, false);
}

int tg_cummin(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim)
{
    return cummax_call("cummin", values, indices, x, dim, true);
}

int tg_logcumsumexp(tg_tensor **out, tg_tensor *x, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "logcumsumexp: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "logcumsumexp: x must not be NULL");
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE,
             "logcumsumexp: x has dtype %s; it must be a float dtype (f64, f32, bf16, f16)",
             tg_dtype_name(x->dtype));
    cummax_params p = {0};
    TG_TRY(tg__shape_wrap_dim("logcumsumexp", "dim", dim, x->ndim > 0 ? x->ndim : 1, &p.dim));
    return tg_op_call(&lcse_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}
