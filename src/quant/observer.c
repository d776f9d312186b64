/* src/quant/observer.c - min-max, moving-average min-max and per-channel
 * min-max observers with PyTorch's qparams formulas (see quant.h).  NaN in
 * an update is refused (and an infinity for the moving average). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "quant/quant_internal.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

int tg_observer_init(tg_observer *obs, tg_observer_kind kind, tg_dtype dtype, bool symmetric,
                     int axis)
{
    TG_CHECK(obs, TG_EINVAL, "observer_init: obs must not be NULL");
    TG_CHECK(kind >= TG_OBSERVER_MINMAX && kind <= TG_OBSERVER_PER_CHANNEL, TG_EINVAL,
             "observer_init: kind=%d is not a tg_observer_kind", (int)kind);
    TG_CHECK(dtype == TG_U8 || dtype == TG_I8, TG_EDTYPE,
             "observer_init: dtype must be u8 or i8, got %s", tg_dtype_name(dtype));
    *obs = (tg_observer){.kind = kind, .dtype = dtype, .symmetric = symmetric,
                         .quant_min = tg__q_min(dtype), .quant_max = tg__q_max(dtype),
                         .averaging_constant = 0.01, .axis = axis, .n = 1};
    return TG_OK;
}

void tg_observer_free(tg_observer *obs)
{
    if (!obs) return;
    free(obs->min);
    free(obs->max);
    obs->min = obs->max = NULL;
}

/* *lo = min(*lo, run[0..len)), *hi = max(*hi, ...) over the values that
 * are not NaN; true if one is NaN.  On x86, in SSE registers (part of
 * x86-64 itself): two vectors of minima and of maxima, not one chain of
 * dependent compares (the compiler does not vectorize a float min without
 * -ffinite-math-only). */
static bool run_minmax(const float *run, int64_t len, float *lo, float *hi)
{
    float mn = *lo, mx = *hi;
    bool nan = false;
    int64_t j = 0;
#if defined(__x86_64__)
    if (len >= 8) {
        __m128 mn0 = _mm_set1_ps(mn), mn1 = mn0, mx0 = _mm_set1_ps(mx), mx1 = mx0;
        __m128 un = _mm_setzero_ps();   /* lanes that met a NaN */
        for (; j + 8 <= len; j += 8) {
            const __m128 a = _mm_loadu_ps(run + j), b = _mm_loadu_ps(run + j + 4);
            mn0 = _mm_min_ps(a, mn0), mn1 = _mm_min_ps(b, mn1);   /* a NaN: the old */
            mx0 = _mm_max_ps(a, mx0), mx1 = _mm_max_ps(b, mx1);
            un = _mm_or_ps(un, _mm_cmpunord_ps(a, b));
        }
        nan = _mm_movemask_ps(un) != 0;
        float m[4], x[4];
        _mm_storeu_ps(m, _mm_min_ps(mn0, mn1));
        _mm_storeu_ps(x, _mm_max_ps(mx0, mx1));
        for (int k = 0; k < 4; k++) {
            mn = m[k] < mn ? m[k] : mn;
            mx = x[k] > mx ? x[k] : mx;
        }
    }
#endif
    for (; j < len; j++) {
        nan |= run[j] != run[j];
        mn = run[j] < mn ? run[j] : mn;
        mx = run[j] > mx ? run[j] : mx;
    }
    *lo = mn;
    *hi = mx;
    return nan;
}

/* Per-channel min/max of v (numel values, channel c = (i / inner) % n) over
 * the values that are not NaN, in runs of inner values of one channel (no
 * division per value); true if a value is NaN. */
static bool channel_minmax(const float *v, int64_t numel, int64_t inner, int64_t n, float *lo,
                           float *hi)
{
    for (int64_t c = 0; c < n; c++) {
        lo[c] = INFINITY;
        hi[c] = -INFINITY;
    }
    if (n == 1) inner = numel;   /* one channel: one run */
    bool nan = false;
    for (int64_t base = 0; base < numel; base += n * inner)
        for (int64_t c = 0; c < n; c++)
            nan |= run_minmax(v + base + c * inner, inner, &lo[c], &hi[c]);
    return nan;
}

/* Folds one batch's (lo, hi) into the observer's state. */
static void fold(tg_observer *obs, const float *lo, const float *hi, bool first)
{
    for (int64_t c = 0; c < obs->n; c++) {
        if (first) {
            obs->min[c] = lo[c];
            obs->max[c] = hi[c];
        } else if (obs->kind == TG_OBSERVER_MOVING_AVERAGE) {
            const float k = (float)obs->averaging_constant;
            obs->min[c] = obs->min[c] + k * (lo[c] - obs->min[c]);
            obs->max[c] = obs->max[c] + k * (hi[c] - obs->max[c]);
        } else {
            obs->min[c] = fminf(obs->min[c], lo[c]);
            obs->max[c] = fmaxf(obs->max[c], hi[c]);
        }
    }
}

int tg_observer_update(tg_observer *obs, tg_tensor *x)
{
    TG_CHECK(obs && x, TG_EINVAL, "observer_update: obs and x must not be NULL");
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE,
             "observer_update: x must be a float tensor, got %s", tg_dtype_name(x->dtype));
    const int64_t numel = tg_tensor_numel(x);
    TG_CHECK(numel > 0, TG_ESHAPE, "observer_update: x must not be empty");
    int64_t n = 1, inner = 1;
    if (obs->kind == TG_OBSERVER_PER_CHANNEL) {
        int a = obs->axis < 0 ? obs->axis + x->ndim : obs->axis;
        TG_CHECK(a >= 0 && a < x->ndim, TG_EINVAL,
                 "observer_update: axis=%d is out of range for a %d-D tensor", obs->axis, x->ndim);
        n = x->shape[a];
        inner = tg__numel(x->ndim - a - 1, x->shape + a + 1);
        TG_CHECK(!obs->min || n == obs->n, TG_ESHAPE,
                 "observer_update: x has %lld channels on axis %d, the observer saw %lld",
                 (long long)n, a, (long long)obs->n);
    }
    const bool first = obs->min == NULL;
    /* a contiguous f32 x is read where it is; others through an f32 copy */
    const bool direct = x->dtype == TG_F32 && tg_tensor_is_contiguous(x);
    float *copy = direct ? NULL : tg__malloc((size_t)numel * sizeof *copy);
    const float *v = direct ? tg_tensor_cdata(x) : copy;
    float *lo = tg__malloc((size_t)n * sizeof *lo), *hi = tg__malloc((size_t)n * sizeof *hi);
    float *smin = first ? tg__malloc((size_t)n * sizeof *smin) : obs->min;
    float *smax = first ? tg__malloc((size_t)n * sizeof *smax) : obs->max;
    int rc = (v && lo && hi && smin && smax) ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) {
        if (!direct) tg__gather(x, TG_F32, copy);
        /* NaN has no place in a range, and an infinity cannot be averaged
         * (the next batch would make the average NaN); PyTorch fails later,
         * at qparams ("min nan should be less than max nan").  Refused here,
         * before the state changes, naming the first such value. */
        const bool avg = obs->kind == TG_OBSERVER_MOVING_AVERAGE;
        bool bad = channel_minmax(v, numel, inner, n, lo, hi);
        for (int64_t c = 0; avg && c < n; c++) bad |= isinf(lo[c]) || isinf(hi[c]);
        for (int64_t i = 0; bad && i < numel; i++)
            if (isnan(v[i]) || (isinf(v[i]) && avg)) {
                rc = tg__error(TG_EINVAL, "observer_update: x[%lld] is %g: calibration data "
                               "must be %s", (long long)i, (double)v[i],
                               avg ? "finite" : "free of NaN");
                break;
            }
    }
    if (rc == TG_OK) {
        obs->min = smin;
        obs->max = smax;
        obs->n = n;
        fold(obs, lo, hi, first);
    } else if (first) {
        free(smin);
        free(smax);
    }
    free(copy);
    free(lo);
    free(hi);
    return rc;
}

/* The quantization range the observer's public fields hold: as torch's
 * observers, qmin < qmax inside the dtype's range, and 0 must be in it (the
 * range the statistics are stretched to includes 0). */
static int check_range(const char *op, const tg_observer *obs)
{
    const int32_t lo = tg__q_min(obs->dtype), hi = tg__q_max(obs->dtype);
    TG_CHECK(obs->quant_min < obs->quant_max && obs->quant_min >= lo && obs->quant_max <= hi,
             TG_EINVAL, "%s: quant_min=%d, quant_max=%d must satisfy %d <= quant_min < quant_max "
             "<= %d (%s)", op, (int)obs->quant_min, (int)obs->quant_max, (int)lo, (int)hi,
             tg_dtype_name(obs->dtype));
    TG_CHECK(obs->quant_min <= 0 && obs->quant_max >= 0, TG_EINVAL,
             "%s: the range [quant_min, quant_max]=[%d, %d] must include 0", op,
             (int)obs->quant_min, (int)obs->quant_max);
    return TG_OK;
}

/* torch.ao.quantization.observer's _calculate_qparams, in f32.  An infinite
 * observed range (a min-max observer that saw an infinity) has no finite
 * scale: TG_EINVAL naming the channel, rather than an unusable scale (and a
 * zero point from rint(-inf / inf) = NaN, which no integer holds). */
static int qparams(const char *op, const tg_observer *obs, int64_t c, double *scale, int32_t *zp)
{
    const float lo = obs->min[c], hi = obs->max[c];
    const float min_neg = fminf(lo, 0.0f), max_pos = fmaxf(hi, 0.0f);
    const float qrange = (float)(obs->quant_max - obs->quant_min);
    float s;
    int32_t z = obs->dtype == TG_U8 ? 128 : 0;   /* symmetric */
    if (obs->symmetric) {
        s = fmaxf(-min_neg, max_pos) / (qrange / 2.0f);
        s = fmaxf(s, FLT_EPSILON);
    } else {
        s = (max_pos - min_neg) / qrange;
        s = fmaxf(s, FLT_EPSILON);
    }
    TG_CHECK(isfinite(s), TG_EINVAL, "%s: channel %lld's observed range [%g, %g] is not finite, "
             "so it has no scale", op, (long long)c, (double)lo, (double)hi);
    if (!obs->symmetric)
        z = tg__q_clamp((int64_t)obs->quant_min - (int64_t)rintf(min_neg / s), obs->quant_min,
                        obs->quant_max);
    *scale = s;
    *zp = z;
    return TG_OK;
}

int tg_observer_qparams(const tg_observer *obs, double *scale, int32_t *zero_point)
{
    TG_CHECK(obs && scale && zero_point, TG_EINVAL,
             "observer_qparams: obs, scale and zero_point must not be NULL");
    TG_CHECK(obs->kind != TG_OBSERVER_PER_CHANNEL, TG_EINVAL,
             "observer_qparams: a per-channel observer: use tg_observer_channel_qparams");
    TG_CHECK(obs->min != NULL, TG_EINVAL, "observer_qparams: the observer has seen no data");
    TG_TRY(check_range("observer_qparams", obs));
    return qparams("observer_qparams", obs, 0, scale, zero_point);
}

int tg_observer_channel_qparams(const tg_observer *obs, int64_t n, double *scales,
                                int32_t *zero_points)
{
    TG_CHECK(obs && scales, TG_EINVAL, "observer_channel_qparams: obs and scales must not be NULL");
    TG_CHECK(obs->min != NULL, TG_EINVAL, "observer_channel_qparams: the observer has seen no data");
    TG_CHECK(n == obs->n, TG_ESHAPE, "observer_channel_qparams: n=%lld must equal the %lld "
             "channels observed", (long long)n, (long long)obs->n);
    const char *op = "observer_channel_qparams";
    TG_TRY(check_range(op, obs));
    double s;
    int32_t z;
    for (int64_t c = 0; c < n; c++)   /* all checked first: on error nothing is written */
        TG_TRY(qparams(op, obs, c, &s, &z));
    for (int64_t c = 0; c < n; c++) {
        qparams(op, obs, c, &scales[c], &z);
        if (zero_points) zero_points[c] = z;
    }
    return TG_OK;
}
