/* src/ops/sort_first.c - the index of a row's first element in an order, in
 * one pass over x in its own dtype: topk and kthvalue with k = 1, argmax and
 * argmin on f32 and f64 tensors in contiguous memory.
 *
 * The order puts a before b (strictly) when
 *   NaN first:   b is a number, and a is NaN or a > b (a < b for min)
 *   NaN last:    a is a number, and b is NaN or a > b (a < b for min)
 * and the answer is the smallest index that no element goes before:
 * torch's sort order, whose first element topk(k = 1) and kthvalue(1)
 * return, and argmax / argmin's first NaN, else first extreme.  -0.0 and
 * 0.0 are equal keys (== ties them).
 *
 * x is seen as (outer, n, inner).  A row along the last dim (inner 1) is
 * scanned in LANES lanes: lane l keeps the first best of elements l,
 * l + LANES, ..., and the lanes are merged by (key, index).  Along another
 * dim the pass walks t = 0 .. n - 1 and keeps, for up to COLS inner
 * positions at a time, the best so far, reading x in its memory order.
 * The comparisons are masks, not branches: with GCC's and Clang's vector
 * extension each is a few SSE2 instructions on any x86-64 (a loop over
 * lanes in plain C is unrolled into branches instead). */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "ops/sort_internal.h"

enum { COLS = 256 };

/* Whether a goes before b; a and b are scalars or vectors of one type. */
#define FIRST_BEFORE(a, b, MIN, NAN_FIRST)                                                   \
    ((NAN_FIRST) ? ((b) == (b)) & (((a) != (a)) | ((MIN) ? (a) < (b) : (a) > (b)))           \
                 : ((a) == (a)) & (((b) != (b)) | ((MIN) ? (a) < (b) : (a) > (b))))

#ifdef __GNUC__
typedef float vf32 __attribute__((vector_size(16)));
typedef int32_t vi32 __attribute__((vector_size(16)));
typedef double vf64 __attribute__((vector_size(16)));
typedef int64_t vi64 __attribute__((vector_size(16)));
#endif

/* The lanes of one row into (m, ix): the best value of each lane and its
 * first index; elements [0, done) are taken, done a multiple of L. */
#ifdef __GNUC__
#define ROW_LANES(T, IT, VT, VI, L, MIN, NAN_FIRST)                                          \
    enum { W = 16 / sizeof(T), NV = L / W };                                                \
    VT vm[NV], v;                                                                           \
    VI vix[NV], vk[NV];                                                                     \
    for (int q = 0; q < NV; q++)                                                            \
        for (int w = 0; w < W; w++) {                                                       \
            vm[q][w] = r[0];                                                                \
            vix[q][w] = 0;                                                                  \
            vk[q][w] = (IT)(q * W + w);                                                     \
        }                                                                                   \
    for (; done + L <= n; done += L)                                                        \
        for (int q = 0; q < NV; q++) {                                                      \
            memcpy(&v, r + done + q * W, sizeof v);                                         \
            const VI take = (VI)FIRST_BEFORE(v, vm[q], MIN, NAN_FIRST);                     \
            vm[q] = (VT)(((VI)v & take) | ((VI)vm[q] & ~take));                             \
            vix[q] = (vk[q] & take) | (vix[q] & ~take);                                     \
            vk[q] += (IT)L;                                                                 \
        }                                                                                   \
    for (int q = 0; q < NV; q++)                                                            \
        for (int w = 0; w < W; w++) {                                                       \
            m[q * W + w] = vm[q][w];                                                        \
            ix[q * W + w] = vix[q][w];                                                      \
        }
#else
#define ROW_LANES(T, IT, VT, VI, L, MIN, NAN_FIRST)                                          \
    for (int l = 0; l < L; l++) {                                                           \
        m[l] = r[0];                                                                        \
        ix[l] = 0;                                                                          \
    }                                                                                       \
    for (; done + L <= n; done += L)                                                        \
        for (int l = 0; l < L; l++) {                                                       \
            const T v = r[done + l];                                                        \
            const int take = FIRST_BEFORE(v, m[l], MIN, NAN_FIRST);                         \
            m[l] = take ? v : m[l];                                                         \
            ix[l] = take ? (IT)(done + l) : ix[l];                                          \
        }
#endif

/* Generates NAME(r, n): the index of row r's first element (n >= 1). */
#define DEFINE_FIRST_ROW(NAME, T, IT, VT, VI, L, MIN, NAN_FIRST)                             \
    static int64_t NAME(const T *r, int64_t n)                                              \
    {                                                                                       \
        T m[L];                                                                             \
        IT ix[L];                                                                           \
        int64_t done = 0;                                                                   \
        ROW_LANES(T, IT, VT, VI, L, MIN, NAN_FIRST)                                         \
        T bm = m[0];                                                                        \
        int64_t best = ix[0];                                                               \
        for (int l = 1; l < L; l++)                                                         \
            if (FIRST_BEFORE(m[l], bm, MIN, NAN_FIRST) ||                                   \
                (!FIRST_BEFORE(bm, m[l], MIN, NAN_FIRST) && ix[l] < best)) {                \
                bm = m[l];                                                                  \
                best = ix[l];                                                               \
            }                                                                               \
        for (int64_t k = done; k < n; k++)   /* after every lane's index */                \
            if (FIRST_BEFORE(r[k], bm, MIN, NAN_FIRST)) {                                   \
                bm = r[k];                                                                  \
                best = k;                                                                   \
            }                                                                               \
        return best;                                                                        \
    }

/* Generates NAME(x, n, inner, out): out[k] for each of x's inner positions
 * k, x (n, inner). */
#define DEFINE_FIRST_COLS(NAME, T, MIN, NAN_FIRST)                                           \
    static void NAME(const T *x, int64_t n, int64_t inner, int64_t *out)                    \
    {                                                                                       \
        for (int64_t k0 = 0; k0 < inner; k0 += COLS) {                                      \
            const int64_t w = inner - k0 < COLS ? inner - k0 : COLS;                        \
            T m[COLS];                                                                      \
            int64_t ix[COLS];                                                               \
            memcpy(m, x + k0, (size_t)w * sizeof *m);                                       \
            memset(ix, 0, (size_t)w * sizeof *ix);                                          \
            for (int64_t t = 1; t < n; t++) {                                               \
                const T *row = x + t * inner + k0;                                          \
                for (int64_t k = 0; k < w; k++) {                                           \
                    const T v = row[k];                                                     \
                    const int take = FIRST_BEFORE(v, m[k], MIN, NAN_FIRST);                 \
                    m[k] = take ? v : m[k];                                                 \
                    ix[k] = take ? t : ix[k];                                               \
                }                                                                           \
            }                                                                               \
            memcpy(out + k0, ix, (size_t)w * sizeof *ix);                                   \
        }                                                                                   \
    }

/* The twelve kernels: first_row_{f32,f64}_{max,min}_{nanfirst,nanlast} and
 * first_cols_{f32,f64}_... for the three orders in use. */
DEFINE_FIRST_ROW(first_row_f32_max_nanfirst, float, int32_t, vf32, vi32, 16, 0, 1)
DEFINE_FIRST_ROW(first_row_f32_min_nanlast, float, int32_t, vf32, vi32, 16, 1, 0)
DEFINE_FIRST_ROW(first_row_f32_min_nanfirst, float, int32_t, vf32, vi32, 16, 1, 1)
DEFINE_FIRST_ROW(first_row_f64_max_nanfirst, double, int64_t, vf64, vi64, 8, 0, 1)
DEFINE_FIRST_ROW(first_row_f64_min_nanlast, double, int64_t, vf64, vi64, 8, 1, 0)
DEFINE_FIRST_ROW(first_row_f64_min_nanfirst, double, int64_t, vf64, vi64, 8, 1, 1)
DEFINE_FIRST_COLS(first_cols_f32_max_nanfirst, float, 0, 1)
DEFINE_FIRST_COLS(first_cols_f32_min_nanlast, float, 1, 0)
DEFINE_FIRST_COLS(first_cols_f32_min_nanfirst, float, 1, 1)
DEFINE_FIRST_COLS(first_cols_f64_max_nanfirst, double, 0, 1)
DEFINE_FIRST_COLS(first_cols_f64_min_nanlast, double, 1, 0)
DEFINE_FIRST_COLS(first_cols_f64_min_nanfirst, double, 1, 1)

typedef int64_t (*row_fn32)(const float *, int64_t);
typedef int64_t (*row_fn64)(const double *, int64_t);
typedef void (*cols_fn32)(const float *, int64_t, int64_t, int64_t *);
typedef void (*cols_fn64)(const double *, int64_t, int64_t, int64_t *);

/* By enum tg__first_order. */
static const row_fn32 rows32[] = {first_row_f32_max_nanfirst, first_row_f32_min_nanlast,
                                  first_row_f32_min_nanfirst};
static const row_fn64 rows64[] = {first_row_f64_max_nanfirst, first_row_f64_min_nanlast,
                                  first_row_f64_min_nanfirst};
static const cols_fn32 cols32[] = {first_cols_f32_max_nanfirst, first_cols_f32_min_nanlast,
                                   first_cols_f32_min_nanfirst};
static const cols_fn64 cols64[] = {first_cols_f64_max_nanfirst, first_cols_f64_min_nanlast,
                                   first_cols_f64_min_nanfirst};
static_assert(sizeof rows32 / sizeof *rows32 == TG__FIRST_N, "one kernel per order");

typedef struct first_job {
    const void *x;
    bool f32;
    int order;
    int64_t n, inner;
    int64_t *out;   /* (outer, inner) */
} first_job;

static void first_blocks(void *arg, int64_t lo, int64_t hi)
{
    const first_job *j = arg;
    for (int64_t o = lo; o < hi; o++) {
        const int64_t at = o * j->n * j->inner;
        int64_t *out = j->out + o * j->inner;
        if (j->f32 && j->inner > 1)
            cols32[j->order]((const float *)j->x + at, j->n, j->inner, out);
        else if (j->inner > 1)
            cols64[j->order]((const double *)j->x + at, j->n, j->inner, out);
        else if (j->f32)
            *out = rows32[j->order]((const float *)j->x + at, j->n);
        else
            *out = rows64[j->order]((const double *)j->x + at, j->n);
    }
}

bool tg__first_applies(const tg_tensor *x, int64_t n)
{
    return n > 0 && n <= INT32_MAX && (x->dtype == TG_F32 || x->dtype == TG_F64) &&
           tg_tensor_is_contiguous(x);
}

void tg__first_along(const tg_tensor *x, enum tg__first_order order, int64_t n, int64_t inner,
                     int64_t *out)
{
    TG_ASSERT(tg__first_applies(x, n) && order >= 0 && order < TG__FIRST_N);
    if (tg_tensor_numel(x) == 0) return;   /* no rows (inner or outer is 0) */
    first_job j = {.x = tg_tensor_cdata(x), .f32 = x->dtype == TG_F32, .order = order, .n = n,
                   .inner = inner, .out = out};
    const int64_t outer = tg_tensor_numel(x) / n / inner;
    tg__parallel_range(outer, outer > 1 && outer * n * inner > 16384, first_blocks, &j);
}
