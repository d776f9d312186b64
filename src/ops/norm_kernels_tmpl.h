/* src/ops/norm_kernels_tmpl.h - the batch_norm kernels for one element type:
 * per-channel sums, statistics, the normalisation and the gradients.
 * Included by norm.c once per type with these macros defined:
 *   T     the element type (float or double)
 *   SUF   the name suffix (f32 or f64)
 *   SUM4(x, gr, mean, centred_sq, n, rstride, s, out)  bn_sum of four
 *         channels at once with bn_sum's bits, false when it cannot
 *         (tg__bn_sum4_f32's contract, norm_internal.h)
 * and bn_geom, BN_BLK and bn_rows() in scope.  Sums are in double with four
 * interleaved accumulators in a fixed order; every parallel loop writes
 * disjoint channels, so the results do not depend on the thread count. */

#define TG__CAT_(a, b) a##_##b
#define TG__CAT(a, b) TG__CAT_(a, b)
#define FN(name) TG__CAT(name, SUF)

/* sum over channel c of f(x) (or of g * (x - mean) when g != NULL), in double */
static double FN(bn_sum)(const T *x, const T *gr, double mean, bool centred_sq, bn_geom g,
                         int64_t c)
{
    double acc[4] = {0, 0, 0, 0};
    for (int64_t n = 0; n < g.n; n++) {
        const T *p = x + (n * g.c + c) * g.s;
        const T *q = gr ? gr + (n * g.c + c) * g.s : NULL;
        int64_t i = 0;
        for (; i + 4 <= g.s; i += 4)
            for (int l = 0; l < 4; l++) {
                const double v = (double)p[i + l] - mean;
                acc[l] += q ? (double)q[i + l] * v : centred_sq ? v * v : v;
            }
        for (; i < g.s; i++) {
            const double v = (double)p[i] - mean;
            acc[i & 3] += q ? (double)q[i] * v : centred_sq ? v * v : v;
        }
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* bn_sum of channels xc .. xc+3 (centres mean[0..3], or 0 when mean is NULL)
 * into out[0..3]: four at once where SUM4 can. */
static void FN(bn_sum4)(const T *x, const T *gr, const double *mean, bool centred_sq, bn_geom g,
                        int64_t xc, double *out)
{
    const double zero[4] = {0, 0, 0, 0};
    const double *mu = mean ? mean : zero;
    const int64_t off = xc * g.s;
    if (SUM4(x + off, gr ? gr + off : NULL, mu, centred_sq, g.n, g.c * g.s, g.s, out)) return;
    for (int k = 0; k < 4; k++) out[k] = FN(bn_sum)(x, gr, mu[k], centred_sq, g, xc + k);
}

/* Short rows (g.s < BN_BLK_ROW; BatchNorm1d has one value per row): the
 * sums of bn_sum for the nc <= BN_BLK channels from c0 at once (mu[c] the
 * centre of channel c0 + c, NULL for 0), walking x sample by sample: the
 * per-channel loop would hop over N rows C apart, one dependent add per
 * value.  acc[l][c] takes the same terms in the same order as bn_sum's
 * acc[l] (by n, then the row positions i = l mod 4): the same bits. */
static void FN(bn_sum_blk)(const T *x, const T *gr, const double *mu, bool centred_sq, bn_geom g,
                           int64_t c0, int64_t nc, double *sum)
{
    double acc[4][BN_BLK], m[BN_BLK];
    for (int64_t c = 0; c < nc; c++) {
        acc[0][c] = acc[1][c] = acc[2][c] = acc[3][c] = 0;
        m[c] = mu ? mu[c] : 0.0;
    }
    /* one value per row (i = 0, acc[0] alone): a loop per kind of term,
     * which the compiler vectorises */
    for (int64_t n = 0; n < g.n; n++) {
        const T *p = x + (n * g.c + c0) * g.s;
        const T *q = gr ? gr + (n * g.c + c0) * g.s : NULL;
        if (g.s == 1) {
            double *a0 = acc[0];
            if (q)
                for (int64_t c = 0; c < nc; c++) a0[c] += (double)q[c] * ((double)p[c] - m[c]);
            else if (centred_sq)
                for (int64_t c = 0; c < nc; c++) {
                    const double v = (double)p[c] - m[c];
                    a0[c] += v * v;
                }
            else
                for (int64_t c = 0; c < nc; c++) a0[c] += (double)p[c] - m[c];
            continue;
        }
        for (int64_t c = 0; c < nc; c++)
            for (int64_t i = 0; i < g.s; i++) {
                const double v = (double)p[c * g.s + i] - m[c];
                acc[i & 3][c] += q ? (double)q[c * g.s + i] * v : centred_sq ? v * v : v;
            }
    }
    for (int64_t c = 0; c < nc; c++) sum[c] = (acc[0][c] + acc[1][c]) + (acc[2][c] + acc[3][c]);
}

/* Channel c's statistics, mean[c] and var[c] (biased), from its values in
 * x at channel index xc (xc = c for x itself, 0 for one channel's copy). */
static void FN(bn_stats_chan)(const T *x, bn_geom g, int64_t xc, int64_t c, double *mean,
                              double *var)
{
    const double m = (double)(g.n * g.s);
    mean[c] = FN(bn_sum)(x, NULL, 0.0, false, g, xc) / m;
    var[c] = FN(bn_sum)(x, NULL, mean[c], true, g, xc) / m;
}

/* What the channel loops below share: inputs, statistics, outputs. */
typedef struct {
    const T *x, *gr, *w, *b;
    bn_geom g;
    bool training;
    double *mean, *var;
    const double *invstd;
    T *y;
    double *dw, *db;
} FN(bn_job);

/* bn_stats_chan of channels xc .. xc+3 at once (bn_sum4). */
static void FN(bn_stats_chan4)(const T *x, bn_geom g, int64_t xc, int64_t c, double *mean,
                               double *var)
{
    const double m = (double)(g.n * g.s);
    double sum[4];
    FN(bn_sum4)(x, NULL, NULL, false, g, xc, sum);
    for (int k = 0; k < 4; k++) mean[c + k] = sum[k] / m;
    FN(bn_sum4)(x, NULL, mean + c, true, g, xc, sum);
    for (int k = 0; k < 4; k++) var[c + k] = sum[k] / m;
}

/* bn_stats_chan of the nc channels from xc, their statistics at c on: four
 * at a time (bn_stats_chan4), then the rest one by one. */
static void FN(bn_stats_run)(const T *x, bn_geom g, int64_t xc, int64_t c, int64_t nc,
                             double *mean, double *var)
{
    int64_t k = 0;
    for (; k + 4 <= nc; k += 4) FN(bn_stats_chan4)(x, g, xc + k, c + k, mean, var);
    for (; k < nc; k++) FN(bn_stats_chan)(x, g, xc + k, c + k, mean, var);
}

static void FN(bn_stats_chans)(void *job, int64_t c0, int64_t c1)
{
    const FN(bn_job) *q = job;
    FN(bn_stats_run)(q->x, q->g, c0, c0, c1 - c0, q->mean, q->var);
}

/* Channel blocks [k0, k1), BN_BLK channels each. */
static void FN(bn_stats_blks)(void *job, int64_t k0, int64_t k1)
{
    const FN(bn_job) *q = job;
    const bn_geom g = q->g;
    const double m = (double)(g.n * g.s);
    for (int64_t c0 = k0 * BN_BLK; c0 < g.c && c0 < k1 * BN_BLK; c0 += BN_BLK) {
        const int64_t nc = g.c - c0 < BN_BLK ? g.c - c0 : BN_BLK;
        double sum[BN_BLK];
        FN(bn_sum_blk)(q->x, NULL, NULL, false, g, c0, nc, sum);
        for (int64_t c = 0; c < nc; c++) q->mean[c0 + c] = sum[c] / m;
        FN(bn_sum_blk)(q->x, NULL, q->mean + c0, true, g, c0, nc, sum);
        for (int64_t c = 0; c < nc; c++) q->var[c0 + c] = sum[c] / m;
    }
}

/* Training statistics of every channel, both double. */
static void FN(bn_stats)(const T *x, bn_geom g, double *mean, double *var)
{
    FN(bn_job) q = {.x = x, .g = g, .mean = mean, .var = var};
    const bool par = g.n * g.c * g.s > 32768;
    if (bn_rows(g))
        tg__parallel_range(g.c, par, FN(bn_stats_chans), &q);
    else
        tg__parallel_range((g.c + BN_BLK - 1) / BN_BLK, par, FN(bn_stats_blks), &q);
}

/* Channel c's output factors, in T: y = (x - mu) * k + sh. */
static void FN(bn_affine)(int64_t c, const double *mean, const double *invstd, const T *w,
                          const T *b, T *mu, T *k, T *sh)
{
    *mu = (T)mean[c];
    *k = (T)(invstd[c] * (w ? (double)w[c] : 1.0));
    *sh = b ? b[c] : (T)0;
}

/* Channel c's gradients from its sums sg = sum g and sgx = sum g (x - mean)
 * over m values: db[c] and dw[c] (when not NULL), and the factors of
 * dx = kt * (g - a - (x - mu) * bc), in T. */
static void FN(bn_grad_factors)(int64_t c, double sg, double sgx, double m, const double *mean,
                                const double *invstd, const T *w, bool training, double *dw,
                                double *db, T *kt, T *mu, T *a, T *bc)
{
    if (db) db[c] = sg;
    if (dw) dw[c] = sgx * invstd[c];
    *kt = (T)(invstd[c] * (w ? (double)w[c] : 1.0));
    *mu = (T)mean[c];
    *a = training ? (T)(sg / m) : (T)0;
    *bc = training ? (T)(invstd[c] * invstd[c] * sgx / m) : (T)0;
}

/* One row of channel c: o = (p - mean) * (invstd * w) + b, in T. */
static void FN(bn_row)(const T *p, int64_t s, int64_t c, const double *mean, const double *invstd,
                       const T *w, const T *b, T *o)
{
    T mu, k, sh;
    FN(bn_affine)(c, mean, invstd, w, b, &mu, &k, &sh);
    for (int64_t i = 0; i < s; i++) o[i] = (p[i] - mu) * k + sh;
}

static void FN(bn_apply_rows)(void *job, int64_t r0, int64_t r1)
{
    const FN(bn_job) *q = job;
    const int64_t s = q->g.s;
    for (int64_t r = r0; r < r1; r++)
        FN(bn_row)(q->x + r * s, s, r % q->g.c, q->mean, q->invstd, q->w, q->b, q->y + r * s);
}

/* Short rows: bn_row's per-channel factors once per block of channels,
 * then the rows sample by sample; channel blocks [k0, k1). */
static void FN(bn_apply_blks)(void *job, int64_t k0, int64_t k1)
{
    const FN(bn_job) *q = job;
    const bn_geom g = q->g;
    for (int64_t c0 = k0 * BN_BLK; c0 < g.c && c0 < k1 * BN_BLK; c0 += BN_BLK) {
        const int64_t nc = g.c - c0 < BN_BLK ? g.c - c0 : BN_BLK;
        T mu[BN_BLK], k[BN_BLK], sh[BN_BLK];
        for (int64_t c = 0; c < nc; c++)
            FN(bn_affine)(c0 + c, q->mean, q->invstd, q->w, q->b, &mu[c], &k[c], &sh[c]);
        for (int64_t n = 0; n < g.n; n++) {
            const int64_t off = (n * g.c + c0) * g.s;
            const T *p = q->x + off;
            T *o = q->y + off;
            if (g.s == 1)
                for (int64_t c = 0; c < nc; c++) o[c] = (p[c] - mu[c]) * k[c] + sh[c];
            else
                for (int64_t c = 0; c < nc; c++)
                    for (int64_t i = 0; i < g.s; i++)
                        o[c * g.s + i] = (p[c * g.s + i] - mu[c]) * k[c] + sh[c];
        }
    }
}

static void FN(bn_apply)(const T *x, bn_geom g, const double *mean, const double *invstd,
                         const T *w, const T *b, T *y)
{
    FN(bn_job)
    q = {.x = x, .w = w, .b = b, .g = g, .mean = (double *)mean, .invstd = invstd, .y = y};
    const bool par = g.n * g.c * g.s > 32768;
    if (bn_rows(g))
        tg__parallel_range(g.n * g.c, par, FN(bn_apply_rows), &q);
    else
        tg__parallel_range((g.c + BN_BLK - 1) / BN_BLK, par, FN(bn_apply_blks), &q);
}

/* Channel c's gradients from its values in x and gr at channel index xc
 * (as bn_stats_chan) and its sums sg = sum g, sgx = sum g (x - mean): dx's
 * rows there (when dx != NULL; dx may be gr), dw[c] and db[c] (when not
 * NULL). */
static void FN(bn_grads_chan_sums)(const T *x, const T *gr, bn_geom g, int64_t xc, int64_t c,
                                   double sg, double sgx, const double *mean,
                                   const double *invstd, const T *w, bool training, T *dx,
                                   double *dw, double *db)
{
    const double m = (double)(g.n * g.s);
    T kt, mu, a, bc;
    FN(bn_grad_factors)(c, sg, sgx, m, mean, invstd, w, training, dw, db, &kt, &mu, &a, &bc);
    if (!dx) return;
    for (int64_t n = 0; n < g.n; n++) {
        const int64_t off = (n * g.c + xc) * g.s;
        const T *p = x + off, *q = gr + off;
        T *o = dx + off;
        for (int64_t i = 0; i < g.s; i++) o[i] = kt * (q[i] - a - (p[i] - mu) * bc);
    }
}

/* The sums of the nc channels from xc: sg[k] = sum g and
 * sgx[k] = sum g (x - mean[k]) (mean: theirs), four at a time (bn_sum4),
 * then the rest one by one. */
static void FN(bn_grad_sums)(const T *x, const T *gr, bn_geom g, int64_t xc, int64_t nc,
                             const double *mean, double *sg, double *sgx)
{
    int64_t k = 0;
    for (; k + 4 <= nc; k += 4) {
        FN(bn_sum4)(gr, NULL, NULL, false, g, xc + k, sg + k);
        FN(bn_sum4)(x, gr, mean + k, false, g, xc + k, sgx + k);
    }
    for (; k < nc; k++) {
        /* sum g: the centred sum of g about 0 (x = g, no weights) */
        sg[k] = FN(bn_sum)(gr, NULL, 0.0, false, g, xc + k);
        sgx[k] = FN(bn_sum)(x, gr, mean[k], false, g, xc + k);
    }
}

static void FN(bn_grads_chans)(void *job, int64_t c0, int64_t c1)
{
    const FN(bn_job) *q = job;
    for (int64_t c = c0; c < c1; c += 4) {
        const int64_t nc = c1 - c < 4 ? c1 - c : 4;
        double sg[4], sgx[4];
        FN(bn_grad_sums)(q->x, q->gr, q->g, c, nc, q->mean + c, sg, sgx);
        for (int64_t k = 0; k < nc; k++)
            FN(bn_grads_chan_sums)
            (q->x, q->gr, q->g, c + k, c + k, sg[k], sgx[k], q->mean, q->invstd, q->w, q->training,
             q->y, q->dw, q->db);
    }
}

/* Short rows: bn_grads_chan_sums for a block of channels at once; channel
 * blocks [k0, k1).  q->y is dx (may be NULL, or gr: in place). */
static void FN(bn_grads_blks)(void *job, int64_t k0, int64_t k1)
{
    const FN(bn_job) *q = job;
    const bn_geom g = q->g;
    const double m = (double)(g.n * g.s);
    for (int64_t c0 = k0 * BN_BLK; c0 < g.c && c0 < k1 * BN_BLK; c0 += BN_BLK) {
        const int64_t nc = g.c - c0 < BN_BLK ? g.c - c0 : BN_BLK;
        double sg[BN_BLK], sgx[BN_BLK];
        FN(bn_sum_blk)(q->gr, NULL, NULL, false, g, c0, nc, sg);
        FN(bn_sum_blk)(q->x, q->gr, q->mean + c0, false, g, c0, nc, sgx);
        T kt[BN_BLK], mu[BN_BLK], a[BN_BLK], bc[BN_BLK];
        for (int64_t c = 0; c < nc; c++)
            FN(bn_grad_factors)
            (c0 + c, sg[c], sgx[c], m, q->mean, q->invstd, q->w, q->training, q->dw, q->db, &kt[c],
             &mu[c], &a[c], &bc[c]);
        if (!q->y) continue;
        for (int64_t n = 0; n < g.n; n++) {
            const int64_t off = (n * g.c + c0) * g.s;
            const T *p = q->x + off, *r = q->gr + off;
            T *o = q->y + off;
            if (g.s == 1)
                for (int64_t c = 0; c < nc; c++)
                    o[c] = kt[c] * (r[c] - a[c] - (p[c] - mu[c]) * bc[c]);
            else
                for (int64_t c = 0; c < nc; c++)
                    for (int64_t i = 0; i < g.s; i++) {
                        const int64_t e = c * g.s + i;
                        o[e] = kt[c] * (r[e] - a[c] - (p[e] - mu[c]) * bc[c]);
                    }
        }
    }
}

/* The gradients (any of dx, dw, db may be NULL); dw, db in double. */
static void FN(bn_grads)(const T *x, const T *gr, bn_geom g, const double *mean,
                         const double *invstd, const T *w, bool training, T *dx, double *dw,
                         double *db)
{
    FN(bn_job)
    q = {.x = x,
         .gr = gr,
         .w = w,
         .g = g,
         .training = training,
         .mean = (double *)mean,
         .invstd = invstd,
         .y = dx,
         .dw = dw,
         .db = db};
    const bool par = g.n * g.c * g.s > 32768;
    if (bn_rows(g))
        tg__parallel_range(g.c, par, FN(bn_grads_chans), &q);
    else
        tg__parallel_range((g.c + BN_BLK - 1) / BN_BLK, par, FN(bn_grads_blks), &q);
}

#undef FN
#undef TG__CAT
#undef TG__CAT_
