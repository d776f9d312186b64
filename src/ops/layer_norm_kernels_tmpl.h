/* src/ops/layer_norm_kernels_tmpl.h - the layer_norm / group_norm kernels for
 * one element type: the normalisation, and the gradients (the row
 * statistics come from tg__bn_stats).  Included by layer_norm.c once per
 * type with these macros defined:
 *   T     the element type (float or double)
 *   SUF   the name suffix (f32 or f64)
 * and ln_geom, LN_RUN_MIN, LN_CHUNK, LN_CBLK and ln_par() in scope.  Sums are in double in a
 * fixed order; every parallel loop writes disjoint rows, channels or runs,
 * so the results do not depend on the thread count. */

#define TG__CAT_(a, b) a##_##b
#define TG__CAT(a, b) TG__CAT_(a, b)
#define FN(name) TG__CAT(name, SUF)

/* What the loops below share.  x, gr (the incoming gradient) and the
 * output out (y or dx) are (N, C, S) contiguous; w and b are (C,) or NULL;
 * mean and invstd hold one value per row (N G); s1 and s2 (N C each, for
 * runs of LN_RUN_MIN values or more) the sums of each run of S values, or
 * s1 alone the tiles' partial sums of dw and db (shorter runs). */
typedef struct {
    const T *x, *gr, *w, *b;
    ln_geom g;
    const double *mean, *invstd;
    T *out;
    double *dw, *db, *s1, *s2;
} FN(ln_job);

/* Sums over n values of gw = q w (w per element, or NULL for 1) and of
 * gw (p - m), in double with four interleaved accumulators, kept as the
 * lanes of one vector of four doubles (the same adds as four scalars). */
typedef double FN(ln_v4d) __attribute__((vector_size(32)));
typedef T FN(ln_v4t) __attribute__((vector_size(4 * sizeof(T))));

/* Four values of T at v widened into *d (vectors go by pointer: no ABI that
 * depends on AVX). */
static inline __attribute__((always_inline)) void FN(ln_load4)(const T *v, FN(ln_v4d) *d)
{
    FN(ln_v4t) t;
    memcpy(&t, v, sizeof t);
    *d = __builtin_convertvector(t, FN(ln_v4d));
}

static inline __attribute__((always_inline)) void FN(ln_span)(const T *p, const T *q,
                                                              const T *w, int64_t n, double m,
                                                              double *sg, double *sgx)
{
    FN(ln_v4d) va = {0, 0, 0, 0}, vb = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        FN(ln_v4d) gw, wv, pv;
        FN(ln_load4)(q + i, &gw);
        if (w) {
            FN(ln_load4)(w + i, &wv);
            gw = gw * wv;
        }
        FN(ln_load4)(p + i, &pv);
        va += gw;
        vb += gw * (pv - m);
    }
    double a[4] = {va[0], va[1], va[2], va[3]}, b[4] = {vb[0], vb[1], vb[2], vb[3]};
    for (; i < n; i++) {
        const double gw = (double)q[i] * (w ? (double)w[i] : 1.0);
        a[i & 3] += gw;
        b[i & 3] += gw * ((double)p[i] - m);
    }
    *sg = (a[0] + a[1]) + (a[2] + a[3]);
    *sgx = (b[0] + b[1]) + (b[2] + b[3]);
}

/* Rows [r0, r1): y = (x - mean_r) (invstd_r w_c) + b_c, in T. */
static void FN(ln_apply_rows)(void *job, int64_t r0, int64_t r1)
{
    const FN(ln_job) *q = job;
    const ln_geom g = q->g;
    const int64_t k = g.c / g.g, l = k * g.s;
    for (int64_t r = r0; r < r1; r++) {
        const T *p = q->x + r * l, *w = q->w ? q->w + (r % g.g) * k : NULL;
        const T *b = q->b ? q->b + (r % g.g) * k : NULL;
        T *o = q->out + r * l;
        const T mu = (T)q->mean[r], inv = (T)q->invstd[r];
        if (g.s == 1 && w && b) {   /* layer norm: a weight per element */
            for (int64_t i = 0; i < l; i++) o[i] = (p[i] - mu) * (inv * w[i]) + b[i];
            continue;
        }
        for (int64_t c = 0; c < k; c++) {
            const T kk = w ? inv * w[c] : inv, sh = b ? b[c] : (T)0;
            const T *pc = p + c * g.s;
            T *oc = o + c * g.s;
            for (int64_t s = 0; s < g.s; s++) oc[s] = (pc[s] - mu) * kk + sh;
        }
    }
}

static void FN(ln_apply)(const T *x, ln_geom g, const double *mean, const double *invstd,
                         const T *w, const T *b, T *y)
{
    FN(ln_job) q = {.x = x, .w = w, .b = b, .g = g, .mean = mean, .invstd = invstd, .out = y};
    tg__parallel_range(g.n * g.g, ln_par(g), FN(ln_apply_rows), &q);
}

/* The sums of runs [i0, i1) (run i = n C + c, the S values of channel c of
 * sample n): s1 = sum g, s2 = sum g (x - mean_r), r = n G + c / K. */
static void FN(ln_run_sums)(void *job, int64_t i0, int64_t i1)
{
    const FN(ln_job) *q = job;
    const ln_geom g = q->g;
    const int64_t k = g.c / g.g;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = i / g.c * g.g + i % g.c / k;
        FN(ln_span)(q->x + i * g.s, q->gr + i * g.s, NULL, g.s, q->mean[r], &q->s1[i], &q->s2[i]);
    }
}

/* dw_c = sum over n of invstd_r s2 and db_c = sum over n of s1 (r = n G +
 * c / K) from the run sums, for every channel. */
static void FN(ln_affine_from_runs)(const FN(ln_job) *q)
{
    const ln_geom g = q->g;
    const int64_t k = g.c / g.g;
    for (int64_t c = 0; c < g.c; c++) q->dw[c] = q->db[c] = 0;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t c = 0; c < g.c; c++) {
            q->db[c] += q->s1[n * g.c + c];
            q->dw[c] += q->s2[n * g.c + c] * q->invstd[n * g.g + c / k];
        }
}

/* Short runs (S < LN_RUN_MIN; layer norm has S = 1): tasks [t0, t1) of the
 * partial sums of dw and db over LN_CHUNK samples for LN_CBLK channels
 * (task t: chunk t / ncb, channel block t % ncb), each sample's values of
 * the block in a row, into part (chunk j: dw at 2 j C, db at (2 j + 1) C).
 * The tiles depend on the shape alone, not on the thread count. */
static inline __attribute__((always_inline)) void FN(ln_affine_tiles_body)(void *job,
                                                                          int64_t t0,
                                                                          int64_t t1)
{
    const FN(ln_job) *q = job;
    const ln_geom g = q->g;
    const int64_t k = g.c / g.g, ncb = (g.c + LN_CBLK - 1) / LN_CBLK;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t j = t / ncb, c0 = t % ncb * LN_CBLK;
        const int64_t c1 = c0 + LN_CBLK < g.c ? c0 + LN_CBLK : g.c;
        const int64_t n1 = (j + 1) * LN_CHUNK < g.n ? (j + 1) * LN_CHUNK : g.n;
        double *dw = q->s1 + 2 * j * g.c, *db = dw + g.c;
        for (int64_t c = c0; c < c1; c++) dw[c] = db[c] = 0;
        for (int64_t n = j * LN_CHUNK; n < n1; n++) {
            const T *p = q->x + n * g.c * g.s, *d = q->gr + n * g.c * g.s;
            if (g.s == 1 && g.g == 1) {   /* layer norm: one mean; ln_span of one value */
                const double m = q->mean[n], inv = q->invstd[n];
                for (int64_t c = c0; c < c1; c++) {
                    const double gv = (double)d[c];
                    db[c] += gv;
                    dw[c] += gv * ((double)p[c] - m) * inv;
                }
                continue;
            }
            for (int64_t c = c0; c < c1; c++) {
                const int64_t r = n * g.g + c / k;
                double s1, s2;
                FN(ln_span)(p + c * g.s, d + c * g.s, NULL, g.s, q->mean[r], &s1, &s2);
                db[c] += s1;
                dw[c] += s2 * q->invstd[r];
            }
        }
    }
}

/* Rows [r0, r1) of dx = invstd (gw - sg / L - (x - mean) invstd^2 sgx / L)
 * with sg = sum gw and sgx = sum gw (x - mean) over the row's L values:
 * from the run sums when there are, else in one span.  out may be gr
 * itself: a row's sums are taken before its dx is written. */
static inline __attribute__((always_inline)) void FN(ln_dx_rows_body)(void *job, int64_t r0,
                                                                     int64_t r1)
{
    const FN(ln_job) *q = job;
    const ln_geom g = q->g;
    const int64_t k = g.c / g.g, l = k * g.s;
    for (int64_t r = r0; r < r1; r++) {
        const T *p = q->x + r * l, *d = q->gr + r * l;
        T *o = q->out + r * l;
        const double m = q->mean[r], inv = q->invstd[r];
        const int64_t c0 = (r % g.g) * k, i0 = r / g.g * g.c + c0;   /* i0: the first run */
        const T *w = q->w ? q->w + c0 : NULL;
        double sg = 0, sgx = 0;
        if (q->s1) {
            for (int64_t c = 0; c < k; c++) {
                const double wc = w ? (double)w[c] : 1.0;
                sg += wc * q->s1[i0 + c];
                sgx += wc * q->s2[i0 + c];
            }
        } else if (g.s == 1 || !w) {   /* w per element, or none */
            FN(ln_span)(p, d, g.s == 1 ? w : NULL, l, m, &sg, &sgx);
        } else {
            for (int64_t c = 0; c < k; c++) {
                double s1, s2;
                FN(ln_span)(p + c * g.s, d + c * g.s, NULL, g.s, m, &s1, &s2);
                sg += (double)w[c] * s1;
                sgx += (double)w[c] * s2;
            }
        }
        const T a = (T)(inv * sg / (double)l), bc = (T)(inv * inv * inv * sgx / (double)l);
        const T mu = (T)m, it = (T)inv;
        if (g.s == 1 && w) {   /* layer norm: a weight per element */
            for (int64_t i = 0; i < l; i++) o[i] = it * w[i] * d[i] - a - (p[i] - mu) * bc;
            continue;
        }
        for (int64_t c = 0; c < k; c++) {
            const T kw = w ? it * w[c] : it;
            const T *pc = p + c * g.s, *dc = d + c * g.s;
            T *oc = o + c * g.s;
            for (int64_t s = 0; s < g.s; s++) oc[s] = kw * dc[s] - a - (pc[s] - mu) * bc;
        }
    }
}

/* The bodies above compiled for SSE2 (any x86-64), AVX2 and AVX-512: the
 * same operations in each, so the same bits (no contraction into FMAs in
 * ISO C); the width is the bulk conversions' (tg__cast_kernel, forced by
 * TG_CAST_KERNEL). */
#define LN_CLONES(name)                                                                        \
    static void FN(name)(void *job, int64_t a, int64_t b) { FN(name##_body)(job, a, b); }    \
    LN_AVX2 static void FN(name##_avx2)(void *job, int64_t a, int64_t b)                       \
    {                                                                                          \
        FN(name##_body)(job, a, b);                                                            \
    }                                                                                          \
    LN_AVX512 static void FN(name##_avx512)(void *job, int64_t a, int64_t b)                   \
    {                                                                                          \
        FN(name##_body)(job, a, b);                                                            \
    }
LN_CLONES(ln_affine_tiles)
LN_CLONES(ln_dx_rows)
#undef LN_CLONES

/* fn, fn_avx2 or fn_avx512 as the width in use. */
static void (*FN(ln_pick)(void (*fn)(void *, int64_t, int64_t),
                          void (*fn_avx2)(void *, int64_t, int64_t),
                          void (*fn_avx512)(void *, int64_t, int64_t)))(void *, int64_t, int64_t)
{
    const tg__cast k = tg__cast_kernel();
    return k == TG__CAST_AVX512 ? fn_avx512 : k == TG__CAST_AVX2 ? fn_avx2 : fn;
}

/* The gradients: dx (when not NULL; may be gr itself) and, when dw != NULL,
 * dw and db (C doubles each).  scratch: ln_scratch(g) doubles, for the run
 * sums (S >= LN_RUN_MIN) or the tiles' partial sums.  dw and db are taken
 * before dx, as they read gr. */
static void FN(ln_grads)(const T *x, const T *gr, ln_geom g, const double *mean,
                         const double *invstd, const T *w, T *dx, double *dw, double *db,
                         double *scratch)
{
    const bool runs = g.s >= LN_RUN_MIN, par = ln_par(g);
    FN(ln_job) q = {.x = x, .gr = gr, .w = w, .g = g, .mean = mean, .invstd = invstd,
                    .out = dx, .dw = dw, .db = db, .s1 = runs ? scratch : NULL,
                    .s2 = runs ? scratch + g.n * g.c : NULL};
    if (runs) {
        tg__parallel_range(g.n * g.c, par, FN(ln_run_sums), &q);
        if (dw) FN(ln_affine_from_runs)(&q);
    } else if (dw) {
        const int64_t nch = (g.n + LN_CHUNK - 1) / LN_CHUNK, ncb = (g.c + LN_CBLK - 1) / LN_CBLK;
        FN(ln_job) tiles = q;
        tiles.s1 = scratch;
        tg__parallel_range(nch * ncb, par,
                           FN(ln_pick)(FN(ln_affine_tiles), FN(ln_affine_tiles_avx2),
                                       FN(ln_affine_tiles_avx512)),
                           &tiles);
        for (int64_t c = 0; c < g.c; c++) dw[c] = db[c] = 0;
        for (int64_t j = 0; j < nch; j++)   /* the chunks in order */
            for (int64_t c = 0; c < g.c; c++) {
                dw[c] += scratch[2 * j * g.c + c];
                db[c] += scratch[(2 * j + 1) * g.c + c];
            }
    }
    if (dx)
        tg__parallel_range(g.n * g.g, par,
                           FN(ln_pick)(FN(ln_dx_rows), FN(ln_dx_rows_avx2),
                                       FN(ln_dx_rows_avx512)),
                           &q);
}

#undef FN
#undef TG__CAT
#undef TG__CAT_
