/* src/ops/conv_phase_tmpl.h - ConvTranspose by stride phases for one element
 * type (T, SUF as in conv_kernels_tmpl.h), included by conv_phase_kernels.c
 * once per type; it defines tg__conv_transpose_phase_SUF (FN pastes the
 * suffix; declared in conv_internal.h).  The math and the phase geometry
 * are in conv_phase.c.
 *
 * Per chunk of n samples and per phase (T_ph taps, Q_ph positions):
 *   cols (c_col*T_ph, n*Q_ph):  cols[(cx, t), b*Q + q] = x[b, cx, qlo + q - t] (0 outside)
 *   yr   (c_img, n*Q_ph):       yr_g = Wp_g^T (c_img/G, c_col/G*T_ph) @ cols_g
 * (or, for long last-axis rows, the last axis's taps as shifted GEMMs:
 * phase_dims), then once per chunk y[b, cy, q*s + r - p] = yr_r[cy, b*Q + q - qlo]
 * for all phases in y's order (phase_interleave).
 * No column buffer over the output and no scatter-add: each output element is
 * one dot product, written once.  The GEMM's inner dimension is c_col/G*T_ph
 * (the column path's is c_col/G), and cols scales with C_in rather than C_out.
 * Every parallel loop writes disjoint outputs, so the bits depend only on the
 * thread count through gemm_par's slices (as for the other kernels).
 * tg__conv_transpose_fast_raw dispatches here only where tg__conv_phase_pays
 * (conv_phase.c; measurements in docs/performance.md). */

#define TG__CAT_(a, b) a##_##b
#define TG__CAT(a, b) TG__CAT_(a, b)
#define FN(name) TG__CAT(name, SUF)

typedef struct {
    const tg__conv_geom *g;
    const tg__conv_phase *ph;
    bool shift;
    const T *w;
    T *wp;
} FN(pack_w_job);

/* The rows of input channels [cx0, cx1) of every phase's block. */
static void FN(phase_pack_w_rows)(void *p, int64_t cx0, int64_t cx1)
{
    const FN(pack_w_job) *q = p;
    const tg__conv_geom *g = q->g;
    const tg__conv_phase *ph = q->ph;
    const bool shift = q->shift;
    const T *w = q->w;
    const int64_t *ke = g->k, *s = g->stride;
    const int64_t nph = tg__conv_prod3(g->stride), ksz = tg__conv_prod3(ke);
    const int64_t cyg = g->c_img / g->groups;
    for (int64_t cx = cx0; cx < cx1; cx++) {
        T *blk = q->wp;   /* phase pi's block */
        for (int64_t pi = 0; pi < nph; pi++) {
            const tg__conv_phase *f = ph + pi;
            const int64_t *t = f->t, *r = f->r, t01 = t[0] * t[1];
            for (int64_t cy = 0; cy < cyg; cy++) {
                const T *src = w + (cx * cyg + cy) * ksz;
                for (int64_t t0 = 0; t0 < t[0]; t0++)
                    for (int64_t t1 = 0; t1 < t[1]; t1++)
                        for (int64_t t2 = 0; t2 < t[2]; t2++) {
                            const int64_t row = shift ? (t2 * g->c_col + cx) * t01 + t0 * t[1] + t1
                                                      : cx * f->taps + (t0 * t[1] + t1) * t[2] + t2;
                            blk[row * cyg + cy] =
                                src[((r[0] + s[0] * t0) * ke[1] + r[1] + s[1] * t1) * ke[2] + r[2] +
                                    s[2] * t2];
                        }
            }
            blk += g->c_col * f->taps * cyg;
        }
    }
}

/* The sub-kernels of w (c_col, c_img/G, K), phase after phase: phase f's
 * block (c_col*T_f, c_img/G) starts at c_col*c_img/G * (taps of phases before):
 *   wp[(cx, t), cy] = w[cx, cy, r + s*t]   (per axis; cx over all groups),
 * with (cx, t) = (cx, t0, t1, t2), or, when the last axis is shifted
 * (phase_dims), t2 outermost: one (c_col*T0*T1, c_img/G) matrix per t2.
 * That keeps w's (cx, cy) order, so packing reads w sequentially and writes
 * runs of c_img/G; the GEMM takes it transposed (as the column path takes w). */
static void FN(phase_pack_w)(const tg__conv_geom *g, const tg__conv_phase *ph, bool shift,
                             const T *w, T *wp)
{
    const int64_t cyg = g->c_img / g->groups, ksz = tg__conv_prod3(g->k);
    FN(pack_w_job) q = {.g = g, .ph = ph, .shift = shift, .w = w, .wp = wp};
    tg__parallel_range(g->c_col, g->c_col * cyg * ksz > 32768, FN(phase_pack_w_rows), &q);
}

/* A phase's buffer dimensions.  Unshifted, cols has a row per (cx, t) and
 * the columns (b, q0, q1, q2).  Shifted, the last axis's taps are not
 * copied: cols has a row per (cx, t0, t1) and columns (b, q0, q1, j) with
 * j in [0, P2), P2 = Q2 + T2 - 1, holding i2 = qlo2 + j - (T2 - 1); tap t2 is
 * then the same matrix shifted by t2 columns, so y_f = sum_t2 W_t2^T @ cols
 * shifted, one GEMM per t2 accumulating (beta = 1) on the padded grid, and
 * the T2 - 1 pad columns per row are computed and discarded (waste
 * (T2-1)/Q2, small for long rows: 1-D signals). */
#ifndef TG__CONV_PHASE_DIMS
#define TG__CONV_PHASE_DIMS
typedef struct phase_dims {
    int64_t rows_cx;   /* cols rows per input channel: T or T0*T1 */
    int64_t p2;        /* cols/yr columns per (q0, q1) row: Q2 or Q2 + T2 - 1 */
    int64_t pos;       /* columns per sample: Q0*Q1*p2 */
    int64_t lead;      /* T2 - 1 when shifted, else 0 */
} phase_dims;
#endif

static phase_dims FN(phase_dims_of)(const tg__conv_phase *f, bool shift)
{
    phase_dims d;
    d.lead = shift ? f->t[2] - 1 : 0;
    d.rows_cx = shift ? f->t[0] * f->t[1] : f->taps;
    d.p2 = f->q[2] + d.lead;
    d.pos = f->q[0] * f->q[1] * d.p2;
    return d;
}

/* One row of cols for input plane xp (S_in) and taps (t0, t1):
 * dst[(q0, q1, j)] = xp[qlo0 + q0 - t0, qlo1 + q1 - t1, j + off2] for j < p2,
 * 0 outside the input. */
static void FN(phase_cols_row)(const T *xp, const tg__conv_geom *g, const tg__conv_phase *f,
                               int64_t t0, int64_t t1, int64_t off2, int64_t p2, T *dst)
{
    const int64_t *ie = g->col, *q = f->q, *qlo = f->qlo;
    /* last axis: i2 = j + off2 is inside for j in [lo, hi) */
    const int64_t lo = tg__conv_clamp(-off2, 0, p2), hi = tg__conv_clamp(ie[2] - off2, lo, p2);
    for (int64_t q0 = 0; q0 < q[0]; q0++) {
        const int64_t i0 = qlo[0] + q0 - t0;
        for (int64_t q1 = 0; q1 < q[1]; q1++, dst += p2) {
            const int64_t i1 = qlo[1] + q1 - t1;
            if (i0 < 0 || i0 >= ie[0] || i1 < 0 || i1 >= ie[1]) {
                memset(dst, 0, (size_t)p2 * sizeof(T));
                continue;
            }
            const T *src = xp + (i0 * ie[1] + i1) * ie[2] + off2;
            for (int64_t j = 0; j < lo; j++) dst[j] = 0;
            for (int64_t j = lo; j < hi; j++) dst[j] = src[j];
            for (int64_t j = hi; j < p2; j++) dst[j] = 0;
        }
    }
}

typedef struct {
    const T *xb;
    int64_t n;
    const tg__conv_geom *g;
    const tg__conv_phase *f;
    const phase_dims *d;
    T *cols;
} FN(cols_job);

/* Rows [u0, u1) of phase_cols. */
static void FN(phase_cols_rows)(void *p, int64_t u0, int64_t u1)
{
    const FN(cols_job) *q = p;
    const tg__conv_geom *g = q->g;
    const tg__conv_phase *f = q->f;
    const phase_dims *d = q->d;
    const int64_t isz = tg__conv_prod3(g->col), n = q->n;
    const int64_t *t = f->t, tz = d->lead ? 1 : t[2];   /* taps of axis 2 in the rows */
    for (int64_t u = u0; u < u1; u++) {
        const int64_t b = u % n, row = u / n, cx = row / d->rows_cx, k = row % d->rows_cx;
        const int64_t t2 = k % tz, t1 = (k / tz) % t[1], t0 = k / (t[1] * tz);
        const int64_t off2 = f->qlo[2] - (d->lead ? d->lead : t2);
        FN(phase_cols_row)(q->xb + (b * g->c_col + cx) * isz, g, f, t0, t1, off2, d->p2,
                           q->cols + u * d->pos);
    }
}

/* cols (c_col*rows_cx, n*pos) of the chunk xb (n, c_col, S_in). */
static void FN(phase_cols)(const T *xb, int64_t n, const tg__conv_geom *g,
                           const tg__conv_phase *f, const phase_dims *d, T *cols)
{
    const int64_t rows = g->c_col * d->rows_cx * n;
    FN(cols_job) q = {.xb = xb, .n = n, .g = g, .f = f, .d = d, .cols = cols};
    tg__parallel_range(rows, rows * d->pos > 32768, FN(phase_cols_rows), &q);
}

/* y chunk (n, c_img, S_out) from every phase's yr_f (c_img, n*pos_f), stored
 * one after the other in yall (phase f at off[f]), in one pass in y's own
 * order: writing phase by phase would sweep all of y once per phase (8 times
 * for a stride-8 1-D layer) with strided stores.  Output o of an axis is
 * phase r = (o + p) mod s, index (o + p)/s - qlo_r; along the last axis r and
 * the index are advanced incrementally. */
typedef struct {
    const T *yall;
    const int64_t *off;
    int64_t n, parts;
    const tg__conv_geom *g;
    const tg__conv_phase *ph;
    bool shift;
    T *yb;
} FN(interleave_job);

/* Part i of parts of the rows (c, b) of phase_interleave (a tg__run_tasks
 * task), with its own s2 row offsets.  TG_ENOMEM: no memory for them. */
static int FN(phase_interleave_part)(void *job, int64_t i)
{
    const FN(interleave_job) *q = job;
    const tg__conv_geom *g = q->g;
    const tg__conv_phase *ph = q->ph;
    const bool shift = q->shift;
    const T *yall = q->yall;
    const int64_t *off = q->off, n = q->n;
    const int64_t *oe = g->img, *s = g->stride, *p = g->pad;
    const int64_t osz = tg__conv_prod3(oe), rows = g->c_img * n;
    int64_t *ro = tg__malloc((size_t)s[2] * sizeof *ro);
    if (!ro) return TG_ENOMEM;
    for (int64_t u = rows * i / q->parts; u < rows * (i + 1) / q->parts; u++) {
        const int64_t c = u / n, b = u % n;
        T *dst = q->yb + (b * g->c_img + c) * osz;
        for (int64_t o0 = 0; o0 < oe[0]; o0++)
            for (int64_t o1 = 0; o1 < oe[1]; o1++, dst += oe[2]) {
                const int64_t r0 = (o0 + p[0]) % s[0], r1 = (o1 + p[1]) % s[1];
                const int64_t f01 = (r0 * s[1] + r1) * s[2];
                for (int64_t r2 = 0; r2 < s[2]; r2++) {
                    const tg__conv_phase *f = ph + f01 + r2;
                    if (f->pos == 0) continue;   /* no o2 of this phase */
                    const phase_dims d = FN(phase_dims_of)(f, shift);
                    const int64_t q0 = (o0 + p[0]) / s[0] - f->qlo[0],
                                  q1 = (o1 + p[1]) / s[1] - f->qlo[1];
                    ro[r2] = off[f01 + r2] + u * d.pos + (q0 * f->q[1] + q1) * d.p2 + d.lead -
                             f->qlo[2];
                }
                /* o2 + p = v*s2 + r2: y[o2] = yr_f[row + v - qlo2] */
                int64_t r2 = p[2] % s[2], v = p[2] / s[2];
                for (int64_t o2 = 0; o2 < oe[2]; o2++) {
                    dst[o2] = yall[ro[r2] + v];
                    if (++r2 == s[2]) {
                        r2 = 0;
                        v++;
                    }
                }
            }
    }
    free(ro);
    return TG_OK;
}

static int FN(phase_interleave)(const T *yall, const int64_t *off, int64_t n,
                                const tg__conv_geom *g, const tg__conv_phase *ph, bool shift,
                                T *yb)
{
    const int64_t rows = g->c_img * n;
    const bool par = rows * tg__conv_prod3(g->img) > 32768;
    FN(interleave_job) q = {.yall = yall, .off = off, .n = n, .g = g, .ph = ph, .shift = shift,
                            .yb = yb, .parts = par ? tg_get_num_threads() : 1};
    if (q.parts > rows) q.parts = rows;
    return tg__run_tasks(q.parts, par, FN(phase_interleave_part), &q);
}

/* Samples per chunk: the largest phase's cols plus every phase's yr within
 * the budget. */
static int64_t FN(phase_chunk)(const tg__conv_geom *g, const tg__conv_phase *ph, bool shift)
{
    int64_t most = 0, all = 0;
    for (int64_t pi = 0; pi < tg__conv_prod3(g->stride); pi++) {
        const phase_dims d = FN(phase_dims_of)(ph + pi, shift);
        const int64_t e = g->c_col * d.rows_cx * d.pos;
        if (e > most) most = e;
        all += g->c_img * d.pos;
    }
    return tg__conv_chunk(g->batch, (most + all) * (int64_t)sizeof(T));
}

/* yr (c_img, N) of one phase: per group yr_g = Wp_g^T @ cols_g, or, shifted,
 * sum over t2 of Wp_{t2,g}^T @ (cols_g shifted right by t2), on the columns
 * [lead, N) (the first lead are pad positions of the first row). */
static void FN(phase_gemm)(const tg__conv_geom *g, const tg__conv_phase *f, const phase_dims *d,
                           const T *wf, const T *cols, int64_t N, T *yr)
{
    const int64_t cxg = g->c_col / g->groups, cyg = g->c_img / g->groups, kk = cxg * d->rows_cx;
    const int64_t nt = d->lead ? f->t[2] : 1;
    for (int64_t t2 = 0; t2 < nt; t2++)
        for (int64_t gi = 0; gi < g->groups; gi++)
            FN(tg__conv_gemm_par)(g->bf16, true, false, cyg, N - d->lead, kk,
                                  wf + (t2 * g->groups + gi) * kk * cyg, cyg,
                                  cols + gi * kk * N + d->lead - t2, N, t2 > 0 ? 1 : 0,
                                  yr + gi * cyg * N + d->lead, N);
}

/* Phase f of a chunk: cols (in this thread's scratch slot 0), then its GEMMs
 * into yr (c_img, n*pos).  TG_ENOMEM if cols cannot be allocated. */
static int FN(phase_one)(const tg__conv_geom *g, const tg__conv_phase *f, bool shift,
                         const T *xb, int64_t n, const T *wf, T *yr)
{
    const phase_dims d = FN(phase_dims_of)(f, shift);
    if (f->pos == 0) return TG_OK;
    T *cols = tg__conv_scratch(0, (size_t)(g->c_col * d.rows_cx * n * d.pos) * sizeof(T));
    if (!cols) return TG_ENOMEM;
    FN(phase_cols)(xb, n, g, f, &d, cols);
    FN(phase_gemm)(g, f, &d, wf, cols, n * d.pos, yr);
    return TG_OK;
}

typedef struct FN(phase_job) {
    const tg__conv_geom *g;
    const tg__conv_phase *ph;
    bool shift;
    const T *xb, *wp;   /* the chunk's x, the packed weights */
    int64_t n;          /* samples in the chunk */
    const int64_t *off, *woff;
    T *yall;
} FN(phase_job);

/* Phase pi of a phase_job (a tg__run_tasks task). */
static int FN(phase_task)(void *job, int64_t pi)
{
    const FN(phase_job) *j = job;
    return FN(phase_one)(j->g, j->ph + pi, j->shift, j->xb, j->n, j->wp + j->woff[pi],
                         j->yall + j->off[pi]);
}

/* The chunk loop of conv_transpose_phase (wp packed, ph tabulated; off and
 * woff are scratch tables).  The phases are independent (each writes its own
 * yr), so with at least as many phases as threads each thread takes whole
 * phases, single-threaded GEMMs on its own columns (the nested parallel
 * calls run serially): a stride-8 1-D layer has 8 small GEMMs per
 * chunk, which split across threads one by one would mostly wait.  Fewer
 * phases: one after the other, each GEMM split by gemm_par.  Either way each
 * phase's bits do not depend on which thread computed it. */
static int FN(phase_chunks)(const tg__conv_geom *g, const tg__conv_phase *ph, bool shift,
                            const T *x, const T *wp, int64_t *off, int64_t *woff, T *y)
{
    const int64_t nph = tg__conv_prod3(g->stride), isz = tg__conv_prod3(g->col),
                  osz = tg__conv_prod3(g->img);
    const int64_t nb = FN(phase_chunk)(g, ph, shift);
    const bool by_phase = nph >= tg_get_num_threads();
    woff[0] = 0;
    for (int64_t pi = 1; pi < nph; pi++)
        woff[pi] = woff[pi - 1] + g->c_col * ph[pi - 1].taps * (g->c_img / g->groups);
    for (int64_t b0 = 0; b0 < g->batch; b0 += nb) {
        const int64_t n = b0 + nb <= g->batch ? nb : g->batch - b0;
        int64_t total = 0;
        for (int64_t pi = 0; pi < nph; pi++) {
            off[pi] = total;
            total += g->c_img * n * FN(phase_dims_of)(ph + pi, shift).pos;
        }
        T *yall = tg__conv_scratch(1, (size_t)total * sizeof(T));
        if (!yall) return TG_ENOMEM;
        FN(phase_job) j = {.g = g, .ph = ph, .shift = shift, .xb = x + b0 * g->c_col * isz,
                           .wp = wp, .n = n, .off = off, .woff = woff, .yall = yall};
        TG_TRY(tg__run_tasks(nph, by_phase, FN(phase_task), &j));
        TG_TRY(FN(phase_interleave)(yall, off, n, g, ph, shift, y + b0 * g->c_img * osz));
    }
    return TG_OK;
}

/* y (B, c_img, S_out) = conv_transpose(x (B, c_col, S_in), w): the phase
 * table and the packed sub-kernels once per call, then the chunks. */
int FN(tg__conv_transpose_phase)(const tg__conv_geom *g, const T *x, const T *w, T *y)
{
    if (g->batch == 0) return TG_OK;
    const int64_t nph = tg__conv_prod3(g->stride), cxg = g->c_col / g->groups;
    T *wp = tg__conv_scratch(2, (size_t)(g->c_img * cxg * tg__conv_prod3(g->k)) * sizeof(T));
    /* the phase table; tab: yr offsets, weight offsets (nph each) */
    tg__conv_phase *ph = wp ? tg__malloc((size_t)nph * sizeof *ph) : NULL;
    int64_t *tab = ph ? tg__malloc(2 * (size_t)nph * sizeof *tab) : NULL;
    if (!tab) {
        free(ph);
        return TG_ENOMEM;
    }
    for (int64_t pi = 0; pi < nph; pi++) tg__conv_phase_at(g, pi, ph + pi);
    const bool shift = tg__conv_phase_shift(g);
    FN(phase_pack_w)(g, ph, shift, w, wp);
    const int rc = FN(phase_chunks)(g, ph, shift, x, wp, tab, tab + nph, y);
    free(ph);
    free(tab);
    return rc;
}

#undef FN
#undef TG__CAT
#undef TG__CAT_
