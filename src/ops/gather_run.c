/* src/ops/gather_run.c - the picks and adds of the indexing ops
 * (src/ops/gather_internal.h).
 *
 * A pick copies x's element's bits (a whole run of them with memcpy where
 * both sides are contiguous), so a NaN keeps its payload and signalling
 * bit, as torch's copies.  An add adds into the result in its own dtype,
 * one rounding per term in the index's order, as torch's CPU kernels: f16
 * and bf16 terms are added in f32 and each sum rounded to the dtype (c10's
 * half += half); integer terms wrap modulo 2^bits.  Neither kernel
 * copies x through another dtype: both read it through its strides, a run
 * or a block at a time. */
#include <stdatomic.h>
#include <string.h>

#include "ops/gather_internal.h"

/* t's strides, a 0-d t's as (0,). */
static void strides_of(const tg_tensor *t, int64_t *strides)
{
    if (t->ndim == 0) strides[0] = 0;
    else memcpy(strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
}

void tg__pick_init(tg__pick *k, const tg_tensor *x, int dim, bool per_pos,
                   const int64_t *ishape)
{
    *k = (tg__pick){.x = x, .dim = dim, .per_pos = per_pos, .nd = x->ndim > 0 ? x->ndim : 1};
    if (x->ndim == 0) k->xshape[0] = 1;
    else memcpy(k->xshape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    strides_of(x, k->xstrides);
    memcpy(k->ishape, ishape, sizeof(int64_t) * (size_t)k->nd);
    k->m = tg__numel(k->nd, k->ishape);
}

/* x's element as a double, and a double rounded once to dt into element i
 * of a buffer of dt: tg_dtype_load's and tg_dtype_store's bits (the f16
 * and bf16 sums, exact both ways). */
static inline double load_at(tg_dtype dt, const void *base, int64_t i)
{
    if (dt == TG_F32) return ((const float *)base)[i];
    if (dt == TG_F64) return ((const double *)base)[i];
    return tg_dtype_load(dt, base, i);
}

static inline void store_at(tg_dtype dt, void *base, int64_t i, double v)
{
    if (dt == TG_F32) ((float *)base)[i] = (float)v;
    else if (dt == TG_F64) ((double *)base)[i] = v;
    else tg_dtype_store(dt, base, i, v);
}

/* f rounded to the half dtype dt, as a float (exact). */
static inline float round_half(tg_dtype dt, float f)
{
    const uint16_t h = tg__f32_to_half(dt, f);
    return dt == TG_F16 ? tg_f16_to_f32(h) : tg_bf16_to_f32(h);
}

/* The work is shared out in runs of GATHER_RUN elements (the picks and the
 * copy of x) among threads when there are more than GATHER_PAR elements,
 * and in blocks of lines (the adds) when x and the terms hold more than
 * ADD_PAR; each task writes its own elements of the result.  On an idle
 * 2-core host a second thread halves a 512 x 512 gather of f32 (0.1 to
 * 0.05 ms) but slows scatter_add's adds of the same size (0.17 to 0.23 ms),
 * whose lines are short tasks (docs/performance.md). */
enum { GATHER_RUN = 256, GATHER_PAR = 32768, ADD_PAR = 1 << 20 };

/* The coordinates of row-major position p of shape (nd dims). */
static void coords_of(int nd, const int64_t *shape, int64_t p, int64_t *c)
{
    for (int d = nd - 1; d >= 0; d--) {
        c[d] = p % shape[d];
        p /= shape[d];
    }
}

/* The next position's coordinates (row-major), and *at moved with them
 * by strides. */
static void coords_next(int nd, const int64_t *shape, const int64_t *strides, int64_t *c,
                        int64_t *at)
{
    for (int d = nd - 1; d >= 0; d--) {
        if (++c[d] < shape[d]) {
            *at += strides[d];
            return;
        }
        *at -= (shape[d] - 1) * strides[d];
        c[d] = 0;
    }
}

/* Whether each of the n values v[i] is in [0, extent).  v is in [0,
 * extent) when neither v nor extent - 1 - v is negative, so one OR of both
 * (as uint64: no overflow) over all values finds a bad one in its sign
 * bit: a reduction of subtractions and ORs that the compiler vectorizes
 * with any SIMD (an unsigned 64-bit comparison needs AVX-512). */
static bool values_in_range(const int64_t *v, int64_t n, int64_t extent)
{
    const uint64_t last = (uint64_t)extent - 1;
    uint64_t any = extent > 0 ? 0 : UINT64_C(1) << 63;
    for (int64_t i = 0; i < n; i++) any |= (uint64_t)v[i] | (last - (uint64_t)v[i]);
    return (any >> 63) == 0;
}

/* n elements of es bytes into out: out[i] = x[at + i * s + v[i] * xs]
 * (elements of x), their bits.  With vs = 0 the elements are x[base + i *
 * s], one memcpy when s = 1.  The cases with s = 0 (x's line along dim:
 * gather along the last dim) and s = 1 have their own loops, free of the
 * multiplications that the compiler cannot drop. */
#define PICK_SEG(T)                                                                     \
    do {                                                                                \
        const T *xv = xd;                                                               \
        T *o = out;                                                                     \
        if (vs == 0) {                                                                  \
            const T *b = xv + at + v[0] * xs;                                           \
            if (s == 1) memcpy(o, b, sizeof(T) * (size_t)n);                            \
            else for (int64_t i = 0; i < n; i++) o[i] = b[i * s];                       \
        } else if (s == 0 && xs == 1) {                                                 \
            const T *b = xv + at;                                                       \
            for (int64_t i = 0; i < n; i++) o[i] = b[v[i]];                             \
        } else if (s == 0) {                                                            \
            const T *b = xv + at;                                                       \
            for (int64_t i = 0; i < n; i++) o[i] = b[v[i] * xs];                        \
        } else if (s == 1) {                                                            \
            const T *b = xv + at;                                                       \
            for (int64_t i = 0; i < n; i++) o[i] = b[i + v[i] * xs];                    \
        } else {                                                                        \
            for (int64_t i = 0; i < n; i++) o[i] = xv[at + i * s + v[i] * xs];          \
        }                                                                               \
    } while (0)

static void pick_seg(size_t es, void *out, const void *xd, int64_t at, int64_t s,
                     const int64_t *v, int64_t vs, int64_t xs, int64_t n)
{
    if (es == 2) PICK_SEG(uint16_t);
    else if (es == 4) PICK_SEG(uint32_t);
    else if (es == 1) PICK_SEG(uint8_t);   /* i8, u8 */
    else PICK_SEG(uint64_t);
}
#undef PICK_SEG

/* A run of gather: r's elements [lo, hi) runs (positions of the pick, r
 * row-major) = x's picked elements' bits, a segment along the last dim at
 * a time. */
typedef struct gather_job {
    const tg__pick *k;
    void *r;
    tg__index_kernel kern;   /* the checked picks' (tg__pick_line_checked) */
    atomic_bool bad;         /* k->checks: a value out of range was met */
} gather_job;

static void gather_runs(void *p, int64_t lo, int64_t hi)
{
    gather_job *j = p;
    const tg__pick *k = j->k;
    const tg_tensor *x = k->x;
    const size_t es = tg_dtype_size(x->dtype);
    const int L = k->nd - 1;
    const int64_t xs = k->xstrides[k->dim];
    int64_t others[TG_MAX_DIMS];   /* x's strides, 0 at dim: v gives that coordinate */
    memcpy(others, k->xstrides, sizeof others);
    others[k->dim] = 0;
    for (int64_t r0 = lo * GATHER_RUN; r0 < hi * GATHER_RUN && r0 < k->m; r0 += GATHER_RUN) {
        const int64_t n = k->m - r0 < GATHER_RUN ? k->m - r0 : GATHER_RUN;
        int64_t c[TG_MAX_DIMS], at = x->offset;
        coords_of(k->nd, k->ishape, r0, c);
        for (int d = 0; d < k->nd; d++) at += c[d] * others[d];
        for (int64_t t = 0; t < n;) {
            const int64_t left = k->ishape[L] - c[L], seg = n - t < left ? n - t : left;
            /* gather: v per position; index_select: v[c[L]] on along dim L, else v[c[dim]] */
            const int64_t *v = k->per_pos ? k->v + r0 + t : k->v + c[L == k->dim ? L : k->dim];
            const int64_t vs = k->per_pos || L == k->dim;
            void *o = (char *)j->r + (size_t)(r0 + t) * es;
            const char *xd = x->storage->data;
            /* along x's contiguous lines: the values checked as they are picked */
            const bool line = k->checks && k->per_pos && L == k->dim && xs == 1;
            if (line && !tg__pick_line_checked(j->kern, es, o, xd + (size_t)at * es, v, seg,
                                               k->xshape[L])) {
                atomic_store_explicit(&j->bad, true, memory_order_relaxed);
                return;
            }
            /* else the segment's values, checked in the cache for the pick */
            if (!line && k->checks && !values_in_range(v, seg, k->xshape[k->dim])) {
                atomic_store_explicit(&j->bad, true, memory_order_relaxed);
                return;
            }
            if (!line) pick_seg(es, o, xd, at, others[L], v, vs, xs, seg);
            t += seg;
            c[L] += seg - 1;
            at += (seg - 1) * others[L];
            coords_next(k->nd, k->ishape, others, c, &at);
        }
    }
}

int tg__pick_gather(const tg__pick *k, int ond, const int64_t *oshape, tg_tensor **out)
{
    tg_tensor *r = tg__tensor_uninit(k->x->dtype, ond, oshape);
    if (!r) return TG_ENOMEM;
    gather_job j = {.k = k, .r = tg_tensor_data(r), .kern = tg__index_kernel_get()};
    atomic_init(&j.bad, false);
    tg__parallel_range((k->m + GATHER_RUN - 1) / GATHER_RUN, k->m > GATHER_PAR, gather_runs, &j);
    if (atomic_load(&j.bad)) {
        tg_tensor_release(r);
        return TG_EINVAL;
    }
    *out = r;
    return TG_OK;
}

/* A run of the copy of x into r (x's shape, row-major): elements [lo, hi)
 * runs, their bits, a segment along the last dim at a time. */
static void copy_runs(void *p, int64_t lo, int64_t hi)
{
    const gather_job *j = p;
    const tg__pick *k = j->k;
    const tg_tensor *x = k->x;
    const size_t es = tg_dtype_size(x->dtype);
    const int L = k->nd - 1;
    const int64_t nx = tg__numel(k->nd, k->xshape), zero = 0;
    for (int64_t r0 = lo * GATHER_RUN; r0 < hi * GATHER_RUN && r0 < nx; r0 += GATHER_RUN) {
        const int64_t n = nx - r0 < GATHER_RUN ? nx - r0 : GATHER_RUN;
        int64_t c[TG_MAX_DIMS], at = x->offset;
        coords_of(k->nd, k->xshape, r0, c);
        for (int d = 0; d < k->nd; d++) at += c[d] * k->xstrides[d];
        for (int64_t t = 0; t < n;) {
            const int64_t left = k->xshape[L] - c[L], seg = n - t < left ? n - t : left;
            pick_seg(es, (char *)j->r + (size_t)(r0 + t) * es, x->storage->data, at,
                     k->xstrides[L], &zero, 0, 0, seg);
            t += seg;
            c[L] += seg - 1;
            at += (seg - 1) * k->xstrides[L];
            coords_next(k->nd, k->xshape, k->xstrides, c, &at);
        }
    }
}

/* The adds.  The pick's positions are (a, q, b): a over the dims before
 * dim (A), q along dim (Q), b over the dims after it (B); the positions of
 * one line (a, b) add into x's line (a, b) only, at rows v, and different
 * lines into different lines of x.  A block is line a, up to cols
 * consecutive b and the rows [v0, v1) of x: its sums take src's terms for
 * q = 0 .. Q-1 in order (so each element's terms come in the index's
 * row-major order, as one thread adds them).  Blocks write disjoint
 * elements of r; the rows are split when there are fewer lines than
 * threads, each part reading all of its line's terms and adding those
 * that fall in it.
 *
 * With k->checks (scatter_add), each block checks its line's values
 * before it adds any (all of them, also where the rows are split), in the
 * cache for the adds, or, for a contiguous line along the last dim, eight
 * at a time just before their adds (tg__add_line_f); a bad one fails the
 * block with TG_EINVAL, and r is then dropped, so nothing is written where
 * the caller sees it.  A block
 * with all of x's rows then adds with no test of the row per term.
 *
 * f32, f64 and the integer dtypes (add_into) add into r, a copy of x, in
 * place: each block
 * copies its own elements of x first (while they are in its cache) when
 * the lines cover x, else the copy is a pass of its own before the adds.
 * f16 and bf16 (add_wide) keep a block's sums in floats that start as
 * x's elements, each rounded to the dtype after every term, and store
 * them into r; they are kept within ADD_SUMS floats (a core's cache): the
 * columns are halved from ADD_WIDE_COLS down to ADD_MIN_COLS (a cache line
 * of f32), then the rows split. */
enum { ADD_COLS = 256, ADD_WIDE_COLS = 64, ADD_MIN_COLS = 16, ADD_SUMS = 1 << 17 };
/* add_into takes a block of up to ADD_FEW_COLS columns a column at a time. */
enum { ADD_FEW_COLS = 4 };

typedef struct add_job {
    const tg__pick *k;
    const tg_tensor *src;
    void *r;
    int64_t a_n, q_n, b_n, x_n;   /* A, Q, B and x's extent at dim */
    int64_t cols, nblk;           /* the b of a block, blocks per line */
    int64_t rows, nrow;           /* the v of a block, row ranges per block of lines */
    bool copies;                  /* add_into copies its block of x into r first */
    tg__index_kernel kern;        /* add_into's checked lines (tg__add_line_f) */
    int64_t sstrides[TG_MAX_DIMS], rstrides[TG_MAX_DIMS];
} add_job;

/* The storage offset of the coordinates c with c[dim] taken as 0. */
static int64_t line_offset(const tg__pick *k, const int64_t *c, const int64_t *strides)
{
    int64_t at = 0;
    for (int d = 0; d < k->nd; d++)
        if (d != k->dim) at += c[d] * strides[d];
    return at;
}

/* Block t's place: its first row v0 and rows nv, line a, first column b0
 * and columns nb; per column c, the offsets at row 0 of x (xo), src (so)
 * and r (ro), and its position (a, 0, b) (po). */
typedef struct add_block_at {
    int64_t v0, nv, nb;
    int64_t xo[ADD_COLS], so[ADD_COLS], ro[ADD_COLS], po[ADD_COLS];
} add_block_at;

static void block_at(const add_job *j, int64_t t, add_block_at *b)
{
    const tg__pick *k = j->k;
    const int64_t line = t / j->nrow, a = line / j->nblk, b0 = line % j->nblk * j->cols;
    b->v0 = t % j->nrow * j->rows;
    b->nb = j->b_n - b0 < j->cols ? j->b_n - b0 : j->cols;
    b->nv = j->x_n - b->v0 < j->rows ? j->x_n - b->v0 : j->rows;
    for (int64_t c = 0; c < b->nb; c++) {
        int64_t cc[TG_MAX_DIMS];
        b->po[c] = a * j->q_n * j->b_n + b0 + c;
        coords_of(k->nd, k->ishape, b->po[c], cc);
        b->xo[c] = k->x->offset + line_offset(k, cc, k->xstrides);
        b->so[c] = j->src->offset + line_offset(k, cc, j->sstrides);
        b->ro[c] = line_offset(k, cc, j->rstrides);
    }
}

/* The step of offs over columns when it is one step (else -1). */
static int64_t even_step(const int64_t *offs, int64_t n)
{
    const int64_t step = n > 1 ? offs[1] - offs[0] : 1;
    for (int64_t c = 2; c < n; c++)
        if (offs[c] - offs[c - 1] != step) return -1;
    return step;
}

/* Whether block b's index values (per position: its columns' values for
 * every q, rows of nb consecutive values b_n apart) are all in [0, x_n). */
static bool block_values_ok(const add_job *j, const add_block_at *b)
{
    const int64_t *v = j->k->v + b->po[0];
    if (b->nb == j->b_n) return values_in_range(v, j->q_n * j->b_n, j->x_n);
    for (int64_t q = 0; q < j->q_n; q++)
        if (!values_in_range(v + q * j->b_n, b->nb, j->x_n)) return false;
    return true;
}

/* x's elements of block b copied into r, their bits: a column (a run
 * along dim) at a time when r's rows are one element apart, else a row
 * of the block at a time where both sides' columns are evenly spaced,
 * else one element at a time. */
static void copy_block(const add_job *j, const add_block_at *b)
{
    const tg_tensor *x = j->k->x;
    const size_t es = tg_dtype_size(x->dtype);
    const int64_t xs = j->k->xstrides[j->k->dim], rs = j->rstrides[j->k->dim], zero = 0;
    const int64_t xstep = even_step(b->xo, b->nb), rstep = even_step(b->ro, b->nb);
    char *r = j->r;
    const char *xd = x->storage->data;
    if (rs == 1) {
        for (int64_t c = 0; c < b->nb; c++)
            pick_seg(es, r + (size_t)(b->ro[c] + b->v0) * es, xd, b->xo[c] + b->v0 * xs, xs,
                     &zero, 0, 0, b->nv);
    } else if (rstep == 1 && xstep >= 0) {
        for (int64_t v = b->v0; v < b->v0 + b->nv; v++)
            pick_seg(es, r + (size_t)(b->ro[0] + v * rs) * es, xd, b->xo[0] + v * xs, xstep,
                     &zero, 0, 0, b->nb);
    } else {
        for (int64_t v = b->v0; v < b->v0 + b->nv; v++)
            for (int64_t c = 0; c < b->nb; c++)
                memcpy(r + (size_t)(b->ro[c] + v * rs) * es, xd + (size_t)(b->xo[c] + v * xs) * es,
                       es);
    }
}

/* The integer adds, modulo 2^bits as torch's: two's complement makes a
 * signed sum's bits those of the unsigned sum of the same bits, so each
 * width has one add for its signed and unsigned dtypes.  add_line_u8,
 * add_line_u32 and add_line_u64 are tg__add_line_f's portable loop for
 * them (every value checked first when `check`). */
static inline uint8_t add_u8(uint8_t a, uint8_t b) { return (uint8_t)(a + b); }
static inline uint32_t add_u32(uint32_t a, uint32_t b) { return a + b; }
static inline uint64_t add_u64(uint64_t a, uint64_t b) { return a + b; }

#define ADD_LINE_INT(NAME, T, ADD)                                                      \
    static bool NAME(tg__index_kernel kern, T *r, const T *s, const int64_t *v,         \
                     int64_t n, bool check, int64_t extent)                             \
    {                                                                                   \
        (void)kern;                                                                     \
        if (check && !values_in_range(v, n, extent)) return false;                      \
        for (int64_t q = 0; q < n; q++) r[v[q]] = ADD(r[v[q]], s[q]);                   \
        return true;                                                                    \
    }
ADD_LINE_INT(add_line_u8, uint8_t, add_u8)
ADD_LINE_INT(add_line_u32, uint32_t, add_u32)
ADD_LINE_INT(add_line_u64, uint64_t, add_u64)
#undef ADD_LINE_INT

/* add_into for T (float: tg__add_to_f and tg__add_line_f, double:
 * tg__add_to and tg__add_line_d): with one index value per q (index_add)
 * and evenly spaced columns, a row of terms at a time; with a few columns,
 * a column at a time (its terms still in q's order; a contiguous line of
 * all rows by LINE, which checks its values when k->checks); else a row
 * of the block at a time.  A block of all rows (whole) takes every term,
 * with no test of its row. */
#define ADD_INTO(T, ADD, LINE)                                                          \
    do {                                                                                \
        T *r = j->r;                                                                    \
        const T *s = j->src->storage->data;                                             \
        const int64_t rcs = even_step(b.ro, b.nb), scs = even_step(b.so, b.nb);         \
        if (!k->per_pos && rcs >= 0 && scs >= 0) {   /* a row of terms at a time */     \
            for (int64_t q = 0; q < j->q_n; q++) {                                      \
                const int64_t v = k->v[q] - b.v0;                                       \
                if (v < 0 || v >= b.nv) continue;                                       \
                T *rp = r + b.ro[0] + (b.v0 + v) * rs;                                  \
                const T *sp = s + b.so[0] + q * ss;                                     \
                if (rcs == 1 && scs == 1)                                               \
                    for (int64_t c = 0; c < b.nb; c++) rp[c] = ADD(rp[c], sp[c]);       \
                else                                                                    \
                    for (int64_t c = 0; c < b.nb; c++)                                  \
                        rp[c * rcs] = ADD(rp[c * rcs], sp[c * scs]);                    \
            }                                                                           \
        } else if (b.nb <= ADD_FEW_COLS) {   /* a column at a time */                   \
            for (int64_t c = 0; c < b.nb; c++) {                                        \
                const int64_t *vc = k->per_pos ? k->v + b.po[c] : k->v;                 \
                const int64_t vs = k->per_pos ? j->b_n : 1;                             \
                T *rc = r + b.ro[c] + b.v0 * rs;                                        \
                const T *sc = s + b.so[c];                                              \
                if (whole && vs == 1 && rs == 1 && ss == 1) {                           \
                    if (!LINE(j->kern, rc, sc, vc, j->q_n, k->checks, j->x_n))          \
                        return TG_EINVAL;                                               \
                } else if (whole) {                                                     \
                    for (int64_t q = 0; q < j->q_n; q++) {                              \
                        T *e = rc + vc[q * vs] * rs;                                    \
                        *e = ADD(*e, sc[q * ss]);                                       \
                    }                                                                   \
                } else {                                                                \
                    for (int64_t q = 0; q < j->q_n; q++) {                              \
                        const int64_t v = vc[q * vs] - b.v0;                            \
                        if (v >= 0 && v < b.nv) rc[v * rs] = ADD(rc[v * rs], sc[q * ss]);\
                    }                                                                   \
                }                                                                       \
            }                                                                           \
        } else if (whole && k->per_pos) {   /* a row of the block at a time */          \
            for (int64_t q = 0; q < j->q_n; q++) {                                      \
                const int64_t *vq = k->v + b.po[0] + q * j->b_n;                        \
                for (int64_t c = 0; c < b.nb; c++) {                                    \
                    T *e = r + b.ro[c] + vq[c] * rs;                                    \
                    *e = ADD(*e, s[b.so[c] + q * ss]);                                  \
                }                                                                       \
            }                                                                           \
        } else {   /* the same, testing each term's row */                              \
            for (int64_t q = 0; q < j->q_n; q++)                                        \
                for (int64_t c = 0; c < b.nb; c++) {                                    \
                    const int64_t v = (k->per_pos ? k->v[b.po[c] + q * j->b_n] : k->v[q]) -\
                                      b.v0;                                             \
                    if (v < 0 || v >= b.nv) continue;                                   \
                    T *e = r + b.ro[c] + (b.v0 + v) * rs;                               \
                    *e = ADD(*e, s[b.so[c] + q * ss]);                                  \
                }                                                                       \
        }                                                                               \
    } while (0)

/* Block t of f32, f64 or an integer dtype: src's terms added into r
 * (x's copy) in place, in r's dtype. */
static int add_into(void *p, int64_t t)
{
    const add_job *j = p;
    const tg__pick *k = j->k;
    add_block_at b;
    block_at(j, t, &b);
    const int64_t ss = j->sstrides[k->dim], rs = j->rstrides[k->dim];
    const bool whole = b.nv == j->x_n;
    /* a line along the last dim: its values checked by the adds (tg__add_line_f) */
    const bool by_line = k->per_pos && j->b_n == 1 && whole && rs == 1 && ss == 1;
    if (k->checks && !by_line && !block_values_ok(j, &b)) return TG_EINVAL;
    if (j->copies) copy_block(j, &b);
    const tg_dtype dt = k->x->dtype;
    const size_t es = tg_dtype_size(dt);
    if (dt == TG_F32) ADD_INTO(float, tg__add_to_f, tg__add_line_f);
    else if (dt == TG_F64) ADD_INTO(double, tg__add_to, tg__add_line_d);
    else if (es == 1) ADD_INTO(uint8_t, add_u8, add_line_u8);   /* i8, u8 */
    else if (es == 4) ADD_INTO(uint32_t, add_u32, add_line_u32);   /* i32 */
    else ADD_INTO(uint64_t, add_u64, add_line_u64);   /* i64 */
    return TG_OK;
}
#undef ADD_INTO

/* Block t of f16 or bf16: sums that start as x's elements, each term
 * added in f32 and the sum rounded to x's dtype (torch's half += half),
 * kept as floats and stored into r. */
static int add_wide(void *p, int64_t t)
{
    const add_job *j = p;
    const tg__pick *k = j->k;
    const tg_tensor *x = k->x, *src = j->src;
    add_block_at b;
    block_at(j, t, &b);
    if (k->checks && !block_values_ok(j, &b)) return TG_EINVAL;
    const int64_t nv = b.nv, nb = b.nb, v0 = b.v0;
    const tg_dtype dt = x->dtype;
    float *acc = tg__work_alloc((size_t)(nv * nb) * sizeof *acc);
    if (!acc) return TG_ENOMEM;
    const int64_t xs = k->xstrides[k->dim], ss = j->sstrides[k->dim], rs = j->rstrides[k->dim];
    for (int64_t v = 0; v < nv; v++)
        for (int64_t c = 0; c < nb; c++)
            acc[v * nb + c] = (float)load_at(dt, x->storage->data, b.xo[c] + (v0 + v) * xs);
    for (int64_t q = 0; q < j->q_n; q++)
        for (int64_t c = 0; c < nb; c++) {
            const int64_t v = (k->per_pos ? k->v[b.po[c] + q * j->b_n] : k->v[q]) - v0;
            if (v < 0 || v >= nv) continue;
            const float e = (float)load_at(dt, src->storage->data, b.so[c] + q * ss);
            acc[v * nb + c] = round_half(dt, tg__add_to_f(acc[v * nb + c], e));
        }
    for (int64_t v = 0; v < nv; v++)
        for (int64_t c = 0; c < nb; c++)
            store_at(x->dtype, j->r, b.ro[c] + (v0 + v) * rs, acc[v * nb + c]);
    tg__work_free(acc);
    return TG_OK;
}

/* scatter_add along the last dim of a contiguous f32 or f64 x whose rows
 * the index's rows cover, src's lines contiguous: row a of the result is
 * x's row a (memcpy), then src's terms of index row a added into it in
 * order, each value checked (tg__add_line_f).  The rows share nothing, so
 * they are split among threads in contiguous chunks, ROWS_PER_THREAD
 * chunks a thread, each taken whole by one (an element's terms in the
 * index's order, as on one thread); a task per row would make the threads
 * fight over the task counter.  With more than ROWS_PAR elements of x and
 * the terms, the chunks run in parallel: a 512 x 512 call (2^19 of them)
 * took 0.118 ms on one thread of a 2-core host and 0.073 ms on two when
 * its other core was free (docs/performance.md); when that core is busy,
 * the caller takes every chunk itself and does not wait for the worker
 * (src/core/parallel.c). */
enum { ROWS_PER_THREAD = 4, ROWS_PAR = 1 << 18 };

typedef struct rows_job {
    const tg__pick *k;
    const tg_tensor *src;
    void *r;
    int64_t a_n, q_n, x_n, chunk;   /* rows, terms a row, x's row length, rows a chunk */
    int64_t sstrides[TG_MAX_DIMS];
    tg__index_kernel kern;
} rows_job;

/* Whether tg__pick_scatter_add's call k, src suits add_rows. */
static bool rows_apply(const tg__pick *k, const tg_tensor *src, bool covers)
{
    const tg_dtype dt = k->x->dtype;
    return (dt == TG_F32 || dt == TG_F64) && k->per_pos && covers && k->m > 0 &&
           k->x->ndim >= 1 && k->dim == k->nd - 1 && k->xshape[k->dim] > 0 &&
           tg_tensor_is_contiguous(k->x) && src->ndim == k->nd && src->strides[k->dim] == 1;
}

/* Chunk t of a rows_job: rows [t chunk, (t + 1) chunk). */
static int add_rows(void *p, int64_t t)
{
    const rows_job *j = p;
    const tg__pick *k = j->k;
    const size_t es = tg_dtype_size(k->x->dtype);
    const int64_t a0 = t * j->chunk, a1 = a0 + j->chunk < j->a_n ? a0 + j->chunk : j->a_n;
    const char *xd = (const char *)k->x->storage->data + (size_t)k->x->offset * es;
    const char *sd = j->src->storage->data;
    for (int64_t a = a0; a < a1; a++) {
        int64_t c[TG_MAX_DIMS], so = j->src->offset;   /* c: the row's coordinates */
        coords_of(k->nd - 1, k->ishape, a, c);
        for (int d = 0; d < k->nd - 1; d++) so += c[d] * j->sstrides[d];
        char *r = (char *)j->r + (size_t)(a * j->x_n) * es;
        memcpy(r, xd + (size_t)(a * j->x_n) * es, (size_t)j->x_n * es);
        const int64_t *v = k->v + a * j->q_n;
        const bool ok = es == 4 ? tg__add_line_f(j->kern, (float *)r, (const float *)sd + so, v,
                                                 j->q_n, k->checks, j->x_n)
                                : tg__add_line_d(j->kern, (double *)r, (const double *)sd + so,
                                                 v, j->q_n, k->checks, j->x_n);
        if (!ok) return TG_EINVAL;
    }
    return TG_OK;
}

int tg__pick_scatter_add(const tg__pick *k, const tg_tensor *src, tg_tensor **out)
{
    tg_tensor *r = tg__tensor_uninit(k->x->dtype, k->x->ndim, k->x->shape);
    if (!r) return TG_ENOMEM;
    const bool in_place = k->x->dtype != TG_F16 && k->x->dtype != TG_BF16;
    const int64_t nx = tg__numel(k->nd, k->xshape);
    add_job j = {.k = k, .src = src, .r = tg_tensor_data(r), .q_n = k->ishape[k->dim],
                 .x_n = k->xshape[k->dim], .a_n = 1, .b_n = 1, .kern = tg__index_kernel_get()};
    bool covers = true;   /* the lines reach every line of x */
    for (int d = 0; d < k->nd; d++) {
        if (d < k->dim) j.a_n *= k->ishape[d];
        if (d > k->dim) j.b_n *= k->ishape[d];
        covers = covers && (d == k->dim || k->ishape[d] == k->xshape[d]);
    }
    if (k->m > 0 && j.x_n == 0) {   /* no value can be in range */
        TG_ASSERT(k->checks);
        tg_tensor_release(r);
        return TG_EINVAL;
    }
    if (rows_apply(k, src, covers)) {
        rows_job rj = {.k = k, .src = src, .r = j.r, .a_n = j.a_n, .q_n = j.q_n,
                       .x_n = j.x_n, .kern = j.kern};
        strides_of(src, rj.sstrides);
        const bool par = nx + k->m > ROWS_PAR && tg_get_num_threads() > 1 && !tg__in_parallel();
        const int64_t threads = par ? tg_get_num_threads() : 1;
        const int64_t chunks = threads > 1 ? threads * ROWS_PER_THREAD : 1;
        rj.chunk = (rj.a_n + chunks - 1) / chunks;
        const int64_t tasks = (rj.a_n + rj.chunk - 1) / rj.chunk;
        const int rc = tg__run_tasks(tasks, par, add_rows, &rj);
        if (rc < 0) {
            tg_tensor_release(r);
            return rc;
        }
        *out = r;
        return TG_OK;
    }
    j.copies = in_place && covers && k->m > 0;
    /* x's copy into r, as a pass of its own unless the blocks make it or
     * add_wide's roundings write every element */
    if (in_place ? !j.copies : !covers || k->m == 0) {
        gather_job g = {.k = k, .r = j.r};
        atomic_init(&g.bad, false);
        tg__parallel_range((nx + GATHER_RUN - 1) / GATHER_RUN, nx > GATHER_PAR, copy_runs, &g);
    }
    int rc = TG_OK;
    if (k->m > 0) {
        strides_of(src, j.sstrides);
        tg__contiguous_strides(k->nd, k->xshape, j.rstrides);
        const int64_t most = in_place ? ADD_COLS : ADD_WIDE_COLS;
        j.cols = j.b_n < most ? j.b_n : most;
        while (!in_place && j.cols > ADD_MIN_COLS && j.x_n * j.cols > ADD_SUMS) j.cols /= 2;
        j.nblk = (j.b_n + j.cols - 1) / j.cols;
        const int64_t lines = j.a_n * j.nblk, threads = tg_get_num_threads();
        const int64_t by_mem = in_place ? 1 : (j.x_n * j.cols + ADD_SUMS - 1) / ADD_SUMS;
        j.nrow = lines < threads ? (threads + lines - 1) / lines : 1;
        j.nrow = by_mem > j.nrow ? by_mem : j.nrow;
        j.rows = (j.x_n + j.nrow - 1) / j.nrow;
        j.nrow = (j.x_n + j.rows - 1) / j.rows;
        rc = tg__run_tasks(lines * j.nrow, nx + k->m > ADD_PAR, in_place ? add_into : add_wide,
                           &j);
    }
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}
