/* src/ops/compare.c - the comparisons eq, ne, lt, le, gt, ge of two tensors
 * broadcast together, and of a tensor with a number (torch.eq ... torch.ge,
 * ==, !=, <, <=, >, >=).  The result is a u8 tensor of 0 and 1 (tapegrad has
 * no bool dtype; torch.bool is one byte of 0 or 1 too), never recorded on
 * the tape and without gradient, as PyTorch's.
 *
 * What is compared, as PyTorch 1.13's type promotion:
 *  - two integer tensors: their values, exactly (promotion to a common
 *    integer type changes no value);
 *  - otherwise both are converted to the float dtype they promote to (a 0-d
 *    tensor's dtype counting only when no float input has dims, as in
 *    arithmetic; an integer becomes the float's dtype), then compared: an
 *    f32 x == a 0-d f64 0.1 is true where x is 0.1f;
 *  - a float tensor and a number: the number converted to the tensor's
 *    dtype first (tg_add_scalar's rule: an f16 x < 0.1 compares with
 *    0.0999755859375);
 *  - an integer tensor and a number: exactly, as numbers (torch compares in
 *    f32 for a Python float and wraps a Python int into the tensor's dtype:
 *    docs/autograd.md lists where that differs).
 * NaN is unordered: every comparison with it is false but ne. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "ops/elementwise.h"
#include "ops/families.h"
#include "tapegrad/ops.h"

typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE } cmp_kind;

static const char *const KIND_NAMES[6] = {"eq", "ne", "lt", "le", "gt", "ge"};

/* The params of the _scalar ops; the kind is the schema's own. */
typedef struct cmp_params {
    double s;
} cmp_params;

/* The order of two values: -1, 0 or 1, or 2 when unordered (a NaN). */
static int order_f64(double a, double b)
{
    if (a < b) return -1;
    if (a > b) return 1;
    return a == b ? 0 : 2;
}

static int order_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

/* The exact order of an integer and a double. */
static int order_i64_f64(int64_t v, double s)
{
    if (isnan(s)) return 2;
    if (s >= 0x1p63) return -1;
    if (s < -0x1p63) return 1;
    const double fl = floor(s);   /* in [-2^63, 2^63): exact as int64 */
    const int64_t f = (int64_t)fl;
    if (v != f) return v < f ? -1 : 1;
    return s > fl ? -1 : 0;
}

static uint8_t holds(cmp_kind k, int order)
{
    switch (k) {
    case CMP_EQ: return order == 0;
    case CMP_NE: return order != 0;
    case CMP_LT: return order == -1;
    case CMP_LE: return order == -1 || order == 0;
    case CMP_GT: return order == 1;
    default: return order == 1 || order == 0;
    }
}

/* The float dtype two tensors are compared in, when either is float. */
static tg_dtype common_float(const tg_tensor *a, const tg_tensor *b)
{
    const tg_tensor *t[2] = {a, b};
    bool dimensioned = false, any = false;
    tg_dtype dt = TG_F32;
    for (int i = 0; i < 2; i++) dimensioned |= tg_dtype_is_float(t[i]->dtype) && t[i]->ndim > 0;
    for (int i = 0; i < 2; i++) {
        if (!tg_dtype_is_float(t[i]->dtype) || (dimensioned && t[i]->ndim == 0)) continue;
        dt = any ? tg_promote_dtypes(dt, t[i]->dtype) : t[i]->dtype;
        any = true;
    }
    TG_ASSERT(any);
    return dt;
}

/* t broadcast to (nd, shape) as n values in buf: int64 (as == TG_I64) or
 * doubles rounded through dtype via (a float dtype). */
static int load(const tg_tensor *t, int nd, const int64_t *shape, tg_dtype as, tg_dtype via,
                void *buf, int64_t n)
{
    tg_tensor *e = NULL;
    TG_TRY(tg_expand(&e, (tg_tensor *)t, nd, shape));   /* grad mode off: a view */
    int rc = TG_OK;
    if (n > 0) tg__gather(e, as, buf);
    if (n > 0 && as == TG_F64 && via != TG_F64 && via != t->dtype) {
        void *tmp = tg__work_alloc((size_t)n * tg_dtype_size(via));
        if (!tmp) rc = TG_ENOMEM;
        else {
            tg__convert_n(TG_F64, buf, via, tmp, n);
            tg__convert_n(via, tmp, TG_F64, buf, n);
            tg__work_free(tmp);
        }
    }
    tg_tensor_release(e);
    return rc;
}

static int compare(cmp_kind kind, tg_tensor **out, tg_tensor *const *in)
{
    const char *op = KIND_NAMES[kind];
    tg_tensor *a = in[0], *b = in[1];
    TG_CHECK(a != NULL, TG_EINVAL, "%s: a must not be NULL", op);
    TG_CHECK(b != NULL, TG_EINVAL, "%s: b must not be NULL", op);
    int nd;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(tg__broadcast_shapes(op, a->ndim, a->shape, b->ndim, b->shape, &nd, shape));
    const int64_t count = tg__numel(nd, shape);
    const bool ints = !tg_dtype_is_float(a->dtype) && !tg_dtype_is_float(b->dtype);
    const tg_dtype as = ints ? TG_I64 : TG_F64, via = ints ? TG_I64 : common_float(a, b);
    void *va = tg__work_alloc((size_t)(count > 0 ? count : 1) * 8);
    void *vb = tg__work_alloc((size_t)(count > 0 ? count : 1) * 8);
    tg_tensor *r = tg__tensor_uninit(TG_U8, nd, shape);
    int rc = va && vb && r ? TG_OK : TG_ENOMEM;
    if (rc >= 0) rc = load(a, nd, shape, as, via, va, count);
    if (rc >= 0) rc = load(b, nd, shape, as, via, vb, count);
    if (rc >= 0) {
        uint8_t *o = tg_tensor_data(r);
        for (int64_t i = 0; i < count; i++)
            o[i] = holds(kind, ints ? order_i64(((int64_t *)va)[i], ((int64_t *)vb)[i])
                                       : order_f64(((double *)va)[i], ((double *)vb)[i]));
        *out = r;
        r = NULL;
    }
    tg__work_free(va);
    tg__work_free(vb);
    tg_tensor_release(r);
    return rc;
}

static int compare_scalar(cmp_kind kind, tg_tensor **out, tg_tensor *const *in,
                          const cmp_params *p)
{
    char op[16];
    snprintf(op, sizeof op, "%s_scalar", KIND_NAMES[kind]);
    tg_tensor *a = in[0];
    TG_CHECK(a != NULL, TG_EINVAL, "%s: a must not be NULL", op);
    TG_CHECK(p != NULL, TG_EINVAL, "%s: params must hold the number compared with", op);
    const int64_t count = tg_tensor_numel(a);
    const bool is_float = tg_dtype_is_float(a->dtype);
    void *v = tg__work_alloc((size_t)(count > 0 ? count : 1) * 8);
    tg_tensor *r = tg__tensor_uninit(TG_U8, a->ndim, a->shape);
    if (!v || !r) {
        tg__work_free(v);
        tg_tensor_release(r);
        return TG_ENOMEM;
    }
    if (count > 0) tg__gather(a, is_float ? TG_F64 : TG_I64, v);
    const double s = is_float ? tg__scalar_in_dtype(a->dtype, p->s) : p->s;
    uint8_t *o = tg_tensor_data(r);
    for (int64_t i = 0; i < count; i++)
        o[i] = holds(kind, is_float ? order_f64(((double *)v)[i], s)
                                       : order_i64_f64(((int64_t *)v)[i], s));
    tg__work_free(v);
    *out = r;
    return TG_OK;
}

/* The vjp of every schema below (tapegrad/op.h). */
#define NO_GRADIENT "no gradient: the result is 0 and 1 (u8)"

/* Defines the forwards eq_forward ... ge_forward, eq_scalar_forward ...
 * ge_scalar_forward, and their schemas eq_op ... ge_op, eq_scalar_op ...
 * ge_scalar_op. */
#define COMPARE_SCHEMAS(k, K)                                                 \
    static int k##_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in, \
                           const void *params)                                \
    {                                                                         \
        return compare(K, out, in);                                           \
    }                                                                         \
    static int k##_scalar_forward(tg_ctx *ctx, tg_tensor **out, int n,        \
                                  tg_tensor *const *in, const void *params)   \
    {                                                                         \
        return compare_scalar(K, out, in, params);                            \
    }                                                                         \
    static const tg_op_schema k##_op = {.name = #k, .arity = 2, .amp = TG_AMP_KEEP, \
                                        .forward = k##_forward,               \
                                        .vjp = NO_GRADIENT};                  \
    static const tg_op_schema k##_scalar_op = {.name = #k "_scalar", .arity = 1, \
                                               .amp = TG_AMP_KEEP,            \
                                               .forward = k##_scalar_forward, \
                                               .vjp = NO_GRADIENT,            \
                                               .scalar = "s"};
COMPARE_SCHEMAS(eq, CMP_EQ)
COMPARE_SCHEMAS(ne, CMP_NE)
COMPARE_SCHEMAS(lt, CMP_LT)
COMPARE_SCHEMAS(le, CMP_LE)
COMPARE_SCHEMAS(gt, CMP_GT)
COMPARE_SCHEMAS(ge, CMP_GE)

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__compare_ops[] = {
    &eq_op, &ne_op, &lt_op, &le_op, &gt_op, &ge_op,
    &eq_scalar_op, &ne_scalar_op, &lt_scalar_op, &le_scalar_op, &gt_scalar_op, &ge_scalar_op};
static_assert(sizeof tg__compare_ops / sizeof tg__compare_ops[0] == TG__compare_N,
              "src/ops/families.h must count the compare ops");

static int call2(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, tg_tensor *b)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    return tg_op_call(op, out, 2, (tg_tensor *[]){a, b}, NULL, 0);
}

static int call_s(const tg_op_schema *op, tg_tensor **out, tg_tensor *a, double s)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    cmp_params p = {.s = s};
    return tg_op_call(op, out, 1, &a, &p, sizeof p);
}

/* Defines tg_eq ... tg_ge and tg_eq_scalar ... tg_ge_scalar. */
#define COMPARE_CALLS(k)                                                      \
    int tg_##k(tg_tensor **out, tg_tensor *a, tg_tensor *b)                   \
    {                                                                         \
        return call2(&k##_op, out, a, b);                                     \
    }                                                                         \
    int tg_##k##_scalar(tg_tensor **out, tg_tensor *a, double s)              \
    {                                                                         \
        return call_s(&k##_scalar_op, out, a, s);                             \
    }
COMPARE_CALLS(eq)
COMPARE_CALLS(ne)
COMPARE_CALLS(lt)
COMPARE_CALLS(le)
COMPARE_CALLS(gt)
COMPARE_CALLS(ge)
