/* src/ops/grid_sample_tmpl.h - grid_sample's kernels for one compute type,
 * included by grid_sample.c once per type with
 *   GS_T    the type (float, double)
 *   GS_S    the suffix of the names it defines (f32, f64)
 * defining gs_forward_<S> (points [lo, hi) of the flat (N, points) range),
 * gs_dinput_<S> (elements of (N, groups of channels)) and gs_dgrid_<S>
 * (points).  Every formula is torch 1.13's GridSampler.h in the type's own
 * arithmetic (see grid_sample.c's top). */

#define GS_CAT_(a, b) a##_##b
#define GS_CAT(a, b) GS_CAT_(a, b)
#define GS_FN(name) GS_CAT(name, GS_S)

/* torch's grid_sampler_unnormalize: grid coordinate -1..1 to a pixel
 * position; *m (when not NULL) is its derivative. */
static inline GS_T GS_FN(gs_unnormalize)(GS_T c, int64_t size, bool align, GS_T *m)
{
    if (align) {
        if (m) *m = (GS_T)(size - 1) / 2;
        return ((c + 1) / 2) * (GS_T)(size - 1);
    }
    if (m) *m = (GS_T)size / 2;
    return ((c + 1) * (GS_T)size - 1) / 2;
}

/* clip_coordinates(_set_grad): into [0, size - 1]; the gradient is 0 at and
 * beyond either end (torch counts the borders as out of bounds).  A NaN
 * goes to 0, as in torch's 2-D kernel. */
static inline GS_T GS_FN(gs_clip)(GS_T in, int64_t size, GS_T *d)
{
    const GS_T hi = (GS_T)(size - 1);
    if (!(in > 0)) {
        *d = 0;
        return 0;
    }
    if (in >= hi) {
        *d = 0;
        return hi;
    }
    *d = 1;
    return in;
}

/* reflect_coordinates(_set_grad) about [twice_low / 2, twice_high / 2]. */
static inline GS_T GS_FN(gs_reflect)(GS_T in, int64_t twice_low, int64_t twice_high, GS_T *d)
{
    if (twice_low == twice_high) {
        *d = 0;
        return 0;
    }
    const GS_T lo = (GS_T)twice_low / 2, span = (GS_T)(twice_high - twice_low) / 2;
    GS_T sign = 1;
    in = in - lo;
    if (in < 0) {
        sign = -1;
        in = -in;
    }
    const GS_T extra = (GS_T)fmod((double)in, (double)span);
    const double flips = floor((double)(in / span));   /* the quotient in GS_T, as torch */
    if (fmod(flips, 2) == 0) {
        *d = sign;
        return extra + lo;
    }
    *d = -sign;
    return span - extra + lo;
}

/* compute_coordinates(_set_grad): the padding mode applied to a pixel
 * position; *d times the derivative so far. */
static inline GS_T GS_FN(gs_pad)(GS_T c, int64_t size, int pad, bool align, GS_T *d)
{
    GS_T dc = 1, dr = 1;
    if (pad == TG_GRID_SAMPLE_BORDER) {
        c = GS_FN(gs_clip)(c, size, &dc);
    } else if (pad == TG_GRID_SAMPLE_REFLECTION) {
        c = align ? GS_FN(gs_reflect)(c, 0, 2 * (size - 1), &dr)
                  : GS_FN(gs_reflect)(c, -1, 2 * size - 1, &dr);
        c = GS_FN(gs_clip)(c, size, &dc);
    }
    *d = *d * dr * dc;
    return c;
}

/* torch's cubic convolution coefficients (A = -0.75) of the four taps
 * around a position t past the second, and their derivatives negated
 * (get_cubic_coefficients_grad: the derivative in the tap's offset). */
static inline void GS_FN(gs_cubic)(GS_T c[4], GS_T t)
{
    const GS_T A = (GS_T)-0.75, x1 = t, x2 = 1 - t;
    c[0] = ((A * (x1 + 1) - 5 * A) * (x1 + 1) + 8 * A) * (x1 + 1) - 4 * A;
    c[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
    c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    c[3] = ((A * (x2 + 1) - 5 * A) * (x2 + 1) + 8 * A) * (x2 + 1) - 4 * A;
}

static inline void GS_FN(gs_cubic_grad)(GS_T c[4], GS_T t)
{
    const GS_T A = (GS_T)-0.75;
    GS_T x = -1 - t;
    c[0] = (-3 * A * x - 10 * A) * x - 8 * A;
    x = -t;
    c[1] = (-3 * (A + 2) * x - 2 * (A + 3)) * x;
    x = 1 - t;
    c[2] = (3 * (A + 2) * x - 2 * (A + 3)) * x;
    x = 2 - t;
    c[3] = (3 * A * x - 10 * A) * x + 8 * A;
}

/* Point p's source positions src[a] along the job's spatial axes (a = 0 the
 * outermost; grid coordinate ns - 1 - a is axis a's) and their derivatives
 * m[a] in the grid coordinate.  Bicubic only unnormalizes: its padding
 * applies to each tap. */
static void GS_FN(gs_point)(const gs_job *j, int64_t p, GS_T *src, GS_T *m)
{
    const GS_T *gp = (const GS_T *)j->grid + p * j->ns;
    for (int a = 0; a < j->ns; a++) {
        const int64_t size = j->in[a];
        src[a] = GS_FN(gs_unnormalize)(gp[j->ns - 1 - a], size, j->align, &m[a]);
        if (j->mode != TG_GRID_SAMPLE_BICUBIC)
            src[a] = GS_FN(gs_pad)(src[a], size, j->pad, j->align, &m[a]);
    }
}

/* The element offset in a (c) plane of input of the integral position
 * pos[0..ns), or -1 outside the input (a NaN reads nothing). */
static inline int64_t GS_FN(gs_offset)(const gs_job *j, const GS_T *pos)
{
    int64_t off = 0;
    for (int a = 0; a < j->ns; a++) {
        if (!(pos[a] >= 0 && pos[a] < (GS_T)j->in[a])) return -1;
        off = off * j->in[a] + (int64_t)pos[a];
    }
    return off;
}

/* Bilinear (2^ns corners, corner k's bit ns - 1 - a says lo or hi along
 * axis a, torch's nw ne sw se order) or nearest: the in-bounds offsets
 * off[k] (-1 outside) and weights w[k] (x's factor first, as torch). */
static int GS_FN(gs_corners)(const gs_job *j, const GS_T *src, int64_t *off, GS_T *w, GS_T *lo)
{
    if (j->mode == TG_GRID_SAMPLE_NEAREST) {
        GS_T pos[3];
        for (int a = 0; a < j->ns; a++) pos[a] = (GS_T)nearbyint((double)src[a]);
        off[0] = GS_FN(gs_offset)(j, pos);
        w[0] = 1;
        return 1;
    }
    for (int a = 0; a < j->ns; a++) lo[a] = (GS_T)floor((double)src[a]);
    const int nk = 1 << j->ns;
    for (int k = 0; k < nk; k++) {
        GS_T pos[3], wk = 1;
        for (int a = j->ns - 1; a >= 0; a--) {
            const bool hi = (k >> (j->ns - 1 - a)) & 1;
            pos[a] = hi ? lo[a] + 1 : lo[a];
            wk = a == j->ns - 1 ? (hi ? src[a] - lo[a] : lo[a] + 1 - src[a])
                                : wk * (hi ? src[a] - lo[a] : lo[a] + 1 - src[a]);
        }
        off[k] = GS_FN(gs_offset)(j, pos);
        w[k] = wk;
    }
    return nk;
}

/* get_value_bounded's offset: tap (x, y) padded, then bounds-checked. */
static inline int64_t GS_FN(gs_tap)(const gs_job *j, GS_T y, GS_T x)
{
    GS_T d = 1, pos[2];
    pos[0] = GS_FN(gs_pad)(y, j->in[0], j->pad, j->align, &d);
    pos[1] = GS_FN(gs_pad)(x, j->in[1], j->pad, j->align, &d);
    pos[0] = (GS_T)trunc((double)pos[0]);
    pos[1] = (GS_T)trunc((double)pos[1]);
    return GS_FN(gs_offset)(j, pos);
}

/* Points [lo, hi) of the flat (N, P) range: out[n, c, p] for every c. */
static void GS_FN(gs_forward)(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int64_t P = j->npts, C = j->C, plane = j->in_plane;
    for (int64_t q = lo; q < hi; q++) {
        const int64_t n = q / P, p = q % P;
        const GS_T *x = (const GS_T *)j->x + n * C * plane;
        GS_T *y = (GS_T *)j->y + n * C * P + p;
        GS_T src[3], m[3];
        GS_FN(gs_point)(j, q, src, m);
        if (j->mode == TG_GRID_SAMPLE_BICUBIC) {
            const GS_T x0 = (GS_T)floor((double)src[1]), y0 = (GS_T)floor((double)src[0]);
            GS_T cx[4], cy[4];
            GS_FN(gs_cubic)(cx, src[1] - x0);
            GS_FN(gs_cubic)(cy, src[0] - y0);
            int64_t off[4][4];   /* [row i][column k] */
            for (int i = 0; i < 4; i++)
                for (int k = 0; k < 4; k++)
                    off[i][k] = GS_FN(gs_tap)(j, y0 - 1 + (GS_T)i, x0 - 1 + (GS_T)k);
            for (int64_t c = 0; c < C; c++, x += plane) {
                GS_T row[4];
                for (int i = 0; i < 4; i++) {
                    GS_T v[4];
                    for (int k = 0; k < 4; k++) v[k] = off[i][k] < 0 ? 0 : x[off[i][k]];
                    row[i] = v[0] * cx[0] + v[1] * cx[1] + v[2] * cx[2] + v[3] * cx[3];
                }
                y[c * P] = row[0] * cy[0] + row[1] * cy[1] + row[2] * cy[2] + row[3] * cy[3];
            }
            continue;
        }
        int64_t off[8];
        GS_T w[8], l[3];
        const int nk = GS_FN(gs_corners)(j, src, off, w, l);
        for (int64_t c = 0; c < C; c++, x += plane) {
            GS_T acc = 0;
            for (int k = 0; k < nk; k++)
                if (off[k] >= 0) acc += x[off[k]] * w[k];
            y[c * P] = acc;
        }
    }
}

/* Bicubic point src's taps off[column i][row k] (torch's loop order; -1
 * outside) and Keys's weights along x (cx) and y (cy). */
static void GS_FN(gs_cubic_taps)(const gs_job *j, const GS_T *src, int64_t off[4][4], GS_T *cx,
                                 GS_T *cy)
{
    const GS_T x0 = (GS_T)floor((double)src[1]), y0 = (GS_T)floor((double)src[0]);
    GS_FN(gs_cubic)(cx, src[1] - x0);
    GS_FN(gs_cubic)(cy, src[0] - y0);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++)
            off[i][k] = GS_FN(gs_tap)(j, y0 - 1 + (GS_T)k, x0 - 1 + (GS_T)i);
}

/* Elements [lo, hi) of (N, groups): d input of sample n's group of
 * channels (dx zeroed), dx[o] += g times the weight of each tap or corner
 * read, each plane's adds in the points' order, then the taps'. */
static void GS_FN(gs_dinput)(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int64_t P = j->npts, C = j->C, plane = j->in_plane, G = j->groups;
    for (int64_t e = lo; e < hi; e++) {
        const int64_t n = e / G, c0 = e % G * C / G, c1 = (e % G + 1) * C / G;
        GS_T *dx = (GS_T *)j->dx + n * C * plane;
        const GS_T *g = (const GS_T *)j->g + n * C * P;
        for (int64_t p = 0; p < P; p++) {
            GS_T src[3], m[3];
            GS_FN(gs_point)(j, n * P + p, src, m);
            if (j->mode == TG_GRID_SAMPLE_BICUBIC) {
                int64_t off[4][4];
                GS_T cx[4], cy[4];
                GS_FN(gs_cubic_taps)(j, src, off, cx, cy);
                for (int64_t c = c0; c < c1; c++)
                    for (int i = 0; i < 4; i++)
                        for (int k = 0; k < 4; k++)
                            if (off[i][k] >= 0)
                                dx[c * plane + off[i][k]] += g[c * P + p] * cx[i] * cy[k];
                continue;
            }
            int64_t off[8];
            GS_T w[8], l[3];
            const int nk = GS_FN(gs_corners)(j, src, off, w, l);
            for (int64_t c = c0; c < c1; c++) {
                const GS_T go = g[c * P + p];
                if (j->mode == TG_GRID_SAMPLE_NEAREST) {
                    if (off[0] >= 0) dx[c * plane + off[0]] += go;
                    continue;
                }
                for (int k = 0; k < nk; k++)
                    if (off[k] >= 0) dx[c * plane + off[k]] += w[k] * go;
            }
        }
    }
}

/* Bicubic point q's grid gradient, as torch's: the coefficient
 * derivatives times the values read times g, over the channels in order,
 * then columns, then rows. */
static void GS_FN(gs_dgrid_cubic)(const gs_job *j, int64_t q, const GS_T *src, const GS_T *m,
                                  GS_T *dgrid)
{
    const int64_t P = j->npts, C = j->C, plane = j->in_plane, n = q / P, p = q % P;
    const GS_T *x = (const GS_T *)j->x + n * C * plane;
    const GS_T *g = (const GS_T *)j->g + n * C * P + p;
    const GS_T x0 = (GS_T)floor((double)src[1]), y0 = (GS_T)floor((double)src[0]);
    int64_t off[4][4];
    GS_T cx[4], cy[4], gx[4], gy[4];
    GS_FN(gs_cubic_taps)(j, src, off, cx, cy);
    GS_FN(gs_cubic_grad)(gx, src[1] - x0);
    GS_FN(gs_cubic_grad)(gy, src[0] - y0);
    GS_T sx = 0, sy = 0;
    for (int64_t c = 0; c < C; c++, x += plane) {
        const GS_T go = g[c * P];
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 4; k++) {
                const int64_t o = off[i][k];
                if (o < 0) continue;
                sx -= x[o] * gx[i] * cy[k] * go;
                sy -= x[o] * gy[k] * cx[i] * go;
            }
    }
    dgrid[0] = m[1] * sx;
    dgrid[1] = m[0] * sy;
}

/* Points [lo, hi) of the flat (N, P) range: d grid of bilinear and bicubic
 * (nearest's is 0: the caller leaves its zeros), each point's sums over
 * the channels in order. */
static void GS_FN(gs_dgrid)(void *job, int64_t lo, int64_t hi)
{
    const gs_job *j = job;
    const int64_t P = j->npts, C = j->C, plane = j->in_plane;
    const int ns = j->ns;
    for (int64_t q = lo; q < hi; q++) {
        const int64_t n = q / P, p = q % P;
        GS_T src[3], m[3], *dgrid = (GS_T *)j->dgrid + q * ns;
        GS_FN(gs_point)(j, q, src, m);
        if (j->mode == TG_GRID_SAMPLE_BICUBIC) {
            GS_FN(gs_dgrid_cubic)(j, q, src, m, dgrid);
            continue;
        }
        int64_t off[8];
        GS_T w[8], l[3], s[3] = {0, 0, 0}, fac[8][3];
        const int nk = GS_FN(gs_corners)(j, src, off, w, l);
        const GS_T *x = (const GS_T *)j->x + n * C * plane;
        const GS_T *g = (const GS_T *)j->g + n * C * P + p;
        /* d w[k] / d src[a] = +-fac[k][a]: the other axes' factors (x's
         * first), + for the hi corner along a, - for lo */
        for (int k = 0; k < nk; k++)
            for (int a = 0; a < ns; a++) {
                GS_T f = 1;
                for (int b = ns - 1; b >= 0; b--) {
                    if (b == a) continue;
                    const bool hb = (k >> (ns - 1 - b)) & 1;
                    f = f * (hb ? src[b] - l[b] : l[b] + 1 - src[b]);
                }
                fac[k][a] = f;
            }
        for (int64_t c = 0; c < C; c++, x += plane) {
            const GS_T go = g[c * P];
            for (int k = 0; k < nk; k++) {
                if (off[k] < 0) continue;
                const GS_T v = x[off[k]];
                for (int a = 0; a < ns; a++) {
                    if ((k >> (ns - 1 - a)) & 1) s[a] += v * fac[k][a] * go;
                    else s[a] -= v * fac[k][a] * go;
                }
            }
        }
        for (int a = 0; a < ns; a++) dgrid[ns - 1 - a] = m[a] * s[a];
    }
}

#undef GS_FN
#undef GS_CAT
#undef GS_CAT_
