/* src/ops/search.c - binary search and counting: torch.searchsorted,
 * torch.bucketize, torch.bincount and torch.histc.
 *
 * None of them has a gradient (the results are positions and counts, or
 * sums of weights that torch does not differentiate either), so they are
 * plain functions over tensors that record nothing on the tape.
 *
 * searchsorted runs torch's binary search itself, the same midpoints and
 * the same tests, so that a NaN lands where torch's lands: the left side
 * moves right past every element e with !(e >= v), the right side past
 * every e with !(e > v).  A NaN value therefore goes after every element,
 * and the search moves right past every NaN of the sequence it probes.
 * The two tensors are compared in the dtype torch.result_type gives them
 * (converted as Tensor.to: an integer wraps, a float rounds).  With a
 * sorter, each row is first gathered in the sorter's order, which the
 * search then probes as torch's probes seq[sorter[mid]].
 *
 * histc bins as torch's CPU kernel for evenly spaced edges:
 *   bin = (int64)((v - min) * bins / (max - min)),  bins - 1 at v = max,
 * each operation in x's dtype (f16 and bf16 rounded after each, as c10's
 * Half and BFloat16 arithmetic), and adds the counts in x's dtype.  torch's
 * bf16 kernel puts a few elements next to a bin's edge into the
 * neighbouring bin (a rounding this does not reproduce). */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "ops/elementwise.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

/* t's elements (row-major, any strides) as doubles rounded to dtype via (a
 * float dtype), in a new work buffer (tg__work_free). */
static double *doubles_via(const tg_tensor *t, tg_dtype via)
{
    const int64_t n = tg_tensor_numel(t);
    double *d = tg__work_alloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    if (!d || via == TG_F64) {
        if (d) tg__gather(t, TG_F64, d);
        return d;
    }
    void *tmp = tg__work_alloc((size_t)(n > 0 ? n : 1) * tg_dtype_size(via));
    if (!tmp) {
        tg__work_free(d);
        return NULL;
    }
    tg__gather(t, via, tmp);
    for (int64_t i = 0; i < n; i++) d[i] = tg_dtype_load(via, tmp, i);
    tg__work_free(tmp);
    return d;
}

/* t's elements (an integer t) as int64 after a conversion to the integer
 * dtype via, which wraps as a C cast and torch's Tensor.to, in a new work
 * buffer. */
static int64_t *ints_via(const tg_tensor *t, tg_dtype via)
{
    const int64_t n = tg_tensor_numel(t);
    int64_t *d = tg__work_alloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    if (!d) return NULL;
    tg__gather(t, TG_I64, d);
    for (int64_t i = 0; i < n && via != TG_I64; i++)
        d[i] = via == TG_U8 ? (int64_t)(uint8_t)d[i] : via == TG_I8 ? (int64_t)(int8_t)d[i]
                                                                   : (int64_t)(int32_t)d[i];
    return d;
}

/* ---- searchsorted ------------------------------------------------------------------ */

/* torch's cus_lower_bound / cus_upper_bound over seq[0..n). */
#define DEFINE_BOUND(NAME, T)                                                      \
    static int64_t NAME(const T *seq, int64_t n, T v, bool right)                  \
    {                                                                              \
        int64_t lo = 0, hi = n;                                                    \
        while (lo < hi) {                                                          \
            const int64_t mid = lo + ((hi - lo) >> 1);                             \
            const bool go_right = right ? !(seq[mid] > v) : !(seq[mid] >= v);      \
            if (go_right) lo = mid + 1;                                            \
            else hi = mid;                                                         \
        }                                                                          \
        return lo;                                                                 \
    }
DEFINE_BOUND(bound_f64, double)
DEFINE_BOUND(bound_i64, int64_t)

/* The dtype torch compares in (torch.result_type of the two): with both
 * of dims, two floats promote (tg_promote_dtypes), an integer with a float
 * gives the float, two integers compare exactly (TG_I64); a 0-d values
 * counts only when it is a float against an integer sequence. */
static tg_dtype compare_dtype(const tg_tensor *seq, const tg_tensor *v)
{
    const tg_dtype a = seq->dtype, b = v->dtype;
    const bool fa = tg_dtype_is_float(a), fb = tg_dtype_is_float(b);
    if (v->ndim == 0 && (fa || !fb)) return a;
    if (fa && fb) return tg_promote_dtypes(a, b);
    return fa ? a : fb ? b : TG_I64;
}

/* The shape rule: seq has dims; 1-d, or values has its ndim and its leading
 * dims. */
static int check_search_shapes(const char *op, const tg_tensor *seq, const tg_tensor *v)
{
    TG_CHECK(seq->ndim > 0, TG_ESHAPE, "%s: sorted_sequence is 0-d; it must have dims", op);
    if (seq->ndim == 1) return TG_OK;
    bool ok = v->ndim == seq->ndim;
    for (int d = 0; ok && d < seq->ndim - 1; d++) ok = v->shape[d] == seq->shape[d];
    char a[96] = "", b[96] = "";
    for (int d = 0; d < seq->ndim && !ok; d++)
        snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? ", " : "",
                 (long long)seq->shape[d]);
    for (int d = 0; d < v->ndim && !ok; d++)
        snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? ", " : "",
                 (long long)v->shape[d]);
    TG_CHECK(ok, TG_ESHAPE, "%s: sorted_sequence (%s) has %d dims, so values (%s) must have "
             "as many and the same leading %d", op, a, seq->ndim, b, seq->ndim - 1);
    return TG_OK;
}

/* s (the sequence's rows of n 8-byte elements, nel in all) reordered in
 * place to s[row][order[row][j]], the order a sorter gives: searching the
 * reordered rows probes the elements torch's search through the sorter
 * probes. */
static int apply_order(void *s, const int64_t *order, int64_t n, int64_t nel)
{
    int64_t *e = s, *tmp = tg__work_alloc((size_t)(nel > 0 ? nel : 1) * sizeof *tmp);
    if (!tmp) return TG_ENOMEM;
    for (int64_t i = 0; i < nel; i++) tmp[i] = e[i - i % n + order[i]];
    memcpy(e, tmp, (size_t)nel * sizeof *tmp);
    tg__work_free(tmp);
    return TG_OK;
}

static int searchsorted(tg_tensor **out, const tg_tensor *seq, const tg_tensor *v,
                        const int64_t *order, bool right, bool out_int32)
{
    const tg_dtype cdt = compare_dtype(seq, v);
    const bool is_float = tg_dtype_is_float(cdt);
    const int64_t n = seq->shape[seq->ndim - 1], nv = tg_tensor_numel(v);
    /* values per row of seq: all of them for a 1-d seq */
    const int64_t per = seq->ndim == 1 ? nv : v->ndim > 0 ? v->shape[v->ndim - 1] : 1;
    void *s = is_float ? (void *)doubles_via(seq, cdt) : (void *)ints_via(seq, cdt);
    void *x = is_float ? (void *)doubles_via(v, cdt) : (void *)ints_via(v, cdt);
    const bool ordered = !order || !s || apply_order(s, order, n, tg_tensor_numel(seq)) >= 0;
    tg_tensor *r = s && x && ordered
                       ? tg__tensor_uninit(out_int32 ? TG_I32 : TG_I64, v->ndim, v->shape)
                       : NULL;
    if (!r) {
        tg__work_free(s);
        tg__work_free(x);
        return TG_ENOMEM;
    }
    int64_t *r64 = out_int32 ? NULL : tg_tensor_data(r);
    int32_t *r32 = out_int32 ? tg_tensor_data(r) : NULL;
    for (int64_t i = 0; i < nv; i++) {
        const int64_t row = per > 0 ? i / per : 0;
        const int64_t p = is_float
            ? bound_f64((const double *)s + row * n, n, ((const double *)x)[i], right)
            : bound_i64((const int64_t *)s + row * n, n, ((const int64_t *)x)[i], right);
        if (r32) r32[i] = (int32_t)p;
        else r64[i] = p;
    }
    tg__work_free(s);
    tg__work_free(x);
    *out = r;
    return TG_OK;
}

/* The sorter's rule, torch's: i64 of sorted_sequence's shape; and each
 * index in [0, n), which torch 1.13 does not check (it reads past the row;
 * later torch raises "sorter index out of range").  *order gets the
 * indices (a work buffer) when the sorter passes. */
static int check_sorter(const char *op, const tg_tensor *seq, const tg_tensor *sorter,
                        int64_t **order)
{
    TG_CHECK(sorter->dtype == TG_I64, TG_EDTYPE, "%s: sorter has dtype %s; it must be i64",
             op, tg_dtype_name(sorter->dtype));
    bool same = sorter->ndim == seq->ndim;
    for (int d = 0; same && d < seq->ndim; d++) same = sorter->shape[d] == seq->shape[d];
    char a[96], b[96];
    tg_shape_str(a, sizeof a, seq->ndim, seq->shape);
    tg_shape_str(b, sizeof b, sorter->ndim, sorter->shape);
    TG_CHECK(same, TG_ESHAPE, "%s: sorter is %s but sorted_sequence %s; they must have the "
             "same shape", op, b, a);
    const int64_t n = seq->shape[seq->ndim - 1], nel = tg_tensor_numel(sorter);
    int64_t *o = ints_via(sorter, TG_I64);
    if (!o) return TG_ENOMEM;
    for (int64_t i = 0; i < nel; i++)
        if (o[i] < 0 || o[i] >= n) {
            const long long bad = (long long)o[i];
            tg__work_free(o);
            return tg__error(TG_EINVAL, "%s: sorter's element %lld is %lld, out of range for "
                             "rows of %lld elements", op, (long long)i, bad, (long long)n);
        }
    *order = o;
    return TG_OK;
}

int tg_searchsorted_sorter(tg_tensor **out, tg_tensor *sorted_sequence, tg_tensor *values,
                           tg_tensor *sorter, bool right, bool out_int32)
{
    const char *op = "searchsorted";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(sorted_sequence != NULL, TG_EINVAL, "%s: sorted_sequence must not be NULL", op);
    TG_CHECK(values != NULL, TG_EINVAL, "%s: values must not be NULL", op);
    TG_TRY(check_search_shapes(op, sorted_sequence, values));
    const int64_t n = sorted_sequence->shape[sorted_sequence->ndim - 1];
    TG_CHECK(!out_int32 || n < INT32_MAX, TG_EINVAL, "%s: out_int32 needs sorted_sequence's "
             "last dim (%lld) < 2^31 - 1", op, (long long)n);
    int64_t *order = NULL;
    if (sorter) TG_TRY(check_sorter(op, sorted_sequence, sorter, &order));
    tg_tensor *r = NULL;
    const int rc = searchsorted(&r, sorted_sequence, values, order, right, out_int32);
    tg__work_free(order);
    if (rc >= 0) *out = r;
    return tg__scope_capture(out, rc);
}

int tg_searchsorted(tg_tensor **out, tg_tensor *sorted_sequence, tg_tensor *values, bool right,
                    bool out_int32)
{
    return tg_searchsorted_sorter(out, sorted_sequence, values, NULL, right, out_int32);
}

int tg_bucketize(tg_tensor **out, tg_tensor *x, tg_tensor *boundaries, bool right,
                 bool out_int32)
{
    TG_CHECK(out != NULL, TG_EINVAL, "bucketize: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "bucketize: x must not be NULL");
    TG_CHECK(boundaries != NULL, TG_EINVAL, "bucketize: boundaries must not be NULL");
    TG_CHECK(boundaries->ndim == 1, TG_ESHAPE, "bucketize: boundaries has %d dims; it must "
             "be 1-d", boundaries->ndim);
    TG_CHECK(!out_int32 || boundaries->shape[0] < INT32_MAX, TG_EINVAL, "bucketize: out_int32 "
             "needs fewer than 2^31 - 1 boundaries (%lld)", (long long)boundaries->shape[0]);
    tg_tensor *r = NULL;
    const int rc = searchsorted(&r, boundaries, x, NULL, right, out_int32);
    if (rc >= 0) *out = r;
    return tg__scope_capture(out, rc);
}

/* ---- bincount ---------------------------------------------------------------------- */

static int bincount(tg_tensor **out, const tg_tensor *x, const tg_tensor *w, int64_t minlength)
{
    const int64_t n = x->shape[0];
    int64_t *xv = ints_via(x, TG_I64);
    if (!xv) return TG_ENOMEM;
    int64_t top = -1, neg = -1;
    for (int64_t i = 0; i < n; i++) {
        if (xv[i] < 0 && neg < 0) neg = i;
        if (xv[i] > top) top = xv[i];
    }
    int rc = TG_OK;
    if (neg >= 0)
        rc = tg__error(TG_EINVAL, "bincount: x[%lld]=%lld is negative; the values must be >= 0",
                       (long long)neg, (long long)xv[neg]);
    else if (w && (w->ndim != 1 || w->shape[0] != n))
        rc = tg__error(TG_ESHAPE, "bincount: weights must be 1-d of x's length %lld (got %d "
                       "dims, %lld elements)", (long long)n, w->ndim,
                       (long long)tg_tensor_numel(w));
    const int64_t bins = top < minlength ? minlength : top < INT64_MAX ? top + 1 : INT64_MAX;
    if (rc >= 0 && !tg__shape_bytes_fit(1, &bins, 8))
        rc = tg__error(TG_ENOMEM, "bincount: %lld bins (max(x) + 1 or minlength) do not fit "
                       "in memory", (long long)bins);
    /* torch: f32 weights sum in f32, any other dtype in f64 */
    const tg_dtype dt = !w ? TG_I64 : w->dtype == TG_F32 ? TG_F32 : TG_F64;
    tg_tensor *r = rc >= 0 ? tg__tensor_empty(dt, 1, &bins) : NULL;
    double *wv = r && w ? doubles_via(w, TG_F64) : NULL;
    if (rc >= 0 && (!r || (w && !wv))) rc = TG_ENOMEM;
    if (rc >= 0 && dt == TG_I64) {
        int64_t *h = tg_tensor_data(r);
        for (int64_t i = 0; i < n; i++) h[xv[i]]++;
    } else if (rc >= 0 && dt == TG_F32) {
        float *h = tg_tensor_data(r);
        for (int64_t i = 0; i < n; i++) h[xv[i]] += (float)wv[i];
    } else if (rc >= 0) {
        double *h = tg_tensor_data(r);
        for (int64_t i = 0; i < n; i++) h[xv[i]] += wv[i];
    }
    tg__work_free(xv);
    tg__work_free(wv);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}

int tg_bincount(tg_tensor **out, tg_tensor *x, tg_tensor *weights, int64_t minlength)
{
    const char *op = "bincount";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(!tg_dtype_is_float(x->dtype), TG_EDTYPE, "%s: x has dtype %s; it must be an "
             "integer dtype", op, tg_dtype_name(x->dtype));
    TG_CHECK(minlength >= 0, TG_EINVAL, "%s: minlength=%lld must be >= 0", op,
             (long long)minlength);
    TG_CHECK(x->ndim == 1, TG_ESHAPE, "%s: x has %d dims; it must be 1-d", op, x->ndim);
    tg_tensor *r = NULL;
    int rc;
    if (x->shape[0] == 0) {   /* torch: i64 zeros whatever the weights */
        rc = tg_tensor_zeros(&r, TG_I64, 1, &minlength);
    } else {
        rc = bincount(&r, x, weights, minlength);
    }
    if (rc >= 0) *out = r;
    return tg__scope_capture(out, rc);
}

/* ---- histc ------------------------------------------------------------------------- */

/* The edges torch's histc uses: [min, max], or the data's range when they
 * are equal (and the data not empty), widened by 1 each way when that is
 * one point.  TG_EINVAL when not finite or not increasing. */
static int histc_range(const tg_tensor *x, const double *xv, double *lo, double *hi)
{
    const int64_t n = tg_tensor_numel(x);
    if (*lo == *hi && n > 0) {
        double mn = xv[0], mx = xv[0];
        for (int64_t i = 0; i < n; i++) {
            if (isnan(xv[i])) {
                mn = mx = NAN;
                break;
            }
            mn = xv[i] < mn ? xv[i] : mn;
            mx = xv[i] > mx ? xv[i] : mx;
        }
        *lo = mn;
        *hi = mx;
    }
    if (*lo == *hi) {
        *lo -= 1;
        *hi += 1;
    }
    TG_CHECK(isfinite(*lo) && isfinite(*hi), TG_EINVAL, "histc: the range [%g, %g] must be "
             "finite (x's range is used when min == max)", *lo, *hi);
    TG_CHECK(*lo < *hi, TG_EINVAL, "histc: max=%g must be larger than min=%g", *hi, *lo);
    return TG_OK;
}

int tg_histc(tg_tensor **out, tg_tensor *x, int64_t bins, double min, double max)
{
    const char *op = "histc";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_CHECK(tg_dtype_is_float(x->dtype), TG_EDTYPE, "%s: x has dtype %s; it must be a float "
             "dtype", op, tg_dtype_name(x->dtype));
    TG_CHECK(bins > 0, TG_EINVAL, "%s: bins=%lld must be > 0", op, (long long)bins);
    TG_CHECK(bins < INT64_MAX / 16, TG_ENOMEM, "%s: bins=%lld do not fit in memory", op,
             (long long)bins);
    double *xv = doubles_via(x, TG_F64);
    if (!xv) return TG_ENOMEM;
    const tg_dtype dt = x->dtype;
    int rc = histc_range(x, xv, &min, &max);
    tg_tensor *r = rc >= 0 ? tg__tensor_empty(dt, 1, &bins) : NULL;
    double *h = r ? tg__work_alloc((size_t)bins * sizeof *h) : NULL;
    if (rc >= 0 && !h) rc = TG_ENOMEM;
    if (rc >= 0) {
        memset(h, 0, (size_t)bins * sizeof *h);
        const double lo = tg__scalar_in_dtype(dt, min), hi = tg__scalar_in_dtype(dt, max);
        const double width = tg__scalar_in_dtype(dt, hi - lo);
        const double nb = tg__scalar_in_dtype(dt, (double)bins);
        for (int64_t i = 0; i < tg_tensor_numel(x); i++) {
            const double v = xv[i];
            if (!(v >= lo && v <= hi)) continue;   /* outside, or NaN */
            const double t = tg__scalar_in_dtype(dt, tg__scalar_in_dtype(dt, v - lo) * nb);
            int64_t b = (int64_t)tg__scalar_in_dtype(dt, t / width);
            if (b >= bins) b = bins - 1;   /* the last bin holds max */
            h[b] = tg__scalar_in_dtype(dt, h[b] + 1);
        }
        for (int64_t b = 0; b < bins; b++) tg_dtype_store(dt, tg_tensor_data(r), b, h[b]);
    }
    tg__work_free(xv);
    tg__work_free(h);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return tg__scope_capture(out, rc);
}
