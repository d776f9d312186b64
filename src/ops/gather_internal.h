/* src/ops/gather_internal.h - the kernels of the indexing ops
 * (src/ops/gather_run.c, gather_simd.c) that src/ops/gather.c calls: the
 * picks (gather, index_select) and the adds (scatter_add, index_add),
 * read through x's strides and shared among threads over disjoint
 * elements of the result. */
#ifndef TAPEGRAD_OPS_GATHER_INTERNAL_H
#define TAPEGRAD_OPS_GATHER_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "core/core.h"

/* The index kernels (src/ops/gather_simd.c): gather's checked picks along
 * a contiguous line of x and scatter_add's checked lines of adds; the
 * same bits from each. */
typedef enum tg__index_kernel {
    TG__INDEX_KERNEL_AUTO = 0,   /* not a kernel: the name table's first entry */
    TG__INDEX_KERNEL_PORTABLE,   /* C, one value at a time */
    TG__INDEX_KERNEL_AVX2,       /* four values per AVX2 gather */
    TG__INDEX_KERNEL_AVX512,     /* eight values per AVX-512 gather */
} tg__index_kernel;

/* True when this CPU runs kernel k (PORTABLE: always). */
bool tg__index_kernel_available(tg__index_kernel k);
/* "portable", "avx2", "avx512"; "auto", or "?" for another value (static). */
const char *tg__index_kernel_name(tg__index_kernel k);
/* TG_INDEX_KERNEL=portable|avx2|avx512 when this CPU runs it, else the best
 * it runs (another value is reported once on stderr).  Read by the calling
 * thread at each op. */
tg__index_kernel tg__index_kernel_get(void);
/* out[i] = xb[v[i]] (elements of es bytes, their bits) for i < n, each
 * v[i] checked to be in [0, extent) in the same pass; a value out of
 * range reads nothing outside [xb, xb + extent).  False when a value is
 * out of range (out is then partly written). */
bool tg__pick_line_checked(tg__index_kernel kern, size_t es, void *out, const void *xb,
                           const int64_t *v, int64_t n, int64_t extent);

/* A sum s plus a term e: s + e, s's NaN (quieted) when both are NaN, as
 * x86's addition keeps its first operand's, whatever order the compiler
 * emits.  One per accumulating type. */
static inline double tg__add_to(double s, double e)
{
    return isnan(s) ? s + s : s + e;
}

static inline float tg__add_to_f(float s, float e)
{
    return isnan(s) ? s + s : s + e;
}

/* An element s of a sum of gradients plus a term e of it, as the engine's
 * sum (tg__add_over) adds them: in f64 for f64, else in f32 (a double sum
 * of two floats rounded to float is their f32 sum) and for f16 / bf16
 * then rounded to the dtype; s's NaN (quieted) when both are NaN.  For the
 * backward_into (tapegrad/op.h) of the ops that pick elements by index,
 * which add their terms one element at a time. */
static inline double tg__sum_term(tg_dtype dt, double s, double e)
{
    const double r = tg__add_to(s, e);
    if (dt == TG_F64) return r;
    return tg__round_to(dt, (double)(float)r);
}

/* One line of scatter_add's adds: r[v[q]] = tg__add_to_f(r[v[q]], s[q])
 * (tg__add_to for doubles) for q in [0, n) in order.  When `check`, each
 * value is checked to be in [0, extent) before its term is added: false
 * at a bad one (r is then partly added).  kern: PORTABLE or AVX512 (the
 * vector compare); AVX2 runs the portable loop. */
bool tg__add_line_f(tg__index_kernel kern, float *r, const float *s, const int64_t *v,
                    int64_t n, bool check, int64_t extent);
bool tg__add_line_d(tg__index_kernel kern, double *r, const double *s, const int64_t *v,
                    int64_t n, bool check, int64_t extent);

/* The gather-shaped work of every op: the positions p of ishape (the
 * index's shape, or x's with the index's length at dim for index_select
 * and index_add), each naming x's element with p's coordinates and the
 * index value at dim: v[p] (per_pos) or v[p's coordinate at dim].  A 0-d
 * x counts as shape (1,) with stride 0. */
typedef struct tg__pick {
    const tg_tensor *x;
    int nd, dim;
    bool per_pos;
    bool checks;   /* the kernels check v as they read it (per_pos only) */
    int64_t xshape[TG_MAX_DIMS], xstrides[TG_MAX_DIMS], ishape[TG_MAX_DIMS];
    int64_t m;     /* numel of ishape */
    const int64_t *v;   /* the index values, each in [0, xshape[dim]); the caller's */
} tg__pick;

/* k's x, dim, per_pos, x's shape and strides and the positions' shape
 * ishape (ndim as x's; 1 for a 0-d x) and count; k->v is left NULL. */
void tg__pick_init(tg__pick *k, const tg_tensor *x, int dim, bool per_pos,
                   const int64_t *ishape);
/* *out (oshape, ond dims: numel k->m; x's dtype) = x's elements at k's
 * positions, their bits copied.  TG_ENOMEM; with k->checks, TG_EINVAL
 * with no message and no result when a value of k->v is out of range. */
int tg__pick_gather(const tg__pick *k, int ond, const int64_t *oshape, tg_tensor **out);
/* *out (x's shape and dtype) = x with src's element p (src has the shape
 * k->ishape and x's dtype, any strides) added at position p, each
 * element's terms in p's order, rounded to x's dtype at each term (f16
 * and bf16: added in f32, then rounded; integers wrap modulo 2^bits).
 * TG_ENOMEM; with k->checks, TG_EINVAL with no message and no result when
 * a value of k->v is out of range. */
int tg__pick_scatter_add(const tg__pick *k, const tg_tensor *src, tg_tensor **out);

/* The input gradients of index_select and gather added straight into the
 * engine's pending sum acc (contiguous, of x's shape and dtype; a 0-d acc
 * counts as (1,)), at g's cost (src/ops/gather_into.c): acc +=
 * index_add(zeros_like(acc), dim, v, g) with v[0..len) index_select's
 * values, and acc += scatter_add(zeros_like(acc), dim, idx, g) with idx
 * gather's index (g has its shape, any strides).  Each element's terms are
 * summed from +0 in the backward's order, and the sum added to acc as the
 * engine adds a gradient (tg__sum_term), so the bits are those of the
 * backward and the sum.  The values are in range (the forward checked
 * them).  TG_ENOMEM (acc unchanged). */
int tg__index_select_into(tg_tensor *acc, const tg_tensor *g, int dim, const int64_t *v,
                          int64_t len);
int tg__gather_into(tg_tensor *acc, const tg_tensor *g, int dim, const tg_tensor *idx);

/* t's shape into shape with a 0-d tensor read as (1,): the ops treat it as
 * one element.  Returns the number of dims written. */
static inline int tg__gather_shape(const tg_tensor *t, int64_t *shape)
{
    if (t->ndim == 0) {
        shape[0] = 1;
        return 1;
    }
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    return t->ndim;
}

/* The NULL and dim checks of the entry points of gather, scatter_add,
 * index_select, index_add, scatter and scatter_reduce (has_src: src must not
 * be NULL); dim normalised into *d.  TG_EINVAL naming the argument. */
int tg__gather_public_args(const char *op, tg_tensor **out, const tg_tensor *x, int dim,
                           const tg_tensor *idx, bool has_src, const tg_tensor *src, int *d);

#endif
