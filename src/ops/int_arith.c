/* src/ops/int_arith.c - arithmetic on integer tensors, for the ops whose
 * torch result keeps an integer dtype: add, sub, mul, pow, maximum and
 * minimum of two tensors, the scalar forms of add, sub, rsub, mul and pow,
 * and clamp, relu and hardtanh (src/ops/binary.c, unary.c, maximum.c,
 * clamp.c, activation.c, hardact.c call these).
 *
 * The result's dtype is torch.result_type's (tg__result_dtype): two integer
 * dtypes give the wider, i8 with u8 int16 (which tapegrad lacks: refused),
 * and a 0-d operand counts only against another 0-d one (an i32 tensor
 * plus a 0-d i64 is i32).  Each operand is converted to the result's dtype
 * modulo 2^bits (a 0-d i8 -1 with a u8 tensor is 255), as torch's casts,
 * and the arithmetic wraps modulo 2^bits (two's complement): it runs in the
 * unsigned type of the same width, where C defines the wrap-around, and the
 * conversion back to the signed type keeps the bits (gcc and clang define
 * it so).  A sum or product modulo 2^bits is the same whether the operands
 * were reduced first or not, so that order changes nothing.
 *
 * An integer result is never recorded (tg_op_call drops the node), as
 * torch's: integers have no gradient.
 */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "tapegrad/ops.h"

/* ---- the result's dtype --------------------------------------------------- */

/* The dtype of two operand dtypes of one rank class (both 0-d or both
 * not), as torch promotes them; false for i8 with u8 (int16 in torch). */
static bool promote(tg_dtype a, tg_dtype b, tg_dtype *r)
{
    if (a == b || tg_dtype_is_float(a) || tg_dtype_is_float(b)) {
        *r = tg_promote_dtypes(a, b);   /* a float wins over an integer */
        return true;
    }
    /* Two integer dtypes: the wider; of one width they are i8 and u8. */
    if (tg_dtype_size(a) == tg_dtype_size(b)) return false;
    *r = tg_dtype_size(a) > tg_dtype_size(b) ? a : b;
    return true;
}

int tg__result_dtype(const char *op, const tg_tensor *a, const tg_tensor *b, tg_dtype *r)
{
    const bool fa = tg_dtype_is_float(a->dtype), fb = tg_dtype_is_float(b->dtype);
    if ((a->ndim == 0) != (b->ndim == 0) && fa == fb) {
        *r = a->ndim > 0 ? a->dtype : b->dtype;
        return TG_OK;
    }
    if (promote(a->dtype, b->dtype, r)) return TG_OK;
    return tg__error(TG_EDTYPE, "%s: a (%s) and b (%s): torch promotes them to int16, which "
                     "tapegrad does not have (convert one with tg_to_dtype)",
                     op, tg_dtype_name(a->dtype), tg_dtype_name(b->dtype));
}

/* ---- an integer operand with a float one ---------------------------------- */

int tg__ew_mixed_to_float(const char *op, tg_tensor *const *in, tg_tensor **eff,
                          tg_tensor **conv)
{
    eff[0] = in[0], eff[1] = in[1];
    conv[0] = conv[1] = NULL;
    TG_CHECK(in[0] && in[1], TG_EINVAL, "%s: input %d is NULL", op, in[0] ? 1 : 0);
    const bool fa = tg_dtype_is_float(in[0]->dtype), fb = tg_dtype_is_float(in[1]->dtype);
    if (fa == fb) return TG_OK;
    const int i = fa ? 1 : 0;                 /* the integer operand */
    const tg_dtype dt = in[1 - i]->dtype;     /* the float's, the result's */
    /* torch's cast (to a half dtype through f32, as tg_to_dtype's: an i32
     * 16842753 is bf16 2^24, not the nearest bf16 2^24 + 2^17) */
    TG_TRY(tg_to_dtype(&conv[i], in[i], dt));
    eff[i] = conv[i];
    return TG_OK;
}

/* ---- kernels ---------------------------------------------------------------- */

/* out[k] = a[k * sa] op b[k * sb] for k in [lo, hi), the strides 0 or 1 (a
 * scalar operand is one element), T the dtype and U its unsigned type. */
typedef struct int_job {
    tg_int_op op;
    tg_dtype dt;
    const void *a, *b;
    int64_t sa, sb;
    void *out;
} int_job;

/* powi as torch's: by squaring modulo 2^bits (U the unsigned type); a
 * negative exponent (a tensor exponent only: a scalar one is refused) gives
 * the integer part of a^b, as torch's: 1 for a base of 1, +-1 for -1 (by the
 * exponent's parity), 0 otherwise. */
#define INT_POW_FN(T, U)                                                      \
    static inline T int_pow_##T(T x, T y)                                     \
    {                                                                         \
        if (y < 0) return x == 1 ? (T)1 : x == -1 ? (T)((y & 1) ? -1 : 1) : (T)0; \
        U r = 1, b = (U)x;                                                    \
        for (U e = (U)y; e; e >>= 1) {                                        \
            if (e & 1) r = (U)(r * b);                                        \
            b = (U)(b * b);                                                   \
        }                                                                     \
        return (T)r;                                                          \
    }
INT_POW_FN(int8_t, uint8_t)
INT_POW_FN(int32_t, uint32_t)
INT_POW_FN(int64_t, uint64_t)

/* u8 exponents are never negative. */
static inline uint8_t int_pow_uint8_t(uint8_t x, uint8_t y)
{
    unsigned r = 1, b = x;
    for (unsigned e = y; e; e >>= 1) {
        if (e & 1) r = (r * b) & 0xffu;
        b = (b * b) & 0xffu;
    }
    return (uint8_t)r;
}

#define INT_FOR(T, U, expr)                                                   \
    for (int64_t k = lo; k < hi; k++) {                                       \
        const T x = pa[k * j->sa], y = pb[k * j->sb];                         \
        o[k] = (T)(expr);                                                     \
    }
#define INT_RUN(T, U)                                                         \
    do {                                                                      \
        T *o = j->out;                                                        \
        const T *pa = j->a, *pb = j->b;                                       \
        switch (j->op) {                                                      \
        case TG_INT_ADD: INT_FOR(T, U, (U)((U)x + (U)y)) break;                \
        case TG_INT_SUB: INT_FOR(T, U, (U)((U)x - (U)y)) break;                \
        case TG_INT_MUL: INT_FOR(T, U, (U)((U)x * (U)y)) break;                \
        case TG_INT_MAX: INT_FOR(T, U, x < y ? y : x) break;                   \
        case TG_INT_MIN: INT_FOR(T, U, y < x ? y : x) break;                   \
        case TG_INT_POW: INT_FOR(T, U, int_pow_##T(x, y)) break;               \
        }                                                                     \
    } while (0)

static void int_range(void *p, int64_t lo, int64_t hi)
{
    const int_job *j = p;
    switch (j->dt) {
    case TG_I8: INT_RUN(int8_t, uint8_t); break;
    case TG_U8: INT_RUN(uint8_t, uint8_t); break;
    case TG_I32: INT_RUN(int32_t, uint32_t); break;
    default: INT_RUN(int64_t, uint64_t); break;   /* i64 */
    }
}

void tg__int_store(tg_dtype dt, void *buf, int64_t k, int64_t v)
{
    const uint64_t u = (uint64_t)v;
    switch (dt) {
    case TG_I8: ((int8_t *)buf)[k] = (int8_t)(uint8_t)u; break;
    case TG_U8: ((uint8_t *)buf)[k] = (uint8_t)u; break;
    case TG_I32: ((int32_t *)buf)[k] = (int32_t)(uint32_t)u; break;
    default: ((int64_t *)buf)[k] = v; break;
    }
}

/* Points *p at t's elements broadcast to (nd, shape) in integer dtype dt,
 * converted modulo 2^bits (tg__ew_input: *owned to free).  A widening
 * conversion is exact through tg__ew_input's; a narrowing one (or between i8
 * and u8), which that would saturate, goes through i64 and is wrapped here,
 * in place (element k's bytes never lie past element k's i64). */
static int int_input(const tg_tensor *t, tg_dtype dt, int nd, const int64_t *shape, int64_t n,
                     const void **p, void **owned)
{
    if (t->dtype == dt || tg_dtype_size(t->dtype) < tg_dtype_size(dt))
        return tg__ew_input(t, dt, nd, shape, n, p, owned);
    TG_TRY(tg__ew_input(t, TG_I64, nd, shape, n, p, owned));
    if (dt == TG_I64) return TG_OK;
    if (!*owned) {   /* an i64 read in place: a copy to narrow */
        void *buf = tg__work_alloc((size_t)n * tg_dtype_size(dt));
        if (!buf) return TG_ENOMEM;
        for (int64_t k = 0; k < n; k++)
            tg__int_store(dt, buf, k, ((const int64_t *)*p)[k]);
        *p = *owned = buf;
        return TG_OK;
    }
    int64_t *w = *owned;
    for (int64_t k = 0; k < n; k++) tg__int_store(dt, w, k, w[k]);
    return TG_OK;
}

/* Runs job j over n elements into res (when rc is TG_OK), frees the
 * operands' copies, and hands res to *out, or releases it and returns rc. */
static int int_finish(int_job *j, int64_t n, int rc, tg_tensor *res, void *own_a, void *own_b,
                      tg_tensor **out)
{
    if (rc == TG_OK && n > 0) {
        j->out = tg_tensor_data(res);
        tg__parallel_range(n, n > 32768, int_range, j);
    }
    tg__work_free(own_a);
    tg__work_free(own_b);
    if (rc < 0) {
        tg_tensor_release(res);
        return rc;
    }
    *out = res;
    return TG_OK;
}

int tg__int_binary(const char *op, tg_tensor **out, const tg_tensor *a, const tg_tensor *b,
                   tg_int_op k)
{
    int nd, rc;
    int64_t shape[TG_MAX_DIMS];
    tg_dtype dt;
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", op);
    TG_CHECK(a != NULL && b != NULL, TG_EINVAL, "%s: input %d is NULL", op, a ? 1 : 0);
    TG_ASSERT(!tg_dtype_is_float(a->dtype) && !tg_dtype_is_float(b->dtype));
    TG_TRY(tg__result_dtype(op, a, b, &dt));
    TG_TRY(tg__broadcast_shapes(op, a->ndim, a->shape, b->ndim, b->shape, &nd, shape));
    const int64_t n = tg__numel(nd, shape);
    tg_tensor *res = tg__tensor_uninit(dt, nd, shape);   /* the kernel writes all n */
    if (!res) return TG_ENOMEM;
    const void *pa = NULL, *pb = NULL;
    void *own_a = NULL, *own_b = NULL;
    rc = n == 0 ? TG_OK : int_input(a, dt, nd, shape, n, &pa, &own_a);
    if (rc == TG_OK && n > 0) rc = int_input(b, dt, nd, shape, n, &pb, &own_b);
    int_job j = {.op = k, .dt = dt, .a = pa, .b = pb, .sa = 1, .sb = 1};
    return int_finish(&j, n, rc, res, own_a, own_b, out);
}

int tg__int_scalar(const char *op, tg_tensor **out, const tg_tensor *a, int64_t s, tg_int_op k,
                   bool s_first)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out is NULL", op);
    TG_CHECK(a != NULL, TG_EINVAL, "%s: input 0 is NULL", op);
    const tg_dtype dt = a->dtype;
    const int64_t n = tg_tensor_numel(a);
    union {
        int8_t i8;
        uint8_t u8;
        int32_t i32;
        int64_t i64;
    } one;   /* s modulo 2^bits, in dt: a broadcast operand */
    tg__int_store(dt, &one, 0, s);
    tg_tensor *res = tg__tensor_uninit(dt, a->ndim, a->shape);
    if (!res) return TG_ENOMEM;
    const void *pa = NULL;
    void *own = NULL;
    int rc = n == 0 ? TG_OK : tg__ew_input(a, dt, a->ndim, a->shape, n, &pa, &own);
    int_job j = {.op = k, .dt = dt, .a = s_first ? (const void *)&one : pa,
                 .b = s_first ? pa : (const void *)&one, .sa = s_first ? 0 : 1,
                 .sb = s_first ? 1 : 0};
    return int_finish(&j, n, rc, res, own, NULL, out);
}

/* ---- scalars ---------------------------------------------------------------- */

/* Whether v is an integer in [-2^63, 2^63), a Python int's range in torch. */
static bool int64_exact(double v)
{
    return v == trunc(v) && v >= -0x1p63 && v < 0x1p63;
}

int tg__scalar_as_int(const char *op, const char *arg, tg_dtype dt, double s, int64_t *v)
{
    TG_CHECK(s == trunc(s), TG_EDTYPE,
             "%s: %s=%.17g is not an integer, and a has dtype %s: an integer tensor takes an "
             "integral scalar (a Python int to torch; torch gives f32 for a float one): "
             "convert a with tg_to_dtype first", op, arg, s, tg_dtype_name(dt));
    TG_CHECK(int64_exact(s), TG_EINVAL,
             "%s: %s=%.17g lies outside i64's range, which an integer scalar must lie in "
             "(torch: Overflow when unpacking long)", op, arg, s);
    *v = (int64_t)s;
    return TG_OK;
}

/* Whether torch converts the integer v to dtype dt without its overflow
 * error (c10's checked_convert of an int64): within dt's range, and for u8
 * also down to -255, which wraps (-2 is 254). */
static bool int_fits(tg_dtype dt, int64_t v)
{
    switch (dt) {
    case TG_I8: return v >= INT8_MIN && v <= INT8_MAX;
    case TG_U8: return v >= -UINT8_MAX && v <= UINT8_MAX;
    case TG_I32: return v >= INT32_MIN && v <= INT32_MAX;
    default: return true;
    }
}

int tg__int_in_dtype(const char *op, const char *arg, tg_dtype dt, int64_t v)
{
    TG_CHECK(int_fits(dt, v), TG_EINVAL,
             "%s: %s=%lld cannot be converted to %s without overflow, as torch's", op, arg,
             (long long)v, tg_dtype_name(dt));
    return TG_OK;
}

/* ---- clamp ------------------------------------------------------------------ */

typedef struct clamp_job {
    tg_dtype dt;
    bool has_lo, has_hi;
    uint64_t lo, hi;   /* each modulo 2^bits, in dt (the first bytes) */
    void *y;           /* a contiguous copy of the input, clamped in place */
} clamp_job;

#define INT_CLAMP(T)                                                          \
    do {                                                                      \
        T *y = j->y, l, h;                                                    \
        memcpy(&l, &j->lo, sizeof l);                                         \
        memcpy(&h, &j->hi, sizeof h);                                         \
        if (j->has_lo)                                                        \
            for (int64_t k = lo; k < hi; k++) y[k] = y[k] < l ? l : y[k];     \
        if (j->has_hi)                                                        \
            for (int64_t k = lo; k < hi; k++) y[k] = y[k] > h ? h : y[k];     \
    } while (0)

static void clamp_range(void *p, int64_t lo, int64_t hi)
{
    const clamp_job *j = p;
    switch (j->dt) {
    case TG_I8: INT_CLAMP(int8_t); break;
    case TG_U8: INT_CLAMP(uint8_t); break;
    case TG_I32: INT_CLAMP(int32_t); break;
    default: INT_CLAMP(int64_t); break;
    }
}

int tg__int_clamp(tg_tensor **out, const tg_tensor *a, bool has_lo, int64_t lo, bool has_hi,
                  int64_t hi)
{
    tg_tensor *y = NULL;
    TG_TRY(tg_tensor_clone(&y, (tg_tensor *)a));
    clamp_job j = {.dt = a->dtype, .has_lo = has_lo, .has_hi = has_hi,
                   .y = tg_tensor_data(y)};
    tg__int_store(j.dt, &j.lo, 0, lo);
    tg__int_store(j.dt, &j.hi, 0, hi);
    const int64_t n = tg_tensor_numel(y);
    if (n > 0) tg__parallel_range(n, n > 32768, clamp_range, &j);
    *out = y;
    return TG_OK;
}
