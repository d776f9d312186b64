/* src/ops/predicates.c - tests of float values and truth reductions:
 * isnan, isinf, isposinf, isneginf, isfinite (torch.isnan ...), all and
 * any over the whole tensor or one dim (torch.all, torch.any), and
 * nan_to_num (torch.nan_to_num).
 *
 * The tests and reductions give u8 tensors of 0 and 1 (torch's bool, as
 * compare.c's), never recorded, without gradient.  An integer input holds
 * no NaN or infinity: isfinite is all 1, the others all 0, as torch's.
 * all and any read an element as true when it is nonzero (NaN is nonzero,
 * -0.0 is not); over no elements all is 1 and any 0.
 *
 * nan_to_num replaces NaN, +inf and -inf by numbers (by default 0 and the
 * largest and lowest finite values of x's dtype), each converted to x's
 * dtype (a half one through f32; 1e10 in f16 is inf).  Its gradient, as
 * torch's, is g * isfinite(x): g times a constant 0/1 mask, a product that
 * can be differentiated again.  An integer x gives a copy of itself. */
#include <assert.h>
#include <math.h>

#include "core/core.h"
#include "ops/dim_rows.h"
#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

typedef enum { P_ISNAN, P_ISINF, P_ISPOSINF, P_ISNEGINF, P_ISFINITE } pred_kind;

static const char *const PRED_NAMES[5] = {"isnan", "isinf", "isposinf", "isneginf",
                                          "isfinite"};

static bool holds(pred_kind k, double v)
{
    switch (k) {
    case P_ISNAN: return isnan(v);
    case P_ISINF: return isinf(v);
    case P_ISPOSINF: return v == INFINITY;
    case P_ISNEGINF: return v == -INFINITY;
    default: return isfinite(v);
    }
}

static int predicate(pred_kind k, tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", PRED_NAMES[k]);
    const int64_t n = tg_tensor_numel(x);
    tg_tensor *r = tg__tensor_uninit(TG_U8, x->ndim, x->shape);
    double *v = tg_dtype_is_float(x->dtype) ? tg__work_alloc((size_t)(n > 0 ? n : 1) * 8) : NULL;
    if (!r || (tg_dtype_is_float(x->dtype) && !v)) {
        tg_tensor_release(r);
        tg__work_free(v);
        return TG_ENOMEM;
    }
    uint8_t *o = tg_tensor_data(r);
    if (v && n > 0) tg__gather(x, TG_F64, v);
    for (int64_t i = 0; i < n; i++) o[i] = v ? holds(k, v[i]) : k == P_ISFINITE;
    tg__work_free(v);
    *out = r;
    return TG_OK;
}

/* Defines isnan_forward ... isfinite_forward and their schemas isnan_op ...
 * isfinite_op. */
#define PRED_SCHEMA(p, K)                                                     \
    static int p##_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in, \
                           const void *params)                                \
    {                                                                         \
        return predicate(K, out, in[0]);                                      \
    }                                                                         \
    static const tg_op_schema p##_op = {.name = #p, .arity = 1, .amp = TG_AMP_KEEP, \
                                        .forward = p##_forward,               \
                                        .vjp = "no gradient: the result is 0 and 1 (u8)"};
PRED_SCHEMA(isnan, P_ISNAN)
PRED_SCHEMA(isinf, P_ISINF)
PRED_SCHEMA(isposinf, P_ISPOSINF)
PRED_SCHEMA(isneginf, P_ISNEGINF)
PRED_SCHEMA(isfinite, P_ISFINITE)

/* ---- all and any ---- */

typedef struct truth_params {
    int dim;        /* the dim reduced, when !whole */
    bool keepdim;
    bool whole;     /* every element, to a 0-d result */
} truth_params;

static int truth(bool is_all, tg_tensor **out, tg_tensor *x, const truth_params *p)
{
    const char *op = is_all ? (p->whole ? "all" : "all_dim") : (p->whole ? "any" : "any_dim");
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    unsigned mask = tg__dims_all(x->ndim);
    if (!p->whole) TG_TRY(tg__dims_mask(op, 1, &p->dim, x->ndim, &mask));
    int ond;
    int64_t oshape[TG_MAX_DIMS], rows, n;
    tg__dims_out_shape(x->ndim, x->shape, mask, p->whole ? false : p->keepdim, &ond, oshape);
    void *buf = NULL;
    tg_tensor *r = tg__tensor_uninit(TG_U8, ond, oshape);
    int rc = r ? tg__dim_rows(x, mask, TG_F64, &buf, &rows, &n) : TG_ENOMEM;
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    uint8_t *o = tg_tensor_data(r);
    const double *v = buf;
    for (int64_t i = 0; i < rows; i++) {
        bool acc = is_all;
        /* all: stop at the first 0; any: at the first nonzero (NaN too) */
        for (int64_t j = 0; j < n && acc == is_all; j++) acc = v[i * n + j] != 0;
        o[i] = acc;
    }
    tg__work_free(buf);
    *out = r;
    return TG_OK;
}

static int all_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    return truth(true, out, in[0], params);
}

static int any_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                       const void *params)
{
    return truth(false, out, in[0], params);
}

static const tg_op_schema all_op = {.name = "all", .arity = 1, .amp = TG_AMP_KEEP,
                                    .forward = all_forward,
                                    .vjp = "no gradient: the result is 0 and 1 (u8)"};
static const tg_op_schema any_op = {.name = "any", .arity = 1, .amp = TG_AMP_KEEP,
                                    .forward = any_forward,
                                    .vjp = "no gradient: the result is 0 and 1 (u8)"};

/* ---- nan_to_num ---- */

typedef struct nan_to_num_params {
    double nan, posinf, neginf;   /* the replacements, in x's dtype */
} nan_to_num_params;

static double replace(double v, const void *user)
{
    const nan_to_num_params *p = user;
    if (isnan(v)) return p->nan;
    if (v == INFINITY) return p->posinf;
    return v == -INFINITY ? p->neginf : v;
}

static double finite01(double v, const void *user)
{
    (void)user;
    return isfinite(v) ? 1.0 : 0.0;
}

static int nan_to_num_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                              const void *params)
{
    TG_CHECK(in[0] != NULL, TG_EINVAL, "nan_to_num: x must not be NULL");
    if (!tg_dtype_is_float(in[0]->dtype)) return tg_tensor_clone(out, in[0]);
    TG_TRY(tg__map_f64(out, in[0], in[0]->dtype, replace, params));
    if (ctx) tg__ctx_save(ctx, in[0]);
    return TG_OK;
}

/* dx = g * isfinite(x), the mask a constant of g's dtype. */
static int nan_to_num_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *x, *mask = NULL;
    TG_TRY(tg__ctx_saved(ctx, 0, &x));
    TG_TRY(tg__map_f64(&mask, x, g->dtype, finite01, NULL));
    const int rc = tg_mul(&gi[0], g, mask);
    tg_tensor_release(mask);
    return rc;
}

static const tg_op_schema nan_to_num_op = {.name = "nan_to_num", .arity = 1,
                                           .amp = TG_AMP_KEEP,
                                           .forward = nan_to_num_forward,
                                           .backward = nan_to_num_backward,
                                           .double_backward = true,
                                           .vjp = "da = g * isfinite(a)"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__predicates_ops[] = {&isnan_op, &isinf_op,  &isposinf_op,
                                                  &isneginf_op, &isfinite_op, &all_op,
                                                  &any_op,   &nan_to_num_op};
static_assert(sizeof tg__predicates_ops / sizeof tg__predicates_ops[0] == TG__predicates_N,
              "src/ops/families.h must count the predicates ops");

static int call1(const tg_op_schema *op, tg_tensor **out, tg_tensor *x, const void *p,
                 size_t size)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    return tg_op_call(op, out, 1, &x, p, size);
}

int tg_isnan(tg_tensor **out, tg_tensor *x) { return call1(&isnan_op, out, x, NULL, 0); }
int tg_isinf(tg_tensor **out, tg_tensor *x) { return call1(&isinf_op, out, x, NULL, 0); }
int tg_isposinf(tg_tensor **out, tg_tensor *x) { return call1(&isposinf_op, out, x, NULL, 0); }
int tg_isneginf(tg_tensor **out, tg_tensor *x) { return call1(&isneginf_op, out, x, NULL, 0); }
int tg_isfinite(tg_tensor **out, tg_tensor *x) { return call1(&isfinite_op, out, x, NULL, 0); }

int tg_all(tg_tensor **out, tg_tensor *x)
{
    truth_params p = {.whole = true};
    return call1(&all_op, out, x, &p, sizeof p);
}

int tg_any(tg_tensor **out, tg_tensor *x)
{
    truth_params p = {.whole = true};
    return call1(&any_op, out, x, &p, sizeof p);
}

int tg_all_dim(tg_tensor **out, tg_tensor *x, int dim, bool keepdim)
{
    truth_params p = {.dim = dim, .keepdim = keepdim};
    return call1(&all_op, out, x, &p, sizeof p);
}

int tg_any_dim(tg_tensor **out, tg_tensor *x, int dim, bool keepdim)
{
    truth_params p = {.dim = dim, .keepdim = keepdim};
    return call1(&any_op, out, x, &p, sizeof p);
}

int tg_nan_to_num(tg_tensor **out, tg_tensor *x, const double *nan, const double *posinf,
                  const double *neginf)
{
    nan_to_num_params p = {0};
    if (x && tg_dtype_is_float(x->dtype)) {
        const tg_dtype dt = x->dtype;
        p.nan = nan ? tg__scalar_in_dtype(dt, *nan) : 0.0;
        p.posinf = posinf ? tg__scalar_in_dtype(dt, *posinf) : tg__dtype_finite_max(dt);
        p.neginf = neginf ? tg__scalar_in_dtype(dt, *neginf) : -tg__dtype_finite_max(dt);
    }
    return call1(&nan_to_num_op, out, x, &p, sizeof p);
}
