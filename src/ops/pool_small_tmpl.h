/* src/ops/pool_small_tmpl.h - the kernels of pool_small.c for one compute
 * type.  Included by pool_small.c once per type with these macros defined:
 *   T     the element type (float or double)
 *   IT    an index of T's width (int32_t for float, int64_t for double), so
 *         that a compare's mask selects both
 *   SUF   the name suffix (f32 or f64)
 * It defines the static kernels adaptive_max_lanes_SUF and
 * adaptive_avg_planes_SUF (FN pastes the suffix), which pool_small.c puts
 * in the tables of pool_internal.h. */

#define TG__CAT_(a, b) a##_##b
#define TG__CAT(a, b) TG__CAT_(a, b)
#define FN(name) TG__CAT(name, SUF)

/* The lanes of a run: 64 bytes of T. */
#define TG__LANES ((int64_t)(64 / sizeof(T)))

/* Lane k of (m, at) takes element k of xr, at index base + k of the plane,
 * for k in [0, n), by the scan's rule: when it is greater than the lane's
 * value or NaN.  Branch-free, with the index an induction variable, so that
 * the loop vectorises. */
static inline void FN(take_row)(T *restrict m, IT *restrict at, const T *restrict xr, int64_t n,
                                int64_t base)
{
    IT i = (IT)base;
    for (int64_t k = 0; k < n; k++, i++) {
        const T v = xr[k];
        const bool take = v > m[k] || v != v;
        m[k] = take ? v : m[k];
        at[k] = take ? i : at[k];
    }
}

#ifdef __GNUC__
/* 16 bytes of values and of indices, in a vector each (GCC's and Clang's
 * vector extension: SSE2 registers on any x86-64); TG__LANES lanes are
 * TG__VECS of them.  A loop over a constant TG__LANES lanes in plain C
 * (take_row, as other compilers get) is unrolled into branches instead. */
typedef T FN(vec) __attribute__((vector_size(16)));
typedef IT FN(ivec) __attribute__((vector_size(16)));
#define TG__VECS ((int64_t)(TG__LANES * sizeof(T) / 16))
#endif

/* The run x[start, start + n) into TG__LANES lanes: element i in lane
 * i mod TG__LANES (the last n mod TG__LANES in the first lanes). */
static void FN(take_run)(T *restrict m, IT *restrict at, const T *x, int64_t start, int64_t n)
{
    int64_t i = 0;
#ifdef __GNUC__
    if (n >= TG__LANES) {
        const int64_t w = 16 / sizeof(T);   /* lanes per vector */
        FN(vec) vm[TG__VECS], v;
        FN(ivec) vat[TG__VECS], vi[TG__VECS];
        memcpy(vm, m, sizeof vm);
        memcpy(vat, at, sizeof vat);
        for (int64_t q = 0; q < TG__VECS; q++)
            for (int64_t k = 0; k < w; k++) vi[q][k] = (IT)(start + q * w + k);
        for (; i + TG__LANES <= n; i += TG__LANES)
            for (int64_t q = 0; q < TG__VECS; q++) {
                memcpy(&v, x + start + i + q * w, sizeof v);
                const FN(ivec) take = (FN(ivec))(v > vm[q]) | (FN(ivec))(v != v);
                vm[q] = (FN(vec))(((FN(ivec))v & take) | ((FN(ivec))vm[q] & ~take));
                vat[q] = (vi[q] & take) | (vat[q] & ~take);
                vi[q] += (IT)TG__LANES;
            }
        memcpy(m, vm, sizeof vm);
        memcpy(at, vat, sizeof vat);
    }
#endif
    for (; i + TG__LANES <= n; i += TG__LANES)
        FN(take_row)(m, at, x + start + i, TG__LANES, start + i);
    FN(take_row)(m, at, x + start + i, n - i, start + i);
}

/* The index of a window's maximum from n lanes (m, at), each of which took
 * its share of the window in index order from (-inf, any index): the
 * scan's answer is a function of the window's elements alone (the last
 * NaN's index when there is a NaN, else the first index of the largest
 * value, ties by ==, so -0 and +0 tie), so the lanes' answers combine in
 * any order: the largest index among the NaN lanes, else the smallest
 * among the lanes holding the largest value, else (every element -inf,
 * no lane took one) first, the window's first element. */
static int64_t FN(pick)(const T *m, const IT *at, int64_t n, int64_t first)
{
    /* branch-free passes (the lanes' order is random): the largest value
     * and whether a lane holds a NaN, then the index */
    T best = -(T)INFINITY;
    bool nan = false;
    for (int64_t k = 0; k < n; k++) {
        nan |= m[k] != m[k];
        best = m[k] > best ? m[k] : best;
    }
    int64_t r = -1;
    if (nan) {
        for (int64_t k = 0; k < n; k++) r = m[k] != m[k] && at[k] > r ? at[k] : r;
        return r;
    }
    if (!(best > -(T)INFINITY)) return first;
    r = INT64_MAX;
    for (int64_t k = 0; k < n; k++) r = m[k] == best && at[k] < r ? at[k] : r;
    return r;
}

/* Window (o0, o1, o2) of plane x, its rows' segments as runs (a window of
 * whole rows, one run per i0, or one run when it spans the plane's rows
 * too), into TG__LANES lanes: its maximum's index within the plane. */
static int64_t FN(window_max)(const T *x, const tg__pool_geom *g, const tg__pool_axes *ax,
                              int64_t o0, int64_t o1, int64_t o2)
{
    const int64_t I1 = g->in[1], I2 = g->in[2];
    const int64_t lo0 = ax->lo[0][o0], hi0 = ax->hi[0][o0], lo1 = ax->lo[1][o1];
    const int64_t hi1 = ax->hi[1][o1], lo2 = ax->lo[2][o2], w = ax->hi[2][o2] - lo2;
    T m[TG__LANES];
    IT at[TG__LANES];
    for (int64_t k = 0; k < TG__LANES; k++) {
        m[k] = -(T)INFINITY;
        at[k] = 0;
    }
    if (w == I2 && hi1 - lo1 == I1)
        FN(take_run)(m, at, x, lo0 * I1 * I2, (hi0 - lo0) * I1 * I2);
    else if (w == I2)
        for (int64_t i0 = lo0; i0 < hi0; i0++)
            FN(take_run)(m, at, x, (i0 * I1 + lo1) * I2, (hi1 - lo1) * I2);
    else
        for (int64_t i0 = lo0; i0 < hi0; i0++)
            for (int64_t i1 = lo1; i1 < hi1; i1++)
                FN(take_run)(m, at, x, (i0 * I1 + i1) * I2 + lo2, w);
    return FN(pick)(m, at, TG__LANES, (lo0 * I1 + lo1) * I2 + lo2);
}

/* y[o] = x[i], idx[o] = i when kept. */
static inline void FN(put_max)(T *y, int64_t *idx, int64_t o, const T *x, int64_t i)
{
    y[o] = x[i];
    if (idx) idx[o] = i;
}

/* y = the window maxima of x and idx_out (when kept) their indices, the
 * adaptive_max kernel's to the bit, with lanes.  An output row with
 * several outputs whose windows span several rows takes the rows into one
 * lane per column (x rows are at most TG__POOL_LANE_COLS long), and each
 * output picks from its window's columns; any other window (whole rows, one
 * row) takes its runs into TG__LANES lanes.  Every lane sees its elements in
 * index order, which is all that pick needs.  The y value is x's element at
 * the index (the sign of a zero, a NaN's payload). */
static void FN(adaptive_max_lanes)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    const tg__pool_axes *ax = j->ax;
    const int64_t I1 = g->in[1], I2 = g->in[2], O1 = g->out[1], O2 = g->out[2];
    T cm[TG__POOL_LANE_COLS];
    IT cat[TG__POOL_LANE_COLS];
    for (int64_t pl = plo; pl < phi; pl++) {
        const T *x = (const T *)j->src + pl * g->in_plane;   /* x is (I0, I1, I2) */
        T *y = (T *)j->dst + pl * g->out_plane;                /* y is (O0, O1, O2) */
        int64_t *idx = j->idx_out ? j->idx_out + pl * g->out_plane : NULL;
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++) {
                const int64_t lo0 = ax->lo[0][o0], hi0 = ax->hi[0][o0];
                const int64_t lo1 = ax->lo[1][o1], hi1 = ax->hi[1][o1];
                const int64_t r = (o0 * O1 + o1) * O2, first = (lo0 * I1 + lo1) * I2;
                if (O2 == 1 || (hi0 - lo0) * (hi1 - lo1) == 1 || I2 > TG__POOL_LANE_COLS) {
                    for (int64_t o2 = 0; o2 < O2; o2++)
                        FN(put_max)(y, idx, r + o2, x, FN(window_max)(x, g, ax, o0, o1, o2));
                    continue;
                }
                for (int64_t c = 0; c < I2; c++) {
                    cm[c] = -(T)INFINITY;
                    cat[c] = 0;
                }
                for (int64_t i0 = lo0; i0 < hi0; i0++)
                    for (int64_t i1 = lo1; i1 < hi1; i1++)
                        FN(take_row)(cm, cat, x + (i0 * I1 + i1) * I2, I2, (i0 * I1 + i1) * I2);
                for (int64_t o2 = 0; o2 < O2; o2++) {
                    const int64_t lo2 = ax->lo[2][o2], hi2 = ax->hi[2][o2];
                    FN(put_max)(y, idx, r + o2, x,
                                FN(pick)(cm + lo2, cat + lo2, hi2 - lo2, first + lo2));
                }
            }
    }
}

#undef TG__LANES
#undef TG__VECS

/* The planes summed side by side. */
#define TG__PLANES 8

/* s[p] = the sum of window (o0, o1, o2) of plane p (x + p * in_plane),
 * from 0 in row-major order (the adaptive_avg kernel's sum, term by
 * term), for p in [0, np): np chains of dependent adds side by side, which
 * the processor overlaps. */
static inline void FN(window_sums)(T *restrict s, int64_t np, const T *x, const tg__pool_geom *g,
                                   const tg__pool_axes *ax, int64_t o0, int64_t o1, int64_t o2)
{
    const int64_t I1 = g->in[1], I2 = g->in[2], n = g->in_plane;
    const int64_t lo2 = ax->lo[2][o2], hi2 = ax->hi[2][o2];
    for (int64_t p = 0; p < np; p++) s[p] = 0;
    for (int64_t i0 = ax->lo[0][o0]; i0 < ax->hi[0][o0]; i0++)
        for (int64_t i1 = ax->lo[1][o1]; i1 < ax->hi[1][o1]; i1++) {
            const T *xr = x + (i0 * I1 + i1) * I2;
            for (int64_t i2 = lo2; i2 < hi2; i2++)
                for (int64_t p = 0; p < np; p++) s[p] += xr[p * n + i2];
        }
}

/* adaptive_avg_planes where each plane is one window (an output of one
 * element per plane): the sums of planes [plo, phi) by PLANE_SUMS (f64: the
 * same terms in the same order as window_sums; f32: the same too for planes
 * below 64 elements, else tg__plane_sums_f32's lanes in their own order),
 * written straight into y (one element per plane) and divided there as
 * adaptive_avg_planes divides them. */
static void FN(global_avg)(const tg__pool_job *j, int64_t plo, int64_t phi)
{
    const tg__pool_geom *g = j->g;
    const tg__pool_axes *ax = j->ax;
    const int64_t n = g->in_plane;
    const int64_t d0 = ax->div[0][0], d1 = ax->div[1][0], d2 = ax->div[2][0];
    T *y = (T *)j->dst + plo;
    PLANE_SUMS(y, (const T *)j->src + plo * n, n, phi - plo);
    for (int64_t p = 0; p < phi - plo; p++)
        y[p] = j->one_division ? y[p] / (T)(d0 * d1 * d2) : y[p] / (T)d0 / (T)d1 / (T)d2;
}

/* y = the window sums of x divided by their divisors, TG__PLANES planes at
 * a time: each sum is the adaptive_avg kernel's, and the division that
 * of avg_pool's kernels when job->one_division (one division by the
 * window's size, the product of its extents, converted to T), else the
 * adaptive_avg kernel's (by each extent in turn). */
static void FN(adaptive_avg_planes)(void *job, int64_t plo, int64_t phi)
{
    const tg__pool_job *j = job;
    const tg__pool_geom *g = j->g;
    const tg__pool_axes *ax = j->ax;
    const int64_t O1 = g->out[1], O2 = g->out[2];
    if (g->out_plane == 1) {   /* one window, the whole plane */
        FN(global_avg)(j, plo, phi);
        return;
    }
    for (int64_t pl = plo; pl < phi; pl += TG__PLANES) {
        const int64_t np = phi - pl < TG__PLANES ? phi - pl : TG__PLANES;
        const T *x = (const T *)j->src + pl * g->in_plane;   /* x is (np, I0, I1, I2) */
        T *y = (T *)j->dst + pl * g->out_plane;                /* y is (np, O0, O1, O2) */
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)
            for (int64_t o1 = 0; o1 < O1; o1++)
                for (int64_t o2 = 0; o2 < O2; o2++) {
                    T s[TG__PLANES];
                    if (np == TG__PLANES) FN(window_sums)(s, TG__PLANES, x, g, ax, o0, o1, o2);
                    else FN(window_sums)(s, np, x, g, ax, o0, o1, o2);
                    const int64_t d0 = ax->div[0][o0], d1 = ax->div[1][o1], d2 = ax->div[2][o2];
                    const int64_t o = (o0 * O1 + o1) * O2 + o2;
                    for (int64_t p = 0; p < np; p++)
                        y[p * g->out_plane + o] = j->one_division
                                                      ? s[p] / (T)(d0 * d1 * d2)
                                                      : s[p] / (T)d0 / (T)d1 / (T)d2;
                }
    }
}

#undef TG__PLANES
#undef FN
#undef TG__CAT
#undef TG__CAT_
