/* Element access and strided copies: get/set, fill, to_doubles and the
 * gather/scatter kernels every op uses to move between a strided view and a
 * contiguous buffer (converting dtype on the way). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"

/* ---- one run of n elements ------------------------------------------------ */

/* Strided half <-> f32/f64 runs go through the bulk kernels block by block:
 * a strided side is first packed into (or unpacked from) a small stack
 * buffer.  Steps may be 0 or negative; s and d point at the run's first
 * element. */
enum { TG__RUN_BLOCK = 256 };

/* n contiguous elements converted by the bulk kernels (src/core/dtype.c,
 * with the bits of tg_dtype_load and tg_dtype_store): to_half converts
 * `wide` (TG_F32 or TG_F64) -> `half` (TG_F16 or TG_BF16), else the
 * reverse. */
static void tg__half_bulk(bool to_half, tg_dtype wide, tg_dtype half, const void *s, void *d,
                          int64_t n)
{
    if (wide == TG_F32) {
        if (to_half) tg__f32_to_half_n(half, s, d, n, true);
        else tg__half_to_f32_n(half, s, d, n, true);
    } else {
        if (to_half) tg__f64_to_half_n(half, s, d, n);
        else tg__half_to_f64_n(half, s, d, n);
    }
}

/* One half <-> wide run, as tg__half_bulk.  Elements are moved as bytes
 * (4 for f32, 8 for f64, 2 for half). */
static void tg__half_run(bool to_half, tg_dtype wide, tg_dtype half, const void *s, int64_t ss,
                         void *d, int64_t ds, int64_t n)
{
    if (ss == 1 && ds == 1) {   /* contiguous: one bulk call (parallel when long, f32) */
        tg__half_bulk(to_half, wide, half, s, d, n);
        return;
    }
    const size_t wsz = tg_dtype_size(wide), szs = to_half ? wsz : 2, szd = to_half ? 2 : wsz;
    _Alignas(32) unsigned char sb[TG__RUN_BLOCK * 8], db[TG__RUN_BLOCK * 8];
    for (int64_t k0 = 0; k0 < n; k0 += TG__RUN_BLOCK) {
        const int64_t m = n - k0 < TG__RUN_BLOCK ? n - k0 : TG__RUN_BLOCK;
        const unsigned char *ps = (const unsigned char *)s + k0 * ss * (int64_t)szs;
        unsigned char *pd = ds == 1 ? (unsigned char *)d + k0 * (int64_t)szd : db;
        if (ss != 1) {   /* pack the strided source */
            for (int64_t k = 0; k < m; k++)
                memcpy(sb + k * (int64_t)szs, ps + k * ss * (int64_t)szs, szs);
            ps = sb;
        }
        tg__half_bulk(to_half, wide, half, ps, pd, m);
        if (ds != 1)     /* unpack into the strided destination */
            for (int64_t k = 0; k < m; k++)
                memcpy((unsigned char *)d + (k0 + k) * ds * (int64_t)szd, db + k * (int64_t)szd,
                       szd);
    }
}

/* Copies n elements from src (dtype from, element index si, step ss) to dst
 * (dtype to, index di, step ds).  Indices and steps count elements of each
 * buffer's own dtype; steps may be 0 or negative. */
static void tg__copy_run(tg_dtype from, const void *src, int64_t si, int64_t ss, tg_dtype to,
                         void *dst, int64_t di, int64_t ds, int64_t n)
{
    if (from == to) {
        size_t sz = tg_dtype_size(from);
        const char *s = (const char *)src;
        char *d = (char *)dst;
        if (ss == 1 && ds == 1) {
            memmove(d + di * (int64_t)sz, s + si * (int64_t)sz, (size_t)n * sz);
            return;
        }
        /* One element repeated into a contiguous run (a broadcast gradient
         * made whole): a fill that the compiler vectorizes. */
#define TG__FILL(T)                                                           \
    do {                                                                      \
        const T v_ = ((const T *)src)[si];                                    \
        T *d_ = (T *)dst + di;                                                \
        for (int64_t k = 0; k < n; k++) d_[k] = v_;                           \
        return;                                                               \
    } while (0)
        if (ss == 0 && ds == 1) {
            if (sz == 4) TG__FILL(uint32_t);
            if (sz == 8) TG__FILL(uint64_t);
            if (sz == 2) TG__FILL(uint16_t);
        }
#undef TG__FILL
        /* Word-sized element moves (storage is aligned to its element size). */
#define TG__MOVE(T)                                                           \
    for (int64_t k = 0; k < n; k++) ((T *)dst)[di + k * ds] = ((const T *)src)[si + k * ss]; \
    return
        switch (sz) {
        case 1: TG__MOVE(uint8_t);
        case 2: TG__MOVE(uint16_t);
        case 4: TG__MOVE(uint32_t);
        case 8: TG__MOVE(uint64_t);
        default: TG_ASSERT(!"tg__copy_run: unexpected element size");
        }
#undef TG__MOVE
    }
    /* The exact widenings (to f64, an integer to i64) and f64 -> f32 as C
     * casts, which give what tg_dtype_load then tg_dtype_store gives. */
#define TG__CAST_RUN(TF, TT)                                                   \
    for (int64_t k = 0; k < n; k++) ((TT *)dst)[di + k * ds] = (TT)((const TF *)src)[si + k * ss]; \
    return
    if (to == TG_F64) {
        switch (from) {
        case TG_F32: TG__CAST_RUN(float, double);
        case TG_I8: TG__CAST_RUN(int8_t, double);
        case TG_U8: TG__CAST_RUN(uint8_t, double);
        case TG_I32: TG__CAST_RUN(int32_t, double);
        case TG_I64: TG__CAST_RUN(int64_t, double);
        default: break;
        }
    }
    if (to == TG_I64) {
        switch (from) {
        case TG_I8: TG__CAST_RUN(int8_t, int64_t);
        case TG_U8: TG__CAST_RUN(uint8_t, int64_t);
        case TG_I32: TG__CAST_RUN(int32_t, int64_t);
        default: break;
        }
    }
    if (from == TG_F64 && to == TG_F32) {
        TG__CAST_RUN(double, float);
    }
#undef TG__CAST_RUN
    const bool wide_from = from == TG_F32 || from == TG_F64, wide_to = to == TG_F32 || to == TG_F64;
    if (wide_from && tg__dtype_is_half(to)) {
        tg__half_run(true, from, to, (const char *)src + si * (int64_t)tg_dtype_size(from), ss,
                     (uint16_t *)dst + di, ds, n);
        return;
    }
    if (tg__dtype_is_half(from) && wide_to) {
        tg__half_run(false, to, from, (const uint16_t *)src + si, ss,
                     (char *)dst + di * (int64_t)tg_dtype_size(to), ds, n);
        return;
    }
    /* An i64 goes to f32 in one rounding, as C's and torch's cast: through
     * double, 2^60 + 2^36 + 1 would round to the tie 2^60 + 2^36 and then to
     * 2^60, not to the nearest f32, 2^60 + 2^37. */
    if (from == TG_I64 && to == TG_F32) {
        for (int64_t k = 0; k < n; k++)
            ((float *)dst)[di + k * ds] = (float)((const int64_t *)src)[si + k * ss];
        return;
    }
    /* An integer goes to f16/bf16 through f32, as torch's cast (c10's half
     * types are made from a float): in bf16, 2^24 + 2^16 + 1 rounds to the
     * f32 tie 2^24 + 2^16 and then to 2^24, where one rounding gives
     * 2^24 + 2^17. */
    if (!tg_dtype_get_traits(from)->is_float && tg__dtype_is_half(to)) {
        for (int64_t k = 0; k < n; k++) {
            const float f = from == TG_I64 ? (float)((const int64_t *)src)[si + k * ss]
                                           : (float)tg_dtype_load(from, src, si + k * ss);
            tg_dtype_store(to, dst, di + k * ds, f);
        }
        return;
    }
    for (int64_t k = 0; k < n; k++)
        tg_dtype_store(to, dst, di + k * ds, tg_dtype_load(from, src, si + k * ss));
}

/* ---- strided <-> contiguous ------------------------------------------------ */

/* Moves every element of t, in row-major order, between t's storage and a
 * buffer `buf` of dtype bt whose k-th logical element sits at k * bstep
 * (bstep 1: contiguous; 0: one repeated element).  to_buf picks the
 * direction. */
static void tg__strided_move(const tg_tensor *t, tg_dtype bt, void *buf, int64_t bstep, bool to_buf)
{
    int64_t n = tg__numel(t->ndim, t->shape);
    if (n == 0) return;
    void *data = t->storage->data;
    if (tg_tensor_is_contiguous(t) || t->ndim == 0) {
        if (to_buf) tg__copy_run(t->dtype, data, t->offset, 1, bt, buf, 0, bstep, n);
        else tg__copy_run(bt, buf, 0, bstep, t->dtype, data, t->offset, 1, n);
        return;
    }
    /* Row by row along the last dim; a multi-index counter over the outer
     * dims tracks pos = offset + sum_d idx[d] * strides[d]. */
    int nd = t->ndim;
    int64_t inner = t->shape[nd - 1], istep = t->strides[nd - 1];
    int64_t idx[TG_MAX_DIMS] = {0};
    int64_t pos = t->offset;
    for (int64_t row = 0; row < n / inner; row++) {
        int64_t k = row * inner * bstep;
        if (to_buf) tg__copy_run(t->dtype, data, pos, istep, bt, buf, k, bstep, inner);
        else tg__copy_run(bt, buf, k, bstep, t->dtype, data, pos, istep, inner);
        for (int d = nd - 2; d >= 0; d--) {
            pos += t->strides[d];
            if (++idx[d] < t->shape[d]) break;
            pos -= t->strides[d] * t->shape[d];
            idx[d] = 0;
        }
    }
}

void tg__convert_n(tg_dtype from, const void *src, tg_dtype to, void *dst, int64_t n)
{
    if (n > 0) tg__copy_run(from, src, 0, 1, to, dst, 0, 1, n);
}

void tg__gather(const tg_tensor *t, tg_dtype to, void *dst)
{
    tg__strided_move(t, to, dst, 1, true);
}

void tg__scatter(tg_tensor *t, tg_dtype from, const void *src)
{
    tg__strided_move(t, from, (void *)src, 1, false);
}

/* ---- element access ---------------------------------------------------------- */

/* Storage element index of the multi-index idx, after bounds checks. */
static int tg__elem_index(const char *what, const tg_tensor *t, const int64_t *idx, int64_t *pos)
{
    TG_CHECK(t->ndim == 0 || idx != NULL, TG_EINVAL, "%s: idx must not be NULL", what);
    int64_t p = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        TG_CHECK(idx[d] >= 0 && idx[d] < t->shape[d], TG_EINVAL,
                 "%s: idx[%d]=%lld out of range for dim %d of extent %lld", what, d,
                 (long long)idx[d], d, (long long)t->shape[d]);
        p += idx[d] * t->strides[d];
    }
    *pos = p;
    return TG_OK;
}

int64_t tg__flat_pos(const tg_tensor *t, int64_t i)
{
    int64_t p = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        p += (i % t->shape[d]) * t->strides[d];
        i /= t->shape[d];
    }
    return p;
}

/* Storage element index of row-major flat index i, after the bounds check. */
static int tg__flat_index(const char *what, const tg_tensor *t, int64_t i, int64_t *pos)
{
    int64_t n = tg__numel(t->ndim, t->shape);
    TG_CHECK(i >= 0 && i < n, TG_EINVAL, "%s: i=%lld out of range for numel %lld", what,
             (long long)i, (long long)n);
    *pos = tg__flat_pos(t, i);
    return TG_OK;
}

int tg_tensor_get(const tg_tensor *t, const int64_t *idx, double *out)
{
    TG_CHECK(t != NULL && out != NULL, TG_EINVAL, "tensor_get: t and out must not be NULL");
    TG_TRY(tg__refuse_sparse("tensor_get", "t", t));
    int64_t pos = 0;
    TG_TRY(tg__elem_index("tensor_get", t, idx, &pos));
    *out = tg_dtype_load(t->dtype, t->storage->data, pos);
    return TG_OK;
}

int tg_tensor_set(tg_tensor *t, const int64_t *idx, double v)
{
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_set: t must not be NULL");
    TG_TRY(tg__refuse_sparse("tensor_set", "t", t));
    int64_t pos = 0;
    TG_TRY(tg__elem_index("tensor_set", t, idx, &pos));
    TG_TRY(tg__check_value("tensor_set", t->dtype, v));
    tg_dtype_store(t->dtype, t->storage->data, pos, v);
    tg__bump_version(t);
    return TG_OK;
}

int tg_tensor_get_flat(const tg_tensor *t, int64_t i, double *out)
{
    TG_CHECK(t != NULL && out != NULL, TG_EINVAL, "tensor_get_flat: t and out must not be NULL");
    TG_TRY(tg__refuse_sparse("tensor_get_flat", "t", t));
    int64_t pos = 0;
    TG_TRY(tg__flat_index("tensor_get_flat", t, i, &pos));
    *out = tg_dtype_load(t->dtype, t->storage->data, pos);
    return TG_OK;
}

double tg_tensor_item(const tg_tensor *t)
{
    if (!t) {
        tg__error(TG_EINVAL, "tensor_item: t must not be NULL");
        return NAN;
    }
    if (tg__refuse_sparse("tensor_item", "t", t) < 0) return NAN;
    int64_t n = tg__numel(t->ndim, t->shape);
    if (n != 1) {
        tg__error(TG_EINVAL, "tensor_item: t has %lld elements; item needs exactly one",
                  (long long)n);
        return NAN;
    }
    return tg_dtype_load(t->dtype, t->storage->data, t->offset);
}

int tg_tensor_set_flat(tg_tensor *t, int64_t i, double v)
{
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_set_flat: t must not be NULL");
    TG_TRY(tg__refuse_sparse("tensor_set_flat", "t", t));
    int64_t pos = 0;
    TG_TRY(tg__flat_index("tensor_set_flat", t, i, &pos));
    TG_TRY(tg__check_value("tensor_set_flat", t->dtype, v));
    tg_dtype_store(t->dtype, t->storage->data, pos, v);
    tg__bump_version(t);
    return TG_OK;
}

int tg__set_flat_rounded(tg_tensor *t, int64_t i, double v)
{
    int64_t pos = 0;
    TG_TRY(tg__refuse_sparse("tensor_set_flat", "t", t));
    TG_TRY(tg__flat_index("tensor_set_flat", t, i, &pos));
    tg_dtype_store(t->dtype, t->storage->data, pos, v);
    tg__bump_version(t);
    return TG_OK;
}

int tg_tensor_to_doubles(const tg_tensor *t, double *dst, int64_t n)
{
    TG_CHECK(t != NULL && dst != NULL, TG_EINVAL, "tensor_to_doubles: t and dst must not be NULL");
    TG_TRY(tg__refuse_sparse("tensor_to_doubles", "t", t));
    int64_t numel = tg__numel(t->ndim, t->shape);
    TG_CHECK(n == numel, TG_EINVAL, "tensor_to_doubles: n=%lld must equal numel=%lld",
             (long long)n, (long long)numel);
    tg__gather(t, TG_F64, dst);
    return TG_OK;
}

double tg__dtype_finite_max(tg_dtype dt)
{
    switch (dt) {
    case TG_F64: return DBL_MAX;
    case TG_F32: return FLT_MAX;
    case TG_F16: return 65504.0;
    case TG_BF16: return 0x1.fep127;
    default: return 0.0;
    }
}

int tg__check_value(const char *what, tg_dtype dt, double v)
{
    double lo, hi;
    switch (dt) {
    case TG_F32:
    case TG_F16:
    case TG_BF16: hi = tg__dtype_finite_max(dt), lo = -hi; break;
    case TG_I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case TG_U8: lo = 0, hi = UINT8_MAX; break;
    case TG_I32: lo = INT32_MIN, hi = INT32_MAX; break;
    case TG_I64: lo = -0x1p63, hi = 0x1.fffffffffffffp62; break;   /* the double below 2^63 */
    default: return TG_OK;   /* f64 holds every double */
    }
    if (tg_dtype_is_float(dt) && !isfinite(v)) return TG_OK;   /* NaN, +-inf */
    TG_CHECK(v >= lo && v <= hi, TG_EINVAL,
             "%s: value %.17g cannot be converted to %s without overflow (range [%.17g, %.17g])",
             what, v, tg_dtype_name(dt), lo, hi);
    return TG_OK;
}

int tg_tensor_fill(tg_tensor *t, double v)
{
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_fill: t must not be NULL");
    TG_TRY(tg__refuse_sparse("tensor_fill", "t", t));
    TG_TRY(tg__check_value("tensor_fill", t->dtype, v));
    /* Convert once, then repeat that element (buffer step 0) over the view. */
    _Alignas(8) unsigned char elem[8];
    tg_dtype_store(t->dtype, elem, 0, v);
    tg__strided_move(t, t->dtype, elem, 0, false);
    tg__bump_version(t);
    return TG_OK;
}
