/* src/ops/gather_run.c - the picks and adds of the indexing ops
 * (src/ops/gather_internal.h).
 *
 * Each element goes through a double as tg__gather and tg__scatter move
 * it (tg_dtype_load's and tg_dtype_store's bits), so a pick is x's value
 * and a sum is rounded once.  Neither kernel copies x: both read it
 * through its strides, a run or a block at a time. */
#include <math.h>
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
 * of a buffer of dt: tg_dtype_load's and tg_dtype_store's bits. */
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

/* A sum s plus a term e: s + e, s's NaN (quieted) when both are NaN, as
 * x86's addition keeps its first operand's, whatever order the compiler
 * emits. */
static inline double add_to(double s, double e)
{
    return isnan(s) ? s + s : s + e;
}

/* The work is shared out in runs of GATHER_RUN elements (gather and the
 * copy of x) and blocks of lines (the adds), among threads when there are
 * more than GATHER_PAR elements; each writes its own elements of the
 * result. */
enum { GATHER_RUN = 256, GATHER_PAR = 32768 };

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

/* A run of gather: r's elements [lo, hi) (positions of the pick, r
 * row-major) = x's picked elements, through doubles in a row as
 * tg__gather and tg__scatter convert them. */
typedef struct gather_job {
    const tg__pick *k;
    void *r;
} gather_job;

static void gather_runs(void *p, int64_t lo, int64_t hi)
{
    const gather_job *j = p;
    const tg__pick *k = j->k;
    const tg_tensor *x = k->x;
    const void *xd = x->storage->data;
    const int64_t xs = k->xstrides[k->dim];
    int64_t others[TG_MAX_DIMS];   /* x's strides, 0 at dim: v gives that coordinate */
    memcpy(others, k->xstrides, sizeof others);
    others[k->dim] = 0;
    double row[GATHER_RUN];
    for (int64_t r0 = lo * GATHER_RUN; r0 < hi * GATHER_RUN && r0 < k->m; r0 += GATHER_RUN) {
        const int64_t n = k->m - r0 < GATHER_RUN ? k->m - r0 : GATHER_RUN;
        int64_t c[TG_MAX_DIMS], at = x->offset;
        coords_of(k->nd, k->ishape, r0, c);
        for (int d = 0; d < k->nd; d++) at += c[d] * others[d];
        for (int64_t t = 0; t < n; t++) {
            const int64_t v = k->per_pos ? k->v[r0 + t] : k->v[c[k->dim]];
            row[t] = load_at(x->dtype, xd, at + v * xs);
            coords_next(k->nd, k->ishape, others, c, &at);
        }
        for (int64_t t = 0; t < n; t++) store_at(x->dtype, j->r, r0 + t, row[t]);
    }
}

int tg__pick_gather(const tg__pick *k, int ond, const int64_t *oshape, tg_tensor **out)
{
    tg_tensor *r = tg__tensor_uninit(k->x->dtype, ond, oshape);
    if (!r) return TG_ENOMEM;
    gather_job j = {.k = k, .r = tg_tensor_data(r)};
    tg__parallel_range((k->m + GATHER_RUN - 1) / GATHER_RUN, k->m > GATHER_PAR, gather_runs, &j);
    *out = r;
    return TG_OK;
}

/* A run of the copy of x into r (x's shape, row-major): elements [lo, hi)
 * runs, each through a double as gather_runs. */
static void copy_runs(void *p, int64_t lo, int64_t hi)
{
    const gather_job *j = p;
    const tg__pick *k = j->k;
    const tg_tensor *x = k->x;
    const int64_t nx = tg__numel(k->nd, k->xshape);
    double row[GATHER_RUN];
    for (int64_t r0 = lo * GATHER_RUN; r0 < hi * GATHER_RUN && r0 < nx; r0 += GATHER_RUN) {
        const int64_t n = nx - r0 < GATHER_RUN ? nx - r0 : GATHER_RUN;
        int64_t c[TG_MAX_DIMS], at = x->offset;
        coords_of(k->nd, k->xshape, r0, c);
        for (int d = 0; d < k->nd; d++) at += c[d] * k->xstrides[d];
        for (int64_t t = 0; t < n; t++) {
            row[t] = load_at(x->dtype, x->storage->data, at);
            coords_next(k->nd, k->xshape, k->xstrides, c, &at);
        }
        for (int64_t t = 0; t < n; t++) store_at(x->dtype, j->r, r0 + t, row[t]);
    }
}

/* The adds.  The pick's positions are (a, q, b): a over the dims before
 * dim (A), q along dim (Q), b over the dims after it (B); the positions of
 * one line (a, b) add into x's line (a, b) only, at rows v, and different
 * lines into different lines of x.  A block is line a, up to ADD_COLS
 * consecutive b and the rows [v0, v1) of x: its sums (rows, cols) start
 * as x's elements, take src's terms for q = 0 .. Q-1 in order (so each
 * element's terms come in the index's row-major order, as one thread adds
 * them) and are rounded once into r.  Blocks write disjoint elements of r.
 * A block's sums are kept within ADD_SUMS doubles (a core's cache): its
 * columns are halved down to ADD_MIN_COLS (a cache line of f32), then its
 * rows split, each part reading all of its line's terms and adding those
 * that fall in it; the rows are split too when there are fewer lines than
 * threads. */
enum { ADD_COLS = 64, ADD_MIN_COLS = 16, ADD_SUMS = 1 << 17 };

typedef struct add_job {
    const tg__pick *k;
    const tg_tensor *src;
    void *r;
    int64_t a_n, q_n, b_n, x_n;   /* A, Q, B and x's extent at dim */
    int64_t cols, nblk;           /* the b of a block, blocks per line */
    int64_t rows, nrow;           /* the v of a block, row ranges per block of lines */
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

static int add_block(void *p, int64_t t)
{
    const add_job *j = p;
    const tg__pick *k = j->k;
    const tg_tensor *x = k->x, *src = j->src;
    const int64_t line = t / j->nrow, v0 = t % j->nrow * j->rows;
    const int64_t a = line / j->nblk, b0 = line % j->nblk * j->cols;
    const int64_t nb = j->b_n - b0 < j->cols ? j->b_n - b0 : j->cols;
    const int64_t nv = j->x_n - v0 < j->rows ? j->x_n - v0 : j->rows;
    double *acc = tg__work_alloc((size_t)(nv * nb) * sizeof *acc);
    if (!acc) return TG_ENOMEM;
    /* per column: x's, src's and r's offsets at row 0, and position (a, 0, b) */
    int64_t xo[ADD_COLS], so[ADD_COLS], ro[ADD_COLS], po[ADD_COLS];
    for (int64_t c = 0; c < nb; c++) {
        int64_t cc[TG_MAX_DIMS];
        po[c] = a * j->q_n * j->b_n + b0 + c;
        coords_of(k->nd, k->ishape, po[c], cc);
        xo[c] = x->offset + line_offset(k, cc, k->xstrides);
        so[c] = src->offset + line_offset(k, cc, j->sstrides);
        ro[c] = line_offset(k, cc, j->rstrides);
    }
    const int64_t xs = k->xstrides[k->dim], ss = j->sstrides[k->dim], rs = j->rstrides[k->dim];
    for (int64_t v = 0; v < nv; v++)
        for (int64_t c = 0; c < nb; c++)
            acc[v * nb + c] = load_at(x->dtype, x->storage->data, xo[c] + (v0 + v) * xs);
    for (int64_t q = 0; q < j->q_n; q++)
        for (int64_t c = 0; c < nb; c++) {
            const int64_t v = (k->per_pos ? k->v[po[c] + q * j->b_n] : k->v[q]) - v0;
            if (v >= 0 && v < nv)
                acc[v * nb + c] = add_to(acc[v * nb + c],
                                         load_at(src->dtype, src->storage->data, so[c] + q * ss));
        }
    for (int64_t v = 0; v < nv; v++)
        for (int64_t c = 0; c < nb; c++)
            store_at(x->dtype, j->r, ro[c] + (v0 + v) * rs, acc[v * nb + c]);
    tg__work_free(acc);
    return TG_OK;
}

int tg__pick_scatter_add(const tg__pick *k, const tg_tensor *src, tg_tensor **out)
{
    tg_tensor *r = tg__tensor_uninit(k->x->dtype, k->x->ndim, k->x->shape);
    if (!r) return TG_ENOMEM;
    const int64_t nx = tg__numel(k->nd, k->xshape);
    add_job j = {.k = k, .src = src, .r = tg_tensor_data(r), .q_n = k->ishape[k->dim],
                 .x_n = k->xshape[k->dim], .a_n = 1, .b_n = 1};
    bool covers = true;   /* the lines reach every line of x */
    for (int d = 0; d < k->nd; d++) {
        if (d < k->dim) j.a_n *= k->ishape[d];
        if (d > k->dim) j.b_n *= k->ishape[d];
        covers = covers && (d == k->dim || k->ishape[d] == k->xshape[d]);
    }
    if (!covers || k->m == 0) {
        gather_job g = {.k = k, .r = j.r};
        tg__parallel_range((nx + GATHER_RUN - 1) / GATHER_RUN, nx > GATHER_PAR, copy_runs, &g);
    }
    int rc = TG_OK;
    if (k->m > 0) {
        strides_of(src, j.sstrides);
        tg__contiguous_strides(k->nd, k->xshape, j.rstrides);
        j.cols = j.b_n < ADD_COLS ? j.b_n : ADD_COLS;
        while (j.cols > ADD_MIN_COLS && j.x_n * j.cols > ADD_SUMS) j.cols /= 2;
        j.nblk = (j.b_n + j.cols - 1) / j.cols;
        const int64_t lines = j.a_n * j.nblk, threads = tg_get_num_threads();
        const int64_t by_mem = (j.x_n * j.cols + ADD_SUMS - 1) / ADD_SUMS;
        j.nrow = lines < threads ? (threads + lines - 1) / lines : 1;
        j.nrow = by_mem > j.nrow ? by_mem : j.nrow;
        j.rows = (j.x_n + j.nrow - 1) / j.nrow;
        j.nrow = (j.x_n + j.rows - 1) / j.rows;
        rc = tg__run_tasks(lines * j.nrow, nx + k->m > GATHER_PAR, add_block, &j);
    }
    if (rc < 0) {
        tg_tensor_release(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}

