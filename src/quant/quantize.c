/* src/quant/quantize.c - per-tensor affine and per-channel symmetric
 * quantization and dequantization, and the fixed-point requantization
 * multiplier shared by the quantized ops. */
#include <fenv.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "quant/quant_internal.h"

int tg__q_check_affine(const char *op, tg_dtype qdt, double scale, int32_t zero_point)
{
    TG_CHECK(qdt == TG_U8 || qdt == TG_I8, TG_EDTYPE, "%s: quantized dtype must be u8 or i8, got %s",
             op, tg_dtype_name(qdt));
    TG_CHECK(isfinite(scale) && scale > 0, TG_EINVAL, "%s: scale=%g must be finite and > 0", op,
             scale);
    TG_CHECK(zero_point >= tg__q_min(qdt) && zero_point <= tg__q_max(qdt), TG_EINVAL,
             "%s: zero_point=%d must lie in %s's range [%d, %d]", op, (int)zero_point,
             tg_dtype_name(qdt), (int)tg__q_min(qdt), (int)tg__q_max(qdt));
    return TG_OK;
}

/* Which scale element i of a row-major tensor uses:
 *   per tensor (n == 1):  0
 *   along an axis:        (i / inner) % n, inner = elements after the axis
 *   ConvTranspose weight (C_in, cog, K...) with groups (cig = C_in/groups > 0):
 *                         the output channel g*cog + j of i = (ci, j, k) is
 *                         (ci / cig) * cog + j, ci = i / (cog*inner), j = (i/inner) % cog. */
typedef struct chan_map {
    int64_t n, inner, cig;   /* cig > 0 selects the ConvTranspose rule (n = cog) */
} chan_map;

static inline int64_t channel_of(int64_t i, const chan_map *m)
{
    if (m->n == 1 && m->cig == 0) return 0;
    const int64_t j = (i / m->inner) % m->n;
    if (m->cig == 0) return j;
    return (i / (m->inner * m->n)) / m->cig * m->n + j;
}

/* q = clamp(rint(v / scale) + zp) (nearest-even; NaN gives zp). */
static inline int32_t quantize_one(double v, double scale, int32_t zp, int32_t lo, int32_t hi)
{
    const double r = rint(v / scale) + zp;
    return isnan(r) ? zp : r < lo ? lo : r > hi ? hi : (int32_t)r;
}

/* One thread's share of a per-tensor quantization of contiguous f32, or
 * of a dequantization of contiguous u8 / i8, on the SIMD of the int8
 * kernel in use (VNNI, AMX: AVX-512; AVX2; portable: none). */
typedef struct quant_run {
    const float *x;
    uint8_t *y;
    const uint8_t *qx;
    float *qy;
    double scale;
    int32_t zp, lo, hi;
    tg_int8_kernel kern;
} quant_run;

static void quant_range(void *p, int64_t lo, int64_t hi)
{
    const quant_run *q = p;
    if (q->kern >= TG_INT8_KERNEL_VNNI)
        tg__q_quantize_avx512(q->y + lo, q->x + lo, hi - lo, q->scale, q->zp, q->lo, q->hi);
    else if (q->kern == TG_INT8_KERNEL_AVX2)
        tg__q_quantize_avx2(q->y + lo, q->x + lo, hi - lo, q->scale, q->zp, q->lo, q->hi);
    else
        for (int64_t i = lo; i < hi; i++)
            q->y[i] = (uint8_t)quantize_one((double)q->x[i], q->scale, q->zp, q->lo, q->hi);
}

static void dequant_range(void *p, int64_t lo, int64_t hi)
{
    const quant_run *q = p;
    const bool sg = q->lo < 0;   /* i8 */
    if (q->kern >= TG_INT8_KERNEL_AVX2) {
        tg__q_dequantize_avx2(q->qy + lo, q->qx + lo, hi - lo, sg, q->scale, q->zp);
        return;
    }
    for (int64_t i = lo; i < hi; i++) {
        const int32_t v = sg ? (int8_t)q->qx[i] : q->qx[i];
        q->qy[i] = (float)(q->scale * (double)(v - q->zp));
    }
}

/* ---- quantize after dequantize ----
 * A quantized model's layers meet at f32 tensors: one layer's output
 * dequantized, the next one's input quantized, with the same parameters
 * (both observed on that tensor).  That round trip gives back the bytes it
 * started from: with scale in [2^-125, 2^119] every (float)(s * (q - zp))
 * is a normal f32 within 2^-24 (relative) of s * (q - zp), so x / s lies
 * within 255 * 2^-23 of the integer q - zp and rounds to it (to nearest;
 * under another rounding mode it may not, so the bytes are recomputed
 * then).  So tg_dequantize notes its source on its output's storage, and
 * tg_quantize with the same parameters copies the source's bytes while
 * neither storage has been written since. */
static void note_dequantized(tg_tensor *y, const tg_tensor *q, double scale, int32_t zp)
{
    if (!(scale >= 0x1p-125 && scale <= 0x1p119) || y->offset != 0) return;
    tg_storage *s = y->storage;
    s->deq_of = tg__storage_retain(q->storage);
    s->deq_offset = q->offset;
    s->deq_version = q->storage->version;
    s->deq_handed = atomic_load(&q->storage->handed);
    s->deq_scale = scale;
    s->deq_zp = zp;
    s->deq_dtype = q->dtype;
}

/* The bytes x was dequantized from with (qdt, scale, zp), copied into a new
 * tensor of x's shape; NULL when x is not such a tensor any more. */
static tg_tensor *requantized_copy(const tg_tensor *x, tg_dtype qdt, double scale, int32_t zp)
{
    const tg_storage *s = x->storage;
    if (!s->deq_of || s->deq_dtype != (int)qdt || s->deq_scale != scale || s->deq_zp != zp ||
        s->version != 0 || atomic_load(&s->handed) != 0 ||
        s->deq_of->version != s->deq_version ||
        atomic_load(&s->deq_of->handed) != s->deq_handed || fegetround() != FE_TONEAREST)
        return NULL;
    tg_tensor *q = tg__tensor_uninit(qdt, x->ndim, x->shape);
    if (q)
        memcpy(q->storage->data, (const uint8_t *)s->deq_of->data + s->deq_offset + x->offset,
               (size_t)tg_tensor_numel(x));
    return q;
}

/* Quantizes x with scales[channel] and zero point zp.  A contiguous f32 x
 * (every activation a quantized module sees) is read in place; anything
 * else is gathered to f64 first.  Both give the same integers (f32 -> f64
 * is exact). */
static int quantize_impl(tg_tensor **out, const tg_tensor *x, tg_dtype qdt, const double *scales,
                         const chan_map *map, int32_t zp)
{
    const int64_t numel = tg_tensor_numel(x);
    const bool direct = x->dtype == TG_F32 && tg_tensor_is_contiguous(x);
    const bool one = map->n == 1 && map->cig == 0;
    if (direct && one) {
        tg_tensor *q = requantized_copy(x, qdt, scales[0], zp);
        if (q) {
            *out = q;
            return TG_OK;
        }
    }
    double *v = direct ? NULL : tg__malloc((size_t)(numel ? numel : 1) * sizeof *v);
    if (!direct && !v) return TG_ENOMEM;
    tg_tensor *q = tg__tensor_uninit(qdt, x->ndim, x->shape);   /* every element written */
    if (!q) {
        free(v);
        return TG_ENOMEM;
    }
    const float *xf = direct ? (const float *)x->storage->data + x->offset : NULL;
    if (!direct) tg__gather(x, TG_F64, v);
    const int32_t lo = tg__q_min(qdt), hi = tg__q_max(qdt);
    void *dst = q->storage->data;
    if (direct && one) {   /* every activation a quantized module sees */
        quant_run run = {.x = xf, .y = dst, .scale = scales[0], .zp = zp, .lo = lo, .hi = hi,
                         .kern = tg_int8_kernel_get()};
        tg__parallel_range(numel, numel >= 65536, quant_range, &run);
        *out = q;
        return TG_OK;
    }
    for (int64_t i = 0; i < numel; i++) {
        const double s = one ? scales[0] : scales[channel_of(i, map)];
        tg__q_store(dst, qdt, i, quantize_one(direct ? (double)xf[i] : v[i], s, zp, lo, hi));
    }
    free(v);
    *out = q;
    return TG_OK;
}

int tg_quantize(tg_tensor **out, tg_tensor *x, tg_dtype qdt, double scale, int32_t zero_point)
{
    TG_CHECK(out, TG_EINVAL, "quantize: out must not be NULL");
    TG_TRY(tg__q_check_float("quantize", x));
    TG_TRY(tg__q_check_affine("quantize", qdt, scale, zero_point));
    const chan_map m = {.n = 1, .inner = 1};
    return quantize_impl(out, x, qdt, &scale, &m, zero_point);
}

int tg_quantize_per_channel(tg_tensor **out, tg_tensor *x, int axis, int64_t n,
                            const double *scales)
{
    TG_CHECK(out, TG_EINVAL, "quantize_per_channel: out must not be NULL");
    TG_TRY(tg__q_check_float("quantize_per_channel", x));
    TG_TRY(tg__q_check_channels("quantize_per_channel", x, &axis, n, scales));
    const chan_map m = {.n = n, .inner = tg__q_inner_size(x, axis)};
    return quantize_impl(out, x, TG_I8, scales, &m, 0);
}

static int dequantize_impl(tg_tensor **out, const tg_tensor *q, const double *scales,
                           const chan_map *map, int32_t zp)
{
    const int64_t numel = tg_tensor_numel(q);
    const bool one = map->n == 1 && map->cig == 0;
    if (tg_tensor_is_contiguous(q) && one) {   /* every activation */
        tg_tensor *y = tg__tensor_uninit(TG_F32, q->ndim, q->shape);   /* written whole */
        if (!y) return TG_ENOMEM;
        quant_run run = {.qx = (const uint8_t *)q->storage->data + q->offset,
                         .qy = y->storage->data, .scale = scales[0], .zp = zp,
                         .lo = q->dtype == TG_I8 ? -128 : 0, .kern = tg_int8_kernel_get()};
        tg__parallel_range(numel, numel >= 65536, dequant_range, &run);
        note_dequantized(y, q, scales[0], zp);
        *out = y;
        return TG_OK;
    }
    int32_t *v = tg__malloc((size_t)(numel ? numel : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg_tensor *y = tg__tensor_empty(TG_F32, q->ndim, q->shape);
    if (!y) {
        free(v);
        return TG_ENOMEM;
    }
    if (tg_tensor_is_contiguous(q) && q->dtype == TG_U8)   /* no per-element dtype dispatch */
        for (int64_t i = 0; i < numel; i++) v[i] = ((const uint8_t *)q->storage->data)[q->offset + i];
    else if (tg_tensor_is_contiguous(q) && q->dtype == TG_I8)
        for (int64_t i = 0; i < numel; i++) v[i] = ((const int8_t *)q->storage->data)[q->offset + i];
    else
        tg__gather(q, TG_I32, v);
    float *dst = y->storage->data;
    for (int64_t i = 0; i < numel; i++)
        dst[i] = (float)((one ? scales[0] : scales[channel_of(i, map)]) * (double)(v[i] - zp));
    free(v);
    *out = y;
    return TG_OK;
}

int tg_dequantize(tg_tensor **out, tg_tensor *q, double scale, int32_t zero_point)
{
    TG_CHECK(out && q, TG_EINVAL, "dequantize: out and q must not be NULL");
    TG_TRY(tg__q_check_affine("dequantize", q->dtype, scale, zero_point));
    const chan_map m = {.n = 1, .inner = 1};
    return dequantize_impl(out, q, &scale, &m, zero_point);
}

int tg_dequantize_per_channel(tg_tensor **out, tg_tensor *q, int axis, int64_t n,
                              const double *scales)
{
    TG_CHECK(out && q, TG_EINVAL, "dequantize_per_channel: out and q must not be NULL");
    TG_CHECK(q->dtype == TG_I8, TG_EDTYPE, "dequantize_per_channel: q must be i8, got %s",
             tg_dtype_name(q->dtype));
    TG_TRY(tg__q_check_channels("dequantize_per_channel", q, &axis, n, scales));
    const chan_map m = {.n = n, .inner = tg__q_inner_size(q, axis)};
    return dequantize_impl(out, q, scales, &m, 0);
}

/* ---- conv weights: one scale per OUTPUT channel ---- */

/* The channel map of a conv (axis 0) or conv_transpose (axis 1, per group)
 * weight with n scales; checks shapes. */
static int weight_map(const char *op, const tg_tensor *w, bool transpose, int64_t groups,
                      int64_t n, const double *scales, chan_map *m)
{
    TG_CHECK(w->ndim >= 2, TG_ESHAPE, "%s: weight must have >= 2 dims, got %d", op, w->ndim);
    TG_CHECK(groups >= 1 && (!transpose || w->shape[0] % groups == 0), TG_EINVAL,
             "%s: groups=%lld must be >= 1 and divide weight.shape[0]=%lld", op,
             (long long)groups, (long long)w->shape[0]);
    const int64_t c_out = transpose ? w->shape[1] * groups : w->shape[0];
    TG_CHECK(n == 1 || n == c_out, TG_ESHAPE, "%s: n=%lld scales must be 1 or C_out=%lld", op,
             (long long)n, (long long)c_out);
    TG_CHECK(scales, TG_EINVAL, "%s: scales must not be NULL", op);
    for (int64_t c = 0; c < n; c++)
        TG_CHECK(isfinite(scales[c]) && scales[c] > 0, TG_EINVAL,
                 "%s: scales[%lld]=%g must be finite and > 0", op, (long long)c, scales[c]);
    *m = (chan_map){.n = 1, .inner = 1};
    if (n == 1) return TG_OK;
    if (!transpose) *m = (chan_map){.n = n, .inner = tg__q_inner_size(w, 0)};
    else *m = (chan_map){.n = w->shape[1], .inner = tg__q_inner_size(w, 1), .cig = w->shape[0] / groups};
    return TG_OK;
}

int tg_quantize_conv_weight(tg_tensor **out, tg_tensor *w, bool transpose, int64_t groups,
                            int64_t n, const double *scales)
{
    TG_CHECK(out, TG_EINVAL, "quantize_conv_weight: out must not be NULL");
    TG_TRY(tg__q_check_float("quantize_conv_weight", w));
    chan_map m;
    TG_TRY(weight_map("quantize_conv_weight", w, transpose, groups, n, scales, &m));
    return quantize_impl(out, w, TG_I8, scales, &m, 0);
}

int tg_dequantize_conv_weight(tg_tensor **out, tg_tensor *q, bool transpose, int64_t groups,
                              int64_t n, const double *scales)
{
    TG_CHECK(out && q, TG_EINVAL, "dequantize_conv_weight: out and q must not be NULL");
    TG_CHECK(q->dtype == TG_I8, TG_EDTYPE, "dequantize_conv_weight: q must be i8, got %s",
             tg_dtype_name(q->dtype));
    chan_map m;
    TG_TRY(weight_map("dequantize_conv_weight", q, transpose, groups, n, scales, &m));
    return dequantize_impl(out, q, scales, &m, 0);
}

/* ---- fixed-point requantization ---- */

/* m = f * 2^e with f in [0.5, 1) (frexp), so m = (f * 2^31) * 2^-(31 - e):
 * m0 = round(f * 2^31) in [2^30, 2^31] and shift = 31 - e.  Rounding can give
 * exactly 2^31, which is halved (shift - 1).  A shift above 62 would overflow
 * the 64-bit rounding step, so m0 drops the extra low bits instead. */
int tg_quant_multiplier(double m, int32_t *m0, int *shift)
{
    TG_CHECK(m0 && shift, TG_EINVAL, "quant_multiplier: m0 and shift must not be NULL");
    TG_CHECK(isfinite(m) && m > 0 && m < 0x1p30, TG_EINVAL,
             "quant_multiplier: multiplier %g must be finite and in (0, 2^30)", m);
    int e;
    double f = frexp(m, &e);
    int64_t q = (int64_t)llrint(f * 0x1p31);
    int s = 31 - e;
    if (q == (INT64_C(1) << 31)) {
        q >>= 1;
        s--;
    }
    if (s > 62) {
        int extra = s - 62;
        q = extra >= 62 ? 0 : tg_quant_requantize(q, 1, extra);
        s = 62;
    }
    TG_CHECK(q > 0 || s == 62, TG_EINVAL, "quant_multiplier: %g is too small", m);
    *m0 = (int32_t)q;
    *shift = s;
    return TG_OK;
}

/* Floor division by 2^shift, then round half to even on the remainder. */
int64_t tg_quant_requantize(int64_t acc, int32_t m0, int shift)
{
    /* Outside the documented domain the result is still defined: shift is
     * clamped to [0, 62] and acc * m0 saturates. */
    int64_t v;
    if (__builtin_mul_overflow(acc, (int64_t)m0, &v)) v = (acc < 0) != (m0 < 0) ? INT64_MIN : INT64_MAX;
    return tg__q_round_shift(v, shift < 0 ? 0 : shift > 62 ? 62 : shift);
}
