/* src/ops/argmax.c - argmax and argmin (torch.argmax / torch.argmin over one
 * dim or the whole tensor), and max and min over a dim with their indices
 * (torch.max(x, dim) / torch.min(x, dim)) built on the pair of ops
 * pick_along_dim and pick_along_dim_backward.
 *
 * The index of a row's maximum is that of its first NaN if it has one,
 * else that of the first element equal to the largest; the same for the
 * minimum.  PyTorch 1.13's CPU kernels of max(x, dim), argmax and their min
 * forms all pick these elements.  A float x in contiguous memory is read
 * in one pass (sort_first.c); integers and other layouts go through rows of
 * f64 or i64.
 *
 * With x walked as (outer, C, inner) at dim and i = argmax(x, dim) kept as
 * an extent of 1 there, max(x, dim) = (pick(x, i), i) where
 *   pick(x, i)[o, 0, k] = x[o, i[o, 0, k], k]
 * which is S x for the 0/1 selection matrix S that i defines (held fixed:
 * the choice itself has gradient 0 almost everywhere).  So
 *   dx = S^T g      pick_along_dim_backward(g, i): zeros of x's shape with
 *                   g[o, 0, k] at x[o, i[o, 0, k], k]
 *   d(S^T g)/dg = S pick_along_dim again,
 * the two ops are each other's adjoint and derivatives of any order are
 * these ops (as max_pool's pair).  The indices, an i64 input of both, get
 * no gradient; PyTorch's max(x, dim) sends its gradient to the same element
 * (value_selecting_reduction_backward). */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/dim_rows.h"
#include "ops/families.h"
#include "ops/gather_internal.h"
#include "ops/shape_internal.h"
#include "ops/sort_internal.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

typedef struct arg_params {
    int dim;
    bool keepdim;
    bool whole;   /* over every element: a flat index, dim and keepdim unused */
    bool min;
} arg_params;

typedef struct pick_params {
    int dim;
    bool keepdim;                 /* pick_along_dim: the output keeps dim as 1 */
    int ndim;                     /* pick_along_dim_backward: the shape of x */
    int64_t shape[TG_MAX_DIMS];
} pick_params;

static const tg_op_schema pick_op, pick_backward_op;

/* ---- argmax / argmin ------------------------------------------------------------ */

/* The index of the first NaN of row r (n >= 1 elements), else of its first
 * largest (smallest, for min) element. */
static int64_t row_arg_f64(const double *r, int64_t n, bool min)
{
    int64_t best = 0;
    for (int64_t k = 0; k < n; k++) {
        if (isnan(r[k])) return k;
        if (min ? r[k] < r[best] : r[k] > r[best]) best = k;
    }
    return best;
}

static int64_t row_arg_i64(const int64_t *r, int64_t n, bool min)
{
    int64_t best = 0;
    for (int64_t k = 1; k < n; k++)
        if (min ? r[k] < r[best] : r[k] > r[best]) best = k;
    return best;
}

typedef struct arg_job {
    const void *rows;
    bool is_float, min;
    int64_t n;
    int64_t *out;
} arg_job;

static void arg_rows(void *p, int64_t lo, int64_t hi)
{
    const arg_job *j = p;
    for (int64_t r = lo; r < hi; r++)
        j->out[r] = j->is_float ? row_arg_f64((const double *)j->rows + r * j->n, j->n, j->min)
                                : row_arg_i64((const int64_t *)j->rows + r * j->n, j->n, j->min);
}

/* The reduced dims of an argmax call (one dim, or all for whole), checked:
 * TG_EINVAL for a dim out of range, TG_ESHAPE for an empty reduction. */
static int arg_mask(const char *op, const tg_tensor *x, const arg_params *p, unsigned *mask)
{
    if (p->whole) {
        TG_CHECK(tg_tensor_numel(x) > 0, TG_ESHAPE, "%s: x is empty; the index of a maximum "
                 "or minimum over the whole tensor needs at least one element", op);
        *mask = tg__dims_all(x->ndim);
        return TG_OK;
    }
    int d;
    TG_TRY(tg__shape_wrap_dim(op, "dim", p->dim, x->ndim, &d));
    *mask = x->ndim > 0 ? 1u << d : 0;
    return tg__dims_nonempty(op, x, *mask);
}

/* *out: a new i64 tensor of the reduced shape (0-d for whole) holding each
 * row's index (see the top). */
static int arg_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    const arg_params *p = params;
    const char *op = p->min ? "argmin" : "argmax";
    tg_tensor *x = in[0];
    unsigned mask;
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_TRY(arg_mask(op, x, p, &mask));
    int ond = 0;
    int64_t oshape[TG_MAX_DIMS];
    if (!p->whole) tg__dims_out_shape(x->ndim, x->shape, mask, p->keepdim, &ond, oshape);
    arg_job j = {.is_float = tg_dtype_is_float(x->dtype), .min = p->min};
    void *rows = NULL;
    int64_t nrows;
    tg_tensor *r = tg__tensor_uninit(TG_I64, ond, oshape);
    if (!r) return TG_ENOMEM;
    /* x along one dim (every dim, for whole) as (outer, n, inner) */
    int64_t n1, inner;
    if (tg__dims_run(x, mask, &n1, &inner) && tg__first_applies(x, n1)) {
        const int rc = tg__first_along(
            x, p->min ? TG__FIRST_MIN_NAN_FIRST : TG__FIRST_MAX_NAN_FIRST, n1, inner,
            tg_tensor_data(r));
        if (rc < 0) {
            tg_tensor_release(r);
            return rc;
        }
        *out = r;
        return TG_OK;
    }
    int rc = tg__dim_rows(x, mask, j.is_float ? TG_F64 : TG_I64, &rows, &nrows, &j.n);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    j.rows = rows;
    j.out = tg_tensor_data(r);
    tg__parallel_range(nrows, nrows * j.n > 32768, arg_rows, &j);
    tg__work_free(rows);
    *out = r;
    return TG_OK;
}

static const tg_op_schema argmax_op = {.name = "argmax", .arity = 1, .amp = TG_AMP_KEEP,
                                       .forward = arg_forward,
                                       .vjp = "no gradient: the result is indices"};
static const tg_op_schema argmin_op = {.name = "argmin", .arity = 1, .amp = TG_AMP_KEEP,
                                       .forward = arg_forward,
                                       .vjp = "no gradient: the result is indices"};

/* ---- pick_along_dim and its adjoint ------------------------------------------------ */

/* (outer, C, inner) of (ndim, shape) at dim d: a 0-d tensor is one row of one. */
static void split_at(int ndim, const int64_t *shape, int d, int64_t *outer, int64_t *C,
                     int64_t *inner)
{
    *outer = *inner = 1;
    *C = ndim > 0 ? shape[d] : 1;
    for (int k = 0; k < d; k++) *outer *= shape[k];
    for (int k = d + 1; k < ndim; k++) *inner *= shape[k];
}

/* Checks that t (named what) has the shape of (ndim, shape) with extent 1 at
 * dim d (or at no dim, for a 0-d shape). */
static int check_kept(const char *op, const char *what, const tg_tensor *t, int ndim,
                      const int64_t *shape, int d)
{
    int64_t kept[TG_MAX_DIMS];
    for (int k = 0; k < ndim; k++) kept[k] = k == d ? 1 : shape[k];
    bool same = t->ndim == ndim;
    for (int k = 0; same && k < ndim; k++) same = t->shape[k] == kept[k];
    char st[96], sk[96];
    TG_CHECK(same, TG_ESHAPE, "%s: %s is %s, must be %s (the input's shape with extent 1 at "
             "dim %d)", op, what, tg_shape_str(st, sizeof st, t->ndim, t->shape),
             tg_shape_str(sk, sizeof sk, ndim, kept), d);
    return TG_OK;
}

/* The indices (i64, the kept shape) as a new malloc'd int64 array, each
 * checked to lie in [0, C). */
static int load_indices(const char *op, const tg_tensor *idx, int64_t C, int64_t **iv)
{
    TG_CHECK(idx != NULL, TG_EINVAL, "%s: indices must not be NULL", op);
    TG_CHECK(idx->dtype == TG_I64, TG_EDTYPE, "%s: indices have dtype %s, must be i64", op,
             tg_dtype_name(idx->dtype));
    const int64_t n = tg_tensor_numel(idx);
    *iv = tg__malloc((size_t)(n > 0 ? n : 1) * sizeof **iv);
    if (!*iv) return TG_ENOMEM;
    if (n > 0) tg__gather(idx, TG_I64, *iv);
    for (int64_t k = 0; k < n; k++)
        if ((*iv)[k] < 0 || (*iv)[k] >= C) {
            const int64_t bad = (*iv)[k];
            free(*iv);
            *iv = NULL;
            return tg__error(TG_EINVAL, "%s: indices[%lld]=%lld must be in [0, %lld)", op,
                             (long long)k, (long long)bad, (long long)C);
        }
    return TG_OK;
}

/* Moves element (o, 0, k) of the kept layout from/to element (o, i, k) of
 * the full one, byte for byte: gather (pick) or scatter (its adjoint, into
 * zeros). */
static void move_elements(bool scatter, char *dst, const char *src, const int64_t *iv,
                          int64_t outer, int64_t C, int64_t inner, size_t esz)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            const int64_t small = o * inner + k, full = (o * C + iv[small]) * inner + k;
            if (scatter) memcpy(dst + (size_t)full * esz, src + (size_t)small * esz, esz);
            else memcpy(dst + (size_t)small * esz, src + (size_t)full * esz, esz);
        }
}

/* pick_along_dim(x, indices): x any dtype; indices i64 of x's shape with
 * extent 1 at dim.  The output drops dim unless keepdim. */
static int pick_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    const pick_params *p = params;
    const char *op = "pick_along_dim";
    tg_tensor *x = in[0], *idx = in[1], *xc = NULL, *r = NULL;
    int d, ond;
    int64_t outer, C, inner, *iv = NULL, oshape[TG_MAX_DIMS];
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_TRY(tg__shape_wrap_dim(op, "dim", p->dim, x->ndim, &d));
    split_at(x->ndim, x->shape, d, &outer, &C, &inner);
    TG_TRY(load_indices(op, idx, C, &iv));
    int rc = check_kept(op, "indices", idx, x->ndim, x->shape, d);
    const unsigned mask = x->ndim > 0 ? 1u << d : 0;
    tg__dims_out_shape(x->ndim, x->shape, mask, p->keepdim, &ond, oshape);
    if (rc >= 0) rc = tg_contiguous(&xc, x);   /* grad mode is off: not recorded */
    if (rc >= 0) r = tg__tensor_uninit(x->dtype, ond, oshape);
    if (rc >= 0 && !r) rc = TG_ENOMEM;
    if (rc >= 0) {
        move_elements(false, tg_tensor_data(r), tg_tensor_cdata(xc), iv, outer, C, inner,
                      tg_dtype_size(x->dtype));
        if (ctx) rc = tg_op_ctx_save(ctx, idx);
    }
    if (rc >= 0) {
        *out = r;
        r = NULL;
    }
    free(iv);
    tg_tensor_release(xc);
    tg_tensor_release(r);
    return rc < 0 ? rc : TG_OK;
}

/* dx = pick_along_dim_backward(g kept as extent 1 at dim, indices). */
static int pick_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const pick_params *p = tg_op_ctx_params(ctx);
    tg_tensor *idx, *gk = NULL;
    tg_dtype dt;
    pick_params bp;
    const int64_t *shape;
    memset(&bp, 0, sizeof bp);
    tg_op_ctx_input(ctx, 0, &dt, &bp.ndim, &shape);
    memcpy(bp.shape, shape, sizeof *shape * (size_t)bp.ndim);
    bp.dim = p->dim;
    TG_TRY(tg_op_ctx_saved(ctx, 0, &idx));
    TG_TRY(tg_reshape(&gk, g, idx->ndim, idx->shape));
    int rc = tg_op_call(&pick_backward_op, &gi[0], 2, (tg_tensor *[]){gk, idx}, &bp, sizeof bp);
    tg_tensor_release(gk);
    return rc;
}

/* acc += pick_along_dim_backward(g, indices), touching only the picked
 * elements, one per line along dim (tg_op_backward_into_fn): the
 * gradient of a max over dim is the input's size with one nonzero per
 * line.  Each g element is added to its element as the engine adds the
 * backward's gradient (tg__sum_term); the bits of the backward and the
 * sum.  The elements not picked are left alone (the backward's +0 would
 * turn acc's -0 into +0). */
static int pick_backward_into(tg_ctx *ctx, tg_tensor *g, tg_tensor *acc)
{
    const pick_params *p = tg_op_ctx_params(ctx);
    const char *op = "pick_along_dim";
    tg_tensor *idx;
    int d;
    int64_t outer, C, inner, *iv = NULL;
    TG_TRY(tg__shape_wrap_dim(op, "dim", p->dim, acc->ndim, &d));
    split_at(acc->ndim, acc->shape, d, &outer, &C, &inner);
    TG_TRY(tg_op_ctx_saved(ctx, 0, &idx));
    TG_TRY(load_indices(op, idx, C, &iv));
    const int64_t m = outer * inner;
    double *gv = tg__malloc((size_t)(m > 0 ? m : 1) * sizeof *gv);
    if (!gv) {
        free(iv);
        return TG_ENOMEM;
    }
    if (m > 0) tg__gather(g, TG_F64, gv);   /* row-major: element (o, k) at o * inner + k */
    const tg_dtype dt = acc->dtype;
    char *ad = (char *)acc->storage->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            const int64_t q = o * inner + k, e = acc->offset + (o * C + iv[q]) * inner + k;
            tg_dtype_store(dt, ad, e, tg__sum_term(dt, tg_dtype_load(dt, ad, e), gv[q]));
        }
    free(gv);
    free(iv);
    return TG_OK;
}

/* pick_along_dim_backward(g, indices): zeros of the shape in params, of g's
 * dtype, with g's elements where the indices point; g and indices have that
 * shape with extent 1 at dim. */
static int pick_bw_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    const pick_params *p = params;
    const char *op = "pick_along_dim_backward";
    tg_tensor *g = in[0], *idx = in[1], *gc = NULL, *r = NULL;
    int d;
    int64_t outer, C, inner, *iv = NULL;
    TG_CHECK(g != NULL, TG_EINVAL, "%s: g must not be NULL", op);
    TG_TRY(tg__check_shape(op, p->ndim, p->shape));
    TG_TRY(tg__shape_wrap_dim(op, "dim", p->dim, p->ndim, &d));
    split_at(p->ndim, p->shape, d, &outer, &C, &inner);
    TG_TRY(check_kept(op, "g", g, p->ndim, p->shape, d));
    TG_TRY(load_indices(op, idx, C, &iv));
    int rc = check_kept(op, "indices", idx, p->ndim, p->shape, d);
    if (rc >= 0) rc = tg_contiguous(&gc, g);
    if (rc >= 0) r = tg__tensor_empty(g->dtype, p->ndim, p->shape);
    if (rc >= 0 && !r) rc = TG_ENOMEM;
    if (rc >= 0) {
        move_elements(true, tg_tensor_data(r), tg_tensor_cdata(gc), iv, outer, C, inner,
                      tg_dtype_size(g->dtype));
        if (ctx) rc = tg_op_ctx_save(ctx, idx);
    }
    if (rc >= 0) {
        *out = r;
        r = NULL;
    }
    free(iv);
    tg_tensor_release(gc);
    tg_tensor_release(r);
    return rc < 0 ? rc : TG_OK;
}

/* dg = pick_along_dim(gg, indices), keeping dim. */
static int pick_bw_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const pick_params *p = tg_op_ctx_params(ctx);
    tg_tensor *idx;
    TG_TRY(tg_op_ctx_saved(ctx, 0, &idx));
    pick_params fp = {.dim = p->dim, .keepdim = true};
    return tg_op_call(&pick_op, &gi[0], 2, (tg_tensor *[]){g, idx}, &fp, sizeof fp);
}

static const tg_op_schema pick_op = {.name = "pick_along_dim", .arity = 2,
                                     .amp = TG_AMP_KEEP, .forward = pick_forward,
                                     .backward = pick_backward, .double_backward = true,
                                     .vjp = "da = pick_along_dim_backward(g, indices): "
                                            "each g element put where its index points; "
                                            "the indices get none",
                                     .backward_into = pick_backward_into};
static const tg_op_schema pick_backward_op = {.name = "pick_along_dim_backward", .arity = 2,
                                              .amp = TG_AMP_KEEP, .forward = pick_bw_forward,
                                              .backward = pick_bw_backward,
                                              .double_backward = true,
                                              .vjp = "dg = pick_along_dim(g', indices); "
                                                     "the indices get none"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__argmax_ops[] = {&argmax_op, &argmin_op, &pick_op,
                                              &pick_backward_op};
static_assert(sizeof tg__argmax_ops / sizeof tg__argmax_ops[0] == TG__argmax_N,
              "src/ops/families.h must count the argmax ops");

/* ---- the public calls ------------------------------------------------------------- */

static int arg_call(bool min, tg_tensor **out, tg_tensor *x, const arg_params *p)
{
    const char *op = min ? "argmin" : "argmax";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    return tg_op_call(min ? &argmin_op : &argmax_op, out, 1, &x, p, sizeof *p);
}

int tg_argmax(tg_tensor **out, tg_tensor *x)
{
    return arg_call(false, out, x, &(arg_params){.whole = true});
}

int tg_argmin(tg_tensor **out, tg_tensor *x)
{
    return arg_call(true, out, x, &(arg_params){.whole = true, .min = true});
}

int tg_argmax_dim(tg_tensor **out, tg_tensor *x, int dim, bool keepdim)
{
    return arg_call(false, out, x, &(arg_params){.dim = dim, .keepdim = keepdim});
}

int tg_argmin_dim(tg_tensor **out, tg_tensor *x, int dim, bool keepdim)
{
    return arg_call(true, out, x, &(arg_params){.dim = dim, .keepdim = keepdim, .min = true});
}

/* values = pick(x, i), indices = i, with i = argmax(x, dim) kept at dim
 * (squeezed for the caller unless keepdim).  *ind is left NULL when the
 * caller wants no indices. */
static int max_dim(bool min, tg_tensor **v, tg_tensor **ind, tg_tensor *x, int dim,
                   bool keepdim, bool want_indices)
{
    const char *op = min ? "min_dim" : "max_dim";
    arg_params ap = {.dim = dim, .keepdim = true, .min = min};
    unsigned mask;
    TG_TRY(arg_mask(op, x, &ap, &mask));   /* the caller's name in the messages */
    tg_tensor *ik = NULL;
    TG_TRY(tg_op_call(min ? &argmin_op : &argmax_op, &ik, 1, &x, &ap, sizeof ap));
    pick_params pp = {.dim = dim, .keepdim = keepdim};
    int rc = tg_op_call(&pick_op, v, 2, (tg_tensor *[]){x, ik}, &pp, sizeof pp);
    if (rc >= 0 && want_indices) {
        if (keepdim) *ind = tg_tensor_retain(ik);
        else rc = tg_squeeze(ind, ik, dim);
        if (rc < 0) {
            tg_tensor_release(*v);
            *v = NULL;
        }
    }
    tg_tensor_release(ik);
    return rc;
}

/* Runs max_dim on the library's behalf; the caller's scope, if any, gets
 * the results.  On error nothing is handed out. */
static int max_dim_call(bool min, tg_tensor **values, tg_tensor **indices, tg_tensor *x,
                        int dim, bool keepdim)
{
    const char *op = min ? "min_dim" : "max_dim";
    TG_CHECK(values != NULL, TG_EINVAL, "%s: values must not be NULL", op);
    TG_CHECK(values != indices, TG_EINVAL, "%s: values and indices must be two different "
             "places", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    tg_tensor *v = NULL, *ind = NULL;
    tg__lib_enter();
    int rc = max_dim(min, &v, &ind, x, dim, keepdim, indices != NULL);
    tg__lib_leave();
    return tg__scope_capture_pair(values, v, indices, ind, rc);
}

int tg_max_dim(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim, bool keepdim)
{
    return max_dim_call(false, values, indices, x, dim, keepdim);
}

int tg_min_dim(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim, bool keepdim)
{
    return max_dim_call(true, values, indices, x, dim, keepdim);
}
