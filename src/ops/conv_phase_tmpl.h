/* src/ops/conv_phase_tmpl.h - ConvTranspose by stride phases for one element
 * type (T, SUF, GEMM as in conv_gemm_tmpl.h, after which conv_kernels.c
 * includes this).  The math and the phase geometry are in conv_phase.c.
 *
 * Per chunk of n samples and per phase (T_ph taps, Q_ph positions):
 *   cols (c_col*T_ph, n*Q_ph):  cols[(cx, t), b*Q + q] = x[b, cx, qlo + q - t] (0 outside)
 *   yr   (c_img, n*Q_ph):       yr_g = Wp_g^T (c_img/G, c_col/G*T_ph) @ cols_g
 *   y[b, cy, q*s + r - p] = yr[cy, b*Q + q - qlo]
 * No column buffer over the output and no scatter-add: each output element is
 * one dot product, written once.  The GEMM's inner dimension is c_col/G*T_ph
 * (the column path's is c_col/G), and cols scales with C_in rather than C_out.
 * Every OpenMP loop writes disjoint outputs, so the bits depend only on the
 * thread count through gemm_par's slices (as for the other kernels).
 * tg__conv_transpose_fast_raw does not dispatch here: on the benchmark layers
 * this path measured slower than the column path (docs/performance.md). */

#define TG__CAT_(a, b) a##_##b
#define TG__CAT(a, b) TG__CAT_(a, b)
#define FN(name) TG__CAT(name, SUF)

/* The sub-kernels of w (c_col, c_img/G, K), phase after phase: phase ph's
 * block (c_col*T_ph, c_img/G) starts at c_col*c_img/G * (taps of phases < ph):
 *   wp[(cx, t), cy] = w[cx, cy, r + s*t]   (per axis; cx over all groups).
 * That keeps w's (cx, cy) order, so packing reads w sequentially and writes
 * T_ph runs of c_img/G per cx; the GEMM takes it transposed (as the column
 * path takes w). */
static void FN(phase_pack_w)(const tg__conv_geom *g, const tg__conv_phase *ph, const T *w,
                             T *wp)
{
    const int64_t *ke = g->k, *s = g->stride;
    const int64_t nph = tg__conv_prod3(g->stride), ksz = tg__conv_prod3(ke);
    const int64_t cyg = g->c_img / g->groups;
#pragma omp parallel for schedule(static) if (g->c_col * cyg * ksz > 32768)
    for (int64_t cx = 0; cx < g->c_col; cx++) {
        T *blk = wp;   /* phase pi's block */
        for (int64_t pi = 0; pi < nph; pi++) {
            const tg__conv_phase *f = ph + pi;
            const int64_t *t = f->t, *r = f->r;
            for (int64_t cy = 0; cy < cyg; cy++) {
                const T *src = w + (cx * cyg + cy) * ksz;
                T *dst = blk + cx * f->taps * cyg + cy;
                for (int64_t t0 = 0; t0 < t[0]; t0++)
                    for (int64_t t1 = 0; t1 < t[1]; t1++)
                        for (int64_t t2 = 0; t2 < t[2]; t2++, dst += cyg)
                            *dst = src[((r[0] + s[0] * t0) * ke[1] + r[1] + s[1] * t1) * ke[2] +
                                       r[2] + s[2] * t2];
            }
            blk += g->c_col * f->taps * cyg;
        }
    }
}

/* One row of cols for input plane xp (S_in) and taps (t0, t1, t2):
 * dst[(q0, q1, q2)] = xp[qlo + q - t], 0 outside the input. */
static void FN(phase_cols_row)(const T *xp, const tg__conv_geom *g, const tg__conv_phase *f,
                               int64_t t0, int64_t t1, int64_t t2, T *dst)
{
    const int64_t *ie = g->col, *q = f->q, *qlo = f->qlo;
    /* last axis: i2 = q2 + off2 is inside for q2 in [lo, hi) */
    const int64_t off2 = qlo[2] - t2;
    const int64_t lo = tg__conv_clamp(-off2, 0, q[2]), hi = tg__conv_clamp(ie[2] - off2, lo, q[2]);
    for (int64_t q0 = 0; q0 < q[0]; q0++) {
        const int64_t i0 = qlo[0] + q0 - t0;
        for (int64_t q1 = 0; q1 < q[1]; q1++, dst += q[2]) {
            const int64_t i1 = qlo[1] + q1 - t1;
            if (i0 < 0 || i0 >= ie[0] || i1 < 0 || i1 >= ie[1]) {
                memset(dst, 0, (size_t)q[2] * sizeof(T));
                continue;
            }
            const T *src = xp + (i0 * ie[1] + i1) * ie[2] + off2;
            for (int64_t q2 = 0; q2 < lo; q2++) dst[q2] = 0;
            for (int64_t q2 = lo; q2 < hi; q2++) dst[q2] = src[q2];
            for (int64_t q2 = hi; q2 < q[2]; q2++) dst[q2] = 0;
        }
    }
}

/* cols (c_col*T_ph, n*Q_ph) of the chunk xb (n, c_col, S_in). */
static void FN(phase_cols)(const T *xb, int64_t n, const tg__conv_geom *g,
                           const tg__conv_phase *f, T *cols)
{
    const int64_t isz = tg__conv_prod3(g->col), rows = g->c_col * f->taps * n;
    const int64_t *t = f->t;
#pragma omp parallel for schedule(static) if (rows * f->pos > 32768)
    for (int64_t u = 0; u < rows; u++) {
        const int64_t b = u % n, row = u / n, cx = row / f->taps, k = row % f->taps;
        const int64_t t2 = k % t[2], t1 = (k / t[2]) % t[1], t0 = k / (t[1] * t[2]);
        FN(phase_cols_row)(xb + (b * g->c_col + cx) * isz, g, f, t0, t1, t2, cols + u * f->pos);
    }
}

/* y chunk (n, c_img, S_out) at phase f's positions = yr (c_img, n*Q_ph). */
static void FN(phase_scatter)(const T *yr, int64_t n, const tg__conv_geom *g,
                              const tg__conv_phase *f, T *yb)
{
    const int64_t *oe = g->img, *s = g->stride, *q = f->q;
    const int64_t osz = tg__conv_prod3(oe), rows = g->c_img * n;
    int64_t base[3];   /* o = (qlo + q)*s + r - p = base + q*s */
    for (int a = 0; a < 3; a++) base[a] = f->qlo[a] * s[a] + f->r[a] - g->pad[a];
#pragma omp parallel for schedule(static) if (rows * f->pos > 32768)
    for (int64_t u = 0; u < rows; u++) {
        const int64_t c = u / n, b = u % n;
        const T *src = yr + u * f->pos;   /* = yr + c*(n*Q) + b*Q */
        T *plane = yb + (b * g->c_img + c) * osz;
        for (int64_t q0 = 0; q0 < q[0]; q0++)
            for (int64_t q1 = 0; q1 < q[1]; q1++, src += q[2]) {
                T *dst = plane + ((base[0] + q0 * s[0]) * oe[1] + base[1] + q1 * s[1]) * oe[2] +
                         base[2];
                if (s[2] == 1) {
                    memcpy(dst, src, (size_t)q[2] * sizeof(T));
                } else {
                    for (int64_t q2 = 0; q2 < q[2]; q2++) dst[q2 * s[2]] = src[q2];
                }
            }
    }
}

/* Samples per chunk: the largest phase's cols and yr within the budget. */
static int64_t FN(phase_chunk)(const tg__conv_geom *g, const tg__conv_phase *ph)
{
    int64_t most = 0;
    for (int64_t pi = 0; pi < tg__conv_prod3(g->stride); pi++) {
        const tg__conv_phase f = ph[pi];
        const int64_t e = (g->c_col * f.taps + g->c_img) * f.pos;
        if (e > most) most = e;
    }
    return conv_chunk(g->batch, most * (int64_t)sizeof(T));
}

/* The chunk loop of conv_transpose_phase (wp packed, ph tabulated). */
static int FN(phase_chunks)(const tg__conv_geom *g, const tg__conv_phase *ph, const T *x,
                            const T *wp, T *y)
{
    const int64_t nph = tg__conv_prod3(g->stride), isz = tg__conv_prod3(g->col),
                  osz = tg__conv_prod3(g->img);
    const int64_t cxg = g->c_col / g->groups, cyg = g->c_img / g->groups;
    const int64_t nb = FN(phase_chunk)(g, ph);
    for (int64_t b0 = 0; b0 < g->batch; b0 += nb) {
        const int64_t n = b0 + nb <= g->batch ? nb : g->batch - b0;
        const T *xb = x + b0 * g->c_col * isz;
        T *yb = y + b0 * g->c_img * osz;
        const T *wph = wp;
        for (int64_t pi = 0; pi < nph; pi++) {
            const tg__conv_phase f = ph[pi];
            const int64_t kk = cxg * f.taps, N = n * f.pos;
            const T *wcur = wph;
            wph += g->c_col * f.taps * cyg;
            if (N == 0) continue;
            T *cols = tg__conv_scratch(0, (size_t)(g->c_col * f.taps * N) * sizeof(T));
            T *yr = cols ? tg__conv_scratch(1, (size_t)(g->c_img * N) * sizeof(T)) : NULL;
            if (!yr) return TG_ENOMEM;
            FN(phase_cols)(xb, n, g, &f, cols);
            for (int64_t gi = 0; gi < g->groups; gi++)
                FN(gemm_par)(true, false, cyg, N, kk, wcur + gi * kk * cyg, cyg,
                             cols + gi * kk * N, N, 0, yr + gi * cyg * N, N);
            FN(phase_scatter)(yr, n, g, &f, yb);
        }
    }
    return TG_OK;
}

/* y (B, c_img, S_out) = conv_transpose(x (B, c_col, S_in), w): the phase
 * table and the packed sub-kernels once per call, then the chunks. */
static int FN(conv_transpose_phase)(const tg__conv_geom *g, const T *x, const T *w, T *y)
{
    if (g->batch == 0) return TG_OK;
    const int64_t nph = tg__conv_prod3(g->stride), cxg = g->c_col / g->groups;
    T *wp = tg__conv_scratch(2, (size_t)(g->c_img * cxg * tg__conv_prod3(g->k)) * sizeof(T));
    tg__conv_phase *ph = wp ? tg__malloc((size_t)nph * sizeof *ph) : NULL;
    if (!ph) return TG_ENOMEM;
    for (int64_t pi = 0; pi < nph; pi++) tg__conv_phase_at(g, pi, ph + pi);
    FN(phase_pack_w)(g, ph, w, wp);
    const int rc = FN(phase_chunks)(g, ph, x, wp, y);
    free(ph);
    return rc;
}

#undef FN
#undef TG__CAT
#undef TG__CAT_
