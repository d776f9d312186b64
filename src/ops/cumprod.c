/* src/ops/cumprod.c - products along a dim: cumprod(x, dim), the running
 * products y[.., k, ..] = prod_{j <= k} x[.., j, ..] (torch.cumprod), and
 * prod(x, dim, keepdim) and prod(x) (torch.prod).
 *
 * Each line along dim is multiplied in double (a float x) or in int64 bits
 * wrapping on overflow (an integer x, whose result is int64 as torch's),
 * in order, and each result rounded once to x's dtype.
 *
 * Gradients, exact when x holds zeros, as torch's:
 *   prod:     dx[j] = g * prod_{i != j} x[i] = g * L[j] * R[j], with
 *             L = cumprod([1, x[0..D-1)]) the products before j and
 *             R = flip(cumprod(flip([x[1..D), 1]))) those after it;
 *   cumprod:  dx[j] = sum_{k >= j} g[k] prod_{i <= k, i != j} x[i].
 *             With no zero in x, that is flip(cumsum(flip(g y))) / x.
 *             With a zero, dx[j] = L[j] T[j], L[j] = prod_{i < j} x[i]
 *             = y[j - 1] and T the reverse linear scan
 *             T[j] = g[j] + x[j + 1] T[j + 1]: O(D), where torch's path for
 *             inputs with zeros under create_graph is O(D^2).  With no
 *             graph to keep (no create_graph), a loop over each line
 *             computes the same, rounded once.
 * Where a graph is recorded, both are written with cumsum, flip, cat, slice,
 * products and linear_scan (whose own backward is two linear scans and
 * products), each an exact polynomial in x (or one divided by a nonzero x),
 * so every order of derivative is right, at zeros too. */
#include <assert.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/cum_internal.h"
#include "ops/dim_rows.h"
#include "ops/families.h"
#include "ops/shape_internal.h"
#include "tapegrad/ops.h"

typedef struct cumprod_params {
    int dim;        /* wrapped into [0, ndim); 0 for a 0-d x */
    bool keepdim;   /* prod_dim */
} cumprod_params;

/* ---- running lines --------------------------------------------------------------- */

typedef struct cum_job {
    void *rows;   /* rows x n elements of as */
    tg_dtype as;
    int64_t n;
    tg__line_fn fn;
    const void *arg;
} cum_job;

static void cum_range(void *p, int64_t lo, int64_t hi)
{
    const cum_job *j = p;
    for (int64_t r = lo; r < hi; r++) j->fn((char *)j->rows + r * j->n * 8, j->as, j->n, j->arg);
}

/* y's data (dtype ydt, x's shape, contiguous) from nrows lines of n
 * elements of as (f64 or i64) in rows: row r = (o, i) over the dims before
 * and after d, its element k going to y's (o, k, i). */
static void store_lines(void *yd, tg_dtype ydt, const tg_tensor *x, int d, const void *rows,
                        tg_dtype as, int64_t nrows, int64_t n)
{
    int64_t inner = 1;
    for (int k = d + 1; k < x->ndim; k++) inner *= x->shape[k];
    for (int64_t r = 0; r < nrows; r++) {
        const int64_t o = r / inner, i = r % inner;
        for (int64_t k = 0; k < n; k++) {
            const int64_t e = (o * n + k) * inner + i, s = r * n + k;
            if (ydt == as) memcpy((char *)yd + e * 8, (const char *)rows + s * 8, 8);
            else if (as == TG_F64) tg_dtype_store(ydt, yd, e, ((const double *)rows)[s]);
            else tg_dtype_store(ydt, yd, e, (double)((const int64_t *)rows)[s]);
        }
    }
}

int tg__cum_lines(tg_tensor **out, const tg_tensor *x, int d, tg_dtype as, tg_dtype ydt,
                  tg__line_fn fn, const void *arg)
{
    tg_tensor *y = tg__tensor_uninit(ydt, x->ndim, x->shape);
    if (!y) return TG_ENOMEM;
    void *rows = NULL;
    int64_t nrows = 0, n = 0;
    const unsigned mask = x->ndim > 0 ? 1u << d : 0;
    int rc = tg__dim_rows(x, mask, as, &rows, &nrows, &n);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    cum_job j = {.rows = rows, .as = as, .n = n, .fn = fn, .arg = arg};
    tg__parallel_range(nrows, nrows * n > 16384, cum_range, &j);
    store_lines(tg_tensor_data(y), ydt, x, d, rows, as, nrows, n);
    tg__work_free(rows);
    *out = y;
    return TG_OK;
}

int tg__cum_save_and_return(tg_op_ctx *ctx, tg_tensor **out, tg_tensor *x, tg_tensor *y)
{
    int rc = TG_OK;
    if (ctx) rc = tg_op_ctx_save(ctx, x);
    if (ctx && rc >= 0) rc = tg_op_ctx_save_output(ctx, y);
    if (rc < 0) {
        tg_tensor_release(y);
        return rc;
    }
    *out = y;
    return TG_OK;
}

/* ---- forwards -------------------------------------------------------------------- */

/* A line's running products, in place (int64 wrapping as unsigned). */
static void cumprod_line(void *line, tg_dtype as, int64_t n, const void *arg)
{
    (void)arg;
    if (as == TG_F64) {
        double *v = line;
        for (int64_t k = 1; k < n; k++) v[k] *= v[k - 1];
    } else {
        int64_t *v = line;
        for (int64_t k = 1; k < n; k++) v[k] = (int64_t)((uint64_t)v[k] * (uint64_t)v[k - 1]);
    }
}

static int cumprod_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    (void)n;
    tg_tensor *x = in[0], *y = NULL;
    const bool fl = tg_dtype_is_float(x->dtype);
    TG_TRY(tg__cum_lines(&y, x, ((const cumprod_params *)params)->dim, fl ? TG_F64 : TG_I64,
                         fl ? x->dtype : TG_I64, cumprod_line, NULL));
    return tg__cum_save_and_return(ctx, out, x, y);
}

/* tg__dim_rows_reduce's fn: each row's product into its slot r. */
static void prod_rows(void *arg, tg_dtype as, void *buf, int64_t rows, int64_t n)
{
    (void)arg;
    for (int64_t r = 0; r < rows; r++) {
        if (as == TG_F64) {
            double *v = buf, p = 1.0;
            for (int64_t k = 0; k < n; k++) p *= v[r * n + k];
            v[r] = p;
        } else {
            int64_t *v = buf;
            uint64_t p = 1;
            for (int64_t k = 0; k < n; k++) p *= (uint64_t)v[r * n + k];
            v[r] = (int64_t)p;
        }
    }
}

/* prod_dim(x): x of a float dtype or i64 (tg_prod_dim converts other integers). */
static int prod_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)n;
    const cumprod_params *p = params;
    tg_tensor *x = in[0];
    const unsigned mask = x->ndim > 0 ? 1u << p->dim : 0;
    const tg_dtype as = tg_dtype_is_float(x->dtype) ? TG_F64 : TG_I64;
    return tg__dim_rows_reduce(ctx, out, x, mask, p->keepdim, as, prod_rows, NULL, false);
}

/* ---- backwards ------------------------------------------------------------------- */

/* Whether x has an element equal to 0 (or -0). */
static bool has_zero(const tg_tensor *x)
{
    const int64_t numel = tg_tensor_numel(x);
    for (int64_t e = 0; e < numel; e++) {
        double v = 1.0;
        if (tg_tensor_get_flat(x, e, &v) >= 0 && v == 0.0) return true;
    }
    return false;
}

/* cumprod's gradient for an x with no zero: flip(cumsum(flip(g y))) / x. */
static int cumprod_grad_nonzero(tg_tensor **gx, tg_tensor *g, tg_tensor *x, tg_tensor *y, int d)
{
    tg_tensor *t = NULL, *f = NULL, *c = NULL, *r = NULL;
    int rc;
    TG_TRY_GOTO(tg_mul(&t, g, y));
    TG_TRY_GOTO(tg_flip(&f, t, 1, &d));
    TG_TRY_GOTO(tg_cumsum(&c, f, d));
    TG_TRY_GOTO(tg_flip(&r, c, 1, &d));
    rc = tg_div(gx, r, x);
done:
    tg_tensor_release(t);
    tg_tensor_release(f);
    tg_tensor_release(c);
    tg_tensor_release(r);
    return rc;
}

/* cumprod's gradient with no graph to record (grad mode off: no
 * create_graph), for an x with zeros, in O(D) per line and no division:
 * with T[j] = sum_{k >= j} g[k] prod_{j < i <= k} x[i], the recurrence
 * T[j] = g[j] + x[j + 1] T[j + 1], and L[j] = prod_{i < j} x[i],
 * dx[j] = L[j] T[j], each line in double, rounded once to x's dtype. */
static int cumprod_grad_lines(tg_tensor **gx, tg_tensor *g, tg_tensor *x, int d)
{
    void *xr = NULL, *gr = NULL;
    int64_t nrows = 0, n = 0;
    int rc;
    tg_tensor *y = tg__tensor_uninit(x->dtype, x->ndim, x->shape);
    if (!y) return TG_ENOMEM;
    TG_TRY_GOTO(tg__dim_rows(x, 1u << d, TG_F64, &xr, &nrows, &n));
    TG_TRY_GOTO(tg__dim_rows(g, 1u << d, TG_F64, &gr, &nrows, &n));
    for (int64_t r = 0; r < nrows; r++) {
        double *xs = (double *)xr + r * n, *gs = (double *)gr + r * n, t = 0.0, l = 1.0;
        for (int64_t j = n - 1; j >= 0; j--) {
            t = j + 1 < n ? gs[j] + xs[j + 1] * t : gs[j];
            gs[j] = t;
        }
        for (int64_t j = 0; j < n; j++) {
            const double e = xs[j];
            xs[j] = l * gs[j];
            l *= e;
        }
    }
    store_lines(tg_tensor_data(y), x->dtype, x, d, xr, TG_F64, nrows, n);
    *gx = y;
    y = NULL;
done:
    tg__work_free(xr);
    tg__work_free(gr);
    tg_tensor_release(y);
    return rc;
}

/* ---- the linear scan behind cumprod's gradient at zeros -------------------------- */

/* linear_scan(a, b, dim, reverse) runs, along each line of dim (a and b of
 * one shape and float dtype), the first-order recurrence
 *   forward:  s[k] = b[k] + a[k] s[k - 1],      s[0] = b[0]      (a[0] unused),
 *   reverse:  s[k] = b[k] + a[k + 1] s[k + 1],  s[D-1] = b[D-1]  (a[0] unused),
 * each line in double, rounded once to the dtype.  Each is the other's
 * adjoint with the same a: for the forward scan, with w = reverse(a, g),
 *   db = w,  da[k] = w[k] s[k - 1]  (0 at k = 0),
 * and for the reverse one, with w = forward(a, g),
 *   db = w,  da[k] = w[k - 1] s[k]  (0 at k = 0),
 * so its backward is written with itself and products: every order of
 * derivative is exact and costs O(D) per line. */
typedef struct scan_params {
    int dim;
    bool reverse;
} scan_params;

static void scan_line(const double *a, double *b, int64_t n, bool reverse)
{
    if (!reverse)
        for (int64_t k = 1; k < n; k++) b[k] += a[k] * b[k - 1];
    else
        for (int64_t k = n - 2; k >= 0; k--) b[k] += a[k + 1] * b[k + 1];
}

static int scan_forward(tg_op_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)n;
    const scan_params *p = params;
    tg_tensor *a = in[0], *b = in[1];
    TG_CHECK(a->dtype == b->dtype && tg_dtype_is_float(a->dtype), TG_EINVAL,
             "linear_scan: a and b must have one float dtype");
    TG_CHECK(a->ndim == b->ndim && a->ndim > 0 && p->dim < a->ndim &&
             !memcmp(a->shape, b->shape, sizeof *a->shape * (size_t)a->ndim),
             TG_ESHAPE, "linear_scan: a and b must have one shape of 1 or more dims");
    void *ar = NULL, *br = NULL;
    int64_t nrows = 0, len = 0;
    int rc;
    tg_tensor *s = tg__tensor_uninit(a->dtype, a->ndim, a->shape);
    if (!s) return TG_ENOMEM;
    TG_TRY_GOTO(tg__dim_rows(a, 1u << p->dim, TG_F64, &ar, &nrows, &len));
    TG_TRY_GOTO(tg__dim_rows(b, 1u << p->dim, TG_F64, &br, &nrows, &len));
    for (int64_t r = 0; r < nrows; r++)
        scan_line((const double *)ar + r * len, (double *)br + r * len, len, p->reverse);
    store_lines(tg_tensor_data(s), a->dtype, a, p->dim, br, TG_F64, nrows, len);
    rc = tg__cum_save_and_return(ctx, out, a, s);
    s = NULL;
done:
    tg__work_free(ar);
    tg__work_free(br);
    tg_tensor_release(s);
    return rc;
}

/* v moved one step along d: out[k] = v[k - 1], fill at k = 0. */
static int shift_in(tg_tensor **out, tg_tensor *v, int d, double fill)
{
    const int64_t D = v->shape[d];
    int64_t shape[TG_MAX_DIMS];
    memcpy(shape, v->shape, sizeof *shape * (size_t)v->ndim);
    shape[d] = D > 0 ? 1 : 0;
    tg_tensor *f = NULL, *head = NULL;
    int rc;
    TG_TRY_GOTO(tg_tensor_full(&f, v->dtype, v->ndim, shape, fill));
    TG_TRY_GOTO(tg_slice(&head, v, d, 0, D > 0 ? D - 1 : 0, 1));
    rc = tg_cat(out, 2, (tg_tensor *[]){f, head}, d);
done:
    tg_tensor_release(f);
    tg_tensor_release(head);
    return rc;
}

static int linear_scan(tg_tensor **out, tg_tensor *a, tg_tensor *b, int d, bool reverse);

static int scan_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const scan_params *p = tg_op_ctx_params(ctx);
    tg_tensor *a, *s = NULL, *w = NULL, *prev = NULL;
    int rc;
    TG_TRY(tg_op_ctx_saved(ctx, 0, &a));
    TG_TRY_GOTO(linear_scan(&w, a, g, p->dim, !p->reverse));
    if (tg_op_ctx_needs_grad(ctx, 0)) {
        TG_TRY_GOTO(tg_op_ctx_saved_output(ctx, 1, &s));
        /* forward: w[k] s[k - 1]; reverse: w[k - 1] s[k] */
        TG_TRY_GOTO(shift_in(&prev, p->reverse ? w : s, p->dim, 0.0));
        TG_TRY_GOTO(tg_mul(&gi[0], p->reverse ? s : w, prev));
    }
    if (tg_op_ctx_needs_grad(ctx, 1)) gi[1] = tg_tensor_retain(w);
    rc = TG_OK;
done:
    tg_tensor_release(s);
    tg_tensor_release(w);
    tg_tensor_release(prev);
    return rc;
}

static const tg_op_schema scan_op = {
    .name = "linear_scan", .arity = 2, .amp = TG_AMP_KEEP, .forward = scan_forward,
    .backward = scan_backward, .double_backward = true,
    .vjp = "s[k] = b[k] + a[k] s[k-1] (or reversed); db = the opposite scan of g over a, "
           "da[k] = db[k] s[k-1] (reversed: db[k-1] s[k])"};

static int linear_scan(tg_tensor **out, tg_tensor *a, tg_tensor *b, int d, bool reverse)
{
    scan_params p = {.dim = d, .reverse = reverse};
    return tg_op_call(&scan_op, out, 2, (tg_tensor *[]){a, b}, &p, sizeof p);
}

/* cumprod's gradient with a graph to record, for an x with zeros, in O(D)
 * per line and exact at zeros to every order: dx[j] = L[j] T[j], with
 * L[j] = prod_{i < j} x[i] = y[j - 1] (1 at j = 0) and
 * T[j] = sum_{k >= j} g[k] prod_{j < i <= k} x[i], the reverse scan
 * T[j] = g[j] + x[j + 1] T[j + 1]; both polynomials in x and g. */
static int cumprod_grad_scan(tg_tensor **gx, tg_tensor *g, tg_tensor *x, tg_tensor *y, int d)
{
    tg_tensor *l = NULL, *t = NULL;
    int rc;
    TG_TRY_GOTO(shift_in(&l, y, d, 1.0));
    TG_TRY_GOTO(linear_scan(&t, x, g, d, true));
    rc = tg_mul(gx, l, t);
done:
    tg_tensor_release(l);
    tg_tensor_release(t);
    return rc;
}

static int cumprod_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const int d = ((const cumprod_params *)tg_op_ctx_params(ctx))->dim;
    tg_tensor *x, *y = NULL;
    TG_TRY(tg_op_ctx_saved(ctx, 0, &x));
    TG_TRY(tg_op_ctx_saved_output(ctx, 1, &y));
    int rc;
    if (x->ndim == 0) rc = tg_mul_scalar(&gi[0], g, 1.0);   /* y = x */
    else if (has_zero(x) && !tg_grad_enabled()) rc = cumprod_grad_lines(&gi[0], g, x, d);
    else if (has_zero(x)) rc = cumprod_grad_scan(&gi[0], g, x, y, d);
    else rc = cumprod_grad_nonzero(&gi[0], g, x, y, d);
    tg_tensor_release(y);
    return rc;
}

/* prod's gradient g * L * R (the products before and after each element). */
static int prod_backward(tg_op_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const cumprod_params *p = tg_op_ctx_params(ctx);
    const int d = p->dim;
    tg_tensor *x;
    TG_TRY(tg_op_ctx_saved(ctx, 0, &x));
    if (x->ndim == 0) return tg_mul_scalar(&gi[0], g, 1.0);   /* y = x */
    const int64_t D = x->shape[d];
    tg_tensor *gk = NULL, *ones = NULL, *a = NULL, *la = NULL, *l = NULL, *b = NULL;
    tg_tensor *rb = NULL, *fb = NULL, *cb = NULL, *r = NULL, *lr = NULL;
    int64_t shape[TG_MAX_DIMS];
    int rc;
    if (p->keepdim) gk = tg_tensor_retain(g);
    else TG_TRY_GOTO(tg_unsqueeze(&gk, g, d));
    if (D == 0) {   /* an empty gradient of x's shape */
        rc = tg_mul(&gi[0], gk, x);
        goto done;
    }
    memcpy(shape, x->shape, sizeof *shape * (size_t)x->ndim);
    shape[d] = 1;
    TG_TRY_GOTO(tg_tensor_full(&ones, x->dtype, x->ndim, shape, 1.0));
    TG_TRY_GOTO(tg_slice(&a, x, d, 0, D - 1, 1));
    TG_TRY_GOTO(tg_cat(&la, 2, (tg_tensor *[]){ones, a}, d));
    TG_TRY_GOTO(tg_cumprod(&l, la, d));
    TG_TRY_GOTO(tg_slice(&b, x, d, 1, D, 1));
    TG_TRY_GOTO(tg_cat(&rb, 2, (tg_tensor *[]){b, ones}, d));
    TG_TRY_GOTO(tg_flip(&fb, rb, 1, &d));
    TG_TRY_GOTO(tg_cumprod(&cb, fb, d));
    TG_TRY_GOTO(tg_flip(&r, cb, 1, &d));
    TG_TRY_GOTO(tg_mul(&lr, l, r));
    rc = tg_mul(&gi[0], gk, lr);
done:;
    tg_tensor *all[] = {gk, ones, a, la, l, b, rb, fb, cb, r, lr};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) tg_tensor_release(all[k]);
    return rc;
}

/* FP32, as cumsum and sum: a half x inside an autocast scope gives an f32
 * result (torch's CUDA autocast lists cumprod and prod as fp32). */
static const tg_op_schema cumprod_op = {
    .name = "cumprod", .arity = 1, .amp = TG_AMP_FP32, .forward = cumprod_forward,
    .backward = cumprod_backward, .double_backward = true,
    .vjp = "da[j] = sum_{k >= j} g[k] prod_{i <= k, i != j} a[i] along dim"};
static const tg_op_schema prod_op = {
    .name = "prod_dim", .arity = 1, .amp = TG_AMP_FP32, .forward = prod_forward,
    .backward = prod_backward, .double_backward = true,
    .vjp = "da[j] = g * prod_{i != j} a[i] along dim"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__cumprod_ops[] = {&cumprod_op, &prod_op, &scan_op};
static_assert(sizeof tg__cumprod_ops / sizeof tg__cumprod_ops[0] == TG__cumprod_N,
              "src/ops/families.h must count the cumprod ops");

/* ---- public calls ---------------------------------------------------------------- */

int tg_cumprod(tg_tensor **out, tg_tensor *x, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "cumprod: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "cumprod: x must not be NULL");
    cumprod_params p = {0};
    TG_TRY(tg__shape_wrap_dim("cumprod", "dim", dim, x->ndim > 0 ? x->ndim : 1, &p.dim));
    return tg_op_call(&cumprod_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}

/* prod_dim of x (converted to i64 first when an integer of another width). */
static int prod_run(const char *op, tg_tensor **out, tg_tensor *x, int dim, bool keepdim,
                    bool flatten)
{
    cumprod_params p = {.keepdim = keepdim};
    TG_TRY(tg__shape_wrap_dim(op, "dim", dim, x->ndim > 0 ? x->ndim : 1, &p.dim));
    if (x->ndim == 0) p.dim = 0;
    tg_tensor *xi = NULL, *xf = NULL, *y = NULL;
    tg__lib_enter();
    int rc = TG_OK;
    if (!tg_dtype_is_float(x->dtype) && x->dtype != TG_I64)
        rc = tg_tensor_to_dtype(&xi, x, TG_I64);
    else xi = tg_tensor_retain(x);
    if (rc >= 0 && flatten) {
        const int64_t numel = tg_tensor_numel(xi);
        rc = tg_reshape(&xf, xi, 1, &numel);
    } else if (rc >= 0) xf = tg_tensor_retain(xi);
    if (rc >= 0) rc = tg_op_call(&prod_op, &y, 1, (tg_tensor *[]){xf}, &p, sizeof p);
    tg_tensor_release(xi);
    tg_tensor_release(xf);
    tg__lib_leave();
    return tg__scope_capture_pair(out, y, NULL, NULL, rc);
}

int tg_prod_dim(tg_tensor **out, tg_tensor *x, int dim, bool keepdim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "prod_dim: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "prod_dim: x must not be NULL");
    return prod_run("prod_dim", out, x, dim, keepdim, false);
}

int tg_prod(tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "prod: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "prod: x must not be NULL");
    return prod_run("prod", out, x, 0, false, true);
}
