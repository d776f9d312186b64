/* src/ops/pool_kernels_tmpl.h - the pooling and upsampling kernels for one
 * compute type.
 * Included by pool_kernels.c once per type with these macros defined:
 *   T     the element type (float or double)
 *   IT    the type of max_pool's indices within a block (int32_t for
 *         float, so that a compare's mask selects both; int64_t for double)
 *   SUF   the name suffix (f32 or f64)
 * and TG__POOL_BLOCK, the outputs per block of a row whose values (the
 * adjoint's quotients g / divisor, max_pool's indices) are held on the
 * stack.
 * It defines the static kernels {avg_pool, avg_pool_adjoint, max_pool,
 * max_pool_scatter, max_pool_gather, upsample_sum, adaptive_avg,
 * adaptive_avg_adjoint, adaptive_max}_SUF (FN pastes the suffix), which pool_kernels.c
 * puts in the tables of pool_internal.h.
 *
 * Every kernel walks a plane's output rows (o0, o1) and, inside a row, the
 * x rows and taps of the windows, with the innermost loop along the row's
 * outputs o2: tap j of output o2 reads x element o2*s - p + j*dil of an x
 * row, so for stride 1 the loop is contiguous and for stride 2 one
 * interleaved pair, both of which gcc vectorises.  The order of the terms of
 * each sum is PyTorch's CPU kernels' (cpu_avg_pool, avg_pool3d_out_frame,
 * max_pool's scan, the backward kernels' loops over outputs): windows in
 * row-major order, each term added into a running value of type T. */

#define TG__CAT_(a, b) a##_##b
#define TG__CAT(a, b) TG__CAT_(a, b)
#define FN(name) TG__CAT(name, SUF)

/* y[o] += x[o*s + off] for o in [a, b). */
static inline void FN(add_taps)(T *restrict y, int64_t a, int64_t b, const T *restrict x,
                                int64_t s, int64_t off)
{
    if (s == 1)
        for (int64_t o = a; o < b; o++) y[o] += x[o + off];
    else if (s == 2)
        for (int64_t o = a; o < b; o++) y[o] += x[2 * o + off];
    else
        for (int64_t o = a; o < b; o++) y[o] += x[o * s + off];
}

/* y[o] += x[o*S + off], then x[o*S + off + 1] (and + 2 when K is 3), for o
 * in [a, b): the K taps of an x row in one pass, added in order. */
#define TG__ADD_ROW(S, K)                                                     \
    for (int64_t o = a; o < b; o++) {                                         \
        T v = y[o] + x[o * (S) + off];                                        \
        v += x[o * (S) + off + 1];                                            \
        if ((K) == 3) v += x[o * (S) + off + 2];                              \
        y[o] = v;                                                             \
    }

/* The taps of x row xr added into output row y: taps 2 and 3 at strides 1
 * and 2 in one pass over the outputs where all of them lie inside x (fewer
 * loads and stores of y), the rest tap by tap. */
static void FN(add_row)(T *restrict y, const T *restrict x, const tg__pool_geom *g,
                        const tg__pool_axes *ax)
{
    const int64_t s = g->s[2], a = ax->in_lo, b = ax->in_hi, off = ax->j0 - g->p[2];
    const int64_t taps = ax->taps;
    const bool fused = a < b && (s == 1 || s == 2) && (taps == 2 || taps == 3);
    if (fused) {
        if (s == 1 && taps == 2) TG__ADD_ROW(1, 2)
        else if (s == 1) TG__ADD_ROW(1, 3)
        else if (taps == 2) TG__ADD_ROW(2, 2)
        else TG__ADD_ROW(2, 3)
    }
    for (int64_t t = 0; t < taps; t++) {
        if (!fused) {
            FN(add_taps)(y, ax->olo[t], ax->ohi[t], x, s, off + t);
            continue;
        }
        FN(add_taps)(y, ax->olo[t], ax->ohi[t] < a ? ax->ohi[t] : a, x, s, off + t);
        FN(add_taps)(y, ax->olo[t] > b ? ax->olo[t] : b, ax->ohi[t], x, s, off + t);
    }
}

#undef TG__ADD_ROW

/* x[o*s + off] += d[o] for o in [a, b). */
static inline void FN(spread_taps)(T *restrict x, int64_t a, int64_t b, const T *restrict d,
                                   int64_t s, int64_t off)
{
    if (s == 1)
        for (int64_t o = a; o < b; o++) x[o + off] += d[o];
    else if (s == 2)
        for (int64_t o = a; o < b; o++) x[2 * o + off] += d[o];
    else
        for (int64_t o = a; o < b; o++) x[o * s + off] += d[o];
}

/* q[o] = v[o] / divisor(o) for o in [a, b) of output row (o0, o1): the
 * integer divisor converted to T, as PyTorch's division of a T by an
 * int64_t; from the tables in T when they are exact (a loop that
 * vectorises).  q may be v. */
static inline void FN(divide_row)(T *q, const T *v, const tg__pool_axes *ax,
                                  int64_t o0, int64_t o1, int64_t a, int64_t b)
{
    if (ax->divt[0]) {
        const T rf = ((const T *)ax->divt[0])[o0] * ((const T *)ax->divt[1])[o1];
        const T *restrict d2 = ax->divt[2];
        for (int64_t o = a; o < b; o++) q[o - a] = v[o - a] / (rf * d2[o]);
    } else {
        const int64_t rf = ax->div[0][o0] * ax->div[1][o1];
        for (int64_t o = a; o < b; o++) q[o - a] = v[o - a] / (T)(rf * ax->div[2][o]);
    }
}

/* y = the window sums over x, each divided by its divisor (PyTorch: sum in
 * T from 0, then one division by the integer divisor converted to T). */
static void FN(avg_pool)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    const tg__pool_axes *ax = j->ax;
    const int64_t I1 = g->in[1], I2 = g->in[2], O1 = g->out[1], O2 = g->out[2];
    for (int64_t pl = plo; pl < phi; pl++) {
        const T *x = (const T *)j->src + pl * g->in_plane;   /* x is (I0, I1, I2) */
        T *y = (T *)j->dst + pl * g->out_plane;                /* y is (O0, O1, O2) */
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++) {
                T *yr = y + (o0 * O1 + o1) * O2;
                for (int64_t o = 0; o < O2; o++) yr[o] = 0;
                for (int64_t i0 = ax->lo[0][o0]; i0 < ax->hi[0][o0]; i0++)
                    for (int64_t i1 = ax->lo[1][o1]; i1 < ax->hi[1][o1]; i1++)
                        FN(add_row)(yr, x + (i0 * I1 + i1) * I2, g, ax);
                FN(divide_row)(yr, yr, ax, o0, o1, 0, O2);
            }
    }
}

/* dx += A^T g: g[o] / divisor(o) added into every x element of window o
 * (PyTorch: the quotient in T, added over outputs in row-major order; per
 * x element that is the order here: rows, blocks and, within a block, the
 * taps from the last, whose outputs come first). */
static void FN(avg_pool_adjoint)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    const tg__pool_axes *ax = j->ax;
    const int64_t I1 = g->in[1], I2 = g->in[2], O1 = g->out[1], O2 = g->out[2];
    T d[TG__POOL_BLOCK];
    for (int64_t pl = plo; pl < phi; pl++) {
        const T *gp = (const T *)j->src + pl * g->out_plane;   /* g is (O0, O1, O2) */
        T *dx = (T *)j->dst + pl * g->in_plane;                /* dx is (I0, I1, I2) */
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++) {
                const T *gr = gp + (o0 * O1 + o1) * O2;
                for (int64_t c0 = 0; c0 < O2; c0 += TG__POOL_BLOCK) {
                    const int64_t c1 = O2 - c0 < TG__POOL_BLOCK ? O2 : c0 + TG__POOL_BLOCK;
                    FN(divide_row)(d, gr + c0, ax, o0, o1, c0, c1);
                    for (int64_t i0 = ax->lo[0][o0]; i0 < ax->hi[0][o0]; i0++)
                        for (int64_t i1 = ax->lo[1][o1]; i1 < ax->hi[1][o1]; i1++)
                            for (int64_t t = ax->taps - 1; t >= 0; t--) {
                                const int64_t a = ax->olo[t] > c0 ? ax->olo[t] : c0;
                                const int64_t b = ax->ohi[t] < c1 ? ax->ohi[t] : c1;
                                FN(spread_taps)(dx + (i0 * I1 + i1) * I2, a - c0, b - c0, d,
                                                g->s[2], c0 * g->s[2] + ax->j0 + t - g->p[2]);
                            }
                }
            }
    }
}

/* y[o] = max(y[o], v) by PyTorch's scan: v is taken when it is greater or
 * NaN, so ties keep the first and the last NaN wins. */
#define TG__TAKES(v, best) ((v) > (best) || (v) != (v))

/* One x row's tap of a max_pool output row: y[o] and, when ir, the index
 * it came from, ir[o - c0], for o in [a, b); branch-free, with the index as
 * an induction variable, so that the loops vectorise (the strides 1 and 2
 * in loops of their own). */
#define TG__MAX_LOOP(S)                                                       \
    do {                                                                      \
        IT at = (IT)(base + a * (S) + off);                                   \
        for (int64_t o = a; o < b; o++, at += (IT)(S)) {                      \
            const T v = xr[o * (S) + off];                                    \
            const bool take = TG__TAKES(v, y[o]);                             \
            y[o] = take ? v : y[o];                                           \
            ir[o - c0] = take ? at : ir[o - c0];                              \
        }                                                                     \
    } while (0)

static inline void FN(max_tap)(T *restrict y, IT *restrict ir, int64_t c0, int64_t a, int64_t b,
                               const T *restrict xr, int64_t s, int64_t off, int64_t base)
{
    if (!ir) {
        for (int64_t o = a; o < b; o++) {
            const T v = xr[o * s + off];
            y[o] = TG__TAKES(v, y[o]) ? v : y[o];
        }
    } else if (s == 1) {
        TG__MAX_LOOP(1);
    } else if (s == 2) {
        TG__MAX_LOOP(2);
    } else {
        TG__MAX_LOOP(s);
    }
}

#undef TG__MAX_LOOP

/* Outputs [c0, c1) of max_pool's output row (o0, o1), yr, and their indices
 * when kept: each starts at -inf with its window's first element (the one
 * a window of -infs keeps), -1 for a window with no element inside x. */
static void FN(max_block)(const tg__pool_job *j, const T *x, T *yr, int64_t *idx, int64_t o0,
                          int64_t o1, int64_t c0, int64_t c1)
{
    const tg__pool_geom *g = j->g;
    const tg__pool_axes *ax = j->ax;
    const int64_t I1 = g->in[1], I2 = g->in[2];
    const int64_t lo0 = ax->lo[0][o0], hi0 = ax->hi[0][o0];
    const int64_t lo1 = ax->lo[1][o1], hi1 = ax->hi[1][o1];
    const bool empty = lo0 >= hi0 || lo1 >= hi1;
    IT ib[TG__POOL_BLOCK], *ir = idx ? ib : NULL;
    for (int64_t o = c0; o < c1; o++) yr[o] = -(T)INFINITY;
    if (ir) {
        const int64_t base = (lo0 * I1 + lo1) * I2;
        for (int64_t o = c0; o < c1; o++)
            ir[o - c0] = !empty && ax->lo[2][o] < ax->hi[2][o] ? (IT)(base + ax->lo[2][o]) : -1;
    }
    if (!empty)
        for (int64_t i0 = lo0; i0 < hi0; i0 += g->dil[0])
            for (int64_t i1 = lo1; i1 < hi1; i1 += g->dil[1]) {
                const int64_t base = (i0 * I1 + i1) * I2;
                for (int64_t t = 0; t < ax->taps; t++) {
                    const int64_t a = ax->olo[t] > c0 ? ax->olo[t] : c0;
                    const int64_t b = ax->ohi[t] < c1 ? ax->ohi[t] : c1;
                    FN(max_tap)(yr, ir, c0, a, b, x + base, g->s[2],
                                (ax->j0 + t) * g->dil[2] - g->p[2], base);
                }
            }
    if (ir)
        for (int64_t o = c0; o < c1; o++) idx[o] = ir[o - c0];
}

/* y = each window's maximum, idx_out its index within the plane (the
 * output rows in blocks: see max_block). */
static void FN(max_pool)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    const int64_t O1 = g->out[1], O2 = g->out[2];
    for (int64_t pl = plo; pl < phi; pl++) {
        const T *x = (const T *)j->src + pl * g->in_plane;
        T *y = (T *)j->dst + pl * g->out_plane;
        int64_t *idx = j->idx_out ? j->idx_out + pl * g->out_plane : NULL;
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++) {
                const int64_t r = (o0 * O1 + o1) * O2;
                for (int64_t c0 = 0; c0 < O2; c0 += TG__POOL_BLOCK) {
                    const int64_t c1 = O2 - c0 < TG__POOL_BLOCK ? O2 : c0 + TG__POOL_BLOCK;
                    FN(max_block)(j, x, y + r, idx ? idx + r : NULL, o0, o1, c0, c1);
                }
            }
    }
}

#undef TG__TAKES

/* dx[idx[o]] += g[o], over the outputs in order (PyTorch's). */
static void FN(max_pool_scatter)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    for (int64_t pl = plo; pl < phi; pl++) {
        const T *gp = (const T *)j->src + pl * g->out_plane;
        const int64_t *ip = j->idx + pl * g->out_plane;
        T *dx = (T *)j->dst + pl * g->in_plane;
        for (int64_t e = 0; e < g->out_plane; e++)
            if (ip[e] >= 0) dx[ip[e]] += gp[e];
    }
}

/* y[o] = h[idx[o]] (0 where the window is empty). */
static void FN(max_pool_gather)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    for (int64_t pl = plo; pl < phi; pl++) {
        const T *hp = (const T *)j->src + pl * g->in_plane;
        const int64_t *ip = j->idx + pl * g->out_plane;
        T *y = (T *)j->dst + pl * g->out_plane;
        for (int64_t e = 0; e < g->out_plane; e++) y[e] = ip[e] < 0 ? 0 : hp[ip[e]];
    }
}

/* dx[i] += the g elements of the block that reads i: output row (o0, o1)
 * reads x row (o0 / k0, o1 / k1), its element o2 x element o2 / k2.  Per x
 * element the terms come in the outputs' row-major order (PyTorch's). */
static void FN(upsample_sum)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    const int64_t I1 = g->in[1], I2 = g->in[2], O1 = g->out[1], O2 = g->out[2], k2 = g->k[2];
    for (int64_t pl = plo; pl < phi; pl++) {
        const T *gp = (const T *)j->src + pl * g->out_plane;
        T *dx = (T *)j->dst + pl * g->in_plane;
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++) {
                const T *restrict gr = gp + (o0 * O1 + o1) * O2;
                T *restrict xr = dx + ((o0 / g->k[0]) * I1 + o1 / g->k[1]) * I2;
                if (k2 == 1) {
                    for (int64_t i = 0; i < I2; i++) xr[i] += gr[i];
                } else if (k2 == 2) {
                    for (int64_t i = 0; i < I2; i++) xr[i] = xr[i] + gr[2 * i] + gr[2 * i + 1];
                } else {
                    for (int64_t r = 0; r < k2; r++)
                        for (int64_t i = 0; i < I2; i++) xr[i] += gr[i * k2 + r];
                }
            }
    }
}

/* y[o] = the sum of window o of x, from 0 in row-major order, divided by
 * the window's extents along axes 0, 1 and 2 in turn (PyTorch's
 * cpu_adaptive_avg_pool and adaptive_avg_pool3d_out_frame: sum / kd / kh /
 * kw, each extent converted to T; 1-d and 2-d have extent 1 along the
 * added axes, a division that changes nothing). */
static void FN(adaptive_avg)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    const tg__pool_axes *ax = j->ax;
    const int64_t I1 = g->in[1], I2 = g->in[2], O1 = g->out[1], O2 = g->out[2];
    for (int64_t pl = plo; pl < phi; pl++) {
        const T *x = (const T *)j->src + pl * g->in_plane;   /* x is (I0, I1, I2) */
        T *y = (T *)j->dst + pl * g->out_plane;                /* y is (O0, O1, O2) */
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++)
                for (int64_t o2 = 0; o2 < O2; o2++) {
                    T sum = 0;
                    for (int64_t i0 = ax->lo[0][o0]; i0 < ax->hi[0][o0]; i0++)
                        for (int64_t i1 = ax->lo[1][o1]; i1 < ax->hi[1][o1]; i1++) {
                            const T *xr = x + (i0 * I1 + i1) * I2;
                            for (int64_t i2 = ax->lo[2][o2]; i2 < ax->hi[2][o2]; i2++)
                                sum += xr[i2];
                        }
                    y[(o0 * O1 + o1) * O2 + o2] = sum / (T)ax->div[0][o0] /
                                                  (T)ax->div[1][o1] / (T)ax->div[2][o2];
                }
    }
}

/* dx += A^T g: g[o] divided by window o's extents in turn (by its size at
 * once when job->one_division: avg_pool_adjoint's quotient, where the
 * windows are avg_pool's and each x element takes one), added into each x
 * element of the window, over the outputs in row-major order (PyTorch's
 * backward kernels; windows overlap when I is not a multiple of O). */
static void FN(adaptive_avg_adjoint)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    const tg__pool_axes *ax = j->ax;
    const int64_t I1 = g->in[1], I2 = g->in[2], O1 = g->out[1], O2 = g->out[2];
    for (int64_t pl = plo; pl < phi; pl++) {
        const T *gp = (const T *)j->src + pl * g->out_plane;   /* g is (O0, O1, O2) */
        T *dx = (T *)j->dst + pl * g->in_plane;                /* dx is (I0, I1, I2) */
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++)
                for (int64_t o2 = 0; o2 < O2; o2++) {
                    const int64_t d0 = ax->div[0][o0], d1 = ax->div[1][o1], d2 = ax->div[2][o2];
                    const T go = gp[(o0 * O1 + o1) * O2 + o2];
                    const T d = j->one_division ? go / (T)(d0 * d1 * d2)
                                                : go / (T)d0 / (T)d1 / (T)d2;
                    for (int64_t i0 = ax->lo[0][o0]; i0 < ax->hi[0][o0]; i0++)
                        for (int64_t i1 = ax->lo[1][o1]; i1 < ax->hi[1][o1]; i1++) {
                            T *xr = dx + (i0 * I1 + i1) * I2;
                            for (int64_t i2 = ax->lo[2][o2]; i2 < ax->hi[2][o2]; i2++)
                                xr[i2] += d;
                        }
                }
    }
}

/* y[o] = the largest element of window o of x and idx_out[o] (when kept)
 * its index within the plane, by PyTorch's scan (cpu_adaptive_max_pool,
 * adaptive_max_pool3d's frame loop): the window in row-major order from
 * -inf and its first element, taking v when it is greater or NaN, so ties
 * keep the first, the last NaN wins and a window of -infs gives its first
 * element.  Adaptive windows are never empty. */
static void FN(adaptive_max)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    const tg__pool_axes *ax = j->ax;
    const int64_t I1 = g->in[1], I2 = g->in[2], O1 = g->out[1], O2 = g->out[2];
    for (int64_t pl = plo; pl < phi; pl++) {
        const T *x = (const T *)j->src + pl * g->in_plane;   /* x is (I0, I1, I2) */
        T *y = (T *)j->dst + pl * g->out_plane;                /* y is (O0, O1, O2) */
        int64_t *idx = j->idx_out ? j->idx_out + pl * g->out_plane : NULL;
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++)
                for (int64_t o2 = 0; o2 < O2; o2++) {
                    const int64_t lo2 = ax->lo[2][o2], hi2 = ax->hi[2][o2];
                    T best = -(T)INFINITY;
                    int64_t at = (ax->lo[0][o0] * I1 + ax->lo[1][o1]) * I2 + lo2;
                    for (int64_t i0 = ax->lo[0][o0]; i0 < ax->hi[0][o0]; i0++)
                        for (int64_t i1 = ax->lo[1][o1]; i1 < ax->hi[1][o1]; i1++) {
                            const int64_t row = (i0 * I1 + i1) * I2;
                            for (int64_t i2 = lo2; i2 < hi2; i2++) {
                                const T v = x[row + i2];
                                if (v > best || v != v) {
                                    best = v;
                                    at = row + i2;
                                }
                            }
                        }
                    const int64_t o = (o0 * O1 + o1) * O2 + o2;
                    y[o] = best;
                    if (idx) idx[o] = at;
                }
    }
}

#undef FN
#undef TG__CAT
#undef TG__CAT_
