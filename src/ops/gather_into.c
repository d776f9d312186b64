/* src/ops/gather_into.c - index_select's and gather's input gradients
 * added straight into the engine's pending sum (their backward_into,
 * tapegrad/op.h; declared in gather_internal.h).
 *
 * The backward would make dx = index_add(zeros_like(x), dim, index, g)
 * (scatter_add for gather), x's size, and the engine would add it to the
 * pending sum acc.  Here only the elements the index names are touched:
 * each one's terms are summed from +0 in the backward's order (g's order
 * along dim, rounded to the dtype at each term as index_add's kernels
 * round), then that sum is added to acc's element as the engine adds
 * (tg__sum_term), so the bits are those of the backward and the sum.
 *
 * index_select moves whole rows: the elements after dim (inner of them)
 * are contiguous in acc, and in g once g is made contiguous, so each term
 * is a row added into a row, a loop the compiler vectorises for f32 and
 * f64; f16 and bf16 rows go through f32 (tg__convert_n) and are rounded
 * back after each add, as c10's half += half.  Rows picked once (the
 * usual embedding-like pick) skip the partial sums: acc's row takes
 * +0 + g's row directly. */
#include <stdlib.h>
#include <string.h>

#include "ops/gather_internal.h"
#include "tapegrad/ops.h"

/* How add_row adds s's row into d's: a row picked once straight into
 * acc's (+0 + s, the term's sum from +0, then the engine's add), a term
 * into its partial sum (index_add's tg__add_to), a partial sum into acc's
 * row (the engine's add, tg__add_over's a + b). */
typedef enum row_mode { ROW_ONCE, ROW_TERM, ROW_SUM } row_mode;

/* The rows go four floats or two doubles at a time in GCC / clang vector
 * types (16 bytes: SSE2, every x86-64), two vectors per step, then the
 * rest one element at a time: at -O2 the compiler's own vectoriser takes
 * no loop whose count is not a multiple of its width.  A vector compare
 * gives all-ones lanes where it holds; tg__add_to's NaN rule is a select
 * by that mask.  The lanes compute what the scalar loop would. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));
typedef int64_t v2l __attribute__((vector_size(16)));

static v4f add_v4f(v4f d, v4f s, row_mode m)
{
    if (m == ROW_ONCE) return d + ((v4f){0} + s);
    if (m == ROW_SUM) return d + s;
    const v4i nan = d != d;
    return (v4f)(((v4i)(d + d) & nan) | ((v4i)(d + s) & ~nan));
}

static v2d add_v2d(v2d d, v2d s, row_mode m)
{
    if (m == ROW_ONCE) return d + ((v2d){0} + s);
    if (m == ROW_SUM) return d + s;
    const v2l nan = d != d;
    return (v2d)(((v2l)(d + d) & nan) | ((v2l)(d + s) & ~nan));
}

static void add_row_f(float *restrict d, const float *restrict s, int64_t n, row_mode m)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v4f a[2], b[2];
        memcpy(a, d + i, sizeof a);
        memcpy(b, s + i, sizeof b);
        a[0] = add_v4f(a[0], b[0], m);
        a[1] = add_v4f(a[1], b[1], m);
        memcpy(d + i, a, sizeof a);
    }
    for (; i < n; i++)
        d[i] = m == ROW_ONCE ? d[i] + (0.0f + s[i])
             : m == ROW_SUM  ? d[i] + s[i]
                             : tg__add_to_f(d[i], s[i]);
}

static void add_row_d(double *restrict d, const double *restrict s, int64_t n, row_mode m)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v2d a[2], b[2];
        memcpy(a, d + i, sizeof a);
        memcpy(b, s + i, sizeof b);
        a[0] = add_v2d(a[0], b[0], m);
        a[1] = add_v2d(a[1], b[1], m);
        memcpy(d + i, a, sizeof a);
    }
    for (; i < n; i++)
        d[i] = m == ROW_ONCE ? d[i] + (0.0 + s[i])
             : m == ROW_SUM  ? d[i] + s[i]
                             : tg__add_to(d[i], s[i]);
}

/* Scratch for add_row's f16 / bf16 rows: two rows of f32. */
typedef struct row_tmp {
    float *a, *b;
} row_tmp;

/* d's row += s's row (n elements of dtype dt) as mode m says; f16 and
 * bf16 are added in f32 and rounded back once (+0 + a half is exact in
 * f32, so ROW_ONCE rounds once too). */
static void add_row(tg_dtype dt, void *d, const void *s, int64_t n, row_mode m, row_tmp *t)
{
    if (dt == TG_F32) {
        add_row_f(d, s, n, m);
    } else if (dt == TG_F64) {
        add_row_d(d, s, n, m);
    } else {
        tg__convert_n(dt, d, TG_F32, t->a, n);
        tg__convert_n(dt, s, TG_F32, t->b, n);
        add_row_f(t->a, t->b, n, m);
        tg__convert_n(TG_F32, t->a, dt, d, n);
    }
}

/* The slot of each distinct index value (its first occurrence's rank) in
 * slot[0..extent) (-1: not picked), and whether any value repeats. */
static bool assign_slots(const int64_t *v, int64_t len, int64_t *slot, int64_t extent,
                         int64_t *n_slots)
{
    bool repeats = false;
    int64_t n = 0;
    for (int64_t x = 0; x < extent; x++) slot[x] = -1;
    for (int64_t j = 0; j < len; j++) {
        if (slot[v[j]] >= 0) repeats = true;
        else slot[v[j]] = n++;
    }
    *n_slots = n;
    return repeats;
}

int tg__index_select_into(tg_tensor *acc, const tg_tensor *g, int dim, const int64_t *v,
                          int64_t len)
{
    int64_t gs[TG_MAX_DIMS], as[TG_MAX_DIMS];
    const int nd = tg__gather_shape(g, gs);
    tg__gather_shape(acc, as);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < dim; d++) outer *= gs[d];
    for (int d = dim + 1; d < nd; d++) inner *= gs[d];
    const int64_t extent = as[dim];
    if (outer == 0 || inner == 0 || len == 0) return TG_OK;   /* so extent > 0 too */
    const tg_dtype dt = acc->dtype;
    const size_t es = tg_dtype_size(dt), row = (size_t)inner * es;
    tg_tensor *gc = NULL;
    TG_TRY(tg_contiguous(&gc, (tg_tensor *)g));   /* grad mode is off: not recorded */
    int64_t *slot = tg__malloc((size_t)extent * sizeof *slot), n_slots = 0;
    row_tmp t = {0};
    if (tg__dtype_is_half(dt)) {
        t.a = tg__malloc((size_t)inner * sizeof *t.a);
        t.b = tg__malloc((size_t)inner * sizeof *t.b);
    }
    char *sums = NULL;   /* (n_slots, inner): one line's partial sums */
    int rc = slot && (!tg__dtype_is_half(dt) || (t.a && t.b)) ? TG_OK : TG_ENOMEM;
    const bool repeats = rc == TG_OK && assign_slots(v, len, slot, extent, &n_slots);
    if (repeats && !(sums = tg__malloc((size_t)n_slots * row))) rc = TG_ENOMEM;
    char *ad = (char *)acc->storage->data + (size_t)acc->offset * es;
    const char *gd = tg_tensor_cdata(gc);
    for (int64_t a = 0; rc == TG_OK && a < outer; a++) {
        char *arow = ad + (size_t)(a * extent) * row;   /* acc's (a, 0, :) */
        const char *grow = gd + (size_t)(a * len) * row;
        if (!repeats) {
            for (int64_t j = 0; j < len; j++)
                add_row(dt, arow + (size_t)v[j] * row, grow + (size_t)j * row, inner, ROW_ONCE,
                        &t);
            continue;
        }
        memset(sums, 0, (size_t)n_slots * row);   /* +0 in every float dtype */
        for (int64_t j = 0; j < len; j++)
            add_row(dt, sums + (size_t)slot[v[j]] * row, grow + (size_t)j * row, inner, ROW_TERM,
                    &t);
        for (int64_t j = 0; j < len; j++) {
            if (slot[v[j]] < 0) continue;   /* added already */
            add_row(dt, arow + (size_t)v[j] * row, sums + (size_t)slot[v[j]] * row, inner,
                    ROW_SUM, &t);
            slot[v[j]] = -1 - slot[v[j]];
        }
        for (int64_t j = 0; j < len; j++)   /* the slots back for the next line */
            if (slot[v[j]] < 0) slot[v[j]] = -1 - slot[v[j]];
    }
    free(sums);
    free(slot);
    free(t.a);
    free(t.b);
    tg_tensor_release(gc);
    return rc;
}

/* gather's: for each line of the index along dim (its other coordinates
 * fixed), whose terms all land in one line of acc, the terms of each
 * value are summed in the line's order, then added to acc's elements. */
int tg__gather_into(tg_tensor *acc, const tg_tensor *g, int dim, const tg_tensor *idx)
{
    int64_t is[TG_MAX_DIMS], as[TG_MAX_DIMS], ast[TG_MAX_DIMS];
    const int nd = tg__gather_shape(idx, is);
    tg__gather_shape(acc, as);
    ast[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) ast[d] = ast[d + 1] * as[d + 1];
    const int64_t m = tg_tensor_numel(idx), len = is[dim], extent = as[dim];
    if (m == 0) return TG_OK;
    const tg_dtype dt = acc->dtype;
    /* m > 0, so len > 0 and extent > 0 (the values are in [0, extent)) */
    double *gv = tg__malloc((size_t)m * sizeof *gv);
    double *sum = tg__malloc((size_t)extent * sizeof *sum);
    int64_t *iv = tg__malloc((size_t)m * sizeof *iv);
    int64_t *seen = tg__malloc((size_t)len * sizeof *seen);
    unsigned char *hit = tg__calloc((size_t)extent, 1);
    int rc = gv && sum && iv && seen && hit ? TG_OK : TG_ENOMEM;
    if (rc == TG_OK) {
        tg__gather(g, TG_F64, gv);   /* row-major, the index's order */
        tg__gather(idx, TG_I64, iv);
    }
    int64_t stride = 1;   /* of dim in the index's row-major order */
    for (int d = dim + 1; d < nd; d++) stride *= is[d];
    char *ad = (char *)acc->storage->data;
    for (int64_t line = 0; rc == TG_OK && line < m / len; line++) {
        /* the line's first position p0 in the index, and acc's offset base
         * of its coordinates but dim's */
        const int64_t o = line / stride, b = line % stride, p0 = o * len * stride + b;
        int64_t base = acc->offset, rest = p0;
        for (int d = nd - 1; d >= 0; d--) {
            if (d != dim) base += (rest % is[d]) * ast[d];
            rest /= is[d];
        }
        int64_t n_seen = 0;
        for (int64_t j = 0; j < len; j++) {
            const int64_t p = p0 + j * stride, x = iv[p];
            if (!hit[x]) {
                hit[x] = 1;
                sum[x] = 0.0;
                seen[n_seen++] = x;
            }
            sum[x] = tg__sum_term(dt, sum[x], gv[p]);
        }
        for (int64_t q = 0; q < n_seen; q++) {
            const int64_t x = seen[q], e = base + x * ast[dim];
            tg_dtype_store(dt, ad, e, tg__sum_term(dt, tg_dtype_load(dt, ad, e), sum[x]));
            hit[x] = 0;
        }
    }
    free(gv);
    free(sum);
    free(iv);
    free(seen);
    free(hit);
    return rc;
}
