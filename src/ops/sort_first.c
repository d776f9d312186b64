/* src/ops/sort_first.c - the index of a row's first element in an order, in
 * one pass over x: topk and kthvalue with k = 1, argmax and argmin, amax
 * and amin on f32 and f64 tensors in contiguous memory, read in their
 * dtype, and on f16 and bf16 ones, widened to f32 first (exactly: the
 * same order).
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
 * scanned in L lanes (four vectors), then in single vectors into the
 * first: each lane keeps the first best of its elements, and the lanes are
 * merged by (key, index), vector by vector, then as a tree; a row shorter
 * than one vector is scanned element by element.  Along
 * another dim the pass walks t = 0 .. n - 1 and keeps, for up to COLS inner
 * positions at a time, the best so far and its t, reading x in its memory
 * order.  The comparisons are masks, not branches, in GCC's and Clang's
 * vector extension: 16-byte vectors (SSE2, on any x86-64), 32-byte ones
 * (AVX2) or 64-byte ones (AVX-512 F), chosen at run time;
 * TG_FIRST_KERNEL=portable|avx2|avx512 forces one.  The answer is a
 * function of the row alone, so every kernel gives the same indices.
 * amax and amin along the last dim want the value alone: their lanes keep
 * values without indices (tg__extreme_rows), and only a row whose extreme
 * is a zero or a NaN takes the index pass, to give the first one's bits. */
#include <assert.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/sort_internal.h"

/* Columns a block; elements past which a call shares rows among threads. */
enum { COLS = 256, PAR_ELEMENTS = 16384 };

/* Whether a goes before b; a and b are scalars or vectors of one type. */
#define FIRST_BEFORE(a, b, MIN, NAN_FIRST)                                                   \
    ((NAN_FIRST) ? ((b) == (b)) & (((a) != (a)) | ((MIN) ? (a) < (b) : (a) > (b)))           \
                 : ((a) == (a)) & (((b) != (b)) | ((MIN) ? (a) < (b) : (a) > (b))))

#if defined(__x86_64__) && defined(__GNUC__)
#define FIRST_X86 1
#define FIRST_AVX2 __attribute__((target("avx2")))
#define FIRST_AVX512 __attribute__((target("avx512f")))
#endif

static const char *const kernel_names[] = {
    [TG__FIRST_KERNEL_AUTO] = "auto",
    [TG__FIRST_KERNEL_PORTABLE] = "portable",
    [TG__FIRST_KERNEL_AVX2] = "avx2",
    [TG__FIRST_KERNEL_AVX512] = "avx512",
};

bool tg__first_kernel_available(tg__first_kernel_id k)
{
    if (k == TG__FIRST_KERNEL_PORTABLE) return true;
#ifdef FIRST_X86
    __builtin_cpu_init();
    if (k == TG__FIRST_KERNEL_AVX2)
        return tg__isa_allows(TG__ISA_AVX2) && __builtin_cpu_supports("avx2");
    if (k == TG__FIRST_KERNEL_AVX512)
        return tg__isa_allows(TG__ISA_AVX512) && __builtin_cpu_supports("avx512f");
#endif
    return false;
}

const char *tg__first_kernel_name(tg__first_kernel_id k)
{
    return k >= TG__FIRST_KERNEL_AUTO && k <= TG__FIRST_KERNEL_AVX512 ? kernel_names[k] : "?";
}

static bool available(int k) { return tg__first_kernel_available((tg__first_kernel_id)k); }

tg__first_kernel_id tg__first_kernel_get(void)
{
    static atomic_flag told = ATOMIC_FLAG_INIT;
    const int best = available(TG__FIRST_KERNEL_AVX512) ? TG__FIRST_KERNEL_AVX512
                     : available(TG__FIRST_KERNEL_AVX2) ? TG__FIRST_KERNEL_AVX2
                                                        : TG__FIRST_KERNEL_PORTABLE;
    return (tg__first_kernel_id)tg__kernel_from_env("TG_FIRST_KERNEL", "a first-position",
                                                    kernel_names, TG__FIRST_KERNEL_AVX512 + 1,
                                                    available, best, &told);
}

/* ---- the kernels ------------------------------------------------------------------- */

typedef int64_t (*row_fn)(const void *r, int64_t n, int order);
typedef void (*cols_fn)(const void *x, int64_t n, int64_t inner, int order, int64_t *out);

/* The orders' (min, nan_first), by enum tg__first_order. */
#define ORDER_MIN(o) ((o) != TG__FIRST_MAX_NAN_FIRST)
#define ORDER_NAN_FIRST(o) ((o) != TG__FIRST_MIN_NAN_LAST)

#ifdef __GNUC__
/* Generates NAME_body (row r of n >= 1 elements of T in lanes of four VT
 * vectors, VI their indices) and NAME (it for each order, so that the
 * order's tests are constants in the loop). */
#define DEFINE_ROW(NAME, ATTR, T, IT, VT, VI)                                                \
    ATTR static inline __attribute__((always_inline)) int64_t NAME##_body(                 \
        const T *r, int64_t n, const int min, const int nan_first)                          \
    {                                                                                       \
        enum { W = sizeof(VT) / sizeof(T), L = 4 * W };                                     \
        VT vm[4], v;                                                                        \
        VI vix[4], vk[4];                                                                   \
        for (int q = 0; q < 4; q++)                                                         \
            for (int w = 0; w < W; w++) {                                                   \
                vm[q][w] = r[0];                                                            \
                vix[q][w] = 0;                                                              \
                vk[q][w] = (IT)(q * W + w);                                                 \
            }                                                                               \
        int64_t done = 0;                                                                   \
        for (; done + L <= n; done += L)                                                    \
            for (int q = 0; q < 4; q++) {                                                   \
                memcpy(&v, r + done + q * W, sizeof v);                                     \
                const VI take = (VI)FIRST_BEFORE(v, vm[q], min, nan_first);                 \
                vm[q] = (VT)(((VI)v & take) | ((VI)vm[q] & ~take));                         \
                vix[q] = (vk[q] & take) | (vix[q] & ~take);                                 \
                vk[q] += (IT)L;                                                             \
            }                                                                               \
        for (; done + W <= n; done += W) {   /* single vectors into lane 0 */               \
            memcpy(&v, r + done, sizeof v);                                                 \
            const VI take = (VI)FIRST_BEFORE(v, vm[0], min, nan_first);                     \
            vm[0] = (VT)(((VI)v & take) | ((VI)vm[0] & ~take));                             \
            vix[0] = (vk[0] & take) | (vix[0] & ~take);                                     \
            vk[0] += (IT)W;                                                                 \
        }                                                                                   \
        T bm = r[0];                                                                        \
        int64_t best = 0;                                                                   \
        if (done > 0) {   /* merge the lanes by (key, index): the vectors, then a tree */   \
            for (int q = 1; q < 4; q++) {                                                   \
                const VI take = (VI)FIRST_BEFORE(vm[q], vm[0], min, nan_first) |            \
                                ((VI)~FIRST_BEFORE(vm[0], vm[q], min, nan_first) &          \
                                 (VI)(vix[q] < vix[0]));                                    \
                vm[0] = (VT)(((VI)vm[q] & take) | ((VI)vm[0] & ~take));                     \
                vix[0] = (vix[q] & take) | (vix[0] & ~take);                                \
            }                                                                               \
            T lm[W];                                                                        \
            IT li[W];                                                                       \
            memcpy(lm, &vm[0], sizeof lm);                                                  \
            memcpy(li, &vix[0], sizeof li);                                                 \
            for (int h = W / 2; h >= 1; h /= 2)                                             \
                for (int w = 0; w < h; w++)                                                 \
                    if (FIRST_BEFORE(lm[w + h], lm[w], min, nan_first) ||                   \
                        (!FIRST_BEFORE(lm[w], lm[w + h], min, nan_first) && li[w + h] < li[w])) {\
                        lm[w] = lm[w + h];                                                  \
                        li[w] = li[w + h];                                                  \
                    }                                                                       \
            bm = lm[0];                                                                     \
            best = li[0];                                                                   \
        }                                                                                   \
        for (int64_t k = done; k < n; k++)   /* after every lane's index */                \
            if (FIRST_BEFORE(r[k], bm, min, nan_first)) {                                   \
                bm = r[k];                                                                  \
                best = k;                                                                   \
            }                                                                               \
        return best;                                                                        \
    }                                                                                       \
    ATTR static int64_t NAME(const void *r, int64_t n, int order)                           \
    {                                                                                       \
        if (order == TG__FIRST_MAX_NAN_FIRST) return NAME##_body(r, n, 0, 1);               \
        if (order == TG__FIRST_MIN_NAN_LAST) return NAME##_body(r, n, 1, 0);                \
        return NAME##_body(r, n, 1, 1);                                                     \
    }

/* Generates NAME_body (out[k] for each inner position k of x (n, inner),
 * COLS columns at a time, VT vectors of them and a scalar tail) and NAME
 * (it for each order). */
#define DEFINE_COLS(NAME, ATTR, T, IT, VT, VI)                                               \
    ATTR static inline __attribute__((always_inline)) void NAME##_body(                    \
        const T *x, int64_t n, int64_t inner, int64_t *out, const int min,                  \
        const int nan_first)                                                                \
    {                                                                                       \
        enum { W = sizeof(VT) / sizeof(T), NV = COLS / W };                                 \
        for (int64_t k0 = 0; k0 < inner; k0 += COLS) {                                      \
            const int64_t w = inner - k0 < COLS ? inner - k0 : COLS, nv = w / W;            \
            VT m[NV], v;                                                                    \
            VI ix[NV];                                                                      \
            T ms[W];                                                                        \
            int64_t is[W];                                                                  \
            memcpy(m, x + k0, (size_t)(nv * W) * sizeof(T));                                \
            memset(ix, 0, sizeof ix);                                                       \
            for (int64_t k = nv * W; k < w; k++) {                                          \
                ms[k - nv * W] = x[k0 + k];                                                 \
                is[k - nv * W] = 0;                                                         \
            }                                                                               \
            for (int64_t t = 1; t < n; t++) {                                               \
                const T *row = x + t * inner + k0;                                          \
                const VI tv = (VI){0} + (IT)t;                                              \
                for (int64_t q = 0; q < nv; q++) {                                          \
                    memcpy(&v, row + q * W, sizeof v);                                      \
                    const VI take = (VI)FIRST_BEFORE(v, m[q], min, nan_first);              \
                    m[q] = (VT)(((VI)v & take) | ((VI)m[q] & ~take));                       \
                    ix[q] = (tv & take) | (ix[q] & ~take);                                  \
                }                                                                           \
                for (int64_t k = nv * W; k < w; k++)                                        \
                    if (FIRST_BEFORE(row[k], ms[k - nv * W], min, nan_first)) {             \
                        ms[k - nv * W] = row[k];                                            \
                        is[k - nv * W] = t;                                                 \
                    }                                                                       \
            }                                                                               \
            for (int64_t k = 0; k < w; k++)                                                 \
                out[k0 + k] = k < nv * W ? (int64_t)ix[k / W][k % W] : is[k - nv * W];      \
        }                                                                                   \
    }                                                                                       \
    ATTR static void NAME(const void *x, int64_t n, int64_t inner, int order, int64_t *out) \
    {                                                                                       \
        if (order == TG__FIRST_MAX_NAN_FIRST) NAME##_body(x, n, inner, out, 0, 1);          \
        else if (order == TG__FIRST_MIN_NAN_LAST) NAME##_body(x, n, inner, out, 1, 0);      \
        else NAME##_body(x, n, inner, out, 1, 1);                                           \
    }

/* Generates NAME_body (the extreme value of row r, n >= 1, or a NaN when
 * the row holds one: the lanes keep values only, each with a plain a > b
 * (a < b) step, and a NaN anywhere sets a flag beside them instead of
 * entering the comparison, so a lane's chain is one compare and one blend;
 * the lanes merge in any order, as equal numbers other than the zeros have
 * the same bits and a zero extreme takes the index pass) and NAME (it for
 * min or max, into *out). */
#define DEFINE_VALUE(NAME, ATTR, T, VT, VI)                                                 \
    ATTR static inline __attribute__((always_inline)) T NAME##_body(const T *r, int64_t n,  \
                                                                     const int min)         \
    {                                                                                       \
        enum { W = sizeof(VT) / sizeof(T), L = 4 * W };                                     \
        VT vm[4], v;                                                                        \
        VI nan = {0};                                                                       \
        for (int q = 0; q < 4; q++)                                                         \
            for (int w = 0; w < W; w++) vm[q][w] = r[0];                                    \
        int64_t done = 0;                                                                   \
        for (; done + L <= n; done += L)                                                    \
            for (int q = 0; q < 4; q++) {                                                   \
                memcpy(&v, r + done + q * W, sizeof v);                                     \
                const VI take = (VI)(min ? v < vm[q] : v > vm[q]);                          \
                vm[q] = (VT)(((VI)v & take) | ((VI)vm[q] & ~take));                         \
                nan |= (VI)(v != v);                                                        \
            }                                                                               \
        for (; done + W <= n; done += W) {                                                  \
            memcpy(&v, r + done, sizeof v);                                                 \
            const VI take = (VI)(min ? v < vm[0] : v > vm[0]);                              \
            vm[0] = (VT)(((VI)v & take) | ((VI)vm[0] & ~take));                             \
            nan |= (VI)(v != v);                                                            \
        }                                                                                   \
        int seen = 0;   /* a NaN r[0] stays in every lane and comes out */                  \
        for (int w = 0; w < W; w++) seen |= nan[w] != 0;                                    \
        if (seen) return (T)NAN;   /* the caller finds the first one */                     \
        for (int q = 1; q < 4; q++) {   /* no NaN: any order of merging */                  \
            const VI take = (VI)(min ? vm[q] < vm[0] : vm[q] > vm[0]);                      \
            vm[0] = (VT)(((VI)vm[q] & take) | ((VI)vm[0] & ~take));                         \
        }                                                                                   \
        T lane[W];                                                                          \
        memcpy(lane, &vm[0], sizeof lane);                                                  \
        for (int h = W / 2; h >= 1; h /= 2)                                                 \
            for (int w = 0; w < h; w++)                                                     \
                if (min ? lane[w + h] < lane[w] : lane[w + h] > lane[w])                    \
                    lane[w] = lane[w + h];                                                  \
        T bm = lane[0];                                                                     \
        for (int64_t k = done; k < n; k++)                                                  \
            if (FIRST_BEFORE(r[k], bm, min, 1)) bm = r[k];                                  \
        return bm;                                                                          \
    }                                                                                       \
    ATTR static void NAME(const void *r, int64_t n, int min, void *out)                     \
    {                                                                                       \
        *(T *)out = min ? NAME##_body(r, n, 1) : NAME##_body(r, n, 0);                      \
    }

/* The vectors: B bytes of f32 with i32 indices, of f64 with i64 ones. */
#define DEFINE_VECTORS(B)                                                                    \
    typedef float vf32_##B __attribute__((vector_size(B)));                                \
    typedef int32_t vi32_##B __attribute__((vector_size(B)));                              \
    typedef double vf64_##B __attribute__((vector_size(B)));                               \
    typedef int64_t vi64_##B __attribute__((vector_size(B)));
DEFINE_VECTORS(16)
DEFINE_VECTORS(32)
DEFINE_VECTORS(64)

/* row_{f32,f64}_{portable,avx2,avx512}, cols_... and value_... */
DEFINE_ROW(row_f32_portable, , float, int32_t, vf32_16, vi32_16)
DEFINE_ROW(row_f64_portable, , double, int64_t, vf64_16, vi64_16)
DEFINE_COLS(cols_f32_portable, , float, int32_t, vf32_16, vi32_16)
DEFINE_COLS(cols_f64_portable, , double, int64_t, vf64_16, vi64_16)
DEFINE_VALUE(value_f32_portable, , float, vf32_16, vi32_16)
DEFINE_VALUE(value_f64_portable, , double, vf64_16, vi64_16)
#ifdef FIRST_X86
DEFINE_ROW(row_f32_avx2, FIRST_AVX2, float, int32_t, vf32_32, vi32_32)
DEFINE_ROW(row_f64_avx2, FIRST_AVX2, double, int64_t, vf64_32, vi64_32)
DEFINE_COLS(cols_f32_avx2, FIRST_AVX2, float, int32_t, vf32_32, vi32_32)
DEFINE_COLS(cols_f64_avx2, FIRST_AVX2, double, int64_t, vf64_32, vi64_32)
DEFINE_VALUE(value_f32_avx2, FIRST_AVX2, float, vf32_32, vi32_32)
DEFINE_VALUE(value_f64_avx2, FIRST_AVX2, double, vf64_32, vi64_32)
DEFINE_ROW(row_f32_avx512, FIRST_AVX512, float, int32_t, vf32_64, vi32_64)
DEFINE_ROW(row_f64_avx512, FIRST_AVX512, double, int64_t, vf64_64, vi64_64)
DEFINE_COLS(cols_f32_avx512, FIRST_AVX512, float, int32_t, vf32_64, vi32_64)
DEFINE_COLS(cols_f64_avx512, FIRST_AVX512, double, int64_t, vf64_64, vi64_64)
DEFINE_VALUE(value_f32_avx512, FIRST_AVX512, float, vf32_64, vi32_64)
DEFINE_VALUE(value_f64_avx512, FIRST_AVX512, double, vf64_64, vi64_64)
#endif

#else /* not GCC or Clang: the same scans element by element */

#define DEFINE_ROW(NAME, T)                                                                  \
    static int64_t NAME(const void *rv, int64_t n, int order)                               \
    {                                                                                       \
        const T *r = rv;                                                                    \
        const int min = ORDER_MIN(order), nan_first = ORDER_NAN_FIRST(order);               \
        int64_t best = 0;                                                                   \
        for (int64_t k = 1; k < n; k++)                                                     \
            if (FIRST_BEFORE(r[k], r[best], min, nan_first)) best = k;                      \
        return best;                                                                        \
    }
#define DEFINE_COLS(NAME, T)                                                                 \
    static void NAME(const void *xv, int64_t n, int64_t inner, int order, int64_t *out)     \
    {                                                                                       \
        const T *x = xv;                                                                    \
        const int min = ORDER_MIN(order), nan_first = ORDER_NAN_FIRST(order);               \
        for (int64_t k = 0; k < inner; k++) out[k] = 0;                                     \
        for (int64_t t = 1; t < n; t++)                                                     \
            for (int64_t k = 0; k < inner; k++)                                             \
                if (FIRST_BEFORE(x[t * inner + k], x[out[k] * inner + k], min, nan_first))  \
                    out[k] = t;                                                             \
    }
#define DEFINE_VALUE(NAME, T)                                                                \
    static void NAME(const void *rv, int64_t n, int min, void *out)                         \
    {                                                                                       \
        const T *r = rv;                                                                    \
        T bm = r[0];                                                                        \
        for (int64_t k = 1; k < n; k++)                                                     \
            if (FIRST_BEFORE(r[k], bm, min, 1)) bm = r[k];                                  \
        *(T *)out = bm;                                                                     \
    }
DEFINE_ROW(row_f32_portable, float)
DEFINE_ROW(row_f64_portable, double)
DEFINE_COLS(cols_f32_portable, float)
DEFINE_COLS(cols_f64_portable, double)
DEFINE_VALUE(value_f32_portable, float)
DEFINE_VALUE(value_f64_portable, double)
#endif

/* By tg__first_kernel_id - 1: [f32, f64]. */
static const row_fn rows_by_kernel[][2] = {
    {row_f32_portable, row_f64_portable},
#ifdef FIRST_X86
    {row_f32_avx2, row_f64_avx2},
    {row_f32_avx512, row_f64_avx512},
#endif
};
typedef void (*value_fn)(const void *r, int64_t n, int min, void *out);
static const value_fn values_by_kernel[][2] = {
    {value_f32_portable, value_f64_portable},
#ifdef FIRST_X86
    {value_f32_avx2, value_f64_avx2},
    {value_f32_avx512, value_f64_avx512},
#endif
};
static const cols_fn cols_by_kernel[][2] = {
    {cols_f32_portable, cols_f64_portable},
#ifdef FIRST_X86
    {cols_f32_avx2, cols_f64_avx2},
    {cols_f32_avx512, cols_f64_avx512},
#endif
};

/* The kernel in use as a row of the tables above. */
static int kernel_row(void)
{
    return tg__first_kernel_get() - TG__FIRST_KERNEL_PORTABLE;
}

typedef struct first_job {
    const char *x;
    size_t es;         /* bytes an element */
    int order;
    int64_t n, inner;
    row_fn row;
    cols_fn cols;
    int64_t *out;      /* (outer, inner) */
} first_job;

static void first_blocks(void *arg, int64_t lo, int64_t hi)
{
    const first_job *j = arg;
    for (int64_t o = lo; o < hi; o++) {
        const char *x = j->x + (size_t)(o * j->n * j->inner) * j->es;
        if (j->inner > 1) j->cols(x, j->n, j->inner, j->order, j->out + o * j->inner);
        else j->out[o] = j->row(x, j->n, j->order);
    }
}

bool tg__first_applies(const tg_tensor *x, int64_t n)
{
    const tg_dtype dt = x->dtype;
    return n > 0 && n <= INT32_MAX &&
           (dt == TG_F32 || dt == TG_F64 || dt == TG_F16 || dt == TG_BF16) &&
           tg_tensor_is_contiguous(x);
}

int tg__first_along(const tg_tensor *x, enum tg__first_order order, int64_t n, int64_t inner,
                    int64_t *out)
{
    TG_ASSERT(tg__first_applies(x, n) && order >= 0 && order < TG__FIRST_N);
    const int64_t numel = tg_tensor_numel(x);
    if (numel == 0) return TG_OK;   /* no rows (inner or outer is 0) */
    const void *data = tg_tensor_cdata(x);
    float *wide = NULL;   /* a half x widened to f32: the same order, exactly */
    if (x->dtype == TG_F16 || x->dtype == TG_BF16) {
        wide = tg__malloc((size_t)numel * sizeof *wide);
        if (!wide) return TG_ENOMEM;
        tg__half_to_f32_n(x->dtype, data, wide, numel, true);
        data = wide;
    }
    const int kernel = kernel_row(), f64 = x->dtype == TG_F64;
    first_job j = {.x = data, .es = f64 ? 8 : 4, .order = order, .n = n, .inner = inner,
                   .row = rows_by_kernel[kernel][f64], .cols = cols_by_kernel[kernel][f64],
                   .out = out};
    const int64_t outer = numel / n / inner;
    tg__parallel_range(outer, outer > 1 && numel > PAR_ELEMENTS, first_blocks, &j);
    free(wide);
    return TG_OK;
}

/* tg__extreme_rows' job: rows [lo, hi) of x (rows, n) into out. */
typedef struct extreme_job {
    const char *x;
    size_t es;
    int64_t n;
    bool min;
    value_fn value;
    row_fn row;
    char *out;
} extreme_job;

static void extreme_rows(void *arg, int64_t lo, int64_t hi)
{
    const extreme_job *j = arg;
    for (int64_t o = lo; o < hi; o++) {
        const char *r = j->x + (size_t)(o * j->n) * j->es;
        char *out = j->out + (size_t)o * j->es;
        j->value(r, j->n, j->min, out);
        double v;   /* the extreme as a double, to test it */
        if (j->es == 4) {
            float f;
            memcpy(&f, out, 4);
            v = f;
        } else {
            memcpy(&v, out, 8);
        }
        if (v == 0 || v != v) {   /* which zero, which NaN: the first one's */
            const int64_t at = j->row(r, j->n, j->min ? TG__FIRST_MIN_NAN_FIRST
                                                      : TG__FIRST_MAX_NAN_FIRST);
            memcpy(out, r + (size_t)at * j->es, j->es);
        }
    }
}

bool tg__extreme_applies(const tg_tensor *x, int64_t n)
{
    return tg__first_applies(x, n) && (x->dtype == TG_F32 || x->dtype == TG_F64);
}

void tg__extreme_rows(const tg_tensor *x, bool min, int64_t n, void *out)
{
    TG_ASSERT(tg__extreme_applies(x, n));
    const int64_t rows = tg_tensor_numel(x) / n;
    const int kernel = kernel_row(), f64 = x->dtype == TG_F64;
    extreme_job j = {.x = tg_tensor_cdata(x), .es = f64 ? 8 : 4, .n = n, .min = min,
                     .value = values_by_kernel[kernel][f64], .row = rows_by_kernel[kernel][f64],
                     .out = out};
    tg__parallel_range(rows, rows > 1 && rows * n > PAR_ELEMENTS, extreme_rows, &j);
}
