/* src/ops/where.c - where(cond, a, b): a where cond is nonzero, b elsewhere,
 * the three broadcast together (torch.where).  cond may have any dtype (a
 * mask of 0 and 1, or a comparison's result) and takes no part in the
 * result's dtype.
 *
 * a and b of different dtypes are promoted as torch 1.13's where does,
 * which is torch.result_type(a, b) (scripts/make_where_goldens.py checks
 * every pair): an integer with a float gives the float dtype, two integers
 * the wider (u8 with i32 gives i32), two floats tg_promote_dtypes.  A 0-d
 * operand's dtype counts only against a 0-d operand or one of a lower
 * category: an f32 tensor with a 0-d f64 is f32, a u8 tensor with a 0-d i64
 * is u8, an i32 tensor with a 0-d f64 is f64.  i8 with u8 is int16 in
 * torch, which tapegrad does not have: TG_EDTYPE.  The forward converts
 * both to the result's dtype itself (the op's AMP policy is KEEP, so cond
 * is never cast and cannot widen the result).
 *
 * Gradients: da = sum_to_shape(g * c), db = sum_to_shape(g * (1 - c)) with c
 * the 0/1 mask of cond, a constant: products that can be differentiated
 * again; each converted back to its input's float dtype.  cond and an
 * integer operand have no gradient, and an integer result is not recorded
 * (tg_op_call), as torch's; nor is one where only cond requires grad.
 *
 * The forward copies elements in parallel blocks: each input in place when
 * it is contiguous in the result's shape (in the result's dtype) or a
 * single element (the masked fills and the 0s of gradients), else from a
 * contiguous copy of it broadcast and converted (tg__ew_input). */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

static double nonzero(double v, const void *user)
{
    (void)user;
    return v != 0 ? 1.0 : 0.0;
}

/* The broadcast shape of the three inputs. */
static int where_shape(tg_tensor *const *in, int *nd, int64_t *shape)
{
    int nd1;
    int64_t s1[TG_MAX_DIMS];
    TG_TRY(tg__broadcast_shapes("where", in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape,
                                &nd1, s1));
    return tg__broadcast_shapes("where", nd1, s1, in[2]->ndim, in[2]->shape, nd, shape);
}

/* One element of an integer dtype, as its bits. */
typedef union where_int {
    uint8_t u8;
    uint32_t u32;
    uint64_t u64;
} where_int;

/* The result's elements are copied from a's or b's bits in the result's
 * dtype, cond read in blocks as a mask.  Each input is read in place when
 * it is contiguous in the result's shape (a and b: in the result's dtype)
 * or holds one element of that dtype (a 0-d zero, a scalar fill); otherwise
 * from a contiguous copy of it broadcast to the result's shape, a and b
 * converted to the result's dtype. */
typedef struct where_job {
    const void *p[3];   /* cond, a, b */
    bool one[3];        /* a single element, broadcast */
    where_int wrapped[3];   /* a 0-d integer a or b in a narrower integer dtype */
    tg_dtype cdt;
    size_t size;        /* bytes of an a, b and result element: 1, 2, 4 or 8 */
    void *y;
} where_job;

enum { WHERE_BLOCK = 1024 };

/* m[k] = 1 where cond element lo + k is nonzero (a NaN too, -0.0 not). */
static void cond_block(const where_job *j, int64_t lo, int64_t n, uint8_t *m)
{
    const int64_t s = j->one[0] ? 0 : 1;
    const char *c = j->p[0];
    for (int64_t k = 0; k < n; k++) {
        const int64_t i = (lo + k) * s;
        switch (j->cdt) {
        case TG_F32: m[k] = ((const float *)c)[i] != 0; break;
        case TG_F64: m[k] = ((const double *)c)[i] != 0; break;
        case TG_F16:
        case TG_BF16: m[k] = (((const uint16_t *)c)[i] & 0x7fff) != 0; break;
        case TG_I32: m[k] = ((const int32_t *)c)[i] != 0; break;
        case TG_I64: m[k] = ((const int64_t *)c)[i] != 0; break;
        default: m[k] = ((const uint8_t *)c)[i] != 0; break;   /* u8, i8 */
        }
    }
}

#define WHERE_SELECT(T)                                                           \
    do {                                                                          \
        const T *a = j->p[1], *b = j->p[2];                                       \
        T *y = (T *)j->y + lo;                                                    \
        const int64_t sa = j->one[1] ? 0 : 1, sb = j->one[2] ? 0 : 1;             \
        for (int64_t k = 0; k < n; k++)                                           \
            y[k] = m[k] ? a[(lo + k) * sa] : b[(lo + k) * sb];                    \
    } while (0)

static void where_range(void *p, int64_t lo0, int64_t hi)
{
    const where_job *j = p;
    uint8_t m[WHERE_BLOCK];
    for (int64_t lo = lo0; lo < hi; lo += WHERE_BLOCK) {
        const int64_t n = hi - lo < WHERE_BLOCK ? hi - lo : WHERE_BLOCK;
        cond_block(j, lo, n, m);
        if (j->size == 1) WHERE_SELECT(uint8_t);
        else if (j->size == 2) WHERE_SELECT(uint16_t);
        else if (j->size == 4) WHERE_SELECT(uint32_t);
        else WHERE_SELECT(uint64_t);
    }
}

/* The one element of integer tensor t in integer dtype dt, wrapped as
 * torch converts (two's complement, modulo 2^bits: a 0-d u8 255 against an
 * i8 tensor is -1, a 0-d i32 -5 against a u8 tensor 251); *p points at it. */
static void wrap_int(const tg_tensor *t, tg_dtype dt, where_int *w, const void **p)
{
    const void *x = tg_tensor_cdata(t);
    int64_t v;
    switch (t->dtype) {
    case TG_I8: v = *(const int8_t *)x; break;
    case TG_U8: v = *(const uint8_t *)x; break;
    case TG_I32: v = *(const int32_t *)x; break;
    default: v = *(const int64_t *)x; break;   /* i64 */
    }
    const uint64_t u = (uint64_t)v;
    switch (tg_dtype_size(dt)) {
    case 1: w->u8 = (uint8_t)u; *p = &w->u8; break;
    case 4: w->u32 = (uint32_t)u; *p = &w->u32; break;
    default: w->u64 = u; *p = &w->u64; break;
    }
}

/* Points j at the inputs, a and b in the result's dtype dt: a single
 * element in place (read at every index) or converted (wrapped, between
 * integer dtypes), any other through tg__ew_input (its own elements when
 * contiguous with (nd, shape) and of dt, else a broadcast copy converted
 * to dt).  owned[i] keeps a copy for the caller to free. */
static int where_inputs(tg_tensor *const *in, tg_dtype dt, int nd, const int64_t *shape,
                        int64_t n, where_job *j, void **owned)
{
    for (int i = 0; i < 3; i++) {
        const tg_dtype want = i == 0 ? in[0]->dtype : dt;
        j->one[i] = tg_tensor_numel(in[i]) == 1;
        if (j->one[i] && in[i]->dtype == want) j->p[i] = tg_tensor_cdata(in[i]);
        else if (j->one[i] && !tg_dtype_is_float(in[i]->dtype) && !tg_dtype_is_float(want))
            wrap_int(in[i], want, &j->wrapped[i], &j->p[i]);
        else if (j->one[i])   /* its one element, converted */
            TG_TRY(tg__ew_input(in[i], want, in[i]->ndim, in[i]->shape, 1, &j->p[i], &owned[i]));
        else TG_TRY(tg__ew_input(in[i], want, nd, shape, n, &j->p[i], &owned[i]));
    }
    j->cdt = in[0]->dtype;
    j->size = tg_dtype_size(dt);
    return TG_OK;
}

static int where_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                         const void *params)
{
    TG_CHECK(in[0] != NULL, TG_EINVAL, "where: cond must not be NULL");
    TG_CHECK(in[1] != NULL, TG_EINVAL, "where: a must not be NULL");
    TG_CHECK(in[2] != NULL, TG_EINVAL, "where: b must not be NULL");
    tg_dtype dt = TG_F32;
    TG_TRY(tg__result_dtype("where", in[1], in[2], &dt));   /* torch.result_type */
    int nd;
    int64_t shape[TG_MAX_DIMS];
    TG_TRY(where_shape(in, &nd, shape));
    tg_tensor *r = tg__tensor_uninit(dt, nd, shape);
    if (!r) return TG_ENOMEM;
    const int64_t numel = tg_tensor_numel(r);
    void *owned[3] = {NULL, NULL, NULL};
    where_job j;
    int rc = where_inputs(in, dt, nd, shape, numel, &j, owned);
    if (rc >= 0) {
        j.y = tg_tensor_data(r);
        tg__parallel_range(numel, numel > 32768, where_range, &j);
        if (ctx) tg__ctx_save(ctx, in[0]);
        *out = r;
        r = NULL;
    }
    for (int i = 0; i < 3; i++) tg__work_free(owned[i]);
    tg_tensor_release(r);
    return rc;
}

static int where_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    tg_tensor *cond, *c = NULL, *nc = NULL, *t = NULL, *s = NULL;
    int rc = tg__ctx_saved(ctx, 0, &cond);
    if (rc >= 0) rc = tg__map_f64(&c, cond, g->dtype, nonzero, NULL);
    for (int i = 1; i <= 2 && rc >= 0; i++) {
        if (!tg__ctx_needs_grad(ctx, i)) continue;
        const tg_meta *m = tg__ctx_input_meta(ctx, i);
        if (i == 2) rc = tg_rsub_scalar(&nc, c, 1.0);
        if (rc >= 0) rc = tg_mul(&t, g, i == 1 ? c : nc);
        if (rc >= 0) rc = tg_sum_to_shape(&s, t, m->ndim, m->shape);
        /* Summed in the result's dtype, then rounded to the input's (a
         * promoted f16 a gets an f16 gradient), as torch. */
        if (rc >= 0 && m->dtype != s->dtype) rc = tg_to_dtype(&gi[i], s, m->dtype);
        else if (rc >= 0) gi[i] = tg_tensor_retain(s);
        tg_tensor_release(t);
        tg_tensor_release(s);
        t = s = NULL;
    }
    tg_tensor_release(c);
    tg_tensor_release(nc);
    return rc;
}

static const tg_op_schema where_op = {.name = "where", .arity = 3, .amp = TG_AMP_KEEP,
                                .forward = where_forward, .backward = where_backward,
                                .double_backward = true,
                                .vjp = "da = g where cond, db = g elsewhere (each summed back to "
                                       "its input's shape, in its dtype); cond gets none"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__where_ops[] = {&where_op};
static_assert(sizeof tg__where_ops / sizeof tg__where_ops[0] == TG__where_N,
              "src/ops/families.h must count the where ops");

/* cond gets no gradient, so a float cond that requires grad goes in
 * detached (sharing its storage and version): with neither a nor b
 * requiring grad the result is then not recorded and does not require
 * grad, as torch's (whose cond is a bool tensor, never differentiable). */
int tg_where(tg_tensor **out, tg_tensor *cond, tg_tensor *a, tg_tensor *b)
{
    tg_tensor *c = NULL;
    if (cond && cond->requires_grad) TG_TRY(tg_tensor_detach(&c, cond));
    tg_tensor *in[3] = {c ? c : cond, a, b};
    const int rc = tg_op_call(&where_op, out, 3, in, NULL, 0);
    tg_tensor_release(c);
    return rc;
}

/* where(cond, a, 0) with the 0 a 0-d tensor of a's dtype. */
int tg__where_or_zero(tg_tensor **out, tg_tensor *cond, tg_tensor *a)
{
    tg_tensor *zero = NULL;
    TG_TRY(tg_tensor_scalar(&zero, a->dtype, 0.0));
    const int rc = tg_where(out, cond, a, zero);
    tg_tensor_release(zero);
    return rc;
}

/* v with the fewest significant digits that read back as v, an integer
 * part of up to 17 digits written out ("300", "127.5", "2147483647.5",
 * "1e+300", "9.223372036854776e+18"). */
static const char *shortest(char *buf, size_t size, double v)
{
    int p = 1;
    while (p < 17) {
        snprintf(buf, size, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
        p++;
    }
    const double a = fabs(v);
    const int digits = a >= 1 && a < 1e17 ? (int)floor(log10(a)) + 1 : 0;
    snprintf(buf, size, "%.*g", digits > p ? digits : p, v);
    return buf;
}

/* The range of integer dtype dt as text, for the refusal of a value. */
static const char *int_range(tg_dtype dt)
{
    switch (dt) {
    case TG_I8: return "[-128, 127]";
    case TG_U8: return "[0, 255]";
    case TG_I32: return "[-2147483648, 2147483647]";
    default: return "[-9223372036854775808, 9223372036854775807]";   /* i64 */
    }
}

/* where(mask, value, x), value a 0-d tensor of x's dtype: rounded to a
 * float dtype, truncated toward zero for an integer one, as torch converts
 * a Python float.  A value beyond the dtype's range is refused (for an
 * integer dtype also NaN and +-inf), as torch's "value cannot be converted
 * to type int8_t without overflow"; torch 1.13 accepts 2^63 for int64 and
 * writes an undefined conversion (INT64_MIN), refused here too. */
static int masked_fill(tg_tensor **out, tg_tensor *x, tg_tensor *mask, double value)
{
    TG_CHECK(mask != NULL, TG_EINVAL, "masked_fill: mask must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "masked_fill: x must not be NULL");
    tg_tensor *v = NULL;
    int rc = tg_tensor_scalar(&v, x->dtype, value);
    if (rc == TG_EINVAL) {
        char vs[32], range[64] = "";
        if (!tg_dtype_is_float(x->dtype))
            snprintf(range, sizeof range, " (range %s)", int_range(x->dtype));
        return tg__error(rc, "masked_fill: value %s cannot be converted to x's dtype %s without "
                             "overflow%s", shortest(vs, sizeof vs, value), tg_dtype_name(x->dtype),
                         range);
    }
    TG_TRY(rc);
    rc = tg_where(out, mask, v, x);
    tg_tensor_release(v);
    return rc;
}

int tg_masked_fill(tg_tensor **out, tg_tensor *x, tg_tensor *mask, double value)
{
    TG_CHECK(out != NULL, TG_EINVAL, "masked_fill: out must not be NULL");
    tg__lib_enter();
    const int rc = masked_fill(out, x, mask, value);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
