/* src/ops/sort.c - sorting and selection along a dim: torch.sort, argsort,
 * topk, kthvalue, median and nanmedian (over a dim, or over the whole
 * tensor).
 *
 * One op, sort_indices, orders each row of x along dim (the rows as in
 * src/ops/dim_rows.h) and keeps the indices of a range of its positions:
 *   sort, argsort    every position, ascending or descending
 *   topk             the first k of the descending (largest) or ascending
 *                    order
 *   kthvalue         position k - 1 of the ascending order
 *   median           position (n - 1) / 2 of it (the lower median), or the
 *                    first NaN of a row that has one (the median of a row
 *                    with a NaN is NaN, as torch's)
 *   nanmedian        position (m - 1) / 2 of the row's m numbers, NaNs
 *                    left out; the first NaN when every element is one.
 * The order is torch's: a NaN is after every number ascending and before
 * every number descending; -0.0 equals 0.0; equal elements keep their
 * order (a stable merge sort), in both directions, as torch's CPU sort.
 * When the kept range ends within the first quarter of a row (topk or
 * kthvalue with a small k), those first positions are selected (a heap, or
 * quickselect for more than 128) and only they are sorted: the same indices.
 * The first position alone (k = 1, a float x in contiguous memory)
 * is found in one pass over x, without copying its rows (sort_first.c);
 * the first m within a quarter of a contiguous f32 row along the last dim
 * are selected in x's dtype, reading the row in vectors (sort_topk.c).
 *
 * The values are gather(x, dim, indices), so the op itself has no backward:
 * dx = scatter_add(zeros_like(x), dim, indices, g), which is gather's
 * backward, differentiable to any order; the indices get no gradient (the
 * order is piecewise constant), as torch's sort, topk, kthvalue and median
 * backwards send g to the elements picked.  An integer x's values are
 * copied by index (integers have no gradient).
 *
 * torch's topk, kthvalue and median select with quickselect, so among equal
 * elements the index they return may be another one than the first in
 * order that is returned here; the values are the same. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "ops/dim_rows.h"
#include "ops/families.h"
#include "ops/shape_internal.h"
#include "ops/sort_internal.h"
#include "tapegrad/ops.h"

enum pick_mode { PICK_RANGE, PICK_MEDIAN, PICK_NANMEDIAN };

typedef struct sort_params {
    int dim;
    bool descending;
    int mode;              /* enum pick_mode */
    int64_t start, count;  /* PICK_RANGE: positions [start, start + count) */
} sort_params;

/* ---- a stable merge sort of (key, index) pairs ------------------------------------ */

/* Whether key a goes before key b (strictly): ascending puts NaN last,
 * descending first. */
static inline bool before_f64(double a, double b, bool desc)
{
    if (desc) return isnan(a) ? !isnan(b) : !isnan(b) && a > b;
    return !isnan(a) && (isnan(b) || a < b);
}

static inline bool before_i64(int64_t a, int64_t b, bool desc)
{
    return desc ? a > b : a < b;
}

/* A row's element: its key next to its index along dim, so that sorting
 * moves both and compares without reaching back into the row. */
typedef struct pair_f64 {
    double k;
    int64_t i;
} pair_f64;

typedef struct pair_i64 {
    int64_t k;
    int64_t i;
} pair_i64;

/* Whether pair a goes before pair b: by key only (the merge sort keeps
 * equal keys in their order), or by key and then index (a total order). */
#define DEFINE_PAIR_ORDER(P, BEFORE)                                              \
    static inline bool P##_key_before(P a, P b, bool desc)                        \
    {                                                                             \
        return BEFORE(a.k, b.k, desc);                                            \
    }                                                                             \
    static inline bool P##_before(P a, P b, bool desc)                            \
    {                                                                             \
        return BEFORE(a.k, b.k, desc) || (!BEFORE(b.k, a.k, desc) && a.i < b.i);  \
    }

DEFINE_PAIR_ORDER(pair_f64, before_f64)
DEFINE_PAIR_ORDER(pair_i64, before_i64)

/* Sorts v[0..n) stably by LESS, tmp having room for n: insertion sorts of
 * runs of 16, then merges taking the right run's pair first only when it is
 * strictly before. */
#define DEFINE_MERGE_SORT(NAME, P, LESS)                                          \
    static void NAME(P *v, P *tmp, int64_t n, bool desc)                          \
    {                                                                             \
        const int64_t run = 16;                                                   \
        for (int64_t lo = 0; lo < n; lo += run) {                                 \
            const int64_t hi = lo + run < n ? lo + run : n;                       \
            for (int64_t i = lo + 1; i < hi; i++) {                               \
                const P x = v[i];                                                 \
                int64_t j = i;                                                    \
                for (; j > lo && LESS(x, v[j - 1], desc); j--) v[j] = v[j - 1];     \
                v[j] = x;                                                         \
            }                                                                     \
        }                                                                         \
        P *src = v, *dst = tmp;                                                   \
        for (int64_t w = run; w < n; w *= 2) {                                    \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                           \
                const int64_t mid = lo + w < n ? lo + w : n;                      \
                const int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;               \
                int64_t a = lo, b = mid, o = lo;                                  \
                while (a < mid && b < hi)                                         \
                    dst[o++] = LESS(src[b], src[a], desc) ? src[b++] : src[a++];   \
                while (a < mid) dst[o++] = src[a++];                              \
                while (b < hi) dst[o++] = src[b++];                               \
            }                                                                     \
            P *t = src;                                                           \
            src = dst;                                                            \
            dst = t;                                                              \
        }                                                                         \
        if (src != v) memcpy(v, src, (size_t)n * sizeof *v);                      \
    }

/* The first m pairs (m >= 1) of the stable order of row[0..n), in any
 * order, into v[0..m): a heap of the m kept so far whose root is the last of
 * them in the order (by key, then by index).  Element i, coming after every
 * kept one in index, enters only when its key is strictly before the root's.
 * O(n log m) where sorting the row is O(n log n). */
#define DEFINE_SELECT(NAME, P, T, BEFORE)                                         \
    static inline bool NAME##_after(P a, P b, bool desc)                          \
    {                                                                             \
        return P##_before(b, a, desc);                                            \
    }                                                                             \
    static void NAME##_sift(P *h, int64_t m, int64_t i, bool desc)                \
    {                                                                             \
        for (;;) {                                                                \
            int64_t c = 2 * i + 1;                                                \
            if (c >= m) return;                                                   \
            if (c + 1 < m && NAME##_after(h[c + 1], h[c], desc)) c++;             \
            if (!NAME##_after(h[c], h[i], desc)) return;                          \
            const P t = h[i];                                                     \
            h[i] = h[c];                                                          \
            h[c] = t;                                                             \
            i = c;                                                                \
        }                                                                         \
    }                                                                             \
    static void NAME(P *v, const T *row, int64_t n, int64_t m, bool desc)         \
    {                                                                             \
        for (int64_t i = 0; i < m; i++) v[i] = (P){row[i], i};                    \
        for (int64_t i = m / 2; i-- > 0;) NAME##_sift(v, m, i, desc);              \
        for (int64_t i = m; i < n; i++) {                                         \
            if (!BEFORE(row[i], v[0].k, desc)) continue;                          \
            v[0] = (P){row[i], i};                                                \
            NAME##_sift(v, m, 0, desc);                                           \
        }                                                                         \
    }

/* Moves the first m of the n pairs v[0..n) in the order by key and index
 * to v[0..m), in any order (quickselect: partitions around the median of
 * three until position m is a boundary; O(n) on average).  The order is
 * total, so the pairs kept are the first m of the stable order whatever
 * moves the partitions make.  After 64 partitions (inputs built to defeat
 * the pivots) the rest is merge sorted, tmp having room for n. */
#define DEFINE_QUICKSELECT(NAME, P, LESS, SORT)                                   \
    static void NAME(P *v, P *tmp, int64_t n, int64_t m, bool desc)              \
    {                                                                             \
        int64_t lo = 0, hi = n;                                                   \
        for (int rounds = 0; lo < m && m < hi && hi - lo > 16; rounds++) {        \
            if (rounds == 64) {                                                   \
                SORT(v + lo, tmp, hi - lo, desc);                                 \
                return;                                                           \
            }                                                                     \
            int64_t a = lo, b = lo + (hi - lo) / 2, c = hi - 1, t;                \
            if (LESS(v[b], v[a], desc)) t = a, a = b, b = t;                      \
            if (LESS(v[c], v[b], desc)) t = b, b = c, c = t;                      \
            if (LESS(v[b], v[a], desc)) t = a, a = b, b = t;                      \
            P x = v[b];                                                           \
            v[b] = v[hi - 1];                                                     \
            v[hi - 1] = x;                                                        \
            int64_t s = lo;                                                       \
            for (int64_t i = lo; i < hi - 1; i++) { /* swaps without a branch */  \
                const P y = v[i];                                                 \
                const bool lt = LESS(y, x, desc);                                 \
                v[i] = v[s];                                                      \
                v[s] = y;                                                         \
                s += lt;                                                          \
            }                                                                     \
            v[hi - 1] = v[s];                                                     \
            v[s] = x;                                                             \
            if (s >= m) hi = s;                                                   \
            else lo = s + 1;                                                      \
        }                                                                         \
        if (lo < m && m < hi) SORT(v + lo, tmp, hi - lo, desc);                  \
    }

/* Loads row[0..n) into v as pairs and sorts them stably by key; or with
 * select, only its first m, sorted by key and index (a heap for m <= 128,
 * quickselect for more). */
#define DEFINE_ORDER_ROW(NAME, P, T, SORT, SORT_SELECTED, HEAP, QUICKSELECT)       \
    static void NAME(P *v, const T *row, int64_t n, int64_t m, bool select, bool desc) \
    {                                                                             \
        if (select && m <= 128) {                                                 \
            HEAP(v, row, n, m, desc);                                             \
        } else {                                                                  \
            for (int64_t i = 0; i < n; i++) v[i] = (P){row[i], i};                \
            if (!select) {                                                        \
                SORT(v, v + n, n, desc);                                          \
                return;                                                           \
            }                                                                     \
            QUICKSELECT(v, v + n, n, m, desc);                                    \
        }                                                                         \
        SORT_SELECTED(v, v + m, m, desc);                                         \
    }

DEFINE_MERGE_SORT(sort_f64, pair_f64, pair_f64_key_before)
DEFINE_MERGE_SORT(sort_i64, pair_i64, pair_i64_key_before)
DEFINE_MERGE_SORT(sort_selected_f64, pair_f64, pair_f64_before)
DEFINE_MERGE_SORT(sort_selected_i64, pair_i64, pair_i64_before)
DEFINE_SELECT(select_f64, pair_f64, double, before_f64)
DEFINE_SELECT(select_i64, pair_i64, int64_t, before_i64)
DEFINE_QUICKSELECT(quickselect_f64, pair_f64, pair_f64_before, sort_selected_f64)
DEFINE_QUICKSELECT(quickselect_i64, pair_i64, pair_i64_before, sort_selected_i64)
DEFINE_ORDER_ROW(order_f64, pair_f64, double, sort_f64, sort_selected_f64, select_f64,
                 quickselect_f64)
DEFINE_ORDER_ROW(order_i64, pair_i64, int64_t, sort_i64, sort_selected_i64, select_i64,
                 quickselect_i64)

typedef struct sort_job {
    const void *rows;      /* rows x n keys, f64 or i64 */
    bool is_float;
    int64_t n, inner, count;
    const sort_params *p;
    int64_t *out;          /* x's layout with count at dim */
    bool failed;           /* no memory for a worker's scratch */
} sort_job;

/* The first position to keep of row key (sorted ascending for the medians). */
static int64_t first_kept(const sort_job *j, const double *key)
{
    if (j->p->mode == PICK_RANGE) return j->p->start;
    int64_t nan = 0;
    for (int64_t k = 0; k < j->n; k++) nan += isnan(key[k]);
    const int64_t m = j->n - nan;
    if (j->p->mode == PICK_MEDIAN) return nan > 0 ? m : (j->n - 1) / 2;
    return m > 0 ? (m - 1) / 2 : 0;
}

static void sort_rows(void *arg, int64_t lo, int64_t hi)
{
    sort_job *j = arg;
    const int64_t n = j->n;
    /* A range within the first quarter of a row (topk, kthvalue with a
     * small k): select its first m positions, then sort only those. */
    const int64_t m = j->p->start + j->count;
    const bool select = j->p->mode == PICK_RANGE && 4 * m <= n;
    void *scratch = tg__malloc((size_t)(2 * n) * sizeof(pair_f64));
    if (!scratch) {
        j->failed = true;
        return;
    }
    static_assert(sizeof(pair_f64) == sizeof(pair_i64), "one scratch serves both pairs");
    for (int64_t r = lo; r < hi; r++) {
        /* row r = (o, k) over the dims before and after dim */
        int64_t *out = j->out + (r / j->inner) * j->count * j->inner + r % j->inner;
        if (j->is_float) {
            const double *key = (const double *)j->rows + r * n;
            pair_f64 *v = scratch;
            order_f64(v, key, n, m, select, j->p->descending);
            const int64_t first = first_kept(j, key);
            for (int64_t c = 0; c < j->count; c++) out[c * j->inner] = v[first + c].i;
        } else {
            const int64_t *key = (const int64_t *)j->rows + r * n;
            pair_i64 *v = scratch;
            order_i64(v, key, n, m, select, j->p->descending);
            /* integers hold no NaN: the median is at (n - 1) / 2 */
            const int64_t first = j->p->mode == PICK_RANGE ? j->p->start : (n - 1) / 2;
            for (int64_t c = 0; c < j->count; c++) out[c * j->inner] = v[first + c].i;
        }
    }
    free(scratch);
}

/* sort_indices(x): an i64 tensor of x's shape with the kept count at dim
 * (0-d for a 0-d x), the indices along dim of the kept positions. */
static int sort_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                        const void *params)
{
    (void)ctx;
    (void)n;
    const sort_params *p = params;
    const char *op = "sort_indices";
    tg_tensor *x = in[0];
    int d;
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    TG_TRY(tg__shape_wrap_dim(op, "dim", p->dim, x->ndim, &d));
    const int64_t extent = x->ndim > 0 ? x->shape[d] : 1;
    const int64_t count = p->mode == PICK_RANGE ? p->count : 1;
    TG_CHECK(p->mode != PICK_RANGE || (p->start >= 0 && p->count >= 0 &&
                                       p->start + p->count <= extent),
             TG_EINVAL, "%s: positions [%lld, %lld) must lie in [0, %lld]", op,
             (long long)p->start, (long long)(p->start + p->count), (long long)extent);
    TG_CHECK(p->mode == PICK_RANGE || extent > 0, TG_ESHAPE,
             "%s: dim %d has extent 0; a median needs at least one element", op, d);
    int64_t oshape[TG_MAX_DIMS];
    memcpy(oshape, x->shape, sizeof *oshape * (size_t)x->ndim);
    if (x->ndim > 0) oshape[d] = count;
    tg_tensor *r = tg__tensor_uninit(TG_I64, x->ndim, oshape);
    if (!r) return TG_ENOMEM;
    sort_job j = {.is_float = tg_dtype_is_float(x->dtype), .count = count, .p = p,
                  .out = tg_tensor_data(r), .inner = 1};
    for (int k = d + 1; k < x->ndim; k++) j.inner *= x->shape[k];
    if (p->mode == PICK_RANGE && p->start == 0 && count == 1 && tg__first_applies(x, extent)) {
        const int rc = tg__first_along(
            x, p->descending ? TG__FIRST_MAX_NAN_FIRST : TG__FIRST_MIN_NAN_LAST, extent, j.inner,
            j.out);
        if (rc < 0) {
            tg_tensor_release(r);
            return rc;
        }
        *out = r;
        return TG_OK;
    }
    if (p->mode == PICK_RANGE && count > 0 &&
        tg__topk_applies(x, extent, j.inner, p->start + count)) {
        const int rc = tg__topk_rows(x, p->descending, extent, p->start, count, j.out);
        if (rc < 0) {
            tg_tensor_release(r);
            return rc;
        }
        *out = r;
        return TG_OK;
    }
    void *rows = NULL;
    int64_t nrows;
    const unsigned mask = x->ndim > 0 ? 1u << d : 0;
    int rc = tg__dim_rows(x, mask, j.is_float ? TG_F64 : TG_I64, &rows, &nrows, &j.n);
    if (rc >= 0 && count > 0) {
        j.rows = rows;
        tg__parallel_range(nrows, nrows * j.n > 16384, sort_rows, &j);
        if (j.failed) rc = TG_ENOMEM;
    }
    tg__work_free(rows);
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}

static const tg_op_schema sort_op = {.name = "sort_indices", .arity = 1, .amp = TG_AMP_KEEP,
                                     .forward = sort_forward,
                                     .vjp = "no gradient: the result is indices"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__sort_ops[] = {&sort_op};
static_assert(sizeof tg__sort_ops / sizeof tg__sort_ops[0] == TG__sort_N,
              "src/ops/families.h must count the sort ops");

/* ---- values from indices ------------------------------------------------------------ */

/* *v = x's elements at idx along d (idx: x's shape, any extent at d): the
 * recorded gather for a float x, a copy by index for an integer one. */
static int take(tg_tensor **v, tg_tensor *x, int d, tg_tensor *idx)
{
    if (tg_dtype_is_float(x->dtype)) return tg_gather(v, x, d, idx);
    tg_tensor *xc = NULL;
    TG_TRY(tg_contiguous(&xc, x));
    tg_tensor *r = tg__tensor_uninit(x->dtype, idx->ndim, idx->shape);
    if (!r) {
        tg_tensor_release(xc);
        return TG_ENOMEM;
    }
    const size_t esz = tg_dtype_size(x->dtype);
    int64_t inner = 1;
    for (int k = d + 1; k < x->ndim; k++) inner *= x->shape[k];
    const int64_t n = x->ndim > 0 ? x->shape[d] : 1, c = idx->ndim > 0 ? idx->shape[d] : 1;
    const int64_t total = tg_tensor_numel(idx);
    const int64_t *iv = tg_tensor_cdata(idx);
    const char *src = tg_tensor_cdata(xc);
    char *dst = tg_tensor_data(r);
    for (int64_t e = 0; e < total; e++) {
        const int64_t k = e % inner, o = e / inner / c;
        memcpy(dst + (size_t)e * esz, src + (size_t)((o * n + iv[e]) * inner + k) * esz, esz);
    }
    tg_tensor_release(xc);
    *v = r;
    return TG_OK;
}

/* values and indices (either may be NULL: not wanted) of the kept
 * positions p describes; with squeeze, dim goes from both (count 1). */
static int select_run(tg_tensor **values, tg_tensor **indices, tg_tensor *x,
                      const sort_params *p, bool squeeze)
{
    tg_tensor *idx = NULL, *v = NULL, *vs = NULL, *is = NULL;
    int d;
    TG_TRY(tg__shape_wrap_dim("sort_indices", "dim", p->dim, x->ndim, &d));
    TG_TRY(tg_op_call(&sort_op, &idx, 1, &x, p, sizeof *p));
    int rc = TG_OK;
    if (values) rc = take(&v, x, d, idx);
    squeeze = squeeze && x->ndim > 0;
    if (rc >= 0 && values && squeeze) rc = tg_squeeze(&vs, v, d);
    if (rc >= 0 && indices && squeeze) rc = tg_squeeze(&is, idx, d);
    if (rc >= 0) {
        if (values) *values = squeeze ? tg_tensor_retain(vs) : tg_tensor_retain(v);
        if (indices) *indices = squeeze ? tg_tensor_retain(is) : tg_tensor_retain(idx);
    }
    tg_tensor_release(idx);
    tg_tensor_release(v);
    tg_tensor_release(vs);
    tg_tensor_release(is);
    return rc;
}

/* The public calls' common part: checks, the library's run, the results
 * to the caller's scope (both or neither). */
static int select_call(const char *op, tg_tensor **values, tg_tensor **indices, tg_tensor *x,
                       const sort_params *p, bool squeeze)
{
    TG_CHECK(values != NULL || indices != NULL, TG_EINVAL,
             "%s: values and indices must not both be NULL", op);
    TG_CHECK(values != indices, TG_EINVAL,
             "%s: values and indices must be two different places", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    int d;
    TG_TRY(tg__shape_wrap_dim(op, "dim", p->dim, x->ndim, &d));
    const int64_t extent = x->ndim > 0 ? x->shape[d] : 1;
    if (p->mode != PICK_RANGE)
        TG_CHECK(extent > 0, TG_ESHAPE, "%s: dim %d has extent 0; it needs at least one "
                 "element", op, d);
    tg_tensor *v = NULL, *ind = NULL;
    tg__lib_enter();
    int rc = select_run(values ? &v : NULL, indices ? &ind : NULL, x, p, squeeze);
    tg__lib_leave();
    if (!values) return tg__scope_capture_pair(indices, ind, NULL, NULL, rc);
    return tg__scope_capture_pair(values, v, indices, ind, rc);
}

/* The extent of x at dim (1 for a 0-d x), for the k checks; dim checked. */
static int extent_at(const char *op, const tg_tensor *x, int dim, int64_t *e)
{
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    int d;
    TG_TRY(tg__shape_wrap_dim(op, "dim", dim, x->ndim, &d));
    *e = x->ndim > 0 ? x->shape[d] : 1;
    return TG_OK;
}

int tg_sort(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim, bool descending)
{
    int64_t e = 0;
    TG_TRY(extent_at("sort", x, dim, &e));
    sort_params p = {.dim = dim, .descending = descending, .count = e};
    return select_call("sort", values, indices, x, &p, false);
}

int tg_argsort(tg_tensor **out, tg_tensor *x, int dim, bool descending)
{
    TG_CHECK(out != NULL, TG_EINVAL, "argsort: out must not be NULL");
    int64_t e = 0;
    TG_TRY(extent_at("argsort", x, dim, &e));
    sort_params p = {.dim = dim, .descending = descending, .count = e};
    return select_call("argsort", NULL, out, x, &p, false);
}

int tg_topk(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int64_t k, int dim,
            bool largest, bool sorted)
{
    (void)sorted;   /* the k are always in order */
    int64_t e = 0;
    TG_TRY(extent_at("topk", x, dim, &e));
    TG_CHECK(k >= 0 && k <= e, TG_EINVAL, "topk: k=%lld must be in [0, %lld] (the extent of "
             "dim %d)", (long long)k, (long long)e, dim);
    sort_params p = {.dim = dim, .descending = largest, .count = k};
    /* a 0-d x keeps its one element, as torch's topk(x, 0) of a 0-d x */
    if (tg_tensor_ndim(x) == 0) p.count = 1;
    return select_call("topk", values, indices, x, &p, false);
}

int tg_kthvalue(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int64_t k, int dim,
                bool keepdim)
{
    int64_t e = 0;
    TG_TRY(extent_at("kthvalue", x, dim, &e));
    TG_CHECK(e > 0, TG_ESHAPE, "kthvalue: dim %d has extent 0; it needs at least one "
             "element", dim);
    TG_CHECK(k >= 1 && k <= e, TG_EINVAL, "kthvalue: k=%lld must be in [1, %lld] (the extent "
             "of dim %d)", (long long)k, (long long)e, dim);
    sort_params p = {.dim = dim, .start = k - 1, .count = 1};
    return select_call("kthvalue", values, indices, x, &p, !keepdim);
}

int tg_median_dim(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim, bool keepdim)
{
    sort_params p = {.dim = dim, .mode = PICK_MEDIAN};
    return select_call("median_dim", values, indices, x, &p, !keepdim);
}

int tg_nanmedian_dim(tg_tensor **values, tg_tensor **indices, tg_tensor *x, int dim,
                     bool keepdim)
{
    sort_params p = {.dim = dim, .mode = PICK_NANMEDIAN};
    return select_call("nanmedian_dim", values, indices, x, &p, !keepdim);
}

/* median / nanmedian of every element: of x flattened, along its one dim;
 * of an empty float x, NaN (sum(x) * NaN, so that it is recorded as
 * torch's), refused for an empty integer x. */
static int median_all(const char *op, int mode, tg_tensor **out, tg_tensor *x)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    TG_CHECK(x != NULL, TG_EINVAL, "%s: x must not be NULL", op);
    const int64_t numel = tg_tensor_numel(x);
    TG_CHECK(numel > 0 || tg_dtype_is_float(x->dtype), TG_ESHAPE,
             "%s: x is an empty %s tensor; an integer median needs at least one element", op,
             tg_dtype_name(x->dtype));
    tg_tensor *flat = NULL, *v = NULL;
    sort_params p = {.dim = 0, .mode = mode};
    tg__lib_enter();
    int rc = tg_reshape(&flat, x, 1, &numel);
    if (rc >= 0 && numel > 0) {
        rc = select_run(&v, NULL, flat, &p, true);
    } else if (rc >= 0) {
        tg_tensor *s = NULL;
        rc = tg_sum(&s, x);
        if (rc >= 0) rc = tg_mul_scalar(&v, s, NAN);
        tg_tensor_release(s);
    }
    tg_tensor_release(flat);
    tg__lib_leave();
    return tg__scope_capture_pair(out, v, NULL, NULL, rc);
}

int tg_median(tg_tensor **out, tg_tensor *x)
{
    return median_all("median", PICK_MEDIAN, out, x);
}

int tg_nanmedian(tg_tensor **out, tg_tensor *x)
{
    return median_all("nanmedian", PICK_NANMEDIAN, out, x);
}
